"""``slack-ask mcp``: a stdio MCP server with the tools ``ask`` and ``get_answer`` (protocol section 12).

MCP clients give up on a tool call after about a minute, while a human may take hours. So ``ask``
waits at most ``wait_s`` seconds; when the answer is not there yet it returns a handle (the ask's
id) and the model calls ``get_answer`` later. The result text is the bot's narration, the same text
pi-question's own tool returns.

Run it with ``slack-ask mcp`` or ``python -m bot.mcp_server``; settings come from ``REDIS_URL``,
``SLACK_ASK_PREFIX`` and ``SLACK_ASK_MCP_WAIT_S`` (default 25 seconds).
"""

# No ``from __future__ import annotations``: the SDK reads the tools' annotations at registration,
# and they refer to names local to build_server.
import argparse
import asyncio
import os
import re
import sys
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, Field
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from bot.cli import installed_version
from bot.cli.redis_args import redis_target
from bot.client import (
    AskClient,
    AskClientError,
    AskRequestError,
    RedisUnavailableError,
    add_connection_args,
)
from contract.envelopes import ASK_ID_PATTERN, ResultEnvelope
from contract.timeout import TimeoutPolicy

__all__ = [
    "DEFAULT_WAIT_S",
    "PENDING_TEXT",
    "UNKNOWN_HANDLE_TEXT",
    "ToolOutput",
    "add_parser",
    "build_server",
    "main",
    "serve",
]

DEFAULT_WAIT_S = 25.0
PENDING_TEXT = 'Still waiting for an answer. Call get_answer with handle "{handle}" later.'
UNKNOWN_HANDLE_TEXT = (
    "unknown handle {handle!r}: no ask with this id was sent (or its retention has ended). "
    "Use the handle an earlier ask call returned."
)
# Results already handed out, so a get_answer repeated after a lost response still answers.
_DELIVERED_MAX = 1000
_MAX_WAIT_S = 3600.0
_REDIS_DOWN = (RedisConnectionError, RedisTimeoutError, OSError)

_OPTION_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "string", "description": "the option's label"},
        {
            "type": "object",
            "properties": {
                "label": {"type": "string"},
                "description": {"type": "string", "description": "shown under the label"},
            },
            "required": ["label"],
            "additionalProperties": True,
        },
    ]
}

# The question contract's request, aliases included; the contract itself is the judge, so the
# schema guides the model without rejecting anything the contract accepts.
_QUESTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": (
        "One question. 'question' is required (aliases 'prompt', 'header'); 'options' needs 1 to 12 "
        "choices (alias 'choices'); do not add an 'Other' option yourself: free text is offered "
        "unless allowCustom is false."
    ),
    "properties": {
        "id": {"type": "string", "description": "stable and unique within the ask (default q1, q2, ...)"},
        "question": {"type": "string", "description": "the prompt"},
        "description": {"type": "string", "description": "optional Markdown context (alias 'context')"},
        "options": {"type": "array", "items": _OPTION_SCHEMA, "minItems": 1, "maxItems": 12},
        "multi": {"type": "boolean", "description": "allow more than one option (alias 'multiple')"},
        "recommended": {
            "type": "integer",
            "minimum": 0,
            "description": "zero-based index of the recommended option (alias 'recommendedIndex')",
        },
        "allowCustom": {"type": "boolean", "description": "offer free text; default true"},
        "category": {"enum": ["implementation", "scope-product", "security-permission"]},
        "prompt": {"type": "string"},
        "header": {"type": "string"},
        "context": {"type": "string"},
        "choices": {"type": "array", "items": _OPTION_SCHEMA},
        "recommendedIndex": {"type": "integer", "minimum": 0},
        "multiple": {"type": "boolean"},
    },
    # What a model should send; the aliases stay accepted (the contract decides), only not advertised
    # as an alternative to the required names.
    "required": ["question", "options"],
    "additionalProperties": True,
}

