"""A stateful fake of Slack on loopback HTTP: the Web API for the bot, and the humans who click.

The bot under test talks to it exactly as to Slack (`AsyncWebClient(base_url=fake.api_url)`), and the fake
plays the people: it renders nothing, but it finds what the bot really rendered and sends the bot the same
signed interaction payloads and events Slack would (`click`, `fill_and_submit`, `archive_channel`...).

    fake = FakeSlack.with_demo_workspace(signing_secret="secret")
    await fake.start()
    fake.events_url = "http://127.0.0.1:3000/slack/events"   # once the bot listens
    ...
    message = await fake.wait_for(lambda: fake.last_message("C0DEPLOY"))
    response = await fake.click("U0ALICE", "C0DEPLOY", message.ts, "choose:0")
    await fake.stop()

Routes: `/api/<method>` (Web API), `/response/<token>` (response_url), `GET /_fake/state` (the whole state
as JSON, for the playground page), `GET /_fake/socket` (the Socket Mode WebSocket that
`apps.connections.open` hands out: it says hello and keeps the connection open; events still go to
`events_url` over HTTP). Add more routes to `fake.app` before `start()`.

Tokens: `bot_token` for the Web API, whose answers carry the granted `scopes` in an `x-oauth-scopes`
header as Slack's do; `app_token` (app-level) for `apps.connections.open` only.
"""

from __future__ import annotations

import asyncio
import copy
import json
import secrets
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self, TypeVar

import aiohttp
from aiohttp import web

from bot.playground import payloads
from bot.playground.errors import FakeSlackError
from bot.playground.state import (
    JSON,
    BotIdentity,
    Call,
    Channel,
    Ephemeral,
    Interaction,
    Message,
    ResponsePost,
    ResponseUrl,
    SentEvent,
    Trigger,
    User,
    Usergroup,
    View,
    Workspace,
    draft_key,
)
from bot.playground.webapi import MAX_VIEW_STACK, ApiError, WebApi
from bot.slack.scopes import BOT_SCOPES

__all__ = ["BotResponse", "FakeSlack", "Fault"]

_T = TypeVar("_T")

RESPONSE_URL_TTL = 30 * 60  # seconds; Slack: up to 5 uses within 30 minutes
RESPONSE_URL_USES = 5


@dataclass(frozen=True)
class BotResponse:
    """The bot's HTTP answer to something the fake sent it. `status` 0: no answer (see `error`)."""

    status: int
    body: Any  # parsed JSON when the body is JSON, else the text, None when empty
    text: str = ""
    headers: Mapping[str, str] | None = None
    error: str | None = None

    @property
    def json(self) -> JSON:
        """The body as a JSON object (empty when it is not one), e.g. `{"response_action": "errors", ...}`."""
        return self.body if isinstance(self.body, dict) else {}


@dataclass
class Fault:
    """A planned failure of the next `remaining` calls to `method` ("*" for any)."""

    method: str
    error: str
    status: int
    retry_after: int
    remaining: int


def _parse_body(text: str) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


