"""SLACK_ASK_REDIS_MIN_REPLICAS: the bot acts on its Redis writes (posts to Slack, ends an ask) only
once that many replicas hold them, so a failover cannot take back what Slack already shows. Here
on the test Redis, which has no replica at all: the bot must wait, lose nothing, park nothing."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from bot.playground import FakeSlack
from bot.storage.keys import slot_tag
from tests.conftest import REDIS_IS_FAKE
from tests.harness import Harness
from tests.redis_procs import redis_server, wait_until

pytestmark = pytest.mark.skipif(REDIS_IS_FAKE, reason="fakeredis has no WAIT")

DEPLOY = {"id": "deploy", "question": "Deploy?", "options": ["Yes", "No"]}


@pytest.fixture
async def bare(fake_slack: FakeSlack, redis: Redis, redis_url: str, prefix: str) -> AsyncIterator[Harness]:
    """A harness with no replica running yet."""
    h = Harness(fake=fake_slack, redis=redis, redis_url=redis_url, prefix=prefix)
    try:
        yield h
    finally:
        await h.stop()


async def test_without_the_replicas_it_needs_the_bot_posts_nothing_parks_nothing_and_delivers_later(
    bare: Harness, redis: Redis, caplog: pytest.LogCaptureFixture
) -> None:
    h = bare
    caplog.set_level(logging.WARNING)

    def lines() -> list[str]:
        return [record.getMessage() for record in caplog.records]

    # One delivery allowed: were a missing replica counted as a failed delivery, the entry would
    # be parked as poison on its first retry.
    await h.start_replica(redis_min_replicas=1, redis_wait_ms=50, max_deliveries=1, reclaim_idle_ms=100)
    env = h.envelope(DEPLOY)
    entry = await h.send(env)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 20
    while sum(f"intake entry {entry}" in line and "NotReplicatedError" in line for line in lines()) < 3:
        assert loop.time() < deadline, f"no retries logged for {entry}: {lines()[-5:]}"
        await asyncio.sleep(0.05)
    assert not [m for m in h.fake.messages("C0DEPLOY") if env["ask_id"] in str(m.blocks)], (
        "posted unconfirmed"
    )
    assert await redis.xlen(f"{h.prefix}:dead") == 0, "parked as poison while waiting for a replica"
    pending = await redis.xpending_range(f"{h.prefix}:asks", "bots", "-", "+", 10)
    assert [p["message_id"].decode() for p in pending] == [entry]
    message = next(line for line in lines() if "NotReplicatedError" in line)
    assert "0 of 1 Redis replicas" in message and "SLACK_ASK_REDIS_MIN_REPLICAS=1" in message

    # The same entry, taken by a replica that does not wait, is delivered: nothing was lost.
    for runtime in h.replicas:
        await runtime.aclose()
    h.replicas.clear()
    await h.start_replica(reclaim_idle_ms=100)
    deadline = loop.time() + 20
    while not [m for m in h.fake.messages("C0DEPLOY") if env["ask_id"] in str(m.blocks)]:
        assert loop.time() < deadline, "the waiting ask was never posted"
        await asyncio.sleep(0.05)
    await h.verify(timeout=10)


async def test_a_replica_that_stops_confirming_while_a_post_is_in_flight_leaves_the_ask_pending(
    fake_slack: FakeSlack, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    # posted.lua runs on the master, then WAIT finds no replica: the message is in the master's record
    # and must stay there (and in Slack), never be withdrawn, whose own delete would dismiss the ask.
    caplog.set_level(logging.WARNING)
    with (
        redis_server("--repl-diskless-sync-delay", "0") as master,
        redis_server("--replicaof", "127.0.0.1", str(master.port)) as replica,
    ):
        assert replica.proc is not None
        pid = replica.proc.pid
        wait_until(
            lambda: replica.client().info("replication")["master_link_status"] == "up",
            timeout=20,
            what="the replica to sync",
        )
        url = f"redis://127.0.0.1:{master.port}/0"
        redis = Redis.from_url(url, socket_timeout=10)
        h = Harness(fake=fake_slack, redis=redis, redis_url=url, prefix=prefix)
        stopped = False
        try:
            await h.start_replica(redis_min_replicas=1, redis_wait_ms=300)
            fake_slack.reply_latency["chat.postMessage"] = 1.0
            env = h.envelope(DEPLOY)
            await h.send(env)
            [message] = await h.posted()  # taken by Slack, its reply held back for a second
            os.kill(pid, signal.SIGSTOP)  # the replica stops confirming before posted.lua runs
            stopped = True

            def retried() -> int:
                line = f"could not record message {message.ts} "
                return sum(line in r.getMessage() for r in caplog.records)

            # Past the point where the bot used to withdraw the message (1 s of failed records).
            await fake_slack.wait_for(
                lambda: fake_slack.find_calls("chat.delete") or retried() >= 4,
                timeout=20,
                what="four retried records, or a delete",
            )
            assert not fake_slack.find_calls("chat.delete"), "the message was withdrawn"
            assert await redis.llen(env["reply_to"]) == 0, "the ask ended"
            os.kill(pid, signal.SIGCONT)
            stopped = False

            key = f"{prefix}:{{{slot_tag(env['reply_to'])}}}:ask:{env['ask_id']}"

            def delivered() -> bool:
                with master.client() as sync:
                    return sync.xlen(f"{prefix}:asks") == 0 and message.ts in str(sync.hget(key, "msgs"))

            await asyncio.to_thread(wait_until, delivered, timeout=20, what="the post recorded and acked")
            await fake_slack.click("U0BOB", "C0DEPLOY", message.ts, "slack_ask:choose:0")
            assert (await h.result(env["reply_to"]))["outcome"] == "answered"
            await h.ended("C0DEPLOY", message.ts)
            assert [m.ts for m in fake_slack.messages("C0DEPLOY") if not m.thread_ts] == [message.ts]
            await h.verify(timeout=10)
        finally:
            if stopped:
                os.kill(pid, signal.SIGCONT)
            await h.stop()
            await redis.aclose()
