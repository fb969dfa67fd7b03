"""Fencing (issue 24): every change intake makes under a lease carries it, and the script making the
change refuses it once that lease is no longer the current one; deadlines win over a late delivery;
time spent frozen is not Slack's fault; a Redis call of a delivery is bounded by its lease."""

from __future__ import annotations

import asyncio
import json
import logging
import time

import pytest
from redis.asyncio import Redis

from bot.asks import build_record
from bot.errors import SlackBusyError
from bot.model import AskRecord, PostedMessage
from bot.playground import Message
from bot.slack.gateway import SlackGateway, make_client
from bot.storage.check import check_prefix
from bot.storage.keys import GROUP, slot_tag
from bot.storage.store import Lease, Store
from contract import normalize_ask_request
from contract.envelopes import parse_ask_envelope
from tests.fencing_helpers import DEPLOY, leased_ending, stale_copy_of_an_ended_ask_is_deleted
from tests.harness import Harness, interactive_elements
from tests.redis_procs import TcpProxy


def _record(reply_to: str, *, deadline_ms: int | None = None) -> AskRecord:
    return AskRecord(
        ask_id="ask-f",
        tag=slot_tag(reply_to),
        reply_to=reply_to,
        request=normalize_ask_request({"question": "Ship it?", "options": ["Yes", "No"]}),
        created_ms=1_700_000_000_000,
        deadline_ms=deadline_ms,
    )


@pytest.fixture
def store(redis: Redis, prefix: str) -> Store:
    return Store(redis, prefix, retention_ms=60_000)


async def _accept(store: Store, rec: AskRecord, consumer: str, *, lease_ms: int, entry: str) -> Lease:
    verdict = await store.accept(
        rec, consumer=consumer, lease_ms=lease_ms, pending_ttl_ms=120_000, entry_id=entry, schedule_at_ms=None
    )
    assert verdict.verdict == "post", verdict
    return Lease(consumer, verdict.token, time.monotonic() + lease_ms / 1000)


async def _redis_time_passes(store: Store, ms: int) -> None:
    end = await store.server_time_ms() + ms
    while await store.server_time_ms() <= end:  # noqa: ASYNC110 - Redis time decides the lease
        await asyncio.sleep(0.005)


async def _entry(store: Store, redis: Redis) -> str:
    """An intake entry read by consumer c1 (pending, as a delivery in flight holds it)."""
    await store.ensure_group()
    entry_id = await redis.xadd(store.keys.asks, {"ask": "{}"})
    await redis.xreadgroup(GROUP, "c1", {store.keys.asks: ">"})
    return entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)


async def test_a_replica_whose_lease_was_taken_over_records_nothing_ends_nothing_and_acks_nothing(
    store: Store, redis: Redis, reply_to: str
) -> None:
    rec = _record(reply_to)
    entry = await _entry(store, redis)
    old = await _accept(store, rec, "c1", lease_ms=1, entry=entry)
    await _redis_time_passes(store, 1)
    new = await _accept(store, rec, "c2", lease_ms=30_000, entry=entry)
    assert (old.token, new.token) == ("1", "2")

    message = PostedMessage(channel="C1", ts="1.1")
    state = await store.posted(rec.tag, rec.ask_id, [message], actor="c1", ack_entry=entry, lease=old)
    assert state == "stale"
    assert (await store.resolve(leased_ending(rec, old, "unavailable"))).verdict == "stale"
    loaded = await store.load(rec.tag, rec.ask_id)
    assert loaded is not None and loaded.state == "accepted" and loaded.messages == []
    assert await redis.llen(reply_to) == 0
    assert (await redis.xpending(store.keys.asks, GROUP))["pending"] == 1  # still the new holder's
    refused = [a for a in await store.read_audit(rec.tag, rec.ask_id) if a.event == "refused_stale"]
    assert [(a.replica, a.lease) for a in refused] == [("c1", "c1#1"), ("c1", "c1#1")]
    assert refused[0].detail is not None and "now c2#2" in refused[0].detail

    # The current holder's changes land as before.
    assert await store.posted(rec.tag, rec.ask_id, [message], actor="c2", ack_entry=entry, lease=new) == "ok"
    assert (await redis.xpending(store.keys.asks, GROUP))["pending"] == 0


