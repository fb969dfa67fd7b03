"""End to end under Slack's real rate limits (the fake enforces them, sped up): the bot paces itself
through token buckets shared in Redis, so replicas together stay within a method's tier, a burst of
clicks is acked at once and cleaned up at Slack's pace, and a busy channel holds no other back (issue 12)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import pytest
from aiohttp import web
from redis.asyncio import Redis

from bot.playground import FakeSlack
from bot.storage.keys import GROUP, Keys, slot_tag
from tests.conftest import REDIS_IS_FAKE
from tests.harness import SIGNING_SECRET, Harness, interactive_elements

SPEEDUP = 10
DEPLOY = {"id": "deploy", "question": "Deploy?", "options": ["Yes", "No"]}
PEOPLE = ["U0ALICE", "U0BOB", "U0CAROL"]


@contextlib.asynccontextmanager
async def limited_harness(
    redis: Redis, redis_url: str, prefix: str, *, middlewares: Sequence[Any] = (), **overrides: Any
) -> AsyncIterator[Harness]:
    """A fake Slack enforcing Slack's limits at ``SPEEDUP`` and one replica pacing at the same speed."""
    fake = FakeSlack.with_demo_workspace(signing_secret=SIGNING_SECRET, rate_limits=True, speedup=SPEEDUP)
    fake.app.middlewares.extend(middlewares)
    await fake.start()
    h = Harness(
        fake=fake,
        redis=redis,
        redis_url=redis_url,
        prefix=prefix,
        overrides={"pace_scale": SPEEDUP, **overrides},
    )
    try:
        await h.start_replica()
        yield h
        await h.verify(timeout=30)
    finally:
        await h.stop()
        await fake.stop()


@pytest.fixture
async def limited(redis: Redis, redis_url: str, prefix: str) -> AsyncIterator[Harness]:
    async with limited_harness(redis, redis_url, prefix) as h:
        yield h


def channels(h: Harness, count: int, tag: str = "P") -> list[str]:
    ids = [f"C0{tag}{i:02d}" for i in range(count)]
    for channel in ids:
        h.fake.add_channel(channel, channel.lower(), members=PEOPLE)
    return ids


async def send_many(h: Harness, routes: list[str]) -> list[dict[str, object]]:
    envs = [
        h.envelope(DEPLOY, route={"channel": channel}, ask_id=f"ask-{uuid.uuid4().hex[:10]}")
        for channel in routes
    ]
    async with h.redis.pipeline(transaction=False) as pipe:
        for env in envs:
            pipe.xadd(f"{h.prefix}:asks", {"ask": json.dumps(env)})
        await pipe.execute()
    return envs


def limited_calls(h: Harness) -> dict[str, int]:
    limited = {method: n for method, n in h.fake.limits.limited.items() if n}
    limited.update({f"chat.postMessage in {c}": n for c, n in h.fake.limits.limited_channels.items() if n})
    return limited


async def test_two_replicas_together_stay_within_the_post_and_update_limits(limited: Harness) -> None:
    h = limited
    first = h.replicas[0]
    second = await h.start_replica()
    routes = [channel for channel in channels(h, 20) for _ in range(3)]
    envs = await send_many(h, routes)
    posted = await h.fake.wait_for(
        lambda: (
            [m for c in set(routes) for m in h.fake.messages(c)]
            if sum(len(h.fake.messages(c)) for c in set(routes)) == len(routes)
            else None
        ),
        timeout=30,
        what="every ask posted",
    )
    # Both replicas took asks from the stream: the limits held for the two of them together.
    keys = Keys(h.prefix)
    owners = set()
    for env in envs:
        ask = keys.for_ask(slot_tag(str(env["reply_to"])), str(env["ask_id"])).ask
        owners.add((await h.redis.hget(ask, "owner") or b"").decode())
    assert {first.engine.consumer, second.engine.consumer} <= owners
    # Half the clicks reach each replica, so both end messages at once, from the same chat.update bucket.
    half = len(posted) // 2
    for replica, batch in ((first, posted[:half]), (second, posted[half:])):
        h.fake.events_url = f"http://127.0.0.1:{replica.port}/slack/events"
        responses = await asyncio.gather(
            *(h.fake.click("U0ALICE", m.channel, m.ts, "slack_ask:choose:0") for m in batch)
        )
        assert all(r.status == 200 for r in responses)
    for env in envs:
        assert (await h.result(str(env["reply_to"]), timeout=30))["outcome"] == "answered"
    for message in posted:
        await h.ended(message.channel, message.ts, timeout=30)
    assert limited_calls(h) == {}, h.fake.limits.stats()


