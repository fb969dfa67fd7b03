"""Pure: the result envelope for every way an ask can end (protocol sections 3, 6 and 9).

The text and details are exactly the contract's: ``narrate``/``build_details`` for pi-question,
``format_rich_answers``/``RichFormResult`` for rich forms. The JSON is written with the contract's
``to_json`` (JavaScript's JSON.stringify), so results are byte-compatible with pi-question's.

A stored result comes back once, typed, through :func:`parse_result`: the store hands a
:class:`StoredResult` to everything after it (the engine, the ended message, the operator commands).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal

from bot.model import AskRecord
from contract import (
    TIMEOUT_ERROR_MESSAGE,
    AskDelivery,
    QuestionAnswer,
    ResultEnvelope,
    ResultError,
    ResultResponder,
    ResultSlack,
    RichAnswer,
    RichFormResult,
    apply_timeout_policy,
    build_details,
    compact_json,
    format_rich_answers,
    narrate,
)
from contract.envelopes import Outcome, Via

__all__ = [
    "HOST",
    "NONE",
    "Ending",
    "StoredResult",
    "answered",
    "answered_rich",
    "complete",
    "declined",
    "ended_without_answer",
    "envelope_error",
    "parse_result",
    "result_prefix",
    "timed_out",
]

HOST = AskDelivery(surface="host", degraded=False)
NONE = AskDelivery(surface="none", degraded=False)


@dataclass(frozen=True, slots=True)
class Ending:
    """How an ask ended, before it is stamped with its ids and times."""

    outcome: Outcome
    answers: tuple[QuestionAnswer, ...] | tuple[RichAnswer, ...]
    text: str
    details: dict[str, Any]
    delivery: AskDelivery = HOST
    error: ResultError | None = None


def _pi(rec: AskRecord, outcome: Outcome, answers: Sequence[QuestionAnswer], delivery: AskDelivery) -> Ending:
    assert rec.request is not None
    questions = rec.request.questions
    wire = [a.to_wire() for a in answers]
    return Ending(
        outcome=outcome,
        answers=tuple(answers),
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
    return Ending(outcome, (), format_rich_answers(result), result.to_wire(), delivery)


def answered(rec: AskRecord, answers: Sequence[QuestionAnswer]) -> Ending:
    """A human submitted answers to a pi-question ask."""
    return _pi(rec, "answered", answers, HOST)


def answered_rich(rec: AskRecord, result: RichFormResult) -> Ending:
    """A human submitted a rich form."""
    return Ending("answered", tuple(result.answers), format_rich_answers(result), result.to_wire())


def ended_without_answer(
    rec: AskRecord,
    outcome: Literal["cancelled", "dismissed", "unavailable"],
    *,
    error: ResultError | None = None,
) -> Ending:
    """Declined, withdrawn, dismissed, or no human could be reached: every question gets that status."""
    delivery = NONE if outcome == "unavailable" else HOST
    if rec.format == "rich":
        ending = _rich_cancelled(rec, outcome, delivery)
    else:
        assert rec.request is not None
        answers = [QuestionAnswer(id=q.id, status=outcome, selected=[]) for q in rec.request.questions]
        ending = _pi(rec, outcome, answers, delivery)
    return ending if error is None else replace(ending, error=error)


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
            return Ending("error", (), f"Error: {TIMEOUT_ERROR_MESSAGE}", {}, HOST, _timeout_error())
        return _rich_cancelled(rec, "timeout")
    assert rec.request is not None
    questions = rec.request.questions
    if rec.on_timeout == "error":
        answers = apply_timeout_policy(questions, "cancel")
        return Ending("error", tuple(answers), f"Error: {TIMEOUT_ERROR_MESSAGE}", {}, HOST, _timeout_error())
    answers = apply_timeout_policy(questions, rec.on_timeout)
    outcome: Outcome = "answered" if any(a.defaulted for a in answers) else "timeout"
    return _pi(rec, outcome, answers, HOST)


def _timeout_error() -> ResultError:
    return ResultError(code="timeout_error", message=TIMEOUT_ERROR_MESSAGE)


def envelope_error(code: str, message: str) -> Ending:
    """An envelope or request the bot refused: ``Error: <message>``, empty details and answers."""
    return Ending("error", (), f"Error: {message}", {}, HOST, ResultError(code=code, message=message))


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
    responder: ResultResponder | None,
    slack: ResultSlack | None,
    created_at: str | None,
    via: Via | None = None,
) -> str:
    """The result JSON up to ``"resolved_at":``; the resolve script adds the votes, Redis time and ``}``."""
    body: dict[str, Any] = {
        "v": 1,
        "ask_id": ask_id,
        "format": format,
        "outcome": ending.outcome,
        "answers": [a.to_wire() for a in ending.answers],
        "text": ending.text,
        "details": ending.details,
        "delivery": ending.delivery.to_wire(),
        "responder": responder.model_dump(mode="json") if responder is not None else None,
        "via": via,
        "slack": slack.model_dump(mode="json") if slack is not None else None,
        "error": ending.error.model_dump(mode="json") if ending.error is not None else None,
        "created_at": created_at,
    }
    return compact_json(body)[:-1] + ',"resolved_at":'


_RESULT_FIELDS = frozenset(ResultEnvelope.model_fields)


@dataclass(frozen=True, slots=True)
class StoredResult:
    """An ended ask's result, parsed once where it leaves Redis: the envelope the agent got, with its
    answers typed for its format. The ended Slack message is drawn from these, never from ``text``."""

    envelope: ResultEnvelope
    answers: tuple[QuestionAnswer, ...] = ()
    """pi-question: the answers in question order (none for an ask refused before it had a request)."""
    form: RichFormResult | None = None
    """rich: the form as answered or cancelled (the result's ``details``); None when refused."""
    reason: str | None = None
    """A cancel's reason, kept in the ask's record beside the result (it is not in the result): what
    the ended messages say after "Withdrawn by the requester", on every redraw."""

    @property
    def outcome(self) -> Outcome:
        return self.envelope.outcome

    @property
    def resolved_ms(self) -> int:
        """When the ask ended (Redis time), in milliseconds since the epoch; 0 when unknown."""
        at = self.envelope.resolved_at
        return int(datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp() * 1000) if at else 0


def parse_result(text: str | bytes) -> StoredResult:
    """A result as ``resolve.lua`` stored it, typed. Raises ``ValueError`` for anything else.

    Fields this version does not know (written by a newer replica during a rolling update) are
    ignored. ``json.loads``, not ``model_validate_json``: a text cut at 4000 UTF-16 units may end in
    half a surrogate pair (as upstream keeps it), which only the stdlib parser accepts."""
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("a stored result is a JSON object")
    envelope = ResultEnvelope.model_validate({k: v for k, v in data.items() if k in _RESULT_FIELDS})
    if envelope.format == "rich":
        form = RichFormResult.model_validate(envelope.details) if envelope.details else None
        return StoredResult(envelope, form=form)
    return StoredResult(envelope, answers=tuple(QuestionAnswer.model_validate(a) for a in envelope.answers))
