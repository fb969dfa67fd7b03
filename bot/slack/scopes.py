"""The bot token scopes slack-ask needs: the ones ``manifest.yml`` asks for (a test keeps them equal).

``slack-ask doctor`` compares them with the scopes Slack says a token has (the ``x-oauth-scopes``
header of every Web API answer); the fake Slack grants exactly these unless told otherwise.
"""

from __future__ import annotations

__all__ = ["BOT_SCOPES", "THREAD_ANSWER_SCOPES"]

BOT_SCOPES: tuple[str, ...] = (
    "chat:write",
    "chat:write.public",
    "im:write",
    "users:read",
    "users:read.email",
    "usergroups:read",
    "channels:history",
    "groups:history",
    "im:history",
    "mpim:history",
    "channels:read",
    "groups:read",
)

THREAD_ANSWER_SCOPES: tuple[str, ...] = ("channels:history", "groups:history", "im:history", "mpim:history")
"""Without these, Slack sends no message events from that kind of conversation, so the answers people
type in an ask's thread or DM (docs/thread-answers.md) are never heard there."""
