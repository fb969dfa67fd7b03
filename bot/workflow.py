"""Pure: the Workflow Builder step "Ask a question" (a Slack custom step, docs/workflow-step.md).

Two translations, both without I/O:

* :func:`step_envelope`: the step's inputs (``function_executed``'s ``inputs``) -> the ask envelope
  the step sends through the ordinary intake, or a :class:`StepRefusal` whose message ends the step
  with ``functions.completeError`` (no options, 13 options, both a channel and a person, ...).
* :func:`step_completion`: the ask's stored result -> how the step ends: ``functions.completeSuccess``
  with outputs the workflow can branch on (answered, declined, timeout, dismissed, cancelled), or
  ``functions.completeError`` with the reason (unavailable, error).

The names here are the ones ``manifest.yml`` declares under ``functions.ask_question``; a test
keeps the two equal.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.asks import Rejection, build_record, max_timeout_ms
from bot.config import Settings
from bot.results import StoredResult
from contract import LIMITS
from contract.envelopes import APPROVAL_MAX, APPROVAL_MIN, EnvelopeError, parse_ask_envelope

__all__ = [
    "CALLBACK_ID",
    "INPUTS",
    "OUTPUTS",
    "StepCompletion",
    "StepRefusal",
    "step_ask_id",
    "step_completion",
    "step_envelope",
]

CALLBACK_ID = "ask_question"
"""The step's ``callback_id`` in ``manifest.yml`` (``functions:``) and in ``app.function(...)``."""

INPUTS = ("question", "options", "channel", "user", "answerers", "timeout_minutes", "approvals", "requester")
OUTPUTS = ("outcome", "choice", "choice_index", "answered_by", "note", "ask_id")


@dataclass(frozen=True, slots=True)
class StepRefusal:
    """Inputs the step cannot ask with; ``message`` goes to ``functions.completeError``."""

    message: str


@dataclass(frozen=True, slots=True)
class StepCompletion:
    """How the step ends: ``outputs`` for ``functions.completeSuccess``, else ``error`` for
    ``functions.completeError``."""

    outputs: dict[str, Any] | None = None
    error: str | None = None


def step_ask_id(execution_id: str) -> str:
    """The ask's id: one ask per step execution, so a repeated ``function_executed`` asks once."""
    return f"wf.{execution_id}"


def _text(inputs: Mapping[str, Any], name: str) -> str | None:
    value = inputs.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return value if isinstance(value, str) else str(value)


def _number(inputs: Mapping[str, Any], name: str) -> float | StepRefusal | None:
    value = inputs.get(name)
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return StepRefusal(f"{name}: a number is needed, got {value!r}")
    try:
        number = float(value)
    except ValueError:
        return StepRefusal(f"{name}: a number is needed, got {value!r}")
    if number != number or number in (float("inf"), float("-inf")):
        return StepRefusal(f"{name}: a number is needed, got {value!r}")
    return number


def _integer(inputs: Mapping[str, Any], name: str) -> int | StepRefusal | None:
    number = _number(inputs, name)
    if number is None or isinstance(number, StepRefusal):
        return number
    if number != int(number):
        return StepRefusal(f"{name}: a whole number is needed, got {number:g}")
    return int(number)


def _options(inputs: Mapping[str, Any]) -> list[str] | StepRefusal:
    raw = inputs.get("options")
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        return StepRefusal("options: a list of option labels is needed")
    labels = [str(o).strip() for o in raw if str(o).strip()]
    if not labels:
        return StepRefusal("options: give at least 1 option to choose from (got none)")
    if len(labels) > LIMITS.max_options:
        most = LIMITS.max_options
        return StepRefusal(f"options: at most {most} options can be offered (got {len(labels)})")
    return labels