async def test_a_write_that_lands_after_its_lease_ran_out_is_refused(store: Store, reply_to: str) -> None:
    rec = _record(reply_to)
    lease = await _accept(store, rec, "c1", lease_ms=1, entry="1-0")
    await _redis_time_passes(store, 1)  # nobody took it over: the lease ran out all the same
    message = PostedMessage(channel="C1", ts="1.1")
    assert await store.posted(rec.tag, rec.ask_id, [message], actor="c1", lease=lease) == "stale"


async def test_a_frozen_delivery_s_copy_learned_as_a_stray_is_still_refused_to_it(
    store: Store, reply_to: str
) -> None:
    # c1's post landed and c1 froze before recording it; c2 took the ask over (and posts its own copy),
    # then Slack's event got c1's copy learned (a stray). Resumed, c1's record of that very message
    # must not mark the ask posted: c1's copy goes, c2's carries the ask.
    rec = _record(reply_to)
    old = await _accept(store, rec, "c1", lease_ms=1, entry="1-0")
    await _redis_time_passes(store, 1)
    await _accept(store, rec, "c2", lease_ms=30_000, entry="1-0")
    message = PostedMessage(channel="C1", ts="1.1")
    assert await store.posted(rec.tag, rec.ask_id, [message], actor="c3", event="learned", stray=True) == "ok"
    assert await store.posted(rec.tag, rec.ask_id, [message], actor="c1", lease=old) == "stale"
    loaded = await store.load(rec.tag, rec.ask_id)
    assert loaded is not None and loaded.state == "accepted"


async def test_a_takeover_adopts_a_live_copy_an_earlier_delivery_posted_instead_of_posting_again(
    store: Store, reply_to: str
) -> None:
    # c1 froze inside its post and never read Slack's answer (its call is handed back: it cannot
    # withdraw what it never saw); Slack's event got the copy learned. The next holder posts no second copy.
    rec = _record(reply_to)
    old = await _accept(store, rec, "c1", lease_ms=1, entry="1-0")
    message = PostedMessage(channel="C1", ts="1.1")
    assert await store.posted(rec.tag, rec.ask_id, [message], actor="c3", event="learned", stray=True) == "ok"
    await _redis_time_passes(store, 1)
    verdict = await store.accept(
        rec, consumer="c2", lease_ms=30_000, pending_ttl_ms=120_000, entry_id="1-0", schedule_at_ms=None
    )
    assert (verdict.verdict, verdict.detail) == ("posted", "adopted")
    loaded = await store.load(rec.tag, rec.ask_id)
    assert loaded is not None and loaded.state == "posted" and loaded.messages == [message]
    # Should c1 read Slack's answer after all, its record of that copy lands (nothing to withdraw).
    assert await store.posted(rec.tag, rec.ask_id, [message], actor="c1", lease=old) == "ok"


async def test_a_stale_delivery_never_withdraws_the_copy_a_takeover_adopted(
    store: Store, redis: Redis, reply_to: str
) -> None:
    # c1's lease ran out under its post: its record is refused as stale, and it sets out to withdraw
    # its copy. Meanwhile Slack's event got that copy learned, and c2's takeover adopted it (posted,
    # the entry acknowledged: nobody will post the ask again). c1's withdrawal, landing last, must
    # leave the ask its one message (the pacing test's lost post on fakeredis: 59 of 60 posted).
    rec = _record(reply_to)
    old = await _accept(store, rec, "c1", lease_ms=1, entry="1-0")
    await _redis_time_passes(store, 1)
    message = PostedMessage(channel="C1", ts="1.1")
    assert await store.posted(rec.tag, rec.ask_id, [message], actor="c1", lease=old) == "stale"
    assert await store.posted(rec.tag, rec.ask_id, [message], actor="c3", event="learned", stray=True) == "ok"
    verdict = await store.accept(
        rec, consumer="c2", lease_ms=30_000, pending_ttl_ms=120_000, entry_id="1-0", schedule_at_ms=None
    )
    assert (verdict.verdict, verdict.detail) == ("posted", "adopted")
    key = store.keys.for_ask(rec.tag, rec.ask_id).ask
    before = await redis.hgetall(key)
    assert await store.withdraw(rec.tag, rec.ask_id, [message], actor="c1", detail="stale") == "carries"
    assert await redis.hgetall(key) == before  # nothing changed
    loaded = await store.load(rec.tag, rec.ask_id)
    assert loaded is not None and loaded.state == "posted" and loaded.messages == [message]
    assert message not in {PostedMessage(channel=c, ts=t) for c, t in loaded.withdrawn}
    problems = await check_prefix(redis, store.keys.prefix)
    assert "posted_without_message" not in {p.kind for p in problems}, problems
    # A second copy (c2 posted its own before the stray was learned) is still withdrawn as before.
    second = PostedMessage(channel="C1", ts="1.2")
    assert await store.posted(rec.tag, rec.ask_id, [second], actor="c3", event="learned", stray=True) == "ok"
    assert await store.withdraw(rec.tag, rec.ask_id, [second], actor="c1", detail="stale") == "ok"
    loaded = await store.load(rec.tag, rec.ask_id)
    assert loaded is not None and loaded.messages == [message]