# Wall-clock bound on the bot's own work: run alone (`make test` runs `serial` tests after the parallel ones).
@pytest.mark.serial
async def test_a_burst_of_a_hundred_clicks_is_acked_in_time_and_every_message_ends(limited: Harness) -> None:
    if REDIS_IS_FAKE:
        # Slack's 3 s is a bound on the bot's Redis work: fakeredis serves it from a thread of this
        # test process, sharing one interpreter lock with the bot, so what it measures is the stand-in.
        pytest.skip("fakeredis runs inside the test process; the 3 s ack bound needs a real Redis")
    h = limited
    routes = [channel for channel in channels(h, 10) for _ in range(10)]
    envs = await send_many(h, routes)
    posted = await h.fake.wait_for(
        lambda: (
            [m for c in sorted(set(routes)) for m in h.fake.messages(c)]
            if sum(len(h.fake.messages(c)) for c in set(routes)) == len(routes)
            else None
        ),
        timeout=30,
        what="every ask posted",
    )
    responses = await asyncio.gather(
        *(h.fake.click(PEOPLE[i % 3], m.channel, m.ts, "slack_ask:choose:1") for i, m in enumerate(posted))
    )
    assert [r.status for r in responses] == [200] * len(posted), [
        r.error for r in responses if r.status != 200
    ]
    for env in envs:
        assert (await h.result(str(env["reply_to"]), timeout=30))["outcome"] == "answered"
    for message in posted:
        ended = await h.ended(message.channel, message.ts, timeout=30)
        assert interactive_elements(ended.blocks) == []
    assert limited_calls(h) == {}, h.fake.limits.stats()


