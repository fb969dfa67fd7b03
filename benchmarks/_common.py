"""Shared pieces of the benchmark scripts: a Redis to use, and a connection that counts round trips."""

from __future__ import annotations

import os
import statistics
from collections import Counter
from typing import Any, ClassVar

from redis.asyncio.connection import Connection

from bot.storage.embedded import EmbeddedRedis, redis_answers, start_embedded_redis


class CountingConnection(Connection):
    """Counts client round trips (one per packed send: a pipeline is one) and commands by name."""

    sent = 0
    commands: ClassVar[Counter[str]] = Counter()

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        CountingConnection.sent += 1
        await super().send_packed_command(command, check_health)

    def pack_command(self, *args: Any) -> list[bytes]:
        name = args[0].decode() if isinstance(args[0], bytes) else str(args[0])
        CountingConnection.commands[name.upper()] += 1
        return super().pack_command(*args)


def choose_redis() -> tuple[str, str, EmbeddedRedis | None]:
    url = os.environ.get("REDIS_URL")
    if url:
        return url, "REDIS_URL", None
    if redis_answers():
        return "redis://127.0.0.1:6379/0", "redis at 127.0.0.1:6379", None
    embedded = start_embedded_redis()
    return embedded.url, f"embedded {embedded.kind}", embedded


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def summary(values: list[float]) -> str:
    return (
        f"p50 {pct(values, 50) * 1000:7.1f} ms   p99 {pct(values, 99) * 1000:7.1f} ms   "
        f"max {max(values) * 1000:7.1f} ms   mean {statistics.fmean(values) * 1000:7.1f} ms"
    )
