"""LangGraph and LangChain, the real frameworks offline, against the real bot, the fake Slack and Redis:
a compiled graph whose scripted chat model calls the ask tool, a node that asks and is resumed from
its checkpoint, and the human-in-the-loop middleware answered in Slack."""

from __future__ import annotations

import asyncio
from typing import Any, TypedDict

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command, interrupt

from bot.client import AskClient
from bot.integrations.langgraph import ask_in_node, ask_tool, node_ask_id, resume_command
from tests.decline_helpers import decline
from tests.harness import Harness

DB_QUESTION = {"id": "db", "question": "Which database?", "options": ["Postgres", "MySQL"]}
ROUTE = {"channel": "C0DEPLOY"}


class ScriptedChatModel(FakeMessagesListChatModel):
    """langchain_core's fake chat model, taking tools as a real one does (they are ignored)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


def _calls(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    return AIMessage(
        content="", tool_calls=[{"name": name, "args": args, "id": call_id, "type": "tool_call"}]
    )


async def test_a_graphs_model_calls_the_ask_tool_and_gets_the_narration(harness: Harness) -> None:
    model = ScriptedChatModel(
        responses=[_calls("ask_person", {"questions": [DB_QUESTION]}, "call-1"), AIMessage("Postgres it is.")]
    )
    async with AskClient(harness.redis_url, prefix=harness.prefix) as client:
        asker = ask_tool(client, route=ROUTE, timeout_ms=60_000)

        async def agent(state: MessagesState) -> dict[str, list[AnyMessage]]:
            return {"messages": [await model.ainvoke(state["messages"])]}

        graph = StateGraph(MessagesState)
        graph.add_node("agent", agent)
        graph.add_node("tools", ToolNode([asker]))
        graph.add_edge(START, "agent")
        graph.add_conditional_edges("agent", tools_condition)
        graph.add_edge("tools", "agent")
        app = graph.compile(checkpointer=InMemorySaver())
        run = asyncio.create_task(
            app.ainvoke(
                {"messages": [HumanMessage("Set up the app")]}, {"configurable": {"thread_id": "t-1"}}
            )
        )
        [message] = await harness.posted()
        await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
        state = await asyncio.wait_for(run, timeout=15)
    [answer] = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert answer.content == "User answers:\ndb: Postgres"
    assert answer.artifact["selectedOptions"] == ["Postgres"]
    assert state["messages"][-1].content == "Postgres it is."
    stored = await AskClient(harness.redis, prefix=harness.prefix).result("lc:t-1:2:call-1")
    assert stored is not None and stored.text == answer.content


class Plan(TypedDict, total=False):
    database: str
    confirmed: str


async def test_a_node_resumed_from_its_checkpoint_does_not_post_a_second_ask(harness: Harness) -> None:
    async with AskClient(harness.redis_url, prefix=harness.prefix) as client:
        runs: list[str] = []

        async def choose(state: Plan) -> Plan:
            result = await ask_in_node(client, {"questions": [DB_QUESTION]}, route=ROUTE, timeout_ms=60_000)
            runs.append(result.text)
            confirmed = interrupt("confirm the plan")  # LangGraph runs this node again on resume
            return {"database": result.text, "confirmed": confirmed}

        graph = StateGraph(Plan)
        graph.add_node("choose", choose)
        graph.add_edge(START, "choose")
        graph.add_edge("choose", END)
        app = graph.compile(checkpointer=InMemorySaver())
        config: Any = {"configurable": {"thread_id": "plan-7"}}
        first = asyncio.create_task(app.ainvoke({}, config, version="v2"))
        [message] = await harness.posted()
        await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:1")
        paused = await asyncio.wait_for(first, timeout=15)
        assert [i.value for i in paused.interrupts] == ["confirm the plan"]

        done = await asyncio.wait_for(app.ainvoke(Command(resume="yes"), config, version="v2"), timeout=15)
    assert done.value == {"database": "User answers:\ndb: MySQL", "confirmed": "yes"}
    assert runs == ["User answers:\ndb: MySQL"] * 2
    assert len([m for m in harness.fake.messages("C0DEPLOY") if not m.thread_ts]) == 1
    assert await AskClient(harness.redis, prefix=harness.prefix).result("lg:plan-7:choose:1:0") is not None


async def test_a_node_that_asks_twice_gets_two_ids_and_the_same_two_when_run_again() -> None:
    seen: list[list[str]] = []

    async def node(state: Plan) -> Plan:
        seen.append([node_ask_id(), node_ask_id()])
        interrupt("again")
        return {}

    graph = StateGraph(Plan)
    graph.add_node("twice", node)
    graph.add_edge(START, "twice")
    graph.add_edge("twice", END)
    app = graph.compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "a thread id with spaces"}}
    await app.ainvoke({}, config)
    await app.ainvoke(Command(resume=1), config)
    assert seen[0] == seen[1] and seen[0][0] != seen[0][1]
    assert all(i.startswith("lg:") and " " not in i for i in seen[0])
    with pytest.raises(RuntimeError):
        node_ask_id()  # outside a graph


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


def _hitl_agent(mode: str) -> Any:
    model = ScriptedChatModel(
        responses=[
            _calls("delete_file", {"path": "/srv/<!channel> report.txt"}, "call-9"),
            AIMessage("Done."),
        ]
    )
    middleware = HumanInTheLoopMiddleware(interrupt_on={"delete_file": True}, interrupt_mode=mode)  # type: ignore[arg-type]
    return create_agent(model, tools=[delete_file], middleware=[middleware], checkpointer=InMemorySaver())


@pytest.mark.parametrize("mode", ["batched", "per_call"])
async def test_the_hitl_middleware_gets_a_slack_decline_as_a_rejection_with_its_reason(
    harness: Harness, mode: str
) -> None:
    agent = _hitl_agent(mode)
    config: Any = {"configurable": {"thread_id": f"hitl-{mode}"}}
    paused = await agent.ainvoke({"messages": [HumanMessage("clean up")]}, config, version="v2")
    async with AskClient(harness.redis_url, prefix=harness.prefix) as client:
        decide = asyncio.create_task(
            resume_command(client, paused.interrupts, route=ROUTE, timeout_ms=60_000)
        )
        [message] = await harness.posted()
        shown = str(message.blocks)
        assert "<!channel>" not in shown and "&lt;!channel&gt;" in shown
        await decline(harness.fake, "U0BOB", "C0DEPLOY", message.ts, reason="keep the report")
        command = await asyncio.wait_for(decide, timeout=15)
    done = await agent.ainvoke(command, config, version="v2")
    [answer] = [m for m in done.value["messages"] if isinstance(m, ToolMessage)]
    assert "keep the report" in str(answer.content) and "deleted" not in str(answer.content)


async def test_the_hitl_middleware_runs_the_tool_when_approved_in_slack(harness: Harness) -> None:
    agent = _hitl_agent("per_call")
    config: Any = {"configurable": {"thread_id": "hitl-approve"}}
    paused = await agent.ainvoke({"messages": [HumanMessage("clean up")]}, config, version="v2")
    async with AskClient(harness.redis_url, prefix=harness.prefix) as client:
        decide = asyncio.create_task(
            resume_command(client, paused.interrupts, route=ROUTE, timeout_ms=60_000)
        )
        [message] = await harness.posted()
        await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
        command = await asyncio.wait_for(decide, timeout=15)
    done = await agent.ainvoke(command, config, version="v2")
    [answer] = [m for m in done.value["messages"] if isinstance(m, ToolMessage)]
    assert answer.content == "deleted /srv/<!channel> report.txt"
