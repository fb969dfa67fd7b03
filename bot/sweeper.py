"""The timer loop: deadlines, escalation steps, reminders, and finishing ended asks' messages.

Any number of replicas sweep at once: ``claim_due`` hands each due timer to exactly one of them
(it pushes the claimed timers forward by a lease), so nothing fires twice, and a replica that dies
mid-sweep only delays its timers by the lease. A sweep costs O(log N + due), not O(N).
"""

from __future__ import annotations

import asyncio
import logging

from bot.engine import Engine
from bot.loops import IdlePause, LoopHealth, log_failure, sleep_or_stop
from bot.storage.store import Store

__all__ = ["Sweeper"]

log = logging.getLogger(__name__)


class Sweeper:
    def __init__(
        self,
        engine: Engine,
        store: Store,
        *,
        interval_ms: int,
        idle_max_ms: int | None = None,
        lease_ms: int = 30_000,
        batch: int = 100,
    ) -> None:
        self.engine = engine
        self.store = store
        # The interval bounds a timer's lateness while timers keep coming due; after an idle spell,
        # idle_max_ms does (None: no growing pause).
        self.pause = IdlePause.of(interval_ms, idle_max_ms)
        self.batch = batch
        self.lease_ms = lease_ms
        self.concurrency = 32
        self.health = LoopHealth("sweeper")
        self._failed = False

    async def sweep_once(self) -> int:
        """Claim and handle the timers due now; returns how many fired."""
        now, due = await self.store.claim_due(limit=self.batch, lease_ms=self.lease_ms)
        self._failed = False
        if due:
            try:
                await self.engine.on_due_many(due, now, concurrency=self.concurrency)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                # Claimed timers come due again when their lease ends; nothing is lost.
                self._failed = True
                self.health.failed(exc)
                log_failure(log, f"sweep of {len(due)} timers (retried after the lease)", exc)
        return len(due)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                fired = await self.sweep_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                # Whatever it is (Redis failing over, READONLY, OOM, a bug), the loop goes on.
                delay = self.health.failed(exc)
                log_failure(log, "sweep", exc, retry_s=delay)
                await sleep_or_stop(stop, delay)
                continue
            if not self._failed:
                self.health.ok()
            if fired >= self.batch:
                continue  # more are due: no pause
            # Jittered; while rounds find nothing, the pause grows (bot.loops.IdlePause).
            await sleep_or_stop(stop, self.pause.after(fired))
