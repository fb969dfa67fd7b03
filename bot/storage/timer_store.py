"""The timers of every ask (``P:due``): a sorted set of ``"<ask_id> <tag>"`` scored by when each is
due, claimed by any number of sweepers at once (``claim_due.lua``)."""

from __future__ import annotations

from collections.abc import Sequence

from bot.storage.base import Step
from bot.storage.keys import due_member, parse_due_member
from bot.storage.records import _s
from bot.storage.stream import IntakeStream

__all__ = ["TimerStore"]


class TimerStore(IntakeStream):
    """Setting, renewing, claiming and removing the asks' timers."""

    async def schedule_in(self, ask_id: str, tag: str, delay_ms: int) -> None:
        """A timer ``delay_ms`` from now in Redis time, unless an earlier one is set."""
        member = due_member(ask_id, tag)
        await self._run([self._script("schedule_in", [self.keys.due], [delay_ms, member, "keep_earlier"])])

    async def schedule(self, ask_id: str, tag: str, at_ms: int) -> None:
        member = due_member(ask_id, tag)
        ask = self.keys.for_ask(tag, ask_id).ask
        # A timer set by work that raced the ask's end (an escalation's next step, say) must not
        # outlive it: once the ask is ended and finished, nothing would remove it before it fires.
        # finalize sets ``finalized`` before it removes the timer, so either it or this sees the other
        # (the ZADD goes first, the read after it; one round trip, in order).
        _added, (state, finalized) = await self._run(
            [
                lambda pipe: pipe.zadd(self.keys.due, {member: at_ms}),
                lambda pipe: pipe.hmget(ask, ["state", "finalized"]),
            ],
            confirm=False,
        )
        if _s(state or b"") == "ended" and _s(finalized or b"") == "1":
            await self.redis.zrem(self.keys.due, member)

    async def unschedule(self, ask_id: str, tag: str) -> None:
        await self.redis.zrem(self.keys.due, due_member(ask_id, tag))

    async def unschedule_if_finished(self, ask_id: str, tag: str) -> None:
        """Remove the ask's timer if the ask is ended and finished (read first: a message recorded
        after the end sets ``finalized`` to 0 and its timer again, ``Store.posted``)."""
        state, finalized = await self.redis.hmget(self.keys.for_ask(tag, ask_id).ask, ["state", "finalized"])
        if _s(state or b"") == "ended" and _s(finalized or b"") == "1":
            await self.unschedule(ask_id, tag)

    async def hold_timer(self, ask_id: str, tag: str, lease_ms: int) -> None:
        """Renew a sweeper's claim on an ask's timer: due again ``lease_ms`` from now (Redis time),
        only if the ask still has one (XX: an ask that ended and was cleaned up gets none back)."""
        member = due_member(ask_id, tag)
        now = await self.server_time_ms()
        await self.redis.zadd(self.keys.due, {member: now + lease_ms}, xx=True)

    async def claim_due(self, *, limit: int, lease_ms: int) -> tuple[int, list[tuple[str, str]]]:
        """Atomically take up to ``limit`` due timers; returns Redis time and (ask_id, tag) pairs."""
        # Not confirmed: a claim lost in a failover only makes the timer fire again.
        [reply] = await self._run(
            [self._script("claim_due", [self.keys.due], [limit, lease_ms])], confirm=False
        )
        now = int(_s(reply[0]))
        return now, [parse_due_member(_s(m)) for m in reply[1:]]

    def _zrem_due(self, ask_id: str, tag: str) -> Step:
        member = due_member(ask_id, tag)
        return lambda pipe: pipe.zrem(self.keys.due, member)

    async def unschedule_many(self, asks: Sequence[tuple[str, str]]) -> None:
        if asks:
            await self._run([self._zrem_due(ask_id, tag) for ask_id, tag in asks])
