"""The bot's exceptions, one small hierarchy.

BotError
 ├── ConfigError          a setting or the policy file is wrong (names the setting/file/field)
 ├── SlackError           a Slack Web API call failed for good
 │    ├── SlackPermanentError   Slack answered an error that retrying cannot fix (channel_not_found, ...)
 │    └── SlackUnreachableError Slack did not answer within the delivery window
 └── StoreError           Redis answered something the store did not expect
"""

from __future__ import annotations

__all__ = [
    "BotError",
    "ConfigError",
    "SlackError",
    "SlackPermanentError",
    "SlackUnreachableError",
    "StoreError",
]


class BotError(Exception):
    """Base of every error the bot raises on purpose."""


class ConfigError(BotError):
    """A setting or the policy file is missing or malformed; the message says which and what to do."""


class SlackError(BotError):
    """A Slack call failed for good. ``code`` is the protocol error code put on the result."""

    code: str = "slack_error"

    def __init__(self, message: str, *, method: str, where: str | None = None) -> None:
        super().__init__(message)
        self.method = method
        self.where = where


class SlackPermanentError(SlackError):
    """Slack answered ``ok: false`` with an error retrying cannot fix; ``code`` is Slack's error name."""

    def __init__(self, error: str, *, method: str, where: str | None = None) -> None:
        place = f" {where}" if where else ""
        doing = _DOING.get(method, f"calling {method}")
        super().__init__(f"Slack answered {error} when {doing}{place}", method=method, where=where)
        self.code = error


# What each Web API call was for, in the words a result's error message uses.
_DOING = {
    "chat.postMessage": "posting",
    "chat.update": "updating the message",
    "chat.postEphemeral": "telling",
    "conversations.open": "opening a DM",
    "users.lookupByEmail": "looking up the user",
    "usergroups.users.list": "reading the user group",
    "views.open": "opening the form",
}


class SlackUnreachableError(SlackError):
    """Slack kept failing (network errors, 5xx) for the whole delivery window."""

    code = "slack_unreachable"


class StoreError(BotError):
    """Redis gave an answer the store cannot interpret (a bug or a foreign writer)."""
