"""The agent side against a running bot, real Redis and the fake Slack: the Python client, the
``slack-ask ask`` command and the MCP server, each answered by a person clicking in (fake) Slack."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import TextContent

from bot.client import AskClient, AskRequestError
from tests.decline_helpers import decline
from tests.harness import Harness, button_values

ROOT = Path(__file__).resolve().parents[1]


async def _answer_next(
    harness: Harness, user: str, action: str, *, channel: str = "C0DEPLOY", count: int = 1
) -> None:
    messages = await harness.posted(channel, count=count, timeout=15)
    await harness.fake.click(user, channel, messages[-1].ts, action)


async def test_the_client_asks_and_gets_the_answer(harness: Harness) -> None:
    async with AskClient(harness.redis_url, prefix=harness.prefix) as client:
        task = asyncio.create_task(
            client.ask(
                {"id": "db", "question": "Which database?", "options": ["Postgres", "MySQL"]},
                route={"channel": "C0DEPLOY"},
                timeout_ms=60_000,
            )
        )
        await _answer_next(harness, "U0ALICE", "slack_ask:choose:0")
        result = await asyncio.wait_for(task, timeout=15)
        assert not isinstance(result, str)
        assert result.outcome == "answered"
        assert result.text == "User answers:\ndb: Postgres"
        stored = await client.result(result.ask_id or "")
        assert stored is not None and stored.text == result.text


async def test_the_client_cancel_withdraws_the_ask_in_slack(harness: Harness) -> None:
    async with AskClient(harness.redis_url, prefix=harness.prefix) as client:
        ask_id = await client.submit(
            {"question": "Rotate keys?", "options": ["Yes", "No"]}, route={"channel": "C0DEPLOY"}
        )
        [message] = await harness.posted()
        await client.cancel(ask_id, reason="done by hand")
        result = await client.wait(ask_id, timeout=15)
        assert result is not None and result.outcome == "cancelled"
        await harness.ended("C0DEPLOY", message.ts)


async def test_the_client_refuses_a_bad_request_before_sending(harness: Harness) -> None:
    async with AskClient(harness.redis_url, prefix=harness.prefix) as client:
        with pytest.raises(AskRequestError) as caught:
            await client.submit({"question": "x", "options": []}, route={"channel": "C0DEPLOY"})
        assert caught.value.message == "questions[0] needs at least 1 option"
    assert await harness.redis.xlen(f"{harness.prefix}:asks") == 0


async def _run_cli(harness: Harness, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.cli",
        "ask",
        "--redis",
        harness.redis_url,
        "--prefix",
        harness.prefix,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_the_ask_command_prints_the_narration_and_exits_0_when_answered(harness: Harness) -> None:
    run = asyncio.create_task(
        _run_cli(
            harness,
            "--channel",
            "C0DEPLOY",
            "Deploy to production?",
            "--option",
            "Yes",
            "--option",
            "No",
            "--recommended",
            "0",
            "--timeout",
            "1m",
        )
    )
    await _answer_next(harness, "U0BOB", "slack_ask:choose:0")
    code, out, err = await run
    assert (code, out.strip()) == (0, "User answers:\nq1: Yes"), err


async def test_the_ask_command_exit_codes_tell_the_outcomes_apart(harness: Harness) -> None:
    declined = asyncio.create_task(
        _run_cli(harness, "--channel", "C0DEPLOY", "Ship?", "--option", "Yes", "--json")
    )
    [message] = await harness.posted("C0DEPLOY", timeout=15)
    await decline(harness.fake, "U0BOB", "C0DEPLOY", message.ts)
    code, out, _ = await declined
    assert code == 3
    assert json.loads(out)["outcome"] == "cancelled"

    code, out, _ = await _run_cli(harness, "--channel", "C0NOSUCH", "Ship?", "--option", "Yes", "--json")
    assert code == 6 and json.loads(out)["error"]["code"] == "channel_not_found"

    code, out, _ = await _run_cli(
        harness, "--channel", "C0DEPLOY", "Ship?", "--option", "Yes", "--timeout", "600ms"
    )
    assert code == 4 and out.strip() == "User answers:\nq1: (timeout)"

    code, _, _ = await _run_cli(
        harness,
        "--channel",
        "C0DEPLOY",
        "Ship?",
        "--option",
        "Yes",
        "--timeout",
        "600ms",
        "--on-timeout",
        "error",
    )
    assert code == 7


async def test_the_mcp_server_asks_people_through_the_running_bot(harness: Harness) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "bot.mcp_server"],
        env={"REDIS_URL": harness.redis_url, "SLACK_ASK_PREFIX": harness.prefix},
        cwd=str(ROOT),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        first = await session.call_tool(
            "ask",
            {
                "questions": [{"question": "Merge the PR?", "options": ["Merge", "Wait"], "recommended": 0}],
                "route": {"channel": "C0DEPLOY"},
                "timeout_ms": 60_000,
                "wait_s": 0.2,
            },
        )
        assert first.structured_content is not None
        handle: Any = first.structured_content["handle"]
        assert first.structured_content["status"] == "pending"
        [message] = await harness.posted()
        assert "slack_ask:choose:0" in button_values(message)
        await harness.fake.click("U0CAROL", "C0DEPLOY", message.ts, "slack_ask:choose:0")
        answer = await session.call_tool("get_answer", {"handle": handle, "wait_s": 10})
        (block,) = answer.content
        assert isinstance(block, TextContent)
        assert block.text == "User answers:\nq1: Merge"
