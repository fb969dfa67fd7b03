"""What the store's steps cost Redis, counted on a redis-server of the test's own (INFO commandstats
counts every command, a script's inner ones included; the shared server's counts are everybody's).

Issue 22: each decision point reads the ask's hash once and writes it once, and its audit entry
rides on that read and write: the trail is the hash's ``log`` field, with no key or lifetime of its
own. The invariant this rests on is asserted too: while an ask's hash exists, it has no audit list
(only the version before wrote one, or an entry for an ask already gone).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.exceptions import OutOfMemoryError

from bot.home import RECENT_MAX
from bot.model import AskRecord, PostedMessage
from bot.storage.keys import AUDIT_MAX, due_member, slot_tag
from bot.storage.store import Lease, Resolution, Store
from tests.redis_procs import private_redis
from tests.test_store import _prefix_json, _record
from tests.test_store_votes import _record as _approval
from tests.test_store_votes import _vote

PENDING_TTL_MS = 120_000
FAR_MS = 9_000_000_000_000
"""A deadline no test lives to see: the ask's timer never comes due meanwhile."""


@pytest.fixture
async def own(prefix: str) -> AsyncIterator[tuple[Redis, Store]]:
    with private_redis() as port:
        redis = Redis.from_url(f"redis://127.0.0.1:{port}/0")
        try:
            store = Store(redis, prefix, retention_ms=60_000)
            await store.load_scripts()
            yield redis, store
        finally:
            await redis.aclose()


async def _counted(redis: Redis) -> Counter[str]:
    """Commands since the last call (CONFIG RESETSTAT), by name, without the counting's own."""
    stats: dict[str, Any] = await redis.info("commandstats")
    await redis.config_resetstat()
    out = Counter({name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()})
    for name in ("info", "config|resetstat", "config"):
        out.pop(name, None)
    return out


async def _posted(redis: Redis, store: Store, rec: AskRecord, deadline: int = FAR_MS) -> Lease:
    await store.claim_index(rec.ask_id, rec.tag, PENDING_TTL_MS)
    verdict = await store.accept(
        rec,
        consumer="c1",
        lease_ms=30_000,
        pending_ttl_ms=PENDING_TTL_MS,
        entry_id="1-0",
        schedule_at_ms=deadline,
    )
    assert verdict.verdict == "post"
    return Lease("c1", verdict.token, 0.0)


async def _recorded(
    redis: Redis, store: Store, rec: AskRecord, deadline: int = FAR_MS
) -> list[PostedMessage]:
    """``_posted``, and its message recorded under that lease: the ask is posted."""
    lease = await _posted(redis, store, rec, deadline)
    posted = [PostedMessage(channel="C1", ts="1.1")]
    assert await store.posted(rec.tag, rec.ask_id, posted, actor="c1", lease=lease) == "ok"
    return posted


async def _answered(store: Store, rec: AskRecord) -> str:
    resolution = Resolution(rec, "answered", _prefix_json(rec.ask_id), "U1", "answered")
    return (await store.resolve(resolution)).verdict


async def _trail_in_the_hash(redis: Redis, store: Store, rec: AskRecord, entries: int) -> None:
    """The ask's trail is its hash's log, `entries` lines, and nothing else holds any of it."""
    k = store.ask_keys(rec.tag, rec.ask_id)
    assert not await redis.exists(k.audit)
    log = await redis.hget(k.ask, "log")  # type: ignore[misc]
    assert log is not None and len(log.split(b"\n")) == entries, log
    assert await redis.pttl(k.ask) > 0


async def test_a_new_ask_s_claim_is_one_set_nx_and_nothing_more(own: tuple[Redis, Store]) -> None:
    # An index the claim sets means no envelope came with this id before: no record to read, no
    # lease to compare with TIME, no index value to read back.
    redis, store = own
    rec = _record(f"{store.keys.prefix}:reply:a")
    await _counted(redis)
    assert await store.claim_index_state(rec.ask_id, rec.tag, PENDING_TTL_MS) == (rec.tag, None)
    counts = await _counted(redis)
    assert counts == Counter({"set": 1}), counts
    assert await redis.get(store.keys.index(rec.ask_id)) == rec.tag.encode()
    assert 0 < await redis.pttl(store.keys.index(rec.ask_id)) <= PENDING_TTL_MS


