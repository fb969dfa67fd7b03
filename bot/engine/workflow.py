"""The Workflow Builder step "Ask a question" (docs/workflow-step.md): Slack runs it, the bot asks.

``function_executed`` -> the inputs become an ordinary ask (bot/workflow.py), sent through the intake
stream with ``reply_to`` the step's own list, so deadlines, reminders, escalation, who may answer
and approvals all apply. Before it is sent, the execution is recorded in Redis with its id and the
just-in-time token (``StepStore.begin``). When the ask ends, its result lands on that list; the
step loop (bot/step_loop.py) takes it, or a sweep finds it in the ask's stored result after a crash,
and :meth:`WorkflowSteps.finish` ends the step: ``functions.completeSuccess`` or
``functions.completeError``. Slack refuses a second completion (``execution_not_in_running_state``),
so a replica that dies after Slack took the call but before the record says done costs one refused
call, never a second completion.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from bot.asks import max_timeout_ms
from bot.engine.room import Room, Shared, lease_deadline
from bot.errors import SlackError, SlackPermanentError
from bot.results import StoredResult, parse_result
from bot.storage.steps import StepRecord, StepStore
from bot.workflow import StepCompletion, StepRefusal, step_ask_id, step_completion, step_envelope

__all__ = ["JIT_TOKEN_LIFE_MS", "WorkflowSteps"]

log = logging.getLogger(__name__)

JIT_TOKEN_LIFE_MS = 14 * 60_000
"""How long the bot uses the token ``function_executed`` brought: Slack's just-in-time tokens live 15
minutes at most (and end with the step); past that, the bot's own token completes the step."""

_NOT_RUNNING = frozenset({"execution_not_in_running_state", "function_execution_not_found"})
"""Slack's answers for an execution that is completed already (or that Slack ended itself)."""
_TOKEN_REFUSED = frozenset({"token_expired", "token_revoked", "invalid_auth", "not_authed"})