def step_envelope(
    inputs: Mapping[str, Any], *, execution_id: str, reply_to: str, settings: Settings
) -> dict[str, Any] | StepRefusal:
    """The ask envelope for one execution of the step, or why it cannot ask. Everything the intake
    would refuse is refused here first, with the step's own input names in the message."""
    question = _text(inputs, "question")
    if question is None:
        return StepRefusal("question: the question to ask is required")
    options = _options(inputs)
    if isinstance(options, StepRefusal):
        return options
    channel, user = _text(inputs, "channel"), _text(inputs, "user")
    if channel and user:
        return StepRefusal("channel, user: ask in a channel or in a DM with one person, not both")
    if not channel and not user and settings.default_route is None:
        return StepRefusal("channel, user: say where to ask (a channel, or a person for a DM)")
    envelope: dict[str, Any] = {
        "v": 1,
        "ask_id": step_ask_id(execution_id),
        "reply_to": reply_to,
        "request": {"id": "answer", "question": question, "options": options},
        "on_timeout": "cancel",
        "requester": {"name": "Workflow Builder"},
    }
    if channel or user:
        envelope["route"] = {"channel": channel} if channel else {"user": user}
    answerers = inputs.get("answerers")
    if answerers is not None and not isinstance(answerers, list):
        return StepRefusal("answerers: a list of people is needed")
    if answerers:
        envelope["responders"] = {"users": [str(u) for u in answerers]}
    requester = _text(inputs, "requester")
    if requester:
        envelope["requester"]["user"] = requester
    minutes = _number(inputs, "timeout_minutes")
    if isinstance(minutes, StepRefusal):
        return minutes
    if minutes is not None:
        most = max_timeout_ms(settings) // 60_000
        if not 1 / 60 <= minutes <= most:
            return StepRefusal(f"timeout_minutes: from 1 second (1/60) to {most} minutes, got {minutes:g}")
        envelope["timeout_ms"] = round(minutes * 60_000)
    approvals = _integer(inputs, "approvals")
    if isinstance(approvals, StepRefusal):
        return approvals
    if approvals is not None and approvals > 1:
        if approvals > APPROVAL_MAX:
            return StepRefusal(f"approvals: from {APPROVAL_MIN} to {APPROVAL_MAX} people, got {approvals}")
        envelope["approval"] = {"count": approvals}
    elif approvals is not None and approvals < 0:
        return StepRefusal(f"approvals: from {APPROVAL_MIN} to {APPROVAL_MAX} people, got {approvals}")
    return _checked(envelope, settings)


def _checked(envelope: dict[str, Any], settings: Settings) -> dict[str, Any] | StepRefusal:
    """The intake's own checks, run before the ask is sent (so none of them ends it later)."""
    try:
        parsed = parse_ask_envelope(json.dumps(envelope))
    except EnvelopeError as exc:
        return StepRefusal(exc.message)
    built = build_record(parsed, tag="check", created_ms=0, settings=settings)
    if isinstance(built, Rejection) and built.kind == "error":
        return StepRefusal(built.message)
    return envelope


_SUCCESS_OUTCOMES = frozenset({"answered", "timeout", "dismissed", "cancelled"})


def step_completion(result: StoredResult) -> StepCompletion:
    """How the step ends for the ask's result (docs/workflow-step.md, "What each outcome does")."""
    env = result.envelope
    if env.outcome not in _SUCCESS_OUTCOMES:
        message = env.error.message if env.error is not None else f"the ask ended {env.outcome}"
        return StepCompletion(error=f"slack-ask could not ask: {message}")
    answer = result.answers[0] if result.answers else None
    outputs: dict[str, Any] = {"outcome": env.outcome, "ask_id": env.ask_id}
    if env.outcome == "cancelled" and env.responder is not None:
        outputs["outcome"] = "declined"  # a person pressed Decline (a withdrawn ask names nobody)
    if env.outcome == "answered" and answer is not None and answer.selected:
        index = answer.selected[0]
        request_options = _labels(env.details)
        outputs["choice_index"] = index
        if 0 <= index < len(request_options):
            outputs["choice"] = request_options[index]
    if env.responder is not None:
        outputs["answered_by"] = env.responder.id
    if answer is not None and answer.note:
        outputs["note"] = answer.note
    return StepCompletion(outputs=outputs)


def _labels(details: Mapping[str, Any]) -> list[str]:
    """The option labels of the ask's one question, from the result's details (``results[0]``)."""
    results = details.get("results") if isinstance(details, Mapping) else None
    if isinstance(results, list) and results and isinstance(results[0], Mapping):
        options = results[0].get("options")
        if isinstance(options, list):
            return [str(o) for o in options]
    return []
