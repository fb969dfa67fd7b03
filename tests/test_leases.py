"""Short intake leases renewed while a delivery is in flight (issue 22, recovery time): a slow Slack
call keeps its lease and posts once; a replica killed mid-delivery has its ask taken over as soon as
its lease runs out; a lease that ran out is never brought back (fencing still holds)."""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest
from redis.asyncio import Redis

from bot.model import AskRecord
from bot.storage.keys import GROUP, slot_tag
from bot.storage.store import Store
from contract import normalize_ask_request
from tests.harness import Harness
from tests.redis_procs import TcpProxy

DEPLOY = {"id": "deploy", "question": "Deploy?", "options": ["Yes", "No"]}
# A 1.5 s lease (renewed every 0.4-0.5 s) under a 5 s delivery window: the window, not the lease, bounds
# Slack's retries, and a delivery may be renewed for up to twice the window.
SMALL = {"intake_lease_ms": 1_500, "delivery_window_ms": 5_000}


def _ms(at: str) -> int:
    return int(datetime.fromisoformat(at).timestamp() * 1000)


@pytest.fixture
def store(redis: Redis, prefix: str) -> Store:
    return Store(redis, prefix, retention_ms=60_000)


async def test_a_renewal_extends_only_the_current_holder_s_live_lease(
    store: Store, redis: Redis, reply_to: str
) -> None:
    await store.load_scripts()
    rec = AskRecord(
        ask_id="ask-l",
        tag=slot_tag(reply_to),
        reply_to=reply_to,
        request=normalize_ask_request({"question": "Ship it?", "options": ["Yes", "No"]}),
        created_ms=1_700_000_000_000,
    )
    args = {"pending_ttl_ms": 120_000, "entry_id": "1-0", "schedule_at_ms": None}
    first = await store.accept(rec, consumer="c1", lease_ms=200, **args)
    key = store.keys.for_ask(rec.tag, rec.ask_id).ask
    before = int(await redis.hget(key, "lease_until") or 0)
    assert await store.renew_leases([(rec.tag, rec.ask_id, "c1", first.token)], 10_000) == [""]
    assert int(await redis.hget(key, "lease_until") or 0) >= before + 9_000
    # Not the holder, or not its grant: refused, and nothing moves.
    assert await store.renew_leases([(rec.tag, rec.ask_id, "c2", first.token)], 60_000) == ["c1#1"]
    assert await store.renew_leases([(rec.tag, rec.ask_id, "c1", "7")], 60_000) == ["c1#1"]
    # A lease that ran out in Redis time is never brought back, even with nobody else holding it: a
    # holder frozen past it must stay fenced out.
    await redis.hset(key, "lease_until", await store.server_time_ms() - 1)
    assert await store.renew_leases([(rec.tag, rec.ask_id, "c1", first.token)], 60_000) == ["expired"]
    taken = await store.accept(rec, consumer="c2", lease_ms=60_000, **args)
    assert (taken.verdict, taken.token) == ("post", "2")
    assert await store.renew_leases([(rec.tag, rec.ask_id, "c1", first.token)], 60_000) == ["c2#2"]
    await redis.hset(key, "lease_until", 0)  # the delivery is over (posted)
    assert await store.renew_leases([(rec.tag, rec.ask_id, "c2", "2")], 60_000) == ["done"]
    assert await redis.hget(key, "lease_until") in (b"0", "0")


async def test_a_slack_call_slower_than_several_leases_keeps_its_lease_and_posts_once(
    harness: Harness,
) -> None:
    await harness.stop()
    harness.log_watch.__enter__()  # stop() took the crash watch away
    harness.overrides.update(SMALL)
    replicas = [await harness.start_replica(), await harness.start_replica()]
    # Slack takes the post at once but holds its answer for more than three leases, while the other
    # replica's reclaim round (every 0.2 s, 0.4 s idle) looks for abandoned entries all along.
    harness.fake.reply_latency["chat.postMessage"] = 5.0
    env = harness.envelope(DEPLOY)
    await harness.send(env)
    await harness.drained(timeout=30)  # acked only once its post is recorded
    harness.fake.reply_latency.clear()
    assert len(harness.fake.find_calls("chat.postMessage")) == 1
    [message] = await harness.posted()
    audit = await replicas[0].store.read_audit(slot_tag(env["reply_to"]), env["ask_id"])
    events = [a.event for a in audit]
    assert events.count("accepted") == 1
    assert not {"taken_over", "adopted", "withdrawn", "refused_stale"} & set(events), events
    assert sum(r.engine.intake.leases.renewals for r in replicas) >= 5
    await harness.fake.click("U0BOB", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    assert (await harness.result(env["reply_to"]))["outcome"] == "answered"
    await harness.verify()


async def test_a_replica_killed_mid_delivery_has_its_ask_taken_over_once_its_lease_runs_out(
    harness: Harness,
) -> None:
    await harness.stop()
    harness.log_watch.__enter__()  # stop() took the crash watch away
    harness.overrides.update(SMALL)
    # The replica to be killed reaches Slack through a proxy that then holds every byte: its post is
    # in flight, and never reaches Slack.
    port = int(harness.fake.api_url.split(":")[2].split("/")[0])
    proxy = TcpProxy(port)
    await proxy.start()
    try:
        dead = await harness.start_replica(
            slack_api_url=harness.fake.api_url.replace(f":{port}/", f":{proxy.port}/")
        )
        proxy.blackhole()
        env = harness.envelope(DEPLOY)
        await harness.send(env)
        tag = slot_tag(env["reply_to"])
        key = dead.store.keys.for_ask(tag, env["ask_id"]).ask

        def renewed() -> bool | None:
            return dead.engine.intake.leases.renewals >= 1 or None

        await harness.fake.wait_for(renewed, timeout=10, what="the delivery's lease renewed")
        await dead.kill()  # bounded: a task outliving its cancel is raised, with its stack
        lease_until = int(await harness.redis.hget(key, "lease_until") or 0)
        settings = harness.settings()
        async with asyncio.timeout(10):
            live = await harness.start_replica()
        try:
            [message] = await harness.posted(timeout=30)
        except TimeoutError as exc:
            # Why the live replica did not take over: the record, the audit and the stream's view.
            record = await harness.redis.hgetall(key)
            events = [a.event for a in await live.store.read_audit(tag, env["ask_id"])]
            pending = await harness.redis.xpending_range(f"{harness.prefix}:asks", GROUP, "-", "+", 10)
            raise AssertionError(
                f"not taken over: {record=} {events=} {pending=} live={live.consumer}"
            ) from exc
        await harness.fake.click("U0BOB", "C0DEPLOY", message.ts, "slack_ask:choose:0")
        assert (await harness.result(env["reply_to"]))["outcome"] == "answered"
        audit = await live.store.read_audit(tag, env["ask_id"])
        [taken] = [a for a in audit if a.event == "taken_over"]
        assert (taken.by, taken.lease) == (live.consumer, f"{live.consumer}#2")
        # Never while the dead replica's lease held, and within a reclaim (idle time and a round,
        # with room for a loaded machine) after its end, in Redis time.
        bound = settings.reclaim_idle_ms * 2 + 2_000
        assert lease_until <= _ms(taken.at) <= lease_until + bound, (lease_until, taken.at, bound)
        assert len(harness.fake.find_calls("chat.postMessage")) == 1  # the dead replica's never landed
        await harness.verify()
    finally:
        await harness.stop()
        await proxy.stop()