async def test_a_duplicate_reads_the_index_the_state_and_the_clock_in_one_more_trip(
    own: tuple[Redis, Store],
) -> None:
    # The rare second trip: the claim found the index held.
    redis, store = own
    rec = _record(f"{store.keys.prefix}:reply:a2")
    await _posted(redis, store, rec)  # accepted, its 30 s lease live
    await _counted(redis)
    assert await store.claim_index_state(rec.ask_id, rec.tag, PENDING_TTL_MS) == (rec.tag, "in_flight")
    counts = await _counted(redis)
    assert counts == Counter({"set": 1, "get": 1, "hmget": 1, "time": 1}), counts
    # The lease run out: no longer in flight (accept may take it over).
    k = store.ask_keys(rec.tag, rec.ask_id).ask
    await redis.hset(k, "lease_until", 1)  # type: ignore[misc]
    assert await store.claim_index_state(rec.ask_id, rec.tag, PENDING_TTL_MS) == (rec.tag, "accepted")
    # Posted, then ended: what intake is told of each (it takes no post token for either).
    other = _record(f"{store.keys.prefix}:reply:a4", ask_id="ask-4")
    await _recorded(redis, store, other)
    assert await store.claim_index_state(other.ask_id, other.tag, PENDING_TTL_MS) == (other.tag, "posted")
    assert await _answered(store, other) == "won"
    assert await store.claim_index_state(other.ask_id, other.tag, PENDING_TTL_MS) == (other.tag, "ended")


async def test_on_cluster_too_a_new_ask_s_claim_is_one_set_nx_and_a_duplicate_reads_its_state(
    own: tuple[Redis, Store],
) -> None:
    # Cluster reads the state with ask_state.lua (it refuses TIME in a pipeline), and only for a claim
    # that found the index held.
    redis, store = own
    store._cluster = True  # one command at a time, in order: the Redis Cluster path of Store._run
    rec = _record(f"{store.keys.prefix}:reply:c1")
    await _counted(redis)
    assert await store.claim_index_state(rec.ask_id, rec.tag, PENDING_TTL_MS) == (rec.tag, None)
    assert await _counted(redis) == Counter({"set": 1})
    await _posted(redis, store, rec)
    await _counted(redis)
    assert await store.claim_index_state(rec.ask_id, rec.tag, PENDING_TTL_MS) == (rec.tag, "in_flight")
    counts = await _counted(redis)
    assert (counts["set"], counts["get"], counts["evalsha"], counts["hmget"]) == (1, 1, 1, 1), counts


async def test_a_record_whose_index_is_gone_is_claimed_as_new_and_accept_still_decides(
    own: tuple[Redis, Store],
) -> None:
    # A failover can lose the index while the record survives (they are written apart). The claim
    # then reads nothing (a post token spent), and accept, which reads the record, says it is posted.
    redis, store = own
    rec = _record(f"{store.keys.prefix}:reply:a3")
    await _recorded(redis, store, rec)
    await redis.delete(store.keys.index(rec.ask_id))
    assert await store.claim_index_state(rec.ask_id, rec.tag, PENDING_TTL_MS) == (rec.tag, None)
    verdict = await store.accept(
        rec,
        consumer="c2",
        lease_ms=30_000,
        pending_ttl_ms=PENDING_TTL_MS,
        entry_id="2-0",
        schedule_at_ms=FAR_MS,
    )
    assert verdict.verdict == "posted", verdict


async def test_a_click_s_look_is_the_clock_then_the_hash_and_nothing_more(own: tuple[Redis, Store]) -> None:
    redis, store = own
    rec = _record(f"{store.keys.prefix}:reply:a3")
    await _posted(redis, store, rec)
    before = await store.server_time_ms()
    await _counted(redis)
    loaded, at = await store.look(rec.tag, rec.ask_id)
    counts = await _counted(redis)
    assert counts == {"time": 1, "hgetall": 1}, counts
    assert loaded is not None and loaded.record == rec and loaded.state == "accepted"
    assert before <= at <= await store.server_time_ms()
    missing, _ = await store.look(rec.tag, "no-such-ask")
    assert missing is None


