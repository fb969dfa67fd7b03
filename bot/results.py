"""Pure: the result envelope for every way an ask can end (protocol sections 3, 6 and 9).

The text and details are exactly the contract's: ``narrate``/``build_details`` for pi-question,
``format_rich_answers``/``RichFormResult`` for rich forms. The JSON is written with the contract's
``to_json`` (JavaScript's JSON.stringify), so results are byte-compatible with pi-question's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from bot.model import AskRecord
from contract import (
    AskDelivery,
    QuestionAnswer,
    RichFormResult,
    apply_timeout_policy,
    build_details,
    format_rich_answers,
    narrate,
    to_json,
)
from contract.envelopes import Outcome

__all__ = [
    "HOST",
    "NONE",
    "TIMEOUT_ERROR_MESSAGE",
    "Ending",
    "answered",
    "answered_rich",
    "complete",
    "declined",
    "ended_without_answer",
    "envelope_error",
    "result_prefix",
    "timed_out",
]

HOST = AskDelivery(surface="host", degraded=False)
NONE = AskDelivery(surface="none", degraded=False)
TIMEOUT_ERROR_MESSAGE = "the question timed out and no default is allowed."


@dataclass(frozen=True, slots=True)
class Ending:
    """How an ask ended, before it is stamped with its ids and times."""

    outcome: Outcome
    answers: list[Any]
    text: str
    details: dict[str, Any]
    delivery: AskDelivery = HOST
    error: dict[str, str] | None = None


def _wire_answers(answers: Sequence[QuestionAnswer]) -> list[dict[str, Any]]:
    return [a.to_wire() for a in answers]


def _pi(rec: AskRecord, outcome: Outcome, answers: Sequence[QuestionAnswer], delivery: AskDelivery) -> Ending:
    assert rec.request is not None
    questions = rec.request.questions
    wire = _wire_answers(answers)
    return Ending(
        outcome=outcome,
        answers=wire,
        text=narrate(questions, wire, delivery),
        details=build_details(questions, wire, delivery),
        delivery=delivery,
    )


def _rich_cancelled(rec: AskRecord, outcome: Outcome, delivery: AskDelivery = HOST) -> Ending:
    assert rec.form is not None
    result = RichFormResult(
        title=rec.form.title,
        description=rec.form.description,
        questions=rec.form.questions,
        answers=[],
        cancelled=True,
    )
    return Ending(outcome, [], format_rich_answers(result), result.to_wire(), delivery)


def answered(rec: AskRecord, answers: Sequence[QuestionAnswer]) -> Ending:
    """A human submitted answers to a pi-question ask."""
    return _pi(rec, "answered", answers, HOST)


def answered_rich(rec: AskRecord, result: RichFormResult) -> Ending:
    """A human submitted a rich form."""
    return Ending(
        "answered", [a.to_wire() for a in result.answers], format_rich_answers(result), result.to_wire()
    )


def ended_without_answer(
    rec: AskRecord,
    outcome: Literal["cancelled", "dismissed", "unavailable"],
    *,
    error: dict[str, str] | None = None,
) -> Ending:
    """Declined, withdrawn, dismissed, or no human could be reached: every question gets that status."""
    delivery = NONE if outcome == "unavailable" else HOST
    if rec.format == "rich":
        ending = _rich_cancelled(rec, outcome, delivery)
    else:
        assert rec.request is not None
        answers = [QuestionAnswer(id=q.id, status=outcome, selected=[]) for q in rec.request.questions]
        ending = _pi(rec, outcome, answers, delivery)
    if error is not None:
        return Ending(ending.outcome, ending.answers, ending.text, ending.details, ending.delivery, error)
    return ending


def declined(rec: AskRecord, reason: str | None) -> Ending:
    """A human pressed Decline (protocol section 9): every question ``cancelled``, and the reason, when
    one was given, in the ``note`` of every answer. A rich form has no per-answer note: its result is
    the cancelled form, and the reason shows in the ended message only."""
    if rec.format == "rich" or not reason:
        return ended_without_answer(rec, "cancelled")
    assert rec.request is not None
    answers = [
        QuestionAnswer(id=q.id, status="cancelled", selected=[], note=reason) for q in rec.request.questions
    ]
    return _pi(rec, "cancelled", answers, HOST)


def timed_out(rec: AskRecord) -> Ending:
    """The deadline passed: the ask's ``on_timeout`` policy decides (protocol section 6)."""
    if rec.format == "rich":
        # The rich contract has no per-question statuses; a timed-out form is an unsubmitted form.
        if rec.on_timeout == "error":
            return Ending("error", [], f"Error: {TIMEOUT_ERROR_MESSAGE}", {}, HOST, _timeout_error())
        return _rich_cancelled(rec, "timeout")
    assert rec.request is not None
    questions = rec.request.questions
    if rec.on_timeout == "error":
        answers = apply_timeout_policy(questions, "cancel")
        return Ending(
            "error", _wire_answers(answers), f"Error: {TIMEOUT_ERROR_MESSAGE}", {}, HOST, _timeout_error()
        )
    answers = apply_timeout_policy(questions, rec.on_timeout)
    outcome: Outcome = "answered" if any(a.defaulted for a in answers) else "timeout"
    return _pi(rec, outcome, answers, HOST)


def _timeout_error() -> dict[str, str]:
    return {"code": "timeout_error", "message": TIMEOUT_ERROR_MESSAGE}


def envelope_error(code: str, message: str) -> Ending:
    """An envelope or request the bot refused: ``Error: <message>``, empty details and answers."""
    return Ending("error", [], f"Error: {message}", {}, HOST, {"code": code, "message": message})


def _dumps(body: dict[str, Any]) -> str:
    """Compact JSON. The C encoder in the common case; the contract's JavaScript-exact writer when a
    text carries half a surrogate pair (a 4000-unit cut can leave one), which UTF-8 cannot hold.
    Results hold no floats, the one place where the two writers could print differently."""
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return to_json(body)
    return text


def complete(prefix: str, resolved_at: str) -> str:
    """A result written outside the store's scripts (an envelope whose ask_id is unreadable): the
    prefix closed as ``write_result`` in ``_common.lua`` closes it, with ``"votes": null``."""
    head = prefix.removesuffix('"resolved_at":')
    return head + '"votes":null,"resolved_at":' + json.dumps(resolved_at) + "}"


def result_prefix(
    *,
    ask_id: str | None,
    format: str,
    ending: Ending,
    responder: dict[str, Any] | None,
    slack: dict[str, Any] | None,
    created_at: str | None,
) -> str:
    """The result JSON up to ``"resolved_at":``; the resolve script appends Redis time and ``}``."""
    body: dict[str, Any] = {
        "v": 1,
        "ask_id": ask_id,
        "format": format,
        "outcome": ending.outcome,
        "answers": ending.answers,
        "text": ending.text,
        "details": ending.details,
        "delivery": ending.delivery.to_wire(),
        "responder": responder,
        "slack": slack,
        "error": ending.error,
        "created_at": created_at,
    }
    return _dumps(body)[:-1] + ',"resolved_at":'
