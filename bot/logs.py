"""Log lines for people (``text``) or for machines (``json``, one object per line), never with a secret.

Why the standard library's ``logging`` and not structlog: every library the bot runs on (Bolt,
slack_sdk, aiohttp, redis-py) logs through ``logging``, so one formatter on the root handler puts
their lines in the same shape as ours; structlog would still need that bridge and adds a dependency
for what a 40-line formatter does.

The ask a line is about: ``bind_ask_id()`` stores the ask id in a context variable, which asyncio
copies into every task started afterwards, so each intake entry, Slack request and timer (each its
own task) carries its own ask id; the handler's filter adds it to every record (``ask_id`` in JSON,
``[ask <id>]`` in text). A record may also name it itself with ``extra={"ask_id": ...}``.

Secrets: the settings' ``SecretStr`` values are never formatted by the bot, and the handler also
replaces every configured secret, the password of the Redis URL and anything shaped like a Slack
token with ``***`` in the finished line, whatever library wrote it.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import sys
import time
from collections.abc import Iterable
from typing import Any, Literal, TextIO

__all__ = ["LogFormat", "bind_ask_id", "configure_logging", "current_ask_id"]

LogFormat = Literal["text", "json"]

_ASK_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("slack_ask_ask_id", default=None)

# Slack tokens (xoxb-, xoxp-, xoxa-, xoxe-..., xapp-) never belong in a log, whoever wrote the line.
_TOKEN_SHAPE = re.compile(r"\b(?:xox[a-z]|xapp)-[A-Za-z0-9-]+")
_URL_PASSWORD = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^:/@\s]*):(?P<password>[^@/\s]+)@")


def bind_ask_id(ask_id: str | None) -> None:
    """Name the ask the current task works on; every log line it writes from now on carries it."""
    _ASK_ID.set(ask_id)


def current_ask_id() -> str | None:
    return _ASK_ID.get()


class _AskIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "ask_id", None) is None:
            record.ask_id = _ASK_ID.get()
        return True


class _Redacting(logging.Formatter):
    """Formats with ``inner`` and masks secrets in the finished line (message and traceback alike)."""

    def __init__(self, inner: logging.Formatter, secrets: Iterable[str]) -> None:
        super().__init__()
        self.inner = inner
        # Longest first, so a secret that contains another is masked whole.
        self.secrets = sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True)

    def format(self, record: logging.LogRecord) -> str:
        line = self.inner.format(record)
        for secret in self.secrets:
            line = line.replace(secret, "***")
        line = _URL_PASSWORD.sub(r"\g<scheme>\g<user>:***@", line)
        return _TOKEN_SHAPE.sub(lambda m: m.group(0).split("-", 1)[0] + "-***", line)


class _TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        ask_id = getattr(record, "ask_id", None)
        return f"{line} [ask {ask_id}]" if ask_id else line


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``ts`` (UTC, ISO 8601), ``level``, ``logger``, ``message``, and
    ``ask_id`` and ``exc`` when there are any."""

    def format(self, record: logging.LogRecord) -> str:
        created = time.gmtime(record.created)
        data: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", created) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        ask_id = getattr(record, "ask_id", None)
        if ask_id:
            data["ask_id"] = ask_id
        if record.exc_info:
            data["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            data["exc"] = record.exc_text
        return json.dumps(data, ensure_ascii=False, default=str)


def configure_logging(
    level: str | int = "INFO",
    fmt: LogFormat = "text",
    *,
    secrets: Iterable[str] = (),
    stream: TextIO | None = None,
) -> logging.Handler:
    """Replace the root logger's handlers with one that writes ``fmt`` lines to ``stream`` (stderr)."""
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    inner: logging.Formatter = JsonFormatter() if fmt == "json" else _TextFormatter()
    handler.setFormatter(_Redacting(inner, secrets))
    handler.addFilter(_AskIdFilter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    return handler
