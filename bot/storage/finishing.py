"""An ended ask's finish: its messages marked done (``finalize.lua``), the channels it was tracked in
left (``P:chan:<channel>``: only asks an archived conversation could still dismiss), its clean-up
timer removed and its id index given the record's ended lifetime."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from bot.model import AskRecord
from bot.storage.base import Step
from bot.storage.keys import due_member, parse_due_member
from bot.storage.records import _s, tracked_channels
from bot.storage.timer_store import TimerStore

__all__ = ["Finishing"]


class Finishing(TimerStore):
    """Channel tracking and finalizing the asks that ended."""

    if TYPE_CHECKING:  # from HomeIndex, the other half of Store

        def _home_people_steps(self, asks: Sequence[tuple[str, str]]) -> list[Step]: ...

        @staticmethod
        def _home_people_parse(raws: Sequence[Iterable[object]]) -> list[tuple[list[str], list[str]]]: ...

        def _home_leave_steps(
            self, asks: Sequence[tuple[str, str]], people: Sequence[tuple[list[str], list[str]]]
        ) -> list[Step]: ...

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
        read = iter((await self._channels_of(unknown))[0])
        scripts: list[Step] = []
        for ask_id, tag, updated in asks:
            index = self.keys.index(ask_id)
            scripts.append(self._script("finalize", [self.keys.for_ask(tag, ask_id).ask], [updated]))
            scripts.append(lambda pipe, index=index: pipe.pexpire(index, self.retention_ms))  # type: ignore[misc]
        # The people whose Home tabs hold the asks are read in the same round trip; their rows go
        # with the channels, once the messages are marked done (bot/storage/home_index.py).
        pairs = [(ask_id, tag) for ask_id, tag, _ in asks]
        home_reads = self._home_people_steps(pairs)
        answers = await self._run([*scripts, *home_reads])
        replies = answers[: len(scripts)][::2]
        people = self._home_people_parse(answers[len(scripts) :])
        # Crash-safe order (a replica may die between any two round trips): the channels are left
        # and the clean-up timer goes only once the messages are marked done, so a death in between
        # leaves a timer too many (it fires, finds the ask finished and leaves, Timers), never one too
        # few. After the script, not before: a record landing after the end (Store.posted, a stray
        # copy learned from Slack's event) tracks its channel before it resets ``finalized``; had it
        # come between SREMs and the script, the script would find the count unchanged and call it
        # done, and its member would stay for good.
        leave: list[Step] = self._home_leave_steps(pairs, people)
        done_asks: list[tuple[str, str]] = []
        for (ask_id, tag, _), given, raw in zip(asks, known, replies, strict=True):
            member = due_member(ask_id, tag)
            for channel in sorted(given if given is not None else next(read)):
                key = self.keys.channel(channel)
                leave.append(lambda pipe, key=key, member=member: pipe.srem(key, member))  # type: ignore[misc]
            done = int(_s(raw[0]))
            if done == 0:
                await self.schedule(ask_id, tag, 0)
            elif done == 2:
                # Cancelled while a delivery may still land: look again when its lease ends.
                await self.schedule(ask_id, tag, int(_s(raw[1])))
            elif done == 1:
                done_asks.append((ask_id, tag))
        await self._leave_and_unschedule(leave, done_asks)

    async def leave_channels(self, rec: AskRecord) -> None:
        """An ended and finished ask leaves the channel sets of its messages and of every channel it can
        post to (its route, its escalation steps: a record refused after the end may have tracked one
        of those), and its clean-up timer goes, in one round trip."""
        named = {rec.route.channel if rec.route else None, *(step.channel for step in rec.escalate)}
        pair = [(rec.ask_id, rec.tag)]
        # The Home tabs' rows go too: a replica that died between finalize's two round trips left them.
        [tracked], people = await self._channels_of(pair, also=self._home_people_steps(pair))
        member = due_member(rec.ask_id, rec.tag)
        keys = [self.keys.channel(channel) for channel in sorted(tracked | {c for c in named if c})]
        leave: list[Step] = [lambda pipe, key=key: pipe.srem(key, member) for key in keys]  # type: ignore[misc]
        leave.extend(self._home_leave_steps(pair, self._home_people_parse(people)))
        await self._leave_and_unschedule(leave, pair)

    async def _leave_and_unschedule(self, leave: list[Step], done: Sequence[tuple[str, str]]) -> None:
        """Run the ``leave`` SREMs and remove the timers of the ``done`` asks, reading each record after
        its ZREM: a record that landed after the end meanwhile (``finalized`` 0 again: its channel
        tracked again, a message maybe still to redraw) gets its timer back. Store.posted resets the
        flag before it sets its own timer, so either it sets the timer after this ZREM or this read
        sees the reset."""
        steps = list(leave)
        for ask_id, tag in done:
            ask = self.keys.for_ask(tag, ask_id).ask
            steps.append(self._zrem_due(ask_id, tag))
            steps.append(lambda pipe, ask=ask: pipe.hmget(ask, ["state", "finalized"]))  # type: ignore[misc]
        if not steps:
            return
        reads = (await self._run(steps))[len(leave) + 1 :: 2]
        for (ask_id, tag), (state, finalized) in zip(done, reads, strict=True):
            if _s(state or b"") == "ended" and _s(finalized or b"") != "1":
                await self.schedule_in(ask_id, tag, self.finalize_after_ms)

    async def _channels_of(
        self, asks: Sequence[tuple[str, str]], *, also: Sequence[Step] = ()
    ) -> tuple[list[set[str]], list[Any]]:
        """The ``P:chan:<channel>`` sets each ask was tracked in: its messages' channels and its
        withdrawn copies' (tracked when they were posted, too). Those sets hold only asks an archived
        conversation could still dismiss, so a finished ask leaves them all. ``also``: more reads
        for the same round trip, whose answers come second."""
        if not asks and not also:
            return [], []
        keys = [self.keys.for_ask(tag, ask_id).ask for ask_id, tag in asks]
        raws = await self._run(
            [*(lambda pipe, key=key: pipe.hmget(key, ["msgs", "withdrawn"]) for key in keys), *also],
            confirm=False,
        )
        tracked = [tracked_channels(msgs, withdrawn) for msgs, withdrawn in raws[: len(keys)]]
        return tracked, list(raws[len(keys) :])
