"""LangGraph and LangChain asking people in Slack (``pip install 'slack-ask[langgraph]'``).

- :func:`ask_tool`: a LangChain tool the model calls to ask a person (the pi-question request); its
  result is the contract's narration text, with the details as the tool message's artifact (what
  the Pi extension returns).
- :func:`ask_in_node`: ask from a graph node and wait; the ``ask_id`` comes from the graph's thread
  id, the node (its path in subgraphs), the step and a per-node counter (:func:`node_ask_id`), so a
  node that runs again after a resume or a crash gets the same ask, and its result, instead of
  posting a second one.
- :func:`review` and :func:`resume_command`: the decisions for LangChain's
  ``HumanInTheLoopMiddleware`` (batched ``HITLRequest`` or ``per_call`` ``ToolApprovalRequest``),
  approve or reject with the person's reason as the rejection message.

Everything is async (``ainvoke`` / ``astream``): nothing here blocks an event loop.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Unpack

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool
from langgraph.config import get_config
from langgraph.types import Command, Interrupt
from pydantic import BaseModel, Field

from bot.client import AskClient, AskOptions
from bot.integrations.common import (
    ASK_TOOL_DESCRIPTION,
    DEFAULT_GRACE_S,
    Decision,
    ask_and_wait,
    ask_for_approval,
    ask_from_tool,
    stable_ask_id,
    with_ask_id,
)
from contract import ResultEnvelope

if TYPE_CHECKING:
    from langchain.agents.middleware.human_in_the_loop import (
        ApproveDecision,
        HITLResponse,
        RejectDecision,
    )

__all__ = ["ask_in_node", "ask_tool", "node_ask_id", "resume_command", "review"]

_NODE_ASKS: contextvars.ContextVar[tuple[str, list[int]] | None] = contextvars.ContextVar(
    "slack_ask_node_asks", default=None
)


def _thread_id(config: Mapping[str, Any]) -> str | None:
    value = (config.get("configurable") or {}).get("thread_id")
    return None if value is None else str(value)


def node_ask_id(namespace: str = "lg") -> str:
    """The ``ask_id`` of the next ask of the running graph node: ``namespace:thread:node:step:n``,
    ``n`` counting this node's asks from 0 in each run of the node (hashed when too long or not
    ``ask_id`` characters). Only inside a node of a graph run with a ``thread_id``."""
    config = get_config()
    thread = _thread_id(config)
    if thread is None:
        raise ValueError("ask_in_node needs a checkpointed run: config['configurable']['thread_id']")
    meta = config.get("metadata") or {}
    namespace_path = str(meta.get("langgraph_checkpoint_ns") or meta.get("langgraph_node") or "")
    # Subgraph namespaces are "parent:<task id>|child:<task id>": the node names, without task ids.
    node = "/".join(part.partition(":")[0] for part in namespace_path.split("|"))
    counter = _NODE_ASKS.get()
    if counter is None or counter[0] != namespace_path:
        # LangGraph runs each node in a context of its own: a re-run starts again from 0.
        counter = (namespace_path, [0])
        _NODE_ASKS.set(counter)
    index = counter[1][0]
    counter[1][0] += 1
    return stable_ask_id(namespace, thread, node, meta.get("langgraph_step", ""), index)


async def ask_in_node(
    client: AskClient,
    request: Mapping[str, Any],
    *,
    grace_s: float = DEFAULT_GRACE_S,
    **options: Unpack[AskOptions],
) -> ResultEnvelope:
    """Ask a person from inside a graph node and wait for the result (its ``text`` is the
    narration). The ``ask_id`` is :func:`node_ask_id` unless given: run the node again (resume,
    crash, retry) and the same ask answers, with nothing posted twice."""
    ask_id = options.get("ask_id") or node_ask_id()
    return await ask_and_wait(client, request, grace_s=grace_s, **with_ask_id(options, ask_id))


class _AskArgs(BaseModel):
    questions: list[dict[str, Any]] = Field(description="1 to 8 questions", min_length=1, max_length=8)


def ask_tool(
    client: AskClient,
    *,
    name: str = "ask_person",
    description: str = ASK_TOOL_DESCRIPTION,
    grace_s: float = DEFAULT_GRACE_S,
    **options: Unpack[AskOptions],
) -> BaseTool:
    """A LangChain tool that asks a person in Slack (``options``: route, responders, timeout_ms, ...).

    It returns the contract's narration as the tool message's content and the details as its
    artifact. A request the contract refuses comes back as ``Error: <message>`` for the model to
    correct; Redis down raises :class:`~bot.client.RedisUnavailableError`. Inside a graph run with a
    ``thread_id`` the ``ask_id`` is derived from the thread, the step and the tool call's id, so a re-run
    of the tool node reuses the ask.
    """

    async def ask_person(
        questions: list[dict[str, Any]],
        config: RunnableConfig,
        tool_call_id: Annotated[str | None, InjectedToolCallId] = None,
    ) -> tuple[str, dict[str, Any]]:
        thread = _thread_id(config)
        # The step too: a model may reuse a tool call id later in a thread; a re-run never changes it.
        step = (config.get("metadata") or {}).get("langgraph_step", "")
        ask_options = (
            with_ask_id(options, stable_ask_id("lc", thread, step, tool_call_id))
            if thread is not None and tool_call_id
            else options
        )
        return await ask_from_tool(client, questions, grace_s=grace_s, options=ask_options)

    return StructuredTool.from_function(
        coroutine=ask_person,
        name=name,
        description=description,
        args_schema=_AskArgs,
        response_format="content_and_artifact",
    )


# ---------------------------------------------------------------- HumanInTheLoopMiddleware


def _without_ask_id(options: AskOptions) -> AskOptions:
    copied: AskOptions = {**options}
    copied.pop("ask_id", None)
    return copied


def _decision(decision: Decision) -> ApproveDecision | RejectDecision:
    if decision.approved:
        return {"type": "approve"}
    return {"type": "reject", "message": decision.message or "Rejected in Slack."}


async def review(
    client: AskClient,
    interrupt: Interrupt,
    *,
    grace_s: float = DEFAULT_GRACE_S,
    **options: Unpack[AskOptions],
) -> HITLResponse | ApproveDecision | RejectDecision:
    """The answer to one ``HumanInTheLoopMiddleware`` interrupt, asked in Slack: for a batched
    ``HITLRequest`` ``{"decisions": [...]}`` (one ask per action, in order), for a ``per_call``
    ``ToolApprovalRequest`` one decision. Each ask's id comes from the interrupt's id, so reviewing
    the same interrupt again (a crashed driver) reuses the asks."""
    value = interrupt.value
    if isinstance(value, Mapping) and value.get("type") == "tool_approval":
        decision = await ask_for_approval(
            client,
            str(value["name"]),
            value.get("args") or {},
            grace_s=grace_s,
            **with_ask_id(options, stable_ask_id("lc-hitl", interrupt.id)),
        )
        return _decision(decision)
    if not isinstance(value, Mapping) or "action_requests" not in value:
        raise ValueError(f"not a HumanInTheLoopMiddleware interrupt: {value!r}")
    decisions: list[ApproveDecision | RejectDecision] = []
    for index, action in enumerate(value["action_requests"]):
        decision = await ask_for_approval(
            client,
            str(action["name"]),
            action.get("args") or {},
            grace_s=grace_s,
            **with_ask_id(_without_ask_id(options), stable_ask_id("lc-hitl", interrupt.id, index)),
        )
        decisions.append(_decision(decision))
    response: HITLResponse = {"decisions": decisions}  # type: ignore[typeddict-item]
    return response


async def resume_command(
    client: AskClient,
    interrupts: Iterable[Interrupt] | Sequence[Interrupt],
    *,
    grace_s: float = DEFAULT_GRACE_S,
    **options: Unpack[AskOptions],
) -> Command[Any]:
    """The ``Command(resume=...)`` that answers every pending ``HumanInTheLoopMiddleware``
    interrupt of a run (``result.interrupts`` with ``version="v2"``) through Slack, keyed by
    interrupt id."""
    answers = {
        interrupt.id: await review(client, interrupt, grace_s=grace_s, **options) for interrupt in interrupts
    }
    return Command(resume=answers)
