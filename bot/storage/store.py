"""The only code that talks to Redis: intake stream, ask records, results, timers and audit.

Every state change is one Lua script (see ``bot/storage/lua``) doing a compare-and-set with Redis time;
the result push onto ``reply_to`` happens inside the same script as the state change.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Sequence
from typing import Any, Literal

from bot.errors import NotReplicatedError
from bot.home import indexes_anyone
from bot.model import AskRecord, PostedMessage
from bot.results import parse_result
from bot.storage.base import Step, time_ms
from bot.storage.finishing import Finishing
from bot.storage.home_index import HomeIndex
from bot.storage.keys import due_member
from bot.storage.reads import AskReads
from bot.storage.records import (
    AcceptVerdict,
    AskStatus,
    AuditEntry,
    Entry,
    Lease,
    LoadedAsk,
    Resolution,
    ResolveVerdict,
    Vote,
    VoteVerdict,
    _s,
    _withdrawn,
    compact_record,
    iso_ms,
    messages_json,
)
from contract.envelopes import ResultVote

__all__ = [
    "AcceptVerdict",
    "AskStatus",
    "AuditEntry",
    "Entry",
    "Lease",
    "LoadedAsk",
    "Resolution",
    "ResolveVerdict",
    "Store",
    "Vote",
    "VoteVerdict",
    "iso_ms",
]

log = logging.getLogger(__name__)


class Store(AskReads, Finishing, HomeIndex):
    """Redis access for one deployment (key prefix): the intake stream (:class:`IntakeStream`), the
    timers (:class:`TimerStore`), ask records, results and the operators' reads."""

    # -- ask records -----------------------------------------------------------------------

    async def claim_index(self, ask_id: str, tag: str, ttl_ms: int) -> str:
        """Record which slot tag ``ask_id`` lives under; the first envelope seen wins while its ask
        exists. An index that outlived its ask (the id reused after retention, with another reply_to)
        is taken over: the new ask's keys must share its own reply_to's slot (Cluster: CROSSSLOT)."""
        return (await self.claim_index_state(ask_id, tag, ttl_ms))[0]

    async def claim_index_state(self, ask_id: str, tag: str, ttl_ms: int) -> tuple[str, str | None]:
        """``claim_index``, and the state of the ask already recorded under ``tag`` (None for an ask
        not seen yet): intake takes no post token for an ask posted or ended (a duplicate, a re-send) or
        ``in_flight`` (accepted under a live lease: accept finds it busy). One round trip for a new
        ask; a duplicate's state is read in a second."""
        index = self.keys.index(ask_id)
        ask = self.ask_keys(tag, ask_id).ask
        # The claim alone (no script: issue 22). An index set just now means no envelope came with
        # this id before, so there is no record to read. The claim found it held: the index's value
        # and the record's state, with its lease in Redis time, a duplicate's rare second trip. Not
        # atomic, and need not be: accept.lua decides; this only spares a duplicate a post token. (A
        # record whose index is gone, which a failover can do, then costs a token: accept finds it.)
        claimed = await self._run([lambda pipe: pipe.set(index, tag, nx=True, px=ttl_ms)], confirm=False)
        if claimed[0]:
            return tag, None
        current: Any
        if not self._cluster:
            current, (state, lease_until), now = await self._run(
                [
                    lambda pipe: pipe.get(index),
                    lambda pipe: pipe.hmget(ask, ["state", "lease_until"]),
                    lambda pipe: pipe.time(),
                ],
                confirm=False,
            )
            until_ms = int(_s(lease_until) or 0) if lease_until else 0
            live = int(until_ms > 0 and until_ms > time_ms(now))
        else:
            # A script, not HMGET + TIME: Cluster refuses TIME in a pipeline.
            current, (state, live) = await self._run(
                [lambda pipe: pipe.get(index), self._script("ask_state", [ask], [])], confirm=False
            )
        if current is None or _s(current) == tag:
            seen = _s(state) if state else None
            return tag, "in_flight" if seen == "accepted" and int(live) else seen
        old = _s(current)
        if await self.redis.exists(self.ask_keys(old, ask_id).ask):
            return old, None  # known under another reply_to: only a re-send; intake loads it
        await self.redis.set(self.keys.index(ask_id), tag, px=ttl_ms)
        return tag, None

    async def accept(
        self,
        record: AskRecord,
        *,
        consumer: str,
        lease_ms: int,
        pending_ttl_ms: int,
        entry_id: str,
        schedule_at_ms: int | None,
    ) -> AcceptVerdict:
        k = self.ask_keys(record.tag, record.ask_id)
        steps: list[Step] = []
        if schedule_at_ms is not None:
            # Timer first: a crash right after accept must not leave an ask without its deadline.
            # NX: a duplicate entry must not move the timer of an ask already in flight.
            due = {due_member(record.ask_id, record.tag): schedule_at_ms}
            steps.append(lambda pipe: pipe.zadd(self.keys.due, due, nx=True))
        steps.append(
            self._script(
                "accept",
                [k.ask, k.audit, k.cancel, record.reply_to],
                [
                    compact_record(record),
                    record.deadline_ms or 0,
                    consumer,
                    lease_ms,
                    pending_ttl_ms,
                    entry_id,
                    self.retention_ms,
                    1 if record.escalate or record.remind_every_ms else 0,
                ],
            )
        )
        replies = await self._run(steps)
        reply = [_s(x) for x in replies[-1]]
        verdict = AcceptVerdict(
            reply[0],  # type: ignore[arg-type]
            reply[1],
            reply[2] if len(reply) > 2 else "",
            reply[3] if len(reply) > 3 else "",
        )
        if verdict.verdict in ("ended", "refused") and schedule_at_ms is not None and int(replies[0]) == 1:
            # A re-send of an ended ask, or one refused at once: the timer just added belongs to nobody.
            await self.unschedule(record.ask_id, record.tag)
        if verdict.verdict in ("cancel", "expired", "refused"):
            # The id index lives as long as the record it points to (claim_index gave it a guess).
            # A ``post`` gives it its pending life in the round trip that records the post (posted).
            ttl = self.retention_ms if verdict.verdict == "refused" else pending_ttl_ms
            await self.redis.pexpire(self.keys.index(record.ask_id), ttl)
        return verdict

    async def posted(
        self,
        tag: str,
        ask_id: str,
        messages: Sequence[PostedMessage],
        *,
        actor: str,
        event: str = "posted",
        step: int | None = None,
        detail: str = "",
        ack_entry: str | None = None,
        track_channel: bool = False,
        stray: bool = False,
        lease: Lease | None = None,
    ) -> str:
        """Record new messages of an ask (and remember which channels it lives in, so archiving a
        channel can dismiss it; then ack its intake entry). ``lease``: the delivery's (fenced:
        ``stale`` when it is no longer the current one, and then nothing is recorded or acked).
        The id index keeps the pending life its claim gave it (``claim_index_state``)."""
        k = self.ask_keys(tag, ask_id)
        payload = messages_json(messages)
        member = due_member(ask_id, tag)
        tracked = sorted({self.keys.channel(m.channel) for m in messages}) if track_channel else []
        args: list[str | int] = [actor, payload, event, "" if step is None else str(step), detail]
        args += ["1" if stray else "0", *((lease.owner, lease.token) if lease is not None else ("", ""))]
        steps: list[Step] = []
        if not self._cluster:
            # One server: posted.lua tracks the channels, and sets the redraw timer of a message that
            # landed after the end, itself, in the step that records the message (nothing to undo).
            keys = [k.ask, k.audit, self.keys.due, *tracked]
            args += [member, self.finalize_after_ms, self.retention_ms * 2]
        else:
            # Cluster: the channel sets and the timers are in other slots. Before the record: once
            # posted.lua has run, the ask may end and leave its channels at any moment, and a member
            # added after that would stay behind; and a timer that takes the member out should nobody
            # read the answer (Timers).
            keys = [k.ask, k.audit]
            for channel_key in tracked:
                steps.extend(self._track(channel_key, member))
            if tracked:
                delay = [self.finalize_after_ms, member, "keep_earlier"]
                steps.append(self._script("schedule_in", [self.keys.due], delay))
        steps.append(self._script("posted", keys, args))
        reply = (await self._run(steps))[-1]
        state = _s(reply[0])
        if state in ("stale", "withdrawn"):
            if self._cluster and tracked and _s(reply[2]) == "ended":
                # Tracked above, refused here: the ended ask may have left its channels already (a
                # withdrawn copy learned from Slack's event after the end), and nothing else would.
                await self._run([lambda pipe, key=key: pipe.srem(key, member) for key in tracked])  # type: ignore[misc]
                await self.unschedule_if_finished(ask_id, tag)  # the timer set above, not needed now
            return state  # fenced (the entry is the current holder's to ack), or nothing recorded
        if ack_entry is not None:
            # After the record, not in its round trip: a stale delivery must leave the entry pending
            # for the replica that holds the ask now (the stream is in another slot than the ask).
            await self.ack(ack_entry)
        if state == "ended" and self._cluster:
            # A message that landed (or was learned of) after the end: the clean-up timer, which
            # finalize may already have removed, must be there until it is redrawn.
            await self.schedule_in(ask_id, tag, self.finalize_after_ms)
        return state

    async def advance(
        self,
        tag: str,
        ask_id: str,
        *,
        counter: Literal["step", "reminders"],
        expected: int,
        messages: Sequence[PostedMessage] = (),
        event: str,
        actor: str,
        detail: str = "",
    ) -> str:
        k = self.ask_keys(tag, ask_id)
        payload = messages_json(messages)
        [reply] = await self._run(
            [self._script("advance", [k.ask, k.audit], [counter, expected, payload, event, actor, detail])]
        )
        verdict = _s(reply[0])
        if verdict == "ended" and messages:
            # A step posted as the ask ended: its message is recorded; the clean-up timer (which
            # finalize may already have removed) must be there until it is redrawn.
            await self.schedule_in(ask_id, tag, 0)
        return verdict

    async def withdraw(
        self, tag: str, ask_id: str, messages: Sequence[PostedMessage], *, actor: str, detail: str
    ) -> str:
        """Mark ``messages`` withdrawn (``withdraw.lua``): taken out of the ask's messages, and never
        recorded again nor taken for the ask's by a delete event. The bot calls this before it deletes
        a copy of its own from Slack, never after. ``ok``; ``missing`` when the ask is gone; ``carries``
        when the copies are all a posted or ended ask has (adopted by a takeover): nothing changed,
        and they must stay in Slack.

        Every withdrawn copy is deleted again when the ask's messages are finished, so a copy
        withdrawn from an ended ask sets its clean-up timer again (in ``withdraw.lua`` on one server;
        on Cluster, where the due zset is in another slot, in a script of its own first: should the
        ask still be pending, that timer merely fires early and the sweeper sets the next again)."""
        k = self.ask_keys(tag, ask_id)
        payload = json.dumps([{"channel": m.channel, "ts": m.ts} for m in messages])
        timer, due, together = self._clean_up_timer(ask_id, tag)
        script = self._script("withdraw", [k.ask, k.audit, *due], [payload, actor, detail, *together])
        reply = (await self._run([*timer, script]))[-1]
        return _s(reply[0])

    async def resolve(self, resolution: Resolution) -> ResolveVerdict:
        """End the ask if nobody did yet: state, result push and audit in one atomic step.

        A timer ``finalize_after_ms`` ahead is set first so that, should this process die before it
        updated the Slack messages, a sweeper finishes the job (guarantee 3).
        """
        # On one server the Home tabs' bookkeeping is done by the ending that wins, in resolve.lua;
        # on Cluster the engine does it after (Endings.home_after).
        home = not self._cluster
        steps = self._resolve_steps(resolution, home=home)
        at = len(steps) - 1
        record = resolution.record
        replies = await self._run_endings(steps, [(record, at)])
        verdict = self._resolved(replies[at])
        if home and verdict.verdict == "won":
            raw = replies[at]
            verdict = dataclasses.replace(
                verdict, people=self._home_ended_parse(raw[5] if len(raw) > 5 else None)
            )
        elif verdict.verdict == "ended" and self._cluster:
            # Lost to an ending that may be finished already: the clean-up timer set first in this
            # round trip is then nobody's (the winner's finish removed its own before it).
            await self.unschedule_if_finished(record.ask_id, record.tag)
        return verdict

    async def resolve_many(self, resolutions: Sequence[Resolution]) -> list[ResolveVerdict]:
        """``resolve`` for many asks in one round trip (the sweeper's timeouts)."""
        steps: list[Step] = []
        endings: list[tuple[AskRecord, int]] = []
        for resolution in resolutions:
            steps.extend(self._resolve_steps(resolution))
            endings.append((resolution.record, len(steps) - 1))
        replies = await self._run_endings(steps, endings)
        return [self._resolved(replies[i]) for _, i in endings]

    async def _run_endings(
        self, steps: Sequence[Step], endings: Sequence[tuple[AskRecord, int]]
    ) -> list[Any]:
        """Run ``steps``, among them the scripts that may end asks (``resolve``, ``vote``: the reply at
        each ``(record, index)``), then the after-resolve step for every ask they ended. Also when the
        replicas did not confirm in time (``NotReplicatedError``): the scripts ran on the master, and
        the retry finds the ask ended, so nothing else would give its index the retention. Otherwise
        the index gets it in the round trip that finalizes the ask (``finalize_many``), which follows
        every ending (at once, or from the clean-up timer)."""
        try:
            replies = await self._run(steps)
        except NotReplicatedError as exc:
            if exc.replies is not None:
                await self._after_resolved([(rec, exc.replies[i]) for rec, i in endings])
            raise
        for rec, i in endings:
            _warn_undelivered(rec, replies[i])
        return replies

    async def _after_resolved(self, ended: Sequence[tuple[AskRecord, Any]]) -> None:
        """The id index of an ask that just ended (its script's raw reply is ``won``) gets the record's
        new lifetime (the retention). Housekeeping, not confirmed: losing it in a failover only leaves
        the index its longer (bounded) pending life."""
        steps: list[Step] = []
        for record, raw in ended:
            if _warn_undelivered(record, raw):
                index = self.keys.index(record.ask_id)
                steps.append(lambda pipe, index=index: pipe.pexpire(index, self.retention_ms))  # type: ignore[misc]
        if steps:
            await self._run(steps, confirm=False)

    def _resolve_steps(self, r: Resolution, *, home: bool = False) -> list[Step]:
        """The ending's steps, resolve.lua last. The clean-up timer: on one server in resolve.lua,
        set only by the ending that wins; on Cluster (the due zset is in another slot) in a script of
        its own first, and a losing caller takes it out again (``resolve``). ``home`` (one server
        only): the winner does the Home tabs' bookkeeping in the same step."""
        record = r.record
        k = self.ask_keys(record.tag, record.ask_id)
        timer, due, together = self._clean_up_timer(record.ask_id, record.tag)
        keys = [k.ask, k.audit, record.reply_to, *due]
        if home and not self._cluster:
            home_keys, home_args = self._home_ended_keys(
                record.tag,
                record.ask_id,
                r.actor,
                voted=record.approval is not None,
                indexed=indexes_anyone(record),
            )
            keys += home_keys
            together += home_args
        return [
            *timer,
            self._script(
                "resolve",
                keys,
                [
                    r.outcome,
                    r.result_prefix,
                    r.actor or "",
                    self.retention_ms,
                    "1" if r.refuse_late else "0",
                    r.event,
                    r.detail,
                    "",
                    "[]" if record.approval is not None else "null",
                    "1" if r.release_lease else "0",
                    r.reason,
                    r.lease.owner if r.lease is not None else "",
                    r.lease.token if r.lease is not None else "",
                    r.replica,
                    r.not_after_ms,
                    *together,
                ],
            ),
        ]

    def _clean_up_timer(self, ask_id: str, tag: str) -> tuple[list[Step], list[str], list[Any]]:
        """The clean-up timer a script sets for an ask (``resolve.lua``, ``vote.lua``: an ending;
        ``withdraw.lua``: a copy withdrawn from an ended ask), as (steps before the script, keys and
        arguments the script takes after its own): on one server the script sets it itself (the due
        zset, the delay and the member); on Cluster, where the due zset is in another slot, a script
        of its own goes first."""
        member = due_member(ask_id, tag)
        if self._cluster:
            delay = [self.finalize_after_ms, member, "keep_earlier"]
            return [self._script("schedule_in", [self.keys.due], delay)], [], []
        return [], [self.keys.due], [self.finalize_after_ms, member]

    async def vote(self, vote: Vote) -> VoteVerdict:
        """Record ``vote`` and decide, in one atomic step in the ask's slot (``vote.lua``).

        As for ``resolve``, the clean-up timer is set in case this vote decides and the process dies
        before the Slack messages are updated: on one server by the deciding vote in ``vote.lua``
        itself; on Cluster (the due zset is in another slot) in a script of its own first, where an
        undecided vote merely makes it fire early and the sweeper sets the ask's next timer again."""
        record = vote.record
        assert record.approval is not None, "vote() is for approval asks"
        k = self.ask_keys(record.tag, record.ask_id)
        timer, due, together = self._clean_up_timer(record.ask_id, record.tag)
        replies = await self._run_endings(
            [
                *timer,
                self._script(
                    "vote",
                    [k.ask, k.audit, record.reply_to, *due],
                    [
                        vote.voter.id,
                        json.dumps(
                            vote.voter.model_dump(mode="json"), ensure_ascii=True, separators=(",", ":")
                        ),
                        vote.option,
                        record.approval.count,
                        "1" if vote.option in record.approval.veto else "0",
                        vote.result_prefix,
                        self.retention_ms,
                        vote.replica,
                        vote.not_after_ms,
                        *together,
                    ],
                ),
            ],
            [(record, len(timer))],
        )
        reply = [_s(x) for x in replies[-1]]
        verdict = reply[0]
        if verdict == "won":
            result = parse_result(reply[1])
            msgs, channels, withdrawn = _won_messages(reply)
            return VoteVerdict(
                "won", list(result.envelope.votes or []), result, msgs, channels=channels, withdrawn=withdrawn
            )
        if verdict in ("counted", "same"):
            votes = [ResultVote.model_validate(v) for v in json.loads(reply[1])]
            return VoteVerdict(verdict, votes)  # type: ignore[arg-type]
        return VoteVerdict(verdict, detail=reply[1] if len(reply) > 1 else "")  # type: ignore[arg-type]

    @staticmethod
    def _resolved(raw: Any) -> ResolveVerdict:
        reply = [_s(x) for x in raw]
        verdict = reply[0]
        if verdict == "won":
            msgs, channels, withdrawn = _won_messages(reply)
            undelivered = reply[3] if len(reply) > 3 else ""
            return ResolveVerdict(
                "won",
                parse_result(reply[1]),
                msgs,
                undelivered=undelivered,
                channels=channels,
                withdrawn=withdrawn,
            )
        return ResolveVerdict(verdict, detail=reply[1] if len(reply) > 1 else "")  # type: ignore[arg-type]

    async def repush(self, reply_to: str, result: str) -> str | None:
        """Push a result outside ``resolve``: a stored one again (an agent re-sent an ended ask to
        recover it), or the error of an envelope whose ask_id could not be read (nothing to record).

        Only onto a list or a missing key, checked in the same script as the push (``push.lua``):
        returns None when pushed, else why not (then nothing about ``reply_to`` changed)."""
        [reply] = await self._run([self._script("push", [reply_to], [result, self.retention_ms])])
        verdict = [_s(x) for x in reply]
        if verdict[0] == "ok":
            return None
        return f"reply_to {reply_to} is a {verdict[1]}, not a list: nothing was pushed"

    async def cancel_or_remember(
        self, ask_id: str, reply_to: str, reason: str, *, tag: str
    ) -> Literal["remembered", "found", "foreign"]:
        """An agent's cancel, in one atomic step in the ask's slot (``cancel.lua``): remember it when
        the ask is not there yet, or report that it is (``found``: the caller ends it if pending;
        ``foreign``: it belongs to another reply_to, so the cancel changes nothing). No ``accept`` can
        run between the look and the tombstone, so no cancel is lost to that race."""
        k = self.ask_keys(tag, ask_id)
        [reply] = await self._run(
            [self._script("cancel", [k.ask, k.cancel, k.audit], [reason, self.retention_ms, reply_to])]
        )
        return _s(reply[0])  # type: ignore[return-value]

    async def audit(self, tag: str, ask_id: str, event: str, *, by: str | None, detail: str = "") -> None:
        """One audit entry for the ask, in Redis time (``audit.lua``): the list keeps its lifetime,
        at least the ask's."""
        k = self.ask_keys(tag, ask_id)
        args = [event, by or "", detail, self.retention_ms]
        await self._run([self._script("audit", [k.ask, k.audit], args)])


def _won_messages(
    reply: Sequence[str],
) -> tuple[list[PostedMessage], frozenset[str], frozenset[tuple[str, str]]]:
    """From an ending script's ``won`` reply (``write_result`` in ``_common.lua``): the ask's messages,
    the channels it was tracked in (its messages' and its withdrawn copies') and the withdrawn copies,
    each field read once."""
    msgs = [PostedMessage.model_validate(m) for m in json.loads(reply[2] or "[]") or []]
    withdrawn = _withdrawn(reply[4] if len(reply) > 4 else None)
    channels = frozenset({m.channel for m in msgs} | {channel for channel, _ in withdrawn})
    return msgs, channels, withdrawn


def _warn_undelivered(record: AskRecord, raw: Any) -> bool:
    """True when the script's raw reply says it ended the ask; logs a result it could not push."""
    reply = [_s(x) for x in raw]
    if reply[0] != "won":
        return False
    if len(reply) > 3 and reply[3]:
        log.warning("ask %s ended but %s", record.ask_id, reply[3])
    return True
