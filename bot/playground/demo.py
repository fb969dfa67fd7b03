"""The local playground: Redis, the fake Slack with its web page, and the real bot, wired together.

`slack-ask demo` runs exactly this, and so does the browser test:

    playground = Playground(redis_url=None, port=8080)   # None: an embedded Redis
    await playground.start()
    print(playground.url)
    await playground.send_samples()
    ...
    await playground.stop()

The bot is a real `BotRuntime` serving Bolt over HTTP; the fake Slack posts it correctly signed requests
(`FakeSlack.events_url`), and the bot calls the fake's Web API through `SLACK_API_URL`. Nothing here talks
to slack.com.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import secrets
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final

from redis.asyncio import Redis

from bot.config import Settings
from bot.errors import ConfigError
from bot.playground import asks
from bot.playground.fakeslack import FakeSlack
from bot.playground.page import PlaygroundPage
from bot.runtime import BotRuntime
from bot.storage.connection import connect, redacted
from bot.storage.diagnose import is_unreachable, unreachable_reason, url_problem
from bot.storage.embedded import EmbeddedRedis, start_embedded_redis
from bot.storage.store import Store

__all__ = ["DEFAULT_CHANNEL", "DEFAULT_PORT", "Playground", "PortInUseError", "sample_asks"]

log = logging.getLogger(__name__)

DEFAULT_PORT: Final = 8080
DEFAULT_CHANNEL: Final = "C0DEPLOY"
MAX_RESULTS: Final = 100  # results the side panel shows, newest first


class PortInUseError(OSError):
    """The port asked for is taken by another program."""


def sample_asks() -> list[dict[str, Any]]:
    """The asks the playground posts at start: a two-question deploy approval and a one-click question."""
    return [
        {
            "request": {
                "questions": [
                    {
                        "id": "deploy",
                        "question": "Deploy build 1.4.2 to production?",
                        "description": (
                            "Staging has run **1.4.2** for 26 hours with no new errors. "
                            "The release adds `checkout-v2` behind a flag."
                        ),
                        "options": [
                            {"label": "Deploy now", "description": "Rolling deploy, about 12 minutes"},
                            {"label": "Wait for tonight's window"},
                            {"label": "Do not deploy"},
                        ],
                        "recommended": 0,
                        "allowCustom": False,
                        "category": "implementation",
                    },
                    {
                        "id": "checks",
                        "question": "Which checks should run first?",
                        "options": ["Smoke tests", "Database migration dry run", "Canary at 5%"],
                        "multi": True,
                        "allowCustom": True,
                    },
                ]
            },
            "requester": {"name": "deploy-agent", "title": "Release 1.4.2"},
            "timeout_ms": 60 * 60 * 1000,
            "remind_every_ms": 10 * 60 * 1000,
        },
        {
            "request": {
                "questions": [
                    {
                        "id": "rollback",
                        "question": "Error rate on checkout-service doubled after the canary. Roll it back?",
                        "options": ["Roll back", "Keep it running"],
                        "recommended": 0,
                    }
                ]
            },
            "requester": {"name": "canary-watcher"},
            "timeout_ms": 60 * 60 * 1000,
        },
    ]


class Playground:
    """A Redis, a `FakeSlack` serving the playground page, and one bot replica against them.

    `rate_limits` makes the fake Slack enforce Slack's rate limits (`speedup` times faster than Slack).
    `redis_url` None starts an embedded Redis (`redis-server` when installed, else fakeredis) and stops it
    with the playground. `port` None tries `DEFAULT_PORT` and falls back to any free port when it is taken;
    an explicit port that is taken raises `PortInUseError`.
    """

    def __init__(
        self,
        *,
        redis_url: str | None = None,
        prefix: str = "slack-ask",
        host: str = "127.0.0.1",
        port: int | None = None,
        default_channel: str = DEFAULT_CHANNEL,
        settings: Mapping[str, Any] | None = None,
        rate_limits: bool = False,
        speedup: float = 1.0,
    ) -> None:
        self.prefix = prefix
        self.host = host
        self.requested_port = port
        self.default_channel = default_channel
        self.signing_secret = secrets.token_hex(16)  # fresh per run: only this fake can sign for this bot
        # Every ask sent from the playground answers here; under P:, only P:reply: is the agents' (section 1).
        self.reply_to = f"{prefix}:reply:demo"
        self.fake = FakeSlack.with_demo_workspace(
            signing_secret=self.signing_secret, rate_limits=rate_limits, speedup=speedup
        )
        self.page = PlaygroundPage(self)
        self.page.install(self.fake.app)
        asks.install(self.fake.app, self)  # pending asks and Withdraw
        self._redis_url = redis_url
        self._extra_settings = dict(settings or {})
        self.embedded: EmbeddedRedis | None = None
        self.redis_kind = "REDIS_URL"
        self._redis: Redis | None = None
        self._runtime: BotRuntime | None = None
        self.port_note: str | None = None  # set when the default port was busy and another one was used
        # Reply lists the results panel reads: the playground's own, plus any an ask from the page named.
        self.watched: list[str] = [self.reply_to]

    # lifecycle

    async def start(self) -> None:
        """Start Redis (unless given), the fake Slack and the bot; `url` is valid afterwards."""
        try:
            if self._redis_url is None:
                # Starting redis-server polls until it answers: keep that off the event loop.
                self.embedded = await asyncio.to_thread(start_embedded_redis)
                self._redis_url = self.embedded.url
                self.redis_kind = (
                    f"embedded {self.embedded.kind}"
                    if self.embedded.kind != "fakeredis"
                    else "fakeredis (no redis-server installed)"
                )
            if (problem := url_problem(self._redis_url)) is not None:
                raise ConfigError(f"setting REDIS_URL: {problem}")
            # The same connector as the bot, so redis+cluster:// and redis+sentinel:// work here too.
            self._redis = connect(self._redis_url)
            await self._start_fake()
            runtime = BotRuntime(self._settings(), intake_block_ms=500)
            self._runtime = runtime
            try:
                await runtime.start()
            except Exception as exc:
                if not is_unreachable(exc):
                    raise
                # One line for `slack-ask demo` (it prints ConfigError), not a traceback.
                where = redacted(self._redis_url)
                raise ConfigError(
                    f"setting REDIS_URL: cannot reach Redis at {where}: {unreachable_reason(exc)}"
                ) from None
            bot_port = await runtime.serve_http("127.0.0.1", 0)
            self.fake.events_url = f"http://127.0.0.1:{bot_port}/slack/events"
        except BaseException:
            await self.stop()
            raise

    async def _start_fake(self) -> None:
        port = DEFAULT_PORT if self.requested_port is None else self.requested_port
        try:
            await self.fake.start(self.host, port)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            if self.requested_port is not None:
                msg = f"port {port} on {self.host} is in use; choose another with --port (0: any free port)"
                raise PortInUseError(errno.EADDRINUSE, msg) from None
            await self.fake.start(self.host, 0)
            self.port_note = f"port {port} is in use, so the playground took {self.fake.port}"

    def _settings(self) -> Settings:
        assert self._redis_url is not None
        values: dict[str, Any] = {
            "slack_bot_token": self.fake.bot_token,
            "slack_app_token": None,
            "slack_signing_secret": self.signing_secret,
            "slack_api_url": self.fake.api_url,
            "redis_url": self._redis_url,
            "prefix": self.prefix,
            "default_channel": self.default_channel,
            "config_path": None,
            **self._extra_settings,
        }
        return Settings(**values)

    async def stop(self) -> None:
        """Stop the bot, the fake and the embedded Redis (the Redis at REDIS_URL is left as it is)."""
        if self._runtime is not None:
            runtime, self._runtime = self._runtime, None
            await runtime.aclose()
        await self.fake.stop()
        if self._redis is not None:
            client, self._redis = self._redis, None
            await client.aclose()
        if self.embedded is not None:
            embedded, self.embedded = self.embedded, None
            await asyncio.to_thread(embedded.stop)

    async def __aenter__(self) -> Playground:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # what callers read

    @property
    def url(self) -> str:
        """The page's address, e.g. `http://127.0.0.1:8080/`."""
        shown = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        return f"http://{shown}:{self.fake.port}/"

    @property
    def redis_url(self) -> str:
        if self._redis_url is None:
            msg = "the playground is not started"
            raise RuntimeError(msg)
        return self._redis_url

    @property
    def redis(self) -> Redis:
        if self._redis is None:
            msg = "the playground is not started"
            raise RuntimeError(msg)
        return self._redis

    @property
    def store(self) -> Store:
        """The bot's store under the playground's prefix (read by the pending list and results)."""
        return Store(self.redis, self.prefix)

    @property
    def runtime(self) -> BotRuntime:
        if self._runtime is None:
            msg = "the playground is not started"
            raise RuntimeError(msg)
        return self._runtime

    # asks and results

    def envelope(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        """A full ask envelope from `fields`, filling `v`, `ask_id`, `reply_to` and `route` when missing."""
        envelope: dict[str, Any] = {
            "v": 1,
            "ask_id": f"demo-{uuid.uuid4().hex[:12]}",
            "reply_to": self.reply_to,
            "route": {"channel": self.default_channel},
        }
        envelope.update(fields)
        return envelope

    async def send_ask(self, envelope: Mapping[str, Any]) -> str:
        """XADD the envelope onto `<prefix>:asks`, as an agent would; its reply list joins the panel."""
        reply_to = envelope.get("reply_to")
        if isinstance(reply_to, str) and reply_to not in self.watched:
            self.watched.append(reply_to)
        entry = await self.redis.xadd(f"{self.prefix}:asks", {"ask": json.dumps(envelope)})
        return entry.decode() if isinstance(entry, bytes) else str(entry)

    async def send_samples(self) -> list[str]:
        """Post the sample asks, each once the one before is in the channel; returns their ask ids."""
        sent = []
        for fields in sample_asks():
            envelope = self.envelope(fields)
            posted = len(self.fake.messages(self.default_channel))
            await self.send_ask(envelope)
            sent.append(str(envelope["ask_id"]))
            # The bot takes asks concurrently; waiting keeps the channel in the order a reader expects.
            with contextlib.suppress(TimeoutError):
                await self.fake.wait_for(self._more_messages_than(posted), timeout=5, what="the sample ask")
        return sent

    def _more_messages_than(self, count: int) -> Callable[[], bool]:
        return lambda: len(self.fake.messages(self.default_channel)) > count

    async def results(self) -> list[dict[str, Any]]:
        """Results on the watched reply lists, newest first; read without consuming them (LRANGE)."""
        found: list[tuple[str, int, dict[str, Any]]] = []
        for reply_to in list(self.watched):
            raw_items = await self.redis.lrange(reply_to, -MAX_RESULTS, -1)
            for index, raw in enumerate(raw_items):
                with contextlib.suppress(ValueError, UnicodeDecodeError):
                    item = json.loads(raw)
                    if isinstance(item, dict):
                        found.append((str(item.get("resolved_at") or ""), index, {**item, "_list": reply_to}))
        # And every ended ask's result in the store: asks sent from elsewhere (slack-ask ask, an agent)
        # answer on lists of their own, which their sender empties when it takes the result.
        on_lists = {str(item.get("ask_id")) for _, _, item in found}
        for item in await asks.stored_results(self.store):
            if str(item.get("ask_id")) not in on_lists:
                found.append((str(item.get("resolved_at") or ""), -1, item))
        found.sort(key=lambda entry: (entry[0], entry[1]), reverse=True)
        return [item for _, _, item in found[:MAX_RESULTS]]
