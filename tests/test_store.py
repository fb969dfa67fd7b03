"""The store's Lua scripts against real Redis: idempotent intake, single winner, timers, slots."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.crc import key_slot

from bot import results
from bot.model import AskRecord, PostedMessage
from bot.storage.check import check_prefix
from bot.storage.keys import GROUP, Keys, due_member, slot_tag
from bot.storage.records import ResolveVerdict
from bot.storage.scripts import SCRIPT_NAMES, script_source
from bot.storage.store import Lease, Resolution, Store, iso_ms
from contract import normalize_ask_request
from contract.envelopes import EscalationStep, Outcome, Responders, ResultEnvelope


def _record(
    reply_to: str,
    *,
    ask_id: str = "ask-1",
    created_ms: int = 1_700_000_000_000,
    deadline_ms: int | None = None,
) -> AskRecord:
    return AskRecord(
        ask_id=ask_id,
        tag=slot_tag(reply_to),
        reply_to=reply_to,
        request=normalize_ask_request({"question": "Ship it?", "options": ["Yes", "No"]}),
        created_ms=created_ms,
        deadline_ms=deadline_ms,
    )


def _prefix_json(ask_id: str, outcome: Outcome = "answered") -> str:
    # A whole result, as the engine writes one: the store hands back what it reads typed.
    return results.result_prefix(
        ask_id=ask_id,
        format="pi-question",
        ending=results.Ending(outcome, (), "", {}),
        responder=None,
        slack=None,
        created_at=None,
    )


@pytest.fixture
def store(redis: Redis, prefix: str) -> Store:
    return Store(redis, prefix, retention_ms=60_000)


async def _accept(
    store: Store, rec: AskRecord, consumer: str = "c1", entry: str = "1-0", lease_ms: int = 30_000
) -> str:
    verdict = await store.accept(
        rec, consumer=consumer, lease_ms=lease_ms, pending_ttl_ms=120_000, entry_id=entry, schedule_at_ms=None
    )
    return verdict.verdict


async def test_accept_twice_by_another_consumer_is_busy_while_the_lease_lives(
    store: Store, reply_to: str
) -> None:
    rec = _record(reply_to)
    assert await _accept(store, rec, "c1") == "post"
    assert await _accept(store, rec, "c2") == "busy"


async def test_accept_after_the_lease_expired_lets_another_consumer_take_over(
    store: Store, reply_to: str
) -> None:
    rec = _record(reply_to)
    assert await _accept(store, rec, "c1", lease_ms=1) == "post"
    await asyncio.sleep(0.01)
    verdict = await store.accept(
        rec, consumer="c2", lease_ms=30_000, pending_ttl_ms=120_000, entry_id="1-0", schedule_at_ms=None
    )
    assert (verdict.verdict, verdict.detail) == ("post", "2")
    audit = await store.read_audit(rec.tag, rec.ask_id)
    assert [a.event for a in audit] == ["accepted", "taken_over"]


async def test_accept_of_a_posted_ask_says_posted(store: Store, reply_to: str) -> None:
    rec = _record(reply_to)
    await _accept(store, rec)
    await store.posted(rec.tag, rec.ask_id, [PostedMessage(channel="C1", ts="1.1")], actor="c1")
    assert await _accept(store, rec, "c2") == "posted"


async def test_resolve_pushes_exactly_one_result_whatever_races(
    store: Store, redis: Redis, reply_to: str
) -> None:
    rec = _record(reply_to)
    await _accept(store, rec)
    verdicts = await asyncio.gather(
        *(
            store.resolve(
                Resolution(
                    rec, outcome=outcome, result_prefix=_prefix_json(rec.ask_id), actor=f"U{i}", event=outcome
                )
            )
            for i, outcome in enumerate(["answered", "cancelled", "timeout", "dismissed"] * 5)
        )
    )
    assert sorted(v.verdict for v in verdicts).count("won") == 1
    assert await redis.llen(reply_to) == 1


async def test_resolve_result_carries_redis_time_as_rfc3339(
    store: Store, redis: Redis, reply_to: str
) -> None:
    rec = _record(reply_to)
    await _accept(store, rec)
    before = await store.server_time_ms()
    verdict = await store.resolve(
        Resolution(
            rec, outcome="answered", result_prefix=_prefix_json(rec.ask_id), actor="U1", event="answered"
        )
    )
    after = await store.server_time_ms()
    assert verdict.verdict == "won" and verdict.result is not None
    stamp = verdict.result.envelope.resolved_at
    assert stamp is not None and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", stamp)
    assert iso_ms(before) <= stamp <= iso_ms(after)
    pushed = await redis.lpop(reply_to)
    assert ResultEnvelope.model_validate_json(pushed) == verdict.result.envelope  # type: ignore[arg-type]


async def test_resolve_refuses_an_answer_after_the_deadline(
    store: Store, redis: Redis, reply_to: str
) -> None:
    now = await store.server_time_ms()
    rec = _record(reply_to, created_ms=now - 10_000, deadline_ms=now - 1)
    await _accept(store, rec)
    verdict = await store.resolve(
        Resolution(
            rec,
            outcome="answered",
            result_prefix=_prefix_json(rec.ask_id),
            actor="U1",
            event="answered",
            refuse_late=True,
        )
    )
    assert verdict.verdict == "late"
    assert await redis.llen(reply_to) == 0
    assert [a.event for a in await store.read_audit(rec.tag, rec.ask_id)][-1] == "refused_late"


async def _cancel(store: Store, rec: AskRecord) -> None:
    await store.resolve(
        Resolution(
            rec,
            outcome="cancelled",
            result_prefix=_prefix_json(rec.ask_id, "cancelled"),
            actor=None,
            event="cancelled",
        )
    )


async def test_accept_of_an_ended_ask_returns_the_stored_result_and_first_entry(
    store: Store, reply_to: str
) -> None:
    rec = _record(reply_to)
    await _accept(store, rec, entry="5-0")
    await _cancel(store, rec)
    later = await store.server_time_ms() + 1_000  # an entry id is the Redis time of its XADD
    verdict = await store.accept(
        rec, consumer="c9", lease_ms=1000, pending_ttl_ms=1000, entry_id=f"{later}-0", schedule_at_ms=None
    )
    assert verdict.verdict == "ended"
    assert verdict.entry == "5-0"
    assert json.loads(verdict.detail)["outcome"] == "cancelled"


async def test_an_entry_added_while_the_ask_was_pending_gets_no_second_result_after_the_end(
    store: Store, reply_to: str
) -> None:
    # An agent's retry sent while the ask was open is a duplicate (protocol 10.1), even when intake
    # reaches it only after the ask ended: only a re-send after the end gets the result again.
    rec = _record(reply_to)
    sent_while_open = f"{await store.server_time_ms()}-0"
    await _accept(store, rec, entry="5-0")
    await _cancel(store, rec)
    verdict = await store.accept(
        rec, consumer="c9", lease_ms=1000, pending_ttl_ms=1000, entry_id=sent_while_open, schedule_at_ms=None
    )
    assert (verdict.verdict, verdict.detail, verdict.entry) == ("ended", "", "5-0")


async def test_an_entry_from_the_millisecond_the_ask_ended_is_a_retry_and_one_after_is_a_re_send(
    store: Store, redis: Redis, reply_to: str
) -> None:
    # Where docs/protocol.md puts "after the end": an entry id's ms past the ask's resolved_ms. The
    # same ms could be a retry sent just before the end, so it gets nothing (never a second result).
    rec = _record(reply_to)
    await _accept(store, rec, entry="5-0")
    await _cancel(store, rec)
    ended = int(await redis.hget(store.keys.for_ask(rec.tag, rec.ask_id).ask, "resolved_ms") or 0)

    async def verdict_for(entry: str) -> tuple[str, bool]:
        v = await store.accept(
            rec, consumer="c9", lease_ms=1000, pending_ttl_ms=1000, entry_id=entry, schedule_at_ms=None
        )
        return v.verdict, bool(v.detail)

    assert await verdict_for(f"{ended}-7") == ("ended", False)
    assert await verdict_for(f"{ended + 1}-0") == ("ended", True)


async def test_a_duplicate_entry_waits_while_the_ask_is_being_delivered(store: Store, reply_to: str) -> None:
    rec = _record(reply_to)
    assert await _accept(store, rec, "c1", entry="1-0") == "post"
    # Not acknowledged at once: should the first entry be lost (a failover), this one delivers it.
    assert await _accept(store, rec, "c2", entry="2-0") == "busy"
    assert await _accept(store, rec, "c1", entry="2-0") == "busy"


async def test_a_duplicate_entry_takes_over_a_delivery_whose_lease_ended(store: Store, reply_to: str) -> None:
    rec = _record(reply_to)
    assert await _accept(store, rec, "c1", entry="1-0", lease_ms=1) == "post"
    lease_end = await store.server_time_ms() + 1
    while await store.server_time_ms() <= lease_end:  # noqa: ASYNC110 - Redis time decides the lease
        await asyncio.sleep(0.001)
    verdict = await store.accept(
        rec, consumer="c2", lease_ms=30_000, pending_ttl_ms=120_000, entry_id="2-0", schedule_at_ms=None
    )
    assert (verdict.verdict, verdict.detail) == ("post", "2")
    assert await store.redis.hget(store.ask_keys(rec.tag, rec.ask_id).ask, "entry") in ("2-0", b"2-0")
    # The first entry, should it come back, waits for the new delivery, then finds it posted.
    assert await _accept(store, rec, "c1", entry="1-0") == "busy"
    await store.posted(rec.tag, rec.ask_id, [PostedMessage(channel="C1", ts="1.1")], actor="c2")
    assert await _accept(store, rec, "c1", entry="1-0") == "posted"


async def test_a_cancel_remembered_before_its_ask_ends_the_ask_at_intake(store: Store, reply_to: str) -> None:
    rec = _record(reply_to)
    remembered = await store.cancel_or_remember(rec.ask_id, reply_to, "changed my mind", tag=rec.tag)
    assert remembered == "remembered"
    verdict = await store.accept(
        rec, consumer="c1", lease_ms=1000, pending_ttl_ms=1000, entry_id="1-0", schedule_at_ms=None
    )
    assert (verdict.verdict, verdict.detail) == ("cancel", "changed my mind")


async def test_an_early_cancel_from_another_reply_to_in_the_same_slot_changes_nothing(
    store: Store, prefix: str
) -> None:
    # The protocol's own naming (P:reply:{agent-7}:<ask_id>) puts all of one agent's lists in one slot.
    mine, other = f"{prefix}:reply:{{agent-7}}:a", f"{prefix}:reply:{{agent-7}}:b"
    assert slot_tag(mine) == slot_tag(other)
    rec = _record(mine)
    assert await store.cancel_or_remember(rec.ask_id, other, "not yours", tag=rec.tag) == "remembered"
    assert await _accept(store, rec) == "post"
    # Both cancels first, the foreign one last: the owner's still counts, with its own reason.
    rec2 = _record(mine, ask_id="ask-2")
    await store.cancel_or_remember(rec2.ask_id, mine, "mine", tag=rec2.tag)
    await store.cancel_or_remember(rec2.ask_id, other, "not yours", tag=rec2.tag)
    verdict = await store.accept(
        rec2, consumer="c1", lease_ms=1000, pending_ttl_ms=1000, entry_id="2-0", schedule_at_ms=None
    )
    assert (verdict.verdict, verdict.detail) == ("cancel", "mine")


async def test_an_ask_first_read_after_its_deadline_is_expired(store: Store, reply_to: str) -> None:
    now = await store.server_time_ms()
    rec = _record(reply_to, created_ms=now - 5000, deadline_ms=now - 1000)
    assert await _accept(store, rec) == "expired"


async def test_posted_after_the_end_tells_the_caller_to_end_the_new_message(
    store: Store, reply_to: str
) -> None:
    rec = _record(reply_to)
    await _accept(store, rec)
    await store.resolve(
        Resolution(
            rec, outcome="cancelled", result_prefix=_prefix_json(rec.ask_id), actor=None, event="cancelled"
        )
    )
    state = await store.posted(rec.tag, rec.ask_id, [PostedMessage(channel="C1", ts="1.2")], actor="c1")
    assert state == "ended"
    loaded = await store.load(rec.tag, rec.ask_id)
    assert loaded is not None and [m.ts for m in loaded.messages] == ["1.2"]


async def test_claim_due_gives_each_timer_to_one_sweeper_only(store: Store) -> None:
    now = await store.server_time_ms()
    for i in range(50):
        await store.schedule(f"a{i}", "t", now - 1)
    claims = await asyncio.gather(*(store.claim_due(limit=20, lease_ms=60_000) for _ in range(5)))
    members = [m for _, got in claims for m in got]
    assert len(members) == 50
    assert len(set(members)) == 50
    _, again = await store.claim_due(limit=100, lease_ms=60_000)
    assert again == []


async def test_claim_due_leaves_timers_that_are_not_due(store: Store) -> None:
    now = await store.server_time_ms()
    await store.schedule("later", "t", now + 60_000)
    await store.schedule("now", "t", now - 1)
    _, got = await store.claim_due(limit=10, lease_ms=1000)
    assert got == [("now", "t")]


async def test_an_ask_with_nothing_to_count_is_stored_without_step_and_reminder_counters(
    store: Store, redis: Redis, reply_to: str
) -> None:
    # The two fields cost a pending ask about 0.23 KB at Redis's defaults (issue 22, measured in
    # docs/performance.md). Only an ask with escalation steps or reminders has counters to
    # compare-and-set (advance.lua).
    plain = _record(reply_to)
    counted = [
        _record(reply_to, ask_id="ask-2").model_copy(update={"remind_every_ms": 60_000}),
        _record(reply_to, ask_id="ask-3").model_copy(
            update={"escalate": [EscalationStep(after_ms=60_000, channel="C2")]}
        ),
    ]
    for rec in (plain, *counted):
        assert await _accept(store, rec) == "post"
    fields = await redis.hkeys(store.ask_keys(plain.tag, plain.ask_id).ask)
    assert not {b"step", b"reminders"} & set(fields)
    for rec in counted:
        kept = await redis.hmget(store.ask_keys(rec.tag, rec.ask_id).ask, ["step", "reminders"])
        assert kept == [b"0", b"0"]
    for rec in (plain, *counted):
        loaded = await store.load(rec.tag, rec.ask_id)
        assert loaded is not None and (loaded.step, loaded.reminders) == (0, 0)
    # A counter never written reads as 0 for the compare-and-set too, and is written once counted.
    moved = await store.advance(
        plain.tag, plain.ask_id, counter="reminders", expected=1, event="r", actor="s"
    )
    assert moved == "moved"
    assert (await store.load(plain.tag, plain.ask_id)).reminders == 0  # type: ignore[union-attr]
    assert (
        await store.advance(plain.tag, plain.ask_id, counter="reminders", expected=0, event="r", actor="s")
        == "ok"
    )
    assert (await store.load(plain.tag, plain.ask_id)).reminders == 1  # type: ignore[union-attr]


async def test_advance_counts_a_step_once_even_when_two_sweepers_race(store: Store, reply_to: str) -> None:
    rec = _record(reply_to)
    await _accept(store, rec)
    outcomes = await asyncio.gather(
        *(
            store.advance(rec.tag, rec.ask_id, counter="step", expected=0, event="escalated", actor=f"s{i}")
            for i in range(6)
        )
    )
    assert outcomes.count("ok") == 1
    loaded = await store.load(rec.tag, rec.ask_id)
    assert loaded is not None and loaded.step == 1


async def test_advance_withdraws_the_copy_of_a_sweeper_that_lost_the_step(
    store: Store, reply_to: str
) -> None:
    rec = _record(reply_to)
    await _accept(store, rec)
    winner, loser = (PostedMessage(channel="C9", ts=ts, step=1) for ts in ("2.1", "2.2"))
    for message, verdict in ((winner, "ok"), (loser, "moved")):
        got = await store.advance(
            rec.tag, rec.ask_id, counter="step", expected=0, messages=[message], event="escalated", actor="s"
        )
        assert got == verdict
    loaded = await store.load(rec.tag, rec.ask_id)
    assert loaded is not None and loaded.step == 1
    # The loser's copy is withdrawn (the caller deletes it next), never a message of the ask.
    assert [m.ts for m in loaded.messages] == ["2.1"]
    assert loaded.withdrawn == {("C9", "2.2")}


async def test_a_withdrawn_message_leaves_the_record_and_is_never_recorded_again(
    store: Store, reply_to: str
) -> None:
    rec = _record(reply_to)
    await _accept(store, rec)
    kept, gone = PostedMessage(channel="C1", ts="1.1"), PostedMessage(channel="C2", ts="1.2")
    await store.posted(rec.tag, rec.ask_id, [kept, gone], actor="c1")
    assert await store.withdraw(rec.tag, rec.ask_id, [gone], actor="c1", detail="test") == "ok"
    # Neither a retried record nor a stray learned from Slack's event takes it for the ask's again.
    assert await store.posted(rec.tag, rec.ask_id, [gone], actor="c1") == "withdrawn"
    learned = await store.posted(rec.tag, rec.ask_id, [gone], actor="c1", event="learned", stray=True)
    assert learned == "withdrawn"
    await store.advance(
        rec.tag, rec.ask_id, counter="step", expected=0, messages=[gone], event="escalated", actor="s"
    )
    loaded = await store.load(rec.tag, rec.ask_id)
    assert loaded is not None and [m.ts for m in loaded.messages] == ["1.1"]
    assert loaded.withdrawn == {("C2", "1.2")}
    # An ask that is gone is not brought back by a withdrawal.
    assert await store.withdraw(rec.tag, "gone", [gone], actor="c1", detail="test") == "missing"
    assert await store.load(rec.tag, "gone") is None


async def test_a_refused_record_of_an_ended_ask_leaves_no_channel_member_behind(
    store: Store, redis: Redis, reply_to: str, prefix: str
) -> None:
    # Slack's event for a copy the bot withdrew, or a record fenced as stale, comes after the ask
    # ended and left its channels: the channel is tracked before the record is refused, and then left
    # again (it was test_fencing's flaky teardown: the learn of the withdrawn copy, 2 s after its post).
    rec = _record(reply_to)
    await _accept(store, rec)
    gone, late = PostedMessage(channel="C2", ts="1.2"), PostedMessage(channel="C3", ts="1.3")
    # (The ask keeps a message of its own: the one message of a posted ask is never withdrawn.)
    kept = PostedMessage(channel="C1", ts="1.1")
    await store.posted(rec.tag, rec.ask_id, [kept, gone], actor="c1", track_channel=True)
    assert await store.withdraw(rec.tag, rec.ask_id, [gone], actor="c1", detail="test") == "ok"
    ending = Resolution(
        rec, outcome="answered", result_prefix=_prefix_json(rec.ask_id), actor="U1", event="answered"
    )
    assert (await store.resolve(ending)).verdict == "won"
    await store.finalize(rec.tag, rec.ask_id, 1)
    assert not await redis.exists(store.keys.channel("C2"))
    learned = await store.posted(
        rec.tag, rec.ask_id, [gone], actor="c2", event="learned", track_channel=True, stray=True
    )
    stale = await store.posted(
        rec.tag, rec.ask_id, [late], actor="c0", track_channel=True, lease=Lease("c0", "0", 0.0)
    )
    assert (learned, stale) == ("withdrawn", "stale")
    assert await check_prefix(redis, prefix) == []
    assert not await redis.exists(
        store.keys.channel("C1"), store.keys.channel("C2"), store.keys.channel("C3")
    )


async def test_every_key_of_an_ask_shares_the_slot_of_its_reply_to(prefix: str) -> None:
    keys = Keys(prefix)
    for reply_to in ["agent:replies", "q:{team-a}:x", "a{}b", "x}y{z", "{", "slack-ask:reply:01J", "é{ü}"]:
        ask = keys.for_ask(slot_tag(reply_to), "ask-7")
        slots = {key_slot(k.encode()) for k in (reply_to, ask.ask, ask.audit, ask.cancel)}
        assert slots == {key_slot(reply_to.encode())}, reply_to


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_scripts_touch_only_declared_keys(name: str) -> None:
    # Every key argument of redis.call must be KEYS[n]: no key names built inside Lua (Cluster-safe).
    source = resources.files("bot.storage").joinpath("lua", f"{name}.lua").read_text()
    keyless = {"TIME"}
    # Container commands name their key after the subcommand (XINFO CONSUMERS key, XGROUP ... key).
    with_subcommand = {"XINFO", "XGROUP"}
    pattern = r"redis\.call\('([A-Z]+)'(?:,\s*([^,)]+))?(?:,\s*([^,)]+))?"
    for command, first, second in re.findall(pattern, source):
        if command in keyless:
            continue
        key = second if command in with_subcommand else first
        assert key.strip().startswith("KEYS["), f"{name}.lua: {command} on {key!r}"
    common = resources.files("bot.storage").joinpath("lua", "_common.lua").read_text()
    # The shared helpers touch only keys their callers pass in (audit's key, write_result's keys).
    calls = re.findall(r"redis\.call\('([A-Z]+)',\s*([^,)]+)", common)
    assert calls and {c for c, _ in calls} >= {"RPUSH", "HSET"}
    for command, first in calls:
        assert re.fullmatch(r"key|keys\[\d\]", first.strip()), f"_common.lua: {command} on {first!r}"


@pytest.mark.parametrize(
    "ms", [0, 951_782_400_000, 1_709_164_800_123, 1_735_689_599_999, 4_102_444_800_000, 1_582_934_400_000]
)
async def test_lua_timestamps_match_python(redis: Redis, ms: int) -> None:
    source = script_source("finalize").split("\n-- FINALIZE")[0] + "\nreturn iso(tonumber(ARGV[1]))"
    assert (await redis.eval(source, 0, ms)).decode() == iso_ms(ms)


async def test_reclaim_takes_over_an_idle_entry_and_counts_its_deliveries(store: Store, redis: Redis) -> None:
    await store.ensure_group()
    entry_id = (await redis.xadd(store.keys.asks, {"ask": "{}"})).decode()
    [first] = await store.read("dead-replica", count=10, block_ms=None)
    assert (first.id, first.deliveries) == (entry_id, 1)
    assert await store.reclaim("survivor", min_idle_ms=60_000) == []  # not idle long enough yet
    await asyncio.sleep(0.05)
    [taken] = await store.reclaim("survivor", min_idle_ms=10)
    assert (taken.id, taken.deliveries) == (entry_id, 2)
    [again] = await store.reclaim("third", min_idle_ms=0)
    assert again.deliveries == 3  # what SLACK_ASK_MAX_DELIVERIES is compared against


async def test_entries_acked_together_all_leave_the_stream_and_the_pending_list(
    store: Store, redis: Redis
) -> None:
    # Deliveries finishing at once share an XACK (bot.storage.group_commit): none may be left behind.
    await store.ensure_group()
    ids = [(await redis.xadd(store.keys.asks, {"ask": "{}"})).decode() for _ in range(40)]
    entries = await store.read("replica", count=100, block_ms=None)
    assert sorted(e.id for e in entries) == sorted(ids)
    await asyncio.gather(*(store.ack(entry_id) for entry_id in ids))
    assert await redis.xlen(store.keys.asks) == 0
    assert (await redis.xpending(store.keys.asks, GROUP))["pending"] == 0


async def test_an_ending_names_every_channel_the_ask_was_tracked_in_and_finalize_leaves_them(
    redis: Redis, store: Store, reply_to: str, prefix: str
) -> None:
    # The ending script tells the channels (its messages' and its withdrawn copies'), so finalize
    # leaves them without reading the record again: none may stay behind (stale_channel_member).
    rec = _record(reply_to)
    await store.claim_index(rec.ask_id, rec.tag, 600_000)
    await _accept(store, rec)
    kept, gone = PostedMessage(channel="C1", ts="1.1"), PostedMessage(channel="C2", ts="1.2")
    await store.posted(rec.tag, rec.ask_id, [kept, gone], actor="c1", track_channel=True)
    assert await store.withdraw(rec.tag, rec.ask_id, [gone], actor="c1", detail="test") == "ok"
    verdict = await store.resolve(Resolution(rec, "answered", _prefix_json(rec.ask_id), "U1", "answered", ""))
    assert verdict.verdict == "won" and verdict.messages == [kept]
    assert verdict.channels == {"C1", "C2"}
    await store.finalize(rec.tag, rec.ask_id, 1, channels=verdict.channels)
    for channel in ("C1", "C2"):
        assert await store.asks_in_channel(channel) == []
    loaded = await store.load(rec.tag, rec.ask_id)
    assert loaded is not None and loaded.finalized
    # The id index gets the retention in finalize's round trip (the record's own lifetime now).
    assert 0 < int(await redis.pttl(store.keys.index(rec.ask_id))) <= 60_000
    assert await check_prefix(redis, prefix) == []


class _Interleaving(Redis):
    """A real client on which another replica's act runs once, just before the first command that
    ``before`` picks: the store runs its commands one at a time on it (as on Redis Cluster, where any
    other client's command may come between two of ours), so the race is hit every time."""

    before: Callable[[tuple[Any, ...]], bool] | None = None
    act: Callable[[], Awaitable[object]] | None = None

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        if self.before is not None and self.act is not None and self.before(args):
            act, self.before, self.act = self.act, None, None
            await act()
        return await super().execute_command(*args, **options)


async def _answered_with_a_tracked_copy(
    store: Store, reply_to: str
) -> tuple[AskRecord, PostedMessage, ResolveVerdict]:
    """An ask posted once in C1 (its channel tracked) and answered: the record, its copy, the verdict."""
    rec = _record(reply_to)
    await store.claim_index(rec.ask_id, rec.tag, 600_000)
    await _accept(store, rec)
    copy = PostedMessage(channel="C1", ts="1.1")
    await store.posted(rec.tag, rec.ask_id, [copy], actor="c1", track_channel=True)
    verdict = await store.resolve(Resolution(rec, "answered", _prefix_json(rec.ask_id), "U1", "answered", ""))
    assert verdict.verdict == "won"
    return rec, copy, verdict


async def _its_member_goes_eventually(redis: Redis, store: Store, prefix: str, rec: AskRecord) -> None:
    """A copy learned after the end landed somewhere inside a finalize: the ask's C1 member goes, by
    that finalize or by the sweep its timer brings (a member without either would stay for good)."""
    member = due_member(rec.ask_id, rec.tag)
    loaded = await store.load(rec.tag, rec.ask_id)
    assert loaded is not None
    if await store.asks_in_channel("C1") or not loaded.finalized:
        # Still tracked, or its copy still to redraw: then the ask is not finished, and its timer
        # brings the sweep that redraws it and leaves (Timers._on_due_loaded, run here by hand).
        assert not loaded.finalized
        assert await redis.zscore(store.keys.due, member) is not None
        await store.finalize(rec.tag, rec.ask_id, len(loaded.messages))
    assert await store.asks_in_channel("C1") == []
    assert await redis.zscore(store.keys.due, member) is None
    assert await check_prefix(redis, prefix) == []


_FINALIZE_SHA = hashlib.sha1(script_source("finalize").encode()).hexdigest()


@pytest.mark.parametrize("before", ["finalize script", "timer removal"])
async def test_a_copy_learned_again_while_finalize_runs_never_stays_in_its_channel(
    redis: Redis, redis_url: str, store: Store, reply_to: str, prefix: str, before: str
) -> None:
    # A stray copy the record knows already, learned again from Slack's event after the end: it
    # tracks its channel again and resets ``finalized``, but the message count does not change.
    # Wherever it lands inside another replica's finalize, its channel member must go eventually:
    # left by that finalize, or by the sweep its timer brings (a member without either stays).
    rec, copy, verdict = await _answered_with_a_tracked_copy(store, reply_to)
    hooked = _Interleaving.from_url(redis_url, socket_timeout=60)
    try:
        other = Store(hooked, prefix, retention_ms=60_000)
        other._cluster = True  # one command at a time, in order: the Redis Cluster path of Store._run
        if before == "finalize script":
            hooked.before = lambda args: args[:2] == ("EVALSHA", _FINALIZE_SHA)
        else:
            hooked.before = lambda args: args[0] == "ZREM"

        async def learned() -> None:
            state = await store.posted(
                rec.tag, rec.ask_id, [copy], actor="c2", event="learned", track_channel=True, stray=True
            )
            assert state == "ended"

        hooked.act = learned
        await other.finalize(rec.tag, rec.ask_id, 1, channels=verdict.channels)
        assert hooked.act is None  # the learned copy did land inside finalize
    finally:
        await hooked.aclose()
    await _its_member_goes_eventually(redis, store, prefix, rec)
    audit = [e.event for e in await store.read_audit(rec.tag, rec.ask_id)]
    assert "learned_after_end" in audit


async def test_the_clean_up_timer_of_a_finished_ask_takes_its_home_rows_out(
    store: Store, redis: Redis, reply_to: str
) -> None:
    # A replica that died between finalize's two round trips left the messages done but the Home
    # rows in place; the clean-up timer's sweep (leave_channels) takes them out with the channels.
    rec = _record(reply_to)
    await _accept(store, rec)
    await store.home_index(rec.ask_id, rec.tag, None, waiting=["U1"], asked="U2")
    await store.posted(rec.tag, rec.ask_id, [PostedMessage(channel="C1", ts="1.1")], actor="c1")
    ending = Resolution(
        rec, outcome="answered", result_prefix=_prefix_json(rec.ask_id), actor="U1", event="answered"
    )
    assert (await store.resolve(ending)).verdict == "won"
    member = due_member(rec.ask_id, rec.tag)
    assert await redis.zscore(store.keys.home_waiting("U1"), member) is not None
    await store.leave_channels(rec)
    assert await redis.zscore(store.keys.home_waiting("U1"), member) is None
    assert await redis.zscore(store.keys.home_asked("U2"), member) is None


class _Trips(Redis):
    """A real client counting its round trips: one per pipeline, one per command sent alone."""

    trips = 0

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Any:
        self.trips += 1
        return super().pipeline(transaction, shard_hint)

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        self.trips += 1
        return await super().execute_command(*args, **options)


async def test_an_ending_s_finalize_is_one_round_trip_that_leaves_channels_rows_and_timer(
    redis: Redis, redis_url: str, store: Store, reply_to: str, prefix: str
) -> None:
    # What the ending knows (its channels from resolve, its Home people from home_changed) is not read
    # again: one finish.lua marks the messages done and takes the ask out of everything at once.
    rec = _record(reply_to)
    await store.claim_index(rec.ask_id, rec.tag, 600_000)
    await _accept(store, rec)
    await store.home_index(rec.ask_id, rec.tag, None, waiting=["U1"], asked="U2")
    await store.posted(
        rec.tag, rec.ask_id, [PostedMessage(channel="C1", ts="1.1")], actor="c1", track_channel=True
    )
    verdict = await store.resolve(Resolution(rec, "answered", _prefix_json(rec.ask_id), "U1", "answered", ""))
    assert verdict.verdict == "won"
    people = await store.home_changed(rec.tag, rec.ask_id, answered_by="U1")
    assert people == (["U1"], ["U2"])
    counted = _Trips.from_url(redis_url)
    try:
        other = Store(counted, prefix, retention_ms=60_000)
        await other.load_scripts()
        counted.trips = 0
        await other.finalize(rec.tag, rec.ask_id, 1, channels=verdict.channels, people=people)
        assert counted.trips == 1
    finally:
        await counted.aclose()
    member = due_member(rec.ask_id, rec.tag)
    loaded = await store.load(rec.tag, rec.ask_id)
    assert loaded is not None and loaded.finalized
    assert await store.asks_in_channel("C1") == []
    assert await redis.zscore(store.keys.home_waiting("U1"), member) is None
    assert await redis.zscore(store.keys.home_asked("U2"), member) is None
    assert await redis.zscore(store.keys.due, member) is None
    assert 0 < int(await redis.pttl(store.keys.index(rec.ask_id))) <= 60_000
    assert await check_prefix(redis, prefix) == []


_POSTED_SHA = hashlib.sha1(script_source("posted").encode()).hexdigest()
_SCHEDULE_SHA = hashlib.sha1(script_source("schedule_in").encode()).hexdigest()


@pytest.mark.parametrize("before", ["its timer", "its record"])
async def test_a_copy_learned_while_the_one_server_finalize_runs_never_stays_in_its_channel(
    redis: Redis, redis_url: str, store: Store, reply_to: str, prefix: str, before: str
) -> None:
    # On one server finalize is one script (finish.lua): nothing lands inside it, but it may land
    # inside a record of a copy learned after the end, which tracks the channel, sets a timer and
    # resets ``finalized`` in three commands. Wherever it lands, the member goes eventually.
    rec, copy, verdict = await _answered_with_a_tracked_copy(store, reply_to)
    hooked = _Interleaving.from_url(redis_url, socket_timeout=60)
    try:
        learner = Store(hooked, prefix, retention_ms=60_000)
        learner._cluster = True  # its commands one at a time, so the finalize can come between them
        sha = _SCHEDULE_SHA if before == "its timer" else _POSTED_SHA
        hooked.before = lambda args: args[:2] == ("EVALSHA", sha)

        async def finalized() -> None:
            await store.finalize(rec.tag, rec.ask_id, 1, channels=verdict.channels, people=([], []))

        hooked.act = finalized
        state = await learner.posted(
            rec.tag, rec.ask_id, [copy], actor="c2", event="learned", track_channel=True, stray=True
        )
        assert state == "ended"
        assert hooked.act is None  # the finalize did run inside the record
    finally:
        await hooked.aclose()
    await _its_member_goes_eventually(redis, store, prefix, rec)


async def test_a_person_s_ending_does_the_home_tabs_bookkeeping_in_its_own_round_trip(
    redis: Redis, redis_url: str, store: Store, reply_to: str, prefix: str
) -> None:
    # On one server the winning resolve.lua does it in its own step: the answerer's recent list, the
    # tabs of everyone indexed (who opened theirs) marked to publish, and whose they are told. The
    # ask names people (here a group of responders, U1 and U3 its members): one that names nobody
    # indexes nobody (test_store_commands).
    rec = _record(reply_to).model_copy(update={"responders": Responders(usergroups=["S0ONCALL"])})
    await store.claim_index(rec.ask_id, rec.tag, 600_000)
    await _accept(store, rec)
    await store.home_index(rec.ask_id, rec.tag, None, waiting=["U1", "U3"], asked="U2")
    await store.posted(rec.tag, rec.ask_id, [PostedMessage(channel="C1", ts="1.1")], actor="c1")
    for user in ("U1", "U2", "U3"):
        await store.home_opened(user, delay_ms=0)
    await redis.delete(store.keys.home_dirty)  # only what the ending marks is looked at below
    counted = _Trips.from_url(redis_url)
    try:
        other = Store(counted, prefix, retention_ms=60_000)
        await other.load_scripts()
        counted.trips = 0
        verdict = await other.resolve(
            Resolution(rec, "answered", _prefix_json(rec.ask_id), "U1", "answered", "")
        )
        assert counted.trips == 1
        dirty = {m.decode() for m in await redis.zrange(store.keys.home_dirty, 0, -1)}
        assert dirty == {"U1", "U2", "U3"}
        await redis.delete(store.keys.home_dirty)
        lost = await other.resolve(
            Resolution(rec, "answered", _prefix_json(rec.ask_id), "U3", "answered", "")
        )
    finally:
        await counted.aclose()
    assert verdict.verdict == "won" and verdict.people == (["U1", "U3"], ["U2"])
    assert lost.verdict == "ended" and lost.people is None
    member = due_member(rec.ask_id, rec.tag).encode()
    assert await redis.lrange(store.keys.home_recent("U1"), 0, -1) == [member]
    assert await redis.exists(store.keys.home_recent("U3")) == 0  # the click that lost is nobody's answer
    assert await redis.exists(store.keys.home_dirty) == 0  # nor does it mark any tab: the winner did


async def test_an_ending_on_cluster_leaves_the_home_tabs_to_the_engine(
    redis: Redis, store: Store, reply_to: str
) -> None:
    # Cluster keeps the people's keys in other slots: the store tells nothing, Endings.home_after runs.
    rec = _record(reply_to)
    await store.claim_index(rec.ask_id, rec.tag, 600_000)
    await _accept(store, rec)
    await store.home_index(rec.ask_id, rec.tag, None, waiting=["U1"], asked=None)
    store._cluster = True
    verdict = await store.resolve(Resolution(rec, "answered", _prefix_json(rec.ask_id), "U1", "answered", ""))
    assert verdict.verdict == "won" and verdict.people is None
    assert await redis.exists(store.keys.home_recent("U1")) == 0


async def test_a_click_that_loses_to_a_finished_ending_leaves_no_clean_up_timer(
    redis: Redis, store: Store, reply_to: str, prefix: str
) -> None:
    # Two people at once: the winner's ending is finished (its timer removed) before the loser's
    # round trip, which sets the clean-up timer first; nothing would remove it but a sweep 15 s on.
    rec, _, won = await _answered_with_a_tracked_copy(store, reply_to)
    await store.finalize(rec.tag, rec.ask_id, 1, channels=won.channels, people=won.people)
    lost = await store.resolve(Resolution(rec, "answered", _prefix_json(rec.ask_id), "U2", "answered", ""))
    assert lost.verdict == "ended"
    assert await redis.zscore(store.keys.due, due_member(rec.ask_id, rec.tag)) is None
    assert await check_prefix(redis, prefix) == []


async def test_an_ending_wins_even_when_its_home_bookkeeping_fails(
    redis: Redis, store: Store, reply_to: str
) -> None:
    # resolve.lua does the Home bookkeeping: a person's recent list that is not a list (a
    # broken key) must not fail the ending, whose result is pushed all the same.
    rec = _record(reply_to)
    await store.claim_index(rec.ask_id, rec.tag, 600_000)
    await _accept(store, rec)
    await redis.set(store.keys.home_recent("U1"), "not a list")
    verdict = await store.resolve(Resolution(rec, "answered", _prefix_json(rec.ask_id), "U1", "answered", ""))
    assert verdict.verdict == "won" and verdict.people == ([], [])
    assert await redis.llen(reply_to) == 1
    assert await redis.get(store.keys.home_recent("U1")) == b"not a list"


async def test_on_one_server_only_the_winning_ending_sets_the_clean_up_timer_in_its_own_step(
    redis: Redis, store: Store, reply_to: str
) -> None:
    # The ask's own timer (its deadline, far ahead) is left alone by every act that changes nothing;
    # the ending that wins moves it to the clean-up time, in resolve.lua itself (one script, not two).
    rec = _record(reply_to, created_ms=1, deadline_ms=2)  # its deadline long past: a late answer
    await _accept(store, rec)
    member = due_member(rec.ask_id, rec.tag)
    far = 9_000_000_000_000
    await redis.zadd(store.keys.due, {member: far})
    late = Resolution(rec, "answered", _prefix_json(rec.ask_id), "U1", "answered", refuse_late=True)
    stale = Resolution(
        rec,
        "cancelled",
        _prefix_json(rec.ask_id, "cancelled"),
        None,
        "cancelled",
        lease=Lease("c9", "7", 0.0),
    )
    assert [v.verdict for v in await store.resolve_many([late, stale])] == ["late", "stale"]
    assert await redis.zscore(store.keys.due, member) == far
    now = await store.server_time_ms()
    won = await store.resolve(
        Resolution(rec, "timeout", _prefix_json(rec.ask_id, "timeout"), None, "timeout")
    )
    assert won.verdict == "won"
    at = await redis.zscore(store.keys.due, member)
    assert at is not None and now + store.finalize_after_ms <= at < now + store.finalize_after_ms + 5_000
    lost = await store.resolve(Resolution(rec, "answered", _prefix_json(rec.ask_id), "U2", "answered"))
    assert lost.verdict == "ended"
    assert await redis.zscore(store.keys.due, member) == at  # the winner's, untouched


async def test_on_one_server_the_post_s_record_and_its_channel_tracking_are_one_step(
    redis: Redis, store: Store, reply_to: str
) -> None:
    # Tracked in the step that records the message, so a member can never be left ahead of a record
    # that did not land: no clean-up timer at +15 s (and no sweep of a pending ask then).
    deadline = 9_000_000_000_000
    rec = _record(reply_to, deadline_ms=deadline)
    verdict = await store.accept(
        rec, consumer="c1", lease_ms=30_000, pending_ttl_ms=120_000, entry_id="1-0", schedule_at_ms=deadline
    )
    lease = Lease("c1", verdict.token, 0.0)
    member = due_member(rec.ask_id, rec.tag)
    # A refused record tracks nothing.
    stale = Lease("c1", "99", 0.0)
    assert await store.posted(rec.tag, rec.ask_id, [PostedMessage(channel="C2", ts="2.2")], actor="c1",
                              track_channel=True, lease=stale) == "stale"  # fmt: skip
    assert await redis.exists(store.keys.channel("C2")) == 0
    posted = [PostedMessage(channel="C1", ts="1.1")]
    assert (
        await store.posted(rec.tag, rec.ask_id, posted, actor="c1", track_channel=True, lease=lease) == "ok"
    )
    assert await redis.sismember(store.keys.channel("C1"), member)
    assert 0 < await redis.pttl(store.keys.channel("C1")) <= store.retention_ms * 2
    assert await redis.zscore(store.keys.due, member) == deadline  # the ask's deadline, not moved
    # A message learned after the end: tracked, and its redraw timer set in the same step.
    won = await store.resolve(Resolution(rec, "answered", _prefix_json(rec.ask_id), "U1", "answered"))
    await store.finalize(rec.tag, rec.ask_id, 1, channels=won.channels, people=won.people)
    assert await redis.zscore(store.keys.due, member) is None
    now = await store.server_time_ms()
    late = [PostedMessage(channel="C3", ts="3.3")]
    assert (
        await store.posted(rec.tag, rec.ask_id, late, actor="c1", track_channel=True, stray=True) == "ended"
    )
    assert await redis.sismember(store.keys.channel("C3"), member)
    at = await redis.zscore(store.keys.due, member)
    assert at is not None and now + store.finalize_after_ms <= at < now + store.finalize_after_ms + 5_000
