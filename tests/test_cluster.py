"""The bot on Redis Cluster (a single-node cluster owning every slot): the ask's keys share its
reply_to's slot, so every script runs where a multi-node cluster would run it."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import redis
from redis.asyncio import Redis

from bot.storage.embedded import redis_answers
from tests.fencing_helpers import stale_copy_of_an_ended_ask_is_deleted
from tests.harness import Harness
from tests.redis_procs import cluster_node_port

# One worker runs the module (pytest-xdist): its tests share the cluster node, a module fixture.
pytestmark = [pytest.mark.redis, pytest.mark.xdist_group("cluster")]


@pytest.fixture(scope="module")
def cluster_port() -> Iterator[int]:
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("needs a redis-server binary to start a cluster node")
    port = cluster_node_port()
    workdir = tempfile.mkdtemp(prefix="slack-ask-cluster-")
    proc = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            f"{workdir}/nodes.conf",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            workdir,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 15
        while not redis_answers(port=port, timeout=0.2):
            assert time.monotonic() < deadline, "the cluster node did not start"
            time.sleep(0.05)
        with redis.Redis(port=port) as admin:
            admin.execute_command("CLUSTER", "ADDSLOTSRANGE", "0", "16383")
            while b"cluster_state:ok" not in admin.execute_command("CLUSTER", "INFO"):
                assert time.monotonic() < deadline, "the cluster never reached state ok"
                time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
async def cluster_harness(fake_slack: Any, cluster_port: int, prefix: str) -> AsyncIterator[Harness]:
    node = Redis(port=cluster_port, socket_timeout=60)
    h = Harness(
        fake=fake_slack, redis=node, redis_url=f"redis+cluster://127.0.0.1:{cluster_port}", prefix=prefix
    )
    await h.start_replica()
    try:
        yield h
        await h.verify()  # the invariant check and a log without crashes, as for every harness
    finally:
        await h.stop()
        await node.aclose()


async def test_an_ask_is_answered_with_the_bot_on_redis_cluster(cluster_harness: Harness) -> None:
    h = cluster_harness
    env = h.envelope(
        {"id": "go", "question": "Go?", "options": ["Yes", "No"]}, reply_to=f"{h.prefix}:reply:{{agent-7}}:r1"
    )
    await h.send(env)
    [message] = await h.posted()
    await h.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    result = await h.result(env["reply_to"])
    assert result["text"] == "User answers:\ngo: Yes"
    await h.ended("C0DEPLOY", message.ts)


async def test_timeouts_and_cancels_work_on_redis_cluster(cluster_harness: Harness) -> None:
    h = cluster_harness
    timed = h.envelope({"id": "a", "question": "A?", "options": ["x"]}, timeout_ms=500)
    cancelled = h.envelope({"id": "b", "question": "B?", "options": ["x"]})
    await h.send(timed)
    await h.send(cancelled)
    await h.posted(count=2)
    await h.send({"v": 1, "ask_id": cancelled["ask_id"], "reply_to": cancelled["reply_to"]}, "cancel")
    assert (await h.result(timed["reply_to"]))["outcome"] == "timeout"
    assert (await h.result(cancelled["reply_to"]))["outcome"] == "cancelled"


async def test_a_workflow_step_is_completed_with_the_bot_on_redis_cluster(cluster_harness: Harness) -> None:
    h = cluster_harness
    execution = await h.fake.run_step({"question": "Go?", "options": ["Yes", "No"], "channel": "C0DEPLOY"})
    [message] = await h.posted()
    await h.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:1")
    await h.fake.wait_for(lambda: execution.outputs, what="the step's completion")
    assert execution.outputs is not None and execution.outputs["choice"] == "No"


async def test_a_stale_post_s_copy_whose_delete_fails_after_the_ask_ended_is_deleted_on_redis_cluster(
    cluster_harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    # On Cluster the due zset is in another slot: the withdraw sets the clean-up timer in a script
    # of its own, before the mark.
    await stale_copy_of_an_ended_ask_is_deleted(cluster_harness, caplog)
