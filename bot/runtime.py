"""Assembles a running bot from settings: Redis, store, Slack gateway, engine, loops and the Bolt app."""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import os
import socket
import uuid
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from redis.asyncio import Redis
from redis.exceptions import RedisError
from slack_bolt.async_app import AsyncApp

from bot.app import build_app
from bot.config import Settings
from bot.engine import Engine
from bot.engine.room import Shared
from bot.engine.workflow import WorkflowSteps
from bot.errors import ConfigError, SlackError
from bot.home_loop import HomeLoop
from bot.intake import Intake
from bot.loops import log_failure
from bot.metrics import METRICS
from bot.slack.edge import Refused, bolt_body, read_signed_body, refuse
from bot.slack.gateway import SlackGateway, make_client
from bot.slack.pacing import Pacer
from bot.step_loop import StepLoop
from bot.storage.base import COMPACT_HASH_VALUE_BYTES
from bot.storage.buckets import Buckets
from bot.storage.connection import connect
from bot.storage.steps import StepStore
from bot.storage.store import Store
from bot.sweeper import Sweeper
from bot.tasks import RECANCEL_S

__all__ = ["BotRuntime", "default_consumer_name"]

log = logging.getLogger(__name__)

_TOKEN_CHECK_S = 10.0  # how long start waits for Slack to answer the token check before going on


