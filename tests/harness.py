"""End-to-end harness: real Redis, the fake Slack over HTTP on loopback, and real bot replicas
serving Bolt over HTTP, so every interaction is a correctly signed request through the real app."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from redis.asyncio import Redis

from bot.config import Settings
from bot.playground import FakeSlack, Message
from bot.runtime import BotRuntime
from bot.storage.base import server_time_ms
from bot.storage.check import Problem, check_prefix

SIGNING_SECRET = "test-signing-secret"


class LogWatch(logging.Handler):
    """Keeps every log record that is a crash: a traceback, or a loop's one-line bug report."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.crashes: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.exc_info or "Traceback (most recent call last)" in text or getattr(record, "crash", False):
            self.crashes.append(f"{record.name} {record.levelname}: {self.format(record)}")

    def __enter__(self) -> LogWatch:
        logging.getLogger().addHandler(self)
        return self

    def __exit__(self, *_: object) -> None:
        logging.getLogger().removeHandler(self)


def interactive_elements(blocks: Iterable[dict[str, Any]]) -> list[str]:
    """Every action_id in ``blocks`` (buttons, inputs, accessories)."""
    found: list[str] = []
    for block in blocks:
        for element in [
            *(block.get("elements") or []),
            block.get("accessory") or {},
            block.get("element") or {},
        ]:
            if isinstance(element, dict) and element.get("action_id"):
                found.append(str(element["action_id"]))
    return found


def button_values(message: Message) -> dict[str, str]:
    """action_id -> value of the buttons in a message."""
    out: dict[str, str] = {}
    for block in message.blocks:
        for element in block.get("elements") or []:
            if element.get("type") == "button":
                out[str(element["action_id"])] = str(element.get("value", ""))
    return out


