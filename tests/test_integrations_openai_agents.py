"""The OpenAI Agents SDK, the real SDK offline (its own scripted model), against the real bot, the fake
Slack and Redis: a tool that needs approval is approved, rejected with a reason, or times out in Slack;
the ask tool returns the narration."""

from __future__ import annotations

import asyncio
from typing import Any

from agents import Agent, RunConfig, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

from bot.client import AskClient
from bot.integrations.openai_agents import ask_tool, needs_approval_when, run_with_approvals
from bot.playground import Message
from tests.decline_helpers import decline
from tests.harness import Harness

ROUTE = {"channel": "C0DEPLOY"}
RUN = {"run_config": RunConfig(tracing_disabled=True)}
ran: list[str] = []


@function_tool(needs_approval=True)
def restart_service(name: str) -> str:
    """Restart a service."""
    ran.append(name)
    return f"restarted {name}"


def _agent(tool: Any, arguments: dict[str, Any]) -> tuple[Agent[Any], ScriptedModel]:
    model = ScriptedModel(
        [[function_call(tool.name, arguments, call_id="call-1")], [assistant_message("All done.")]]
    )
    return Agent(name="ops", instructions="Run operations.", model=model, tools=[tool]), model


def _tool_outputs(result: Any) -> list[str]:
    return [str(item.output) for item in result.new_items if item.type == "tool_call_output_item"]


async def _run_until_asked(
    harness: Harness, client: AskClient, agent: Agent[Any]
) -> tuple[asyncio.Task[Any], Message]:
    """The agent's run, started, and the approval message it posted."""
    run = asyncio.create_task(
        run_with_approvals(agent, "restart it", client, run_kwargs=RUN, route=ROUTE, timeout_ms=60_000)
    )
    [message] = await harness.posted()
    return run, message


async def test_a_tool_call_approved_in_slack_runs(harness: Harness) -> None:
    ran.clear()
    agent, model = _agent(restart_service, {"name": "api <@U0ALICE> https://evil.example"})
    async with AskClient(harness.redis_url, prefix=harness.prefix) as client:
        run, message = await _run_until_asked(harness, client, agent)
        shown = str(message.blocks)
        assert "restart_service" in shown and "<@U0ALICE>" not in shown and "&lt;@U0ALICE&gt;" in shown
        await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
        result = await asyncio.wait_for(run, timeout=15)
    assert ran == ["api <@U0ALICE> https://evil.example"]
    assert _tool_outputs(result) == ["restarted api <@U0ALICE> https://evil.example"]
    assert result.final_output == "All done."
    model.assert_complete()


async def test_a_tool_call_declined_in_slack_is_rejected_with_the_reason(harness: Harness) -> None:
    ran.clear()
    agent, _ = _agent(restart_service, {"name": "db"})
    async with AskClient(harness.redis_url, prefix=harness.prefix) as client:
        run, message = await _run_until_asked(harness, client, agent)
        await decline(harness.fake, "U0BOB", "C0DEPLOY", message.ts, reason="not during business hours")
        result = await asyncio.wait_for(run, timeout=15)
    assert ran == []
    assert _tool_outputs(result) == ["not during business hours"]


async def test_a_tool_call_nobody_approves_before_the_deadline_is_rejected(harness: Harness) -> None:
    ran.clear()
    agent, _ = _agent(restart_service, {"name": "cache"})
    async with AskClient(harness.redis_url, prefix=harness.prefix) as client:
        result = await asyncio.wait_for(
            run_with_approvals(agent, "restart", client, run_kwargs=RUN, route=ROUTE, timeout_ms=500),
            timeout=15,
        )
    assert ran == []
    assert _tool_outputs(result) == [
        "Nobody approved the call to restart_service in Slack before the deadline; it was not run."
    ]
    [message] = await harness.posted()
    await harness.ended("C0DEPLOY", message.ts)


async def test_needs_approval_when_lets_the_other_calls_run_without_a_person(harness: Harness) -> None:
    ran.clear()

    @function_tool(needs_approval=needs_approval_when(lambda args: args["name"] == "prod"))
    def scale(name: str) -> str:
        """Scale a deployment."""
        ran.append(name)
        return f"scaled {name}"

    agent, _ = _agent(scale, {"name": "staging"})
    async with AskClient(harness.redis_url, prefix=harness.prefix) as client:
        result = await run_with_approvals(agent, "scale", client, run_kwargs=RUN, route=ROUTE)
    assert _tool_outputs(result) == ["scaled staging"] and harness.fake.messages("C0DEPLOY") == []


async def test_the_ask_tool_returns_the_narration(harness: Harness) -> None:
    async with AskClient(harness.redis_url, prefix=harness.prefix) as client:
        asker = ask_tool(client, route=ROUTE, timeout_ms=60_000)
        question = {"question": "Which region?", "options": ["eu-west", "us-east"]}
        agent, _ = _agent(asker, {"questions": [question]})
        run = asyncio.create_task(run_with_approvals(agent, "deploy", client, run_kwargs=RUN))
        [message] = await harness.posted()
        await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:1")
        result = await asyncio.wait_for(run, timeout=15)
    assert _tool_outputs(result) == ["User answers:\nq1: us-east"]
