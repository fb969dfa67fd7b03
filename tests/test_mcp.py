"""The stdio MCP server through a real MCP client session, with an in-test bot side on real Redis."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent

from bot.model import AskRecord
from bot.storage.keys import slot_tag
from bot.storage.store import Resolution, Store
from contract import normalize_ask_request
from tests.fakebot import FakeBot, make_result

ROOT = Path(__file__).resolve().parents[1]
SLACK_ASK = ROOT / ".venv" / "bin" / "slack-ask"
QUESTIONS = [{"question": "Deploy to production?", "options": ["Yes", "No"], "recommended": 0}]


# ``redis_url``, ``prefix`` (unique per test) and ``redis`` (deletes the prefix's keys) come from conftest.


@pytest.fixture
def bot(redis: aioredis.Redis, prefix: str) -> FakeBot:
    return FakeBot(redis, prefix)


Session = Callable[..., AbstractAsyncContextManager[ClientSession]]


@pytest.fixture
def session(redis_url: str, prefix: str) -> Session:
    """Starts the MCP server as a subprocess on the test's Redis and prefix and opens a client session."""

    @asynccontextmanager
    async def open_session(*, command: list[str] | None = None, **env: str) -> AsyncIterator[ClientSession]:
        argv = command or [sys.executable, "-m", "bot.mcp_server"]
        params = StdioServerParameters(
            command=argv[0],
            args=argv[1:],
            env={"REDIS_URL": redis_url, "SLACK_ASK_PREFIX": prefix, **env},
            cwd=str(ROOT),
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            yield s

    return open_session


def text_of(result: CallToolResult) -> str:
    (block,) = result.content
    assert isinstance(block, TextContent)
    return block.text


def pending_text(handle: str) -> str:
    return f'Still waiting for an answer. Call get_answer with handle "{handle}" later.'


async def test_ask_returns_a_handle_then_get_answer_returns_the_narration(
    session: Session, bot: FakeBot
) -> None:
    async with session() as s:
        first = await s.call_tool(
            "ask",
            {"questions": QUESTIONS, "route": {"channel": "C0123"}, "timeout_ms": 600000, "wait_s": 0.2},
        )
        assert not first.is_error
        envelope = await bot.next_ask()
        handle = envelope["ask_id"]
        assert first.structured_content == {"handle": handle, "status": "pending"}
        assert text_of(first) == pending_text(handle)
        assert envelope["request"] == {"questions": QUESTIONS}
        assert envelope["route"] == {"channel": "C0123"}
        assert envelope["timeout_ms"] == 600000

        still = await s.call_tool("get_answer", {"handle": handle, "wait_s": 0})
        assert still.structured_content == {"handle": handle, "status": "pending"}
        assert text_of(still) == pending_text(handle)

        pushed = await bot.answer(envelope)
        answer = await s.call_tool("get_answer", {"handle": handle, "wait_s": 5})
        assert not answer.is_error
        assert text_of(answer) == pushed["text"] == "User answers:\nq1: Yes"
        assert answer.structured_content is not None
        assert answer.structured_content["result"] == pushed

        # Asked again (a lost response), the same answer comes back.
        again = await s.call_tool("get_answer", {"handle": handle, "wait_s": 0})
        assert text_of(again) == pushed["text"]


async def test_ask_returns_the_narration_when_the_answer_comes_within_wait_s(
    session: Session, bot: FakeBot
) -> None:
    async with session(SLACK_ASK_MCP_WAIT_S="20") as s:

        async def answer_when_asked() -> dict[str, Any]:
            return await bot.answer(await bot.next_ask())

        answering = asyncio.create_task(answer_when_asked())
        result = await s.call_tool("ask", {"questions": [{"prompt": "Ship?", "choices": ["Ship", "Hold"]}]})
        pushed = await answering
        assert text_of(result) == pushed["text"] == "User answers:\nq1: Ship"
        assert "route" not in (await bot.redis.xrange(bot.stream))[0][1][b"ask"].decode()


async def test_a_bad_request_is_a_tool_error_with_the_contract_message(
    session: Session, bot: FakeBot
) -> None:
    async with session() as s:
        result = await s.call_tool(
            "ask", {"questions": [{"question": "Deploy?", "options": []}], "wait_s": 0}
        )
        assert result.is_error
        assert text_of(result) == "Error: questions[0] needs at least 1 option"
        bad_handle = await s.call_tool("get_answer", {"handle": "not a handle"})
        assert bad_handle.is_error
    assert await bot.redis.exists(bot.stream) == 0


async def test_ask_sends_an_approval_with_the_requester_and_refuses_a_broken_one(
    session: Session, bot: FakeBot
) -> None:
    question = {"question": "Deploy?", "options": ["Approve", "Reject"]}
    async with session() as s:
        first = await s.call_tool(
            "ask",
            {
                "questions": [question],
                "approval": {"count": 2, "veto": [1]},
                "requester_user": "ada@example.com",
                "wait_s": 0,
            },
        )
        assert not first.is_error
        envelope = await bot.next_ask()
        assert envelope["approval"] == {"count": 2, "veto": [1]}
        assert envelope["requester"] == {"user": "ada@example.com"}
        broken = await s.call_tool(
            "ask", {"questions": [question, {**question, "id": "b"}], "approval": {"count": 2}, "wait_s": 0}
        )
        assert broken.is_error
        assert text_of(broken) == "Error: approval: an approval ask has exactly one question (this one has 2)"


async def test_tools_publish_the_question_contract_schema(session: Session) -> None:
    async with session() as s:
        tools = {tool.name: tool for tool in (await s.list_tools()).tools}
    assert set(tools) == {"ask", "get_answer"}
    schema = tools["ask"].input_schema
    assert schema["required"] == ["questions"]
    assert set(schema["properties"]) == {
        "questions",
        "route",
        "timeout_ms",
        "on_timeout",
        "responders",
        "approval",
        "requester_user",
        "wait_s",
    }
    approval = schema["properties"]["approval"]["anyOf"][0]
    assert approval["required"] == ["count"]
    assert set(approval["properties"]) == {"count", "veto", "exclude_requester"}
    item = schema["properties"]["questions"]["items"]
    assert {"id", "question", "options", "multi", "recommended", "allowCustom", "category"} <= set(
        item["properties"]
    )
    assert {"prompt", "header", "choices", "recommendedIndex", "multiple", "context"} <= set(
        item["properties"]
    )
    assert tools["get_answer"].input_schema["required"] == ["handle"]


@pytest.mark.skipif(not SLACK_ASK.exists(), reason="the slack-ask script is not installed")
async def test_slack_ask_mcp_command_serves_the_same_tools(session: Session, bot: FakeBot) -> None:
    async with session(command=[str(SLACK_ASK), "mcp"]) as s:
        first = await s.call_tool("ask", {"questions": QUESTIONS, "wait_s": 0})
        assert first.structured_content is not None
        handle = first.structured_content["handle"]
        pushed = await bot.answer(await bot.next_ask(), "cancelled")
        answer = await s.call_tool("get_answer", {"handle": handle, "wait_s": 5})
        assert text_of(answer) == pushed["text"] == "User answers:\nq1: (cancelled)"


def test_the_mcp_docs_configure_the_server_as_it_runs() -> None:
    from bot.mcp_server import PENDING_TEXT

    doc = (ROOT / "docs" / "mcp.md").read_text(encoding="utf-8")
    blocks = [json.loads(body) for body in re.findall(r"^```json\n(.*?)^```", doc, re.M | re.S)]
    assert len(blocks) >= 2
    for block in blocks:
        server = block["mcpServers"]["slack-ask"]
        assert server["command"].endswith("slack-ask")
        assert server["args"] == ["mcp"]
        assert set(server["env"]) == {"REDIS_URL", "SLACK_ASK_PREFIX", "SLACK_ASK_MCP_WAIT_S"}
    assert "slack-ask -- slack-ask mcp" in doc
    assert PENDING_TEXT.format(handle="<ask_id>") in doc


async def test_get_answer_with_a_handle_never_issued_is_an_error_saying_so(session: Session) -> None:
    async with session() as s:
        result = await s.call_tool("get_answer", {"handle": "01J0NEVER0ISSUED0000000000", "wait_s": 0})
    assert result.is_error
    assert text_of(result) == (
        "Error: unknown handle '01J0NEVER0ISSUED0000000000': no ask with this id was sent (or its retention "
        "has ended). Use the handle an earlier ask call returned."
    )


async def test_a_handle_from_an_earlier_server_still_answers(session: Session, bot: FakeBot) -> None:
    async with session() as s:
        first = await s.call_tool("ask", {"questions": QUESTIONS, "wait_s": 0})
        assert first.structured_content is not None
        handle = first.structured_content["handle"]
    pushed = await bot.answer(await bot.next_ask())
    async with session() as again:  # a new server process: it never issued the handle itself
        answer = await again.call_tool("get_answer", {"handle": handle, "wait_s": 5})
    assert not answer.is_error
    assert text_of(answer) == pushed["text"]


async def test_tool_descriptions_say_what_clients_need(session: Session) -> None:
    async with session() as s:
        tools = {tool.name: tool for tool in (await s.list_tools()).tools}
    ask = tools["ask"].input_schema["properties"]
    assert "duration in milliseconds" in ask["timeout_ms"]["description"]
    assert {"question", "options"} <= set(ask["questions"]["items"]["required"])
    # Clients read a property's own description, not the one inside anyOf[0].
    assert ask["route"]["description"].startswith("Where to ask")
    assert ask["responders"]["description"].startswith("Who may answer")
    for schema in (ask["wait_s"], tools["get_answer"].input_schema["properties"]["wait_s"]):
        assert "60 s" in schema["description"]


async def test_both_tools_declare_an_output_schema_their_results_follow(
    session: Session, bot: FakeBot
) -> None:
    async with session() as s:
        tools = {tool.name: tool for tool in (await s.list_tools()).tools}
        for name in ("ask", "get_answer"):
            output = tools[name].output_schema
            assert output is not None
            assert output["required"] == ["handle", "status"]
            assert set(output["properties"]) == {"handle", "status", "outcome", "result"}
        # The client session validates structured content against the declared schema on every call.
        pending = await s.call_tool("ask", {"questions": QUESTIONS, "wait_s": 0})
        assert pending.structured_content is not None
        handle = pending.structured_content["handle"]
        await bot.answer(await bot.next_ask())
        done = await s.call_tool("get_answer", {"handle": handle, "wait_s": 5})
        assert done.structured_content is not None
        assert done.structured_content["status"] == "done"
        assert done.structured_content["outcome"] == "answered"


async def test_the_server_reports_the_package_version(redis_url: str, prefix: str) -> None:
    import importlib.metadata

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "bot.mcp_server"],
        env={"REDIS_URL": redis_url, "SLACK_ASK_PREFIX": prefix},
        cwd=str(ROOT),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        init = await s.initialize()
    assert init.server_info.name == "slack-ask"
    assert init.server_info.version == importlib.metadata.version("slack-ask")


