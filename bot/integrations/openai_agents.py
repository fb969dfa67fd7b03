"""The OpenAI Agents SDK asking people in Slack (``pip install 'slack-ask[openai-agents]'``).

- :func:`ask_tool`: a function tool the model calls to ask a person (the pi-question request); it
  returns the contract's narration.
- Approvals: give a tool ``needs_approval=True`` (or the SDK's callable, ``(ctx, params, call_id)
  -> bool``, to decide which calls need a person; :func:`needs_approval_when` builds one from a test
  of the arguments). The SDK then stops the run with ``result.interruptions``;
  :func:`answer_interruptions` asks in Slack for each (tool name, arguments shown safely, who may
  approve, deadline) and records the decision on the run's state (``RunState.approve`` /
  ``reject`` with the person's reason as the message for the model); :func:`run_with_approvals`
  runs an agent to its end that way.

Everything is async: nothing here blocks an event loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Unpack

from agents import Agent, FunctionTool, RunContextWrapper, Runner, RunResult, RunState, function_tool
from agents.items import ToolApprovalItem

from bot.client import AskClient, AskOptions
from bot.integrations.common import (
    ASK_TOOL_DESCRIPTION,
    DEFAULT_GRACE_S,
    Decision,
    ask_for_approval,
    ask_from_tool,
)

__all__ = [
    "answer_interruptions",
    "ask_tool",
    "decide",
    "needs_approval_when",
    "run_with_approvals",
]

MAX_ROUNDS = 50
"""How many rounds of interruptions :func:`run_with_approvals` answers before it gives up."""


def ask_tool(
    client: AskClient,
    *,
    name: str = "ask_person",
    description: str = ASK_TOOL_DESCRIPTION,
    grace_s: float = DEFAULT_GRACE_S,
    **options: Unpack[AskOptions],
) -> FunctionTool:
    """A function tool that asks a person in Slack (``options``: route, responders, timeout_ms, ...)
    and returns the contract's narration; a request the contract refuses returns ``Error: <message>``
    for the model to correct; Redis down raises :class:`~bot.client.RedisUnavailableError`."""

    async def ask_person(questions: list[dict[str, Any]]) -> str:
        """Ask a person.

        Args:
            questions: 1 to 8 questions, each {question, options, recommended?, multi?, description?}.
        """
        text, _ = await ask_from_tool(client, questions, grace_s=grace_s, options=options)
        return text

    return function_tool(
        ask_person,
        name_override=name,
        description_override=description,
        strict_mode=False,
        failure_error_function=None,  # Redis down is the caller's error, not text for the model
    )


def needs_approval_when(
    test: Callable[[Mapping[str, Any]], bool],
) -> Callable[[RunContextWrapper[Any], dict[str, Any], str], Awaitable[bool]]:
    """A ``needs_approval`` callable for ``function_tool``: a person decides the calls whose
    arguments pass ``test``; the others run at once."""

    async def needs_approval(ctx: RunContextWrapper[Any], params: dict[str, Any], call_id: str) -> bool:
        return bool(test(params))

    return needs_approval


async def decide(
    client: AskClient,
    item: ToolApprovalItem,
    *,
    grace_s: float = DEFAULT_GRACE_S,
    **options: Unpack[AskOptions],
) -> Decision:
    """Ask a person in Slack whether the interrupted tool call ``item`` may run."""
    return await ask_for_approval(
        client, item.name or "a tool", item.arguments or "{}", grace_s=grace_s, **options
    )


async def answer_interruptions(
    client: AskClient,
    result: RunResult,
    *,
    grace_s: float = DEFAULT_GRACE_S,
    **options: Unpack[AskOptions],
) -> RunState[Any]:
    """The run's state with a Slack decision recorded for each of ``result.interruptions``, one
    ask after the other; run it on with ``Runner.run(agent, state)``."""
    state = result.to_state()
    for item in result.interruptions:
        decision = await decide(client, item, grace_s=grace_s, **options)
        if decision.approved:
            state.approve(item)
        else:
            state.reject(item, rejection_message=decision.message)
    return state


async def run_with_approvals(
    agent: Agent[Any],
    input: str | list[Any],
    client: AskClient,
    *,
    run_kwargs: Mapping[str, Any] | None = None,
    grace_s: float = DEFAULT_GRACE_S,
    **options: Unpack[AskOptions],
) -> RunResult:
    """``Runner.run`` to the end, every tool call that needs approval decided in Slack.
    ``run_kwargs`` go to each ``Runner.run`` (``run_config``, ``max_turns``, ``context``, ...)."""
    kwargs = dict(run_kwargs or {})
    result = await Runner.run(agent, input, **kwargs)
    for _ in range(MAX_ROUNDS):
        if not result.interruptions:
            return result
        state = await answer_interruptions(client, result, grace_s=grace_s, **options)
        result = await Runner.run(agent, state, **kwargs)
    raise RuntimeError(f"the run still asked for approvals after {MAX_ROUNDS} rounds")
