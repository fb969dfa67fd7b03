"""An ended ask's finish: its messages marked done (``finalize.lua``), the channels it was tracked in
left (``P:chan:<channel>``: only asks an archived conversation could still dismiss), its clean-up
timer removed and its id index given the record's ended lifetime."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from bot.model import AskRecord
from bot.storage.base import Step
from bot.storage.keys import due_member, parse_due_member
from bot.storage.records import _s, tracked_channels
from bot.storage.timer_store import TimerStore

__all__ = ["Finishing"]


class Finishing(TimerStore):
    """Channel tracking and finalizing the asks that ended."""

    if TYPE_CHECKING:  # from HomeIndex, the other half of Store

        async def home_leave(self, asks: Sequence[tuple[str, str]]) -> None: ...

    async def track_channel(self, channel: str, ask_id: str, tag: str) -> None:
        await self._run(self._track(self.keys.channel(channel), due_member(ask_id, tag)))

    async def asks_in_channel(self, channel: str) -> list[tuple[str, str]]:
        members = await self.redis.smembers(self.keys.channel(channel))
        return [parse_due_member(_s(m)) for m in members]

    async def untrack_channel(self, channel: str, ask_id: str, tag: str) -> None:
        await self.redis.srem(self.keys.channel(channel), due_member(ask_id, tag))

    async def finalize(
        self, tag: str, ask_id: str, updated: int, *, channels: Collection[str] | None = None
    ) -> None:
        """Mark an ended ask's ``updated`` messages as done (see ``finalize_many``)."""
        await self.finalize_many([(ask_id, tag, updated)], channels=[channels])

    async def finalize_many(
        self,
        asks: Sequence[tuple[str, str, int]],
        *,
        channels: Sequence[Collection[str] | None] | None = None,
    ) -> None:
        """Mark ended asks' messages as updated, for many ``(ask_id, tag, updated)`` at once.

        ``channels``: per ask, the channels its messages (withdrawn ones too) were tracked in, when the
        caller knows them (``resolve`` told it); None reads them from the record first. The clean-up
        timer set by resolve goes with it; should more messages have appeared meanwhile (the script
        answers 0), the timer is still needed and is set again. The id index gets the record's
        ended lifetime (the retention) in the same round trip."""
        if not asks:
            return
        known = list(channels) if channels is not None else [None] * len(asks)
        unknown = [(ask_id, tag) for (ask_id, tag, _), c in zip(asks, known, strict=True) if c is None]
        read = iter(await self._channels_of(unknown))
        # Crash-safe order (a replica may die between any two round trips): the ended asks leave
        # their channels first (a message recorded later tracks its channel again, and its own
        # finalize leaves again; in one pipeline the SREMs run before the scripts); the clean-up
        # timer goes only once the messages are marked done, so a death in between leaves a timer
        # too many (harmless), never one too few.
        steps: list[Step] = []
        for (ask_id, tag, _), given in zip(asks, known, strict=True):
            member = due_member(ask_id, tag)
            for channel in sorted(given if given is not None else next(read)):
                key = self.keys.channel(channel)
                steps.append(lambda pipe, key=key, member=member: pipe.srem(key, member))  # type: ignore[misc]
        at = len(steps)
        for ask_id, tag, updated in asks:
            index = self.keys.index(ask_id)
            steps.append(self._script("finalize", [self.keys.for_ask(tag, ask_id).ask], [updated]))
            steps.append(lambda pipe, index=index: pipe.pexpire(index, self.retention_ms))  # type: ignore[misc]
        await self.home_leave([(ask_id, tag) for ask_id, tag, _ in asks])  # and the people's Home tabs
        replies = (await self._run(steps))[at::2]
        done_asks: list[tuple[str, str]] = []
        for (ask_id, tag, _), raw in zip(asks, replies, strict=True):
            done = int(_s(raw[0]))
            if done == 0:
                await self.schedule(ask_id, tag, 0)
            elif done == 2:
                # Cancelled while a delivery may still land: look again when its lease ends.
                await self.schedule(ask_id, tag, int(_s(raw[1])))
            elif done == 1:
                done_asks.append((ask_id, tag))
        if done_asks:
            await self._run([self._zrem_due(ask_id, tag) for ask_id, tag in done_asks])

    async def leave_channels(self, rec: AskRecord) -> None:
        """An ended ask leaves the channel sets of its messages and of every channel it can post to (its
        route, its escalation steps): a record refused after the end may have tracked one of those."""
        named = {rec.route.channel if rec.route else None, *(step.channel for step in rec.escalate)}
        [tracked] = await self._channels_of([(rec.ask_id, rec.tag)])
        member = due_member(rec.ask_id, rec.tag)
        keys = [self.keys.channel(channel) for channel in sorted(tracked | {c for c in named if c})]
        await self._run([lambda pipe, key=key: pipe.srem(key, member) for key in keys])  # type: ignore[misc]

    async def _channels_of(self, asks: Sequence[tuple[str, str]]) -> list[set[str]]:
        """The ``P:chan:<channel>`` sets each ask was tracked in: its messages' channels and its
        withdrawn copies' (tracked when they were posted, too). Those sets hold only asks an archived
        conversation could still dismiss, so a finished ask leaves them all."""
        if not asks:
            return []
        keys = [self.keys.for_ask(tag, ask_id).ask for ask_id, tag in asks]
        raws = await self._run(
            [lambda pipe, key=key: pipe.hmget(key, ["msgs", "withdrawn"]) for key in keys],  # type: ignore[misc]
            confirm=False,
        )
        return [tracked_channels(msgs, withdrawn) for msgs, withdrawn in raws]