class FakeSlack:
    """Slack's Web API, Events API sender and interactive humans, served on loopback."""

    def __init__(
        self,
        *,
        signing_secret: str,
        bot_token: str = "xoxb-fake-token",
        app_token: str = "xapp-fake-app-token",
        scopes: Iterable[str] = BOT_SCOPES,
        events_url: str | None = None,
        team_id: str = "T0FAKE",
        team_domain: str = "fake-workspace",
        bot: BotIdentity | None = None,
    ) -> None:
        self.signing_secret = signing_secret
        self.bot_token = bot_token
        self.app_token = app_token
        self.scopes = list(scopes)  # what the bot token was granted (the x-oauth-scopes header)
        self.socket_connections = 0  # Socket Mode WebSockets opened so far
        self._sockets: set[web.WebSocketResponse] = set()
        self.events_url = events_url  # the bot's POST /slack/events; may be set once the bot listens
        self.latency = 0.0  # seconds added to every Web API and response_url request
        self.ack_timeout = 3.0  # how long the fake waits for the bot's HTTP answer (Slack: 3 s)
        self._clock_offset = 0.0
        self.state = Workspace(team_id=team_id, team_domain=team_domain, bot=bot, now=self.now)
        self.api = WebApi(self.state, emit=self._emit, permalink_base=self._permalink_base)
        self._faults: list[Fault] = []
        self._unreachable = False
        self._host = "127.0.0.1"
        self._port: int | None = None
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._deliveries: set[asyncio.Task[BotResponse | None]] = set()
        self.app = web.Application()
        self.app.add_routes(
            [
                web.route("*", "/api/{method}", self._handle_api),
                web.post("/response/{token}", self._handle_response_url),
                web.get("/_fake/state", self._handle_state),
                web.get("/_fake/socket", self._handle_socket),
            ]
        )

    # lifecycle

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> None:
        """Listen on `host:port` (0: any free port); `api_url` is valid afterwards."""
        if self._runner is not None:
            msg = "FakeSlack is already started"
            raise FakeSlackError(msg)
        runner = web.AppRunner(self.app, access_log=None)
        await runner.setup()
        try:
            await web.TCPSite(runner, host, port).start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self._host = host
        self._port = int(runner.addresses[0][1])
        self._session = aiohttp.ClientSession()

    async def stop(self) -> None:
        """Stop serving; events still in flight to the bot are cancelled."""
        for task in list(self._deliveries):
            task.cancel()
        for socket in list(self._sockets):
            await socket.close()
        if self._deliveries:
            await asyncio.gather(*self._deliveries, return_exceptions=True)
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    @property
    def port(self) -> int:
        if self._port is None:
            msg = "FakeSlack is not started: await fake.start() first"
            raise FakeSlackError(msg)
        return self._port

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:<port>/`."""
        return f"http://{self._host}:{self.port}/"

    @property
    def api_url(self) -> str:
        """The Web API base URL for `AsyncWebClient(base_url=...)`: `http://127.0.0.1:<port>/api/`."""
        return f"{self.base_url}api/"

    # time

    def now(self) -> float:
        """The fake's wall clock (real time plus `advance_clock` offsets)."""
        return time.time() + self._clock_offset

    def advance_clock(self, seconds: float) -> None:
        """Move the fake's clock on, e.g. past a trigger_id's 3 s life, without sleeping."""
        self._clock_offset += seconds

    # configuration forwarded to the Web API

    @property
    def trigger_ttl(self) -> float:
        return self.api.trigger_ttl

    @trigger_ttl.setter
    def trigger_ttl(self, seconds: float) -> None:
        self.api.trigger_ttl = seconds

    @property
    def chat_write_public(self) -> bool:
        """Whether the app may post in public channels it is not in (False: `not_in_channel`)."""
        return self.api.chat_write_public

    @chat_write_public.setter
    def chat_write_public(self, allowed: bool) -> None:
        self.api.chat_write_public = allowed

    # state, for tests (the records themselves are in `self.state`)

    def messages(self, channel: str, *, include_deleted: bool = False) -> list[Message]:
        """Messages of a conversation (a user id means the bot's DM with them), thread replies included."""
        channel_id = self.state.resolve_channel_id(channel)
        return [m for m in self.state.messages.get(channel_id, []) if include_deleted or not m.deleted]

    def last_message(self, channel: str) -> Message | None:
        found = self.messages(channel)
        return found[-1] if found else None

    def thread(self, channel: str, thread_ts: str) -> list[Message]:
        """Replies in the thread under `thread_ts` (not the parent)."""
        return [m for m in self.messages(channel) if m.thread_ts == thread_ts and m.ts != thread_ts]

    def ephemerals_for(self, user_id: str, channel: str | None = None) -> list[Ephemeral]:
        channel_id = None if channel is None else self.state.resolve_channel_id(channel)
        return [
            e
            for e in self.state.ephemerals
            if e.user == user_id and not e.deleted and channel_id in (None, e.channel)
        ]

    def find_calls(self, method: str) -> list[Call]:
        return [call for call in self.state.calls if call.method == method]

    def open_views(self, user_id: str) -> list[View]:
        """The user's open modal stack, bottom first."""
        return self.state.open_views(user_id)

    def view(self, view_id: str) -> View:
        found = self.state.views.get(view_id)
        if found is None:
            msg = f"no view {view_id!r}; views: {sorted(self.state.views)}"
            raise FakeSlackError(msg)
        return found

    # The timeout parameter is the point of this helper (tests read better than asyncio.timeout blocks).
    async def wait_for(
        self,
        predicate: Callable[[], _T | None],
        timeout: float = 5.0,  # noqa: ASYNC109
        *,
        what: str = "",
    ) -> _T:
        """Poll `predicate` until it returns something truthy, and return that; else TimeoutError."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            result = predicate()
            if result:
                return result
            if loop.time() >= deadline:
                name = what or getattr(predicate, "__name__", "condition")
                msg = f"timed out after {timeout}s waiting for {name}; last calls: {self._recent_calls()}"
                raise TimeoutError(msg)
            await asyncio.sleep(0.01)

    def _recent_calls(self) -> str:
        return ", ".join(f"{c.method}->{c.error or c.status}" for c in self.state.calls[-5:]) or "none"

    # seeding

    def add_user(
        self,
        id: str,
        name: str,
        *,
        real_name: str | None = None,
        email: str | None = None,
        deleted: bool = False,
        is_bot: bool = False,
        tz: str = "Europe/London",
        tz_label: str = "Greenwich Mean Time",
        tz_offset: int = 0,
    ) -> User:
        user = User(
            id=id,
            name=name,
            real_name=real_name if real_name is not None else name.title(),
            email=email,
            deleted=deleted,
            is_bot=is_bot,
            tz=tz,
            tz_label=tz_label,
            tz_offset=tz_offset,
            bot_id=f"B{id[1:]}" if is_bot else None,
        )
        self.state.users[id] = user
        self.state.touch()
        return user

    def add_channel(
        self,
        id: str,
        name: str,
        *,
        is_private: bool = False,
        is_archived: bool = False,
        members: Iterable[str] = (),
        bot_is_member: bool = True,
    ) -> Channel:
        channel = Channel(
            id=id,
            name=name,
            is_private=is_private,
            is_archived=is_archived,
            members=list(members),
            bot_is_member=bot_is_member,
            created=int(self.now()),
        )
        self.state.channels[id] = channel
        self.state.touch()
        return channel

    def add_usergroup(
        self, id: str, handle: str, users: Iterable[str] = (), *, name: str | None = None
    ) -> Usergroup:
        group = Usergroup(id=id, handle=handle, name=name or handle, users=list(users))
        self.state.usergroups[id] = group
        self.state.touch()
        return group

    def seed_default(self) -> None:
        """The demo workspace.

        Users U0ALICE alice, U0BOB bob, U0CAROL carol, U0DAVE dave (deactivated), U0DEPLOYBOT deploybot
        (another app's bot). Channels C0DEPLOY #deploys (public, bot in, alice/bob/carol), C0RANDOM #random
        (public, bot not in), C0PRIV #secret-ops (private, bot not in), C0INCIDENT #incidents (private,
        bot in, alice/carol), C0ARCH #old-project (archived, bot in). User group S0ONCALL @oncall: alice, bob.
        """
        self.add_user("U0ALICE", "alice", real_name="Alice Archer", email="alice@example.com",
                      tz="Europe/Berlin", tz_label="Central European Time", tz_offset=3600)  # fmt: skip
        self.add_user("U0BOB", "bob", real_name="Bob Baker", email="bob@example.com",
                      tz="America/New_York", tz_label="Eastern Standard Time", tz_offset=-18000)  # fmt: skip
        self.add_user("U0CAROL", "carol", real_name="Carol Chen", email="carol@example.com",
                      tz="Asia/Tokyo", tz_label="Japan Standard Time", tz_offset=32400)  # fmt: skip
        self.add_user("U0DAVE", "dave", real_name="Dave Departed", email="dave@example.com", deleted=True)
        self.add_user("U0DEPLOYBOT", "deploybot", real_name="Deploy Bot", is_bot=True)
        humans = ["U0ALICE", "U0BOB", "U0CAROL"]
        self.add_channel("C0DEPLOY", "deploys", members=humans)
        self.add_channel("C0RANDOM", "random", members=humans, bot_is_member=False)
        self.add_channel("C0PRIV", "secret-ops", is_private=True, members=["U0ALICE"], bot_is_member=False)
        self.add_channel("C0INCIDENT", "incidents", is_private=True, members=["U0ALICE", "U0CAROL"])
        self.add_channel("C0ARCH", "old-project", is_archived=True, members=["U0ALICE", "U0BOB"])
        self.add_usergroup("S0ONCALL", "oncall", ["U0ALICE", "U0BOB"], name="On-call")

    @classmethod
    def with_demo_workspace(cls, *, signing_secret: str, **kwargs: Any) -> FakeSlack:
        """A FakeSlack seeded with `seed_default()` (not started)."""
        fake = cls(signing_secret=signing_secret, **kwargs)
        fake.seed_default()
        return fake

    async def archive_channel(self, channel_id: str, *, by: str | None = None) -> BotResponse | None:
        """Archive a conversation as a person would, and tell the bot (`channel_archive`/`group_archive`).

        Returns the bot's answer, or None when the bot gets no event (not in the channel, no events_url).
        """
        channel = self._channel(channel_id)
        channel.is_archived = True
        self.state.touch()
        actor = by or next((m for m in channel.members if m in self.state.users), self.state.bot.user_id)
        event = payloads.archive_event(channel, user=actor, event_ts=self.state.next_ts())
        return await self._deliver(event, channel)

    async def delete_message(self, channel: str, ts: str) -> BotResponse | None:
        """Delete a message as a person (say an admin) would, and tell the bot (`message_deleted`).

        Note: the event's `previous_message.user` is the bot for the bot's own messages, so Bolt's default
        IgnoringSelfEvents middleware drops it; the bot needs `ignoring_self_events_enabled=False` to see it.
        """
        channel_obj = self._channel(self.state.resolve_channel_id(channel))
        message = self.state.find_message(channel_obj.id, ts)
        if message is None or message.deleted:
            there = [m.ts for m in self.messages(channel_obj.id)]
            msg = f"no message {ts!r} in {channel_obj.id}; messages there: {there}"
            raise FakeSlackError(msg)
        before = message.to_slack()
        message.deleted = True
        self.state.touch()
        event = payloads.message_deleted_event(before, channel_obj, event_ts=self.state.next_ts())
        return await self._deliver(event, channel_obj)

    async def say(self, user_id: str, channel: str, text: str, *, thread_ts: str | None = None) -> Message:
        """`user_id` posts a message (a user id as channel: their DM with the bot); the bot gets the event."""
        user = self._human(user_id)
        found = self._channel(self.state.resolve_channel_id(channel))
        if found.is_im and found.user != user_id:
            msg = f"{user_id} cannot post in {found.id}, the bot's DM with {found.user}"
            raise FakeSlackError(msg)
        if not found.is_im and user_id not in found.members:
            msg = f"{user_id} is not a member of {found.id}; members: {found.members}"
            raise FakeSlackError(msg)
        if found.is_archived:
            msg = f"{found.id} is archived; nobody can post in it"
            raise FakeSlackError(msg)
        message = Message(
            channel=found.id,
            ts=self.state.next_ts(),
            text=text,
            user=user.id,
            team=self.state.team_id,
            thread_ts=thread_ts,
        )
        self.state.messages.setdefault(found.id, []).append(message)
        self.state.touch()
        event = {
            **message.to_slack(),
            "channel": found.id,
            "event_ts": message.ts,
            "channel_type": found.channel_type,
        }
        await self._deliver(event, found)
        return message

    # faults

    def fail_next(
        self,
        method: str,
        *,
        error: str | None = None,
        status: int | None = None,
        retry_after: int = 1,
        times: int = 1,
    ) -> None:
        """Make the next `times` calls of `method` ("*": any method) fail.

        No error/status: 429 `ratelimited` with `Retry-After: retry_after`. `status=500/503`: a server
        error. `error="channel_not_found"` alone: HTTP 200 with `{"ok": false, "error": ...}`.
        """
        if status is None:
            status = 429 if error in (None, "ratelimited") else 200
        if error is None:
            error = {429: "ratelimited", 200: "fatal_error"}.get(status, "internal_error")
        self._faults.append(
            Fault(method=method, error=error, status=status, retry_after=retry_after, remaining=times)
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

    # acting as a human

    async def click(
        self,
        user_id: str,
        channel: str,
        ts: str,
        action_id: str,
        *,
        value: str | None = None,
        values: Iterable[str] | None = None,
        block_id: str | None = None,
    ) -> BotResponse:
        """`user_id` acts on an element of message `ts` in `channel` (a user id: the bot's DM with them).

        The element is found among what the bot really rendered, by `action_id` (and `block_id`): for
        buttons `value` picks the button with that value; for selects, radio buttons and overflow menus
        it is the option to pick (by value or visible text); for checkboxes and multi-selects `values` is
        the new selection and a lone `value` toggles one option. Ephemeral messages the user sees count.
        """
        user = self._human(user_id)
        found_channel = self._channel(self.state.resolve_channel_id(channel))
        self._check_can_see(user, found_channel)
        message = self.state.find_message(found_channel.id, ts)
        ephemeral = None
        if message is not None and not message.deleted:
            blocks = message.blocks
        else:
            message = None
            ephemeral = self.state.find_ephemeral(found_channel.id, ts, user_id)
            if ephemeral is None or ephemeral.deleted:
                there = [m.ts for m in self.messages(found_channel.id)]
                msg = f"no message {ts!r} visible to {user_id} in {found_channel.id}; messages there: {there}"
                raise FakeSlackError(msg)
            blocks = ephemeral.blocks
        where = f"message {found_channel.id}/{ts}"
        found = payloads.find_element(blocks, action_id, block_id=block_id, value=value, where=where)
        if not found.dispatches:
            msg = f"{found.describe()} is an input without dispatch_action: Slack sends nothing; use enter()"
            raise FakeSlackError(msg)
        draft = self.state.drafts.setdefault(draft_key(user_id, found_channel.id, ts), {})
        current = payloads.state_values(blocks, draft).get(found.block_id, {}).get(found.action_id)
        action, new_state = payloads.action_for(
            found,
            value=value,
            values=None if values is None else list(values),
            current=current,
            action_ts=self.state.next_ts(),
        )
        if new_state is not None:
            draft.setdefault(found.block_id, {})[found.action_id] = new_state
        payload = payloads.block_actions_payload(
            self.state,
            user=user,
            actions=[action],
            state=payloads.state_values(blocks, draft),
            trigger_id=self.issue_trigger(user_id),
            container={
                "type": "message",
                "message_ts": ts,
                "channel_id": found_channel.id,
                "is_ephemeral": ephemeral is not None,
            },
            response_url=self._issue_response_url(
                user_id, found_channel.id, ts, is_ephemeral=ephemeral is not None
            ),
            channel=found_channel,
            message=message.to_slack() if message is not None else None,
        )
        return await self._send_interaction(payload, user_id)

    def enter(
        self,
        user_id: str,
        channel: str,
        ts: str,
        action_id: str,
        value: Any,
        *,
        block_id: str | None = None,
    ) -> None:
        """Type (or pick, in an input block without dispatch_action) `value` without sending anything.

        Slack keeps it client-side; it reaches the bot in `state.values` of the user's next click.
        Pressing Enter in a dispatch_action text input is `click(..., value=text)`.
        """
        user = self._human(user_id)
        found_channel = self._channel(self.state.resolve_channel_id(channel))
        self._check_can_see(user, found_channel)
        message = self.state.find_message(found_channel.id, ts)
        if message is None or message.deleted:
            msg = f"no message {ts!r} in {found_channel.id}"
            raise FakeSlackError(msg)
        found = payloads.find_element(
            message.blocks, action_id, block_id=block_id, where=f"message {found_channel.id}/{ts}"
        )
        typed = found.block.get("type") == "input" and (not found.dispatches or found.state_key == "value")
        if not typed:
            msg = f"changing {found.describe()} sends it to the app at once: use click()"
            raise FakeSlackError(msg)
        draft = self.state.drafts.setdefault(draft_key(user_id, found_channel.id, ts), {})
        draft.setdefault(found.block_id, {})[found.action_id] = payloads.answer_state(found, value)
        self.state.touch()

    async def click_in_view(
        self,
        user_id: str,
        view_id: str,
        action_id: str,
        *,
        value: str | None = None,
        values: Iterable[str] | None = None,
        block_id: str | None = None,
    ) -> BotResponse:
        """Like `click`, on an element of the user's top modal (block_actions with a view container)."""
        user = self._human(user_id)
        view = self._top_view(user_id, view_id)
        blocks = view.view.get("blocks") or []
        found = payloads.find_element(
            blocks, action_id, block_id=block_id, value=value, where=f"view {view_id}"
        )
        if not found.dispatches:
            msg = f"{found.describe()} is an input without dispatch_action: fill it through submit_view"
            raise FakeSlackError(msg)
        entered = view.view.setdefault("state", {}).setdefault("values", {})
        current = payloads.state_values(blocks, entered).get(found.block_id, {}).get(found.action_id)
        action, new_state = payloads.action_for(
            found,
            value=value,
            values=None if values is None else list(values),
            current=current,
            action_ts=self.state.next_ts(),
        )
        if new_state is not None:
            entered.setdefault(found.block_id, {})[found.action_id] = new_state
        view.view["state"]["values"] = payloads.state_values(blocks, entered)
        payload = payloads.block_actions_payload(
            self.state,
            user=user,
            actions=[action],
            state=copy.deepcopy(view.view["state"]["values"]),
            trigger_id=self.issue_trigger(user_id),
            container={"type": "view", "view_id": view.id},
            view=copy.deepcopy(view.view),
        )
        return await self._send_interaction(payload, user_id)

    async def submit_view(
        self,
        user_id: str,
        view_id: str,
        values: Mapping[str, Mapping[str, JSON]] | None = None,
    ) -> BotResponse:
        """Press Submit on the user's top modal with `values` as `state.values[block_id][action_id]`.

        Values not given keep what is already entered (or the initial values). Like Slack's client, the
        fake refuses to submit with a required input empty or a text outside min/max length. The bot's
        answer is applied: `errors` is kept on the view, `update`/`push`/`clear` change the stack, and a
        plain ack closes the view.
        """
        user = self._human(user_id)
        view = self._top_view(user_id, view_id)
        blocks = view.view.get("blocks") or []
        entered: dict[str, dict[str, JSON]] = copy.deepcopy(view.view.get("state", {}).get("values", {}))
        rendered = {(e.block_id, e.action_id): e for e in payloads.iter_elements(blocks)}
        for block_id, by_action in (values or {}).items():
            for action_id, entry in by_action.items():
                element = rendered.get((block_id, action_id))
                if element is None or element.type != entry.get("type"):
                    msg = (
                        f"view {view_id} has no {entry.get('type')} {action_id!r} in block {block_id!r}; "
                        f"rendered: {payloads.describe_elements(blocks)}"
                    )
                    raise FakeSlackError(msg)
                entered.setdefault(block_id, {})[action_id] = dict(entry)
        state = payloads.state_values(blocks, entered)
        self._check_submittable(user_id, view, state)
        view.view.setdefault("state", {})["values"] = state
        payload = payloads.view_submission_payload(
            self.state,
            user=user,
            view=copy.deepcopy(view.view),
            trigger_id=self.issue_trigger(user_id),
        )
        response = await self._send_interaction(payload, user_id)
        self._apply_submission(view, response)
        return response

    async def fill_and_submit(self, user_id: str, view_id: str, answers: Mapping[str, Any]) -> BotResponse:
        """Submit the user's top modal with `answers` keyed by block_id (or action_id).

        Each answer is put into that block's element the way a person would: an option value or its
        visible text for radio buttons and selects, a list of them for checkboxes and multi-selects,
        text for text inputs.
        """
        view = self._top_view(user_id, view_id)
        elements = list(payloads.iter_elements(view.view.get("blocks") or []))
        values: dict[str, dict[str, JSON]] = {}
        for key, answer in answers.items():
            matches = [e for e in elements if e.block_id == key] or [
                e for e in elements if e.action_id == key
            ]
            if len(matches) != 1:
                msg = (
                    f"{len(matches)} elements of view {view_id} have block_id or action_id {key!r}; "
                    f"rendered: {payloads.describe_elements(view.view.get('blocks') or [])}"
                )
                raise FakeSlackError(msg)
            found = matches[0]
            values.setdefault(found.block_id, {})[found.action_id] = payloads.answer_state(found, answer)
        return await self.submit_view(user_id, view_id, values)

    async def close_view(self, user_id: str, view_id: str, *, clear: bool = False) -> BotResponse | None:
        """Press Close (`clear`: close the whole stack). The bot hears of it only with `notify_on_close`."""
        user = self._human(user_id)
        view = self._top_view(user_id, view_id)
        stack = self.state.view_stacks.get(user_id, [])
        closing = list(stack) if clear else [view.id]
        for closed in closing:
            self.state.views[closed].is_open = False
            stack.remove(closed)
        self.state.touch()
        if not view.view.get("notify_on_close"):
            return None
        payload = payloads.view_closed_payload(
            self.state, user=user, view=copy.deepcopy(view.view), is_cleared=clear
        )
        return await self._send_interaction(payload, user_id)

    def issue_trigger(self, user_id: str) -> str:
        """A fresh trigger_id for `user_id`, as one rides in every interaction payload."""
        trigger_id = f"{int(self.now())}.{secrets.randbelow(10**12)}.{secrets.token_hex(16)}"
        self.state.triggers[trigger_id] = Trigger(id=trigger_id, user=user_id, issued_at=self.now())
        return trigger_id

    # raw requests to the bot (signature tests)

    def signed_request(
        self, body: str, *, timestamp: int | None = None, content_type: str | None = None
    ) -> dict[str, str]:
        """Headers signing `body` as Slack would (content type guessed from the body unless given)."""
        return payloads.signed_headers(
            self.signing_secret, body, timestamp=timestamp, content_type=content_type
        )

    async def post_raw(self, body: str, headers: Mapping[str, str]) -> BotResponse:
        """POST `body` with exactly `headers` to the bot's events_url (e.g. a bad or stale signature)."""
        return await self._post_to_bot(body, headers)

    async def send_event(self, event: JSON) -> BotResponse | None:
        """Send any Events API `event` to the bot in a signed event_callback envelope.

        Returns the bot's answer; None (and the event recorded undelivered) when events_url is not set.
        """
        event_id = "Ev" + self.state.next_id("")
        envelope = payloads.event_envelope(self.state, event, event_id=event_id, event_time=int(self.now()))
        if self.events_url is None:
            self.state.events.append(
                SentEvent(event_id=event_id, envelope=envelope, at=self.now(), delivered=False)
            )
            self.state.touch()
            return None
        response = await self._post_to_bot(json.dumps(envelope))
        self.state.events.append(
            SentEvent(
                event_id=event_id,
                envelope=envelope,
                at=self.now(),
                delivered=response.status == 200,
                status=response.status,
            )
        )
        self.state.touch()
        return response

    # internals: people and surfaces

    def _human(self, user_id: str) -> User:
        user = self.state.users.get(user_id)
        if user is None or user.deleted or user.is_bot:
            msg = f"{user_id!r} is not an active person in the workspace; users: {sorted(self.state.users)}"
            raise FakeSlackError(msg)
        return user

    def _channel(self, channel_id: str) -> Channel:
        channel = self.state.channels.get(channel_id)
        if channel is None:
            msg = f"no conversation {channel_id!r}; conversations: {sorted(self.state.channels)}"
            raise FakeSlackError(msg)
        return channel

    def _check_can_see(self, user: User, channel: Channel) -> None:
        if channel.is_private and user.id not in channel.members:
            msg = (
                f"{user.id} is not a member of private conversation {channel.id}, so cannot see its messages"
            )
            raise FakeSlackError(msg)

    def _top_view(self, user_id: str, view_id: str) -> View:
        stack = self.state.view_stacks.get(user_id, [])
        if not stack or stack[-1] != view_id:
            msg = f"view {view_id!r} is not the modal {user_id} has in front; their open views: {stack}"
            raise FakeSlackError(msg)
        return self.state.views[view_id]

    def _check_submittable(self, user_id: str, view: View, state: Mapping[str, Mapping[str, JSON]]) -> None:
        """Slack's client-side checks before a modal may be submitted."""
        for found in payloads.iter_elements(view.view.get("blocks") or []):
            if found.block.get("type") != "input" or found.state_key is None:
                continue
            entry = state.get(found.block_id, {}).get(found.action_id, {})
            current = entry.get(found.state_key)
            if current in (None, "", []):
                if not found.block.get("optional"):
                    msg = f"input block {found.block_id!r} is required: Slack won't let {user_id} submit it"
                    raise FakeSlackError(msg)
                continue
            if isinstance(current, str):
                low, high = found.element.get("min_length"), found.element.get("max_length")
                if (isinstance(low, int) and len(current) < low) or (
                    isinstance(high, int) and len(current) > high
                ):
                    msg = f"text in block {found.block_id!r} is outside its length limits ({low}..{high})"
                    raise FakeSlackError(msg)

    def _apply_submission(self, view: View, response: BotResponse) -> None:
        """Do what the bot's answer to a view_submission asks of the modal stack."""
        if response.status != 200:
            return  # Slack keeps the modal open and shows the person an error
        body = response.json
        action = body.get("response_action")
        stack = self.state.view_stacks.setdefault(view.user, [])
        if action == "errors":
            errors = body.get("errors")
            view.errors = dict(errors) if isinstance(errors, dict) else {}
        elif action in ("update", "push"):
            try:
                new_view = self.api.view_param({"view": body.get("view")})
                if action == "update":
                    self.api.replace_view(view, new_view)
                elif len(stack) >= MAX_VIEW_STACK:
                    raise ApiError("push_limit_reached")
                else:
                    self.api.open_view(view.user, new_view, push=True)
            except ApiError as exc:
                view.errors = {"response_action": exc.error}
        elif action == "clear":
            for closed in stack:
                self.state.views[closed].is_open = False
            stack.clear()
        else:
            view.is_open = False
            if view.id in stack:
                stack.remove(view.id)
        self.state.touch()

    def _issue_response_url(self, user_id: str, channel: str, ts: str, *, is_ephemeral: bool) -> str:
        token = secrets.token_urlsafe(16)
        self.state.response_urls[token] = ResponseUrl(
            token=token,
            user=user_id,
            channel=channel,
            message_ts=ts,
            is_ephemeral=is_ephemeral,
            issued_at=self.now(),
        )
        return f"{self.base_url}response/{token}"

    def _permalink_base(self) -> str:
        return f"https://{self.state.team_domain}.slack.com/archives/"

    # internals: talking to the bot

    def _bot_hears(self, channel: Channel) -> bool:
        """Events about a conversation reach the app only when its bot is in it."""
        return channel.is_im or channel.bot_is_member

    async def _deliver(self, event: JSON, channel: Channel) -> BotResponse | None:
        if not self._bot_hears(channel):
            return None
        return await self.send_event(event)

    def _emit(self, event: JSON, channel: Channel) -> None:
        """Deliver an event caused by a Web API call after answering it, as Slack does."""
        if not self._bot_hears(channel) or self.events_url is None:
            return
        task = asyncio.get_running_loop().create_task(self.send_event(event))
        self._deliveries.add(task)
        task.add_done_callback(self._deliveries.discard)

    async def _send_interaction(self, payload: JSON, user_id: str) -> BotResponse:
        response = await self._post_to_bot(payloads.form_body(payload))
        self.state.interactions.append(
            Interaction(
                type=str(payload["type"]),
                user=user_id,
                payload=payload,
                at=self.now(),
                status=response.status,
                body=response.body,
            )
        )
        self.state.touch()
        return response

    async def _post_to_bot(self, body: str, headers: Mapping[str, str] | None = None) -> BotResponse:
        if self.events_url is None:
            msg = "events_url is not set: start the bot, then set fake.events_url to its /slack/events URL"
            raise FakeSlackError(msg)
        if self._session is None:
            msg = "FakeSlack is not started: await fake.start() first"
            raise FakeSlackError(msg)
        sent_headers = dict(headers) if headers is not None else self.signed_request(body)
        try:
            async with self._session.post(
                self.events_url,
                data=body.encode(),
                headers=sent_headers,
                timeout=aiohttp.ClientTimeout(total=self.ack_timeout),
            ) as reply:
                text = await reply.text()
                return BotResponse(
                    status=reply.status, body=_parse_body(text), text=text, headers=dict(reply.headers)
                )
        except TimeoutError:
            error = f"the bot did not answer within {self.ack_timeout}s (Slack gives up after 3 s)"
        except aiohttp.ClientError as exc:
            error = f"could not reach the bot at {self.events_url}: {exc!r}"
        return BotResponse(status=0, body=None, error=error)

    # internals: HTTP handlers

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
        if self.latency > 0:
            await asyncio.sleep(self.latency)
        call = Call(method=method, params=params, at=self.now())
        self.state.calls.append(call)
        self.state.touch()
        if self._unreachable:
            call.status = 0
            return self._drop_connection(request)
        fault = self._take_fault(method)
        headers: dict[str, str] = {}
        if fault is not None:
            call.status, call.response = fault.status, {"ok": False, "error": fault.error}
            if fault.status == 429:
                headers["Retry-After"] = str(fault.retry_after)
            return web.json_response(call.response, status=fault.status, headers=headers)
        authorization = request.headers.get("Authorization", "")
        given = (
            authorization.removeprefix("Bearer ").strip() if authorization.startswith("Bearer ") else token
        )
        if parse_error is not None:
            call.response = {"ok": False, "error": parse_error}
        elif not given:
            call.response = {"ok": False, "error": "not_authed"}
        elif method == "apps.connections.open":
            call.response = self._connections_open(given)
        elif given == self.app_token:
            call.response = {"ok": False, "error": "not_allowed_token_type"}
        elif given != self.bot_token:
            call.response = {"ok": False, "error": "invalid_auth"}
        else:
            try:
                call.response = self.api.call(method, params)
            except ApiError as exc:
                call.response = exc.to_response()
        if given == self.bot_token:
            headers["x-oauth-scopes"] = ",".join(self.scopes)
        self.state.touch()
        return web.json_response(call.response, headers=headers)

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
            before = original.to_slack() if isinstance(original, Message) else None
            original.deleted = True
            ws.touch()
            if before is not None:
                self._emit(payloads.message_deleted_event(before, channel, event_ts=ws.next_ts()), channel)
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


def _flag(body: Mapping[str, Any], name: str) -> bool:
    value = body.get(name)
    return value is True or (isinstance(value, str) and value.lower() == "true")