@pytest.mark.parametrize("cluster", [False, True])
async def test_an_id_claimed_under_another_reply_to_is_found_there_or_taken_over(
    own: tuple[Redis, Store], cluster: bool
) -> None:
    # The claim's two answers, in one script (one server) or side by side (Cluster): the ask known
    # under the first reply_to is a re-send's; an index that outlived its ask is taken over.
    redis, store = own
    store._cluster = cluster
    first = _record(f"{store.keys.prefix}:reply:first")
    again = _record(f"{store.keys.prefix}:reply:again")
    await _posted(redis, store, first)
    assert await store.claim_index_state(again.ask_id, again.tag, PENDING_TTL_MS) == (first.tag, None)
    assert await store.claim_index_state(first.ask_id, first.tag, PENDING_TTL_MS) == (first.tag, "in_flight")
    await redis.delete(store.ask_keys(first.tag, first.ask_id).ask)  # the index outlived its ask
    assert await store.claim_index_state(again.ask_id, again.tag, PENDING_TTL_MS) == (again.tag, None)
    assert await redis.get(store.keys.index(again.ask_id)) == again.tag.encode()


async def test_a_post_s_record_reads_and_writes_the_hash_once_its_audit_entry_included(
    own: tuple[Redis, Store],
) -> None:
    redis, store = own
    deadline = FAR_MS
    rec = _record(f"{store.keys.prefix}:reply:b", deadline_ms=deadline)
    lease = await _posted(redis, store, rec, deadline)
    await _counted(redis)
    posted = [PostedMessage(channel="C1", ts="1.1")]
    verdict = await store.posted(rec.tag, rec.ask_id, posted, actor="c1", track_channel=True, lease=lease)
    counts = await _counted(redis)
    assert verdict == "ok"
    # The record, its lease and its log in one HMGET, every changed field and the audit entry in
    # one HSET; the channel set's lifetime is the one PEXPIRE, and no list is pushed to.
    assert (counts["hmget"], counts["hset"], counts["pexpire"], counts["pttl"]) == (1, 1, 1, 0), counts
    assert counts["rpush"] == 0, counts
    loaded = await store.load(rec.tag, rec.ask_id)
    assert loaded is not None and loaded.state == "posted" and loaded.messages == posted
    assert [e.event for e in await store.read_audit(rec.tag, rec.ask_id)] == ["accepted", "posted"]
    await _trail_in_the_hash(redis, store, rec, 2)


async def test_a_trail_the_version_before_listed_reads_merged_with_the_log_by_time(
    own: tuple[Redis, Store],
) -> None:
    # Rolling update: an old replica appends to the audit list, a new one to the log; the reader
    # gives one trail in time order, and a new step never moves the old entries.
    redis, store = own
    rec = _record(f"{store.keys.prefix}:reply:c")
    lease = await _posted(redis, store, rec)
    k = store.ask_keys(rec.tag, rec.ask_id)
    at = int(json.loads(await redis.hget(k.ask, "log"))["at"])  # type: ignore[misc]  # accepted's
    old = [json.dumps({"at": at - 5, "event": "queued_old"}), json.dumps({"at": at + 1, "event": "old"})]
    await redis.rpush(k.audit, *old)  # type: ignore[misc]
    while await store.server_time_ms() <= at + 1:  # the post comes after the old one's entry
        pass
    posted = [PostedMessage(channel="C1", ts="1.1")]
    assert await store.posted(rec.tag, rec.ask_id, posted, actor="c1", lease=lease) == "ok"
    events = [e.event for e in await store.read_audit(rec.tag, rec.ask_id)]
    assert events == ["queued_old", "accepted", "old", "posted"]
    assert await redis.lrange(k.audit, 0, -1) == [e.encode() for e in old]  # type: ignore[misc]


