"""SLACK_ASK_REDIS_MIN_REPLICAS: the bot acts on its Redis writes (posts to Slack, ends an ask) only
once that many replicas hold them, so a failover cannot take back what Slack already shows. Here
on the test Redis, which has no replica at all: the bot must wait, lose nothing, park nothing."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from bot.playground import FakeSlack
from tests.conftest import REDIS_IS_FAKE
from tests.harness import Harness

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
