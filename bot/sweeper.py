"""The timer loop: deadlines, escalation steps, reminders, and finishing ended asks' messages.

Any number of replicas sweep at once: ``claim_due`` hands each due timer to exactly one of them
(it pushes the claimed timers forward by a lease), so nothing fires twice, and a replica that dies
mid-sweep only delays its timers by the lease. A sweep costs O(log N + due), not O(N).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random

from redis.exceptions import RedisError

from bot.engine import Engine
from bot.storage.store import Store

__all__ = ["Sweeper"]

log = logging.getLogger(__name__)


class Sweeper:
    def __init__(
        self, engine: Engine, store: Store, *, interval_ms: int, lease_ms: int = 30_000, batch: int = 100
    ) -> None:
        self.engine = engine
        self.store = store
        self.interval_s = interval_ms / 1000
        self.batch = batch
        self.lease_ms = lease_ms
        self.concurrency = 32

    async def sweep_once(self) -> int:
        """Claim and handle the timers due now; returns how many fired."""
        now, due = await self.store.claim_due(limit=self.batch, lease_ms=self.lease_ms)
        if due:
            try:
                await self.engine.on_due_many(due, now, concurrency=self.concurrency)
            except Exception:
                # Claimed timers come due again when their lease ends; nothing is lost.
                log.exception("sweep of %d timers failed; they are retried after the lease", len(due))
        return len(due)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                fired = await self.sweep_once()
            except RedisError as exc:
                log.warning("sweep failed: %s", exc)
                fired = 0
            if fired >= self.batch:
                continue  # more are due: no pause
            # Jitter spreads replicas' sweeps; the interval bounds timer lateness.
            pause = self.interval_s * (0.75 + random.random() / 2)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=pause)
