"""The bot on real Redis topologies (issue 11): Sentinel with a failover during a stream of asks and
clicks, a 3-master Cluster with a pending ask's slot migrated (MOVED/ASK), and a Redis restart with
AOF while asks are in flight. Every server is started here on free ports and stopped by pid
(tests/redis_procs.py); the fake Slack and the bot replicas are the usual ones."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.crc import key_slot
from redis.exceptions import RedisError

from bot.playground import FakeSlack, Message
from bot.storage.connection import connect
from bot.storage.keys import Keys, slot_tag
from bot.storage.store import Store
from tests.harness import Harness, interactive_elements
from tests.redis_procs import Cluster, RedisProc, SentinelGroup, cluster, redis_server, sentinel_group

# One worker runs the module (pytest-xdist): its Sentinel group and Cluster are module fixtures, built once.
pytestmark = [pytest.mark.slow, pytest.mark.redis, pytest.mark.xdist_group("topologies")]

DEPLOY = {"id": "deploy", "question": "Deploy?", "options": ["Yes", "No"]}


async def _retrying(call: Any, *, attempts: int = 40) -> Any:
    """An agent's Redis call through a failover or restart: retried on a fresh connection."""
    for attempt in range(attempts):
        try:
            return await call()
        except (RedisError, OSError):
            if attempt == attempts - 1:
                raise
            await asyncio.sleep(0.25)
    raise AssertionError("unreachable")


async def _results(
    h: Harness, envs: list[dict[str, Any]], *, timeout: float
) -> dict[str, list[dict[str, Any]]]:
    """Every result pushed for ``envs`` within ``timeout`` (a list per ask: exactly one is expected)."""
    got: dict[str, list[dict[str, Any]]] = {e["ask_id"]: [] for e in envs}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline and any(not v for v in got.values()):
        for env in envs:
            raw = await _retrying(lambda env=env: h.redis.lpop(env["reply_to"]))
            if raw is not None:
                got[env["ask_id"]].append(json.loads(raw))
        await asyncio.sleep(0.1)
    # Anything more would be a doubled result: give a late duplicate a moment to show.
    await asyncio.sleep(1.0)
    for env in envs:
        while (raw := await _retrying(lambda env=env: h.redis.lpop(env["reply_to"]))) is not None:
            got[env["ask_id"]].append(json.loads(raw))
    return got


async def _send_durably(h: Harness, env: dict[str, Any], *, attempts: int = 40) -> None:
    """What an agent on replicated Redis does (docs/operations.md "Failover"): XADD, then WAIT for
    a replica, and send again (the same ask_id: idempotent) until one holds the entry. An XADD
    that only the old master saw is lost with it when Sentinel demotes it."""
    for _ in range(attempts):
        try:
            async with h.redis.pipeline(transaction=False) as pipe:
                pipe.xadd(f"{h.prefix}:asks", {"ask": json.dumps(env)})
                pipe.execute_command("WAIT", 1, 1000)
                _entry, replicas = await pipe.execute()
            if int(replicas) >= 1:
                return
        except (RedisError, OSError):
            pass
        await asyncio.sleep(0.25)
    raise AssertionError(f"{env['ask_id']}: no replica confirmed the XADD")


def _ask_message(fake: FakeSlack, ask_id: str) -> Message | None:
    for message in fake.messages("C0DEPLOY"):
        if not message.thread_ts and ask_id in json.dumps(message.blocks):
            return message
    return None


