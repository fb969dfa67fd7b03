"""The Claude Agent SDK asking people in Slack for tool permissions (``pip install
'slack-ask[claude-agent]'``).

:func:`can_use_tool` builds the SDK's ``can_use_tool`` callback (``ClaudeAgentOptions(can_use_tool=...)``):
a tool the policy says needs a person becomes a slack-ask approval (tool name, input shown
safely, why Claude asks, who may approve, deadline), and the answer a ``PermissionResultAllow`` or a
``PermissionResultDeny`` whose message is the person's reason (the Decline reason, a note, or what
happened: timeout, dismissal). Tools the policy passes are allowed at once, tools it denies are
denied at once; neither posts anything.

The SDK cancels the callback's task when the session withdraws the request (``control_cancel_request``):
the ask is withdrawn in Slack too. Nothing here blocks the event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any, Unpack

from claude_agent_sdk import (
    CanUseTool,
    PermissionResult,
    PermissionResultAllow,
    PermissionResultDeny,
    ToolPermissionContext,
)

from bot.client import AskClient, AskOptions
from bot.integrations.common import DEFAULT_GRACE_S, ask_for_approval

__all__ = ["READ_ONLY_TOOLS", "can_use_tool"]

READ_ONLY_TOOLS = frozenset({"Read", "Glob", "Grep", "LS", "NotebookRead", "TodoWrite", "WebSearch"})
"""Claude Code's tools that change nothing: a sensible ``allow`` set."""

ToolTest = Callable[[str, Mapping[str, Any]], bool]


def _context_text(context: ToolPermissionContext) -> str | None:
    lines = []
    if context.decision_reason:
        lines.append(f"Why Claude asks: {context.decision_reason}")
    if context.blocked_path:
        lines.append(f"Path outside the allowed directories: {context.blocked_path}")
    if context.agent_id:
        lines.append(f"Asked by the sub-agent {context.agent_id}")
    return "\n\n".join(lines) or None


def _matches(rule: Collection[str] | ToolTest | None, tool: str, tool_input: Mapping[str, Any]) -> bool:
    if rule is None:
        return False
    if callable(rule):
        return bool(rule(tool, tool_input))
    return tool in rule


def can_use_tool(
    client: AskClient,
    *,
    allow: Collection[str] | ToolTest | None = None,
    deny: Collection[str] | ToolTest | None = None,
    grace_s: float = DEFAULT_GRACE_S,
    **options: Unpack[AskOptions],
) -> CanUseTool:
    """The ``can_use_tool`` callback: ``deny`` (tool names, or a test of name and input) is denied
    without asking, ``allow`` is allowed without asking, every other call is asked in Slack
    (``options``: route, responders, timeout_ms, on_timeout, ...). Redis down raises
    :class:`~bot.client.RedisUnavailableError` (the SDK answers the request with that error: the
    tool does not run)."""

    async def decide(
        tool_name: str, tool_input: dict[str, Any], context: ToolPermissionContext
    ) -> PermissionResult:
        if _matches(deny, tool_name, tool_input):
            return PermissionResultDeny(message=f"The tool {tool_name} is not allowed here.")
        if _matches(allow, tool_name, tool_input):
            return PermissionResultAllow()
        decision = await ask_for_approval(
            client, tool_name, tool_input, context=_context_text(context), grace_s=grace_s, **options
        )
        if decision.approved:
            return PermissionResultAllow()
        return PermissionResultDeny(message=decision.message or f"The call to {tool_name} was rejected.")

    return decide
