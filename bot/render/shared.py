"""Pieces every drawing shares: the `Message` payload, date and mention tokens, text objects and blocks,
and untrusted text made into one safe line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, Final

from bot.render.mrkdwn import CUT_MARK, cut, escape_mrkdwn, one_line

__all__ = [
    "USER_ID_RE",
    "Block",
    "Message",
    "actions_block",
    "button",
    "cache_window",
    "context_block",
    "date_token",
    "dicts",
    "divider_block",
    "escaped_line",
    "header_block",
    "inline",
    "md",
    "mention_tokens",
    "plain",
    "plain_line",
    "plain_one_line",
    "section_block",
    "short_text",
]

# fullmatch, never match + "$": "$" also matches before a trailing newline.
USER_ID_RE: Final = re.compile(r"[UW][A-Z0-9]{2,31}")

_GROUP_ID_RE: Final = re.compile(r"S[A-Z0-9]{2,31}")

# Slack renders <!date^…> for years 1970-9999; later deadlines are "practically never".
_MAX_DATE_SECONDS: Final = 253_402_300_799


@dataclass(frozen=True, slots=True)
class Message:
    """A chat.postMessage / chat.update payload: ``text`` is the notification fallback."""

    text: str
    blocks: list[dict[str, Any]] = field(default_factory=list)

    def to_payload(self) -> dict[str, Any]:
        return {"text": self.text, "blocks": self.blocks}


def date_token(ms: int) -> str | None:
    """``<!date^…>`` showing ``ms`` in the reader's own time zone (UTC fallback); None past year 9999."""
    seconds = ms // 1000
    if not 0 <= seconds <= _MAX_DATE_SECONDS:
        return None
    fallback = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"<!date^{seconds}^{{date_short_pretty}} at {{time}}|{fallback}>"


def mention_tokens(ids: Sequence[str]) -> list[str]:
    """Slack mention tokens for user ids (``U…``, ``W…``) and user-group ids (``S…``), in order, once each.

    Anything else is dropped: these are the only mentions the bot ever emits (protocol section 5).
    """
    tokens: list[str] = []
    for slack_id in ids:
        if USER_ID_RE.fullmatch(slack_id):
            token = f"<@{slack_id}>"
        elif _GROUP_ID_RE.fullmatch(slack_id):
            token = f"<!subteam^{slack_id}>"
        else:
            continue
        if token not in tokens:
            tokens.append(token)
    return tokens


# Block Kit as the plain JSON objects Slack takes, built by typed functions. slack_sdk's model objects
# cost more to build and serialise than the rest of rendering together (to_dict re-validates every
# object, on every level tried); Slack's limits are checked once on the payload
# (bot.slack.blockkit_rules). Keys are in sorted order, as slack_sdk's to_dict wrote them, so every
# payload stays byte for byte what it was (tests/render_corpus).
Block = dict[str, Any]
"""A Block Kit block, element or composition object, as JSON."""


def md(text: str) -> Block:
    return {"text": text, "type": "mrkdwn", "verbatim": True}


def plain(text: str) -> Block:
    return {"emoji": True, "text": text, "type": "plain_text"}


def section_block(text: str) -> Block:
    return {"text": md(text), "type": "section"}


def context_block(*texts: str) -> Block:
    elements = [md(t) for t in texts if t.strip()][:10]
    return {"elements": elements, "type": "context"} if elements else {"type": "context"}


def header_block(title: str) -> Block:
    return {"text": plain(plain_line(title, 150, "A question for you")), "type": "header"}


def divider_block() -> Block:
    return {"type": "divider"}


def button(text: str, action_id: str, value: str, style: str | None = None) -> Block:
    """A button; ``text`` is plain text already made safe (``plain_line``) or the bot's own words."""
    found: Block = {"action_id": action_id}
    if style:
        found["style"] = style
    found.update(text=plain(text), type="button", value=value)
    return found


def actions_block(elements: list[Block]) -> Block:
    return {"elements": elements, "type": "actions"}


# Cached: the renderer tries several detail levels, each escaping the same (possibly huge) labels again.
@lru_cache(maxsize=1024)
def escaped_line(text: str) -> str:
    """Untrusted text as one escaped mrkdwn line."""
    return escape_mrkdwn(one_line(text))


# escape_plain is escape_mrkdwn, so plain_text fields share escaped_line's cache.
plain_one_line: Final = escaped_line


def cache_window(size: int) -> int:
    """``size`` rounded up to a power of two (at least 1024), so detail levels share cached work."""
    return 1 << max(10, (size - 1).bit_length())


def short_text(text: str, limit: int, marker: str, escape: Callable[[str], str] = escaped_line) -> str:
    """``escape(text)`` cut to ``limit``; only a prefix is escaped when the text is far longer.

    Option labels may be longer than any limit (the contract does not cut them), and a view holds
    hundreds of them: escaping a bounded prefix keeps rendering fast. Escaping never shrinks text
    except by collapsing whitespace, so four times the limit is plenty.
    """
    window = cache_window(4 * limit + 64)
    if len(text) <= window:
        return cut(escape(text), limit, marker)
    return cut(escape(text[:window]), limit, marker, force=True)


def inline(text: str | None, limit: int) -> str:
    """Untrusted text as one mrkdwn line, cut to ``limit``."""
    return short_text(text or "", limit, CUT_MARK)


def plain_line(text: str | None, limit: int, fallback: str) -> str:
    shown = short_text(text or "", limit, CUT_MARK, plain_one_line)
    return shown if shown.strip() else fallback


def dicts(blocks: Sequence[Any]) -> list[Block]:
    """The blocks as JSON: built ones as they are; a slack_sdk model object (should a renderer still
    use one) through its ``to_dict``."""
    return [b if isinstance(b, dict) else b.to_dict() for b in blocks]
