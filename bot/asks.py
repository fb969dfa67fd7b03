"""Pure: from a parsed ask envelope (plus settings and policies) to the record the bot keeps.

Checks run in the protocol's order: the request (``invalid_request``), the named policy and the
security guard (``invalid_envelope``), then the route (``no_route`` makes the ask ``unavailable``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bot.config import Policy, Settings
from bot.model import AskRecord
from contract import ContractError, normalize_ask_request, normalize_rich_form
from contract.approval import approval_problem
from contract.envelopes import AskEnvelope, Route

__all__ = ["Rejection", "build_record", "route_text"]


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why an ask cannot be taken: ``code`` is the protocol error code."""

    kind: Literal["error", "unavailable"]
    code: str
    message: str
    record: AskRecord | None = None
    """For ``unavailable``: the normalized ask, so every question can say ``unavailable``."""


def route_text(route: Route | None) -> str:
    if route is None:
        return "(none)"
    if route.channel is not None:
        return f"#{route.channel}" + (f" thread {route.thread_ts}" if route.thread_ts else "")
    if route.user is not None:
        return f"@{route.user}"
    return f"policy:{route.policy}"


def max_timeout_ms(settings: Settings) -> int:
    """The largest ``timeout_ms`` an ask may name: the policy file's cap, else the setting."""
    return settings.defaults.max_timeout_ms or settings.max_timeout_ms


def _number_problem(env: AskEnvelope, settings: Settings) -> str | None:
    """Protocol section 2: a number out of its range is ``invalid_envelope`` naming the field and the
    range, before anything else is looked at (never a failure later, such as a year 33715)."""
    most = max_timeout_ms(settings)
    if env.timeout_ms is not None and not 0 <= env.timeout_ms <= most:
        return f"timeout_ms must be from 0 to {most} (SLACK_ASK_MAX_TIMEOUT_MS), got {_shown(env.timeout_ms)}"
    if env.remind_every_ms is not None and not 0 <= env.remind_every_ms <= most:
        return f"remind_every_ms must be from 0 to {most}, got {_shown(env.remind_every_ms)}"
    for i, step in enumerate(env.escalate):
        if not 0 <= step.after_ms <= most:
            return f"escalate.{i}.after_ms must be from 0 to {most}, got {_shown(step.after_ms)}"
    return None


def _shown(value: int) -> str:
    text = str(value)
    return text if len(text) <= 24 else text[:21] + "..."


def build_record(env: AskEnvelope, *, tag: str, created_ms: int, settings: Settings) -> AskRecord | Rejection:
    problem = _number_problem(env, settings)
    if problem is not None:
        return Rejection("error", "invalid_envelope", problem)
    request = form = None
    try:
        if env.format == "rich":
            form = normalize_rich_form(env.request)
        else:
            request = normalize_ask_request(env.request)
    except ContractError as exc:
        return Rejection("error", "invalid_request", str(exc))

    policy = Policy()
    route = env.route
    if route is not None and route.policy is not None:
        found = settings.policy_file.policies.get(route.policy)
        if found is None:
            known = ", ".join(sorted(settings.policy_file.policies)) or "none are configured"
            return Rejection(
                "error",
                "invalid_envelope",
                f"route.policy: no policy named {route.policy!r} (known: {known})",
            )
        policy = found
        route = policy.route

    responders = env.responders if env.responders is not None else policy.responders
    if (
        request is not None
        and not settings.open_security_asks
        and any(q.category == "security-permission" for q in request.questions)
        and (responders is None or (not responders.users and not responders.usergroups))
    ):
        return Rejection(
            "error",
            "invalid_envelope",
            "responders: a question of category security-permission needs responders (users or usergroups); "
            "name who may approve it, or have the operator set SLACK_ASK_OPEN_SECURITY_ASKS=true",
        )

    approval = env.approval if env.approval is not None else policy.approval
    on_timeout = env.on_timeout or policy.on_timeout or settings.defaults.on_timeout
    if approval is not None:
        problem = approval_problem(approval, format=env.format, request=request, on_timeout=on_timeout)
        if problem is not None:
            return Rejection("error", "invalid_envelope", problem)

    if route is None:
        route = settings.default_route

    defaults = settings.defaults
    # Every ask has a deadline: one that names none gets the configured default.
    timeout = min(
        env.timeout_ms or policy.timeout_ms or defaults.timeout_ms or settings.default_timeout_ms,
        max_timeout_ms(settings),
    )
    for i, step in enumerate(env.escalate):
        if step.after_ms >= timeout:
            return Rejection(
                "error",
                "invalid_envelope",
                f"escalate.{i}.after_ms must be before the deadline (below {timeout}, the ask's timeout_ms), "
                f"got {step.after_ms}",
            )
    # A policy's steps past this ask's deadline would never run.
    escalate = list(env.escalate) or [s for s in policy.escalate or [] if s.after_ms < timeout]
    remind = env.remind_every_ms if env.remind_every_ms is not None else policy.remind_every_ms
    if remind:
        remind = max(remind, settings.min_remind_ms)
    label = route_text(env.route) if env.route is not None and env.route.policy else ""
    text = route_text(route) if not label else f"{label} -> {route_text(route)}"
    record = AskRecord(
        ask_id=env.ask_id,
        tag=tag,
        reply_to=env.reply_to,
        format=env.format,
        request=request,
        form=form,
        route=route,
        route_text=text,
        responders=responders,
        requester=env.requester,
        created_ms=created_ms,
        deadline_ms=created_ms + timeout,
        on_timeout=on_timeout,
        escalate=escalate,
        remind_every_ms=remind or None,
        max_reminders=policy.max_reminders if policy.max_reminders is not None else defaults.max_reminders,
        approval=approval,
        thread_answers=next(
            (v for v in (env.thread_answers, policy.thread_answers) if v is not None), settings.thread_answers
        ),
    )
    if route is None:
        return Rejection(
            "unavailable",
            "no_route",
            "The ask names no route and no default route is configured "
            "(set SLACK_ASK_DEFAULT_CHANNEL or a default route in the policy file)",
            record=record,
        )
    return record
