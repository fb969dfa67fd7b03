"""The Home tab's publisher loop (docs/home.md): people whose tab is to be published again are
taken off ``P:{home}:dirty`` (``home_claim.lua`` hands each to one replica, for a lease), drawn
fresh from Redis and published; each is done once Slack took it, or comes due again at the lease's
end if this replica dies or Slack failed. Several changes for one person within the coalescing delay
are one entry, so one publish. Every call goes through the gateway (pacing, 429s, 5xx)."""

from __future__ import annotations

import asyncio
import logging

from bot.engine.home import Home
from bot.errors import SlackError
from bot.loops import IdlePause, LoopHealth, log_failure, sleep_or_stop
from bot.storage.store import Store

__all__ = ["HomeLoop"]

log = logging.getLogger(__name__)


class HomeLoop:
    def __init__(
        self,
        home: Home,
        store: Store,
        *,
        interval_ms: int = 250,
        idle_max_ms: int | None = None,
        lease_ms: int = 30_000,
        batch: int = 20,
        concurrency: int = 4,
    ) -> None:
        self.home = home
        self.store = store
        self.pause = IdlePause.of(interval_ms, idle_max_ms)
        self.lease_ms = lease_ms
        self.batch = batch
        self.concurrency = concurrency
        self.health = LoopHealth("home")
        self.published = 0
        """Tabs this replica published (for benchmarks and tests)."""

    async def _one(self, user: str, claim: str, slots: asyncio.Semaphore) -> None:
        async with slots:
            try:
                done = await self.home.publish(user)
            except SlackError as exc:
                # Slack's time ran out (5xx, unreachable): the claim's lease brings it back.
                log.warning("home tab of %s not published yet: %s", user, exc)
                return
            if done:
                self.published += 1
                await self.store.home_done(user, claim)

    async def run_once(self) -> int:
        """Publish the tabs due now; returns how many were claimed."""
        claimed = await self.store.home_claim(self.batch, self.lease_ms)
        if claimed:
            slots = asyncio.Semaphore(self.concurrency)
            outcomes = await asyncio.gather(
                *(self._one(user, claim, slots) for user, claim in claimed), return_exceptions=True
            )
            for (user, _), outcome in zip(claimed, outcomes, strict=True):
                if isinstance(outcome, asyncio.CancelledError):
                    raise outcome
                if isinstance(outcome, BaseException):
                    log_failure(log, f"publishing the home tab of {user} (again after the lease)", outcome)
        return len(claimed)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                claimed = await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                delay = self.health.failed(exc)
                log_failure(log, "home tab publishing", exc, retry_s=delay)
                await sleep_or_stop(stop, delay)
                continue
            self.health.ok()
            if claimed >= self.batch:
                continue
            # Jittered; while rounds find nothing, the pause grows (bot.loops.IdlePause).
            await sleep_or_stop(stop, self.pause.after(claimed))
