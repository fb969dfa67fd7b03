"""The bot's exceptions, one small hierarchy.

BotError
 ├── ConfigError          a setting or the policy file is wrong (names the setting/file/field)
 │    └── SlackAuthError  Slack refused a token at start (names the setting and Slack's error)
 ├── Deferred             a call would wait long for its rate limit: do other work, come back later
 ├── SlackError           a Slack Web API call failed for good
 │    ├── SlackPermanentError   Slack answered an error that retrying cannot fix (channel_not_found, ...)
 │    ├── SlackUnreachableError Slack did not answer within the delivery window
 │    └── SlackBusyError        the call could not be made before the lease covering it ends
 └── StoreError           Redis answered something the store did not expect
      └── NotReplicatedError  fewer replicas than SLACK_ASK_REDIS_MIN_REPLICAS confirmed a write

and ``failure``, how any of them (or Redis's, or a timeout) is named in a log line.
"""

from __future__ import annotations

from typing import Any

from redis.exceptions import RedisError

__all__ = [
    "BotError",
    "ConfigError",
    "Deferred",
    "NotReplicatedError",
    "SlackAuthError",
    "SlackBusyError",
    "SlackError",
    "SlackPermanentError",
    "SlackUnreachableError",
    "StoreError",
    "failure",
]


class BotError(Exception):
    """Base of every error the bot raises on purpose."""


class ConfigError(BotError):
    """A setting or the policy file is missing or malformed; the message says which and what to do."""


class SlackAuthError(ConfigError):
    """Slack refused a token when ``serve`` checked it at start: the process ends (exit code 2)."""

    def __init__(self, setting: str, error: str) -> None:
        super().__init__(f"setting {setting}: Slack refused the token ({error})")
        self.setting = setting
        self.error = error


class Deferred(BotError):
    """A call would wait longer than its caller may hold its place (a busy channel's post limit):
    nothing was reserved or sent; try again in ``retry_in_s``. ``key`` names the bucket."""

    def __init__(self, retry_in_s: float, *, key: str) -> None:
        super().__init__(f"rate limit of {key}: try again in {retry_in_s:.2f} s")
        self.retry_in_s = retry_in_s
        self.key = key


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


class SlackBusyError(SlackError):
    """Slack's rate limit (a ``Retry-After``, or the bot's own pacing) leaves no call before the lease
    covering this work ends. Nothing was sent: the work is left to be taken again once its lease ends,
    and never ended as ``unavailable`` for it (429s are waited out, never counted)."""

    code = "slack_busy"


class StoreError(BotError):
    """Redis gave an answer the store cannot interpret (a bug or a foreign writer)."""


class NotReplicatedError(StoreError, RedisError):
    """Fewer replicas than ``SLACK_ASK_REDIS_MIN_REPLICAS`` confirmed the bot's last writes in time.

    A failover now could lose them (Redis replicates asynchronously), so the bot does not act on them
    (post to Slack, tell a person the answer is saved): the work is retried like any Redis failure.
    A ``RedisError`` too, so every loop and handler treats it as Redis trouble, never as a bug."""

    def __init__(self, confirmed: int, wanted: int, wait_ms: int, replies: list[Any] | None = None) -> None:
        self.confirmed = confirmed
        self.wanted = wanted
        self.replies = replies
        """What the writes answered: they ran on the master (only the replicas' confirmation is missing)."""
        super().__init__(
            f"{confirmed} of {wanted} Redis replicas confirmed the write within {wait_ms} ms "
            f"(SLACK_ASK_REDIS_MIN_REPLICAS={wanted}); a failover now could lose it, so it is retried. "
            "Check the replicas' link to the master (INFO replication), or lower the setting"
        )


def failure(exc: BaseException) -> str:
    """``Type: message`` of a failure, on one line (a timeout's message is empty: then ``Type``)."""
    text = " ".join(str(exc).split())[:300]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
