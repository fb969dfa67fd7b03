"""``slack-ask serve`` checks its tokens with Slack before it reads any ask (protocol section 11):
a token Slack refuses ends the process with exit code 2 and one line naming the setting and Slack's
error, and the asks already waiting stay in the stream for a replica that can deliver them."""

from __future__ import annotations

import asyncio
import json
import os
import sys

from redis.asyncio import Redis

from bot.playground import FakeSlack
from bot.storage.embedded import free_port
from tests.harness import SIGNING_SECRET


def _env(fake: FakeSlack, redis_url: str, prefix: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "REDIS_URL"))}
    env.update(
        SLACK_BOT_TOKEN=fake.bot_token,
        SLACK_APP_TOKEN=fake.app_token,
        SLACK_SIGNING_SECRET=SIGNING_SECRET,
        SLACK_API_URL=fake.api_url,
        REDIS_URL=redis_url,
        SLACK_ASK_PREFIX=prefix,
        SLACK_ASK_DEFAULT_CHANNEL="C0DEPLOY",
    )
    env.update(extra)
    return env


async def _serve(env: dict[str, str], *args: str) -> tuple[int, list[str]]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.cli", "serve", "--host", "127.0.0.1", *args,
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        _, stderr = await asyncio.wait_for(proc.communicate(), timeout=30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, stderr.decode().splitlines()


async def _waiting_ask(redis: Redis, prefix: str) -> None:
    envelope = {
        "v": 1,
        "ask_id": "waits-1",
        "reply_to": f"{prefix}:reply:waits-1",
        "request": {"id": "go", "question": "Go?", "options": ["Yes", "No"]},
    }
    await redis.xadd(f"{prefix}:asks", {"ask": json.dumps(envelope)})


async def _unread(redis: Redis, prefix: str) -> None:
    """The ask is still waiting, read by nobody: no entry pending in the group, nothing posted."""
    groups = await redis.xinfo_groups(f"{prefix}:asks")
    assert [(g["pending"], g["entries-read"]) for g in groups] in ([], [(0, None)], [(0, 0)])
    assert await redis.xlen(f"{prefix}:asks") == 1
    assert await redis.llen(f"{prefix}:reply:waits-1") == 0


async def test_a_bot_token_slack_refuses_ends_serve_with_exit_2_before_any_ask_is_read(
    fake_slack: FakeSlack, redis: Redis, redis_url: str, prefix: str
) -> None:
    await _waiting_ask(redis, prefix)
    env = _env(fake_slack, redis_url, prefix, SLACK_BOT_TOKEN="xoxb-revoked-value")
    code, lines = await _serve(env, "--http", "--port", str(free_port()))
    assert code == 2
    assert lines[-1] == "slack-ask: setting SLACK_BOT_TOKEN: Slack refused the token (invalid_auth)"
    assert not any("Traceback" in line or "xoxb-revoked-value" in line for line in lines)
    assert [c.method for c in fake_slack.state.calls] == ["auth.test"]
    await _unread(redis, prefix)


async def test_an_app_token_slack_refuses_ends_socket_mode_before_any_ask_is_read(
    fake_slack: FakeSlack, redis: Redis, redis_url: str, prefix: str
) -> None:
    await _waiting_ask(redis, prefix)
    env = _env(fake_slack, redis_url, prefix, SLACK_APP_TOKEN="xapp-revoked-value")
    code, lines = await _serve(env)
    assert code == 2
    assert lines[-1] == "slack-ask: setting SLACK_APP_TOKEN: Slack refused the token (invalid_auth)"
    assert [c.method for c in fake_slack.state.calls] == ["auth.test", "apps.connections.open"]
    assert fake_slack.socket_connections == 0
    await _unread(redis, prefix)