# Wall-clock bound on the bot's own work: run alone (`make test` runs `serial` tests after the parallel ones).
@pytest.mark.serial
async def test_a_busy_channel_holds_back_no_ask_to_another_channel(
    limited: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    h = limited
    [busy] = channels(h, 1, tag="BUSY")
    quiet = channels(h, 2, tag="Q")
    # More busy asks than intake has slots (32): parked in them, they would hold every other ask back.
    sent = time.monotonic()
    await send_many(h, [busy] * 60)
    await send_many(h, [channel for channel in quiet for _ in range(3)])

    def quiet_done() -> bool:
        return all(len(h.fake.messages(channel)) == 3 for channel in quiet)

    await h.fake.wait_for(quiet_done, timeout=30, what="the quiet channels' asks")
    quiet_s = time.monotonic() - sent
    busy_then = len(h.fake.messages(busy))
    # The busy channel drains at Slack's pace (10 posts a second at this speed-up): 60 take about 6 s.
    assert busy_then < 60, f"the quiet asks waited for the whole busy channel ({quiet_s:.2f} s)"
    assert quiet_s < 1.5
    await h.fake.wait_for(lambda: len(h.fake.messages(busy)) == 60, timeout=30, what="the busy channel")
    unpaced = [r.getMessage() for r in caplog.records if "calling without pacing" in r.getMessage()]
    if REDIS_IS_FAKE and unpaced:
        # fakeredis serves the pacer from a thread of this process, behind the burst's own work: past
        # the pacer's 0.5 s Redis budget it calls unpaced (by design), and Slack's 429 is the backstop
        # (the run without Redis: 9 of 75 posts). With a real Redis, above, no call is ever limited.
        assert set(limited_calls(h)) <= {"chat.postMessage", f"chat.postMessage in {busy}"}, unpaced
    else:
        assert limited_calls(h) == {}, h.fake.limits.stats()
    # Clean up: end every ask so the invariant check finds nothing pending.
    for channel in [busy, *quiet]:
        for message in h.fake.messages(channel):
            await h.fake.click("U0ALICE", channel, message.ts, "slack_ask:choose:0")


async def _until(check: Callable[[], Awaitable[bool]], *, what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        await asyncio.sleep(0.02)


async def test_a_duplicate_or_re_sent_ask_takes_no_post_token(limited: Harness) -> None:
    # A channel allows one post a second: an agent's retry of an ask already posted, or a re-send of
    # one already ended, posts nothing, so it must not use up the channel's post budget either.
    h = limited
    env = h.envelope(DEPLOY)
    await h.send(env)
    [message] = await h.posted()
    bucket = Keys(h.prefix).rate("chat.postMessage", "C0DEPLOY")
    ask = Keys(h.prefix).for_ask(slot_tag(env["reply_to"]), env["ask_id"]).ask
    # Posted in Slack is not yet posted in the record (the delivery in flight is the next test's).
    await _until(lambda: _state_is(h, ask, b"posted"), what="the post recorded")

    async def unchanged_by(send: dict[str, object]) -> None:
        before = await h.redis.get(bucket)
        await h.send(send)
        await h.drained()
        assert await h.redis.get(bucket) in (before, None)  # no slot reserved (or the bucket idled out)

    await unchanged_by(env)  # a duplicate while the ask is posted
    await h.fake.click("U0BOB", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    first = await h.result(env["reply_to"])
    assert first["outcome"] == "answered"
    await h.past_the_end(first)
    await unchanged_by(env)  # a re-send after the end: the stored result again, nothing posted
    assert (await h.result(env["reply_to"]))["outcome"] == "answered"


async def _state_is(h: Harness, ask: str, state: bytes) -> bool:
    return await h.redis.hget(ask, "state") == state


async def test_a_duplicate_sent_while_the_first_post_is_in_flight_takes_no_post_token(
    redis: Redis, redis_url: str, prefix: str
) -> None:
    # An agent's retry that intake reads while the first delivery's post is on its way (in Slack,
    # not yet in the record) posts nothing either: accept finds the live lease busy.
    answered = asyncio.Event()
    release = asyncio.Event()

    @web.middleware
    async def hold_the_first_answer(request: web.Request, handler: Any) -> web.StreamResponse:
        response = await handler(request)
        if request.path.endswith("/chat.postMessage") and not answered.is_set():
            answered.set()
            await release.wait()  # Slack has the message; the bot waits for its answer
        return response

    # A lease far longer than the hold: the duplicate must find it live, not take the delivery over.
    async with limited_harness(
        redis, redis_url, prefix, middlewares=[hold_the_first_answer], delivery_window_ms=15_000
    ) as h:
        env = h.envelope(DEPLOY)
        await h.send(env)
        [message] = await h.posted()
        bucket = Keys(h.prefix).rate("chat.postMessage", "C0DEPLOY")
        ask = Keys(h.prefix).for_ask(slot_tag(env["reply_to"]), env["ask_id"]).ask
        before = await h.redis.get(bucket)
        assert before is not None  # the first post's slot
        duplicate = await h.send(env)

        async def found_busy() -> bool:
            # Intake read it (one delivery) and found the lease live: unclaim_busy gives the count back.
            rows = await h.redis.xpending_range(
                f"{h.prefix}:asks", GROUP, min=duplicate, max=duplicate, count=1
            )
            return bool(rows) and int(rows[0]["times_delivered"]) == 0

        try:
            await _until(found_busy, what="intake to find the duplicate's ask in flight")
            assert await _state_is(h, ask, b"accepted")  # still in flight: the answer is held
            assert await h.redis.get(bucket) in (before, None)  # no slot reserved (or the bucket idled out)
        finally:
            release.set()
        await _until(lambda: _state_is(h, ask, b"posted"), what="the post recorded")
        await h.drained()  # the duplicate, reclaimed once the lease is gone, finds the ask posted
        assert [m.ts for m in h.fake.messages("C0DEPLOY") if not m.thread_ts] == [message.ts]
        await h.fake.click("U0BOB", "C0DEPLOY", message.ts, "slack_ask:choose:0")
        assert (await h.result(env["reply_to"]))["outcome"] == "answered"
