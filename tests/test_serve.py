"""``slack-ask serve`` as a real process: settings from the environment, HTTP mode, clean shutdown."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from typing import Any

import aiohttp
import pytest
from redis.asyncio import Redis

from bot.gc_tuning import YOUNG_THRESHOLD
from bot.storage.embedded import free_port
from tests.harness import SIGNING_SECRET, button_values


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "REDIS_URL"))}
    env.update(extra)
    return env


def _serve(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot.cli", "serve", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def _until_healthy(
    session: aiohttp.ClientSession, proc: asyncio.subprocess.Process, port: int, timeout: float = 45
) -> None:
    """Poll ``/healthz`` until the served process answers 200 (it starts in seconds, or in tens of
    seconds on a loaded machine: the bound is the test's, not a guess at the start-up time)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        assert proc.returncode is None, f"serve exited with {proc.returncode} before /healthz answered"
        try:
            async with session.get(f"http://127.0.0.1:{port}/healthz") as response:
                if response.status == 200:
                    return
        except aiohttp.ClientError:
            pass
        assert loop.time() < deadline, f"serve did not answer /healthz within {timeout} s"
        await asyncio.sleep(0.05)


def test_serve_without_a_bot_token_says_which_setting_in_one_line() -> None:
    done = _serve(_env(SLACK_SIGNING_SECRET="x"), "--http")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "slack-ask: setting SLACK_BOT_TOKEN is required to serve (a bot token, xoxb-...)"
    ]


def test_serve_in_socket_mode_without_an_app_token_names_the_setting() -> None:
    done = _serve(_env(SLACK_BOT_TOKEN="xoxb-test"))
    assert done.returncode == 2
    assert "SLACK_APP_TOKEN" in done.stderr and "Traceback" not in done.stderr


def test_serve_with_a_malformed_setting_names_it_without_a_traceback() -> None:
    done = _serve(
        _env(SLACK_BOT_TOKEN="xoxb-test", SLACK_SIGNING_SECRET="s", SLACK_API_URL="ftp://x"), "--http"
    )
    assert done.returncode == 2
    assert done.stderr.startswith("slack-ask: setting SLACK_API_URL:")
    assert "Traceback" not in done.stderr


def test_serve_in_http_mode_never_prints_its_secrets() -> None:
    done = _serve(
        _env(
            SLACK_BOT_TOKEN="xoxb-very-secret",
            SLACK_SIGNING_SECRET="sig-very-secret",
            REDIS_URL="redis://127.0.0.1:1/0",
        ),
        "--http",
        "--port",
        str(free_port()),
    )
    assert done.returncode == 8
    assert "very-secret" not in done.stderr + done.stdout


# The start-up wait (45 s at most) plus the ask's own bounds: more than the suite's default 60 s.
@pytest.mark.timeout(120)
async def test_serve_answers_an_ask_end_to_end_and_stops_cleanly(
    fake_slack: Any, redis: Redis, redis_url: str, prefix: str
) -> None:
    port = free_port()
    fake_slack.events_url = f"http://127.0.0.1:{port}/slack/events"
    env = _env(
        SLACK_BOT_TOKEN=fake_slack.bot_token,
        SLACK_SIGNING_SECRET=SIGNING_SECRET,
        SLACK_API_URL=fake_slack.api_url.rstrip("/"),  # works without its trailing slash too
        REDIS_URL=redis_url,
        SLACK_ASK_PREFIX=prefix,
        SLACK_ASK_DEFAULT_CHANNEL="C0DEPLOY",
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.cli",
        "serve",
        "--http",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with aiohttp.ClientSession() as session:
            await _until_healthy(session, proc, port)
            async with session.get(f"http://127.0.0.1:{port}/metrics") as response:
                assert "slack_ask_results_total" in await response.text()
        reply_to = f"{prefix}:reply:served"
        envelope = {
            "v": 1,
            "ask_id": "served-1",
            "reply_to": reply_to,
            "request": {"id": "go", "question": "Go?", "options": ["Yes", "No"]},
        }
        await redis.xadd(f"{prefix}:asks", {"ask": json.dumps(envelope)})
        [message] = await fake_slack.wait_for(lambda: fake_slack.messages("C0DEPLOY"), timeout=15)
        assert "slack_ask:choose:1" in button_values(message)
        await fake_slack.click("U0BOB", "C0DEPLOY", message.ts, "slack_ask:choose:1")
        got = await redis.blpop([reply_to], timeout=15)
        assert got is not None
        assert json.loads(got[1])["text"] == "User answers:\ngo: No"
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(proc.communicate(), timeout=20)
    assert proc.returncode == 0, stderr.decode()[-2000:]
    assert fake_slack.bot_token not in stderr.decode()
    # Start-up's objects are frozen out of every later collection (bot.gc_tuning), said in one line.
    [tuned] = re.findall(
        r"garbage collector: (\d+) start-up objects frozen, young generation every (\d+) ", stderr.decode()
    )
    assert int(tuned[0]) > 20_000 and int(tuned[1]) == YOUNG_THRESHOLD, tuned