async def test_a_click_s_ending_reads_the_hash_once_and_keeps_an_earlier_timer_in_one_command(
    own: tuple[Redis, Store],
) -> None:
    redis, store = own
    soon = 1_000  # a deadline timer long due: earlier than the clean-up time, it is kept
    rec = _record(f"{store.keys.prefix}:reply:d")
    posted = await _recorded(redis, store, rec, soon)
    await _counted(redis)
    won = await store.resolve(Resolution(rec, "answered", _prefix_json(rec.ask_id), "U1", "answered"))
    counts = await _counted(redis)
    assert won.verdict == "won" and won.messages == posted
    # The decision and the won reply's messages from one HMGET; the timer by one ZADD LT (the one
    # ZSCORE is whether the answerer ever opened their Home tab, which then is marked to publish).
    assert (counts["hmget"], counts["zadd"], counts["zscore"]) == (1, 1, 1), counts
    # The result pushed with no TYPE asked first; lifetimes for the hash (its audit entry in it),
    # the reply list and the answerer's "Recently answered" list, nothing else.
    assert (counts["rpush"], counts["type"], counts["pexpire"]) == (1, 0, 3), counts
    # The answerer's recent list gets it without an LREM first: an ask without votes is put in a
    # recent list only by the ending that wins, so it cannot be there yet; and a list not past its
    # RECENT_MAX is not trimmed.
    assert (counts["lpush"], counts["lrem"], counts["ltrim"]) == (1, 0, 0), counts
    # Nobody is named on the ask, so its start indexed nobody: no set of indexed people to read.
    assert counts["smembers"] == 0, counts
    recent = await redis.lrange(store.keys.home_recent("U1"), 0, -1)
    assert recent == [due_member(rec.ask_id, rec.tag).encode()]
    member = due_member(rec.ask_id, rec.tag)
    assert await redis.zscore(store.keys.due, member) == soon
    await _trail_in_the_hash(redis, store, rec, 3)
    # A later timer is brought forward to the clean-up time.
    other = _record(f"{store.keys.prefix}:reply:e", ask_id="ask-2")
    far = FAR_MS
    await _posted(redis, store, other, far)
    now = await store.server_time_ms()
    assert await _answered(store, other) == "won"
    at = await redis.zscore(store.keys.due, due_member("ask-2", slot_tag(other.reply_to)))
    assert at is not None and now + store.finalize_after_ms <= at < now + store.finalize_after_ms + 5_000


async def test_a_recent_list_past_its_max_keeps_the_newest_and_only_then_is_trimmed(
    own: tuple[Redis, Store],
) -> None:
    redis, store = own
    key = store.keys.home_recent("U1")
    older = [f"old-{i} {store.keys.prefix}:reply:x" for i in range(RECENT_MAX)]
    await redis.rpush(key, *older)  # type: ignore[misc]
    rec = _record(f"{store.keys.prefix}:reply:r1")
    await _posted(redis, store, rec)
    await _counted(redis)
    assert await _answered(store, rec) == "won"
    assert (await _counted(redis))["ltrim"] == 1
    assert await redis.lrange(key, 0, -1) == [
        m.encode() for m in [due_member(rec.ask_id, rec.tag), *older[:-1]]
    ]


async def test_an_approval_ended_by_a_person_who_voted_on_it_is_in_their_recent_list_once(
    own: tuple[Redis, Store],
) -> None:
    # A vote puts the ask in the voter's recent list before the end (Endings.home_after); an ending
    # of such an ask by the same person moves that row to the front instead of adding a second one.
    redis, store = own
    rec = _approval(f"{store.keys.prefix}:reply:v1")
    await _posted(redis, store, rec)
    assert (await store.vote(_vote(rec, "U1", 0))).verdict == "counted"
    await store.home_changed(rec.tag, rec.ask_id, answered_by="U1")
    await store.home_changed(rec.tag, "other-ask", answered_by="U1")  # a later row, ahead of it
    await _counted(redis)
    resolution = Resolution(rec, "cancelled", _prefix_json(rec.ask_id, "cancelled"), "U1", "cancelled")
    assert (await store.resolve(resolution)).verdict == "won"
    assert (await _counted(redis))["lrem"] == 1
    recent = await redis.lrange(store.keys.home_recent("U1"), 0, -1)
    assert recent == [due_member(rec.ask_id, rec.tag).encode(), due_member("other-ask", rec.tag).encode()]


