"""The bot token scopes slack-ask needs: the ones ``manifest.yml`` asks for (a test keeps them equal).

``slack-ask doctor`` compares them with the scopes Slack says a token has (the ``x-oauth-scopes``
header of every Web API answer); the fake Slack grants exactly these unless told otherwise.
"""

from __future__ import annotations

__all__ = ["BOT_SCOPES"]

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
