"""The playground's web page and the JSON endpoints behind it, served by the fake Slack's own aiohttp app.

The page (static/index.html, app.js, app.css: hand-written, no external assets) renders what the bot sent,
and every person's action it reports comes back here and goes through the fake's human methods
(`FakeSlack.click`, `submit_view`, ...), so the bot receives the same signed payloads Slack would send.

    GET  /                   the page
    GET  /static/<file>      its script and style sheet
    GET  /ui/state?since=N   what the page renders (304-like `{"unchanged": true}` while nothing changed)
    GET  /ui/results         results on the playground's reply lists, newest first
    POST /ui/click           a person acts on a message element   {user, channel, ts, action_id, ...}
    POST /ui/view_action     a person acts on a modal element     {user, view_id, action_id, ...}
    POST /ui/submit          a person submits their top modal     {user, view_id, values}
    POST /ui/close           a person closes their top modal      {user, view_id}
    POST /ui/delete          an admin deletes a message           {channel, ts}
    POST /ui/ask             send an ask envelope (or a bare request) onto the stream
    POST /ui/home_open       a person opens the bot's Home tab (Slack sends `app_home_opened`) {user}
    POST /ui/home_click      a person acts on an element of their Home tab {user, action_id, ...}

POSTs must be `application/json` and same-origin: a page on another site cannot make a browser send
either without a CORS preflight this server never answers, so it cannot act in the playground.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Final, Protocol, TypedDict

from aiohttp import web

from bot.playground import payloads
from bot.playground.errors import FakeSlackError
from bot.playground.fakeslack import BotResponse, FakeSlack
from bot.playground.state import JSON, Message
from contract import (
    ContractError,
    EnvelopeError,
    approval_problem,
    normalize_ask_request,
    normalize_rich_form,
)
from contract.envelopes import parse_ask_envelope

__all__ = ["STATIC_DIR", "PlaygroundHost", "PlaygroundPage", "prepare_ask"]

STATIC_DIR: Final = Path(__file__).with_name("static")
ACTIVITY_SHOWN: Final = 40  # recent Web API calls and interactions the activity log shows
_ENVELOPE_KEYS: Final = frozenset({"v", "ask_id", "reply_to", "request"})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class PlaygroundHost(Protocol):
    """What the page needs from the running playground (`bot.playground.demo.Playground`)."""

    fake: FakeSlack
    default_channel: str
    watched: list[str]

    def envelope(self, fields: Mapping[str, Any]) -> dict[str, Any]: ...

    async def send_ask(self, envelope: Mapping[str, Any]) -> str: ...

    async def results(self) -> list[dict[str, Any]]: ...


class BadRequest(Exception):
    """The page sent something unusable; the message is shown to the person."""


def prepare_ask(
    text: str,
    *,
    host: PlaygroundHost,
    fmt: str | None = None,
    channel: str | None = None,
    responders: list[str] | None = None,
    timeout_ms: int | None = None,
    on_timeout: str | None = None,
    approvals: int | None = None,
    veto: str | None = None,
    requester: str | None = None,
) -> dict[str, Any]:
    """The envelope to send for the JSON `text` typed in the page, or `BadRequest` saying what is wrong.

    `text` is a whole envelope (it has `v` or `request`) or just a request; the form's fields fill what the
    JSON leaves out. The envelope and its request are checked as the bot will check them, so a mistake is
    reported beside the form instead of as an error result.
    """
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        msg = f"Not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        raise BadRequest(msg) from None
    if not isinstance(raw, dict):
        msg = "The ask must be a JSON object: an envelope, or a request with questions"
        raise BadRequest(msg)
    fields: dict[str, Any] = dict(raw) if raw.keys() & _ENVELOPE_KEYS else {"request": raw}
    if fmt in ("pi-question", "rich"):
        fields.setdefault("format", fmt)
    if channel:
        route = {"user": channel} if channel[:1] in {"U", "W"} else {"channel": channel}
        fields.setdefault("route", route)
    if responders:
        users = [r for r in responders if r[:1] in {"U", "W"}]
        groups = [r for r in responders if r[:1] == "S"]
        fields.setdefault("responders", {"users": users, "usergroups": groups})
    if timeout_ms:
        fields.setdefault("timeout_ms", timeout_ms)
    if on_timeout:
        fields.setdefault("on_timeout", on_timeout)
    if approvals:
        approval: dict[str, Any] = {"count": approvals}
        if veto:
            if not veto.isdigit():
                msg = f"Veto option: {veto!r} is not an option index (0, 1, ...)"
                raise BadRequest(msg)
            approval["veto"] = [int(veto)]
        fields.setdefault("approval", approval)
    elif veto:
        msg = "Veto option: a veto needs approvals (choose how many people must agree)"
        raise BadRequest(msg)
    if requester:
        fields.setdefault("requester", {}).setdefault("user", requester)
    envelope = host.envelope(fields)
    try:
        parsed = parse_ask_envelope(json.dumps(envelope))
    except EnvelopeError as exc:
        msg = f"Envelope: {exc.message} ({exc.code})"
        raise BadRequest(msg) from None
    normalize = normalize_rich_form if parsed.format == "rich" else normalize_ask_request
    try:
        normalize(envelope["request"])
    except ContractError as exc:
        msg = f"Request ({parsed.format}): {exc}"
        raise BadRequest(msg) from None
    if parsed.approval is not None:
        problem = approval_problem(
            parsed.approval,
            format=parsed.format,
            request=normalize_ask_request(envelope["request"]),
            on_timeout=parsed.on_timeout,
        )
        if problem is not None:
            msg = f"Envelope: {problem} (invalid_envelope)"
            raise BadRequest(msg)
    return envelope


def _required(body: Mapping[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value:
        msg = f"{name} is required"
        raise BadRequest(msg)
    return value


def _optional(body: Mapping[str, Any], name: str) -> str | None:
    """`body[name]` when given (then a non-empty string, as `_required` checks), else None."""
    return None if body.get(name) is None else _required(body, name)


def _strings(body: Mapping[str, Any], name: str) -> list[str] | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        msg = f"{name} must be a list of strings"
        raise BadRequest(msg)
    return list(value)


class _ElementArgs(TypedDict):
    value: str | None
    values: list[str] | None
    block_id: str | None


def _element_kwargs(body: Mapping[str, Any]) -> _ElementArgs:
    """The element-picking arguments of `FakeSlack.click` and `click_in_view`, as the page sent them."""
    return {
        "value": _optional(body, "value"),
        "values": _strings(body, "values"),
        "block_id": _optional(body, "block_id"),
    }


def _bot_answer(response: BotResponse | None) -> web.Response:
    """The bot's HTTP answer to a person's action, for the page to show (a failure as a notice)."""
    if response is None:
        return web.json_response({"ok": True, "status": None, "response": None})
    if response.status != 200:
        error = response.error or f"the bot answered HTTP {response.status}"
        return web.json_response({"ok": False, "status": response.status, "error": error})
    return web.json_response({"ok": True, "status": response.status, "response": response.body})


class PlaygroundPage:
    """Routes for the page on the fake's aiohttp app; add them with `install(app)` before it starts."""

    def __init__(self, host: PlaygroundHost) -> None:
        self.host = host

    @property
    def fake(self) -> FakeSlack:
        return self.host.fake

    def install(self, app: web.Application) -> None:
        app.middlewares.append(self._guard)
        app.add_routes(
            [
                web.get("/", self._index),
                web.get("/static/{name}", self._static),
                web.get("/ui/state", self._state),
                web.get("/ui/results", self._results),
                web.post("/ui/click", self._click),
                web.post("/ui/view_action", self._view_action),
                web.post("/ui/submit", self._submit),
                web.post("/ui/close", self._close),
                web.post("/ui/delete", self._delete),
                web.post("/ui/reply", self._reply),
                web.post("/ui/ask", self._ask),
                web.post("/ui/step", self._step),
                web.post("/ui/home_open", self._home_open),
                web.post("/ui/home_click", self._home_click),
            ]
        )

    # middleware: same-origin JSON only, and errors as JSON the page can show

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if not request.path.startswith("/ui/"):
            return await handler(request)
        if request.method == "POST":
            origin = request.headers.get("Origin")
            if request.content_type != "application/json" or (
                origin is not None and origin != f"{request.scheme}://{request.host}"
            ):
                return web.json_response(
                    {"ok": False, "error": "the playground takes JSON from its own page only"}, status=403
                )
        try:
            return await handler(request)
        except BadRequest as exc:
            return web.json_response({"ok": False, "error": str(exc)}, status=400)
        except FakeSlackError as exc:
            # Something a person could not do in Slack (e.g. a required field left empty).
            return web.json_response({"ok": False, "error": str(exc)}, status=409)

    async def _body(self, request: web.Request) -> JSON:
        try:
            body = await request.json()
        except json.JSONDecodeError:
            msg = "the request body is not JSON"
            raise BadRequest(msg) from None
        if not isinstance(body, dict):
            msg = "the request body must be a JSON object"
            raise BadRequest(msg)
        return body

    # the page itself

    async def _index(self, request: web.Request) -> web.StreamResponse:
        return web.FileResponse(STATIC_DIR / "index.html", headers={"Cache-Control": "no-store"})

    async def _static(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        path = STATIC_DIR / name
        # Only the page's own flat files; no path ever leaves the static folder.
        if "/" in name or "\\" in name or name.startswith(".") or not path.is_file():
            raise web.HTTPNotFound
        return web.FileResponse(path, headers={"Cache-Control": "no-store"})

    # reading

    async def _state(self, request: web.Request) -> web.StreamResponse:
        ws = self.fake.state
        since = request.query.get("since")
        if since is not None and since == str(ws.version):
            return web.json_response({"version": ws.version, "unchanged": True})
        return web.json_response(self.page_state())

    def page_state(self) -> JSON:
        """What the page renders: people, conversations, live messages, ephemerals, open modals, activity."""
        ws = self.fake.state

        def message(m: Any) -> JSON:
            data = dataclasses.asdict(m)
            data.pop("edits", None)
            data["edited"] = bool(m.edits)
            return data

        def posted(m: Message) -> JSON:
            data = message(m)
            data["delete_note"] = self._delete_note(m)
            return data

        return {
            "version": ws.version,
            "team": {"id": ws.team_id, "domain": ws.team_domain, "name": ws.team_name},
            "bot": dataclasses.asdict(ws.bot),
            "default_channel": self.host.default_channel,
            "users": [dataclasses.asdict(u) for u in ws.users.values()],
            "channels": [dataclasses.asdict(c) for c in ws.channels.values()],
            "usergroups": [dataclasses.asdict(g) for g in ws.usergroups.values()],
            "messages": {
                channel: [posted(m) for m in messages if not m.deleted]
                for channel, messages in ws.messages.items()
            },
            "ephemerals": [message(e) for e in ws.ephemerals if not e.deleted],
            "views": [
                {"id": v.id, "user": v.user, "hash": v.hash, "view": v.view, "errors": v.errors}
                for v in ws.views.values()
                if v.is_open
            ],
            "view_stacks": {user: list(stack) for user, stack in ws.view_stacks.items()},
            # Each person's Home tab as the bot last published it (views.publish), shown to that person only.
            "homes": {user: {"id": v.id, "hash": v.hash, "view": v.view} for user, v in ws.homes.items()},
            "activity": self._activity(),
        }

    def _activity(self) -> list[JSON]:
        """The latest Web API calls (with Slack's error names) and interaction payloads, newest first."""
        ws = self.fake.state
        entries: list[JSON] = [
            {"at": c.at, "kind": "api", "what": c.method, "ok": c.ok, "detail": c.error or str(c.status)}
            for c in ws.calls[-ACTIVITY_SHOWN:]
        ]
        entries += [
            {
                "at": i.at,
                "kind": "interaction",
                "what": i.type,
                "ok": i.status == 200,
                "detail": f"{i.user} -> HTTP {i.status}" if i.status else f"{i.user} -> no answer",
            }
            for i in ws.interactions[-ACTIVITY_SHOWN:]
        ]
        entries += [
            {
                "at": e.at,
                "kind": "event",
                "what": str(e.envelope.get("event", {}).get("type", "event")),
                "ok": e.delivered,
                "detail": f"HTTP {e.status}" if e.status else "not delivered",
            }
            for e in ws.events[-ACTIVITY_SHOWN:]
        ]
        entries.sort(key=lambda entry: float(entry["at"]), reverse=True)
        return entries[:ACTIVITY_SHOWN]

    async def _results(self, request: web.Request) -> web.StreamResponse:
        return web.json_response({"lists": list(self.host.watched), "results": await self.host.results()})

    # a person's actions

    async def _click(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request)
        response = await self.fake.click(
            _required(body, "user"),
            _required(body, "channel"),
            _required(body, "ts"),
            _required(body, "action_id"),
            **_element_kwargs(body),
        )
        return _bot_answer(response)

    async def _home_open(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request)
        return _bot_answer(await self.fake.open_home(_required(body, "user")))

    async def _home_click(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request)
        response = await self.fake.click_in_home(
            _required(body, "user"),
            _required(body, "action_id"),
            value=_optional(body, "value"),
            block_id=_optional(body, "block_id"),
        )
        return _bot_answer(response)

    async def _view_action(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request)
        response = await self.fake.click_in_view(
            _required(body, "user"),
            _required(body, "view_id"),
            _required(body, "action_id"),
            **_element_kwargs(body),
        )
        return _bot_answer(response)

    async def _submit(self, request: web.Request) -> web.StreamResponse:
        """Submit with `values` as {block_id: {action_id: answer}}; answers as a person gives them.

        An answer is an option value (or a list of them) for choices, the text for text inputs, and null
        or [] for nothing chosen. They become Slack's `state.values` entries here.
        """
        body = await self._body(request)
        user = _required(body, "user")
        view_id = _required(body, "view_id")
        given = body.get("values") or {}
        if not isinstance(given, dict):
            msg = "values must be an object {block_id: {action_id: answer}}"
            raise BadRequest(msg)
        blocks = self.fake.view(view_id).view.get("blocks") or []
        values: dict[str, dict[str, JSON]] = {}
        for block_id, by_action in given.items():
            if not isinstance(by_action, dict):
                msg = f"values[{block_id!r}] must be an object {{action_id: answer}}"
                raise BadRequest(msg)
            for action_id, answer in by_action.items():
                found = payloads.find_element(blocks, action_id, block_id=block_id, where=f"view {view_id}")
                values.setdefault(block_id, {})[action_id] = payloads.answer_state(found, answer)
        response = await self.fake.submit_view(user, view_id, values)
        return _bot_answer(response)

    async def _close(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request)
        response = await self.fake.close_view(_required(body, "user"), _required(body, "view_id"))
        return _bot_answer(response)

    async def _delete(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request)
        response = await self.fake.delete_message(_required(body, "channel"), _required(body, "ts"))
        return _bot_answer(response)

    async def _reply(self, request: web.Request) -> web.StreamResponse:
        """A person types a reply in a message's thread (the bot gets Slack's message event)."""
        body = await self._body(request)
        text = _required(body, "text")
        reply = await self.fake.reply(
            _required(body, "user"), _required(body, "channel"), _required(body, "thread_ts"), text
        )
        return web.json_response({"ok": True, "ts": reply.ts})

    def _delete_note(self, m: Message) -> str:
        """What the Delete dialog says will happen: exactly the event the bot gets, if any."""
        if m.tombstone:
            return "Already deleted: Slack keeps this placeholder while the thread has replies."
        event = self.fake.deletion_event(m)
        if event is None:
            channel = self.fake.state.channels.get(m.channel)
            name = f"#{channel.name}" if channel is not None else m.channel
            return (
                f"As a workspace admin. The bot is not a member of {name}, so Slack sends it no event: "
                "an ask this message carried keeps its buttons until it ends another way."
            )
        if event == "message_changed":
            return (
                "As a workspace admin. It has thread replies, so Slack leaves “This message was deleted.” "
                "in its place and sends the bot message_changed (a tombstone); a pending ask it carried ends "
                "as dismissed."
            )
        return (
            "As a workspace admin. Slack sends the bot message_deleted; a pending ask it carried ends as "
            "dismissed."
        )

    async def _step(self, request: web.Request) -> web.StreamResponse:
        """Run the Workflow Builder step "Ask a question" with ``inputs`` (docs/workflow-step.md)."""
        inputs = (await self._body(request)).get("inputs")
        if not isinstance(inputs, dict):
            msg = "inputs: the step's inputs as a JSON object (question, options, channel, ...)"
            raise BadRequest(msg)
        execution = await self.fake.run_step(inputs)
        return web.json_response({"ok": True, "execution_id": execution.id, "ask_id": f"wf.{execution.id}"})

    async def _ask(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request)
        text = body.get("text")
        if not isinstance(text, str) or not text.strip():
            msg = "Write the ask as JSON first"
            raise BadRequest(msg)
        timeout = body.get("timeout_ms")
        approvals = body.get("approvals")
        envelope = prepare_ask(
            text,
            host=self.host,
            fmt=_optional(body, "format"),
            channel=_optional(body, "channel"),
            responders=_strings(body, "responders"),
            timeout_ms=timeout if isinstance(timeout, int) and not isinstance(timeout, bool) else None,
            on_timeout=_optional(body, "on_timeout"),
            approvals=approvals if isinstance(approvals, int) and not isinstance(approvals, bool) else None,
            veto=_optional(body, "veto"),
            requester=_optional(body, "requester"),
        )
        entry = await self.host.send_ask(envelope)
        return web.json_response(
            {"ok": True, "ask_id": envelope["ask_id"], "reply_to": envelope["reply_to"], "entry": entry}
        )
