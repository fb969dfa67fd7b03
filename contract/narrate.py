"""The model-facing text (``narrate``) and structured details (``build_details``) of an ask.

Ports of pi-question's ``narrate`` and ``buildDetails`` (spec/contract.md section 2). Both
take models or the wire dicts the models serialize to, and tolerate what JavaScript
tolerates: unknown statuses, extra answer fields, missing answers and indexes that point
nowhere. The computation runs on wire dicts so both kinds of input take one path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, TypeAlias

from pydantic import BaseModel

from contract._js import UNDEFINED, js_str, js_truthy, one_line
from contract.question import AskDelivery, Question, QuestionAnswer

__all__ = [
    "DEGRADED_NOTE",
    "UNAVAILABLE_WARNING",
    "AnswerLike",
    "DeliveryLike",
    "QuestionLike",
    "build_details",
    "narrate",
]

QuestionLike: TypeAlias = Question | Mapping[str, Any]
AnswerLike: TypeAlias = QuestionAnswer | Mapping[str, Any] | None
DeliveryLike: TypeAlias = AskDelivery | Mapping[str, Any]

UNAVAILABLE_WARNING: Final = (
    "No human answer surface is available in this session. Do not assume an answer; "
    "continue only with choices you can justify, or report the open question upward."
)
DEGRADED_NOTE: Final = (
    "Note: asked through a reduced {surface} surface; option descriptions may not have been shown."
)
_MISSING_ANSWER: Final[Mapping[str, Any]] = {"status": "cancelled", "selected": []}


def narrate(
    questions: Sequence[QuestionLike],
    answers: Sequence[AnswerLike],
    delivery: DeliveryLike,
) -> str:
    """The text the calling model reads: one ``<id>: <summary>`` line per question.

    Answers are matched to questions by position; a missing answer counts as cancelled.
    An ``unavailable`` answer anywhere adds the unavailable warning, and a degraded
    delivery adds the reduced-surface note. No trailing newline.
    """
    wire_answers = [_wire(answer) for answer in answers]
    wire_delivery = _wire(delivery)
    lines = ["User answers:"]
    for index, question in enumerate(questions):
        wire_question = _wire(question)
        answer = _answer_at(wire_answers, index)
        lines.append(f"{one_line(js_str(_get(wire_question, 'id')))}: {_summary(wire_question, answer)}")
    # Answers past the last question print no line but still raise the warning.
    if any(_get(answer, "status") == "unavailable" for answer in wire_answers):
        lines += ["", UNAVAILABLE_WARNING]
    if js_truthy(_get(wire_delivery, "degraded")):
        lines += ["", DEGRADED_NOTE.format(surface=js_str(_get(wire_delivery, "surface")))]
    return "\n".join(lines)


def build_details(
    questions: Sequence[QuestionLike],
    answers: Sequence[AnswerLike],
    delivery: DeliveryLike,
) -> dict[str, Any]:
    """The structured details: ``{results, answers, delivery}``, plus the compat fields mirrored
    at the top level when there is exactly one question.

    ``results[i]`` holds raw (unsanitized) values whatever the answer's status; ``answers``
    and ``delivery`` are passed through unchanged (models as their wire dicts).
    """
    wire_answers = [_wire(answer) for answer in answers]
    results = [
        _compat_result(_wire(question), _answer_at(wire_answers, index))
        for index, question in enumerate(questions)
    ]
    details: dict[str, Any] = {"results": results, "answers": wire_answers, "delivery": _wire(delivery)}
    if len(results) == 1:
        details.update(results[0])
    return details


def _wire(value: object) -> Any:
    to_wire = getattr(value, "to_wire", None)
    if isinstance(value, BaseModel) and callable(to_wire):
        return to_wire()
    return value


def _get(obj: object, key: str) -> Any:
    # Reading a property of anything that is not an object gives undefined, as in JavaScript.
    if isinstance(obj, Mapping):
        return obj.get(key, UNDEFINED)
    return UNDEFINED


def _answer_at(answers: list[Any], index: int) -> Any:
    # `answers[i] ?? {status: "cancelled", selected: []}`: null counts as missing too.
    answer = answers[index] if index < len(answers) else None
    return _MISSING_ANSWER if answer is None else answer


def _option_at(options: list[Any], index: object) -> Any:
    """``options[index]``: JavaScript reads it as ``options[String(index)]``, so ``2.0`` and ``"2"``
    address element 2 while ``-1``, ``1.5``, ``true`` and ``"02"`` address nothing."""
    key = js_str(index)
    if key.isascii() and key.isdigit() and (key == "0" or key[0] != "0") and int(key) < len(options):
        return options[int(key)]
    return UNDEFINED


def _list(value: object) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else []


def _selected_labels(question: object, answer: object) -> list[Any]:
    """``answer.selected.map(i => question.options[i]?.label)``, undefined ones dropped."""
    options = _list(_get(question, "options"))
    labels = [_get(_option_at(options, index), "label") for index in _list(_get(answer, "selected"))]
    return [label for label in labels if label is not UNDEFINED]


def _summary(question: object, answer: object) -> str:
    status = _get(answer, "status")
    if status != "answered":
        return f"({js_str(status)})"
    labels = [one_line(js_str(label)) for label in _selected_labels(question, answer)]
    if js_truthy(_get(answer, "defaulted")):
        return f"(timeout; default applied, no human answered: {', '.join(labels)})"
    custom_raw = _get(answer, "customText")
    custom = one_line(js_str(custom_raw)) if js_truthy(custom_raw) else ""
    if not labels and not custom:
        return "(cancelled)"
    selected = (
        f"[{', '.join(labels)}]" if js_truthy(_get(question, "multi")) else (labels[0] if labels else "")
    )
    if labels and custom:
        return f'{selected} + Other: "{custom}"'
    if custom:
        return f'"{custom}"'
    return selected


def _compat_result(question: object, answer: object) -> dict[str, Any]:
    # Keys left undefined in JavaScript are absent from JSON, so absent keys stay absent.
    result: dict[str, Any] = {}
    for key in ("id", "question"):
        value = _get(question, key)
        if value is not UNDEFINED:
            result[key] = value
    labels = [_get(option, "label") for option in _list(_get(question, "options"))]
    result["options"] = [None if label is UNDEFINED else label for label in labels]
    multi = _get(question, "multi")
    result["multi"] = False if multi is None or multi is UNDEFINED else multi
    result["selectedOptions"] = _selected_labels(question, answer)
    description = _get(question, "description")
    if js_truthy(description):
        result["description"] = description
    custom = _get(answer, "customText")
    if js_truthy(custom):
        result["customInput"] = custom
    return result