_ROUTE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": (
        "Where to ask: exactly one of channel (optionally with thread_ts), user (id or email: a direct "
        "message) or policy (a named policy of the bot). Omit to use the bot's default route."
    ),
    "properties": {
        "channel": {"type": "string"},
        "thread_ts": {"type": "string"},
        "user": {"type": "string"},
        "policy": {"type": "string"},
    },
}

_RESPONDERS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Who may answer: Slack user ids (U...) and user-group ids (S...). Omit: anyone.",
    "properties": {
        "users": {"type": "array", "items": {"type": "string"}},
        "usergroups": {"type": "array", "items": {"type": "string"}},
    },
}


_APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": (
        "Several people must agree (one single-choice question only): count distinct people (2-20) must "
        "pick the same option; one vote for an option in veto (0-based indexes) ends it at once; "
        "exclude_requester (default true): requester_user may not vote. Never defaults on timeout."
    ),
    "properties": {
        "count": {"type": "integer", "minimum": 2, "maximum": 20},
        "veto": {"type": "array", "items": {"type": "integer", "minimum": 0}},
        "exclude_requester": {"type": "boolean"},
    },
    "required": ["count"],
}


def _schema(replacement: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    """A ``json_schema_extra`` that publishes ``replacement`` instead of pydantic's permissive schema."""

    def apply(schema: dict[str, Any]) -> None:
        description = schema.get("description")
        schema.clear()
        schema.update(replacement)
        if description and "description" not in replacement:
            schema["description"] = description

    return apply


def _optional(schema: dict[str, Any]) -> dict[str, Any]:
    # The description on the property itself too: clients show a property's own description and
    # seldom look inside anyOf.
    wrapper: dict[str, Any] = {"anyOf": [schema, {"type": "null"}], "default": None}
    if "description" in schema:
        wrapper = {"description": schema["description"], **wrapper}
    return wrapper


class ToolOutput(BaseModel):
    """The structured content of both tools (their ``outputSchema``)."""

    handle: str = Field(description="the ask's id: pass it to get_answer")
    status: Literal["pending", "done"] = Field(description="pending: nobody has answered yet")
    outcome: Literal["answered", "cancelled", "timeout", "dismissed", "unavailable", "error"] | None = Field(
        default=None, description="with status done: how the ask ended"
    )
    result: dict[str, Any] | None = Field(
        default=None, description="with status done: the whole result envelope (protocol section 3)"
    )


def _default_wait_s() -> float:
    raw = os.environ.get("SLACK_ASK_MCP_WAIT_S")
    if not raw:
        return DEFAULT_WAIT_S
    try:
        value = float(raw)
    except ValueError:
        raise SystemExit(f"SLACK_ASK_MCP_WAIT_S={raw!r} is not a number of seconds") from None
    return max(0.0, value)


def _pending(handle: str) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=PENDING_TEXT.format(handle=handle))],
        structured_content={"handle": handle, "status": "pending"},
    )


def _answered(result: ResultEnvelope, handle: str) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=result.text)],
        structured_content={
            "handle": handle,
            "status": "done",
            "outcome": result.outcome,
            "result": result.to_wire(),
        },
        is_error=result.outcome == "error",
    )


def _failed(message: str) -> CallToolResult:
    # The protocol's error text form, so the model reads errors the way results write them.
    return CallToolResult(content=[TextContent(type="text", text=f"Error: {message}")], is_error=True)


