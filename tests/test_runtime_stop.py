"""Stopping a replica ends everything that uses its Redis before the pool closes.

A listener Bolt left running past ``aclose`` would use Redis after the pool was disconnected, open a
fresh connection that nobody closes, and the garbage collector would report it (as an error) in some
later test.
"""

from __future__ import annotations

import asyncio

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
