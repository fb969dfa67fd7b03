"""A stateful fake of Slack on loopback HTTP: the Web API for the bot, and the humans who click.

The bot under test talks to it exactly as to Slack (`AsyncWebClient(base_url=fake.api_url)`), and the fake
plays the people: it renders nothing, but it finds what the bot really rendered and sends the bot the same
signed interaction payloads and events Slack would (`click`, `fill_and_submit`, `archive_channel`...).
`FakeSlack` composes the two sides: `people.People` plays the humans (what they do, as signed payloads to
the bot) and `server.WebApiServer` answers the Web API (`webapi.WebApi` holds the methods); both work on one
`state.Workspace`.

    fake = FakeSlack.with_demo_workspace(signing_secret="secret")
    await fake.start()
    fake.events_url = "http://127.0.0.1:3000/slack/events"   # once the bot listens
    ...
    message = await fake.wait_for(lambda: fake.last_message("C0DEPLOY"))
    response = await fake.click("U0ALICE", "C0DEPLOY", message.ts, "choose:0")
    await fake.stop()

Routes: `/api/<method>` (Web API), `/response/<token>` (response_url), `GET /_fake/state` (the whole state
as JSON, for the playground page), `GET /_fake/limits` (calls and 429s per method), `GET /_fake/socket`
(the Socket Mode WebSocket that `apps.connections.open` hands out: it says hello and keeps the connection
open; events still go to `events_url` over HTTP). Add more routes to `fake.app` before `start()`.

Rate limits: `FakeSlack(rate_limits=True, speedup=20)` enforces Slack's per-method tiers and the per-channel
post limit (HTTP 429, `Retry-After`, `{"ok": false, "error": "ratelimited"}`); see `ratelimits.py`.

Tokens: `bot_token` for the Web API, whose answers carry the granted `scopes` in an `x-oauth-scopes`
header as Slack's do; `app_token` (app-level) for `apps.connections.open` only.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any, Self, TypeVar

import aiohttp
from aiohttp import web

from bot.playground.errors import FakeSlackError
from bot.playground.functions import Execution, Functions
from bot.playground.home import HomeTabs
from bot.playground.people import BotResponse, People
from bot.playground.ratelimits import RateLimiter
from bot.playground.server import Fault, WebApiServer
from bot.playground.state import (
    BotIdentity,
    Call,
    Channel,
    Ephemeral,
    Message,
    User,
    Usergroup,
    View,
    Workspace,
)
from bot.playground.talk import Talk
from bot.playground.webapi import WebApi
from bot.slack.scopes import BOT_SCOPES

__all__ = ["BotResponse", "FakeSlack", "Fault"]

_T = TypeVar("_T")


class FakeSlack(People, Talk, HomeTabs, WebApiServer):
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
        rate_limits: bool = False,
        speedup: float = 1.0,
    ) -> None:
        self.signing_secret = signing_secret
        self.bot_token = bot_token
        self.app_token = app_token
        self.scopes = list(scopes)  # what the bot token was granted (the x-oauth-scopes header)
        self.socket_connections = 0  # Socket Mode WebSockets opened so far
        self._sockets: set[web.WebSocketResponse] = set()
        self.events_url = events_url  # the bot's POST /slack/events; may be set once the bot listens
        self.latency = 0.0  # seconds added to every Web API and response_url request
        self.method_latency: dict[str, float] = {}  # more seconds for some methods: {"chat.update": 2.0}
        # Seconds between doing a call and its answer reaching the bot, per method: Slack has posted the
        # message (and sent its events) while the bot still waits for the reply.
        self.reply_latency: dict[str, float] = {}
        self.ack_timeout = 3.0  # how long the fake waits for the bot's HTTP answer (Slack: 3 s)
        self._clock_offset = 0.0
        # Slack's per-method and per-channel limits (off unless asked for); `speedup` runs Slack's clock
        # faster. The counters (`limits.calls`, `limits.limited`, `limits.stats()`) count either way.
        self.limits = RateLimiter(clock=self.now, enabled=rate_limits, speedup=speedup)
        self.state = Workspace(team_id=team_id, team_domain=team_domain, bot=bot, now=self.now)
        self.api = WebApi(self.state, emit=self._emit, permalink_base=self._permalink_base)
        self.functions = Functions(self.now)  # workflow steps of manifest.yml (functions.py)
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
                web.get("/_fake/limits", self._handle_limits),
                web.get("/_fake/socket", self._handle_socket),
            ]
        )

    # workflow steps

    async def run_step(self, inputs: dict[str, Any], *, callback_id: str = "ask_question") -> Execution:
        """Run the step ``callback_id`` of manifest.yml in a workflow: ``function_executed`` with
        ``inputs`` (checked against the declared types) goes to the bot; see ``functions.py``."""
        execution = self.functions.start(callback_id, inputs)
        await self.send_event(self.functions.event(execution, app_id=self.state.bot.app_id))
        return execution

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
        is_mpim: bool = False,
    ) -> Channel:
        """A conversation; `is_mpim` makes it a group DM (private, e.g. `G0GROUP` "mpdm-alice--bob-1")."""
        channel = Channel(
            id=id,
            name=name,
            is_private=is_private or is_mpim,
            is_mpim=is_mpim,
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

    # internals

    def _channel(self, channel_id: str) -> Channel:
        channel = self.state.channels.get(channel_id)
        if channel is None:
            msg = f"no conversation {channel_id!r}; conversations: {sorted(self.state.channels)}"
            raise FakeSlackError(msg)
        return channel