def build_server(client: AskClient, *, default_wait_s: float = DEFAULT_WAIT_S) -> MCPServer:
    """The MCP server object with its two tools, talking to Redis through ``client``."""
    server: MCPServer = MCPServer(
        "slack-ask",
        instructions=(
            "Ask a human a structured question in Slack with the ask tool; if the answer has not come "
            "within wait_s, call get_answer with the returned handle later. Never assume an answer."
        ),
        log_level="WARNING",
        version=installed_version(),
    )
    delivered: OrderedDict[str, ResultEnvelope] = OrderedDict()
    # Handles this server gave out: known even before a bot has taken the ask into its store.
    issued: OrderedDict[str, None] = OrderedDict()

    def issue(handle: str) -> None:
        issued[handle] = None
        while len(issued) > _DELIVERED_MAX:
            issued.popitem(last=False)

    async def known(handle: str) -> bool:
        if handle in issued:
            return True
        # Lazy, as in the client: the store is the bot's module.
        from bot.storage.store import Store

        if await client.redis.exists(client.reply_list(handle)):
            return True  # a result waits on its list (the store may have expired it already)
        return await Store(client.redis, prefix=client.prefix).find(handle) is not None

    def remember(handle: str, result: ResultEnvelope) -> CallToolResult:
        delivered[handle] = result
        delivered.move_to_end(handle)
        while len(delivered) > _DELIVERED_MAX:
            delivered.popitem(last=False)
        return _answered(result, handle)

    def bound(wait_s: float | None) -> float:
        return min(_MAX_WAIT_S, default_wait_s if wait_s is None else wait_s)

    async def await_result(handle: str, wait_s: float, *, stored: bool) -> CallToolResult:
        try:
            # get_answer looks in the store first: a result already taken off the list (by this
            # server before a restart, its response lost) is there, and waiting on the empty list
            # would hold the call for all of wait_s before finding it.
            result = await stored_result(handle) if stored else None
            if result is not None:
                # Its push may still be on the list: take it off too (the list's copy is the same).
                result = await client.wait(handle, 0) or result
            else:
                result = await client.wait(handle, wait_s)
        except RedisUnavailableError as exc:
            return _failed(f"{exc}. The ask {handle} is kept; call get_answer again later.")
        except AskClientError as exc:
            return _failed(str(exc))
        return _pending(handle) if result is None else remember(handle, result)

    async def stored_result(handle: str) -> ResultEnvelope | None:
        # The reply list is empty but the ask may have ended and its result been popped already
        # (a get_answer whose response was lost): the bot's store still has it.
        try:
            return await client.result(handle)
        except RedisUnavailableError:
            raise
        except Exception:  # the store is the bot's; a failure there must not fail the tool
            return None

    @server.tool(
        description=(
            "Ask a human in Slack one to eight structured questions (the pi-question request) and return "
            "their answers as text. Returns early with a handle for get_answer when no answer comes "
            "within wait_s seconds."
        )
    )
    async def ask(
        questions: Annotated[
            list[Any],
            Field(
                description="1 to 8 questions",
                json_schema_extra=_schema(
                    {"type": "array", "items": _QUESTION_SCHEMA, "minItems": 1, "maxItems": 8}
                ),
            ),
        ],
        route: Annotated[
            dict[str, Any] | None, Field(json_schema_extra=_schema(_optional(_ROUTE_SCHEMA)))
        ] = None,
        timeout_ms: Annotated[
            int | None,
            Field(
                ge=0,
                description=(
                    "how long the human has to answer, as a duration in milliseconds (not a timestamp): "
                    "600000 is 10 minutes; 0 or omitted: the bot's default"
                ),
            ),
        ] = None,
        on_timeout: Annotated[
            TimeoutPolicy | None,
            Field(description="at the deadline: cancel (default), apply the recommended option, or error"),
        ] = None,
        responders: Annotated[
            dict[str, Any] | None, Field(json_schema_extra=_schema(_optional(_RESPONDERS_SCHEMA)))
        ] = None,
        approval: Annotated[
            dict[str, Any] | None, Field(json_schema_extra=_schema(_optional(_APPROVAL_SCHEMA)))
        ] = None,
        requester_user: Annotated[
            str | None,
            Field(
                description=(
                    "the Slack user id or e-mail of the person you act for; with approval they may not vote"
                )
            ),
        ] = None,
        wait_s: Annotated[
            float | None,
            Field(
                ge=0,
                description=(
                    f"seconds to wait for the answer before returning a handle (default {default_wait_s:g}). "
                    "Keep it under your client's tool-call limit (many MCP clients give up on a call "
                    "after about 60 s); call get_answer with the handle to wait longer."
                ),
            ),
        ] = None,
    ) -> Annotated[CallToolResult, ToolOutput]:
        try:
            handle = await client.submit(
                {"questions": questions},
                route=route,
                timeout_ms=timeout_ms,
                on_timeout=on_timeout,
                responders=responders,
                approval=approval,
                requester={"user": requester_user} if requester_user else None,
            )
        except AskRequestError as exc:
            return _failed(exc.message)
        except RedisUnavailableError as exc:
            return _failed(f"{exc}; the question was not sent.")
        issue(handle)
        return await await_result(handle, bound(wait_s), stored=False)

    @server.tool(
        description=(
            "Get the answer to an earlier ask by its handle. Waits up to wait_s seconds; returns the same "
            "pending text with the handle while nobody has answered yet."
        )
    )
    async def get_answer(
        handle: Annotated[str, Field(description="the handle an earlier ask returned")],
        wait_s: Annotated[
            float | None,
            Field(
                ge=0,
                description=(
                    f"seconds to wait (default {default_wait_s:g}); keep it under your client's tool-call "
                    "limit (often about 60 s) and call again while the status is pending"
                ),
            ),
        ] = None,
    ) -> Annotated[CallToolResult, ToolOutput]:
        if not re.fullmatch(ASK_ID_PATTERN, handle):
            return _failed(f"{handle!r} is not a handle returned by ask")
        if handle in delivered:
            return _answered(delivered[handle], handle)
        try:
            if not await known(handle):
                # Waiting would say "Still waiting" for ever: nobody will ever answer an ask never sent.
                return _failed(UNKNOWN_HANDLE_TEXT.format(handle=handle))
        except _REDIS_DOWN as exc:
            return _failed(f"Redis is unavailable: {exc}. Call get_answer again later.")
        return await await_result(handle, bound(wait_s), stored=True)

    return server


