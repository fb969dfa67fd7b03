"""Every example of docs/integrations.md runs as written, against the bot and the fake Slack, with a
person answering: each is a ```python block whose first line is ``# example: <name>``."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path

import pytest

from tests.decline_helpers import decline
from tests.harness import Harness

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "integrations.md"
EXAMPLE = re.compile(r"^```python\n# example: (\S+)\n(.*?)^```", re.M | re.S)
EXAMPLES = dict(EXAMPLE.findall(DOC.read_text(encoding="utf-8")))

# What the person does in Slack, and what the example prints then.
ANSWERS = {
    "langgraph-tool": ("slack_ask:choose:1", "User answers:\ndb: MySQL"),
    "langgraph-hitl": (
        "decline",
        "User rejected the tool call for `drop_table` with reason: keep the sessions table",
    ),
    "openai-agents": ("slack_ask:choose:0", "The api is back."),
    "claude-agent": ("slack_ask:choose:0", "PermissionResultAllow"),
}


def test_every_example_is_run_here() -> None:
    assert sorted(EXAMPLES) == sorted(ANSWERS)


@pytest.mark.parametrize("name", sorted(ANSWERS))
async def test_the_example_runs(harness: Harness, name: str) -> None:
    env = {
        **os.environ,
        "REDIS_URL": harness.redis_url,
        "SLACK_ASK_PREFIX": harness.prefix,
        "SLACK_CHANNEL": "C0DEPLOY",
        "OPENAI_AGENTS_DISABLE_TRACING": "1",
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        EXAMPLES[name],
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    action, printed = ANSWERS[name]
    [message] = await harness.posted(timeout=40)
    if action == "decline":
        await decline(harness.fake, "U0BOB", "C0DEPLOY", message.ts, reason="keep the sessions table")
    else:
        await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, action)
    out, err = await asyncio.wait_for(proc.communicate(), timeout=40)
    assert proc.returncode == 0, err.decode()
    assert out.decode().strip() == printed
