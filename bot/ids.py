"""Block Kit ids and values shared by ``render`` (which writes them) and ``interactions`` (which reads them).

Every interactive element the bot sends carries an :class:`AskRef` in its ``value`` (buttons) or in the
modal's ``private_metadata``, so a click can be routed to the ask's Redis keys without another lookup.
Elements are told apart by ``action_id`` and ``value``, never by their text (protocol section 11).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

__all__ = [
    "ACTION_CHOOSE",
    "ACTION_DECLINE",
    "ACTION_HOME_PAGE",
    "ACTION_NOOP",
    "ACTION_OPEN",
    "ACTION_OTHER",
    "ACTION_PREFIX",
    "ACTION_REPLY_CHANGE",
    "ACTION_REPLY_CONFIRM",
    "FIELD_ADDITIONAL",
    "FIELD_ANSWER",
    "FIELD_CUSTOM",
    "FIELD_NOTE",
    "FIELD_REASON",
    "VIEW_DECLINE",
    "VIEW_FORM",
    "VIEW_OTHER",
    "AskRef",
    "FormMeta",
    "decode_object",
    "field_block_id",
    "parse_field_block_id",
]

ACTION_PREFIX = "slack_ask:"
ACTION_CHOOSE = "slack_ask:choose"
"""One-click option button; value is ``AskRef`` with ``option`` set."""
ACTION_OTHER = "slack_ask:other"
"""One-click "Other..." button: opens a small modal for custom text."""
ACTION_DECLINE = "slack_ask:decline"
ACTION_OPEN = "slack_ask:open"
"""Opens the full form in a modal."""
ACTION_REPLY_CONFIRM = "slack_ask:reply_confirm"
"""Confirm on the private reading of a typed reply (docs/thread-answers.md); value is a ``Pending``."""
ACTION_REPLY_CHANGE = "slack_ask:reply_change"
"""Change on that reading: opens the ask's form; value is the same ``Pending``."""
ACTION_HOME_PAGE = "slack_ask:home_page"
"""Next / Previous on the Home tab (``:next``, ``:prev``); value is the page to show."""
ACTION_NOOP = "slack_ask:noop"
"""Elements inside modals that need no server round trip (Slack still sends block_actions for some)."""

VIEW_FORM = "slack_ask:form"
VIEW_OTHER = "slack_ask:other_text"
VIEW_DECLINE = "slack_ask:decline"
"""The small modal behind Decline: an optional reason, then Decline (protocol section 9)."""

# Input block ids in the modal are "<field>:<question index>"; the action id inside is the field name.
FIELD_ANSWER = "answer"
"""The choice element (radio, checkboxes, select, multi-select) or a text question's input."""
FIELD_CUSTOM = "custom"
"""Free "Other" text."""
FIELD_NOTE = "note"
"""The responder's note on a question."""
FIELD_REASON = "reason"
"""The optional reason in the Decline modal (block id has no index)."""
FIELD_ADDITIONAL = "additional"
"""Rich forms: the form-level additional notes (block id has no index)."""


def field_block_id(field: str, index: int | None = None) -> str:
    return field if index is None else f"{field}:{index}"


def parse_field_block_id(block_id: str) -> tuple[str, int | None] | None:
    """``"note:3"`` -> ``("note", 3)``; ``"additional"`` -> ``("additional", None)``; junk -> None."""
    field, sep, rest = block_id.partition(":")
    if field not in (FIELD_ANSWER, FIELD_CUSTOM, FIELD_NOTE, FIELD_ADDITIONAL):
        return None
    if not sep:
        return (field, None)
    if not rest.isdigit() or len(rest) > 2:
        return None
    return (field, int(rest))


def decode_object(value: str) -> dict[str, object] | None:
    """A JSON object the bot wrote into a Slack value (a button's, a modal's metadata); anything else
    (forged, truncated, another type) gives None."""
    try:
        data = json.loads(value)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


@dataclass(frozen=True, slots=True)
class AskRef:
    """Enough to find an ask's keys: its hash-slot tag and its id (plus a chosen option for one-click)."""

    tag: str
    ask_id: str
    option: int | None = None

    def encode(self) -> str:
        data: dict[str, object] = {"t": self.tag, "a": self.ask_id}
        if self.option is not None:
            data["o"] = self.option
        return json.dumps(data, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def decode(cls, value: str) -> AskRef | None:
        """Parse a value the bot wrote; anything else (forged or truncated) gives None."""
        data = decode_object(value)
        if data is None:
            return None
        tag, ask_id, option = data.get("t"), data.get("a"), data.get("o")
        if not isinstance(tag, str) or not isinstance(ask_id, str) or not ask_id:
            return None
        if option is not None and (type(option) is not int or not 0 <= option < 12):
            return None
        return cls(tag=tag, ask_id=ask_id, option=option)


@dataclass(frozen=True, slots=True)
class FormMeta:
    """A modal's ``private_metadata``: which ask, and which message it was opened from."""

    ref: AskRef
    channel: str | None = None
    ts: str | None = None
    question: int | None = None
    """For the one-question "Other..." modal: the question index."""
    home: bool = False
    """Opened from the person's Home tab: the answer is ``via: home`` (protocol section 14)."""

    def encode(self) -> str:
        data: dict[str, object] = {"t": self.ref.tag, "a": self.ref.ask_id}
        if self.home:
            data["h"] = 1
        if self.channel:
            data["c"] = self.channel
        if self.ts:
            data["s"] = self.ts
        if self.question is not None:
            data["q"] = self.question
        return json.dumps(data, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def decode(cls, value: str) -> FormMeta | None:
        ref = AskRef.decode(value)
        if ref is None:
            return None
        data = json.loads(value)
        channel, ts, question = data.get("c"), data.get("s"), data.get("q")
        return cls(
            ref=ref,
            channel=channel if isinstance(channel, str) else None,
            ts=ts if isinstance(ts, str) else None,
            question=question if type(question) is int else None,
            home=data.get("h") == 1,
        )