async def test_every_step_of_an_ask_keeps_its_trail_in_its_hash(
    own: tuple[Redis, Store],
) -> None:
    # The invariant the trail's lifetime rests on, through every script that audits.
    redis, store = own
    rec = _record(f"{store.keys.prefix}:reply:f")
    lease = await _posted(redis, store, rec)
    await _trail_in_the_hash(redis, store, rec, 1)
    first = [PostedMessage(channel="C1", ts="1.1")]
    assert await store.posted(rec.tag, rec.ask_id, first, actor="c1", lease=lease) == "ok"
    await _trail_in_the_hash(redis, store, rec, 2)
    step = [PostedMessage(channel="C2", ts="2.2", step=1)]
    assert await store.advance(
        rec.tag, rec.ask_id, counter="step", expected=0, messages=step, event="escalated", actor="s1"
    ) == "ok"  # fmt: skip
    await _trail_in_the_hash(redis, store, rec, 3)
    assert await store.withdraw(rec.tag, rec.ask_id, step, actor="s1", detail="a test") == "ok"
    await _trail_in_the_hash(redis, store, rec, 4)
    stray = [PostedMessage(channel="C3", ts="3.3")]
    assert await store.posted(rec.tag, rec.ask_id, stray, actor="c1", stray=True, event="learned") == "ok"
    await _trail_in_the_hash(redis, store, rec, 5)
    assert await _answered(store, rec) == "won"
    await _trail_in_the_hash(redis, store, rec, 6)
    late = [PostedMessage(channel="C4", ts="4.4")]
    assert await store.posted(rec.tag, rec.ask_id, late, actor="c1", stray=True, event="learned") == "ended"
    await _trail_in_the_hash(redis, store, rec, 7)
    events = [e.event for e in await store.read_audit(rec.tag, rec.ask_id)]
    assert events == [
        "accepted", "posted", "escalated", "withdrawn", "learned", "answered", "learned_after_end"
    ]  # fmt: skip


async def test_an_entry_from_outside_the_scripts_lives_as_long_as_its_ask_or_the_retention_if_gone(
    own: tuple[Redis, Store],
) -> None:
    # A person refused before any script of the ask ran (not allowed to answer): the entry goes into
    # the log, so it lives as long as the ask, also one that lives longer than the retention (no
    # deadline, say). One script: TIME, HMGET, HSET, nothing more.
    redis, store = own
    rec = _record(f"{store.keys.prefix}:reply:g")
    await store.claim_index(rec.ask_id, rec.tag, PENDING_TTL_MS)
    verdict = await store.accept(
        rec,
        consumer="c1",
        lease_ms=30_000,
        pending_ttl_ms=store.retention_ms * 10,
        entry_id="1-0",
        schedule_at_ms=None,
    )
    assert verdict.verdict == "post"
    await _counted(redis)
    await store.audit(rec.tag, rec.ask_id, "refused_not_allowed", by="U9", detail="not a responder")
    counts = await _counted(redis)
    assert (counts["hmget"], counts["hset"], counts["rpush"], counts["pexpire"]) == (1, 1, 0, 0), counts
    await _trail_in_the_hash(redis, store, rec, 2)
    [*_, entry] = await store.read_audit(rec.tag, rec.ask_id)
    assert (entry.event, entry.by, entry.detail) == ("refused_not_allowed", "U9", "not a responder")
    # Of an ask that is gone: the entry lives for the retention.
    k = store.ask_keys(rec.tag, rec.ask_id)
    await redis.delete(k.ask, k.audit)
    await store.audit(rec.tag, rec.ask_id, "refused_not_allowed", by="U9")
    audit_ttl = await redis.pttl(k.audit)
    assert 0 < audit_ttl <= store.retention_ms
    assert not await redis.exists(k.ask)  # no hash made up for an ask that is gone
    assert [e.by for e in await store.read_audit(rec.tag, rec.ask_id)] == ["U9"]


async def test_an_audit_trail_keeps_its_last_audit_max_entries(own: tuple[Redis, Store]) -> None:
    # The cap lives in _common.lua's log_append (bot.storage.keys.AUDIT_MAX names it): every writer,
    # a script's entry or one from outside, trims the log to the newest AUDIT_MAX.
    redis, store = own
    rec = _record(f"{store.keys.prefix}:reply:h")
    await _posted(redis, store, rec)
    for i in range(AUDIT_MAX + 3):
        await store.audit(rec.tag, rec.ask_id, "refused_not_allowed", by=f"U{i}")
    audit = await store.read_audit(rec.tag, rec.ask_id)
    assert len(audit) == AUDIT_MAX
    assert [a.by for a in audit[-2:]] == [f"U{AUDIT_MAX + 1}", f"U{AUDIT_MAX + 2}"]
    assert audit[0].by == "U3"  # accepted and the first three refusals went
    await _trail_in_the_hash(redis, store, rec, AUDIT_MAX)
    # A script's own entry (here resolve's) trims it too, and the log stays whole lines.
    assert await _answered(store, rec) == "won"
    audit = await store.read_audit(rec.tag, rec.ask_id)
    assert (len(audit), audit[0].by, audit[-1].event) == (AUDIT_MAX, "U4", "answered")
    await _trail_in_the_hash(redis, store, rec, AUDIT_MAX)