async def test_a_takeover_by_a_replica_of_the_previous_version_fences_the_new_one_out(
    store: Store, redis: Redis, reply_to: str
) -> None:
    # Rolling update: the previous accept.lua knows no fencing, but every grant it makes moves
    # `tries` on and names its owner, as this one does: that is the token (what it wrote, verbatim).
    rec = _record(reply_to)
    lease = await _accept(store, rec, "c1", lease_ms=30_000, entry="1-0")
    key = store.ask_keys(rec.tag, rec.ask_id).ask
    await redis.hincrby(key, "tries", 1)
    await redis.hset(
        key, mapping={"owner": "old-replica", "lease_until": await store.server_time_ms() + 30_000}
    )
    message = PostedMessage(channel="C1", ts="1.1")
    assert await store.posted(rec.tag, rec.ask_id, [message], actor="c1", lease=lease) == "stale"
    # Work that carries no lease (a previous-version caller, a person, a learned message) is not fenced.
    assert await store.posted(rec.tag, rec.ask_id, [message], actor="old-replica") == "ok"


async def test_a_takeover_after_the_deadline_times_the_ask_out_instead_of_posting_it(
    store: Store, reply_to: str
) -> None:
    rec = _record(reply_to, deadline_ms=await store.server_time_ms() + 30)
    await _accept(store, rec, "c1", lease_ms=1, entry="1-0")  # c1 freezes here, past the deadline
    await _redis_time_passes(store, 40)
    verdict = await store.accept(
        rec, consumer="c2", lease_ms=30_000, pending_ttl_ms=120_000, entry_id="1-0", schedule_at_ms=None
    )
    assert (verdict.verdict, verdict.token) == ("expired", "2")


async def test_an_agent_s_early_cancel_refused_as_stale_to_its_first_holder_is_ended_by_the_takeover(
    store: Store, redis: Redis, reply_to: str
) -> None:
    # The chaos test's lost cancel: the cancel came before the ask; c1's accept read it and froze (or
    # died) before its ending landed; c2 took the delivery over. c1's ending is refused as stale, as
    # fencing says, but the cancel is the agent's, not c1's decision: c2 must end the ask cancelled
    # (before the fix accept.lua had dropped the tombstone, and c2 posted the ask, which timed out).
    rec = _record(reply_to)
    assert await store.cancel_or_remember(rec.ask_id, reply_to, "not needed", tag=rec.tag) == "remembered"
    entry = await _entry(store, redis)
    first = await store.accept(
        rec, consumer="c1", lease_ms=30_000, pending_ttl_ms=120_000, entry_id=entry, schedule_at_ms=None
    )
    assert (first.verdict, first.detail, first.token) == ("cancel", "not needed", "1")
    old = Lease("c1", first.token, time.monotonic() + 30)
    taken = await store.accept(
        rec, consumer="c2", lease_ms=30_000, pending_ttl_ms=120_000, entry_id=entry, schedule_at_ms=None
    )
    assert (taken.verdict, taken.detail, taken.token) == ("cancel", "not needed", "2")
    new = Lease("c2", taken.token, time.monotonic() + 30)

    assert (await store.resolve(leased_ending(rec, old))).verdict == "stale"  # fencing still holds
    assert (await store.resolve(leased_ending(rec, new))).verdict == "won"
    assert (await store.resolve(leased_ending(rec, old))).verdict == "stale"
    # Exactly one result, and it is the agent's cancel.
    [raw] = await redis.lrange(reply_to, 0, -1)
    assert json.loads(raw)["outcome"] == "cancelled"
    loaded = await store.load(rec.tag, rec.ask_id)
    assert loaded is not None and (loaded.state, loaded.outcome) == ("ended", "cancelled")
    events = [(a.event, a.lease) for a in await store.read_audit(rec.tag, rec.ask_id)]
    assert ("cancelled", "c2#2") in events and ("refused_stale", "c1#1") in events
    # A delivery after the end finds it ended: nothing is posted, nothing pushed again.
    again = await store.accept(
        rec, consumer="c3", lease_ms=30_000, pending_ttl_ms=120_000, entry_id=entry, schedule_at_ms=None
    )
    assert again.verdict == "ended"
    assert await redis.llen(reply_to) == 1


