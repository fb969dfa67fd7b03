"""``slack-ask doctor`` as a process, against the fake Slack over HTTP and a real Redis."""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import pytest

from bot.slack.scopes import BOT_SCOPES
from tests.redis_procs import private_redis

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


async def doctor(fake: Any, redis_url: str, **settings: str) -> tuple[int, list[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "REDIS_URL"))}
    env.update(
        SLACK_BOT_TOKEN=fake.bot_token,
        SLACK_APP_TOKEN=fake.app_token,
        SLACK_API_URL=fake.api_url,
        SLACK_ASK_DEFAULT_CHANNEL="C0DEPLOY",
        REDIS_URL=redis_url,
    )
    env.update(settings)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.cli", "doctor", "--timeout", "5",
        env=env, cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert not err, err.decode()  # one line per check on stdout, nothing else (no traceback)
    assert proc.returncode is not None
    return proc.returncode, out.decode().splitlines()


def line_about(lines: list[str], what: str) -> str:
    [line] = [line for line in lines if line.split(" ", 1)[1].lstrip().startswith(what)]
    return line


def verdicts(lines: list[str]) -> dict[str, str]:
    return {line.split(" ", 1)[1].lstrip().split(":")[0]: line.split(" ", 1)[0] for line in lines}


@pytest.mark.redis  # a private redis-server of its own (skipped where there is none)
async def test_doctor_passes_every_check_on_a_ready_workspace_and_redis(fake_slack: Any) -> None:
    with private_redis("--maxmemory-policy", "noeviction") as port:
        code, lines = await doctor(fake_slack, f"redis://127.0.0.1:{port}/0")
    assert code == 0, lines
    assert [line.split(" ", 1)[0] for line in lines] == ["ok"] * 5, lines
    assert line_about(lines, "bot token").endswith("@slack-ask (U0ASKBOT) in Fake Workspace (T0FAKE)")
    assert f"all {len(BOT_SCOPES)}" in line_about(lines, "scopes")
    assert "#deploys (C0DEPLOY)" in line_about(lines, "default channel")
    assert "noeviction" in line_about(lines, "Redis")
    assert "hash-max-listpack-value is 64: 4096 keeps" in line_about(lines, "Redis")  # Redis's default
    assert [c.method for c in fake_slack.state.calls] == [
        "auth.test", "apps.connections.open", "conversations.info"
    ]  # fmt: skip


async def test_doctor_fails_a_bot_token_slack_refuses_and_says_where_to_get_one(
    fake_slack: Any, redis_url: str
) -> None:
    code, lines = await doctor(fake_slack, redis_url, SLACK_BOT_TOKEN="xoxb-not-the-right-one")
    assert code == 1
    line = line_about(lines, "bot token")
    assert line.startswith("FAIL") and "invalid_auth" in line and "OAuth & Permissions" in line
    assert "xoxb-not-the-right-one" not in "\n".join(lines)
    assert verdicts(lines)["app token (SLACK_APP_TOKEN)"] == "ok"
    assert line_about(lines, "default channel").startswith("warn")
    assert "not checked" in line_about(lines, "default channel")


async def test_doctor_fails_an_app_token_slack_refuses(fake_slack: Any, redis_url: str) -> None:
    code, lines = await doctor(fake_slack, redis_url, SLACK_APP_TOKEN="xapp-not-the-right-one")
    assert code == 1
    line = line_about(lines, "app token")
    assert line.startswith("FAIL") and "invalid_auth" in line and "connections:write" in line


async def test_doctor_names_the_scopes_the_token_lacks(fake_slack: Any, redis_url: str) -> None:
    fake_slack.scopes = [s for s in BOT_SCOPES if s not in {"im:write", "usergroups:read"}]
    code, lines = await doctor(fake_slack, redis_url)
    assert code == 1
    line = line_about(lines, "scopes")
    assert line.startswith("FAIL") and "im:write, usergroups:read" in line and "reinstall" in line
    assert "typed" not in line
    assert verdicts(lines)["bot token (SLACK_BOT_TOKEN)"] == "ok"


