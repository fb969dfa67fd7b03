"""Slack sends the bot a message event for each post it makes. The replica that posted and recorded
the message knows its ask's record holds it: it learns nothing, and asks Redis nothing (issue 22:
one look less per ask); an event for a message it did not record is still looked up."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.asyncio import Redis

from bot.engine.room import RecordedPosts
from bot.playground import FakeSlack
from tests.harness import SIGNING_SECRET, Harness, running
from tests.redis_procs import private_redis

DEPLOY = {"id": "deploy", "question": "Deploy?", "options": ["Yes", "No"]}


def test_recorded_posts_keep_the_latest_only() -> None:
    posts = RecordedPosts(keep=2)
    for ts in ("1.1", "1.2", "1.3"):
        posts.add("C1", ts)
    assert ("C1", "1.1") not in posts
    assert ("C1", "1.2") in posts and ("C1", "1.3") in posts
    assert ("C2", "1.3") not in posts


@pytest.fixture
async def private(prefix: str) -> AsyncIterator[Harness]:
    """A harness on a redis-server of its own: its command counts are this test's alone."""
    with private_redis() as port:
        url = f"redis://127.0.0.1:{port}/0"
        redis = Redis.from_url(url)
        fake = FakeSlack.with_demo_workspace(signing_secret=SIGNING_SECRET)
        await fake.start()
        try:
            async with running(fake, redis, url, prefix) as h:
                yield h
        finally:
            await fake.stop()
            await redis.aclose()


async def _hgetalls(redis: Redis) -> int:
    stats: dict[str, Any] = await redis.info("commandstats")
    return int(stats.get("cmdstat_hgetall", {}).get("calls", 0))


async def test_the_event_of_a_post_this_replica_recorded_is_not_looked_up(private: Harness) -> None:
    h = private
    [replica] = h.replicas
    env = h.envelope(DEPLOY)
    await h.send(env)
    [message] = await h.posted()
    await h.drained()  # acknowledged: the post is in the record
    before = await _hgetalls(h.redis)

    def handled() -> bool | None:
        sent = [e for e in h.fake.state.events if e.envelope.get("event", {}).get("ts") == message.ts]
        return (bool(sent) and all(e.delivered for e in sent) and not replica._listeners) or None

    # The event was delivered (often before the post's record) and its listener has finished: it
    # waited out LEARN_AFTER_S, then found the post among this replica's recorded ones.
    await h.fake.wait_for(handled, timeout=10, what="the post's message event handled")
    assert await _hgetalls(h.redis) == before
    await h.fake.click("U0BOB", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    assert (await h.result(env["reply_to"]))["outcome"] == "answered"