# -- the gateway: time spent frozen -----------------------------------------------------------


def _freeze_loop_soon(seconds: float) -> None:
    """The fault under test: this whole process stops running for ``seconds`` (as SIGSTOP does to a
    replica), starting 50 ms from now, while a call is in flight. Not a synchronization."""
    asyncio.get_running_loop().call_later(0.05, time.sleep, seconds)


async def test_time_spent_frozen_in_a_slack_call_does_not_count_against_the_delivery_window(
    fake_slack: object,
) -> None:
    from bot.playground import FakeSlack

    assert isinstance(fake_slack, FakeSlack)
    gateway = SlackGateway(make_client(fake_slack.bot_token, fake_slack.api_url), delivery_window_ms=2_000)
    fake_slack.method_latency["chat.postMessage"] = 0.3  # each failing answer takes 0.3 s to come
    fake_slack.fail_next("chat.postMessage", status=500, times=2)  # Slack's share: about 1.1 s
    _freeze_loop_soon(3.0)  # inside the first attempt: longer than the window, none of it Slack's
    data = await gateway.call("chat.postMessage", channel="C0DEPLOY", text="hi")
    assert data["ok"] is True
    assert [c.status for c in fake_slack.find_calls("chat.postMessage")] == [500, 500, 200]


async def test_a_slack_call_whose_lease_ran_out_while_frozen_is_handed_back_not_unreachable(
    fake_slack: object,
) -> None:
    from bot.playground import FakeSlack

    assert isinstance(fake_slack, FakeSlack)
    gateway = SlackGateway(make_client(fake_slack.bot_token, fake_slack.api_url), delivery_window_ms=500)
    fake_slack.method_latency["chat.postMessage"] = 0.3
    fake_slack.fail_next("chat.postMessage", status=500, times=5)
    _freeze_loop_soon(1.5)
    with pytest.raises(SlackBusyError, match="lease ran out"):
        await gateway.call("chat.postMessage", deadline=time.monotonic() + 1.0, channel="C0DEPLOY", text="hi")


# -- end to end --------------------------------------------------------------------------------


async def test_a_pause_inside_the_post_hands_the_delivery_back_instead_of_ending_it_unavailable(
    harness: Harness,
) -> None:
    # Delivery window 1.5 s, so the lease is 3 s. The replica freezes 0.05 s into its post, for
    # longer than the lease; Slack's answer (a 500) is read after the pause. That is no reason to end
    # the ask `unavailable`: the delivery is handed back, and the ask is posted once it is taken again.
    harness.fake.method_latency["chat.postMessage"] = 0.5  # Slack's answer (a 500) takes 0.5 s
    harness.fake.fail_next("chat.postMessage", status=500)
    env = harness.envelope(DEPLOY)
    key = f"{harness.prefix}:{{{slot_tag(env['reply_to'])}}}:ask:{env['ask_id']}"
    await harness.send(env)
    while await harness.redis.hget(key, "state") != b"accepted":  # noqa: ASYNC110 - the accept
        await asyncio.sleep(0.01)
    _freeze_loop_soon(3.5)  # 50 ms on: inside the post
    [message] = await harness.posted(timeout=15)
    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    assert (await harness.result(env["reply_to"]))["outcome"] == "answered"