async def test_doctor_says_a_missing_history_scope_leaves_typed_answers_unheard(
    fake_slack: Any, redis_url: str
) -> None:
    fake_slack.scopes = [s for s in BOT_SCOPES if s not in {"im:history", "mpim:history"}]
    code, lines = await doctor(fake_slack, redis_url)
    line = line_about(lines, "scopes")
    assert code == 1 and "without im:history, mpim:history answers typed in threads and DMs" in line


async def test_doctor_fails_a_default_channel_the_bot_is_not_in(fake_slack: Any, redis_url: str) -> None:
    code, lines = await doctor(fake_slack, redis_url, SLACK_ASK_DEFAULT_CHANNEL="C0RANDOM")
    assert code == 1
    line = line_about(lines, "default channel")
    assert line.startswith("FAIL") and "#random (C0RANDOM)" in line and "/invite @slack-ask" in line


async def test_doctor_fails_a_default_channel_that_does_not_exist(fake_slack: Any, redis_url: str) -> None:
    code, lines = await doctor(fake_slack, redis_url, SLACK_ASK_DEFAULT_CHANNEL="C0NOPE")
    assert code == 1
    assert line_about(lines, "default channel").startswith("FAIL")
    assert "C0NOPE not found" in line_about(lines, "default channel")


@pytest.mark.redis  # a private redis-server of its own (skipped where there is none)
async def test_doctor_says_nothing_of_memory_on_a_redis_set_up_as_operations_md_says(fake_slack: Any) -> None:
    with private_redis("--hash-max-ziplist-value", "4096") as port:
        code, lines = await doctor(fake_slack, f"redis://127.0.0.1:{port}/0")
    assert code == 0, lines
    assert line_about(lines, "Redis").endswith("answers, maxmemory-policy noeviction")


@pytest.mark.redis  # a private redis-server of its own (skipped where there is none)
async def test_doctor_fails_a_redis_that_may_evict_keys(fake_slack: Any) -> None:
    with private_redis("--maxmemory-policy", "allkeys-lru") as port:
        code, lines = await doctor(fake_slack, f"redis://127.0.0.1:{port}/0")
    assert code == 1
    line = line_about(lines, "Redis")
    assert line.startswith("FAIL") and "allkeys-lru" in line and "noeviction" in line
    assert {v for k, v in verdicts(lines).items() if not k.startswith("Redis")} == {"ok"}


@pytest.mark.redis  # a private redis-server of its own (skipped where there is none)
async def test_doctor_warns_when_redis_hides_its_eviction_policy(fake_slack: Any) -> None:
    with private_redis("--rename-command", "CONFIG", "") as port:
        code, lines = await doctor(fake_slack, f"redis://127.0.0.1:{port}/0")
    assert code == 0, lines
    line = line_about(lines, "Redis")
    assert line.startswith("warn") and "unknown" in line


@pytest.mark.redis  # a private redis-server of its own (skipped where there is none)
async def test_doctor_fails_an_unreachable_redis_without_printing_its_password(fake_slack: Any) -> None:
    with private_redis() as port:
        pass  # started and stopped: nothing listens on that port now
    code, lines = await doctor(fake_slack, f"redis://:hunter2-secret@127.0.0.1:{port}/0")
    assert code == 1
    line = line_about(lines, "Redis")
    assert line.startswith("FAIL") and "REDIS_URL" in line
    assert "hunter2-secret" not in "\n".join(lines)


@pytest.mark.parametrize("scopes", [list(BOT_SCOPES)])
def test_manifest_asks_for_exactly_the_scopes_doctor_checks(scopes: list[str]) -> None:
    import yaml

    with open(os.path.join(ROOT, "manifest.yml")) as f:
        manifest = yaml.safe_load(f)
    assert sorted(manifest["oauth_config"]["scopes"]["bot"]) == sorted(scopes)
