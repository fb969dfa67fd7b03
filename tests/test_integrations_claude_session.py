"""A real ``claude`` session (the CLI the Claude Agent SDK bundles) asks a person in Slack for a tool
permission: the CLI talks to a scripted Anthropic Messages API on loopback, the SDK hands its
``can_use_tool`` request to slack-ask's callback, the real bot posts it to the fake Slack, and the
person's answer decides whether the CLI runs the command."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, ResultMessage

from bot.client import AskClient
from bot.integrations.claude_agent import can_use_tool
from tests.decline_helpers import decline
from tests.harness import Harness

pytestmark = pytest.mark.slow
COMMAND = "echo approved > marker.txt"


@dataclass
class ScriptedAPI:
    """The Messages API, streamed: the first turn calls Bash with ``COMMAND``; once a tool result is in
    the conversation, one text answer. Keeps every tool result it was sent."""

    url: str = ""
    tool_results: list[dict[str, Any]] = field(default_factory=list)

    async def messages(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        results = [
            part
            for message in body.get("messages", [])
            if isinstance(message.get("content"), list)
            for part in message["content"]
            if part.get("type") == "tool_result"
        ]
        self.tool_results[:] = results
        response = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await response.prepare(request)

        async def event(kind: str, data: dict[str, Any]) -> None:
            await response.write(f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode())

        usage = {"input_tokens": 1, "output_tokens": 1}
        message = {"id": "msg_1", "type": "message", "role": "assistant", "model": body.get("model")}
        await event(
            "message_start", {"message": {**message, "content": [], "stop_reason": None, "usage": usage}}
        )
        if results:
            block, delta, stop = (
                {"type": "text", "text": ""},
                {"type": "text_delta", "text": "Done."},
                "end_turn",
            )
        else:
            block = {"type": "tool_use", "id": "toolu_01", "name": "Bash", "input": {}}
            arguments = json.dumps({"command": COMMAND, "description": "Write the marker"})
            delta, stop = {"type": "input_json_delta", "partial_json": arguments}, "tool_use"
        await event("content_block_start", {"index": 0, "content_block": block})
        await event("content_block_delta", {"index": 0, "delta": delta})
        await event("content_block_stop", {"index": 0})
        await event("message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None}, "usage": usage})
        await event("message_stop", {})
        return response


@pytest.fixture
async def api() -> AsyncIterator[ScriptedAPI]:
    scripted = ScriptedAPI()
    app = web.Application()
    app.router.add_post("/v1/messages", scripted.messages)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    scripted.url = f"http://127.0.0.1:{port}"
    try:
        yield scripted
    finally:
        await runner.cleanup()


async def _session(client: AskClient, api: ScriptedAPI, workdir: Path) -> list[Any]:
    env = {
        "ANTHROPIC_BASE_URL": api.url,
        "ANTHROPIC_API_KEY": "sk-scripted",
        "HOME": str(workdir),
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    }
    options = ClaudeAgentOptions(
        can_use_tool=can_use_tool(client, route={"channel": "C0DEPLOY"}, timeout_ms=60_000),
        cwd=str(workdir),
        env=env,
        permission_mode="default",
        setting_sources=[],
    )
    async with ClaudeSDKClient(options) as session:
        await session.query("Write the marker file")
        return [message async for message in session.receive_response()]


async def test_a_real_claude_session_runs_the_command_a_person_approved(
    harness: Harness, api: ScriptedAPI, tmp_path: Path
) -> None:
    async with AskClient(harness.redis_url, prefix=harness.prefix) as client:
        run = asyncio.create_task(_session(client, api, tmp_path))
        [message] = await harness.posted(timeout=40)
        assert COMMAND.replace(">", "&gt;") in str(message.blocks)
        await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
        messages = await asyncio.wait_for(run, timeout=40)
    assert (tmp_path / "marker.txt").read_text().strip() == "approved"
    assert [m.result for m in messages if isinstance(m, ResultMessage)] == ["Done."]


async def test_a_real_claude_session_is_told_the_reason_a_person_declined(
    harness: Harness, api: ScriptedAPI, tmp_path: Path
) -> None:
    async with AskClient(harness.redis_url, prefix=harness.prefix) as client:
        run = asyncio.create_task(_session(client, api, tmp_path))
        [message] = await harness.posted(timeout=40)
        await decline(harness.fake, "U0BOB", "C0DEPLOY", message.ts, reason="no files in there, please")
        await asyncio.wait_for(run, timeout=40)
    assert not (tmp_path / "marker.txt").exists()
    [result] = api.tool_results
    assert result.get("is_error") is True
    assert "no files in there, please" in json.dumps(result["content"])
