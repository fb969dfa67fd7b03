"""Cancelling the bot's tasks (a replica killed or stopped, a helper task ended): a cancel always
ends the task, and the cancel of whoever waits for it is never swallowed."""

from __future__ import annotations

import asyncio
import random

from redis.asyncio import Redis

from bot.runtime import _end_tasks
from bot.storage.connection import connect
from bot.storage.store import Store
from bot.tasks import cancel_and_wait


async def test_loops_making_redis_calls_always_end_when_cancelled(redis_url: str, prefix: str) -> None:
    # Python 3.11's asyncio.wait_for loses a cancel that lands as its inner step finishes, and
    # redis-py sends each command through it under a socket timeout (the bot always sets one): about
    # one cancel in eight, landing at a random time, left its loop running. A replica's kill must end
    # every loop all the same (it was the lease and Home tests' kill that never returned).
    client: Redis = connect(redis_url)
    store = Store(client, prefix, retention_ms=60_000)
    await store.load_scripts()

    async def loop() -> None:
        while True:
            await store.claim_due(limit=10, lease_ms=1_000)
            await asyncio.sleep(0.001)

    rng = random.Random(7)
    try:
        for _ in range(60):
            tasks = [asyncio.create_task(loop(), name=f"loop-{i}") for i in range(4)]
            await asyncio.sleep(rng.uniform(0, 0.01))
            await _end_tasks(tasks, grace_s=0, what="test", strict=True)  # raises if one runs on
            assert all(task.done() for task in tasks)
    finally:
        await client.aclose()


async def test_cancel_and_wait_never_swallows_the_caller_s_own_cancel() -> None:
    cleaning = asyncio.Event()

    async def helper() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cleaning.set()
            await asyncio.sleep(0.2)  # a slow clean-up: the caller is cancelled meanwhile
            raise

    async def caller() -> str:
        task = asyncio.create_task(helper())
        await asyncio.sleep(0)
        await cancel_and_wait(task)
        return "went on"  # what `task.cancel(); with suppress(CancelledError): await task` did

    outer = asyncio.create_task(caller())
    await asyncio.wait_for(cleaning.wait(), timeout=5)
    outer.cancel()
    done, _ = await asyncio.wait([outer], timeout=5)
    assert done and outer.cancelled()


async def test_cancel_and_wait_ends_a_helper_whose_first_cancel_was_lost() -> None:
    # The state Python 3.11's wait_for leaves a loop in when it loses a cancel (gh-86296): the
    # CancelledError never reaches the loop, which runs on, "cancelling". A timer claim's renewal in
    # that state outlived its replica's stop and made a Redis connection after the client closed.
    laps = 0

    async def renewal() -> None:
        nonlocal laps
        while True:
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                if laps == 0:
                    laps += 1
                    continue  # lost, as inside wait_for
                raise

    task = asyncio.create_task(renewal())
    await asyncio.sleep(0.02)
    async with asyncio.timeout(5):
        await cancel_and_wait(task)
    assert task.cancelled() and laps == 1