async def _answer(h: Harness, env: dict[str, Any], *, option: int = 0, timeout: float = 30) -> None:
    """A person clicks the ask's button, and clicks again while the ask stays open (a click that hit
    a failover is lost like a dropped request; the person tries again)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    ts: str | None = None
    while loop.time() < deadline:
        if ts is None:
            found = _ask_message(h.fake, env["ask_id"])  # its buttons carry the ask id
            ts = found.ts if found is not None else None
        message = h.fake.state.find_message("C0DEPLOY", ts) if ts is not None else None
        if message is not None:
            if not interactive_elements(message.blocks):
                return
            with contextlib.suppress(Exception):
                await h.fake.click("U0BOB", "C0DEPLOY", message.ts, f"slack_ask:choose:{option}")
        await asyncio.sleep(0.3)
    raise AssertionError(
        f"{env['ask_id']} still open after {timeout}s of clicks (posted: {ts}); {await _diagnose(h, env)}"
    )


async def _diagnose(h: Harness, env: dict[str, Any]) -> str:
    """What Redis holds of one ask, for a failure message (a failover's damage is otherwise invisible)."""
    keys = Keys(h.prefix).for_ask(slot_tag(env["reply_to"]), env["ask_id"])
    try:
        record = await h.redis.hgetall(keys.ask)
        audit = await Store(h.redis, h.prefix).read_audit(slot_tag(env["reply_to"]), env["ask_id"])
        entries = [
            i
            for i, f in await h.redis.xrange(f"{h.prefix}:asks")
            if env["ask_id"].encode() in f.get(b"ask", b"")
        ]
        pending = await h.redis.xpending_range(f"{h.prefix}:asks", "bots", "-", "+", 100)
    except RedisError as exc:
        return f"Redis could not be read: {exc}"
    fields = {k.decode(): v.decode()[:80] for k, v in record.items() if k != b"rec"}
    return (
        f"record {fields}; audit {audit}; its entries {entries}; pending {[p['message_id'] for p in pending]}"
    )


def _assert_one_each(got: dict[str, list[dict[str, Any]]], outcome: str | None = None) -> None:
    missing = [a for a, r in got.items() if not r]
    doubled = [a for a, r in got.items() if len(r) > 1]
    assert not missing, f"{len(missing)} asks without a result: {missing[:5]}"
    assert not doubled, f"{len(doubled)} asks with more than one result: {doubled[:5]}"
    if outcome is not None:
        wrong = {a: r[0]["outcome"] for a, r in got.items() if r[0]["outcome"] != outcome}
        assert not wrong, wrong


# -- Sentinel ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sentinels() -> Iterator[SentinelGroup]:
    with sentinel_group() as group:
        yield group


@pytest.fixture
async def sentinel_harness(
    fake_slack: FakeSlack, sentinels: SentinelGroup, prefix: str
) -> AsyncIterator[Harness]:
    agent = connect(sentinels.url)
    h = Harness(fake=fake_slack, redis=agent, redis_url=sentinels.url, prefix=prefix)
    # Both replicas act on a write only once the Redis replica holds it (SLACK_ASK_REDIS_MIN_REPLICAS),
    # so the failover below cannot take back an ask that Slack already shows.
    # max_deliveries: the harness reclaims after 400 ms, not 60 s, so a failover of some seconds would
    # count as many failed deliveries as ten minutes would in production (and park a healthy ask).
    await h.start_replica(redis_min_replicas=1, max_deliveries=100)
    await h.start_replica(redis_min_replicas=1, max_deliveries=100)
    try:
        yield h
    finally:
        await h.stop()
        with contextlib.suppress(RedisError):
            keys = [k async for k in agent.scan_iter(match=f"{prefix}*")]
            if keys:
                await agent.delete(*keys)
        await agent.aclose()


# Run alone (`make test` runs `serial` tests after the parallel ones): beside 3 more workers on 2 cores,
# the bot's writes stayed unconfirmed by the replica (NotReplicatedError, retried, as they must be) for
# over 18 s after the failover, and an ask's 30 s of clicks ran out; alone it settles within seconds.
@pytest.mark.serial
async def test_a_sentinel_failover_during_asks_and_clicks_loses_no_ask_and_doubles_no_result(
    sentinel_harness: Harness, sentinels: SentinelGroup
) -> None:
    h = sentinel_harness
    envs = [h.envelope(DEPLOY) for _ in range(16)]
    before = sentinels.master_port()
    clicks: list[asyncio.Task[None]] = []
    for i, env in enumerate(envs):
        await _send_durably(h, env)
        clicks.append(asyncio.create_task(_answer(h, env, option=i % 2)))
        if i == 7:
            # Mid-stream: asks before this one are being answered, the rest not yet sent.
            await asyncio.get_running_loop().run_in_executor(None, sentinels.failover)
        await asyncio.sleep(0.1)
    assert sentinels.master_port() != before
    await asyncio.gather(*clicks)
    got = await _results(h, envs, timeout=30)
    _assert_one_each(got, "answered")
    for i, env in enumerate(envs):
        assert got[env["ask_id"]][0]["answers"][0]["selected"] == [i % 2]
    await h.verify(timeout=15)


# -- Cluster ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def three_masters() -> Iterator[Cluster]:
    with cluster(3) as c:
        yield c


@pytest.fixture
async def cluster_harness(
    fake_slack: FakeSlack, three_masters: Cluster, prefix: str
) -> AsyncIterator[Harness]:
    agent = connect(three_masters.url)
    h = Harness(fake=fake_slack, redis=agent, redis_url=three_masters.url, prefix=prefix)
    await h.start_replica()
    try:
        yield h
    finally:
        await h.stop()
        with contextlib.suppress(RedisError):
            async for key in agent.scan_iter(match=f"{prefix}*"):
                await agent.delete(key)
        await agent.aclose()


async def test_asks_end_to_end_on_a_three_master_cluster(
    cluster_harness: Harness, three_masters: Cluster
) -> None:
    h = cluster_harness
    # reply_to names spread over the three masters (and one with a hash tag of its own)
    envs = [h.envelope(DEPLOY, reply_to=f"{h.prefix}:reply:{uuid.uuid4().hex[:8]}") for _ in range(6)]
    envs.append(h.envelope(DEPLOY, reply_to=f"{h.prefix}:reply:{{team-a}}:r1"))
    masters = {three_masters.node_for_slot(key_slot(e["reply_to"].encode())).port for e in envs}
    assert len(masters) >= 2, "the asks should not all live on one master"
    timed = h.envelope(DEPLOY, timeout_ms=500)
    for env in [*envs, timed]:
        await h.send(env)
    for i, env in enumerate(envs):
        await _answer(h, env, option=i % 2)
    got = await _results(h, [*envs, timed], timeout=20)
    _assert_one_each(got)
    assert got[timed["ask_id"]][0]["outcome"] == "timeout"
    assert all(got[e["ask_id"]][0]["outcome"] == "answered" for e in envs)
    # A re-sent ended ask gets its stored result again (repush, no MULTI on Cluster).
    await h.send(envs[0])
    again = await _results(h, envs[:1], timeout=10)
    assert again[envs[0]["ask_id"]] == got[envs[0]["ask_id"]]
    await h.verify(timeout=15)


async def test_an_ask_id_reused_after_retention_with_another_reply_to_works_on_cluster(
    cluster_harness: Harness,
) -> None:
    h = cluster_harness
    first = h.envelope(DEPLOY, reply_to=f"{h.prefix}:reply:{{old-slot}}", timeout_ms=1)
    await h.send(first)
    assert (await _results(h, [first], timeout=10))[first["ask_id"]][0]["outcome"] == "timeout"
    # Retention over: the ask's keys are gone, its id index (which outlives them) is not.
    async for key in h.redis.scan_iter(match=f"{h.prefix}:{{{slot_tag(first['reply_to'])}}}:*"):
        await h.redis.delete(key)
    second = {**first, "reply_to": f"{h.prefix}:reply:{{new-slot}}", "timeout_ms": 0}
    assert key_slot(b"old-slot") != key_slot(b"new-slot")
    await h.send(second)
    await _answer(h, second)
    got = await _results(h, [second], timeout=10)
    _assert_one_each(got, "answered")


def _migrate_slot(c: Cluster, slot: int, source: RedisProc, target: RedisProc, *, finish: bool) -> None:
    """Move ``slot``'s keys from ``source`` to ``target`` the way redis-cli --cluster reshard does;
    with ``finish=False`` the slot is left half-way (MIGRATING/IMPORTING): clients get ASK."""
    src_id, dst_id = c.node_id(source), c.node_id(target)
    with target.client() as dst, source.client() as src:
        dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
        src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
        while keys := src.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100):
            src.execute_command("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", *keys)
    if finish:
        for node in c.nodes:
            with node.client() as n:
                n.execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)


