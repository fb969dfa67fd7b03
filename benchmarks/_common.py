"""Shared pieces of the benchmark scripts: a private Redis and what it counts, a connection that counts
round trips, a process's CPU, percentiles, and the goal column printed beside each figure."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import multiprocessing as mp
import os
import statistics
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from redis.asyncio import Redis
from redis.asyncio.connection import Connection

from bot.storage.embedded import EmbeddedRedis, redis_answers, start_embedded_redis

KB = 1024
DEFAULT_HASH_VALUE = 64
"""Redis's own ``hash-max-listpack-value``: the benchmarks' rounds run at it (the embedded server starts
with the recommended one), what a Redis nobody tuned keeps."""
TUNED_HASH_VALUE = 4096
"""The one docs/operations.md recommends (``bot.storage.base.COMPACT_HASH_VALUE_BYTES``; a literal here,
so that the benchmarks run against older checkouts too)."""


def harness_gc_off() -> None:
    """The measuring processes' own collector off (the fake Slack, the agent side), the bot's left as
    it serves. A timestamp in the fake or the agent waits for their collector too: a full collection
    of the fake's heap (every message of the run) paused it for 60-120 ms a few times a round, and each
    pause showed up as a slow click ack and a slow result for every click it caught (2026-12-06). The
    garbage they make in a run is a few MB."""
    gc.collect()
    gc.freeze()
    gc.disable()


SPAWN = mp.get_context("spawn")
"""Child processes start from a fresh interpreter: nothing of the parent's loop or connections."""


class Child:
    """A benchmark's child process (a bot replica, the fake Slack) driven over a pipe: ``call`` sends
    a command and waits for its answer; ``stop`` asks it to stop, then kills it if it will not."""

    def __init__(self, target: Callable[..., None], *args: Any) -> None:
        self.pipe, child = SPAWN.Pipe()
        self.proc = SPAWN.Process(target=target, args=(child, *args), daemon=True)
        self.info: dict[str, Any] = {}

    @property
    def pid(self) -> int:
        assert self.proc.pid is not None
        return self.proc.pid

    async def _spawn(self, within_s: float, what: str) -> None:
        """Start the process and wait for its first message, ``(ready, info)``."""
        self.proc.start()
        loop = asyncio.get_running_loop()
        if not await loop.run_in_executor(None, self.pipe.poll, within_s):
            raise RuntimeError(f"{what} (pid {self.pid}) did not start within {within_s} s")
        _, self.info = self.pipe.recv()

    async def call(self, command: str, arg: Any = None) -> Any:
        self.pipe.send((command, arg))
        return await asyncio.get_running_loop().run_in_executor(None, self.pipe.recv)

    async def stop(self) -> None:
        if self.proc.is_alive():
            with contextlib.suppress(TimeoutError, EOFError, BrokenPipeError, OSError):
                await asyncio.wait_for(self.call("stop"), timeout=30)
        self.proc.join(timeout=10)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=5)

    def kill(self) -> None:
        """SIGKILL: a crash, nothing finished or acknowledged."""
        self.proc.kill()
        self.proc.join(timeout=10)


class CountingConnection(Connection):
    """Counts client round trips (one per packed send: a pipeline is one) and commands by name."""

    sent = 0
    commands: ClassVar[Counter[str]] = Counter()

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        CountingConnection.sent += 1
        await super().send_packed_command(command, check_health)

    def pack_command(self, *args: Any) -> list[bytes]:
        name = args[0].decode() if isinstance(args[0], bytes) else str(args[0])
        CountingConnection.commands[name.split()[0].upper()] += 1  # "MEMORY USAGE": MEMORY, as INFO names it
        return super().pack_command(*args)


def choose_redis() -> tuple[str, str, EmbeddedRedis | None]:
    url = os.environ.get("REDIS_URL")
    if url:
        return url, "REDIS_URL", None
    if redis_answers():
        return "redis://127.0.0.1:6379/0", "redis at 127.0.0.1:6379", None
    embedded = start_embedded_redis()
    return embedded.url, f"embedded {embedded.kind}", embedded


def private_redis() -> EmbeddedRedis:
    """A redis-server of the benchmark's own on a free port: its ``INFO`` counts only this run."""
    embedded = start_embedded_redis()
    if not embedded.kind.startswith("redis-server"):
        embedded.stop()
        raise SystemExit("this benchmark needs a redis-server binary on PATH (INFO commandstats, MEMORY)")
    return embedded


class ServerCounts:
    """Commands the server ran (``INFO commandstats``: a script's inner ``redis.call``s included), less
    the ones this process sent through its :class:`CountingConnection` client (the agent's, the INFO
    itself): what is left is the bot's."""

    def __init__(self, redis: Redis) -> None:
        self.redis = redis

    async def snapshot(self) -> Counter[str]:
        mine = Counter(CountingConnection.commands)  # before the INFO below: it is counted in the next
        stats = await self.redis.info("commandstats")
        server: Counter[str] = Counter()
        for name, value in stats.items():
            if isinstance(value, dict) and "calls" in value:
                server[name.removeprefix("cmdstat_").split("|")[0].upper()] += int(value["calls"])
        server.subtract(mine)
        return server

    @staticmethod
    def delta(before: Counter[str], after: Counter[str]) -> Counter[str]:
        out = Counter(after)
        out.subtract(before)
        return Counter({k: v for k, v in out.items() if v > 0})


async def used_memory(redis: Redis) -> int:
    """``used_memory`` less the clients' buffers (they come and go with the connections and BLPOPs,
    not with the asks): what the keys take, the main dict's slots included."""
    info = await redis.info("memory")
    clients = int(info.get("mem_clients_normal", 0)) + int(info.get("mem_clients_slaves", 0))
    return int(info["used_memory"]) - clients


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of process ``pid`` so far (Linux ``/proc``)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def summary(values: list[float]) -> str:
    if not values:
        return "(none)"
    return (
        f"p50 {pct(values, 50) * 1000:7.1f} ms   p99 {pct(values, 99) * 1000:7.1f} ms   "
        f"max {max(values) * 1000:7.1f} ms   mean {statistics.fmean(values) * 1000:7.1f} ms"
    )


def per_command(commands: Mapping[str, float], n: float = 1, top: int = 10) -> str:
    """The ``top`` commands, each as its count divided by ``n`` (asks, or seconds)."""
    ranked = sorted(commands.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    return ", ".join(f"{name} {count / max(n, 1e-9):.1f}" for name, count in ranked)


@dataclass(frozen=True)
class Goal:
    """A target of issue 22's table, printed beside the figure it bounds."""

    text: str
    met: Callable[[float], bool]

    def mark(self, value: float) -> str:
        if value != value:  # NaN: not measured
            return f"target {self.text}: not measured"
        return f"target {self.text}: {'ok' if self.met(value) else 'MISSED'}"


def at_most(bound: float, text: str) -> Goal:
    return Goal(text, lambda v: v <= bound)


def at_least(bound: float, text: str) -> Goal:
    return Goal(text, lambda v: v >= bound)


def row(label: str, figure: str, goal: Goal | None = None, value: float = float("nan")) -> str:
    return f"  {label:<56} {figure:>22}   {goal.mark(value) if goal else ''}".rstrip()