class WorkflowSteps(Room):
    """The step's I/O: take ``function_executed``, send the ask, complete the step exactly once."""

    def __init__(self, shared: Shared, steps: StepStore) -> None:
        super().__init__(shared)
        self.steps = steps
        self.lease_ms = self.settings.timer_lease_ms
        self.first_look_ms = self.settings.timer_lease_ms

    async def on_executed(self, event: Mapping[str, Any], ack: Callable[[], Awaitable[Any]]) -> None:
        """One ``function_executed`` of the step. ``ack`` is called once the execution is recorded:
        an event the bot could not record (Redis away) is not acknowledged, and Slack sends it again."""
        execution_id = str(event.get("function_execution_id") or "")
        token = str(event.get("bot_access_token") or "")
        inputs = event.get("inputs")
        if not execution_id:
            await ack()
            return
        ask_id = step_ask_id(execution_id)
        built = step_envelope(
            inputs if isinstance(inputs, Mapping) else {},
            execution_id=execution_id,
            reply_to=self.steps.keys.step_replies,
            settings=self.settings,
        )
        refusal = built.message if isinstance(built, StepRefusal) else ""
        envelope = "" if isinstance(built, StepRefusal) else json.dumps(built)
        timeout_ms = 0 if isinstance(built, StepRefusal) else int(built.get("timeout_ms") or 0)
        pending_ms = timeout_ms or max_timeout_ms(self.settings)  # no deadline given: the longest one
        new = await self.steps.begin(
            ask_id,
            execution_id=execution_id,
            token=token,
            envelope=envelope,
            refusal=refusal,
            first_look_ms=self.first_look_ms,
            ttl_ms=pending_ms + self.steps.retention_ms,
        )
        await ack()
        if not new:
            log.info("step %s: function_executed again for a known execution; nothing to do", ask_id)
            return
        if refusal:
            log.info("step %s: inputs refused: %s", ask_id, refusal)
            now = await self.steps.server_time_ms()
            try:
                await self.finish(ask_id, claimed_until_ms=now + self.first_look_ms)
            except SlackError as exc:
                # The first look (already scheduled) tells Slack once it answers.
                log.warning("step %s: not failed yet (%s); retried by the sweep", ask_id, exc)
            return
        await self.steps.send_ask(envelope)
        log.info("step %s: asked through the intake stream", ask_id)

    async def finish(self, ask_id: str, *, claimed_until_ms: int, result: str | None = None) -> None:
        """Complete the step of ``ask_id`` if its ask has ended (``result``: the result just taken off
        the reply list; else the stored one); otherwise look again later. The caller holds the claim."""
        record = await self.steps.load(ask_id)
        if record is None or record.state == "done":
            await self.steps.done(ask_id, "gone" if record is None else record.how)
            return
        if record.refusal:
            await self._complete(record, StepCompletion(error=f"slack-ask could not ask: {record.refusal}"))
            return
        stored = parse_result(result) if result is not None else await self._stored(ask_id)
        if stored is None:
            await self._look_later(record, claimed_until_ms)
            return
        await self._complete(record, step_completion(stored))

    async def _stored(self, ask_id: str) -> StoredResult | None:
        loaded = await self.store.find(ask_id)
        return loaded.result if loaded is not None else None

    async def _look_later(self, record: StepRecord, claimed_until_ms: int) -> None:
        """The ask has not ended: look again after its deadline (its result comes sooner through the
        reply list). An ask the intake has not taken yet (the replica that recorded the step died before
        sending it, or the stream is behind) is sent again: a duplicate entry asks once."""
        loaded = await self.store.find(record.ask_id)
        now = await self.steps.server_time_ms()
        if loaded is None:
            await self.steps.send_ask(record.envelope)
            at = now + self.first_look_ms
        else:
            at = max(loaded.record.deadline_ms or 0, now) + 2 * self.lease_ms
        await self.steps.later(record.ask_id, claimed_until_ms=claimed_until_ms, at_ms=at)

    async def _complete(self, record: StepRecord, completion: StepCompletion) -> None:
        now = await self.steps.server_time_ms()
        fresh = record.token is not None and now - record.token_ms < JIT_TOKEN_LIFE_MS
        token = record.token if fresh else None
        try:
            try:
                how = await self._call(record, completion, token)
            except SlackPermanentError as exc:
                if token is None or exc.code not in _TOKEN_REFUSED:
                    raise
                # The just-in-time token is gone (expired early, revoked): the bot's own token completes it.
                how = await self._call(record, completion, None)
        except SlackPermanentError as exc:
            # Retrying cannot fix it (access_denied, say): said once, and the step is left to Slack.
            log.warning("step %s: Slack refused to complete it: %s", record.ask_id, exc)
            how = f"refused by Slack ({exc.code})"
        if await self.steps.done(record.ask_id, how):
            log.info("step %s: %s", record.ask_id, how)

    async def _call(self, record: StepRecord, completion: StepCompletion, token: str | None) -> str:
        """One completion call; returns how the step ended. Transient trouble raises, and the step is
        completed when its claim's lease ends (the sweep)."""
        deadline = lease_deadline(self.lease_ms)
        where = f"for step {record.ask_id}"
        try:
            if completion.outputs is not None:
                try:
                    await self.slack.call(
                        "functions.completeSuccess",
                        where=where,
                        deadline=deadline,
                        token=token,
                        function_execution_id=record.execution_id,
                        outputs=completion.outputs,
                    )
                    return f"completed: {completion.outputs.get('outcome')}"
                except SlackPermanentError as exc:
                    if exc.code != "parameter_validation_failed":
                        raise
                    log.error(
                        "step %s: Slack refused the outputs %s (a bug)", record.ask_id, completion.outputs
                    )
                    refused = "slack-ask could not hand the answer to the workflow (outputs refused)"
                    completion = StepCompletion(error=refused)
            await self.slack.call(
                "functions.completeError",
                where=where,
                deadline=deadline,
                token=token,
                function_execution_id=record.execution_id,
                error=completion.error or "slack-ask could not ask",
            )
            return f"failed: {completion.error}"
        except SlackPermanentError as exc:
            if exc.code in _NOT_RUNNING:
                return f"no longer running at Slack ({exc.code})"
            raise
