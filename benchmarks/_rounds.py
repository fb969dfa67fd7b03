"""One measured round: N one-click asks pushed by an agent, posted by a bot replica through the fake
Slack, each clicked once (``concurrency`` at a time), its result popped from its own reply list.

Everything is measured from the outside: the bot's Redis commands from the server's ``INFO
commandstats`` (scripts' inner commands included; the agent's own subtracted), its round trips from
its :class:`CountingConnection`, Slack calls from the fake, memory from ``INFO used_memory``, CPU from
``/proc``. Figures are per answered ask.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis

from benchmarks._bot_proc import BotProc
from benchmarks._common import ServerCounts, cpu_seconds, used_memory
from benchmarks._fake_proc import FakeProc

ID_PATTERN = r"bench-[a-z0-9]+-\d+"
CHANNEL = "C0BENCH"


def envelope(
    prefix: str, ask_id: str, channel: str = CHANNEL, timeout_ms: int | None = None
) -> dict[str, object]:
    """A one-click ask as an agent sends it (``AskClient``'s default: a reply list of its own)."""
    env: dict[str, object] = {
        "v": 1,
        "ask_id": ask_id,
        "reply_to": f"{prefix}:reply:{ask_id}",
        "route": {"channel": channel},
        "request": {"id": "deploy", "question": f"Deploy {ask_id}?", "options": ["Yes", "No"]},
    }
    if timeout_ms is not None:
        env["timeout_ms"] = timeout_ms
    return env


async def push(agent: Redis, prefix: str, envelopes: list[dict[str, object]]) -> dict[str, float]:
    """XADD every envelope in one pipeline; when each was added (s, Redis's clock from its entry id)."""
    async with agent.pipeline(transaction=False) as pipe:
        for env in envelopes:
            pipe.xadd(f"{prefix}:asks", {"ask": json.dumps(env)})
        ids = await pipe.execute()
    return {
        str(e["ask_id"]): int(i.decode().split("-")[0]) / 1000 for e, i in zip(envelopes, ids, strict=True)
    }


Arrivals = dict[str, tuple[float, dict[str, object]]]


async def collect(
    agent: Redis, reply_to: dict[str, str], within_s: float, lanes: int = 4, arrived: Arrivals | None = None
) -> Arrivals:
    """Pop each ask's result from its own list (``lanes`` agents, each a share of the lists, one BLPOP
    over its share at a time): ask id -> (arrival, result), into ``arrived`` as they come."""
    arrived = {} if arrived is None else arrived
    deadline = time.monotonic() + within_s
    ids = list(reply_to)

    async def lane(share: list[str]) -> None:
        waiting = {reply_to[a]: a for a in share}
        while waiting and time.monotonic() < deadline:
            got = await agent.blpop(list(waiting), timeout=1)
            if got is None:
                continue
            now = time.time()
            key = got[0].decode() if isinstance(got[0], bytes) else str(got[0])
            arrived[waiting.pop(key)] = (now, json.loads(got[1]))

    await asyncio.gather(*(lane(ids[i::lanes]) for i in range(lanes)))
    return arrived


@dataclass
class Round:
    n: int
    bare_rate: float = float("nan")
    intake_rate: float = float("nan")
    post_latency: list[float] = field(default_factory=list)
    click_result: list[float] = field(default_factory=list)
    click_ack: list[float] = field(default_factory=list)
    slow_acks: int = 0
    answered: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    posted: int = 0
    trips_intake: int = 0
    trips_click: int = 0
    commands_intake: Counter[str] = field(default_factory=Counter)  # XADD -> every ask posted
    commands_click: Counter[str] = field(default_factory=Counter)  # first click -> last redraw
    slack_calls: Counter[str] = field(default_factory=Counter)
    mem_pending: float = float("nan")
    mem_ended: float = float("nan")
    memory_usage_pending: float = float("nan")
    cpu_s: float = float("nan")
    duplicates: int = 0
    missing: int = 0  # clicked, no result (the click not recorded under load)
    seconds: float = float("nan")  # from the first XADD to the last redraw settled
    sample: dict[str, Any] | None = None  # one post's text and blocks as the fake received them

    @property
    def per_answered(self) -> int:
        return max(self.answered, 1)

    # Per answered ask: intake's share over the asks posted, the click's over the asks answered (a
    # click the bot could not record under load leaves an ask posted but never answered).
    def command_mix(self) -> dict[str, float]:
        """Commands by name per answered ask."""
        out: dict[str, float] = {}
        for name, count in self.commands_intake.items():
            out[name] = out.get(name, 0.0) + count / max(self.posted, 1)
        for name, count in self.commands_click.items():
            out[name] = out.get(name, 0.0) + count / self.per_answered
        return out

    @property
    def commands_per_ask(self) -> float:
        return sum(self.command_mix().values())

    @property
    def trips_per_ask(self) -> float:
        return self.trips_intake / max(self.posted, 1) + self.trips_click / self.per_answered


async def _settled(agent: Redis, prefix: str, within_s: float = 60) -> None:
    """Wait until every stream entry is acknowledged (the bot's intake done with them)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            pending = await agent.xpending(f"{prefix}:asks", "bots")
        except Exception:  # no group yet
            return
        if not pending["pending"]:
            return
        await asyncio.sleep(0.05)


async def _memory_usage(agent: Redis, ids: list[str]) -> float:
    """MEMORY USAGE summed over the keys whose names carry the ask's id (SCAN: small Redis only)."""
    total = 0
    for ask_id in ids:
        async for key in agent.scan_iter(match=f"*{ask_id}*", count=1000):
            total += int(await agent.memory_usage(key, samples=0) or 0)
    return total / max(len(ids), 1)


async def run_round(
    label: str,
    n: int,
    concurrency: int,
    *,
    agent: Redis,
    prefix: str,
    bot: BotProc,
    fake: FakeProc,
    bare: dict[str, Any] | None = None,
    sample_memory_usage: bool = True,
    timeout_ms: int | None = None,
    grace_s: float = 30.0,
    until: str = "redraw",
) -> Round:
    r = Round(n)
    server = ServerCounts(agent)
    if bare is not None:
        r.bare_rate = await bot.call("bare", (n, bare))
    ids = [f"bench-{label}-{i}" for i in range(n)]
    envelopes = [envelope(prefix, a, timeout_ms=timeout_ms) for a in ids]
    mem0 = await used_memory(agent)
    cmd0 = await server.snapshot()
    trips0 = await bot.call("count")
    cpu0 = cpu_seconds(bot.pid)
    calls0 = await fake.call("calls")

    started = time.time()
    added = await push(agent, prefix, envelopes)
    posts = await fake.call("posts", (ids, 600))
    if len(posts) < n:
        print(f"  warning: {n - len(posts)} of {n} asks were not posted within 600 s")
    last = max((p[0][2] for p in posts.values()), default=float("nan"))
    r.intake_rate = len(posts) / (last - started) if posts else float("nan")
    r.post_latency = [p[0][2] - added[a] for a, p in posts.items()]
    r.duplicates = sum(len(p) - 1 for p in posts.values())
    await _settled(agent, prefix)
    r.posted = len(posts)
    r.trips_intake = await bot.call("count") - trips0
    cmd1 = await server.snapshot()
    r.commands_intake = server.delta(cmd0, cmd1)
    r.mem_pending = (await used_memory(agent) - mem0) / n
    if sample_memory_usage:
        r.memory_usage_pending = await _memory_usage(agent, ids[:: max(n // 20, 1)])

    trips1 = await bot.call("count")
    order = [a for a in ids if a in posts]
    targets = [(posts[a][0][0], posts[a][0][1]) for a in order]
    arrived: Arrivals = {}
    lists = {a: f"{prefix}:reply:{a}" for a in order}
    collector = asyncio.create_task(collect(agent, lists, within_s=600, arrived=arrived))
    clicks = await fake.call("click", (targets, concurrency, until))
    # A click the bot could not record (it says so to the clicker) leaves its ask pending: no result
    # comes. Wait a bounded time after the last click rather than for every result.
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(collector, timeout=grace_s)
    r.missing = len(order) - len(arrived)
    if r.missing:
        print(f"  warning: {r.missing} clicked asks had no result {grace_s:.0f} s after the last click")
    for ask_id, (sent, ack, status) in zip(order, clicks, strict=True):
        r.click_ack.append(ack)
        r.slow_acks += status != 200
        if ask_id in arrived:
            r.click_result.append(arrived[ask_id][0] - sent)
    r.answered = sum(1 for a in arrived.values() if a[1].get("outcome") == "answered")
    r.outcomes = Counter(str(a[1].get("outcome")) for a in arrived.values())
    ended = [t for a, t in zip(order, targets, strict=True) if a in arrived]
    redrawn = await fake.call("updated", (ended, 120))
    if redrawn < len(ended):
        print(f"  warning: {len(ended) - redrawn} of {len(ended)} ended asks' messages were not redrawn")
    await asyncio.sleep(0.3)  # the clean-up after the redraw (finalize)
    r.trips_click = await bot.call("count") - trips1
    r.commands_click = server.delta(cmd1, await server.snapshot())
    r.mem_ended = (await used_memory(agent) - mem0) / n
    r.cpu_s = cpu_seconds(bot.pid) - cpu0
    r.seconds = time.time() - started
    calls = await fake.call("calls")
    calls.subtract(calls0)
    r.slack_calls = Counter({k: v for k, v in calls.items() if v > 0})
    if bare is not None:
        # Before and after the round (outside every count): the machine's load drifts, and the ratio
        # should not ride on it.
        r.bare_rate = (r.bare_rate + await bot.call("bare", (n, bare))) / 2
    if targets:
        r.sample = await fake.call("message", targets[0])
    return r


@dataclass
class Idle:
    commands_per_s: float
    trips_per_s: float
    cpu_share: float  # of one core
    commands: Counter[str]
    seconds: float


async def idle_cost(agent: Redis, bot: BotProc, seconds: float) -> Idle:
    """What a replica with nothing to do costs: its loops' Redis commands (server side, scripts' inner
    commands included) and round trips per second, and its CPU."""
    server = ServerCounts(agent)
    cmd0 = await server.snapshot()
    trips0 = await bot.call("count")
    cpu0 = cpu_seconds(bot.pid)
    began = time.perf_counter()
    await asyncio.sleep(seconds)
    elapsed = time.perf_counter() - began
    commands = server.delta(cmd0, await server.snapshot())
    return Idle(
        commands_per_s=sum(commands.values()) / elapsed,
        trips_per_s=(await bot.call("count") - trips0) / elapsed,
        cpu_share=(cpu_seconds(bot.pid) - cpu0) / elapsed,
        commands=commands,
        seconds=elapsed,
    )
