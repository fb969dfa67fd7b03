"""Timers: deadlines (a batch at a time), escalation steps and reminders, as the sweeper finds them due."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from redis.exceptions import RedisError

from bot import render, results
from bot.engine.endings import Endings
from bot.engine.home import quietly
from bot.engine.room import Room, Shared, lease_deadline
from bot.errors import SlackBusyError, SlackError
from bot.logs import bind_ask_id
from bot.metrics import METRICS
from bot.model import AskRecord, PostedMessage
from bot.storage.store import LoadedAsk, Resolution
from bot.tasks import cancel_and_wait
from contract.envelopes import EscalationStep

__all__ = ["Timers", "place"]

log = logging.getLogger(__name__)


class Timers(Room):
    def __init__(self, shared: Shared, *, endings: Endings) -> None:
        super().__init__(shared)
        self.endings = endings

    async def time_out(self, loaded: LoadedAsk) -> None:
        await self.endings.end(
            loaded.record,
            results.timed_out(loaded.record),
            actor=None,
            event="timeout",
            detail="deadline passed",
            messages=loaded.messages,
        )

    def next_timer(self, rec: AskRecord, *, step: int, reminders: int) -> int | None:
        candidates: list[int] = []
        if rec.deadline_ms:
            candidates.append(rec.deadline_ms)
        if step < len(rec.escalate):
            candidates.append(rec.created_ms + rec.escalate[step].after_ms)
        if rec.remind_every_ms and reminders < rec.max_reminders:
            candidates.append(rec.created_ms + rec.remind_every_ms * (reminders + 1))
        return min(candidates) if candidates else None

    async def schedule_next(self, rec: AskRecord, *, step: int, reminders: int) -> None:
        at = self.next_timer(rec, step=step, reminders=reminders)
        if at is None:
            await self.store.unschedule(rec.ask_id, rec.tag)
        else:
            await self.store.schedule(rec.ask_id, rec.tag, at)

    async def on_due_many(
        self, due: Sequence[tuple[str, str]], now_ms: int, *, concurrency: int = 32
    ) -> None:
        """Timers fired for ``due`` ``(ask_id, tag)`` pairs. Timeouts, the bulk of the work, are
        loaded, resolved and finalized a batch at a time (three round trips for the batch); the rest
        (messages to finish, escalation, reminders) is handled one ask at a time."""
        # The sweeper claimed these timers for one timer lease: no Slack call for them outlives it,
        # so no other sweeper repeats an escalation still in flight here.
        deadline = lease_deadline(self.settings.timer_lease_ms)
        loaded_all = await self.store.load_many(due)
        gone = [pair for pair, loaded in zip(due, loaded_all, strict=True) if loaded is None]
        await self.store.unschedule_many(gone)
        expired = [
            loaded
            for loaded in loaded_all
            if loaded is not None
            # accepted too: an ask whose delivery is stuck (or whose replica died) times out like
            # any other; a post still in flight then finds it ended and is redrawn at once.
            and loaded.state in ("posted", "accepted")
            and loaded.record.deadline_ms
            and now_ms >= loaded.record.deadline_ms
        ]
        rest = [loaded for loaded in loaded_all if loaded is not None and loaded not in expired]
        slots = asyncio.Semaphore(concurrency)
        await asyncio.gather(
            self._time_out_many(expired, slots, deadline),
            *(
                self._bounded(slots, functools.partial(self._on_due_loaded, loaded, now_ms, deadline))
                for loaded in rest
            ),
        )

    async def _time_out_many(
        self, expired: Sequence[LoadedAsk], slots: asyncio.Semaphore, deadline: float
    ) -> None:
        if not expired:
            return

        async def prepare(loaded: LoadedAsk) -> Resolution:
            async with slots:
                rec = loaded.record
                bind_ask_id(rec.ask_id)
                ending = results.timed_out(rec)
                where = loaded.messages[-1] if loaded.messages else None
                prefix = await self.endings.result_prefix(rec, ending, actor=None, where=where)
                return Resolution(
                    rec, ending.outcome, prefix, None, "timeout", "deadline passed", replica=self.consumer
                )

        resolutions = await asyncio.gather(*(prepare(loaded) for loaded in expired))
        verdicts = await self.store.resolve_many(resolutions)
        won = [
            (resolution, verdict)
            for resolution, verdict in zip(resolutions, verdicts, strict=True)
            if verdict.verdict == "won" and verdict.result is not None
        ]
        # The tabs before the redraws, which wait for Slack's pacing at clean-up priority.
        touched = self.store.home_touch_asks([(r.record.ask_id, r.record.tag) for r, _ in won])
        await quietly(touched, f"publishing the tabs of {len(won)} timed-out ask(s)")
        quiet: list[tuple[str, str, int]] = []
        noisy: list[Awaitable[None]] = []
        for resolution, verdict in won:
            assert verdict.result is not None
            METRICS.timeouts.inc()
            METRICS.results.labels(outcome=resolution.outcome).inc()
            rec = resolution.record
            self.endings.log_ending(rec, "timeout", resolution.outcome, verdict)
            if verdict.messages:
                noisy.append(
                    self._bounded(
                        slots,
                        functools.partial(
                            self.endings.finish_messages,
                            rec,
                            verdict.messages,
                            verdict.result,
                            None,
                            priority="clear",
                            deadline=deadline,
                            withdrawn=verdict.withdrawn,
                        ),
                    )
                )
            else:
                quiet.append((rec.ask_id, rec.tag, 0))
        await asyncio.gather(self.store.finalize_many(quiet), *noisy)

    @staticmethod
    async def _bounded(slots: asyncio.Semaphore, work: Callable[[], Awaitable[object]]) -> None:
        # ``work`` is made only once a slot is free: a batch cancelled before (the replica stopping)
        # leaves no coroutine that was never awaited (a RuntimeWarning, an error under pytest -W error).
        async with slots:
            await work()

    async def _on_due_loaded(self, loaded: LoadedAsk, now_ms: int, deadline: float) -> None:
        """A timer fired for an ask that is not timing out: finish an ended ask's messages (finalize
        removes the timer), wait for intake, escalate or remind."""
        ask_id, tag = loaded.record.ask_id, loaded.record.tag
        bind_ask_id(ask_id)
        rec = loaded.record
        if loaded.state == "ended":
            if not loaded.finalized and loaded.result is not None:
                await self.endings.finish_messages(
                    rec,
                    loaded.messages,
                    loaded.result,
                    loaded.by,
                    priority="clear",
                    deadline=deadline,
                    withdrawn=loaded.withdrawn,
                )
            else:
                # Finished: no timer is due for it, except the one a record that landed after the end
                # set (Store.posted) for the channel member it added. It leaves, and the timer goes.
                await self.store.leave_channels(rec)
            return
        if loaded.state == "accepted":
            # Still being delivered by intake (or its replica died: reclaim handles that). Look later,
            # and no later than the deadline, which ends it whatever intake does.
            later = now_ms + 5_000
            if rec.deadline_ms:
                later = min(later, rec.deadline_ms)
            await self.store.schedule(ask_id, tag, later)
            return
        step, reminders = loaded.step, loaded.reminders
        if step < len(rec.escalate) and now_ms >= rec.created_ms + rec.escalate[step].after_ms:
            async with self._holding(rec):
                # No deadline: the claim is renewed while the post is in flight, however slow Slack is.
                posted = await self._escalate(loaded, step, rec.escalate[step], now_ms, None)
            if not posted:
                return  # nothing posted: the timer comes due again when the claim ends
            step += 1
        elif (
            rec.remind_every_ms
            and reminders < rec.max_reminders
            and (now_ms >= rec.created_ms + rec.remind_every_ms * (reminders + 1))
        ):
            async with self._holding(rec):
                posted = await self._remind(loaded, reminders, now_ms, None)
            if not posted:
                return
            reminders += 1
        await self.schedule_next(rec, step=step, reminders=reminders)

    @contextlib.asynccontextmanager
    async def _holding(self, rec: AskRecord) -> AsyncIterator[None]:
        """Keep this ask's timer claimed while a post for it is in flight: the sweeper's claim (one
        timer lease) is renewed every third of a lease, so no other sweeper repeats a post that is only
        slow. Should this replica die, renewal stops and the timer comes due one lease later."""
        lease_ms = self.settings.timer_lease_ms

        async def renew() -> None:
            while True:
                await asyncio.sleep(lease_ms / 3000)
                try:
                    await self.store.hold_timer(rec.ask_id, rec.tag, lease_ms)
                except RedisError as exc:
                    log.warning("could not renew the timer claim of %s: %s", rec.ask_id, exc)

        task = asyncio.create_task(renew())
        try:
            yield
        finally:
            await cancel_and_wait(task)

    async def _escalate(
        self, loaded: LoadedAsk, step: int, how: EscalationStep, now_ms: int, deadline: float | None
    ) -> bool:
        """Post escalation step ``step + 1``; False when Slack's rate limit left no time for it."""
        rec = loaded.record
        where = place(how)
        try:
            target = await self.slack.target_for(channel=how.channel, user=how.user, deadline=deadline)
            message = render.render_ask_message(
                rec, now_ms=now_ms, step=step + 1, mentions=how.mention, votes=loaded.votes or ()
            )
            ts = await self.slack.post(target, text=message.text, blocks=message.blocks, deadline=deadline)
        except SlackBusyError as exc:
            log.info("escalation step %d of %s waits for the next sweep: %s", step + 1, rec.ask_id, exc)
            return False
        except SlackError as exc:
            log.warning("escalation step %d of %s failed: %s", step + 1, rec.ask_id, exc)
            await self.store.advance(
                rec.tag,
                rec.ask_id,
                counter="step",
                expected=step,
                event="escalation_failed",
                actor=self.consumer,
                detail=f"{where}: {exc}",
            )
            return True
        new = PostedMessage(channel=target.channel, ts=ts, step=step + 1)
        await self.store.track_channel(target.channel, rec.ask_id, rec.tag)
        outcome = await self.store.advance(
            rec.tag,
            rec.ask_id,
            counter="step",
            expected=step,
            messages=[new],
            event="escalated",
            actor=self.consumer,
            detail=where,
        )
        METRICS.escalations.inc()
        if outcome == "ok":
            # A step reached: the people it is to now have the ask waiting on their Home tab.
            await quietly(
                self.store.home_changed(rec.tag, rec.ask_id), f"publishing the tabs of {rec.ask_id}"
            )
        if outcome == "moved":
            # Another sweeper posted this step first (this one outlived its lease after all): advance.lua
            # marked the copy posted here withdrawn (it is not in the record), so it goes rather than
            # stay clickable, and its delete event dismisses nothing.
            await self.delete_withdrawn(new)
            return True
        if outcome == "ended":
            fresh = await self.store.load(rec.tag, rec.ask_id)
            if fresh is not None and fresh.result is not None:
                await self.endings.finish_messages(
                    rec, [*fresh.messages, new], fresh.result, fresh.by, withdrawn=fresh.withdrawn
                )
            return True
        # Earlier messages stay answerable and say every place the ask went since.
        for earlier in loaded.messages:
            places = [place(s) for s in rec.escalate[earlier.step : step + 1]]
            redrawn = render.render_ask_message(
                rec, now_ms=now_ms, step=earlier.step, elsewhere=places, votes=loaded.votes or ()
            )
            try:
                await self.slack.update(
                    earlier.channel,
                    earlier.ts,
                    text=redrawn.text,
                    blocks=redrawn.blocks,
                    priority="post",
                    deadline=deadline,
                )
            except SlackError as exc:
                log.info("could not note the escalation on %s/%s: %s", earlier.channel, earlier.ts, exc)
        return True

    async def _remind(self, loaded: LoadedAsk, reminders: int, now_ms: int, deadline: float | None) -> bool:
        """Post reminder ``reminders + 1``; False when Slack's rate limit left no time for it."""
        rec = loaded.record
        if not loaded.messages:
            return True
        newest = loaded.messages[-1]
        reminder = render.render_reminder(rec, number=reminders + 1, now_ms=now_ms)
        try:
            await self.slack.reply(
                newest.channel, newest.ts, text=reminder.text, blocks=reminder.blocks, deadline=deadline
            )
        except SlackBusyError as exc:
            log.info("reminder for %s waits for the next sweep: %s", rec.ask_id, exc)
            return False
        except SlackError as exc:
            log.info("reminder for %s failed: %s", rec.ask_id, exc)
        await self.store.advance(
            rec.tag,
            rec.ask_id,
            counter="reminders",
            expected=reminders,
            event="reminded",
            actor=self.consumer,
            detail=f"reminder {reminders + 1}",
        )
        return True


def place(step: EscalationStep) -> str:
    return f"#{step.channel}" if step.channel else f"@{step.user}"
