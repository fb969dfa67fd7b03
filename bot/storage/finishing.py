"""An ended ask's finish: its messages marked done, the channels it was tracked in left
(``P:chan:<channel>``: only asks an archived conversation could still dismiss) and its Home rows,
its clean-up timer removed and its id index given the record's ended lifetime: ``finish.lua`` on
one server, ``finalize.lua`` and separate commands on Redis Cluster."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from bot.model import AskRecord
from bot.storage.base import Step
from bot.storage.keys import due_member, parse_due_member
from bot.storage.records import HomePeople, _s, tracked_channels
from bot.storage.timer_store import TimerStore

__all__ = ["Finishing"]


class Finishing(TimerStore):
    """Channel tracking and finalizing the asks that ended."""

    if TYPE_CHECKING:  # from HomeIndex, the other half of Store

        def _home_people_steps(self, asks: Sequence[tuple[str, str]]) -> list[Step]: ...

        @staticmethod
        def _home_people_parse(raws: Sequence[Iterable[object]]) -> list[HomePeople]: ...

        def _home_leave_steps(
            self, asks: Sequence[tuple[str, str]], people: Sequence[HomePeople]
        ) -> list[Step]: ...

        def _home_touch_step(self, users: Sequence[str], delay_ms: int = ...) -> Step: ...

    async def track_channel(self, channel: str, ask_id: str, tag: str) -> None:
        await self._run(self._track(self.keys.channel(channel), due_member(ask_id, tag)))

    async def asks_in_channel(self, channel: str) -> list[tuple[str, str]]:
        members = await self.redis.smembers(self.keys.channel(channel))
        return [parse_due_member(_s(m)) for m in members]

    async def untrack_channel(self, channel: str, ask_id: str, tag: str) -> None:
        await self.redis.srem(self.keys.channel(channel), due_member(ask_id, tag))

    async def finalize(
        self,
        tag: str,
        ask_id: str,
        updated: int,
        *,
        channels: Collection[str] | None = None,
        people: HomePeople | None = None,
    ) -> None:
        """Mark an ended ask's ``updated`` messages as done (see ``finalize_many``)."""
        await self.finalize_many([(ask_id, tag, updated)], channels=[channels], people=[people])

    async def finalize_many(
        self,
        asks: Sequence[tuple[str, str, int]],
        *,
        channels: Sequence[Collection[str] | None] | None = None,
        people: Sequence[HomePeople | None] | None = None,
    ) -> None:
        """Mark ended asks' messages as updated, for many ``(ask_id, tag, updated)`` at once.

        ``channels``: per ask, the channels its messages (withdrawn ones too) were tracked in, when the
        caller knows them (``resolve`` told it); ``people``: whose Home indexes hold it, when the
        caller knows them (``home_changed`` told it). What is not known is read first, in one round
        trip for all. Then one round trip: per ask one ``finish.lua`` (messages marked done, channels
        and Home rows left, the clean-up timer removed once done) and the id index given the record's
        ended lifetime; on Redis Cluster, whose slots keep those keys apart, ``finalize.lua`` and the
        rest after it (``_finalize_apart``). Should more messages have appeared meanwhile (the script
        answers 0), the timer is still needed and is set again."""
        if not asks:
            return
        pairs = [(ask_id, tag) for ask_id, tag, _ in asks]
        known: list[Collection[str] | None] = list(channels) if channels is not None else [None] * len(asks)
        known_people: list[HomePeople | None] = list(people) if people is not None else [None] * len(asks)
        unknown = [pair for pair, c in zip(pairs, known, strict=True) if c is None]
        unknown_people = [pair for pair, p in zip(pairs, known_people, strict=True) if p is None]
        if unknown or unknown_people:
            read, raw_people = await self._channels_of(unknown, also=self._home_people_steps(unknown_people))
            read_channels, read_people = iter(read), iter(self._home_people_parse(raw_people))
            known = [c if c is not None else next(read_channels) for c in known]
            known_people = [p if p is not None else next(read_people) for p in known_people]
        tracked = [set(c) for c in known if c is not None]  # every one known by now
        held = [p for p in known_people if p is not None]
        if self._cluster:
            await self._finalize_apart(asks, pairs, tracked, held)
            return
        steps: list[Step] = []
        for (ask_id, tag, updated), in_channels, (waiting, asked) in zip(asks, tracked, held, strict=True):
            keys = [
                self.keys.for_ask(tag, ask_id).ask,
                self.keys.due,
                *(self.keys.channel(c) for c in sorted(in_channels)),
                *(self.keys.home_waiting(u) for u in waiting),
                *(self.keys.home_asked(u) for u in asked),
            ]
            steps.append(self._script("finish", keys, [updated, due_member(ask_id, tag), len(in_channels)]))
            index = self.keys.index(ask_id)
            steps.append(lambda pipe, index=index: pipe.pexpire(index, self.retention_ms))  # type: ignore[misc]
        touched = sorted({u for waiting, asked in held for u in (*waiting, *asked)})
        if touched:  # the tabs showing them are published again, without the rows
            steps.append(self._home_touch_step(touched))
        replies = (await self._run(steps))[: 2 * len(asks) : 2]
        for (ask_id, tag, _), raw in zip(asks, replies, strict=True):
            await self._finalized(ask_id, tag, raw)

    async def _finalized(self, ask_id: str, tag: str, raw: Sequence[object]) -> bool:
        """What a ``finalize_messages`` answer (``_common.lua``) leaves to do: the timer set again
        when the messages are not done yet. True when they are done."""
        done = int(_s(raw[0]))
        if done == 0:
            await self.schedule(ask_id, tag, 0)
        elif done == 2:
            # Cancelled while a delivery may still land: look again when its lease ends.
            await self.schedule(ask_id, tag, int(_s(raw[1])))
        return done == 1

    async def _finalize_apart(
        self,
        asks: Sequence[tuple[str, str, int]],
        pairs: Sequence[tuple[str, str]],
        tracked: Sequence[set[str]],
        people: Sequence[HomePeople],
    ) -> None:
        """``finalize_many`` on Redis Cluster: ``finalize.lua`` first, then the rest in its own commands."""
        scripts: list[Step] = []
        for ask_id, tag, updated in asks:
            index = self.keys.index(ask_id)
            scripts.append(self._script("finalize", [self.keys.for_ask(tag, ask_id).ask], [updated]))
            scripts.append(lambda pipe, index=index: pipe.pexpire(index, self.retention_ms))  # type: ignore[misc]
        replies = (await self._run(scripts))[::2]
        # Crash-safe order (a replica may die between any two commands): the channels are left and
        # the clean-up timer goes only once the messages are marked done, so a death in between
        # leaves a timer too many (it fires, finds the ask finished and leaves, Timers), never one too
        # few. After the script, not before: a record landing after the end (Store.posted, a stray
        # copy learned from Slack's event) tracks its channel before it resets ``finalized``; had it
        # come between SREMs and the script, the script would find the count unchanged and call it
        # done, and its member would stay for good.
        leave: list[Step] = self._home_leave_steps(pairs, people)
        done_asks: list[tuple[str, str]] = []
        for (ask_id, tag), in_channels, raw in zip(pairs, tracked, replies, strict=True):
            member = due_member(ask_id, tag)
            for channel in sorted(in_channels):
                key = self.keys.channel(channel)
                leave.append(lambda pipe, key=key, member=member: pipe.srem(key, member))  # type: ignore[misc]
            if await self._finalized(ask_id, tag, raw):
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