async def test_get_answer_after_a_restart_returns_a_consumed_result_from_the_store_at_once(
    session: Session, bot: FakeBot, redis: aioredis.Redis, prefix: str
) -> None:
    # The result was taken off the list already (by the server before a restart, whose response
    # was lost): the new server's get_answer must find it in the store, not block for all of wait_s.
    async with session() as s:
        first = await s.call_tool("ask", {"questions": QUESTIONS, "wait_s": 0})
    envelope = await bot.next_ask()
    pushed = await _ended_in_the_store(redis, prefix, envelope)
    assert await redis.lpop(envelope["reply_to"]) is not None  # consumed
    async with session() as again:  # a new server process, which delivered nothing itself
        # The bound is far below wait_s: blocking for wait_s first is what this test catches.
        answer = await asyncio.wait_for(
            again.call_tool("get_answer", {"handle": envelope["ask_id"], "wait_s": 60}), timeout=20
        )
    assert first.structured_content == {"handle": envelope["ask_id"], "status": "pending"}
    assert not answer.is_error
    assert text_of(answer) == pushed["text"]


async def _ended_in_the_store(redis: aioredis.Redis, prefix: str, envelope: dict[str, Any]) -> dict[str, Any]:
    """The ask ended through the bot's own store (its result stored and pushed), as the bot does."""
    store = Store(redis, prefix)
    record = AskRecord(
        ask_id=envelope["ask_id"],
        tag=slot_tag(envelope["reply_to"]),
        reply_to=envelope["reply_to"],
        request=normalize_ask_request(envelope["request"]),
        created_ms=await store.server_time_ms(),
    )
    await store.claim_index(record.ask_id, record.tag, 120_000)
    accepted = await store.accept(
        record, consumer="c1", lease_ms=30_000, pending_ttl_ms=120_000, entry_id="1-0", schedule_at_ms=None
    )
    assert accepted.verdict == "post"
    stored = make_result(envelope)
    del stored["resolved_at"]  # the resolve script appends Redis time
    prefix_json = json.dumps(stored)[:-1] + ',"resolved_at":'
    verdict = await store.resolve(Resolution(record, "answered", prefix_json, "U0HUMAN", "answered"))
    assert verdict.verdict == "won"
    return stored
