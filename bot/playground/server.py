"""The fake Slack's HTTP side: what answers the app's Web API and response_url requests.

A mixin of `FakeSlack`: the routes' handlers check tokens, apply planned faults and, when enforced, Slack's
rate limits (`ratelimits.py`), and hand each method to `WebApi` (`webapi.py`, the methods themselves);
response_url posts replace, delete or add messages; the Socket Mode WebSocket says hello. Nothing here
plays a person (that is `people.py`).
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web

from bot.playground import payloads
from bot.playground.functions import Functions
from bot.playground.ratelimits import RateLimiter
from bot.playground.state import JSON, Call, Channel, Ephemeral, Message, ResponsePost, ResponseUrl, Workspace
from bot.playground.webapi import ApiError, WebApi

__all__ = ["RESPONSE_URL_TTL", "RESPONSE_URL_USES", "Fault", "WebApiServer"]

RESPONSE_URL_TTL = 30 * 60  # seconds; Slack: up to 5 uses within 30 minutes
RESPONSE_URL_USES = 5


@dataclass
class Fault:
    """A planned failure of the next `remaining` calls to `method` ("*" for any)."""

    method: str
    error: str
    status: int
    retry_after: int
    remaining: int
    body: str | None = None
    """A raw body instead of Slack's JSON (an HTML error page from a proxy, say), as `content_type`."""
    content_type: str = "text/plain"


