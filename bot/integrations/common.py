"""What the framework integrations share, with no framework imported: ask and wait under the ask's
deadline, and a tool call turned into an approval question and its answer into a decision.

Rules every integration keeps through :func:`ask_and_wait`:

- nothing blocks the event loop (the :class:`~bot.client.AskClient` is asyncio all the way down);
- every wait is bounded by the ask's deadline (plus ``grace_s`` for the bot's recovery time,
  protocol section 10.2); when no result came by then the ask is withdrawn and the contract's
  timeout result for it is returned, exactly what the bot would have pushed;
- a cancelled task withdraws its ask (protocol section 8) before the cancellation goes on;
- an ask with a known ``ask_id`` whose result is stored is not sent again: its result is returned
  (a re-run node, a resumed graph);
- Redis down is one :class:`~bot.client.RedisUnavailableError`, never a hang past the deadline.

Tool names and arguments reach people only as agent text (a question and a Markdown code block),
which the bot escapes like every agent text: no mention, no broadcast, no link.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Unpack

from bot.client import AskClient, AskClientError, AskOptions, AskRequestError
from contract import ASK_ID_PATTERN, ResultEnvelope, build_details, narrate, normalize_ask_request
from contract.envelopes import ResultDelivery, ResultError
from contract.question import AskDelivery
from contract.timeout import TIMEOUT_ERROR_MESSAGE, apply_timeout_policy

__all__ = [
    "APPROVAL_QUESTION_ID",
    "APPROVE",
    "ASK_TOOL_DESCRIPTION",
    "DEFAULT_GRACE_S",
    "DEFAULT_TIMEOUT_MS",
    "REJECT",
    "WITHDRAWN_REASON",
    "Decision",
    "approval_request",
    "ask_and_wait",
    "ask_for_approval",
    "ask_from_tool",
    "decision_of",
    "stable_ask_id",
    "timeout_result",
    "with_ask_id",
]

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_MS: Final = 600_000
"""An integration's ask waits 10 minutes unless told otherwise (the bot's own default is 7 days)."""
DEFAULT_GRACE_S: Final = 60.0
"""How long past the deadline a wait still expects the bot's timeout result (its recovery time)."""
WITHDRAWN_REASON: Final = "the agent stopped waiting for this question"
APPROVAL_QUESTION_ID: Final = "approval"
APPROVE: Final = "Approve"
REJECT: Final = "Reject"
ASK_TOOL_DESCRIPTION: Final = (
    "Ask a person in Slack one to eight structured questions and wait for their answers. Each "
    "question needs 'question' and 1 to 12 'options' (labels, or {label, description}); 'recommended' "
    "is the zero-based index of the option you recommend; free text is offered unless allowCustom is "
    "false. Never assume an answer."
)
_ARGUMENTS_MAX: Final = 2500
_HOST: Final = AskDelivery(surface="host")


def stable_ask_id(namespace: str, *parts: object) -> str:
    """An ``ask_id`` that is the same every time for the same parts: readable when it can be
    (``namespace:part:part``), else ``namespace:`` and a hash of the parts (any text, any length)."""
    readable = ":".join([namespace, *(str(p) for p in parts)])
    if re.fullmatch(ASK_ID_PATTERN, readable):
        return readable
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()[:40]
    return f"{namespace}:{digest}"


def timeout_result(request: Mapping[str, Any], on_timeout: str | None, ask_id: str | None) -> ResultEnvelope:
    """The contract's timeout result of a pi-question ask (protocol section 6): what the bot pushes
    when the deadline passes, built here when no bot answered by then."""
    questions = normalize_ask_request(dict(request)).questions
    delivery = ResultDelivery(surface="host")
    if on_timeout == "error":
        answers = apply_timeout_policy(questions, "cancel")
        return ResultEnvelope(
            ask_id=ask_id,
            format="pi-question",
            outcome="error",
            answers=[a.to_wire() for a in answers],
            text=f"Error: {TIMEOUT_ERROR_MESSAGE}",
            details={},
            delivery=delivery,
            error=ResultError(code="timeout_error", message=TIMEOUT_ERROR_MESSAGE),
        )
    answers = apply_timeout_policy(questions, "recommended" if on_timeout == "recommended" else "cancel")
    wire = [a.to_wire() for a in answers]
    return ResultEnvelope(
        ask_id=ask_id,
        format="pi-question",
        outcome="answered" if any(a.defaulted for a in answers) else "timeout",
        answers=wire,
        text=narrate(questions, wire, _HOST),
        details=build_details(questions, wire, _HOST),
        delivery=delivery,
    )


def with_ask_id(options: AskOptions, ask_id: str) -> AskOptions:
    """A copy of ``options`` whose ``ask_id`` is ``ask_id`` unless the caller gave one."""
    copied: AskOptions = {**options}
    copied["ask_id"] = options.get("ask_id") or ask_id
    return copied


async def _withdraw(client: AskClient, ask_id: str, reply_to: str | None) -> None:
    try:
        await client.cancel(ask_id, reason=WITHDRAWN_REASON, reply_to=reply_to)
    except AskClientError as exc:  # Redis went away too: the bot's deadline still ends the ask
        log.warning("could not withdraw ask %s: %s", ask_id, exc)


