"""Intake leases held while a delivery is in flight, renewed so that a slow Slack call keeps its ask
and a dead holder's ask is taken over within one short lease.

``accept.lua`` grants a lease of ``L`` (``Settings.intake_lease``, 6 s by default). A delivery that is
done within a quarter of it (nearly all: a post takes milliseconds) costs no renewal at all. One
task per replica renews, in one round trip, every lease older than a quarter of ``L``
(``renew.lua``), so a live lease always has at least two thirds of ``L`` left; a crashed or frozen holder
stops renewing and its lease runs out in Redis within ``L``. A renewal never brings back a lease
that ran out in Redis time, and whatever the holder does under it stays fenced (``stale_lease``).

Two local clocks bound the work (``time.monotonic()``): ``deadline``, by which Slack calls stop
(measured from when the grant or renewal was *asked*, minus ``LEASE_MARGIN``: always before Redis's
end), and ``until``, by which the lease has surely run out in Redis (measured from when the answer
*came back*, plus one more lease while a renewal is unanswered, since it may still land): a Redis
call made under the lease is cut there, and once Redis answers after that, the record decides.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Iterator

from redis.exceptions import RedisError

from bot.engine.room import LEASE_MARGIN
from bot.storage.records import Lease
from bot.storage.store import Store

__all__ = ["HeldLease", "LeaseKeeper"]

log = logging.getLogger(__name__)

RENEW_AFTER = 1 / 4
"""The share of a lease after which it is renewed (checked every third of that): renewed at most a
third of a lease after the last renewal was asked, while Slack calls may go on for 0.8 of it, so the
renewal has 0.47 of a lease (2.8 s by default) to come back before any call is cut."""


class HeldLease:
    """One intake lease this replica holds for a delivery in flight (a ``MovingDeadline`` for the
    Slack gateway: its calls follow the renewals, and are cut when renewing stops)."""

    __slots__ = (
        "_cuts",
        "ask_id",
        "asked",
        "cut",
        "deadline",
        "last",
        "lease",
        "lease_s",
        "lost",
        "renewing",
        "tag",
        "until",
    )

    def __init__(self, lease: Lease, tag: str, ask_id: str, *, asked: float, answered: float, lease_ms: int):
        self.lease = lease
        self.tag = tag
        self.ask_id = ask_id
        self.lease_s = lease_ms / 1000
        self.asked = asked
        self.deadline = asked + self.lease_s * (1 - LEASE_MARGIN)
        self.until = answered + self.lease_s
        self.lost = ""
        self.cut = False  # a Slack call was cut by the lease's end (it may have landed)
        self.last = float("inf")  # not renewed after this (LeaseKeeper.longest_s)
        self.renewing = False
        self._cuts: set[asyncio.Timeout] = set()

    @property
    def at(self) -> float:
        return self.deadline

    @contextlib.asynccontextmanager
    async def bound(self) -> AsyncIterator[None]:
        """Run the block until ``deadline``, following renewals (TimeoutError once it passes)."""
        async with asyncio.timeout_at(self.deadline) as cut:
            self._cuts.add(cut)
            try:
                yield
            finally:
                self._cuts.discard(cut)

    def renewed(self, asked: float, answered: float) -> None:
        self.asked = asked
        self.deadline = max(self.deadline, asked + self.lease_s * (1 - LEASE_MARGIN))
        self.until = answered + self.lease_s
        self._move()

    def lose(self, who: str) -> None:
        """The lease is no longer this replica's: Slack calls under it stop now."""
        self.lost = who
        self.deadline = min(self.deadline, time.monotonic())
        self._move()

    def _move(self) -> None:
        for cut in self._cuts:
            if not cut.expired():
                cut.reschedule(self.deadline)


class LeaseKeeper:
    """The leases of this replica's deliveries in flight, and the one task that renews them."""

    def __init__(self, store: Store, lease_ms: int, *, longest_ms: int) -> None:
        self.store = store
        self.lease_ms = lease_ms
        self.longest_s = longest_ms / 1000
        """No delivery is renewed past this (a hung call must not hold its ask until the deadline)."""
        self._held: set[HeldLease] = set()
        self._task: asyncio.Task[None] | None = None
        self.renewals = 0
        """Leases renewed so far (for tests and benchmarks)."""

    @contextlib.contextmanager
    def hold(self, held: HeldLease) -> Iterator[HeldLease]:
        """Renew ``held`` for as long as the block runs; a crash (the task cancelled) stops it."""
        held.last = held.asked + self.longest_s
        self._held.add(held)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._renew_loop(), name="lease-renewal")
        try:
            yield held
        finally:
            self._held.discard(held)

    def close(self) -> asyncio.Task[None] | None:
        """Stop renewing (the replica stops or crashes): held leases run out within one lease. Returns
        the renewal task just cancelled, if any."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
        return task

    async def _renew_loop(self) -> None:
        # Lives while leases are held: a replica with no delivery in flight does nothing.
        tick = self.lease_ms / 1000 * RENEW_AFTER / 3
        while self._held:
            await asyncio.sleep(tick)
            now = time.monotonic()
            due = [
                h
                for h in self._held
                if not h.renewing and not h.lost and now - h.asked >= tick * 3 and now < h.last
            ]
            if due:
                await self._renew(due)

    async def _renew(self, due: list[HeldLease]) -> None:
        asked = time.monotonic()
        for held in due:
            # A renewal on its way may still land: Redis's end may move one lease past ours until
            # its answer is back.
            held.renewing = True
            held.until += held.lease_s
        try:
            async with asyncio.timeout(self.lease_ms / 1000 / 2):
                answers = await self.store.renew_leases(
                    [(h.tag, h.ask_id, h.lease.owner, h.lease.token) for h in due], self.lease_ms
                )
        except (RedisError, TimeoutError) as exc:
            # Not renewed (or not known to be): the Slack calls keep their old deadline, and stop at
            # it unless a later renewal lands; `until` keeps the extra lease (it may have landed).
            log.warning("could not renew %d intake leases: %s", len(due), exc)
            for held in due:
                held.renewing = False
            return
        answered = time.monotonic()
        for held, who in zip(due, answers, strict=True):
            held.renewing = False
            if who:
                log.warning("stale lease %s on %s (now %s): its delivery stops", held.lease, held.ask_id, who)
                held.until -= held.lease_s  # refused: Redis's end did not move
                held.lose(who)
            else:
                self.renewals += 1
                held.renewed(asked, answered)