class WebApiServer:
    """The Web API side of `FakeSlack` (which sets these attributes up and adds the routes)."""

    state: Workspace
    api: WebApi
    functions: Functions
    bot_token: str
    app_token: str
    scopes: list[str]
    latency: float
    method_latency: dict[str, float]
    reply_latency: dict[str, float]
    socket_connections: int
    _sockets: set[web.WebSocketResponse]
    _faults: list[Fault]
    limits: RateLimiter
    _unreachable: bool
    _host: str

    if TYPE_CHECKING:  # provided by FakeSlack and People

        @property
        def port(self) -> int: ...
        def now(self) -> float: ...
        def _channel(self, channel_id: str) -> Channel: ...
        def _emit(self, event: JSON, channel: Channel) -> None: ...

    # faults

    def fail_next(
        self,
        method: str,
        *,
        error: str | None = None,
        status: int | None = None,
        retry_after: int = 1,
        times: int = 1,
        body: str | None = None,
        content_type: str = "text/plain",
    ) -> None:
        """Make the next `times` calls of `method` ("*": any method) fail.

        No error/status: 429 `ratelimited` with `Retry-After: retry_after`. `status=500/503`: a server
        error. `error="channel_not_found"` alone: HTTP 200 with `{"ok": false, "error": ...}`.
        `body`: answer that text (as `content_type`, e.g. "text/html") instead of Slack's JSON.
        """
        if status is None:
            status = 429 if error in (None, "ratelimited") else 200
        if error is None:
            error = {429: "ratelimited", 200: "fatal_error"}.get(status, "internal_error")
        self._faults.append(
            Fault(
                method=method,
                error=error,
                status=status,
                retry_after=retry_after,
                remaining=times,
                body=body,
                content_type=content_type,
            )
        )

    def set_unreachable(self, unreachable: bool = True) -> None:
        """While on, every Web API and response_url request has its connection dropped unanswered."""
        self._unreachable = unreachable

    def clear_faults(self) -> None:
        self._faults.clear()
        self._unreachable = False

    def _take_fault(self, method: str) -> Fault | None:
        for fault in self._faults:
            if fault.method in (method, "*"):
                fault.remaining -= 1
                if fault.remaining <= 0:
                    self._faults.remove(fault)
                return fault
        return None

    def _permalink_base(self) -> str:
        return f"https://{self.state.team_domain}.slack.com/archives/"

    async def _params(self, request: web.Request) -> JSON:
        params: JSON = dict(request.query)
        if request.method != "POST" or not request.can_read_body:
            return params
        if request.content_type == "application/json":
            body = await request.json()
            if not isinstance(body, dict):
                raise ApiError("invalid_json")
            params.update(body)
        else:
            form = await request.post()
            params.update({key: value for key, value in form.items() if isinstance(value, str)})
        return params

    def _drop_connection(self, request: web.Request) -> web.Response:
        # Abort the TCP connection so the client sees a network error, not an HTTP answer.
        if request.transport is not None:
            request.transport.abort()
        return web.Response(status=503)

    async def _handle_api(self, request: web.Request) -> web.StreamResponse:
        method = request.match_info["method"]
        try:
            params = await self._params(request)
        except (ApiError, json.JSONDecodeError):
            params = {}
            parse_error: str | None = "invalid_json"
        else:
            parse_error = None
        token = params.pop("token", None)
        delay = self.latency + self.method_latency.get(method, 0.0)
        if delay > 0:
            await asyncio.sleep(delay)
        call = Call(method=method, params=params, at=self.now())
        self.state.calls.append(call)
        self.state.touch()
        self.limits.count(method)
        if self._unreachable:
            call.status = 0
            return self._drop_connection(request)
        fault = self._take_fault(method)
        headers: dict[str, str] = {}
        if fault is not None:
            call.status, call.response = fault.status, {"ok": False, "error": fault.error}
            if fault.status == 429:
                headers["Retry-After"] = str(fault.retry_after)
            if fault.body is not None:
                return web.Response(
                    text=fault.body, status=fault.status, content_type=fault.content_type, headers=headers
                )
            return web.json_response(call.response, status=fault.status, headers=headers)
        authorization = request.headers.get("Authorization", "")
        given = (
            authorization.removeprefix("Bearer ").strip() if authorization.startswith("Bearer ") else token
        )
        # A workflow step's just-in-time token (functions.py) works while its step runs.
        jit = self.functions.token_state(given) if given else None
        authorized = (
            given == self.bot_token
            or jit == "live"
            or (method == "apps.connections.open" and given == self.app_token)
        )
        retry_after = self.limits.admit(method, self._post_channel(params)) if authorized else None
        if retry_after is not None:
            # Exactly Slack's answer over a limit (docs/slack-limits.md); nothing is done or taken.
            call.status, call.response = 429, {"ok": False, "error": "ratelimited"}
            return web.json_response(call.response, status=429, headers={"Retry-After": str(retry_after)})
        if parse_error is not None:
            call.response = {"ok": False, "error": parse_error}
        elif not given:
            call.response = {"ok": False, "error": "not_authed"}
        elif method == "apps.connections.open":
            call.response = self._connections_open(given)
        elif given == self.app_token:
            call.response = {"ok": False, "error": "not_allowed_token_type"}
        elif given != self.bot_token and jit != "live":
            call.response = {"ok": False, "error": f"token_{jit}" if jit else "invalid_auth"}
        elif method in ("functions.completeSuccess", "functions.completeError"):
            call.response = self.functions.call(method, params, token=given, bot_token=self.bot_token)
        else:
            try:
                call.response = self.api.call(method, params)
            except ApiError as exc:
                call.response = exc.to_response()
        if given == self.bot_token:
            headers["x-oauth-scopes"] = ",".join(self.scopes)
        self.state.touch()
        if (hold := self.reply_latency.get(method, 0.0)) > 0:
            await asyncio.sleep(hold)
        return web.json_response(call.response, headers=headers)

    def _post_channel(self, params: JSON) -> str | None:
        """The conversation a post goes to, for its per-channel limit (a user id: the DM with them)."""
        channel = params.get("channel")
        return self.state.resolve_channel_id(channel) if isinstance(channel, str) and channel else None

    def _connections_open(self, token: str) -> JSON:
        """Slack's `apps.connections.open`: only an app-level token may open a Socket Mode connection."""
        if token == self.bot_token:
            return {"ok": False, "error": "not_allowed_token_type"}
        if token != self.app_token:
            return {"ok": False, "error": "invalid_auth"}
        ticket = secrets.token_hex(8)
        return {"ok": True, "url": f"ws://{self._host}:{self.port}/_fake/socket?ticket={ticket}"}

    async def _handle_socket(self, request: web.Request) -> web.StreamResponse:
        socket = web.WebSocketResponse(autoping=True)
        await socket.prepare(request)
        self._sockets.add(socket)
        self.socket_connections += 1
        try:
            await socket.send_json(
                {
                    "type": "hello",
                    "num_connections": len(self._sockets),
                    "connection_info": {"app_id": self.state.bot.app_id},
                    "debug_info": {"host": "fake-slack", "approximate_connection_time": 3600},
                }
            )
            async for _ in socket:
                pass  # acknowledgements of envelopes; the fake sends none over the socket yet
        finally:
            self._sockets.discard(socket)
        return socket

    async def _handle_response_url(self, request: web.Request) -> web.StreamResponse:
        if self.latency > 0:
            await asyncio.sleep(self.latency)
        if self._unreachable:
            return self._drop_connection(request)
        token = request.match_info["token"]
        try:
            body = await request.json()
        except json.JSONDecodeError:
            body = None
        if not isinstance(body, dict):
            return self._response_outcome(token, {}, 400, "invalid_payload")
        target = self.state.response_urls.get(token)
        if target is None:
            return self._response_outcome(token, body, 404, "invalid_url")
        if self.now() - target.issued_at > RESPONSE_URL_TTL:
            return self._response_outcome(token, body, 404, "expired_url")
        if target.uses >= RESPONSE_URL_USES:
            return self._response_outcome(token, body, 404, "used_url")
        target.uses += 1
        try:
            outcome = self._apply_response(target, body)
        except ApiError as exc:
            return self._response_outcome(token, body, 400, exc.error)
        return self._response_outcome(token, body, 200, outcome)

    def _response_outcome(self, token: str, body: JSON, status: int, outcome: str) -> web.Response:
        self.state.responses.append(
            ResponsePost(token=token, body=body, at=self.now(), status=status, outcome=outcome)
        )
        self.state.touch()
        if status == 200:
            return web.json_response({"ok": True})
        return web.json_response({"ok": False, "error": outcome}, status=status)

    def _apply_response(self, target: ResponseUrl, body: JSON) -> str:
        """Apply a response_url message: replace or delete the original, or post a new (ephemeral) one."""
        ws = self.state
        channel = self._channel(target.channel or "")
        original: Message | Ephemeral | None
        if target.is_ephemeral:
            original = ws.find_ephemeral(channel.id, target.message_ts or "", target.user)
        else:
            original = ws.find_message(channel.id, target.message_ts or "")
        if _flag(body, "delete_original"):
            if original is None or original.deleted:
                raise ApiError("message_not_found")
            if isinstance(original, Message):
                before, tombstone = ws.delete_message(original)
                event = payloads.message_removed_event(before, tombstone, channel, event_ts=ws.next_ts())
                self._emit(event, channel)
            else:
                original.deleted = True
                ws.touch()
            return "deleted"
        text, blocks = self.api.content(body)
        if _flag(body, "replace_original"):
            if original is None or original.deleted:
                raise ApiError("message_not_found")
            original.replace(text=text, blocks=blocks, at=ws.next_ts(), via="response_url")
            ws.touch()
            return "replaced"
        thread_ts = body.get("thread_ts")
        if body.get("response_type") == "in_channel":
            ws.post_as_bot(
                channel.id,
                text=text,
                blocks=blocks,
                thread_ts=thread_ts if isinstance(thread_ts, str) else None,
            )
            return "in_channel"
        ws.ephemerals.append(
            Ephemeral(
                channel=channel.id,
                user=target.user,
                ts=ws.next_ts(),
                text=text,
                blocks=blocks,
                via="response_url",
                thread_ts=thread_ts if isinstance(thread_ts, str) else None,
            )
        )
        ws.touch()
        return "ephemeral"

    async def _handle_state(self, request: web.Request) -> web.StreamResponse:
        return web.json_response(self.state.snapshot())

    async def _handle_limits(self, request: web.Request) -> web.StreamResponse:
        return web.json_response(
            {
                "enabled": self.limits.enabled,
                "speedup": self.limits.speedup,
                "methods": self.limits.stats(),
                "limited_channels": dict(self.limits.limited_channels),
            }
        )


def _flag(body: Mapping[str, Any], name: str) -> bool:
    value = body.get(name)
    return value is True or (isinstance(value, str) and value.lower() == "true")
