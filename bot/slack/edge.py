"""The HTTP edge of ``POST /slack/events`` (protocol section 11): the signature is checked on the raw
bytes before anything parses them, so an unsigned request gets 401 (or 413 when too large) whatever
its body holds, never a 500 or a traceback, and its body is never written to the log."""

from __future__ import annotations

import binascii
import hashlib
import hmac
import json
import logging
import re
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_plus

from aiohttp import web

__all__ = ["MAX_BODY_BYTES", "Refused", "bolt_body", "read_signed_body", "refuse"]

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1024 * 1024
"""Larger than any request Slack sends (its payloads stay well under this)."""

_MAX_SKEW_S = 300
_TIMESTAMP_RE = re.compile(r"[0-9]{1,12}")
_SIGNATURE_RE = re.compile(r"v0=[0-9a-f]{64}")
_JSON_SPACE = " \t\n\r"
"""The blanks JSON allows before a value."""


@dataclass(frozen=True, slots=True)
class Refused:
    status: int
    reason: str


def refuse(request: web.Request, refused: Refused, size: int | None) -> web.Response:
    """One log line naming the request and why, never its body (which an attacker chose)."""
    length = f"{size} bytes" if size is not None else "body not read"
    log.warning(
        "refused %s %s from %s with %d: %s (%s)",
        request.method,
        request.path,
        request.remote or "?",
        refused.status,
        refused.reason,
        length,
    )
    return web.json_response({"ok": False, "error": refused.reason}, status=refused.status)


def _valid_signature(secret: str, timestamp: str, signature: str, body: bytes) -> bool:
    base = b"v0:" + timestamp.encode() + b":" + body
    expected = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, signature)


async def read_signed_body(request: web.Request, secret: str) -> bytes | Refused:
    """The body of a request Slack signed, or why it is refused (nothing parsed before the check)."""
    declared = request.content_length
    if declared is not None and declared > MAX_BODY_BYTES:
        return Refused(413, f"body larger than {MAX_BODY_BYTES} bytes")
    timestamp = request.headers.get("X-Slack-Request-Timestamp", "")
    signature = request.headers.get("X-Slack-Signature", "")
    if not _TIMESTAMP_RE.fullmatch(timestamp):
        return Refused(401, "missing or malformed X-Slack-Request-Timestamp")
    if abs(time.time() - int(timestamp)) > _MAX_SKEW_S:
        return Refused(401, "X-Slack-Request-Timestamp more than five minutes from the server's clock")
    if not _SIGNATURE_RE.fullmatch(signature):
        return Refused(401, "missing or malformed X-Slack-Signature")
    try:
        body = await _read_bounded(request)
    except _TooLarge:
        return Refused(413, f"body larger than {MAX_BODY_BYTES} bytes")
    except Exception as exc:  # a client that disconnects mid-body, a broken chunked encoding
        return Refused(400, f"body could not be read ({type(exc).__name__})")
    if not _valid_signature(secret, timestamp, signature, body):
        return Refused(401, "bad signature")
    return body


class _TooLarge(Exception):
    pass


async def _read_bounded(request: web.Request) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = await request.content.read(65_536)
        if not chunk:
            break
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise _TooLarge
        chunks.append(chunk)
    if request.content_length is not None and size < request.content_length:
        raise ConnectionResetError("the client sent less than its Content-Length")
    return b"".join(chunks)


def bolt_body(body: bytes, content_type: str) -> str | Refused:
    """What Bolt is handed of a correctly signed body, or why it cannot be read as Slack's (400).

    Read the way Bolt reads a body (``slack_bolt.request.internals.parse_body``), once: a JSON object
    is handed on as sent; a form's ``payload`` (every interaction: clicks, submissions) is handed on
    decoded, as the JSON object it is, so Bolt does not decode the form a second time (the
    percent-decoding of a click's payload is a large share of the bot's CPU per click); any other
    form is handed on as sent. Bolt's own signature check is off for requests that came this way
    (``bot.runtime``): the signature was checked on the raw bytes before this."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return Refused(400, "body is not UTF-8")
    try:
        if content_type.startswith("application/json") or text.startswith("{"):
            data: Any = json.loads(text)
            return text if isinstance(data, dict) else Refused(400, "a JSON body must be an object")
        if "payload" not in text:
            return text
        payload = _form_field(text, "payload")
        if payload is None:
            return text
        data = json.loads(payload)
    except (ValueError, RecursionError):
        return Refused(400, "body is not valid JSON or form data")
    if not isinstance(data, dict):
        return Refused(400, "payload must be a JSON object")
    return payload.lstrip(_JSON_SPACE)  # so that Bolt reads it as JSON (it looks for a leading "{")


def _form_field(text: str, name: str) -> str | None:
    """The last value of ``name`` in a form body, read as ``urllib.parse.parse_qsl`` reads it."""
    found: str | None = None
    for pair in text.split("&"):
        if not pair:
            continue
        key, _, value = pair.partition("=")
        if unquote_plus(key) == name:
            found = value
    return None if found is None else _unquote_plus(found)


def _unquote_plus(value: str) -> str:
    """``urllib.parse.unquote_plus`` in C: a click's payload is JSON with nearly every character
    %-escaped, and Python 3.11's unquote loops over the escapes one by one (about 0.8 ms a click
    measured, docs/performance.md). Every ``%XY`` becomes Quoted-Printable's ``=XY`` for
    ``binascii.a2b_qp``; the input QP would read otherwise (``=``, line ends, a ``%`` at the end), any
    ``%`` not followed by two hex digits (which QP and unquote treat differently: the lengths tell) and
    raw non-ASCII (unquote decodes the escapes between such characters run by run) take the Python
    path, so the answer is unquote's in every case (tests/test_edge_body.py)."""
    if not value.isascii():
        return unquote_plus(value)
    raw = value.encode("ascii")
    if b"=" in raw or b"\n" in raw or b"\r" in raw or b"%" in raw[-2:]:
        return unquote_plus(value)
    out = binascii.a2b_qp(raw.replace(b"+", b" ").replace(b"%", b"="))
    if len(raw) - len(out) != 2 * raw.count(b"%"):
        return unquote_plus(value)
    return out.decode("utf-8", "replace")