def _finish_migration(c: Cluster, slot: int, target: RedisProc) -> None:
    dst_id = c.node_id(target)
    for node in c.nodes:
        with node.client() as n:
            n.execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)


async def test_a_pending_asks_slot_migrated_mid_ask_is_answered_through_ask_and_moved(
    cluster_harness: Harness, three_masters: Cluster
) -> None:
    h = cluster_harness
    migrating = h.envelope(DEPLOY, reply_to=f"{h.prefix}:reply:{{mig-{uuid.uuid4().hex[:6]}}}")
    moved = h.envelope(DEPLOY, reply_to=f"{h.prefix}:reply:{{mov-{uuid.uuid4().hex[:6]}}}")
    for env in (migrating, moved):
        await h.send(env)
    await h.posted(count=2)
    loop = asyncio.get_running_loop()
    # One slot half-way through a migration while its ask is pending (ASK), one slot moved (MOVED).
    slot_a = key_slot(slot_tag(migrating["reply_to"]).encode())
    slot_b = key_slot(slot_tag(moved["reply_to"]).encode())
    source_a = three_masters.node_for_slot(slot_a)
    target_a = next(n for n in three_masters.nodes if n is not source_a)
    source_b = three_masters.node_for_slot(slot_b)
    target_b = next(n for n in three_masters.nodes if n is not source_b)
    c = three_masters
    await loop.run_in_executor(None, lambda: _migrate_slot(c, slot_a, source_a, target_a, finish=False))
    await loop.run_in_executor(None, lambda: _migrate_slot(c, slot_b, source_b, target_b, finish=True))
    try:
        # Half-way: the ask's keys are on the target, the slot still on the source. The bot's client
        # reads the ask through ASK (a multi-key script would get TRYAGAIN until the migration ends,
        # which takes milliseconds in a real reshard).
        reader = Store(connect(c.url), h.prefix)
        try:
            loaded = await _retrying(
                lambda: reader.load(slot_tag(migrating["reply_to"]), migrating["ask_id"])
            )
        finally:
            await reader.redis.aclose()
        assert loaded is not None and loaded.state == "posted"
    finally:
        await loop.run_in_executor(None, lambda: _finish_migration(c, slot_a, target_a))
    # Now both slots have moved: the bot's next commands get MOVED and follow it.
    await _answer(h, migrating, option=1)
    await _answer(h, moved, option=0)
    got = await _results(h, [migrating, moved], timeout=15)
    _assert_one_each(got, "answered")
    assert got[migrating["ask_id"]][0]["answers"][0]["selected"] == [1]
    assert three_masters.node_for_slot(slot_a).port == target_a.port
    await h.verify(timeout=15)


# -- Redis restart with AOF ---------------------------------------------------------------------


async def test_a_redis_restart_with_aof_loses_no_ask_in_flight(fake_slack: FakeSlack, prefix: str) -> None:
    with redis_server(aof=True) as server:
        url = f"redis://127.0.0.1:{server.port}/0"
        agent = Redis.from_url(url, socket_timeout=10)
        h = Harness(fake=fake_slack, redis=agent, redis_url=url, prefix=prefix)
        try:
            await h.start_replica()
            await h.start_replica()
            envs = [h.envelope(DEPLOY) for _ in range(12)]
            for env in envs[:8]:
                await h.send(env)
            await h.posted(count=4)
            for env in envs[:3]:
                await _answer(h, env)
            # SIGKILL: what appendfsync always promises is exactly what was acknowledged.
            server.stop(signal.SIGKILL)
            server.start()
            for env in envs[8:]:
                await _retrying(lambda env=env: h.send(env))
            for i, env in enumerate(envs[3:]):
                await _answer(h, env, option=i % 2)
            got = await _results(h, envs, timeout=30)
            _assert_one_each(got, "answered")
            await h.verify(timeout=15)
        finally:
            await h.stop()
            await agent.aclose()