async def test_an_early_cancel_whose_first_holder_froze_before_ending_it_is_ended_by_the_takeover(
    harness: Harness,
) -> None:
    # End to end: the agent's cancel comes first; replica "frozen" reads the ask and its accept says
    # `cancel` (token 1), then it freezes before its ending lands. The agent's retry of the ask is read
    # by the live replica, which takes the delivery over: the ask ends cancelled (it was posted, and
    # ended `timeout`, before the fix), and the frozen replica's ending, when it resumes, is refused.
    store = harness.replicas[0].store
    assert store is not None
    env = harness.envelope(DEPLOY)
    tag = slot_tag(env["reply_to"])
    await harness.send(
        {"v": 1, "ask_id": env["ask_id"], "reply_to": env["reply_to"], "reason": "done"}, "cancel"
    )
    tombstone = store.ask_keys(tag, env["ask_id"]).cancel
    for _ in range(1000):  # bounded: the live replica remembers the cancel
        if await harness.redis.exists(tombstone):
            break
        await asyncio.sleep(0.01)
    built = build_record(
        parse_ask_envelope(json.dumps(env)),
        tag=tag,
        created_ms=await store.server_time_ms(),
        settings=harness.settings(),
    )
    assert isinstance(built, AskRecord)
    first = await store.accept(
        built, consumer="frozen", lease_ms=6_000, pending_ttl_ms=120_000, entry_id="1-0", schedule_at_ms=None
    )
    assert (first.verdict, first.token) == ("cancel", "1")  # ...and "frozen" stops here

    await harness.send(env)  # the agent's retry; the live replica takes the delivery over
    result = await harness.result(env["reply_to"])
    assert (result["outcome"], result["ask_id"]) == ("cancelled", env["ask_id"])
    # Resumed, the frozen replica's own ending is refused: fencing still holds for its lease.
    stale = leased_ending(built, Lease("frozen", first.token, time.monotonic() + 6))
    assert (await store.resolve(stale)).verdict == "stale"
    assert await harness.no_more_results(env["reply_to"])
    assert [m for m in harness.fake.messages("C0DEPLOY") if not m.thread_ts] == []  # never posted
    events = [a.event for a in await store.read_audit(tag, env["ask_id"])]
    assert events.count("cancelled") == 1 and "refused_stale" in events and "posted" not in events


