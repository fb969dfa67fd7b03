"""The intake stream: read through the consumer group, reclaim what dead replicas left, ack, park."""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from functools import cached_property
from typing import Any

from redis.exceptions import ResponseError

from bot.storage.base import StoreBase
from bot.storage.group_commit import GroupCommit
from bot.storage.keys import DEAD_MAXLEN, GROUP
from bot.storage.records import Entry, _entry, _s

__all__ = ["IntakeStream"]

log = logging.getLogger(__name__)


class IntakeStream(StoreBase):
    """The intake stream's part of the store (``P:asks`` and ``P:dead``)."""

    async def ensure_group(self) -> None:
        """Create the consumer group at id 0 so asks sent before any bot ran are taken too."""
        try:
            await self.redis.xgroup_create(self.keys.asks, GROUP, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    @staticmethod
    def _entries(reply: Any) -> list[Entry]:
        out: list[Entry] = []
        for _stream, items in reply or []:
            for entry_id, fields in items:
                if fields is None:  # deleted while pending
                    continue
                out.append(_entry(entry_id, fields))
        return out

    async def read(
        self, consumer: str, *, count: int, block_ms: int | None, own_pending: bool = False
    ) -> list[Entry]:
        reply = await self.redis.xreadgroup(
            GROUP, consumer, {self.keys.asks: "0" if own_pending else ">"}, count=count, block=block_ms
        )
        return self._entries(reply)

    async def reclaim(
        self, consumer: str, *, min_idle_ms: int, count: int = 50, skip: Collection[str] = ()
    ) -> list[Entry]:
        """Take over entries another consumer left pending too long (it probably died). ``skip``: the
        entries this consumer is handling right now; claiming them would count a delivery that did
        not fail."""
        # IDLE 0 filters nothing on Redis, so it is left out: fakeredis reads IDLE strictly (idle > n),
        # and would miss an entry claimed in this same millisecond.
        pending = await self.redis.xpending_range(
            self.keys.asks, GROUP, min="-", max="+", count=count, idle=min_idle_ms or None
        )
        deliveries = {
            _s(p["message_id"]): int(p["times_delivered"]) for p in pending if _s(p["message_id"]) not in skip
        }
        if not deliveries:
            return []
        claimed = await self.redis.xclaim(
            self.keys.asks, GROUP, consumer, min_idle_time=min_idle_ms, message_ids=list(deliveries)
        )
        out: list[Entry] = []
        gone: list[str] = []
        rows: list[Any] = list(claimed)
        for entry_id, fields in rows:
            eid = _s(entry_id)
            if not fields:
                gone.append(eid)
                continue
            out.append(_entry(eid, fields, deliveries.get(eid, 1) + 1))
        if gone:
            await self.redis.xack(self.keys.asks, GROUP, *gone)
        return out

    async def unclaim_busy(
        self, entry: Entry, consumer: str, *, lease_left_ms: int, reclaim_idle_ms: int
    ) -> None:
        """Undo what a reclaim that found a live lease did to the entry: that was no failed delivery.

        XCLAIM counted one more delivery; the count goes back (``RETRYCOUNT``), so only deliveries that
        really failed bring an entry to the poison limit. Its idle time is set so that the next reclaim
        comes just as the lease ends (``IDLE``), not a whole reclaim period later."""
        idle = max(reclaim_idle_ms - lease_left_ms, 0)
        await self.redis.xclaim(
            self.keys.asks,
            GROUP,
            consumer,
            min_idle_time=0,
            message_ids=[entry.id],
            idle=idle,
            retrycount=max(entry.deliveries - 1, 0),
            justid=True,
        )

    async def touch(self, consumer: str, entry_ids: Sequence[str], *, min_idle_ms: int) -> None:
        """Keep entries this consumer still holds (waiting locally for a busy channel's rate limit)
        from looking abandoned: XCLAIM JUSTID resets their idle time and counts no delivery. Entries
        idle less than ``min_idle_ms`` (just taken over by another replica, say) are left alone."""
        if entry_ids:
            await self.redis.xclaim(
                self.keys.asks,
                GROUP,
                consumer,
                min_idle_time=min_idle_ms,
                message_ids=list(entry_ids),
                justid=True,
            )

    async def renew_leases(self, leases: Sequence[tuple[str, str, str, str]], lease_ms: int) -> list[str]:
        """Extend the intake leases ``(tag, ask_id, owner, token)`` of deliveries still in flight by
        ``lease_ms`` from now (Redis time), all in one round trip (``renew.lua``, one per ask). For
        each: ``""`` when renewed, else who holds the ask now (``owner#tries``), ``expired`` or
        ``done`` (the lease is lost for good: its holder must stop)."""
        steps = [
            self._script("renew", [self.keys.for_ask(tag, ask_id).ask], [owner, token, lease_ms])
            for tag, ask_id, owner, token in leases
        ]
        replies = await self._run(steps, confirm=False) if steps else []
        return ["" if _s(r[0]) == "ok" else _s(r[1]) for r in replies]

    async def drop_idle_consumers(self, consumer: str, *, min_idle_ms: int) -> list[str]:
        """Remove the group's consumers other than ``consumer`` that have nothing pending and were
        idle longer than ``min_idle_ms`` (in one script, so none gets an entry in between)."""
        [reply] = await self._run(
            [self._script("drop_consumers", [self.keys.asks], [consumer, min_idle_ms, GROUP])], confirm=False
        )
        return [_s(name) for name in reply]

    @cached_property
    def _acks(self) -> GroupCommit:
        return GroupCommit(self._ack_many)

    async def ack(self, entry_id: str) -> None:
        """Acknowledge and delete a handled entry. Deliveries finishing together share the round trip
        (bot.storage.group_commit): under load, one ``XACK`` for many entries."""
        await self._acks.commit(entry_id)

    async def _ack_many(self, entry_ids: Sequence[str]) -> None:
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.xack(self.keys.asks, GROUP, *entry_ids)
            pipe.xdel(self.keys.asks, *entry_ids)
            await pipe.execute()

    async def dead_letter(self, entry: Entry, reason: str) -> None:
        """Park an entry nobody can answer (no readable reply_to, or poison) with its reason, then ack it."""
        fields: dict[str, str] = {**entry.fields, "reason": reason, "entry_id": entry.id}
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.xadd(self.keys.dead, fields, maxlen=DEAD_MAXLEN, approximate=True)  # type: ignore[arg-type]
            pipe.xack(self.keys.asks, GROUP, entry.id)
            pipe.xdel(self.keys.asks, entry.id)
            await pipe.execute()
