"""The Workflow Builder step's loop: completes each step whose ask has ended, exactly once.

Every round takes the results waiting on the step's reply list (``StepStore.take``: taken and claimed
in one atomic step) and the executions whose look is due (a claim ended by a crash, an ask not sent
yet, a deadline passed), and hands each to ``WorkflowSteps.finish``. Any number of replicas run it; a
claim gives each execution to one of them at a time, for a lease.
"""

from __future__ import annotations

import asyncio
import logging

from bot.engine.workflow import WorkflowSteps
from bot.errors import SlackError
from bot.loops import IdlePause, LoopHealth, log_failure, sleep_or_stop

__all__ = ["StepLoop"]

log = logging.getLogger(__name__)


class StepLoop:
    def __init__(
        self, steps: WorkflowSteps, *, interval_ms: int, idle_max_ms: int | None = None, batch: int = 50
    ) -> None:
        self.steps = steps
        self.pause = IdlePause.of(interval_ms, idle_max_ms)
        self.batch = batch
        self.health = LoopHealth("workflow")

    async def run_once(self) -> int:
        """One round: results just pushed first, then due looks; returns how many were handled."""
        store, lease = self.steps.steps, self.steps.lease_ms
        now, taken = await store.take(limit=self.batch, lease_ms=lease)
        for ask_id, result in taken:
            await self._finish(ask_id, now + lease, result)
        now, due = await store.claim_due(limit=self.batch, lease_ms=lease)
        for ask_id in due:
            await self._finish(ask_id, now + lease, None)
        return len(taken) + len(due)

    async def _finish(self, ask_id: str, claimed_until_ms: int, result: str | None) -> None:
        try:
            await self.steps.finish(ask_id, claimed_until_ms=claimed_until_ms, result=result)
        except asyncio.CancelledError:
            raise
        except SlackError as exc:
            # Slack away or busy: the claim's lease ends and a sweep completes the step then.
            log.warning("step %s: not completed yet (%s); retried after the lease", ask_id, exc)
        except Exception as exc:
            log_failure(log, f"completing step {ask_id} (retried after the lease)", exc)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                handled = await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                delay = self.health.failed(exc)
                log_failure(log, "the workflow step loop", exc, retry_s=delay)
                await sleep_or_stop(stop, delay)
                continue
            self.health.ok()
            if handled >= self.batch:
                continue
            # Jittered; while rounds find nothing, the pause grows (bot.loops.IdlePause).
            await sleep_or_stop(stop, self.pause.after(handled))
