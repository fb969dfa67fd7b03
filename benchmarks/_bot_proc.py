"""A bot replica in a process of its own (as in production), driven over a pipe by the benchmark.

Only entry points that every version of the bot has are used (``Settings``, ``BotRuntime``,
``bot.storage.connection.connect``), so the same benchmark measures an older checkout as well.
"""

from __future__ import annotations

import asyncio
import os
import time
from multiprocessing.connection import Connection as Pipe
from typing import Any

from benchmarks._common import Child, CountingConnection

SECRET = "bench-secret"


def _main(pipe: Pipe, settings: dict[str, Any], concurrency: int | None) -> None:
    spawned = time.time()

    async def run() -> None:
        from bot.config import Settings
        from bot.runtime import BotRuntime
        from bot.storage.connection import connect

        began = time.perf_counter()
        runtime = BotRuntime(
            Settings(**settings), redis=connect(settings["redis_url"], connection_class=CountingConnection)
        )
        note = ""
        if concurrency is not None:
            if isinstance(getattr(runtime.intake, "_slots", None), asyncio.Semaphore):
                runtime.intake._slots = asyncio.Semaphore(concurrency)
            else:
                note = "intake concurrency left at the bot's default (no way found to set it)"
        await runtime.start()
        port = await runtime.serve_http("127.0.0.1", 0)
        started_s = time.perf_counter() - began
        try:  # as `slack-ask serve` sets it once serving (versions before it had none)
            from bot.gc_tuning import tune_for_serving
        except ImportError:
            pass
        else:
            tune_for_serving()
        loop = asyncio.get_running_loop()
        pipe.send(("ready", {"port": port, "start_s": started_s, "spawned": spawned, "note": note}))
        while True:
            command, arg = await loop.run_in_executor(None, pipe.recv)
            if command == "count":
                pipe.send(CountingConnection.sent)
            elif command == "commands":
                pipe.send(dict(CountingConnection.commands))
            elif command == "bare":
                n, message = arg
                pipe.send(await _bare(runtime, n, concurrency or 16, message))
            elif command == "stop":
                await runtime.aclose()
                pipe.send("stopped")
                return

    if os.environ.get("BENCH_PROFILE"):
        import cProfile

        cProfile.runctx(
            "asyncio.run(run())", globals(), locals(), f"{os.environ['BENCH_PROFILE']}.{os.getpid()}"
        )
    else:
        asyncio.run(run())


async def _bare(runtime: Any, n: int, concurrency: int, message: dict[str, Any]) -> float:
    """``n`` bare chat.postMessage calls, ``concurrency`` at a time, with the bot's own client and HTTP
    session, posting ``message`` (text and blocks of a post the bot made for such an ask, as the fake
    received it): the yardstick of intake's rate."""
    slots = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with slots:
            await runtime.client.chat_postMessage(
                channel="C0RANDOM", text=message["text"] or f"bare {i}", blocks=message["blocks"]
            )

    started = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    return n / (time.perf_counter() - started)


class BotProc(Child):
    """One replica: ``start()`` spawns it and waits until it serves; ``call`` sends it a command."""

    def __init__(self, settings: dict[str, Any], *, concurrency: int | None = None) -> None:
        super().__init__(_main, settings, concurrency)
        self.settings = settings
        self.concurrency = concurrency
        self.spawn_to_ready_s = float("nan")

    @property
    def events_url(self) -> str:
        return f"http://127.0.0.1:{self.info['port']}/slack/events"

    async def start(self, within_s: float = 120) -> BotProc:
        began = time.time()
        await self._spawn(within_s, "the bot process")
        self.spawn_to_ready_s = time.time() - began
        return self


def bot_settings(
    fake_api_url: str, bot_token: str, redis_url: str, prefix: str, **more: Any
) -> dict[str, Any]:
    """The replica's settings: defaults everywhere (leases, reclaim, sweep), pacing off."""
    return {
        "slack_bot_token": bot_token,
        "slack_signing_secret": SECRET,
        "slack_api_url": fake_api_url,
        "redis_url": redis_url,
        "prefix": prefix,
        "pace_scale": 0,
        **more,
    }