async def test_the_audit_list_of_a_gone_ask_is_capped_too(own: tuple[Redis, Store]) -> None:
    redis, store = own
    rec = _record(f"{store.keys.prefix}:reply:i")
    for i in range(AUDIT_MAX + 2):
        await store.audit(rec.tag, rec.ask_id, "refused_not_allowed", by=f"U{i}")
    assert await redis.llen(store.ask_keys(rec.tag, rec.ask_id).audit) == AUDIT_MAX  # type: ignore[misc]
    audit = await store.read_audit(rec.tag, rec.ask_id)
    assert (audit[0].by, audit[-1].by) == ("U2", f"U{AUDIT_MAX + 1}")


async def test_a_vote_reads_the_hash_once_and_writes_it_once_whether_it_decides_or_not(
    own: tuple[Redis, Store],
) -> None:
    # The counted vote: its votes and its audit entry in one HSET. The deciding vote: its votes, its
    # own entry, the result and the ending's entry in write_result's one HSET.
    redis, store = own
    rec = _approval(f"{store.keys.prefix}:reply:v")
    await _posted(redis, store, rec)
    await _counted(redis)
    assert (await store.vote(_vote(rec, "UANN", 0))).verdict == "counted"
    counts = await _counted(redis)
    assert (counts["hmget"], counts["hset"]) == (1, 1), counts
    assert (await store.vote(_vote(rec, "UBOB", 0))).verdict == "won"
    counts = await _counted(redis)
    assert (counts["hmget"], counts["hset"]) == (1, 1), counts
    loaded = await store.load(rec.tag, rec.ask_id)
    assert loaded is not None and loaded.state == "ended"
    assert [v.user.id for v in loaded.votes or []] == ["UANN", "UBOB"]
    events = [e.event for e in await store.read_audit(rec.tag, rec.ask_id)]
    assert events == ["accepted", "voted", "voted", "approved"]
    await _trail_in_the_hash(redis, store, rec, 4)


async def test_a_refused_ending_audits_from_the_script_s_one_read(own: tuple[Redis, Store]) -> None:
    # resolve.lua's refusals (here: the ask ended already) write their audit entry from the HMGET the
    # decision made, with no second read of the hash.
    redis, store = own
    rec = _record(f"{store.keys.prefix}:reply:r")
    await _posted(redis, store, rec)
    assert await _answered(store, rec) == "won"
    await _counted(redis)
    assert await _answered(store, rec) == "ended"
    counts = await _counted(redis)
    assert (counts["hmget"], counts["hset"], counts["rpush"]) == (1, 1, 0), counts
    assert [e.event for e in await store.read_audit(rec.tag, rec.ask_id)][-1] == "refused_ended"


async def test_a_result_push_redis_refuses_for_another_reason_fails_the_ending_with_nothing_written(
    own: tuple[Redis, Store],
) -> None:
    # write_result pushes first, in pcall: only WRONGTYPE is a reply_to of another type (recorded as
    # undelivered, the ask ended). Redis out of memory refuses the push (and every write after it):
    # the step fails with Redis's own error, the ask is as it was, and it can end once Redis takes it.
    redis, store = own
    rec = _record(f"{store.keys.prefix}:reply:m")
    await _posted(redis, store, rec)
    k = store.ask_keys(rec.tag, rec.ask_id)
    before = await redis.hgetall(k.ask)  # type: ignore[misc]
    await redis.config_set("maxmemory", 1)  # noeviction (the default): writes are refused
    await _counted(redis)
    try:
        with pytest.raises(OutOfMemoryError):
            await _answered(store, rec)
    finally:
        await redis.config_set("maxmemory", 0)
    stats: dict[str, Any] = await redis.info("commandstats")
    # The script ran (a script that may write is not refused before it starts) and read the hash;
    # its push was refused, and nothing came after it.
    assert stats["cmdstat_hmget"]["calls"] == 1, stats
    assert stats["cmdstat_rpush"]["rejected_calls"] == 1 and "cmdstat_hset" not in stats, stats
    assert await redis.hgetall(k.ask) == before  # type: ignore[misc]
    assert not await redis.exists(rec.reply_to)
    assert await _answered(store, rec) == "won"
    assert await redis.llen(rec.reply_to) == 1  # type: ignore[misc]
    assert await redis.hget(k.ask, "state") == b"ended"  # type: ignore[misc]
    assert not await redis.hexists(k.ask, "undelivered")  # type: ignore[misc]