async def ask_and_wait(
    client: AskClient,
    request: Mapping[str, Any],
    *,
    grace_s: float = DEFAULT_GRACE_S,
    **options: Unpack[AskOptions],
) -> ResultEnvelope:
    """Ask (pi-question ``request``) and wait for its one result, under the rules of this module.

    ``options`` are the client's (route, responders, timeout_ms, on_timeout, ask_id, ...);
    ``timeout_ms`` defaults to :data:`DEFAULT_TIMEOUT_MS`. With an ``ask_id`` whose ask already
    ended, nothing is sent and its stored result is returned.
    """
    timeout_ms = options["timeout_ms"] = options.get("timeout_ms") or DEFAULT_TIMEOUT_MS
    reply_to = options.get("reply_to")
    known = options.get("ask_id")
    if known is not None:
        stored = await client.result(known)
        if stored is not None:
            await client.wait(known, 0, reply_to=reply_to)  # its push may still be on the list
            return stored
    ask_id = await client.submit(request, **options)
    try:
        result = await client.wait(ask_id, timeout_ms / 1000 + grace_s)
    except asyncio.CancelledError:
        await asyncio.shield(_withdraw(client, ask_id, reply_to))
        raise
    if result is None:
        await _withdraw(client, ask_id, reply_to)
        return timeout_result(request, options.get("on_timeout"), ask_id)
    return result


async def ask_from_tool(
    client: AskClient, questions: list[dict[str, Any]], *, grace_s: float, options: AskOptions
) -> tuple[str, dict[str, Any]]:
    """What an ask tool gives the model: the narration and the details; a request the contract
    refuses is ``Error: <its message>`` (no details), for the model to correct."""
    try:
        result = await ask_and_wait(client, {"questions": questions}, grace_s=grace_s, **options)
    except AskRequestError as exc:
        return f"Error: {exc.message}", {}
    return result.text, result.details


# ---------------------------------------------------------------- tool-call approvals


def _fenced(text: str) -> str:
    """``text`` as a Markdown code block whose fence no run of backticks inside can close."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text}\n{fence}"


def _arguments_text(arguments: object) -> str:
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError):
            arguments = json.loads(arguments)
    text = (
        arguments
        if isinstance(arguments, str)
        else json.dumps(arguments, indent=2, ensure_ascii=False, sort_keys=True, default=str)
    )
    return text if len(text) <= _ARGUMENTS_MAX else text[:_ARGUMENTS_MAX] + "\n… (cut)"


def approval_request(tool: str, arguments: object, *, context: str | None = None) -> dict[str, Any]:
    """The pi-question request asking a person to allow one tool call: Approve or Reject, the
    arguments in a code block (agent text: the bot escapes it), ``context`` (Markdown) above them."""
    parts = [context.strip()] if context and context.strip() else []
    parts += ["Arguments:", _fenced(_arguments_text(arguments))]
    return {
        "questions": [
            {
                "id": APPROVAL_QUESTION_ID,
                "question": f"Allow the agent to run the tool {tool}?",
                "description": "\n\n".join(parts),
                "options": [
                    {"label": APPROVE, "description": "run the tool with these arguments"},
                    {"label": REJECT, "description": "do not run it (a note tells the agent why)"},
                ],
                "allowCustom": False,
            }
        ]
    }


@dataclass(frozen=True)
class Decision:
    """A person's decision on a tool call: ``approved``, and ``message`` (for the model) when not."""

    approved: bool
    message: str | None
    result: ResultEnvelope


def _note(result: ResultEnvelope) -> str | None:
    for answer in result.answers:
        note = answer.get("note") if isinstance(answer, Mapping) else None
        if isinstance(note, str) and note.strip():
            return note.strip()
    return None


def decision_of(result: ResultEnvelope, tool: str) -> Decision:
    """The decision an approval ask's result carries. Only a person's Approve approves; Reject,
    Decline, a timeout, a dismissal or an error reject, with the person's note or Decline reason as
    the message, else a sentence saying what happened."""
    [answer] = result.answers[:1] or [{}]
    selected = answer.get("selected") if isinstance(answer, Mapping) else None
    defaulted = isinstance(answer, Mapping) and answer.get("defaulted")
    if result.outcome == "answered" and selected == [0] and not defaulted:
        return Decision(True, None, result)
    who = result.responder.name or result.responder.id if result.responder else "a person"
    note = _note(result)
    if result.outcome == "answered":
        message = f"{who} rejected the call to {tool} in Slack" + (f": {note}" if note else ".")
    elif result.outcome == "cancelled":
        message = note or f"The call to {tool} was declined in Slack."
    elif result.outcome == "timeout":
        message = f"Nobody approved the call to {tool} in Slack before the deadline; it was not run."
    else:
        message = f"The call to {tool} was not approved ({result.outcome}): {result.text}"
    return Decision(False, message, result)


async def ask_for_approval(
    client: AskClient,
    tool: str,
    arguments: object,
    *,
    context: str | None = None,
    grace_s: float = DEFAULT_GRACE_S,
    **options: Unpack[AskOptions],
) -> Decision:
    """Ask a person to allow one tool call and wait for the decision (:func:`ask_and_wait`)."""
    result = await ask_and_wait(
        client, approval_request(tool, arguments, context=context), grace_s=grace_s, **options
    )
    return decision_of(result, tool)
