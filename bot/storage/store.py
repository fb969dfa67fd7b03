"""The only code that talks to Redis: intake stream, ask records, results, timers and audit.

Every state change is one Lua script (see ``bot/storage/lua``) doing a compare-and-set with Redis time;
the result push onto ``reply_to`` happens inside the same script as the state change.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import NoScriptError, ResponseError

from bot.errors import StoreError
from bot.model import AskRecord, AskState, PostedMessage
from bot.results import StoredResult, parse_result
from bot.storage.keys import AUDIT_MAX, DEAD_MAXLEN, GROUP, AskKeys, Keys, due_member, parse_due_member
from bot.storage.scripts import SCRIPT_NAMES, script_source
from contract.envelopes import ResultEnvelope, ResultResponder, ResultVote

__all__ = [
    "AcceptVerdict",
    "AskStatus",
    "AuditEntry",
    "Entry",
    "LoadedAsk",
    "Resolution",
    "ResolveVerdict",
    "Store",
    "Vote",
    "VoteVerdict",
    "iso_ms",
]

log = logging.getLogger(__name__)

FINALIZE_AFTER_MS = 15_000
"""How long after an ask ends a sweeper checks that its Slack messages were updated."""

_Step = Callable[[Any], Any]
"""Queues one command on a pipeline (or, on Redis Cluster, returns its coroutine on the client)."""


def iso_ms(ms: int) -> str:
    """RFC 3339 UTC with milliseconds, the same form the Lua scripts write."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _votes(stored: str | None) -> list[ResultVote]:
    """The hash's ``votes`` field (see vote.lua) as the result shows it."""
    return [
        ResultVote(
            user=ResultResponder.model_validate_json(v["user"]), selected=[int(v["s"])], at=str(v["at"])
        )
        for v in (json.loads(stored) if stored else [])
    ]


def _stored_result(key: str, text: str | None) -> StoredResult | None:
    if not text:
        return None
    try:
        return parse_result(text)
    except ValueError as exc:  # json's and pydantic's errors both are
        raise StoreError(f"ask record {key} holds a result that cannot be read: {exc}") from None


@dataclass(frozen=True, slots=True)
class Entry:
    """One intake stream entry."""

    id: str
    fields: dict[str, str]
    deliveries: int = 1
    problem: str | None = None
    """Why the entry cannot be read at all (a field name or value that is not UTF-8); such fields are
    kept with their bytes escaped, so the dead letter still shows them."""

    @property
    def created_ms(self) -> int:
        return int(self.id.split("-", 1)[0])


def _entry(entry_id: Any, raw: dict[Any, Any], deliveries: int = 1) -> Entry:
    # A stream entry is agent input: one undecodable byte must become a dead letter, not an
    # exception that ends the loop reading the stream (protocol section 1).
    fields: dict[str, str] = {}
    problem: str | None = None
    for key, value in raw.items():
        name, bad_name = _decode(key)
        text, bad_value = _decode(value)
        if bad_name and problem is None:
            problem = f"a field name ({name[:40]!r}) is not UTF-8"
        elif bad_value and problem is None:
            problem = f"the {name[:40]!r} field is not UTF-8"
        fields[name] = text
    return Entry(_s(entry_id), fields, deliveries, problem)


def _decode(value: Any) -> tuple[str, bool]:
    if not isinstance(value, bytes):
        return str(value), False
    try:
        return value.decode(), False
    except UnicodeDecodeError:
        return value.decode("utf-8", "backslashreplace"), True


@dataclass(frozen=True, slots=True)
class AcceptVerdict:
    verdict: Literal["post", "busy", "posted", "ended", "cancel", "expired", "refused"]
    detail: str = ""
    entry: str = ""
    """For ``ended``: the stream entry that first carried the ask (a different one means a re-send)."""


@dataclass(frozen=True, slots=True)
class ResolveVerdict:
    verdict: Literal["won", "ended", "late", "missing", "moved"]
    result: StoredResult | None = None
    messages: list[PostedMessage] = field(default_factory=list)
    detail: str = ""
    undelivered: str = ""
    """For ``won``: why the result was not pushed ('' when it was): reply_to is a key of another type."""


