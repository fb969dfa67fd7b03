"""Recovery: a replica SIGKILLed while it holds deliveries; how long until another replica gets each
ask's result onto its reply list.

The fake Slack holds every ``chat.postMessage`` unanswered, so replica A takes the asks, leases them
and waits on Slack; replica B is started (and running) before A is killed. After the kill the fake
drops A's held calls (their connection is gone: those posts never happened) and answers the rest;
every post that lands is clicked at once. kill -> result covers noticing the dead holder, taking its
asks over, posting, the click and the result. Settings are the bot's defaults (leases, reclaim).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from redis.asyncio import Redis

from benchmarks._bot_proc import BotProc, bot_settings
from benchmarks._fake_proc import FakeProc
from benchmarks._rounds import collect, envelope, push

CHANNEL = "C0KILL"


@dataclass
class Recovery:
    asks: int
    held: int = 0
    kill_result: list[float] = field(default_factory=list)
    missing: int = 0
    duplicates: int = 0
    dropped: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)


async def kill_during_delivery(
    agent: Redis, fake: FakeProc, redis_url: str, prefix: str, k: int, wait: float, **settings_: object
) -> Recovery:
    """``settings_``: settings other than the defaults (the harness's smoke test shortens the leases)."""
    out = Recovery(k)
    settings = bot_settings(fake.info["api_url"], fake.info["bot_token"], redis_url, prefix, **settings_)
    await fake.call("hold", True)
    a = await BotProc(settings).start()
    b: BotProc | None = None
    try:
        await fake.call("events_url", a.events_url)
        ids = [f"bench-kill-{i}" for i in range(k)]
        await push(agent, prefix, [envelope(prefix, x, channel=CHANNEL) for x in ids])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            out.held, _ = await fake.call("held")
            if out.held >= k:
                break
            await asyncio.sleep(0.05)
        b = await BotProc(settings).start()
        await fake.call("events_url", b.events_url)
        await fake.call("autoclick", CHANNEL)
        killed = time.time()
        a.kill()
        await asyncio.sleep(0.2)  # the kernel closes A's sockets; the fake sees them gone
        await fake.call("hold", False)
        arrived = await collect(agent, {x: f"{prefix}:reply:{x}" for x in ids}, within_s=wait)
        out.kill_result = sorted(t - killed for t, _ in arrived.values())
        out.missing = k - len(arrived)
        outcomes: dict[str, int] = {}
        for _, result in arrived.values():
            outcomes[str(result.get("outcome"))] = outcomes.get(str(result.get("outcome")), 0) + 1
        out.outcomes = outcomes
        posts = await fake.call("posts", (ids, 0))
        out.duplicates = sum(len(p) - 1 for p in posts.values())
        _, out.dropped = await fake.call("held")
        await fake.call("autoclick", None)
    finally:
        await fake.call("hold", False)
        if a.proc.is_alive():
            a.kill()
        if b is not None:
            await b.stop()
    return out
