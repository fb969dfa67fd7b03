"""Intake handling: one entry of the asks stream becomes a posted ask, an ending, a re-sent result or a
dead letter."""

from __future__ import annotations

import asyncio
import logging
import time

from redis.exceptions import RedisError

from bot import render, results
from bot.asks import Rejection, build_record
from bot.engine.actions import LEARN_AFTER_S, Actions
from bot.engine.endings import Endings
from bot.engine.home import Home, quietly
from bot.engine.leases import HeldLease, LeaseKeeper
from bot.engine.room import Room, Shared
from bot.engine.timers import Timers
from bot.errors import NotReplicatedError, SlackBusyError, SlackError
from bot.logs import bind_ask_id
from bot.metrics import METRICS
from bot.model import AskRecord, PostedMessage
from bot.storage.keys import slot_tag
from bot.storage.store import AcceptVerdict, Entry, Lease, iso_ms
from contract.envelopes import EnvelopeError, ResultError, parse_ask_envelope, parse_cancel_envelope

__all__ = ["Intake"]

log = logging.getLogger(__name__)

RECORD_RETRY_S = 1.0
"""How long the record of a message just posted is retried in place before the message is withdrawn
(only once Redis takes the withdrawal's mark, and never for a NotReplicatedError: see _record_post)."""