async def _serve_client(client: AskClient, *, default_wait_s: float) -> None:
    async with client:
        await build_server(client, default_wait_s=default_wait_s).run_stdio_async()


async def serve(redis_url: str, prefix: str, *, default_wait_s: float) -> None:
    """Serve MCP on stdin/stdout until the client closes them."""
    await _serve_client(AskClient(redis_url, prefix=prefix), default_wait_s=default_wait_s)


async def _serve_args(url: str, prefix: str, *, default_wait_s: float) -> int:
    try:
        client = AskClient(url, prefix=prefix)
    except ValueError as exc:  # a malformed Redis URL
        print(f"slack-ask mcp: error: --redis: {exc}", file=sys.stderr)
        return 2
    await _serve_client(client, default_wait_s=default_wait_s)
    return 0


def _run(args: argparse.Namespace) -> int:
    target = redis_target(args.redis, args.prefix)
    if (problem := target.problem()) is not None:
        # Before stdio is taken over: an MCP client shows the server's stderr when it fails to start.
        print(f"slack-ask mcp: error: {problem}", file=sys.stderr)
        return 2
    wait_s = args.wait_s if args.wait_s is not None else _default_wait_s()
    return asyncio.run(_serve_args(target.url, target.prefix, default_wait_s=wait_s))


def _configure(p: argparse.ArgumentParser) -> None:
    add_connection_args(p)
    p.add_argument(
        "--wait-s",
        type=float,
        metavar="SECONDS",
        help=f"default wait of the tools (env SLACK_ASK_MCP_WAIT_S, default {DEFAULT_WAIT_S:g})",
    )
    p.set_defaults(func=_run)


def add_parser(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = subparsers.add_parser(
        "mcp",
        help="serve the ask and get_answer tools to an MCP client over stdio",
        description="A stdio MCP server with two tools: ask and get_answer.",
    )
    _configure(p)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bot.mcp_server", description="slack-ask MCP server (stdio)"
    )
    _configure(parser)
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