def default_consumer_name() -> str:
    """Stable per host and process, so a restarted replica finds its own pending entries first."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


@dataclass
class BotRuntime:
    """One bot replica. ``start()`` runs intake and the sweeper; ``web_app()`` serves Slack's requests;
    ``health_app()`` serves only ``/healthz`` and ``/metrics`` (Socket Mode's ``--health-port``)."""

    settings: Settings
    redis: Redis | None = None
    consumer: str = field(default_factory=default_consumer_name)
    intake_block_ms: int = 2_000

    def __post_init__(self) -> None:
        s = self.settings
        if s.slack_bot_token is None:
            raise ConfigError("setting SLACK_BOT_TOKEN is required to serve (a bot token, xoxb-...)")
        if self.redis is None:
            self.redis = connect(s.redis_url.get_secret_value())
        self.store = Store(
            self.redis,
            s.prefix,
            retention_ms=s.defaults.retention_ms,
            min_replicas=s.redis_min_replicas,
            replica_wait_ms=s.redis_wait_ms,
        )
        self.client = make_client(s.slack_bot_token.get_secret_value(), s.slack_api_url)
        # One set of token buckets per deployment (key prefix): every replica paces against the same.
        pacer = Pacer(Buckets(self.redis, s.prefix), scale=s.pace_scale)
        self.slack = SlackGateway(self.client, delivery_window_ms=s.delivery_window_ms, pacer=pacer)
        self.engine = Engine(s, self.store, self.slack, consumer=s.consumer_name or self.consumer)
        self.intake = Intake(
            self.engine,
            self.store,
            consumer=s.consumer_name or self.consumer,
            reclaim_idle_ms=s.reclaim_idle_ms,
            block_ms=self.intake_block_ms,
        )
        self.sweeper = Sweeper(
            self.engine,
            self.store,
            interval_ms=s.sweep_interval_ms,
            idle_max_ms=s.idle_poll_max_ms,
            lease_ms=s.timer_lease_ms,
        )
        # The Workflow Builder step (docs/workflow-step.md): one more agent inside the replica.
        step_store = StepStore(
            self.redis,
            s.prefix,
            retention_ms=s.defaults.retention_ms,
            min_replicas=s.redis_min_replicas,
            replica_wait_ms=s.redis_wait_ms,
        )
        shared = Shared(settings=s, store=self.store, slack=self.slack, consumer=self.engine.consumer)
        self.workflow = WorkflowSteps(shared, step_store)
        self.step_loop = StepLoop(
            self.workflow, interval_ms=s.sweep_interval_ms, idle_max_ms=s.idle_poll_max_ms
        )
        # The Home tab's publisher (docs/home.md); its claims last as long as a timer's.
        self.home_loop = HomeLoop(
            self.engine.home, self.store, idle_max_ms=s.idle_poll_max_ms, lease_ms=s.timer_lease_ms
        )
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        # Bolt's listener tasks at work (Bolt does not await them): stop waits for them before Redis closes.
        self._listeners: set[asyncio.Task[Any]] = set()
        self._runner: web.AppRunner | None = None
        self._health_runner: web.AppRunner | None = None
        self.port: int | None = None
        self.health_port: int | None = None

    def bolt_app(self, *, socket_mode: bool = False, verified_at_edge: bool = False) -> AsyncApp:
        """The Bolt app. ``verified_at_edge``: every request reaches it through ``web_app``'s edge,
        which checks the signature on the raw bytes first (and hands Bolt the decoded payload), so
        Bolt does not check it again; anything else serving this app over HTTP must leave it False."""
        secret = self.settings.slack_signing_secret
        if not socket_mode and secret is None:
            raise ConfigError(
                "setting SLACK_SIGNING_SECRET is required in HTTP mode (Basic Information page)"
            )
        return build_app(
            self.engine,
            client=self.client,
            signing_secret=secret.get_secret_value() if secret is not None else None,
            socket_mode=socket_mode,
            verified_at_edge=verified_at_edge,
            running=self._listeners,
            steps=self.workflow,
        )

    async def check_redis(self) -> None:
        """Warn when Redis may evict keys: an evicted ask is a lost ask. Say (once, at start) when its
        hashes are kept in the encoding that takes a third more memory per ask."""
        policy = await self.store.eviction_policy()
        if policy is not None and policy != "noeviction":
            log.warning(
                "Redis maxmemory-policy is %r: under memory pressure Redis may evict in-flight asks. "
                "Set maxmemory-policy noeviction for the database slack-ask uses.",
                policy,
            )
        limit = await self.store.compact_value_limit()
        if limit is not None and limit < COMPACT_HASH_VALUE_BYTES:
            log.info(
                "Redis hash-max-listpack-value is %d: each ask's record is kept as a hash table; "
                "set it to %d to keep about a third less memory per ask (docs/operations.md)",
                limit,
                COMPACT_HASH_VALUE_BYTES,
            )

    async def start(self, *, app_token: str | None = None) -> None:
        """Check the tokens with Slack (``app_token``: Socket Mode's too), then start the loops.

        A token Slack refuses raises :class:`bot.errors.SlackAuthError` before any ask is read."""
        if self.client.session is None:
            # One keep-alive session for every Web API call (slack_sdk opens one per call otherwise).
            timeout = aiohttp.ClientTimeout(total=self.client.timeout)
            self.client.session = aiohttp.ClientSession(timeout=timeout)
        await self.check_redis()
        await self.store.load_scripts()
        await self.store.ensure_group()
        try:
            await self.slack.check_tokens(app_token=app_token, budget_s=_TOKEN_CHECK_S)
        except SlackError as exc:
            # Not a refusal: Slack is down or slow. The bot starts anyway and retries as it works;
            # permalinks are left out of results until auth.test answers.
            log.warning("could not check the tokens with Slack yet: %s", exc)
        # The bot posts in public channels it was not invited to (chat:write.public) without joining
        # them; Slack tells an app about deletes and archives only where it is a member.
        log.info(
            "asks posted in public channels the bot is not a member of are not dismissed when their "
            "message is deleted or the channel archived (Slack sends no event there); invite the bot "
            "(/invite @slack-ask) to the channels it posts in"
        )
        self._tasks = [
            asyncio.create_task(self.intake.run(self._stop), name="intake"),
            asyncio.create_task(self.sweeper.run(self._stop), name="sweeper"),
            asyncio.create_task(self.step_loop.run(self._stop), name="workflow"),
            asyncio.create_task(self.home_loop.run(self._stop), name="home"),
        ]

    def loops(self) -> dict[str, str]:
        """For each loop (intake, reclaim, sweeper, workflow): ``running``; ``stopped`` when its task has
        ended; ``failing`` when it has failed without a success for longer than SLACK_ASK_LOOP_FAILING_MS."""
        tasks = {task.get_name(): task for task in self._tasks}
        if self.intake.reclaimer is not None:
            tasks["reclaim"] = self.intake.reclaimer
        health = {
            "intake": self.intake.health,
            "reclaim": self.intake.reclaim_health,
            "sweeper": self.sweeper.health,
            "workflow": self.step_loop.health,
            "home": self.home_loop.health,
        }
        out: dict[str, str] = {}
        for name, loop in health.items():
            task = tasks.get(name)
            if task is None or task.done():
                out[name] = "stopped"
            elif loop.failing_for_ms() > self.settings.loop_failing_ms:
                out[name] = f"failing: {loop.last_error}"
            else:
                out[name] = "running"
        return out

    async def healthz(self, _: web.Request) -> web.Response:
        """200 while Redis answers PING and both loops run; 503 with what is wrong otherwise."""
        loops = self.loops()
        try:
            assert self.redis is not None
            await asyncio.wait_for(self.redis.ping(), timeout=2)
        except (RedisError, OSError, TimeoutError) as exc:
            return web.json_response(
                {"ok": False, "redis": "down", "loops": loops, "error": type(exc).__name__}, status=503
            )
        down = [name for name, state in loops.items() if state != "running"]
        body: dict[str, Any] = {
            "ok": not down,
            "redis": "up",
            "loops": loops,
            "consumer": self.engine.consumer,
        }
        if down:
            body["down"] = down
            body["error"] = "loop not running: " + ", ".join(down)
        return web.json_response(body, status=503 if down else 200)

    @staticmethod
    async def metrics(_: web.Request) -> web.Response:
        return web.Response(
            body=generate_latest(METRICS.registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    def health_app(self) -> web.Application:
        """``GET /healthz`` and ``GET /metrics`` alone: no Slack requests, so no signing secret needed."""
        app = web.Application()
        app.router.add_get("/healthz", self.healthz)
        app.router.add_get("/metrics", self.metrics)
        return app

    def web_app(self) -> web.Application:
        """Bolt's aiohttp app at ``POST /slack/events`` plus ``GET /healthz`` and ``GET /metrics``."""
        from slack_bolt.adapter.aiohttp import to_aiohttp_response
        from slack_bolt.request.async_request import AsyncBoltRequest

        bolt = self.bolt_app(verified_at_edge=True)
        app = self.health_app()
        secret = self.settings.slack_signing_secret
        assert secret is not None  # bolt_app() refused to build without it

        async def events(request: web.Request) -> web.Response:
            # Verify first, on the raw bytes; parse only what Slack signed (protocol section 11).
            body = await read_signed_body(request, secret.get_secret_value())
            if isinstance(body, Refused):
                return refuse(request, body, None)
            text = bolt_body(body, request.content_type)
            if isinstance(text, Refused):
                return refuse(request, text, len(body))
            bolt_request = AsyncBoltRequest(
                body=text,
                query=request.query_string,
                headers=request.headers,  # type: ignore[arg-type]
            )
            try:
                response = await bolt.async_dispatch(bolt_request)
            except Exception as exc:
                log_failure(log, "handling a Slack request", exc)
                return web.json_response({"ok": False, "error": "internal error"}, status=500)
            return await to_aiohttp_response(response)

        app.router.add_post("/slack/events", events)
        return app

    async def serve_http(self, host: str = "127.0.0.1", port: int = 3000) -> int:
        # Bounded graceful shutdown: in-flight Slack requests get 5 s (Slack retries what is lost).
        self._runner = web.AppRunner(self.web_app(), access_log=None, shutdown_timeout=5.0)
        self.port = await _listen(self._runner, host, port)
        return self.port

    async def serve_health(self, host: str = "0.0.0.0", port: int = 8080) -> int:
        """Serve ``health_app()`` on its own port (0: any free port); returns the port bound."""
        self._health_runner = web.AppRunner(self.health_app(), access_log=None, shutdown_timeout=1.0)
        self.health_port = await _listen(self._health_runner, host, port)
        return self.health_port

    async def _close_servers(self) -> None:
        for runner in (self._runner, self._health_runner):
            if runner is not None:
                await runner.cleanup()
        self._runner = self._health_runner = None

    async def stop(self) -> None:
        self._stop.set()
        # Each loop ends its round and returns; one still at it after 10 s is cancelled.
        await _end_tasks(self._tasks, grace_s=10, what="stop")
        self._tasks = []
        await self._close_servers()
        await self._end_listeners(grace_s=10)
        if self.client.session is not None:
            with contextlib.suppress(Exception):
                await self.client.session.close()
            self.client.session = None

    async def kill(self) -> None:
        """Stop abruptly, as a crash would: every loop and in-flight entry cancelled mid-work, nothing
        acknowledged. (Tests use it to prove another replica finishes the work.) A task still running
        after its cancel would go on acting for a replica that is meant to be dead, so that is an error
        naming the task and where it is, not a wait without end."""
        entries = self.intake.abort()
        await _end_tasks([*self._tasks, *entries], grace_s=0, what="kill", strict=True)
        self._tasks = []
        await self._close_servers()
        await self._end_listeners(grace_s=0)
        if self.client.session is not None:
            await self.client.session.close()
            self.client.session = None

    async def _end_listeners(self, grace_s: float) -> None:
        """Let listeners still at work finish (up to ``grace_s`` s), then cancel and await the rest:
        one left running would reopen a connection of the pool ``aclose`` is about to close."""
        await _end_tasks(list(self._listeners), grace_s=grace_s, what="listeners")

    async def aclose(self) -> None:
        await self.stop()
        if self.redis is not None:
            await self.redis.aclose()


CANCEL_WAIT_S = 5.0
"""How long a cancelled task may take to end (its ``finally`` blocks) before that is an error."""


async def _end_tasks(
    tasks: list[asyncio.Task[Any]], *, grace_s: float, what: str, strict: bool = False
) -> None:
    """Let ``tasks`` end within ``grace_s`` s, then cancel the rest and wait for them. Never swallows a
    cancel of the caller (``asyncio.wait`` does not raise the tasks' own errors), and never waits
    without end: a task that outlives its cancel by ``CANCEL_WAIT_S`` is a bug, logged with its stack
    (raised, ``strict``, for a kill: a task left running would go on acting for a dead replica).

    A task still running ``RECANCEL_S`` after its cancel is cancelled again. On Python 3.11,
    ``asyncio.wait_for`` loses a cancel that lands just as its inner step finishes (CPython
    gh-86296, fixed in 3.12), and redis-py sends every command through it when a socket timeout is
    set (the bot always sets one): a loop cancelled there runs on, in state "cancelling". That was
    the kill that never ended in the lease and Home tests (about one cancel in eight, measured)."""
    pending = {task for task in tasks if not task.done()}
    if pending and grace_s > 0:
        _, pending = await asyncio.wait(pending, timeout=grace_s)
    loop = asyncio.get_running_loop()
    give_up = loop.time() + CANCEL_WAIT_S
    again: set[str] = set()
    for task in pending:
        task.cancel()
    while pending and loop.time() < give_up:
        _, pending = await asyncio.wait(pending, timeout=min(RECANCEL_S, max(give_up - loop.time(), 0)))
        for task in pending:
            task.cancel()
            again.add(task.get_name())
    for task in tasks:
        if task.done() and not task.cancelled():
            task.exception()  # retrieved: a loop's last error was logged where it happened
    if again:
        log.info("%s: cancelled again, a cancel was lost: %s", what, ", ".join(sorted(again)))
    if pending:
        stacks = []
        for task in pending:
            out = io.StringIO()
            task.print_stack(file=out)
            stacks.append(out.getvalue())
        problem = f"{what}: {len(pending)} tasks still running {CANCEL_WAIT_S:.0f} s after being cancelled"
        if strict:
            raise RuntimeError(problem + ":\n" + "\n".join(stacks))
        log.error("%s (left running):\n%s", problem, "\n".join(stacks))


async def _listen(runner: web.AppRunner, host: str, port: int) -> int:
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    server = site._server
    assert server is not None
    sockets: Any = getattr(server, "sockets", None)
    return int(sockets[0].getsockname()[1]) if sockets else port
