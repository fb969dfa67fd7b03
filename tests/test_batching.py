"""Auto-pipelining (bot.storage.batching) on a real Redis: round trips that start while others are out
share the next pipeline, each caller gets its own replies (and its own errors), a caller gone before
its pipeline is sent has nothing run, and a slow pipeline holds nobody back."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from bot.storage.batching import Batches
from tests.conftest import REDIS_IS_FAKE


class _Counting(Redis):
    """A real client counting the pipelines it opens: one per round trip."""

    pipelines = 0

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Any:
        self.pipelines += 1
        return super().pipeline(transaction, shard_hint)


@pytest.fixture
async def client(redis_url: str) -> Any:
    c = _Counting.from_url(redis_url, socket_timeout=30)
    try:
        yield c
    finally:
        await c.aclose()


_NEEDS_WAIT = pytest.mark.skipif(REDIS_IS_FAKE, reason="fakeredis has no WAIT")


async def _slow(batches: Batches, prefix: str, wait_ms: int) -> asyncio.Task[list[Any]]:
    """A pipeline out for ``wait_ms`` (WAIT for a replica this Redis does not have), on its way."""
    task = asyncio.create_task(batches.run([lambda p: p.incr(f"{prefix}:slow")], wait=(1, wait_ms)))
    await asyncio.sleep(0)
    return task


async def test_callers_that_come_while_pipelines_are_out_share_one_and_get_their_own_replies(
    client: _Counting, redis: Redis, prefix: str
) -> None:
    batches = Batches(client, in_flight=1)

    async def incr(i: int) -> list[Any]:
        key = f"{prefix}:n{i}"
        return await batches.run([lambda p: p.incrby(key, i), lambda p: p.get(key)])

    replies = await asyncio.gather(*(incr(i) for i in range(50)))
    assert replies == [[i, str(i).encode()] for i in range(50)]
    # All started in one go: one pipeline took them all (its flyer started after they had queued).
    assert client.pipelines == 1
    for i in range(50):
        assert await redis.get(f"{prefix}:n{i}") == str(i).encode()


async def test_a_failing_command_is_its_caller_s_reply_and_nobody_else_s(
    client: _Counting, redis: Redis, prefix: str
) -> None:
    await redis.set(f"{prefix}:s", "text")
    batches = Batches(client, in_flight=1)
    good, bad = await asyncio.gather(
        batches.run([lambda p: p.incr(f"{prefix}:ok")]),
        batches.run([lambda p: p.incr(f"{prefix}:ok2"), lambda p: p.lpush(f"{prefix}:s", "x")]),
    )
    assert good == [1]
    assert bad[0] == 1 and isinstance(bad[1], ResponseError)  # WRONGTYPE, in its place, not raised


@_NEEDS_WAIT
async def test_a_caller_gone_before_its_pipeline_is_sent_has_nothing_run(
    client: _Counting, redis: Redis, prefix: str
) -> None:
    batches = Batches(client, in_flight=1)
    # A pipeline out for a while (WAIT for a replica this Redis does not have, 300 ms): the next
    # caller queues behind it for the first STALLED_S, and is cancelled meanwhile.
    slow = await _slow(batches, prefix, 300)
    gone = asyncio.create_task(batches.run([lambda p: p.incr(f"{prefix}:gone")]))
    await asyncio.sleep(0)
    gone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert (await slow)[-1] == 0  # WAIT's answer comes last: no replica
    assert await redis.get(f"{prefix}:gone") is None


@_NEEDS_WAIT
async def test_a_slow_pipeline_holds_back_nobody_for_long(
    client: _Counting, redis: Redis, prefix: str
) -> None:
    batches = Batches(client, in_flight=1)
    slow = await _slow(batches, prefix, 2_000)
    # Queued behind the slow one, then sent in a pipeline of their own once it is plainly stalled.
    quick = await asyncio.gather(
        *(batches.run([lambda p, i=i: p.incrby(f"{prefix}:q", i)]) for i in range(5))
    )
    assert not slow.done()  # they were answered while the slow pipeline was still out
    assert sorted(r[0] for r in quick)[-1] == sum(range(5))
    await slow


@_NEEDS_WAIT
async def test_a_pipeline_whose_callers_are_all_gone_is_cancelled_with_them(
    client: _Counting, redis: Redis, prefix: str
) -> None:
    # A replica killed or stopping cancels every caller: their pipeline must not run on by itself
    # (it would use Redis after the pool is closed, and open a connection nobody closes).
    batches = Batches(client, in_flight=1)
    caller = await _slow(batches, prefix, 5_000)
    await asyncio.sleep(0)  # its flyer has started the send
    [flyer] = batches._flyers
    caller.cancel()
    done, _ = await asyncio.wait([flyer], timeout=2.5)  # far less than the WAIT's 5 s
    assert done == {flyer} and flyer.cancelled()
    kept = asyncio.create_task(batches.run([lambda p: p.incr(f"{prefix}:k")], wait=(1, 300)))
    other = asyncio.create_task(batches.run([lambda p: p.incr(f"{prefix}:k")]))
    await asyncio.sleep(0)
    other.cancel()  # one caller of the pipeline gone, one left: the pipeline goes on
    assert (await kept)[0] in (1, 2)