@dataclass(frozen=True, slots=True)
class Vote:
    """One click on an approval ask (protocol section 13), ready for the vote script."""

    record: AskRecord
    voter: ResultResponder
    """The voter as the result shows them."""
    option: int
    result_prefix: str
    """The result should this vote decide (the usual single-question result for ``option``)."""


@dataclass(frozen=True, slots=True)
class VoteVerdict:
    """``won``: this vote decided (``result``, ``messages`` as for resolve); ``counted``: recorded,
    undecided; ``same``: a repeat of the voter's current vote, nothing changed; ``ended``, ``late``,
    ``missing``: refused, nothing changed. ``votes`` is the result-form list after the vote."""

    verdict: Literal["won", "counted", "same", "ended", "late", "missing"]
    votes: list[ResultVote] = field(default_factory=list)
    result: StoredResult | None = None
    messages: list[PostedMessage] = field(default_factory=list)
    detail: str = ""


@dataclass(frozen=True, slots=True)
class LoadedAsk:
    record: AskRecord
    state: AskState
    messages: list[PostedMessage]
    step: int
    reminders: int
    outcome: str | None
    result: StoredResult | None
    by: str | None
    resolved_ms: int | None
    finalized: bool
    votes: list[ResultVote] | None = None
    """Approval asks: the votes so far, as the result will show them (None without approval)."""


@dataclass(frozen=True, slots=True)
class Resolution:
    """One ending for ``resolve_many``."""

    record: AskRecord
    outcome: str
    result_prefix: str
    actor: str | None
    event: str
    detail: str = ""
    refuse_late: bool = False
    """An answer: refused (``late``) when it reaches Redis after the deadline."""
    release_lease: bool = False
    """Intake ends the ask without posting it (refused, unavailable, parked): no delivery is in flight,
    so its clean-up need not wait for the intake lease (``finalize.lua``)."""


class AuditEntry(BaseModel):
    at: str
    event: str
    by: str | None
    detail: str | None


class AskStatus(BaseModel):
    """What ``slack-ask status`` and ``list`` print (protocol section 12)."""

    ask_id: str
    state: AskState
    outcome: str | None
    created_at: str
    deadline: str | None
    route: str
    step: int = 0
    audit: list[AuditEntry] | None = None
    result: ResultEnvelope | None = None


