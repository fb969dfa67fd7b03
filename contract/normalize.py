"""``normalize_ask_request``: untrusted JSON in, a valid :class:`AskRequest` out, or the upstream error.

A port of pi-question's ``normalizeAskRequest`` (spec/contract.md section 2). Every rule
follows the JavaScript original, including its whitespace class, its UTF-16 lengths and
``typeof`` checks (a boolean is not a number here although Python's bool is an int).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, TypeGuard

from contract._js import as_js_integer, cut_utf16, is_blank, is_js_number, js_trim
from contract.errors import ContractError
from contract.question import LIMITS, AskRequest, Category, Option, Question

__all__ = ["normalize_ask_request"]

_CATEGORIES: Final[dict[str, Category]] = {
    "implementation": "implementation",
    "scope-product": "scope-product",
    "security-permission": "security-permission",
}


def optional_text(value: object) -> str | None:
    """Upstream ``text()``: a string that is not blank, cut to 4000 UTF-16 units but not trimmed."""
    if isinstance(value, str) and not is_blank(value):
        return cut_utf16(value, LIMITS.max_text)
    return None


def trimmed_text(value: object) -> str | None:
    """``text(value)?.trim()``: cut first, then trimmed; None when nothing is left."""
    text = optional_text(value)
    if text is None:
        return None
    return js_trim(text) or None


def first_text(raw: Mapping[str, Any], *keys: str) -> str | None:
    """The first of ``keys`` holding a non-blank string (``text(a) ?? text(b) ?? ...``)."""
    for key in keys:
        text = optional_text(raw.get(key))
        if text is not None:
            return text
    return None


def is_array(value: object) -> TypeGuard[list[Any] | tuple[Any, ...]]:
    """``Array.isArray(value)`` for JSON-decoded data."""
    return isinstance(value, list | tuple)


def normalize_ask_request(raw: object) -> AskRequest:
    """Normalize a pi-question request, accepting the upstream aliases and the single-question form.

    Raises :class:`ContractError` whose ``str()`` is exactly the upstream message, for
    example ``questions[1] needs at least 1 option``. The first error found wins.
    """
    entries: list[Any] | tuple[Any, ...] = []
    if isinstance(raw, Mapping):
        listed = raw.get("questions")
        # Any other object, even one whose `questions` is null or not an array, is one question.
        entries = listed if isinstance(listed, list | tuple) else [raw]
    if not entries:
        raise ContractError("questions must not be empty")
    # Counted before any entry is looked at, so nine nulls report the count.
    if len(entries) > LIMITS.max_questions:
        raise ContractError(f"at most {LIMITS.max_questions} questions per ask")
    seen: set[str] = set()
    questions = [_question(index, entry, seen) for index, entry in enumerate(entries)]
    return AskRequest(questions=questions)


def _question(index: int, raw: object, seen: set[str]) -> Question:
    if not isinstance(raw, Mapping):
        raise ContractError(f"questions[{index}] must be an object")
    prompt = first_text(raw, "question", "prompt", "header")
    if prompt is None:
        raise ContractError(f"questions[{index}].question is required")

    # `options` wins whenever it is an array, even an empty one.
    listed = raw.get("options")
    if not is_array(listed):
        listed = raw.get("choices")
    options = [option for option in map(_option, listed if is_array(listed) else []) if option is not None]
    if len(options) < LIMITS.min_options:
        raise ContractError(f"questions[{index}] needs at least {LIMITS.min_options} option")
    if len(options) > LIMITS.max_options:
        raise ContractError(f"questions[{index}] has more than {LIMITS.max_options} options")

    # No fall-back to `recommendedIndex` once `recommended` is a number, even an invalid one.
    recommended_raw = raw.get("recommended")
    if not is_js_number(recommended_raw):
        recommended_raw = raw.get("recommendedIndex")
    recommended = as_js_integer(recommended_raw)
    if recommended is not None and not 0 <= recommended < len(options):
        recommended = None

    multi = raw.get("multi")
    if not isinstance(multi, bool):
        multi = raw.get("multiple")
    allow_custom = raw.get("allowCustom")
    category = raw.get("category")

    question_id = trimmed_text(raw.get("id")) or f"q{index + 1}"
    if question_id in seen:
        raise ContractError(f'duplicate question id "{question_id}"')
    seen.add(question_id)

    return Question(
        id=question_id,
        question=prompt,
        options=options,
        description=first_text(raw, "description", "context"),
        multi=multi if isinstance(multi, bool) else None,
        recommended=recommended,
        allow_custom=allow_custom if isinstance(allow_custom, bool) else None,
        category=_CATEGORIES.get(category) if isinstance(category, str) else None,
    )


def _option(raw: object) -> Option | None:
    if isinstance(raw, str):
        # String options are trimmed but, unlike every other text, not cut to 4000.
        trimmed = js_trim(raw)
        return Option(label=trimmed) if trimmed else None
    if isinstance(raw, Mapping):
        label = trimmed_text(raw.get("label"))
        if label is None:
            return None
        return Option(label=label, description=optional_text(raw.get("description")))
    return None
