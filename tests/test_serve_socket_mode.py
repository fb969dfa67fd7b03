"""``slack-ask serve`` in Socket Mode with ``--health-port``, and its logs (text and JSON).

The fake Slack answers ``apps.connections.open`` with its own WebSocket, which says hello and stays
open, so the real Socket Mode handler connects; asks still come in through Redis. Readiness is read
from the process's own log lines, never guessed with a sleep.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from redis.asyncio import Redis

from bot.config import Settings
from bot.logs import bind_ask_id, configure_logging
from bot.playground import FakeSlack
from bot.runtime import BotRuntime
from bot.storage.embedded import free_port
from tests.harness import SIGNING_SECRET
from tests.redis_procs import private_redis

BOT_TOKEN = "xoxb-topsecret-bot-value"
APP_TOKEN = "xapp-topsecret-app-value"
SIGNING = "signing-topsecret-value"
REDIS_PASSWORD = "redis-topsecret-value"
SECRETS = [BOT_TOKEN, APP_TOKEN, SIGNING, REDIS_PASSWORD, "topsecret"]


@dataclass
class Served:
    proc: asyncio.subprocess.Process
    health_port: int
    lines: list[str] = field(default_factory=list)
    stdout: list[str] = field(default_factory=list)
    _waiters: list[tuple[Callable[[str], bool], asyncio.Future[str]]] = field(default_factory=list)

    def feed(self, line: str) -> None:
        self.lines.append(line)
        for predicate, future in list(self._waiters):
            if not future.done() and predicate(line):
                future.set_result(line)

    async def line(self, predicate: Callable[[str], bool], timeout: float = 20) -> str:
        for seen in self.lines:
            if predicate(seen):
                return seen
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._waiters.append((predicate, future))
        return await asyncio.wait_for(future, timeout)


@contextlib.asynccontextmanager
async def serve(env: dict[str, str], *args: str) -> AsyncIterator[Served]:
    health_port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.cli", "serve", "--host", "127.0.0.1",
        "--health-port", str(health_port), *args,
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        limit=16 * 1024 * 1024,  # DEBUG lines carry whole Block Kit payloads
    )  # fmt: skip
    served = Served(proc, health_port)

    async def pump(stream: asyncio.StreamReader, sink: Callable[[str], None]) -> None:
        async for raw in stream:
            sink(raw.decode().rstrip("\n"))

    assert proc.stderr is not None and proc.stdout is not None
    pumps = [
        asyncio.create_task(pump(proc.stderr, served.feed)),
        asyncio.create_task(pump(proc.stdout, served.stdout.append)),
    ]
    try:
        yield served
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), timeout=20)
        await asyncio.gather(*pumps)


def environment(fake: FakeSlack, redis_url: str, prefix: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "REDIS_URL"))}
    env.update(
        SLACK_BOT_TOKEN=fake.bot_token,
        SLACK_APP_TOKEN=fake.app_token,
        SLACK_API_URL=fake.api_url,
        REDIS_URL=redis_url,
        SLACK_ASK_PREFIX=prefix,
        SLACK_ASK_DEFAULT_CHANNEL="C0DEPLOY",
    )
    env.update(extra)
    return env


async def get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.text()


def names_the_ask(line: str, ask_id: str, log_format: str) -> bool:
    """The line carries the ask id as the formatter adds it (not merely inside a message)."""
    if log_format == "json":
        return bool(json.loads(line).get("ask_id") == ask_id)
    return line.endswith(f"[ask {ask_id}]")


def ask_envelope(prefix: str) -> tuple[str, dict[str, Any]]:
    ask_id = f"sock-{uuid.uuid4().hex[:8]}"
    return ask_id, {
        "v": 1,
        "ask_id": ask_id,
        "reply_to": f"{prefix}:reply:{ask_id}",
        "request": {"id": "go", "question": "Go?", "options": ["Yes", "No"]},
    }


async def test_serve_in_socket_mode_answers_healthz_and_metrics_on_the_health_port(
    fake_slack: FakeSlack, redis: Redis, redis_url: str, prefix: str
) -> None:
    async with serve(environment(fake_slack, redis_url, prefix)) as served:
        await served.line(lambda line: "connected to Slack in Socket Mode" in line)
        assert fake_slack.socket_connections == 1
        assert "apps.connections.open" in {c.method for c in fake_slack.state.calls}
        status, body = await get(f"http://127.0.0.1:{served.health_port}/healthz")
        assert status == 200, body
        health = json.loads(body)
        assert health["ok"] is True and health["redis"] == "up"
        assert {"intake", "sweeper"} <= set(health["loops"])
        assert set(health["loops"].values()) == {"running"}
        status, body = await get(f"http://127.0.0.1:{served.health_port}/metrics")
        assert status == 200 and "slack_ask_intake_total" in body
        status, _ = await get(f"http://127.0.0.1:{served.health_port}/slack/events")
        assert status == 404, "the health port serves no Slack requests"
        _, envelope = ask_envelope(prefix)
        await redis.xadd(f"{prefix}:asks", {"ask": json.dumps(envelope)})
        await fake_slack.wait_for(lambda: fake_slack.messages("C0DEPLOY"), timeout=15)
    assert served.proc.returncode == 0, "\n".join(served.lines[-20:])


async def test_serve_in_socket_mode_with_an_app_token_slack_refuses_exits_2_naming_the_setting(
    fake_slack: FakeSlack, redis_url: str, prefix: str
) -> None:
    env = environment(fake_slack, redis_url, prefix, SLACK_APP_TOKEN="xapp-refused-value")
    async with serve(env) as served:
        await asyncio.wait_for(served.proc.wait(), timeout=20)
    assert served.proc.returncode == 2
    assert served.lines[-1].startswith("slack-ask: setting SLACK_APP_TOKEN: Slack refused")
    assert served.lines[-1].endswith("(invalid_auth)")
    assert "Traceback" not in "\n".join(served.lines)
    assert "xapp-refused-value" not in "\n".join(served.lines)


@pytest.mark.redis  # a private redis-server of its own (skipped where there is none)
@pytest.mark.parametrize("log_format", ["text", "json"])
async def test_serve_logs_name_the_ask_and_never_print_a_secret(log_format: str) -> None:
    fake = FakeSlack.with_demo_workspace(signing_secret=SIGNING, bot_token=BOT_TOKEN, app_token=APP_TOKEN)
    await fake.start()
    prefix = f"test-{uuid.uuid4().hex[:12]}"
    try:
        with private_redis("--requirepass", REDIS_PASSWORD) as port:
            redis_url = f"redis://:{REDIS_PASSWORD}@127.0.0.1:{port}/0"
            env = environment(fake, redis_url, prefix, SLACK_SIGNING_SECRET=SIGNING)
            if log_format == "json":
                env["SLACK_ASK_LOG_FORMAT"] = "json"  # the setting; --log-format would do the same
            async with serve(env, "--log-level", "DEBUG") as served:
                await served.line(lambda line: "connected to Slack in Socket Mode" in line)
                ask_id, envelope = ask_envelope(prefix)
                async with Redis.from_url(redis_url) as client:
                    await client.xadd(f"{prefix}:asks", {"ask": json.dumps(envelope)})
                await fake.wait_for(lambda: fake.messages("C0DEPLOY"), timeout=15)
                about_the_ask = await served.line(lambda line: names_the_ask(line, ask_id, log_format))
    finally:
        await fake.stop()
    assert served.proc.returncode == 0, "\n".join(served.lines[-20:])
    output = "\n".join(served.lines + served.stdout)
    assert len(served.lines) > 10, output  # DEBUG: Bolt, slack_sdk and aiohttp lines too
    for secret in SECRETS:
        assert secret not in output, secret
    if log_format == "json":
        records = [json.loads(line) for line in served.lines]  # every line is one JSON object
        assert all({"ts", "level", "logger", "message"} <= set(r) for r in records)
        assert ask_id not in json.loads(about_the_ask)["message"]
    else:
        assert about_the_ask.endswith(f"[ask {ask_id}]")


def test_log_lines_mask_secrets_redis_passwords_and_token_shapes_whoever_logs_them() -> None:
    stream = io.StringIO()
    root = logging.getLogger()
    kept = (root.level, list(root.handlers))
    handler = configure_logging("INFO", "json", secrets=[SIGNING], stream=stream)
    try:
        logging.getLogger("some.library").warning(
            "token xoxb-FAKE-not-a-token app xapp-FAKE-not-a-token url rediss://user:%s@db:6380/0 sig %s",
            REDIS_PASSWORD,
            SIGNING,
        )
        bind_ask_id("ask-77")
        logging.getLogger("bot.engine").info("posted")
        bind_ask_id(None)
    finally:
        root.removeHandler(handler)
        root.setLevel(kept[0])
        for old in kept[1]:
            root.addHandler(old)
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first["message"] == "token xoxb-*** app xapp-*** url rediss://user:***@db:6380/0 sig ***"
    assert "ask_id" not in first
    assert (second["message"], second["ask_id"]) == ("posted", "ask-77")


@pytest.mark.redis  # a private redis-server of its own (skipped where there is none)
async def test_health_app_says_503_when_a_loop_stops_or_redis_goes_away(
    fake_slack: FakeSlack, prefix: str
) -> None:
    with private_redis() as port:
        settings = Settings(
            slack_bot_token=fake_slack.bot_token,
            slack_signing_secret=SIGNING_SECRET,
            slack_api_url=fake_slack.api_url,
            redis_url=f"redis://127.0.0.1:{port}/0",
            prefix=prefix,
        )
        runtime = BotRuntime(settings, intake_block_ms=200)
        await runtime.start()
        try:
            health_port = await runtime.serve_health("127.0.0.1", 0)
            url = f"http://127.0.0.1:{health_port}/healthz"
            assert (await get(url))[0] == 200
            sweeper = next(task for task in runtime._tasks if task.get_name() == "sweeper")
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper
            status, body = await get(url)
            assert status == 503
            loops = json.loads(body)["loops"]
            assert (loops["intake"], loops["sweeper"]) == ("running", "stopped")
        except BaseException:
            await runtime.aclose()
            raise
    # The private Redis is gone now.
    try:
        status, body = await get(url)
        assert status == 503
        assert json.loads(body)["redis"] == "down"
    finally:
        await runtime.aclose()
