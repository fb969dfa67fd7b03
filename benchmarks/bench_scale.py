"""Issue 22's scale table: one Redis filled with 10,000 / 100,000 / 1,000,000 pending asks, and per
size what a replica costs and how fast it works with that many waiting.

The pending asks are one-click asks with a 2 h deadline, written the way the bot writes them (one
template ask through a real replica, copied byte for byte: ``_fill.py``). Sizes grow in one Redis
(each fill adds the difference). Per size:

* Redis memory per pending ask: ``used_memory`` (clients' buffers left out) grown over the fill,
  divided by the asks it added;
* replica start: a new bot process, from ``BotRuntime(...)`` to serving (and from spawning it);
* idle cost: that replica doing nothing for ``--idle`` s (sweeper, intake, reclaim loops): Redis
  commands/s on the server (scripts' inner commands included), its round trips/s and CPU;
* ``--asks`` one-click asks through it at ``--concurrency``: intake asks/s, click -> result, and
  Slack calls and Redis commands per answered ask in that run.

Run: ``.venv/bin/python -m benchmarks.bench_scale [--sizes 10000,100000,1000000] [--asks 500]``.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from dataclasses import dataclass

from redis.asyncio import Redis

from benchmarks._bot_proc import BotProc, bot_settings
from benchmarks._common import (
    DEFAULT_HASH_VALUE,
    KB,
    CountingConnection,
    at_most,
    harness_gc_off,
    pct,
    per_command,
    private_redis,
    used_memory,
)
from benchmarks._fake_proc import FakeProc
from benchmarks._fill import TEMPLATE_ID, capture, fill
from benchmarks._rounds import CHANNEL, ID_PATTERN, Idle, Round, envelope, idle_cost, push, run_round
from bot.storage.connection import connect

DEADLINE_MS = 2 * 3_600_000


@dataclass
class Size:
    n: int
    fill_s: float
    mem_per_ask: float
    start_s: float
    spawn_s: float
    idle: Idle
    run: Round


def _flat(values: list[float]) -> str:
    """How far the largest size's figure is from the smallest's (the target: flat)."""
    if len(values) < 2 or not values[0]:
        return ""
    return f"x{values[-1] / values[0]:.2f} of the smallest size"


def report(sizes: list[Size]) -> None:
    print("\nScale (per size; targets: memory <= 1.5 KB an ask, everything else flat as the count grows)")
    head = "".join(f"{s.n:>14,}" for s in sizes)
    print(f"  {'pending asks':<40}{head}")

    def line(label: str, values: list[float], fmt: str, note: str = "") -> None:
        cells = "".join(f"{format(v, fmt):>14}" for v in values)
        print(f"  {label:<40}{cells}   {note}".rstrip())

    mem = [s.mem_per_ask for s in sizes]
    line(
        "Redis memory per pending ask (KB)",
        [m / KB for m in mem],
        ".2f",
        " ".join(at_most(1.5 * KB, "<= 1.5 KB").mark(m) for m in mem[-1:]),
    )
    line("fill time (s)", [s.fill_s for s in sizes], ".1f")
    line(
        "idle replica: Redis commands/s",
        [s.idle.commands_per_s for s in sizes],
        ".1f",
        _flat([s.idle.commands_per_s for s in sizes]),
    )
    line(
        "idle replica: round trips/s",
        [s.idle.trips_per_s for s in sizes],
        ".1f",
        _flat([s.idle.trips_per_s for s in sizes]),
    )
    line(
        "idle replica: CPU (% of a core)",
        [s.idle.cpu_share * 100 for s in sizes],
        ".1f",
        _flat([s.idle.cpu_share for s in sizes]),
    )
    line(
        "intake (asks/s)",
        [s.run.intake_rate for s in sizes],
        ".1f",
        _flat([s.run.intake_rate for s in sizes]),
    )
    p50 = [pct(s.run.click_result, 50) * 1000 for s in sizes]
    p99 = [pct(s.run.click_result, 99) * 1000 for s in sizes]
    line("click -> result p50 (ms)", p50, ".1f", _flat(p50))
    line("click -> result p99 (ms)", p99, ".1f", f"{_flat(p99)}  {at_most(20, '<= 20 ms').mark(p99[-1])}")
    line(
        "replica start, BotRuntime -> serving (s)",
        [s.start_s for s in sizes],
        ".2f",
        _flat([s.start_s for s in sizes]),
    )
    line("replica start, spawn -> serving (s)", [s.spawn_s for s in sizes], ".2f")
    line(
        "Slack calls per answered ask",
        [sum(s.run.slack_calls.values()) / s.run.per_answered for s in sizes],
        ".2f",
    )
    line(
        "Redis commands per answered ask",
        [s.run.commands_per_ask for s in sizes],
        ".1f",
    )
    for s in sizes:
        print(
            f"  {s.n:,}: idle commands/s {per_command(s.idle.commands, s.idle.seconds, 6)}; "
            f"per ask {per_command(s.run.command_mix(), 1, 6)}; "
            f"results {dict(s.run.outcomes)} of {s.run.n}"
        )


async def settled(redis: Redis, prefix: str, *, within_s: float) -> None:
    """Wait (up to ``within_s``) until no timer in ``P:due`` comes due within the next minute."""
    give_up = time.monotonic() + within_s
    while time.monotonic() < give_up:
        seconds, micros = await redis.time()
        soon = int(seconds) * 1000 + int(micros) // 1000 + 60_000
        if not await redis.zrangebyscore(f"{prefix}:due", "-inf", soon):
            return
        await asyncio.sleep(0.5)
    print(f"  (the template's timers still come due within a minute after {within_s:.0f} s)")


async def main(args: argparse.Namespace) -> None:
    sizes = sorted(int(x) for x in args.sizes.split(",") if x.strip())
    redis = private_redis()
    fake = await FakeProc(ID_PATTERN).start()
    agent = connect(redis.url, connection_class=CountingConnection)
    # Redis's own default, as in bench_bot's table.
    await agent.config_set("hash-max-listpack-value", DEFAULT_HASH_VALUE)
    prefix = f"bench-{uuid.uuid4().hex[:6]}"
    settings = bot_settings(fake.info["api_url"], fake.info["bot_token"], redis.url, prefix)
    results: list[Size] = []
    harness_gc_off()  # the agent side's timestamps (the bot's pauses are measured, not its own)
    try:
        print(
            f"slack-ask scale bench: sizes {', '.join(f'{n:,}' for n in sizes)}; "
            f"private {redis.kind} ({redis.url})"
        )
        writer = await BotProc(settings, concurrency=args.concurrency).start()
        await fake.call("events_url", writer.events_url)
        await push(agent, prefix, [envelope(prefix, TEMPLATE_ID, timeout_ms=DEADLINE_MS)])
        posts = await fake.call("posts", ([TEMPLATE_ID], 60))
        if TEMPLATE_ID not in posts:
            raise SystemExit("the template ask was not posted")
        await asyncio.sleep(1.0)  # its records written after the post
        # A version may set a short timer at the post (a clean-up look after a late record) and move
        # it to the deadline once it fires: copied before that, every copy's timer would come due at
        # once and the idle figures would measure a sweep of the whole fill, which no real Redis sees
        # (its asks were posted over time). The template is copied once its timers are settled.
        await settled(agent, prefix, within_s=60)
        await writer.stop()
        template = await capture(agent, posts[TEMPLATE_ID][0][1])
        print(f"template ask ({CHANNEL}): {template.describe()}")
        filled = 0
        for n in sizes:
            mem0 = await used_memory(agent)
            fill_s = fill(redis.url, template, filled, n)
            mem = (await used_memory(agent) - mem0) / (n - filled)
            print(
                f"filled {n - filled:,} asks (now {n:,} pending) in {fill_s:.1f} s: "
                f"{mem / KB:.2f} KB an ask; DBSIZE {await agent.dbsize():,}"
            )
            filled = n
            bot = await BotProc(settings, concurrency=args.concurrency).start()
            try:
                await fake.call("events_url", bot.events_url)
                idle = await idle_cost(agent, bot, args.idle)
                run = await run_round(
                    f"s{n}",
                    args.asks,
                    args.concurrency,
                    agent=agent,
                    prefix=prefix,
                    bot=bot,
                    fake=fake,
                    sample_memory_usage=False,
                )
            finally:
                await bot.stop()
            results.append(Size(n, fill_s, mem, bot.info["start_s"], bot.spawn_to_ready_s, idle, run))
            print(
                f"  {n:,}: start {bot.info['start_s']:.2f} s; idle {idle.commands_per_s:.1f} commands/s, "
                f"CPU {idle.cpu_share * 100:.1f}%; intake {run.intake_rate:.1f}/s; click->result p99 "
                f"{pct(run.click_result, 99) * 1000:.1f} ms"
            )
        report(results)
    finally:
        await fake.stop()
        await agent.aclose()
        redis.stop()


def cli() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10000,100000,1000000", help="pending asks, comma-separated")
    parser.add_argument(
        "--asks", type=int, default=500, help="asks through the bot at each size (default 500)"
    )
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--idle", type=float, default=5.0, help="seconds the idle replica is watched")
    asyncio.run(main(parser.parse_args()))


if __name__ == "__main__":
    cli()
