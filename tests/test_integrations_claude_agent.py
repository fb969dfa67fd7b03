"""The Claude Agent SDK, the real SDK offline, against the real bot, the fake Slack and Redis.

The callback runs inside a real ``ClaudeSDKClient`` whose transport is a scripted stand-in for the
``claude`` CLI: it answers the SDK's ``initialize`` and sends the control protocol's own
``can_use_tool`` requests (and a ``control_cancel_request``), so the SDK builds the
``ToolPermissionContext`` and turns our ``PermissionResultAllow`` / ``PermissionResultDeny`` into
its wire answer. A real ``claude`` session: tests/test_integrations_claude_session.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from claude_agent_sdk import (
    ClaudeAgentOptions,
    ClaudeSDKClient,
    PermissionResultAllow,
    PermissionResultDeny,
    ToolPermissionContext,
    Transport,
)

from bot.client import AskClient
from bot.integrations.claude_agent import READ_ONLY_TOOLS, can_use_tool
from tests.decline_helpers import decline
from tests.harness import Harness

ROUTE = {"channel": "C0DEPLOY"}


class ScriptedCLI(Transport):
    """The CLI's side of the SDK's control protocol: answers ``initialize``, sends what a test tells it
    to, and keeps every control response the SDK writes back, by request id."""

    def __init__(self) -> None:
        self._to_sdk: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.responses: dict[str, dict[str, Any]] = {}
        self._changed = asyncio.Condition()
        self._ready = False

    async def connect(self) -> None:
        self._ready = True

    async def write(self, data: str) -> None:
        for line in data.splitlines():
            message = json.loads(line)
            if message.get("type") == "control_request" and message["request"]["subtype"] == "initialize":
                reply = {"subtype": "success", "request_id": message["request_id"], "response": {}}
                await self._to_sdk.put({"type": "control_response", "response": reply})
            elif message.get("type") == "control_response":
                async with self._changed:
                    self.responses[message["response"]["request_id"]] = message["response"]
                    self._changed.notify_all()

    async def read_messages(self) -> AsyncIterator[dict[str, Any]]:
        while (message := await self._to_sdk.get()) is not None:
            yield message

    async def close(self) -> None:
        self._ready = False
        self._to_sdk.put_nowait(None)

    def is_ready(self) -> bool:
        return self._ready

    async def end_input(self) -> None:
        pass

    async def ask_permission(
        self, request_id: str, tool: str, tool_input: dict[str, Any], **extra: Any
    ) -> None:
        request = {"subtype": "can_use_tool", "tool_name": tool, "input": tool_input, **extra}
        await self._to_sdk.put({"type": "control_request", "request_id": request_id, "request": request})

    async def withdraw(self, request_id: str) -> None:
        await self._to_sdk.put({"type": "control_cancel_request", "request_id": request_id})

    async def response(self, request_id: str, timeout: float = 15) -> dict[str, Any]:
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: request_id in self.responses)
        return self.responses[request_id]


async def _session(
    harness: Harness, client: AskClient, **options: Any
) -> tuple[ClaudeSDKClient, ScriptedCLI]:
    cli = ScriptedCLI()
    callback = can_use_tool(client, route=ROUTE, **options)
    session = ClaudeSDKClient(ClaudeAgentOptions(can_use_tool=callback), transport=cli)
    await session.connect()
    return session, cli


async def test_a_permission_approved_in_slack_allows_the_tool(harness: Harness) -> None:
    async with AskClient(harness.redis_url, prefix=harness.prefix) as client:
        session, cli = await _session(harness, client, timeout_ms=60_000)
        try:
            await cli.ask_permission(
                "r1",
                "Bash",
                {"command": "rm -rf build <!here>"},
                tool_use_id="toolu_1",
                decision_reason="Bash is not in the allowed tools",
            )
            [message] = await harness.posted()
            shown = str(message.blocks)
            assert "Bash is not in the allowed tools" in shown
            assert "<!here>" not in shown and "&lt;!here&gt;" in shown
            await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
            response = await cli.response("r1")
        finally:
            await session.disconnect()
    assert response["subtype"] == "success"
    assert response["response"] == {"behavior": "allow", "updatedInput": {"command": "rm -rf build <!here>"}}


async def test_a_permission_declined_in_slack_denies_with_the_reason(harness: Harness) -> None:
    async with AskClient(harness.redis_url, prefix=harness.prefix) as client:
        session, cli = await _session(harness, client, timeout_ms=60_000)
        try:
            await cli.ask_permission(
                "r2", "Write", {"file_path": "/etc/hosts", "content": "x"}, tool_use_id="t2"
            )
            [message] = await harness.posted()
            await decline(harness.fake, "U0BOB", "C0DEPLOY", message.ts, reason="use a staging host")
            response = await cli.response("r2")
        finally:
            await session.disconnect()
    assert response["response"] == {"behavior": "deny", "message": "use a staging host"}


async def test_a_permission_nobody_answers_is_denied_at_the_deadline(harness: Harness) -> None:
    async with AskClient(harness.redis_url, prefix=harness.prefix) as client:
        session, cli = await _session(harness, client, timeout_ms=500)
        try:
            await cli.ask_permission("r3", "Bash", {"command": "make deploy"}, tool_use_id="t3")
            response = await cli.response("r3")
        finally:
            await session.disconnect()
    assert response["response"] == {
        "behavior": "deny",
        "message": "Nobody approved the call to Bash in Slack before the deadline; it was not run.",
    }
    [message] = await harness.posted()
    await harness.ended("C0DEPLOY", message.ts)


async def test_a_request_the_session_withdraws_withdraws_the_ask_in_slack(harness: Harness) -> None:
    async with AskClient(harness.redis_url, prefix=harness.prefix) as client:
        session, cli = await _session(harness, client, timeout_ms=60_000)
        try:
            await cli.ask_permission("r4", "Bash", {"command": "sleep 1000"}, tool_use_id="t4")
            [message] = await harness.posted()
            await cli.withdraw("r4")
            ended = await harness.ended("C0DEPLOY", message.ts)
        finally:
            await session.disconnect()
    assert "r4" not in cli.responses
    assert "withdr" in str(ended.blocks).lower()


async def test_the_policy_allows_and_denies_without_asking(harness: Harness) -> None:
    async with AskClient(harness.redis_url, prefix=harness.prefix) as client:
        callback = can_use_tool(client, allow=READ_ONLY_TOOLS, deny={"WebFetch"}, route=ROUTE)
        context = ToolPermissionContext(tool_use_id="t5")
        allowed = await callback("Read", {"file_path": "README.md"}, context)
        denied = await callback("WebFetch", {"url": "https://example.com"}, context)
    assert isinstance(allowed, PermissionResultAllow)
    assert (
        isinstance(denied, PermissionResultDeny)
        and denied.message == "The tool WebFetch is not allowed here."
    )
    assert harness.fake.messages("C0DEPLOY") == []
