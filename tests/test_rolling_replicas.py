"""A rolling update, live: a replica of the version before (its code taken from git, run in a process of
its own) and one of this version serve the same Redis and the same (fake) Slack at once. Asks are
taken by either, clicked through either, and the old one is killed halfway: every ask gets exactly one
result, posted once, and the invariant check finds nothing.

The version before is ``PREVIOUS``, the last commit that landed before this round's storage change
(the keys are the same; the hash of an ask with no escalation steps and no reminders no longer
holds their `step` and `reminders` counters, which that version reads as 0 where it reads them and
compares only for an ask that has such steps; a counter never written now reads as 0 in
advance.lua too)."""

from __future__ import annotations

import asyncio
import io
import os
import signal
import socket
import subprocess
import sys
import tarfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.storage.keys import slot_tag
from tests.harness import SIGNING_SECRET, Harness

ROOT = Path(__file__).resolve().parent.parent
PREVIOUS = "4a2f95c"
DEPLOY = {"id": "deploy", "question": "Deploy?", "options": ["Yes", "No"]}
ASKS = 24


def _previous_tree(into: Path) -> Path | None:
    """The previous version's ``bot`` and ``contract`` packages, from git (None when this checkout has
    no history to take them from)."""
    done = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", PREVIOUS, "bot", "contract"],
        capture_output=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        return None
    with tarfile.open(fileobj=io.BytesIO(done.stdout)) as tar:
        tar.extractall(into, filter="data")
    return into


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
async def old_replica(
    harness: Harness, tmp_path: Path
) -> AsyncIterator[tuple[asyncio.subprocess.Process, int]]:
    tree = _previous_tree(tmp_path / "previous")
    if tree is None:
        pytest.fail(
            f"commit {PREVIOUS} is not in this checkout (a shallow clone?): fetch it to run this test"
        )
    port = _free_port()
    env = {
        **os.environ,
        "SLACK_BOT_TOKEN": harness.fake.bot_token,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "SLACK_API_URL": harness.fake.api_url,
        "REDIS_URL": harness.redis_url,
        "SLACK_ASK_PREFIX": harness.prefix,
        "SLACK_ASK_PACE_SCALE": "0",
        "SLACK_ASK_RECLAIM_IDLE_MS": "400",
        "SLACK_ASK_SWEEP_INTERVAL_MS": "50",
    }
    env.pop("PYTHONPATH", None)
    # `-c` puts the working directory first on sys.path: `bot` is the previous version's there.
    serve = f"['serve', '--http', '--host', '127.0.0.1', '--port', '{port}']"
    code = (
        "import sys, bot; print('bot from', bot.__file__, file=sys.stderr, flush=True); "
        f"from bot.cli import main; sys.exit(main({serve}))"
    )
    log = tmp_path / "previous.log"
    with log.open("wb") as out:  # a file, not a pipe nobody reads: a full pipe would stop its logging
        proc = await asyncio.create_subprocess_exec(sys.executable, "-c", code, cwd=tree, env=env, stderr=out)
    try:
        async with asyncio.timeout(30):
            while True:
                try:
                    _, writer = await asyncio.open_connection("127.0.0.1", port)
                except OSError:
                    assert proc.returncode is None, "the old replica exited"
                    await asyncio.sleep(0.1)
                    continue
                writer.close()
                await writer.wait_closed()
                break
        first = log.read_text(encoding="utf-8").splitlines()[0]
        assert str(tree) in first, first  # the old code runs, not this checkout's
        yield proc, port
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()


async def test_an_old_and_a_new_replica_on_one_redis_lose_nothing_and_double_nothing(
    harness: Harness, old_replica: tuple[asyncio.subprocess.Process, int]
) -> None:
    proc, port = old_replica
    new_url = harness.fake.events_url
    old_url = f"http://127.0.0.1:{port}/slack/events"
    envs = [harness.envelope(DEPLOY) for _ in range(ASKS)]
    for n, env in enumerate(envs, 1):
        # One at a time: each goes to the replica whose read has waited longest, the two in turn.
        await harness.send(env)
        messages = await harness.posted(count=n, timeout=30)
    ts_of = {env["ask_id"]: m.ts for m in messages for env in envs if env["ask_id"] in str(m.blocks)}
    assert len(ts_of) == ASKS
    takers = {
        entry.by
        for env in envs
        for entry in await harness.replicas[0].store.read_audit(slot_tag(env["reply_to"]), env["ask_id"])
        if entry.event == "accepted"
    }
    assert len(takers) == 2, takers  # both replicas took asks from the stream
    half = ASKS // 2

    async def answered(batch: list[dict[str, object]], urls: list[str]) -> None:
        # Slack sends each click to one replica: here the old and the new in turn.
        for i, env in enumerate(batch):
            harness.fake.events_url = urls[i % len(urls)]
            response = await harness.fake.click(
                "U0ALICE", "C0DEPLOY", ts_of[str(env["ask_id"])], "slack_ask:choose:0"
            )
            assert response.status == 200, response
        for env in batch:
            result = await harness.result(str(env["reply_to"]), timeout=30)
            assert (result["ask_id"], result["outcome"]) == (env["ask_id"], "answered")

    await answered(envs[:half], [old_url, new_url])
    proc.send_signal(signal.SIGKILL)  # the update goes on: the old replica is gone
    await asyncio.wait_for(proc.wait(), 10)
    await answered(envs[half:], [new_url])
    harness.fake.events_url = new_url
    for env in envs:
        assert await harness.no_more_results(env["reply_to"], wait=0.05)  # exactly one result each
    assert len([m for m in harness.fake.messages("C0DEPLOY") if not m.thread_ts]) == ASKS  # none posted twice
    await harness.verify(timeout=30)
