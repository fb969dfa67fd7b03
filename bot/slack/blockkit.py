"""A pure validator for Slack Block Kit payloads: the limits Slack enforces, checked before Slack does.

Slack rejects a whole message or view (``invalid_blocks``, ``msg_blocks_too_long``, ``view_too_large``) for
one bad field, and the agent then waits for an answer that can never come. :func:`validate_message` and
:func:`validate_view` return every problem as a sentence naming the path (``blocks[3].elements[0].options:
11 options, radio_buttons allows at most 10``); :func:`check_message` and :func:`check_view` raise instead.
The local fake Slack answers ``invalid_blocks`` from these functions, so their names and signatures are fixed.

Sources: /work/shared/reference/slack-facts.md section 1. Where Slack's behaviour is unverified or
ambiguous this validator is deliberately the stricter of the readings (noted at each place), because a
false alarm costs a test, while a false pass costs an ask. Lengths are counted in UTF-16 code units, which
is never less than Slack's count in characters.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from bot.slack.blockkit_rules import MESSAGE_BLOCKS_TEXT_MAX, TEXT_TYPES, Validator, text_length

__all__ = [
    "MESSAGE_BLOCKS_TEXT_MAX",
    "MESSAGE_MAX_BLOCKS",
    "MESSAGE_TEXT_MAX",
    "VIEW_MAX_BLOCKS",
    "VIEW_MAX_BYTES",
    "blocks_text_length",
    "check_message",
    "check_view",
    "text_length",
    "validate_message",
    "validate_view",
    "view_size",
]

MESSAGE_MAX_BLOCKS: Final = 50
VIEW_MAX_BLOCKS: Final = 100
MESSAGE_TEXT_MAX: Final = 40_000
VIEW_MAX_BYTES: Final = 250_000
"""``view_too_large`` past 250 kB; counted as 250,000 bytes of ``json.dumps(view)`` (ASCII-escaped, as
slack_sdk sends it), the stricter reading of "kB"."""


_COUNTED_TYPES: Final = frozenset({*TEXT_TYPES, "markdown"})


def blocks_text_length(blocks: Any) -> int:
    """Sum of every text object's ``text`` in ``blocks``: what ``msg_blocks_too_long`` is about."""
    total = 0
    stack: list[Any] = [blocks]
    while stack:
        item = stack.pop()
        # dict first: the renderers' blocks are plain dicts, and an ABC check costs far more.
        if isinstance(item, dict) or (not isinstance(item, list) and isinstance(item, Mapping)):
            text = item.get("text")
            if isinstance(text, str) and item.get("type") in _COUNTED_TYPES:
                total += text_length(text)
            for value in item.values():
                if isinstance(value, dict | list) or (
                    not isinstance(value, str | bool | int | float) and isinstance(value, Mapping)
                ):
                    stack.append(value)
        elif isinstance(item, list):
            stack.extend(item)
    return total


def view_size(view: Mapping[str, Any]) -> int:
    """Bytes of the view as slack_sdk sends it (``json.dumps`` with ASCII escapes)."""
    return len(json.dumps(view).encode("ascii"))


def validate_message(payload: Mapping[str, Any]) -> list[str]:
    """Every problem with ``{"text", "blocks"}`` as sent to chat.postMessage / chat.update; [] when valid."""
    data: Any = payload  # the fake Slack passes whatever JSON it received
    if not isinstance(data, Mapping):
        return ["payload: not an object"]
    v = Validator("message")
    text = data.get("text")
    blocks = data.get("blocks")
    if text is not None and not isinstance(text, str):
        v.add("text", "not a string")
    elif isinstance(text, str) and text_length(text) > MESSAGE_TEXT_MAX:
        v.add("text", f"{text_length(text)} characters, a message allows at most {MESSAGE_TEXT_MAX}")
    if not blocks and not (isinstance(text, str) and text.strip()):
        v.add("payload", "a message needs a non-empty text or blocks")
    if blocks is None:
        return v.problems
    v.blocks(blocks, "blocks", MESSAGE_MAX_BLOCKS)
    total = blocks_text_length(blocks)
    if total > MESSAGE_BLOCKS_TEXT_MAX:
        v.add(
            "blocks",
            f"{total} characters of text in all, Slack rejects messages past about {MESSAGE_BLOCKS_TEXT_MAX} "
            "(msg_blocks_too_long)",
        )
    return v.problems


def validate_view(view: Mapping[str, Any]) -> list[str]:
    """Every problem with a view as sent to views.open / views.update / views.push; [] when valid."""
    data: Any = view
    if not isinstance(data, Mapping):
        return ["view: not an object"]
    kind = data.get("type")
    if kind not in ("modal", "home"):
        return [f"view.type: {kind!r}, expected 'modal' or 'home'"]
    v = Validator("modal" if kind == "modal" else "home")
    blocks = view.get("blocks")
    if blocks is None:
        v.add("view.blocks", "required")
    else:
        v.blocks(blocks, "view.blocks", VIEW_MAX_BLOCKS)
    if kind == "modal":
        v.text_object(view.get("title"), "view.title", 24, plain_only=True)
        for key in ("submit", "close"):
            if key in view:
                v.text_object(view[key], f"view.{key}", 24, plain_only=True)
        has_input = isinstance(blocks, list) and any(
            isinstance(b, Mapping) and b.get("type") == "input" for b in blocks
        )
        if "submit" not in view and has_input:
            v.add("view.submit", "required when the view has an input block")
    v.string(view, "private_metadata", "view", 3000, min_len=0)
    v.string(view, "callback_id", "view", 255, min_len=0)
    v.string(view, "external_id", "view", 255)
    for key in ("clear_on_close", "notify_on_close", "submit_disabled"):
        v.boolean(view, key, "view")
    size = view_size(view)
    if size > VIEW_MAX_BYTES:
        v.add("view", f"{size} bytes, a view allows at most {VIEW_MAX_BYTES} (view_too_large)")
    return v.problems


def check_message(payload: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` listing every problem :func:`validate_message` finds."""
    problems = validate_message(payload)
    if problems:
        raise ValueError("invalid Slack message:\n- " + "\n- ".join(problems))


def check_view(view: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` listing every problem :func:`validate_view` finds."""
    problems = validate_view(view)
    if problems:
        raise ValueError("invalid Slack view:\n- " + "\n- ".join(problems))
