"""Stopping a replica ends everything that uses its Redis before the pool closes.

A listener Bolt left running past ``aclose`` would use Redis after the pool was disconnected, open a
fresh connection that nobody closes, and the garbage collector would report it (as an error) in some
later test.
"""

from __future__ import annotations

import asyncio

from bot.storage.keys import GROUP
from tests.harness import Harness

DEPLOY = {"id": "deploy", "question": "Deploy?", "options": ["Yes", "No"]}


def _bolt_listeners_running() -> list[asyncio.Task[object]]:
    return [
        task
        for task in asyncio.all_tasks()
        if not task.done() and "run_ack_function_asynchronously" in repr(task.get_coro())
    ]


async def test_a_click_in_flight_when_the_replica_stops_is_finished_before_redis_closes(
    harness: Harness,
) -> None:
    env = harness.envelope(DEPLOY)
    await harness.send(env)
    [message] = await harness.posted()
    # The click's listener is still waiting on Slack when the replica is told to stop.
    harness.fake.method_latency["chat.update"] = 1.5
    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    [replica] = harness.replicas
    await replica.aclose()
    harness.replicas.clear()
    assert _bolt_listeners_running() == []
    harness.fake.method_latency.clear()
    # The click was handled in full, not cut off: the ask is answered.
    assert (await harness.result(env["reply_to"]))["outcome"] == "answered"


async def test_a_kill_cancels_the_reclaim_loop_itself_and_nothing_starts_after_it(harness: Harness) -> None:
    # On Python 3.11 a cancel can be lost (bot.runtime._end_tasks). When the reclaim loop lost one, the
    # intake's run, cancelled again while it waited for that loop in its `finally`, ended and left
    # the loop running: the "dead" replica went on taking over its own asks (the flaky lease test). So
    # the kill waits on the reclaimer itself, and an aborted intake starts no entry.
    [replica] = harness.replicas
    reclaimer = replica.intake.reclaimer
    assert reclaimer is not None and not reclaimer.done()
    cancelled = replica.intake.abort()
    assert reclaimer in cancelled
    env = harness.envelope(DEPLOY)
    await harness.send(env)
    prefix = replica.store.keys.prefix

    async def read_by_the_aborted_intake() -> bool:
        pending = await harness.redis.xpending(f"{prefix}:asks", GROUP)
        return bool(pending["pending"])

    async with asyncio.timeout(10):
        while not await read_by_the_aborted_intake():  # noqa: ASYNC110 - polls Redis (read until the kill)
            await asyncio.sleep(0.02)
    assert not replica.intake._tasks  # read, and not started: it stays pending for another replica
    await replica.kill()
    assert reclaimer.done()
    assert harness.fake.messages("C0DEPLOY") == []  # the killed replica posted nothing