@dataclass
class Harness:
    fake: FakeSlack
    redis: Redis
    redis_url: str
    prefix: str
    overrides: dict[str, Any] = field(default_factory=dict)
    replicas: list[BotRuntime] = field(default_factory=list)
    log_watch: LogWatch = field(default_factory=LogWatch)

    def __post_init__(self) -> None:
        self.log_watch.__enter__()

    async def problems(self) -> list[Problem]:
        """The invariant check of this harness's prefix (stuck entries: past reclaim plus a lease)."""
        settings = self.settings()
        idle = settings.reclaim_idle_ms + 2 * settings.delivery_window_ms + 1_000
        return await check_prefix(self.redis, self.prefix, reclaim_idle_ms=idle)

    async def verify(self, timeout: float = 8.0) -> None:
        """End of every end-to-end test: the invariant check finds nothing (once the bot has settled)
        and no bot log line was a crash."""
        deadline = time.monotonic() + timeout
        problems = await self.problems()
        while problems and time.monotonic() < deadline:
            await asyncio.sleep(0.1)  # the sweeper finishes ended asks; poll, do not guess
            problems = await self.problems()
        assert not problems, "broken invariants:\n" + "\n".join(
            f"  {p.kind} {p.key!r}: {p.detail}" for p in problems
        )
        assert not self.log_watch.crashes, "crashes in the bot's log:\n" + "\n".join(self.log_watch.crashes)

    def settings(self, **extra: Any) -> Settings:
        values: dict[str, Any] = {
            "slack_bot_token": self.fake.bot_token,
            "slack_signing_secret": SIGNING_SECRET,
            "slack_api_url": self.fake.api_url,
            "redis_url": self.redis_url,
            "prefix": self.prefix,
            "reclaim_idle_ms": 400,
            "sweep_interval_ms": 50,
            # Below the default (1 s), still growing: every e2e test runs the idle pause (IdlePause).
            "idle_poll_max_ms": 400,
            "delivery_window_ms": 1500,
            "timer_lease_ms": 1500,
            # Like the fake Slack, which enforces no rate limits unless told to: pacing tests opt in.
            "pace_scale": 0,
            **self.overrides,
            **extra,
        }
        return Settings(**values)

    async def start_replica(self, *, serve: bool = True, **extra: Any) -> BotRuntime:
        runtime = BotRuntime(self.settings(**extra), intake_block_ms=200)
        await runtime.start()
        if serve:
            port = await runtime.serve_http("127.0.0.1", 0)
            self.fake.events_url = f"http://127.0.0.1:{port}/slack/events"
        self.replicas.append(runtime)
        return runtime

    async def stop(self) -> None:
        for runtime in self.replicas:
            await runtime.aclose()
        self.replicas.clear()
        self.log_watch.__exit__()
        # A connection left open by this test is reported now, in this test's teardown (warnings are
        # errors), not by whichever later test the garbage collector happens to run in.
        gc.collect()

    def envelope(self, request: Any, **fields: Any) -> dict[str, Any]:
        ask_id = fields.pop("ask_id", f"ask-{uuid.uuid4().hex[:10]}")
        return {
            "v": 1,
            "ask_id": ask_id,
            "reply_to": fields.pop("reply_to", f"{self.prefix}:reply:{ask_id}"),
            "request": request,
            "route": fields.pop("route", {"channel": "C0DEPLOY"}),
            **fields,
        }

    async def send(self, envelope: dict[str, Any] | str, field_name: str = "ask") -> str:
        body = envelope if isinstance(envelope, str) else json.dumps(envelope)
        entry = await self.redis.xadd(f"{self.prefix}:asks", {field_name: body})
        return entry.decode() if isinstance(entry, bytes) else str(entry)

    async def drained(self, timeout: float = 10) -> None:
        """Wait until intake has handled every entry sent (each is deleted once handled)."""
        deadline = time.monotonic() + timeout
        while await self.redis.xlen(f"{self.prefix}:asks"):
            assert time.monotonic() < deadline, f"intake entries still there after {timeout}s"
            await asyncio.sleep(0.05)

    async def result(self, reply_to: str, timeout: float = 10) -> dict[str, Any]:
        got = await self.redis.blpop([reply_to], timeout=timeout)
        assert got is not None, f"no result on {reply_to} within {timeout}s"
        data: dict[str, Any] = json.loads(got[1])
        return data

    async def past_the_end(self, result: dict[str, Any]) -> None:
        """Wait until Redis's clock is past the ms ``result`` ended in. An entry whose id (its XADD's
        Redis time, in ms) is not past the end counts as sent while the ask was pending, a retry that
        gets nothing more (accept.lua): a re-send meant to get the stored result again comes after."""
        ended_ms = datetime.fromisoformat(result["resolved_at"]).timestamp() * 1000
        while await server_time_ms(self.redis) <= ended_ms:  # noqa: ASYNC110 - Redis's clock decides
            await asyncio.sleep(0.001)

    async def no_more_results(self, reply_to: str, wait: float = 0.5) -> bool:
        return await self.redis.blpop([reply_to], timeout=wait) is None

    async def posted(self, channel: str = "C0DEPLOY", count: int = 1, timeout: float = 10) -> list[Message]:
        def ready() -> list[Message] | None:
            messages = [m for m in self.fake.messages(channel) if not m.thread_ts]
            return messages if len(messages) >= count else None

        return await self.fake.wait_for(ready, timeout=timeout, what=f"{count} message(s) in {channel}")

    async def ended(self, channel: str, ts: str, timeout: float = 10) -> Message:
        def done() -> Message | None:
            message = self.fake.state.find_message(channel, ts)
            if message is not None and message.edits and not interactive_elements(message.blocks):
                return message
            return None

        return await self.fake.wait_for(done, timeout=timeout, what=f"message {channel}/{ts} to end")


@contextlib.asynccontextmanager
async def running(fake: FakeSlack, redis: Redis, redis_url: str, prefix: str) -> AsyncIterator[Harness]:
    """A harness with one replica running; once the test is done, the invariant check and a log
    without crashes (guarantee 10.5), then every replica stopped."""
    h = Harness(fake=fake, redis=redis, redis_url=redis_url, prefix=prefix)
    try:
        await h.start_replica()
        yield h
        await h.verify()
    finally:
        await h.stop()