async def test_a_post_whose_lease_was_taken_over_meanwhile_is_withdrawn_and_its_entry_left_pending(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    harness.fake.method_latency["chat.postMessage"] = 0.5  # the replica's post is on its way...
    env = harness.envelope(DEPLOY)
    await harness.send(env)
    store = harness.replicas[0].store
    assert store is not None
    tag = slot_tag(env["reply_to"])
    key = store.ask_keys(tag, env["ask_id"]).ask

    async def accepted() -> bool:
        return await harness.redis.hget(key, "state") == b"accepted"

    while not await accepted():  # noqa: ASYNC110 - the replica's accept is what this waits for
        await asyncio.sleep(0.01)
    # ...when its lease runs out (as after a freeze) and another replica takes the ask over.
    await harness.redis.hset(key, "lease_until", 1)
    rec = AskRecord.model_validate(json.loads(await harness.redis.hget(key, "rec") or b"{}"))
    entry = (await harness.redis.hget(key, "entry") or b"").decode()
    with caplog.at_level(logging.WARNING, logger="bot.engine.intake"):
        taken = await store.accept(
            rec,
            consumer="other",
            lease_ms=60_000,
            pending_ttl_ms=120_000,
            entry_id=str(entry),
            schedule_at_ms=None,
        )
        assert taken.verdict == "post"
        deleted = await harness.fake.wait_for(
            lambda: harness.fake.find_calls("chat.delete") or None, what="a withdraw"
        )
    [post] = [c for c in harness.fake.find_calls("chat.postMessage") if c.status == 200]
    assert deleted[0].params["ts"] == post.response["ts"]
    assert harness.fake.messages("C0DEPLOY") == []
    loaded = await store.load(tag, env["ask_id"])
    assert loaded is not None and loaded.state == "accepted" and loaded.messages == []
    assert (await harness.redis.xpending(store.keys.asks, GROUP))["pending"] == 1
    assert [r.getMessage() for r in caplog.records if "stale lease" in r.getMessage()] == [
        f"stale lease {harness.replicas[0].consumer}#1 on {env['ask_id']}: dropping the delivery and "
        f"withdrawing its post C0DEPLOY/{post.response['ts']}"
    ]
    # The one that holds it now delivers it (here: the replica again, once that lease ran out too).
    await harness.redis.hset(key, "lease_until", 1)
    [message] = await harness.posted(timeout=15)
    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    assert (await harness.result(env["reply_to"]))["outcome"] == "answered"


class _Blackhole(TcpProxy):
    """``blackhole()``: every connection, open now or made later, goes silent (a partition that drops
    every byte), until ``heal()``."""

    swallowing: bool = False

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.swallowing:
            self.frozen.add(writer)
        await super()._accept(reader, writer)

    def blackhole(self) -> None:
        self.swallowing = True
        self.freeze()

    def heal(self) -> None:
        self.swallowing = False
        self.frozen.clear()


async def test_a_delivery_s_redis_call_gives_up_when_its_lease_ends_and_the_record_then_decides(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    # Delivery window 500 ms: a 1 s lease, ten times shorter than the 10 s socket timeout. Redis goes
    # silent (every byte dropped) while Slack holds the post's answer: the record gives up when the
    # lease ends, not at the socket timeout (the wait below ends far under 10 s). Once Redis answers,
    # the record decides: the post stays if its record landed, else it is withdrawn (a write landing
    # later would be refused: its lease is over) and the ask delivered again.
    await harness.stop()
    proxy = _Blackhole(int(harness.redis_url.rsplit(":", 1)[1].split("/")[0]))
    await proxy.start()
    try:
        harness.redis_url = proxy.url
        harness.overrides["delivery_window_ms"] = 500
        replica = await harness.start_replica()
        harness.fake.reply_latency["chat.postMessage"] = 0.3  # Slack has the post; its answer comes later
        env = harness.envelope(DEPLOY)
        with caplog.at_level(logging.WARNING, logger="bot.engine.intake"):
            await harness.send(env)
            [first] = await harness.posted()
            proxy.blackhole()
            line = f"lease {replica.consumer}#1 on {env['ask_id']} ran out before the record of {first.ts}"
            await harness.fake.wait_for(
                lambda: line in caplog.text, timeout=6, what="the record cut at the lease"
            )
            proxy.heal()
        harness.fake.reply_latency.clear()

        def one_live() -> Message | None:
            live = [m for m in harness.fake.messages("C0DEPLOY") if interactive_elements(m.blocks)]
            return live[0] if len(live) == 1 and harness.fake.find_calls("chat.postMessage") else None

        # Whichever it was (the record landed, its answer lost: the post stays; or it never did: the
        # post is withdrawn and the ask posted again), one live copy carries the ask.
        message = await harness.fake.wait_for(one_live, timeout=30, what="one live copy of the ask")
        await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
        assert (await harness.result(env["reply_to"], timeout=30))["outcome"] == "answered"
        # A click on the first copy can end the ask while its entry is still pending (a stale delivery
        # leaves it for a reclaim), and the reclaim loop's call on a healed link waits out the 10 s
        # socket timeout first: the entry is handled (acked, deleted) before the bot is checked.
        await harness.drained(timeout=30)
        await harness.verify(timeout=30)
    finally:
        await harness.stop()
        await proxy.stop()


async def test_every_ending_names_the_replica_and_the_lease_in_its_audit_and_log(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    env = harness.envelope(DEPLOY, route={"channel": "C0NOPE"})
    consumer = harness.replicas[0].consumer
    line = (
        f"ask {env['ask_id']} ended unavailable (unavailable) by - on replica {consumer}, lease {consumer}#1"
    )
    with caplog.at_level(logging.INFO, logger="bot.engine.endings"):
        await harness.send(env)
        assert (await harness.result(env["reply_to"]))["outcome"] == "unavailable"
        await harness.fake.wait_for(lambda: line in caplog.text, what="the ending's log line")
    store = harness.replicas[0].store
    assert store is not None
    [ending] = [
        a
        for a in await store.read_audit(slot_tag(env["reply_to"]), env["ask_id"])
        if a.event == "unavailable"
    ]
    assert (ending.replica, ending.lease) == (consumer, f"{consumer}#1")


async def test_a_stale_post_s_copy_whose_delete_fails_after_the_ask_ended_is_deleted_by_the_sweeper(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    await stale_copy_of_an_ended_ask_is_deleted(harness, caplog)


async def test_a_withdrawn_copy_slack_refuses_to_delete_for_good_leaves_one_warning_and_a_finished_ask(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    # A refusal retrying cannot change (the bot may not delete it any more): the sweeper must not come
    # back for it forever; the ask is finished, and the log says which copy stays.
    await stale_copy_of_an_ended_ask_is_deleted(harness, caplog, refused="cant_delete_message")