class Store:
    """Redis access for one deployment (key prefix)."""

    def __init__(
        self,
        redis: Redis,
        prefix: str = "slack-ask",
        *,
        retention_ms: int = 7 * 86_400_000,
        finalize_after_ms: int = FINALIZE_AFTER_MS,
    ) -> None:
        self.redis = redis
        self.keys = Keys(prefix)
        self.retention_ms = retention_ms
        self.finalize_after_ms = finalize_after_ms
        self._cluster = isinstance(redis, RedisCluster)
        self._shas = {name: hashlib.sha1(script_source(name).encode()).hexdigest() for name in SCRIPT_NAMES}

    # -- scripts ---------------------------------------------------------------------------

    async def load_scripts(self) -> None:
        """SCRIPT LOAD every script (at start, and again after Redis lost them: restart, failover)."""
        for name in SCRIPT_NAMES:
            await self.redis.script_load(script_source(name))

    def _script(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> _Step:
        sha = self._shas[name]
        return lambda pipe: pipe.evalsha(sha, len(keys), *keys, *args)

    async def _direct(self, step: _Step) -> Any:
        try:
            return await step(self.redis)
        except NoScriptError:
            await self.load_scripts()
            return await step(self.redis)

    def _track(self, key: str, member: str) -> list[_Step]:
        return [lambda pipe: pipe.sadd(key, member), lambda pipe: pipe.pexpire(key, self.retention_ms * 2)]

    async def _run(self, steps: Sequence[_Step]) -> list[Any]:
        """Run ``steps`` in one pipeline: one round trip. Scripts go as EVALSHA (redis-py would
        otherwise add a SCRIPT EXISTS round trip to every pipeline); NOSCRIPT reloads and retries,
        which is safe because every step is idempotent or a compare-and-set."""
        if self._cluster:
            # redis-py's cluster pipelines refuse EVALSHA: one command at a time, in order (each
            # script is still atomic; only the round-trip saving is lost).
            return [await self._direct(step) for step in steps]
        for attempt in (1, 2):
            async with self.redis.pipeline(transaction=False) as pipe:
                for step in steps:
                    step(pipe)
                try:
                    return list(await pipe.execute())
                except NoScriptError:
                    if attempt == 2:
                        raise
                    await self.load_scripts()
        raise AssertionError("unreachable")  # pragma: no cover

    # -- time and health -------------------------------------------------------------------

    async def server_time_ms(self) -> int:
        seconds, micros = await self.redis.time()
        return int(seconds) * 1000 + int(micros) // 1000

    async def eviction_policy(self) -> str | None:
        """Redis's ``maxmemory-policy``, or None when the server does not tell (managed Redis)."""
        try:
            conf = await self.redis.config_get("maxmemory-policy")
        except ResponseError:
            return None
        value = conf.get("maxmemory-policy") or conf.get(b"maxmemory-policy")  # type: ignore[call-overload]
        return _s(value) if value is not None else None

    # -- intake stream ---------------------------------------------------------------------

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
        pending = await self.redis.xpending_range(
            self.keys.asks, GROUP, min="-", max="+", count=count, idle=min_idle_ms
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

    async def drop_idle_consumers(self, consumer: str, *, min_idle_ms: int) -> list[str]:
        """Remove the group's consumers other than ``consumer`` that have nothing pending and were
        idle longer than ``min_idle_ms`` (in one script, so none gets an entry in between)."""
        [reply] = await self._run(
            [self._script("drop_consumers", [self.keys.asks], [consumer, min_idle_ms, GROUP])]
        )
        return [_s(name) for name in reply]

    async def ack(self, entry_id: str) -> None:
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.xack(self.keys.asks, GROUP, entry_id)
            pipe.xdel(self.keys.asks, entry_id)
            await pipe.execute()

    async def dead_letter(self, entry: Entry, reason: str) -> None:
        """Park an entry nobody can answer (no readable reply_to, or poison) with its reason, then ack it."""
        fields: dict[str, str] = {**entry.fields, "reason": reason, "entry_id": entry.id}
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.xadd(self.keys.dead, fields, maxlen=DEAD_MAXLEN, approximate=True)  # type: ignore[arg-type]
            pipe.xack(self.keys.asks, GROUP, entry.id)
            pipe.xdel(self.keys.asks, entry.id)
            await pipe.execute()

    # -- ask records -----------------------------------------------------------------------

    def ask_keys(self, tag: str, ask_id: str) -> AskKeys:
        return self.keys.for_ask(tag, ask_id)

    async def claim_index(self, ask_id: str, tag: str, ttl_ms: int) -> str:
        """Record which slot tag ``ask_id`` lives under; the first envelope seen wins while its ask
        exists. An index that outlived its ask (the id reused after retention, with another reply_to)
        is taken over: the new ask's keys must share its own reply_to's slot (Cluster: CROSSSLOT)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.set(self.keys.index(ask_id), tag, nx=True, px=ttl_ms)
            pipe.get(self.keys.index(ask_id))
            _, current = await pipe.execute()
        if current is None or _s(current) == tag:
            return tag
        old = _s(current)
        if await self.redis.exists(self.ask_keys(old, ask_id).ask):
            return old
        await self.redis.set(self.keys.index(ask_id), tag, px=ttl_ms)
        return tag

    async def extend_index(self, ask_id: str, ttl_ms: int) -> None:
        await self.redis.pexpire(self.keys.index(ask_id), ttl_ms)

    async def lookup_tag(self, ask_id: str) -> str | None:
        value = await self.redis.get(self.keys.index(ask_id))
        return _s(value) if value is not None else None

    async def find(self, ask_id: str) -> LoadedAsk | None:
        """An ask from its id alone (operators, cancels): through the id index, then its record."""
        tag = await self.lookup_tag(ask_id)
        return await self.load(tag, ask_id) if tag is not None else None

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
        steps: list[_Step] = []
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
                    # ensure_ascii: a text cut at 4000 UTF-16 units may end in half a surrogate pair.
                    json.dumps(record.model_dump(mode="python"), ensure_ascii=True, separators=(",", ":")),
                    record.created_ms,
                    record.deadline_ms or 0,
                    consumer,
                    lease_ms,
                    pending_ttl_ms,
                    entry_id,
                    self.retention_ms,
                ],
            )
        )
        replies = await self._run(steps)
        reply = [_s(x) for x in replies[-1]]
        verdict = AcceptVerdict(reply[0], reply[1], reply[2] if len(reply) > 2 else "")  # type: ignore[arg-type]
        if verdict.verdict in ("ended", "refused") and schedule_at_ms is not None and int(replies[0]) == 1:
            # A re-send of an ended ask, or one refused at once: the timer just added belongs to nobody.
            await self.unschedule(record.ask_id, record.tag)
        if verdict.verdict in ("post", "cancel", "expired", "refused"):
            # The id index lives as long as the record it points to (claim_index gave it a guess).
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
    ) -> str:
        """Record new messages of an ask (and, in the same round trip, ack its intake entry and
        remember which channels it lives in, so archiving a channel can dismiss it)."""
        k = self.ask_keys(tag, ask_id)
        payload = json.dumps([m.model_dump() for m in messages])
        steps: list[_Step] = []
        if track_channel:
            for channel_key in {self.keys.channel(m.channel) for m in messages}:
                steps.extend(self._track(channel_key, due_member(ask_id, tag)))
        at = len(steps)
        steps.append(
            self._script(
                "posted", [k.ask, k.audit], [actor, payload, event, "" if step is None else str(step), detail]
            )
        )
        if ack_entry is not None:
            entry = ack_entry
            steps.append(lambda pipe: pipe.xack(self.keys.asks, GROUP, entry))
            steps.append(lambda pipe: pipe.xdel(self.keys.asks, entry))
        replies = await self._run(steps)
        state = _s(replies[at][0])
        if state == "ended":
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
        payload = json.dumps([m.model_dump() for m in messages])
        [reply] = await self._run(
            [self._script("advance", [k.ask, k.audit], [counter, expected, payload, event, actor, detail])]
        )
        verdict = _s(reply[0])
        if verdict == "ended" and messages:
            # A step posted as the ask ended: its message is recorded; the clean-up timer (which
            # finalize may already have removed) must be there until it is redrawn.
            await self.schedule_in(ask_id, tag, 0)
        return verdict

    async def schedule_in(self, ask_id: str, tag: str, delay_ms: int) -> None:
        """A timer ``delay_ms`` from now in Redis time, unless an earlier one is set."""
        member = due_member(ask_id, tag)
        await self._run([self._script("schedule_in", [self.keys.due], [delay_ms, member, "keep_earlier"])])

    async def resolve(self, resolution: Resolution) -> ResolveVerdict:
        """End the ask if nobody did yet: state, result push and audit in one atomic step.

        A timer ``finalize_after_ms`` ahead is set first so that, should this process die before it
        updated the Slack messages, a sweeper finishes the job (guarantee 3).
        """
        replies = await self._run(self._resolve_steps(resolution))
        verdict = self._resolved(replies[-1])
        await self._after_resolved([(resolution.record, verdict)])
        return verdict

    async def resolve_many(self, resolutions: Sequence[Resolution]) -> list[ResolveVerdict]:
        """``resolve`` for many asks in one round trip (the sweeper's timeouts)."""
        steps: list[_Step] = []
        for resolution in resolutions:
            steps.extend(self._resolve_steps(resolution))
        replies = await self._run(steps)
        verdicts = [self._resolved(reply) for reply in replies[1::2]]
        await self._after_resolved([(r.record, v) for r, v in zip(resolutions, verdicts, strict=True)])
        return verdicts

    async def _after_resolved(self, ended: Sequence[tuple[AskRecord, ResolveVerdict]]) -> None:
        """The id index of an ask that just ended gets the record's new lifetime (the retention)."""
        steps: list[_Step] = []
        for record, verdict in ended:
            if verdict.verdict == "won":
                if verdict.undelivered:
                    log.warning("ask %s ended but %s", record.ask_id, verdict.undelivered)
                index = self.keys.index(record.ask_id)
                steps.append(lambda pipe, index=index: pipe.pexpire(index, self.retention_ms))  # type: ignore[misc]
        if steps:
            await self._run(steps)

    def _resolve_steps(self, r: Resolution) -> list[_Step]:
        record = r.record
        k = self.ask_keys(record.tag, record.ask_id)
        member = due_member(record.ask_id, record.tag)
        return [
            self._script("schedule_in", [self.keys.due], [self.finalize_after_ms, member, "keep_earlier"]),
            self._script(
                "resolve",
                [k.ask, k.audit, record.reply_to],
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
                ],
            ),
        ]

    async def vote(self, vote: Vote) -> VoteVerdict:
        """Record ``vote`` and decide, in one atomic step in the ask's slot (``vote.lua``).

        As for ``resolve``, the clean-up timer goes first, in case this vote decides and the process
        dies before the Slack messages are updated; on an undecided vote it merely fires early, and
        the sweeper sets the ask's next timer again."""
        record = vote.record
        assert record.approval is not None, "vote() is for approval asks"
        k = self.ask_keys(record.tag, record.ask_id)
        member = due_member(record.ask_id, record.tag)
        replies = await self._run(
            [
                self._script(
                    "schedule_in", [self.keys.due], [self.finalize_after_ms, member, "keep_earlier"]
                ),
                self._script(
                    "vote",
                    [k.ask, k.audit, record.reply_to],
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
                    ],
                ),
            ]
        )
        reply = [_s(x) for x in replies[-1]]
        verdict = reply[0]
        if verdict == "won":
            result = parse_result(reply[1])
            msgs = [PostedMessage.model_validate(m) for m in json.loads(reply[2] or "[]") or []]
            return VoteVerdict("won", list(result.envelope.votes or []), result, msgs)
        if verdict in ("counted", "same"):
            votes = [ResultVote.model_validate(v) for v in json.loads(reply[1])]
            return VoteVerdict(verdict, votes)  # type: ignore[arg-type]
        return VoteVerdict(verdict, detail=reply[1] if len(reply) > 1 else "")  # type: ignore[arg-type]

    @staticmethod
    def _resolved(raw: Any) -> ResolveVerdict:
        reply = [_s(x) for x in raw]
        verdict = reply[0]
        if verdict == "won":
            msgs = [PostedMessage.model_validate(m) for m in json.loads(reply[2] or "[]") or []]
            undelivered = reply[3] if len(reply) > 3 else ""
            return ResolveVerdict("won", parse_result(reply[1]), msgs, undelivered=undelivered)
        return ResolveVerdict(verdict, detail=reply[1] if len(reply) > 1 else "")  # type: ignore[arg-type]

    async def finalize(self, tag: str, ask_id: str, updated: int) -> None:
        """Mark an ended ask's ``updated`` messages as done (see ``finalize_many``)."""
        await self.finalize_many([(ask_id, tag, updated)])

    async def track_channel(self, channel: str, ask_id: str, tag: str) -> None:
        await self._run(self._track(self.keys.channel(channel), due_member(ask_id, tag)))

    async def asks_in_channel(self, channel: str) -> list[tuple[str, str]]:
        members = await self.redis.smembers(self.keys.channel(channel))
        return [parse_due_member(_s(m)) for m in members]

    async def untrack_channel(self, channel: str, ask_id: str, tag: str) -> None:
        await self.redis.srem(self.keys.channel(channel), due_member(ask_id, tag))

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

    async def finalize_many(self, asks: Sequence[tuple[str, str, int]]) -> None:
        """Mark ended asks' messages as updated, for many ``(ask_id, tag, updated)`` in one round trip.

        The clean-up timer set by resolve goes with it; should more messages have appeared meanwhile
        (the script answers 0), the timer is still needed and is set again."""
        steps: list[_Step] = []
        for ask_id, tag, updated in asks:
            steps.append(self._script("finalize", [self.ask_keys(tag, ask_id).ask], [updated]))
            steps.append(self._zrem_due(ask_id, tag))
        replies = await self._run(steps)
        finished: list[tuple[str, str]] = []
        for (ask_id, tag, _), raw in zip(asks, replies[0::2], strict=True):
            done = int(_s(raw[0]))
            if done == 0:
                await self.schedule(ask_id, tag, 0)
            elif done == 2:
                # Cancelled while a delivery may still land: look again when its lease ends.
                await self.schedule(ask_id, tag, int(_s(raw[1])))
            elif done == 1:
                finished.append((ask_id, tag))
        await self._leave_channels(finished)

    async def _leave_channels(self, asks: Sequence[tuple[str, str]]) -> None:
        """Finished asks leave the ``P:chan:<channel>`` sets of every message they had: those sets hold
        only asks an archived conversation could still dismiss."""
        if not asks:
            return
        keys = [self.ask_keys(tag, ask_id).ask for ask_id, tag in asks]
        raws = await self._run([lambda pipe, key=key: pipe.hget(key, "msgs") for key in keys])  # type: ignore[misc]
        steps: list[_Step] = []
        for (ask_id, tag), raw in zip(asks, raws, strict=True):
            member = due_member(ask_id, tag)
            channels = {str(m.get("channel")) for m in json.loads(_s(raw) if raw else "[]") or []}
            for channel in sorted(channels):
                key = self.keys.channel(channel)
                steps.append(lambda pipe, key=key, member=member: pipe.srem(key, member))  # type: ignore[misc]
        if steps:
            await self._run(steps)

    def _zrem_due(self, ask_id: str, tag: str) -> _Step:
        member = due_member(ask_id, tag)
        return lambda pipe: pipe.zrem(self.keys.due, member)

    async def unschedule_many(self, asks: Sequence[tuple[str, str]]) -> None:
        if asks:
            await self._run([self._zrem_due(ask_id, tag) for ask_id, tag in asks])

    async def remember_cancel(self, tag: str, ask_id: str, reason: str) -> None:
        """A cancel for an ask not seen yet: remembered for the retention period (protocol section 8)."""
        k = self.ask_keys(tag, ask_id)
        await self.redis.set(k.cancel, reason, px=self.retention_ms)

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
        k = self.ask_keys(tag, ask_id)
        now = await self.server_time_ms()
        entry = json.dumps({"at": now, "event": event, "by": by or "", "detail": detail})
        await self._run(
            [
                lambda pipe: pipe.rpush(k.audit, entry),
                lambda pipe: pipe.ltrim(k.audit, -AUDIT_MAX, -1),
                lambda pipe: pipe.pexpire(k.audit, self.retention_ms),
            ]
        )

    async def load(self, tag: str, ask_id: str) -> LoadedAsk | None:
        k = self.ask_keys(tag, ask_id)
        return self._loaded(k.ask, await self.redis.hgetall(k.ask))

    async def load_many(self, asks: Sequence[tuple[str, str]]) -> list[LoadedAsk | None]:
        """``load`` for many ``(ask_id, tag)`` pairs in one round trip."""
        keys = [self.ask_keys(tag, ask_id).ask for ask_id, tag in asks]
        replies = await self._run([lambda pipe, key=key: pipe.hgetall(key) for key in keys])  # type: ignore[misc]
        return [self._loaded(key, raw) for key, raw in zip(keys, replies, strict=True)]

    @staticmethod
    def _loaded(key: str, raw: Any) -> LoadedAsk | None:
        if not raw:
            return None
        h = {_s(a): _s(b) for a, b in raw.items()}
        if "rec" not in h:
            raise StoreError(f"ask record {key} has no 'rec' field; was it written by something else?")
        # json.loads, not model_validate_json: a text cut at 4000 UTF-16 units may end in half a
        # surrogate pair (as upstream keeps it), which only the stdlib parser accepts.
        record = AskRecord.model_validate(json.loads(h["rec"]))
        return LoadedAsk(
            record=record,
            state=h.get("state", "accepted"),  # type: ignore[arg-type]
            messages=[PostedMessage.model_validate(m) for m in json.loads(h.get("msgs") or "[]") or []],
            step=int(h.get("step") or 0),
            reminders=int(h.get("reminders") or 0),
            outcome=h.get("outcome") or None,
            result=_stored_result(key, h.get("result")),
            by=h.get("by") or None,
            resolved_ms=int(h["resolved_ms"]) if h.get("resolved_ms") else None,
            finalized=h.get("finalized") == "1",
            votes=_votes(h.get("votes")) if record.approval is not None else None,
        )

    # -- timers ----------------------------------------------------------------------------

    async def schedule(self, ask_id: str, tag: str, at_ms: int) -> None:
        await self.redis.zadd(self.keys.due, {due_member(ask_id, tag): at_ms})

    async def unschedule(self, ask_id: str, tag: str) -> None:
        await self.redis.zrem(self.keys.due, due_member(ask_id, tag))

    async def hold_timer(self, ask_id: str, tag: str, lease_ms: int) -> None:
        """Renew a sweeper's claim on an ask's timer: due again ``lease_ms`` from now (Redis time),
        only if the ask still has one (XX: an ask that ended and was cleaned up gets none back)."""
        member = due_member(ask_id, tag)
        now = await self.server_time_ms()
        await self.redis.zadd(self.keys.due, {member: now + lease_ms}, xx=True)

    async def claim_due(self, *, limit: int, lease_ms: int) -> tuple[int, list[tuple[str, str]]]:
        """Atomically take up to ``limit`` due timers; returns Redis time and (ask_id, tag) pairs."""
        [reply] = await self._run([self._script("claim_due", [self.keys.due], [limit, lease_ms])])
        now = int(_s(reply[0]))
        return now, [parse_due_member(_s(m)) for m in reply[1:]]

    # -- operators -------------------------------------------------------------------------

    async def read_audit(self, tag: str, ask_id: str) -> list[AuditEntry]:
        k = self.ask_keys(tag, ask_id)
        out: list[AuditEntry] = []
        for item in await self.redis.lrange(k.audit, 0, -1):
            data = json.loads(item)
            out.append(
                AuditEntry(
                    at=iso_ms(int(data["at"])),
                    event=str(data["event"]),
                    by=str(data.get("by") or "") or None,
                    detail=str(data.get("detail") or "") or None,
                )
            )
        return out

    def _status(self, loaded: LoadedAsk, *, audit: list[AuditEntry] | None, full: bool) -> AskStatus:
        rec = loaded.record
        return AskStatus(
            ask_id=rec.ask_id,
            state=loaded.state,
            outcome=loaded.outcome,
            created_at=iso_ms(rec.created_ms),
            deadline=iso_ms(rec.deadline_ms) if rec.deadline_ms else None,
            route=rec.route_text,
            step=loaded.step,
            audit=audit if full else None,
            result=loaded.result.envelope if full and loaded.result is not None else None,
        )

    async def get_status(self, ask_id: str) -> AskStatus | None:
        """The state, audit trail and stored result of one ask (None when unknown or expired)."""
        loaded = await self.find(ask_id)
        if loaded is None:
            return None
        return self._status(loaded, audit=await self.read_audit(loaded.record.tag, ask_id), full=True)

    async def list_pending(self, limit: int = 1000) -> list[AskStatus]:
        """Pending asks, oldest first, found through the id index (bounded by ``limit``)."""
        out: list[AskStatus] = []
        head = self.keys.index("")
        async for key in self.redis.scan_iter(match=f"{_glob_escape(head)}*", count=500):
            ask_id = _s(key)[len(head) :]  # an ask_id may itself contain ":id:"
            tag = await self.lookup_tag(ask_id)
            if tag is None:
                continue
            loaded = await self.load(tag, ask_id)
            if loaded is not None and loaded.state != "ended":
                out.append(self._status(loaded, audit=None, full=False))
            if len(out) >= limit:
                break
        out.sort(key=lambda s: s.created_at)
        return out


def _glob_escape(text: str) -> str:
    """``text`` matched literally by SCAN's MATCH pattern."""
    return "".join(f"\\{c}" if c in "*?[]\\" else c for c in text)