class Intake(Room):
    def __init__(
        self, shared: Shared, *, endings: Endings, timers: Timers, actions: Actions, home: Home
    ) -> None:
        super().__init__(shared)
        self.endings = endings
        self.timers = timers
        self.actions = actions
        self.home = home
        self.lease_ms = shared.settings.intake_lease
        # A delivery is renewed for at most what its lease was before renewals (twice the window).
        self.leases = LeaseKeeper(
            shared.store, self.lease_ms, longest_ms=max(2 * shared.settings.delivery_window_ms, self.lease_ms)
        )

    async def handle_entry(self, entry: Entry) -> None:
        """Handle one intake entry; never raises for bad input (it ends up on a queue instead)."""
        if entry.deliveries > self.settings.max_deliveries:
            METRICS.dead_letters.labels(reason="poison").inc()
            reason = f"failed {entry.deliveries - 1} times; parked for an operator"
            await self.store.dead_letter(entry, reason)
            await self._end_parked(entry, reason)
            return
        if "ask" in entry.fields:
            await self._handle_ask(entry)
        elif "cancel" in entry.fields:
            await self._handle_cancel(entry)
        else:  # operator actions never travel on the stream (protocol section 1)
            METRICS.dead_letters.labels(reason="no_field").inc()
            await self.store.dead_letter(entry, "the entry has neither an 'ask' nor a 'cancel' field")

    async def _end_parked(self, entry: Entry, reason: str) -> None:
        """An ask whose entry was parked on the dead-letter stream still ends with a result
        (``unavailable``, with the reason), never with silence: the agent is waiting for it."""
        if "ask" not in entry.fields:
            return
        try:
            env = parse_ask_envelope(entry.fields["ask"])
        except EnvelopeError:
            return  # unreadable asks were refused on their first delivery; nothing to end
        bind_ask_id(env.ask_id)
        loaded = await self.store.find(env.ask_id)
        if loaded is None or loaded.state == "ended" or loaded.record.reply_to != env.reply_to:
            return
        METRICS.asks.labels(result="unavailable").inc()
        error = ResultError(code="delivery_failed", message=f"the bot could not deliver this ask: {reason}")
        await self.endings.end(
            loaded.record,
            results.ended_without_answer(loaded.record, "unavailable", error=error),
            actor=None,
            event="unavailable",
            detail=reason,
            messages=loaded.messages,
            release_lease=not loaded.messages,
        )

    def _pending_ttl_ms(self, rec: AskRecord | None) -> int:
        # Bounded lifetime for every key: pending life (deadline, or retention for open-ended asks)
        # plus the retention that follows the end.
        life = (
            (rec.deadline_ms - rec.created_ms)
            if rec is not None and rec.deadline_ms
            else self.store.retention_ms
        )
        return life + self.store.retention_ms + 86_400_000

    async def _handle_ask(self, entry: Entry) -> None:
        created_ms = entry.created_ms
        try:
            env = parse_ask_envelope(entry.fields["ask"])
        except EnvelopeError as exc:
            METRICS.asks.labels(result="invalid_envelope").inc()
            await self._reject_unparsed(entry, exc, created_ms)
            return
        bind_ask_id(env.ask_id)  # every log line of this entry's task names the ask
        forbidden = self.store.keys.reply_to_problem(env.reply_to)
        if forbidden is not None:
            METRICS.dead_letters.labels(reason="reply_to").inc()
            await self.store.dead_letter(entry, f"invalid_envelope: {forbidden}")
            return
        # The index gets the ask's own pending life when it is claimed, so that it never lives shorter
        # than the record (nothing after it sets it again while the ask is pending).
        early = build_record(env, tag=slot_tag(env.reply_to), created_ms=created_ms, settings=self.settings)
        tag, seen = await self.store.claim_index_state(
            env.ask_id,
            slot_tag(env.reply_to),
            self._pending_ttl_ms(early if isinstance(early, AskRecord) else None),
        )
        built = (
            early
            if tag == slot_tag(env.reply_to)
            else build_record(env, tag=tag, created_ms=created_ms, settings=self.settings)
        )
        if isinstance(built, Rejection):
            rec = built.record or AskRecord(
                ask_id=env.ask_id, tag=tag, reply_to=env.reply_to, format=env.format, created_ms=created_ms
            )
        else:
            rec = built
        if tag != slot_tag(env.reply_to):
            # The id is known under another reply_to: only a re-send of that ask can be meant.
            loaded = await self.store.load(tag, env.ask_id)
            if loaded is not None:
                rec = loaded.record
        schedule = rec.deadline_ms if isinstance(built, AskRecord) else None
        channel_token = False
        # A duplicate or re-send of such an ask posts nothing (in flight: accept finds it busy).
        posts = seen not in ("posted", "ended", "in_flight")
        if posts and isinstance(built, AskRecord) and built.route is not None and built.route.channel:
            # Before the lease: a busy channel's post limit raises Deferred here, and intake takes
            # other entries meanwhile (fair across channels) instead of holding a slot and a lease.
            await self.slack.take_post_token(built.route.channel)
            channel_token = True
        indexed = posts and isinstance(built, AskRecord) and tag == slot_tag(env.reply_to)
        if indexed:
            # Before the accept, as channels are tracked before the record: an ask may end at any
            # moment after it, and only an ending that comes after the index takes its rows out.
            assert isinstance(built, AskRecord)
            await quietly(self.home.index(built), f"indexing {env.ask_id} for the Home tab")
        asked = time.monotonic()  # no Slack call of this delivery outlives the lease (HeldLease)
        verdict = await self.store.accept(
            rec,
            consumer=self.consumer,
            lease_ms=self.lease_ms,
            pending_ttl_ms=self._pending_ttl_ms(rec),
            entry_id=entry.id,
            schedule_at_ms=schedule,
        )
        # Measured once the grant is back, so it never ends before Redis's own end of the lease.
        answered = time.monotonic()
        lease = Lease(self.consumer, verdict.token, answered + self.lease_ms / 1000)
        if indexed and verdict.verdict in ("refused", "ended"):
            # Ended before this accept (or never to be): the rows just written have nobody to take them out.
            await quietly(self.store.home_leave([(env.ask_id, tag)]), f"unindexing {env.ask_id}")
        if verdict.verdict == "refused":
            await self._refused(entry, rec)
            return
        if verdict.verdict == "ended":
            await self._recover(verdict, entry, tag, env.ask_id, env.reply_to)
            return
        if verdict.verdict == "posted":
            METRICS.asks.labels(result="duplicate").inc()
            await self.store.ack(entry.id)
            if verdict.detail == "adopted" and isinstance(built, AskRecord):
                # The copy an earlier delivery posted is the ask's: its timers, as after a post.
                await self.timers.schedule_next(rec, step=0, reminders=0)
            return
        if verdict.verdict == "busy":
            # Another live replica holds the lease; reclaim brings it back if that one dies. Finding
            # a live lease is no failed delivery: the count XCLAIM added goes back, so only real
            # failures reach SLACK_ASK_MAX_DELIVERIES, and the next reclaim comes as the lease ends.
            await self.store.unclaim_busy(
                entry,
                self.consumer,
                lease_left_ms=int(verdict.detail or 0),
                reclaim_idle_ms=self.settings.reclaim_idle_ms,
            )
            return
        if isinstance(built, Rejection):
            METRICS.asks.labels(result=built.code).inc()
            if built.kind == "unavailable":
                error = ResultError(code=built.code, message=built.message)
                ending = results.ended_without_answer(rec, "unavailable", error=error)
            else:
                ending = results.envelope_error(built.code, built.message)
            await self._end_leased(rec, ending, entry, lease, event=built.code, detail=built.message)
            return
        if verdict.verdict == "cancel":
            ending = results.ended_without_answer(rec, "cancelled")
            await self._end_leased(rec, ending, entry, lease, event="cancelled", detail=verdict.detail)
            return
        if verdict.verdict == "expired":
            # Read after its deadline, or taken over from a holder that froze or died past it: the
            # deadline wins, with the ask's timeout policy.
            await self._end_leased(
                rec, results.timed_out(rec), entry, lease, event="timeout", detail=verdict.detail
            )
            return
        held = HeldLease(lease, rec.tag, rec.ask_id, asked=asked, answered=answered, lease_ms=self.lease_ms)
        with self.leases.hold(held):  # renewed while the delivery is in flight, never after
            await self._deliver(rec, entry, held, channel_token=channel_token)
        if held.cut:
            # A post cut by its lease's end (renewals failed: Redis away, a pause) may have reached
            # Slack. Handled again at once by this replica (its own lease, its own pending entries
            # read again), it would be posted twice; held back until the lease is over in Redis and
            # Slack's event for a copy that landed has been learned, the takeover adopts that copy.
            await asyncio.sleep(max(held.until - time.monotonic(), 0.0) + LEARN_AFTER_S + 1.0)

    async def _end_leased(
        self, rec: AskRecord, ending: results.Ending, entry: Entry, lease: Lease, *, event: str, detail: str
    ) -> None:
        """End an ask from intake, under its lease, without a post in flight; then ack the entry.
        Fenced: when the lease is no longer the current one, nothing changes and the entry is left
        to the replica that holds the ask now."""
        verdict = await self.endings.end(
            rec, ending, actor=None, event=event, detail=detail, messages=[], release_lease=True, lease=lease
        )
        if verdict.verdict == "stale":
            log.warning(
                "stale lease %s on %s (now %s): dropping its %s ending",
                lease,
                rec.ask_id,
                verdict.detail,
                event,
            )
            return
        await self.store.ack(entry.id)

    async def _recover(
        self, verdict: AcceptVerdict, entry: Entry, tag: str, ask_id: str, reply_to: str
    ) -> None:
        """An ask that already ended came again in a new entry: push its stored result once more,
        onto the reply_to it was first sent with (protocol section 10, point 1)."""
        if verdict.entry == entry.id or not verdict.detail:
            await self.store.ack(entry.id)
            return  # the same entry reclaimed after a crash: its result is already out
        METRICS.asks.labels(result="resent").inc()
        stored = await self.store.load(tag, ask_id)
        await self._push_or_park(entry, stored.record.reply_to if stored else reply_to, verdict.detail)

    async def _push_or_park(self, entry: Entry, reply_to: str, result: str) -> None:
        """Push a result outside resolve and ack the entry; when reply_to is a key of another type,
        nothing is pushed and the entry goes to the dead-letter stream with the reason (section 1)."""
        problem = await self.store.repush(reply_to, result)
        if problem is None:
            await self.store.ack(entry.id)
            return
        METRICS.dead_letters.labels(reason="reply_to").inc()
        await self.store.dead_letter(entry, problem)

    async def _refused(self, entry: Entry, rec: AskRecord) -> None:
        """accept.lua found reply_to to be a key of another type: the record says so (ended, nothing
        pushed), and the entry is parked with the reason."""
        METRICS.dead_letters.labels(reason="reply_to").inc()
        await self.store.dead_letter(
            entry, f"reply_to {rec.reply_to} is not a list (nor missing): nothing was pushed"
        )

    async def _reject_unparsed(self, entry: Entry, exc: EnvelopeError, created_ms: int) -> None:
        if exc.reply_to is None:
            METRICS.dead_letters.labels(reason=exc.code).inc()
            await self.store.dead_letter(entry, f"{exc.code}: {exc.message} (no readable reply_to)")
            return
        forbidden = self.store.keys.reply_to_problem(exc.reply_to)
        if forbidden is not None:
            METRICS.dead_letters.labels(reason="reply_to").inc()
            await self.store.dead_letter(entry, f"{exc.code}: {exc.message}; and {forbidden}")
            return
        ending = results.envelope_error(exc.code, exc.message)
        if exc.ask_id is None:
            now = await self.store.server_time_ms()
            prefix = results.result_prefix(
                ask_id=None,
                format="pi-question",
                ending=ending,
                responder=None,
                slack=None,
                created_at=iso_ms(created_ms),
            )
            await self._push_or_park(entry, exc.reply_to, results.complete(prefix, iso_ms(now)))
            return
        tag = await self.store.claim_index(exc.ask_id, slot_tag(exc.reply_to), self._pending_ttl_ms(None))
        rec = AskRecord(ask_id=exc.ask_id, tag=tag, reply_to=exc.reply_to, created_ms=created_ms)
        verdict = await self.store.accept(
            rec,
            consumer=self.consumer,
            lease_ms=self.lease_ms,
            pending_ttl_ms=self._pending_ttl_ms(None),
            entry_id=entry.id,
            schedule_at_ms=None,
        )
        if verdict.verdict == "refused":
            await self._refused(entry, rec)
            return
        if verdict.verdict == "ended":
            await self._recover(verdict, entry, tag, exc.ask_id, exc.reply_to)
            return
        if verdict.verdict in ("post", "cancel", "expired"):
            lease = Lease(self.consumer, verdict.token, time.monotonic() + self.lease_ms / 1000)
            await self._end_leased(rec, ending, entry, lease, event=exc.code, detail=exc.message)
        elif verdict.verdict != "busy":
            await self.store.ack(entry.id)

    async def _handle_cancel(self, entry: Entry) -> None:
        try:
            env = parse_cancel_envelope(entry.fields["cancel"])
        except EnvelopeError as exc:
            METRICS.dead_letters.labels(reason="bad_cancel").inc()
            await self.store.dead_letter(entry, f"{exc.code}: {exc.message}")
            return
        bind_ask_id(env.ask_id)
        forbidden = self.store.keys.reply_to_problem(env.reply_to)
        if forbidden is not None:
            METRICS.dead_letters.labels(reason="reply_to").inc()
            await self.store.dead_letter(entry, f"invalid_envelope: {forbidden}")
            return
        # The ask's slot: where its index says, else where its reply_to puts it. Remember-or-report
        # is one atomic step there, so an accept running at the same moment cannot slip between.
        tag = await self.store.lookup_tag(env.ask_id) or slot_tag(env.reply_to)
        seen = await self.store.cancel_or_remember(env.ask_id, env.reply_to, env.reason or "", tag=tag)
        loaded = await self.store.load(tag, env.ask_id) if seen == "found" else None
        if seen == "foreign":
            log.info("a cancel for %s names another reply_to; it changes nothing", env.ask_id)
            METRICS.refusals.labels(kind="foreign_cancel").inc()
        if loaded is not None and loaded.state != "ended":
            await self.endings.end(
                loaded.record,
                results.ended_without_answer(loaded.record, "cancelled"),
                actor=None,
                event="cancelled",
                detail=env.reason or "",
                messages=loaded.messages,
                reason=env.reason or "",
            )
        await self.store.ack(entry.id)

    async def _record_post(
        self, rec: AskRecord, posted: PostedMessage, entry: Entry, held: HeldLease
    ) -> str | None:
        """Record the message just posted, retrying through a Redis blip: a live message the ask does
        not know would keep its buttons after the end. Retrying is safe (posted.lua records a message
        once), and goes on while the intake lease lasts.

        A NotReplicatedError says posted.lua ran on the master (the message is in the record there)
        and only the replicas' confirmation is missing: the ask waits for a replica, the message is
        never withdrawn. Any other Redis error for longer than a blip (RECORD_RETRY_S) withdraws the
        message (``Room.withdraw``: marked withdrawn in the ask's record, then chat.delete) rather
        than leave it live while this replica waits, and may die; None says so, and the caller posts
        again once Redis is back. While Redis does not take the mark either, nothing is deleted (a
        copy deleted unmarked, whose record had landed, would dismiss the ask with its own delete
        event): the message stays live and its record goes on being retried.

        Every attempt is bounded by the lease (a call hung on a half-open link, or a process frozen in
        it, gives up when the lease has run out in Redis too, so a write still in flight then is
        refused by fencing): a record refused as stale, or cut by the lease's end and not found in
        the record after it, is "stale", and the post is withdrawn (``_withdraw_stale``)."""
        loop = asyncio.get_running_loop()
        lease = held.lease
        delay = 0.05
        withdraw_at = loop.time() + RECORD_RETRY_S
        extended = 0.0
        # posted.lua ran on the master (only replicas' confirmation is missing): nothing for fencing to
        # refuse, so the record may be retried for a whole lease from here, as before fencing.
        replicated_by = loop.time() + self.lease_ms / 1000
        while True:
            try:
                async with asyncio.timeout(max(max(held.until, extended) - loop.time(), 0.0)):
                    state = await self.store.posted(
                        rec.tag,
                        rec.ask_id,
                        [posted],
                        actor=self.consumer,
                        ack_entry=entry.id,
                        track_channel=True,
                        lease=lease,
                    )
            except TimeoutError:
                # The lease ran out with the record unanswered: it landed in time, or it never will.
                state = await self._landed_in_time(rec, posted, entry, lease)
            except NotReplicatedError as exc:
                failure: RedisError = exc
                state = ""
                extended = replicated_by
            except RedisError as exc:
                failure = exc
                state = ""
                if loop.time() >= withdraw_at and await self.withdraw(
                    rec, posted, why=f"{posted.channel}/{posted.ts}: not recorded, Redis is away ({exc})"
                ):
                    log.warning(
                        "Redis is away (%s): withdrew message %s of %s; it is posted again later",
                        exc,
                        posted.ts,
                        rec.ask_id,
                    )
                    return None
            if not state:
                if loop.time() + delay <= max(held.until, extended):
                    log.warning(
                        "could not record message %s of %s yet (%s); retrying", posted.ts, rec.ask_id, failure
                    )
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 2.0)
                    continue
                if isinstance(failure, NotReplicatedError):
                    raise failure  # recorded on the master: the ask waits for a replica, posted
                # Redis stayed away for the whole lease: whether a record landed, the record says.
                state = await self._landed_in_time(rec, posted, entry, lease)
            if state == "stale":
                await self._withdraw_stale(rec, posted, lease)
            return state

    async def _landed_in_time(self, rec: AskRecord, posted: PostedMessage, entry: Entry, lease: Lease) -> str:
        """After a record cut by its lease's end: did it land? A write still on its way is refused
        from now on (its lease has run out in Redis too), so the record decides for good: the message
        is in it ("ok" or "ended", and the entry is acked), or it never will be ("stale"). Asked until
        Redis answers (a withdrawal needs Redis for its mark anyway; until then the post stays, as a
        replica dying here would leave it: learned from Slack's event, or redrawn on a click)."""
        log.warning(
            "lease %s on %s ran out before the record of %s answered; the record decides once Redis answers",
            lease,
            rec.ask_id,
            posted.ts,
        )
        while True:
            try:
                async with asyncio.timeout(2.0):
                    loaded = await self.store.load(rec.tag, rec.ask_id)
                    known = loaded is not None and any(
                        (m.channel, m.ts) == (posted.channel, posted.ts) for m in loaded.messages
                    )
                    if known:
                        await self.store.ack(entry.id)
                    elif loaded is not None and loaded.state == "ended":
                        # The cut record's round trip may have tracked the channel (that goes before
                        # posted.lua) while the ended ask had left its channels already: nothing else
                        # would take this member out (the chaos test's stale_channel_member).
                        await self.store.untrack_channel(posted.channel, rec.ask_id, rec.tag)
            except (TimeoutError, RedisError):
                await asyncio.sleep(0.2)
                continue
            if not known:
                return "stale"
            assert loaded is not None
            return "ended" if loaded.state == "ended" else "ok"

    async def _withdraw_stale(self, rec: AskRecord, posted: PostedMessage, lease: Lease) -> None:
        """A post made under a lease that is no longer the current one (this replica froze, or lost
        Redis, past it): another replica holds the ask, and the copy goes, marked withdrawn first
        (``Room.withdraw``) so that no event for its delete dismisses the ask; while Redis does not
        take the mark, it stays (a message Slack tells of is learned, as after a crash)."""
        log.warning(
            "stale lease %s on %s: dropping the delivery and withdrawing its post %s/%s",
            lease,
            rec.ask_id,
            posted.channel,
            posted.ts,
        )
        await self.withdraw(
            rec, posted, why=f"{posted.channel}/{posted.ts}: posted under stale lease {lease}"
        )

    async def _deliver(
        self, rec: AskRecord, entry: Entry, held: HeldLease, *, channel_token: bool = False
    ) -> None:
        # A post withdrawn while Redis was away is made again once Redis answers (within the lease).
        while await self._deliver_once(rec, entry, held, channel_token=channel_token):
            while True:
                try:
                    await self.store.server_time_ms()
                    break
                except RedisError:
                    if time.monotonic() > held.deadline:
                        raise
                    await asyncio.sleep(0.2)

    async def _deliver_once(
        self, rec: AskRecord, entry: Entry, held: HeldLease, *, channel_token: bool = False
    ) -> bool:
        """One post and its record; True when the post was withdrawn (Redis away) and must be made again."""
        assert rec.route is not None
        route, lease = rec.route, held.lease
        try:
            target = await self.slack.target_for(
                channel=route.channel, user=route.user, thread_ts=route.thread_ts, deadline=held
            )
            # Display only ("due in 5 min"); every decision uses Redis time.
            message = render.render_ask_message(rec, now_ms=int(time.time() * 1000))
            ts = await self.slack.post(
                target,
                text=message.text,
                blocks=message.blocks,
                deadline=held,
                channel_token=channel_token and target.channel == route.channel,
            )
        except SlackBusyError as exc:
            # Slack's rate limit left no call before the lease ends, and nothing was posted: the entry
            # stays pending and is delivered again once the lease is over (429s are never counted
            # as Slack being unavailable; the lease bounds the wait, so no ask is posted twice).
            log.info("delivery of %s waits for its lease to end: %s", rec.ask_id, exc)
            left_ms = int((held.deadline - time.monotonic()) * 1000)
            if left_ms <= 0 or held.lost:
                # The lease ran out under the call (this process was frozen in it, say): the entry may
                # be another replica's by now, and stays pending for whoever holds it.
                log.warning("lease %s on %s ran out in a Slack call: handed back", lease, rec.ask_id)
                held.cut = True
                return False
            # Waiting out Slack's rate limit is no failed delivery either: the count goes back, and
            # the next reclaim comes as the lease ends (SLACK_ASK_MAX_DELIVERIES counts failures only).
            try:
                await self.store.unclaim_busy(
                    entry, self.consumer, lease_left_ms=left_ms, reclaim_idle_ms=self.settings.reclaim_idle_ms
                )
            except RedisError as redis_exc:
                log.warning("could not hand back the delivery count of %s: %s", entry.id, redis_exc)
            return False
        except SlackError as exc:
            METRICS.asks.labels(result="unavailable").inc()
            message_text = str(exc)
            ending = results.ended_without_answer(
                rec, "unavailable", error=ResultError(code=exc.code, message=message_text)
            )
            await self._end_leased(rec, ending, entry, lease, event="unavailable", detail=message_text)
            return False
        posted = PostedMessage(channel=target.channel, ts=ts, step=0)
        METRICS.asks.labels(result="posted").inc()
        state = await self._record_post(rec, posted, entry, held)
        if state is None:
            return True
        if state in ("ok", "ended"):
            self.recorded.add(posted.channel, posted.ts)  # its message event needs no look
        if state == "stale":
            return False
        if state == "ended":
            # Ended (cancelled, say) while we were posting: never leave a live button behind.
            loaded = await self.store.load(rec.tag, rec.ask_id)
            if loaded is not None and loaded.result is not None:
                await self.endings.finish_messages(
                    loaded.record, loaded.messages, loaded.result, loaded.by, withdrawn=loaded.withdrawn
                )
        elif self.timers.next_timer(rec, step=0, reminders=0) != rec.deadline_ms:
            # The deadline timer was set at accept; only earlier escalation or reminder timers are new.
            await self.timers.schedule_next(rec, step=0, reminders=0)
        return False
