"""Issue 22's table: what the bot spends per answered one-click ask, measured from the outside.

Setup: a private redis-server (its ``INFO`` counts only this run), the fake Slack in a process of its
own, one bot replica in another (default settings, pacing off, intake 16 at a time). Each of
``--rounds`` rounds: a bare ``chat.postMessage`` loop (the bot's own client, 16 at a time, the blocks
the bot posts) for the yardstick; then ``--asks`` one-click asks XADDed at once, each posted, clicked
(16 clickers, each clicking its next ask once it sees the last one's message ended: ``--clicks-wait``)
and its result popped from its own reply list. Then a replica is SIGKILLed while
it holds deliveries (``_recovery.py``). Prints every figure of the issue's table with its target.

Run: ``.venv/bin/python -m benchmarks.bench_bot [--asks 500] [--rounds 5] [--concurrency 16]``
(``BENCH_PROFILE=/tmp/bot.prof`` writes a cProfile of each bot process).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import uuid
from collections import Counter

from benchmarks._bot_proc import BotProc, bot_settings
from benchmarks._common import (
    DEFAULT_HASH_VALUE,
    KB,
    TUNED_HASH_VALUE,
    CountingConnection,
    at_least,
    at_most,
    harness_gc_off,
    pct,
    per_command,
    private_redis,
    row,
    summary,
)
from benchmarks._fake_proc import FakeProc
from benchmarks._recovery import Recovery, kill_during_delivery
from benchmarks._rounds import ID_PATTERN, Idle, Round, idle_cost, run_round
from bot.storage.connection import connect


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _spread(values: list[float], fmt: str) -> str:
    if len(values) < 2:
        return ""
    return f" ({format(min(values), fmt)}-{format(max(values), fmt)})"


def report(rounds: list[Round], recovery: Recovery | None, idle: Idle, tuned: Round | None = None) -> None:
    answered = sum(r.answered for r in rounds) or 1
    mix: dict[str, float] = {}
    calls: Counter[str] = Counter()
    for r in rounds:
        for name, count in r.command_mix().items():
            mix[name] = mix.get(name, 0.0) + count / len(rounds)
        calls.update(r.slack_calls)
    per_ask_cmds = [r.commands_per_ask for r in rounds]
    per_ask_trips = [r.trips_per_ask for r in rounds]
    ratios = [r.intake_rate / r.bare_rate for r in rounds]
    pending = [r.mem_pending for r in rounds]
    ended = [r.mem_ended for r in rounds]
    click_result = [v for r in rounds for v in r.click_result]
    click_ack = [v for r in rounds for v in r.click_ack]
    cr99, ack99 = pct(click_result, 99) * 1000, pct(click_ack, 99) * 1000
    print("\nFigure (per answered one-click ask; median of rounds, range in brackets; p99 over all rounds)")
    print(
        row(
            "Redis commands issued by the bot (scripts' inner too)",
            f"{_median(per_ask_cmds):.1f}{_spread(per_ask_cmds, '.1f')}",
            at_most(20, "<= 20"),
            _median(per_ask_cmds),
        )
    )
    print(
        row(
            "Redis round trips (entry to result)",
            f"{_median(per_ask_trips):.1f}{_spread(per_ask_trips, '.1f')}",
            at_most(3, "<= 3"),
            _median(per_ask_trips),
        )
    )
    print(
        row(
            "Redis memory per pending ask (used_memory)",
            f"{_median(pending) / KB:.2f} KB{_spread([p / KB for p in pending], '.2f')}",
            at_most(1.5 * KB, "<= 1.5 KB"),
            _median(pending),
        )
    )
    print(
        row(
            "Redis memory per ended ask in retention (used_memory)",
            f"{_median(ended) / KB:.2f} KB{_spread([e / KB for e in ended], '.2f')}",
            at_most(2 * KB, "<= 2 KB"),
            _median(ended),
        )
    )
    if tuned is not None:  # one round more, on the same Redis with the setting docs/operations.md gives
        for what, value, bound in (("pending", tuned.mem_pending, 1.5), ("ended", tuned.mem_ended, 2)):
            label = f"  the same, {what}, hash-max-listpack-value {TUNED_HASH_VALUE}"
            print(row(label, f"{value / KB:.2f} KB", at_most(bound * KB, f"<= {bound:g} KB"), value))
    print(
        row(
            "bot intake / bare chat.postMessage loop",
            f"{_median(ratios):.2f}{_spread(ratios, '.2f')}",
            at_least(0.5, ">= 0.5"),
            _median(ratios),
        )
    )
    print(row("click -> result on the agent's list, p99", f"{cr99:.1f} ms", at_most(20, "<= 20 ms"), cr99))
    print(row("click ack, p99", f"{ack99:.1f} ms", at_most(50, "<= 50 ms"), ack99))
    if recovery is not None and recovery.kill_result:
        k99 = pct(recovery.kill_result, 99)
        if recovery.missing:
            k99 = float("inf")
        print(row("replica killed mid-delivery -> result, p99", f"{k99:.1f} s", at_most(15, "<= 15 s"), k99))
    else:
        print(row("replica killed mid-delivery -> result, p99", "not measured"))
    print("\nDetails")
    print(f"  top Redis commands per answered ask: {per_command(mix)}")
    print(
        f"  Slack calls per answered ask: {per_command(calls, answered)} "
        f"(total {sum(calls.values()) / answered:.2f})"
    )
    usage = [r.memory_usage_pending for r in rounds if r.memory_usage_pending == r.memory_usage_pending]
    if usage:
        print(
            f"  MEMORY USAGE of a pending ask's own keys (a sample; members of shared sets not in it): "
            f"{_median(usage) / KB:.2f} KB"
        )
    rates = [r.intake_rate for r in rounds]
    bares = [r.bare_rate for r in rounds]
    print(
        f"  intake {_median(rates):.1f} asks/s{_spread(rates, '.1f')}; "
        f"bare chat.postMessage {_median(bares):.1f}/s{_spread(bares, '.1f')}"
    )
    print(f"  XADD -> post at the fake:       {summary([v for r in rounds for v in r.post_latency])}")
    print(f"  click -> result on reply_to:    {summary(click_result)}")
    print(f"  click ack (HTTP answer):        {summary(click_ack)}")
    trips_i = sum(r.trips_intake for r in rounds) / max(sum(r.posted for r in rounds), 1)
    trips_c = sum(r.trips_click for r in rounds) / answered
    print(
        f"  bot round trips: intake+post {trips_i:.2f}, click+result+redraw {trips_c:.2f} per ask "
        "(idle loops included)"
    )
    idle_s = sum(r.seconds for r in rounds)
    print(
        f"  of which the idle loops (an idle replica: {idle.commands_per_s:.1f} commands/s, "
        f"{idle.trips_per_s:.1f} round trips/s, over the rounds' {idle_s:.0f} s): "
        f"{idle.commands_per_s * idle_s / answered:.2f} commands, {idle.trips_per_s * idle_s / answered:.2f} "
        "round trips per ask"
    )
    net_cmds = [r.commands_per_ask - idle.commands_per_s * r.seconds / r.per_answered for r in rounds]
    net_trips = [r.trips_per_ask - idle.trips_per_s * r.seconds / r.per_answered for r in rounds]
    print(
        f"  without the idle loops (the share that grows with a slow machine): {_median(net_cmds):.1f} "
        f"commands, {_median(net_trips):.1f} round trips per answered ask"
    )
    cpu = sum(r.cpu_s for r in rounds) / answered * 1000
    print(f"  bot CPU per answered ask (intake + click, user+system): {cpu:.2f} ms")
    outcomes: Counter[str] = Counter()
    for r in rounds:
        outcomes.update(r.outcomes)
    print(
        f"  results: {dict(outcomes)} of {sum(r.n for r in rounds)} asks; duplicate posts "
        f"{sum(r.duplicates for r in rounds)}; click answers not 200: {sum(r.slow_acks for r in rounds)}; "
        f"clicked without a result: {sum(r.missing for r in rounds)}"
    )
    if recovery is not None:
        print(
            f"  recovery: {recovery.asks} asks held by the killed replica ({recovery.held} calls held), "
            f"results {recovery.outcomes}, missing {recovery.missing}, "
            f"duplicate posts {recovery.duplicates}, held calls dropped {recovery.dropped}"
        )
        if recovery.kill_result:
            print(f"  kill -> result: {summary(recovery.kill_result)}")


async def main(args: argparse.Namespace, **kill_settings: object) -> None:
    redis = private_redis()
    fake = await FakeProc(ID_PATTERN).start()
    agent = connect(redis.url, connection_class=CountingConnection)
    # Redis's own default for the rounds (the embedded server starts with the recommended setting):
    # what a Redis nobody tuned keeps; the tuned round after them measures the recommended one.
    await agent.config_set("hash-max-listpack-value", DEFAULT_HASH_VALUE)
    for name, value in args.redis_config:  # an operator's tuning of their Redis, measured
        await agent.config_set(name, value)
    prefix = f"bench-{uuid.uuid4().hex[:6]}"
    settings = bot_settings(fake.info["api_url"], fake.info["bot_token"], redis.url, prefix)
    bot = await BotProc(settings, concurrency=args.concurrency).start()
    harness_gc_off()  # the agent side's timestamps (bench_bot measures the bot's pauses, not its own)
    recovery = None
    try:
        await fake.call("events_url", bot.events_url)
        print(
            f"slack-ask bench: {args.asks} one-click asks a round, {args.concurrency} at a time "
            f"(a clicker's next waits for the {args.clicks_wait}), "
            f"{args.rounds} rounds; private {redis.kind} ({redis.url}); fake Slack pid {fake.pid}; "
            f"bot pid {bot.pid} "
            f"(started in {bot.info['start_s']:.2f} s); pacing off {bot.info['note']}"
        )
        idle = await idle_cost(agent, bot, args.idle)
        # Not counted; it also gives the bare loop the message the bot posts for such an ask.
        warm = await run_round(
            "warm", max(args.warm, 1), args.concurrency, agent=agent, prefix=prefix, bot=bot, fake=fake
        )
        if warm.sample is None:
            raise SystemExit("the warm-up round posted nothing")
        sample = warm.sample

        async def measured(name: str) -> Round:
            return await run_round(
                name,
                args.asks,
                args.concurrency,
                agent=agent,
                prefix=prefix,
                bot=bot,
                fake=fake,
                bare=sample,
                until=args.clicks_wait,
            )

        rounds = []
        for i in range(args.rounds):
            r = await measured(f"r{i}")
            rounds.append(r)
            print(
                f"round {i + 1}: intake {r.intake_rate:.1f}/s vs bare {r.bare_rate:.1f}/s "
                f"(ratio {r.intake_rate / r.bare_rate:.2f}); "
                f"{r.commands_per_ask:.1f} commands, {r.trips_per_ask:.1f} round trips per ask; "
                f"click->result p99 {pct(r.click_result, 99) * 1000:.1f} ms; "
                f"ack p99 {pct(r.click_ack, 99) * 1000:.1f} ms; "
                f"{r.mem_pending / KB:.2f} KB pending, {r.mem_ended / KB:.2f} KB ended"
            )
        tuned = None
        if not any(name.startswith("hash-max-") for name, _ in args.redis_config):
            # Memory as a Redis set up as docs/operations.md says (Redis's default above): asks
            # written from now on keep the compact encoding.
            await agent.config_set("hash-max-listpack-value", TUNED_HASH_VALUE)
            tuned = await measured("tuned")
            print(
                f"tuned round (hash-max-listpack-value {TUNED_HASH_VALUE}): "
                f"{tuned.mem_pending / KB:.2f} KB pending, {tuned.mem_ended / KB:.2f} KB ended"
            )
        await bot.stop()
        if args.kill_asks:
            print(
                f"recovery: SIGKILL of a replica holding {args.kill_asks} deliveries "
                f"(waiting up to {args.kill_wait:.0f} s)"
            )
            recovery = await kill_during_delivery(
                agent, fake, redis.url, f"{prefix}-kill", args.kill_asks, args.kill_wait, **kill_settings
            )
        report(rounds, recovery, idle, tuned)
    finally:
        await bot.stop()
        await fake.stop()
        await agent.aclose()
        redis.stop()


def cli() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--asks", type=int, default=500, help="one-click asks a round (default 500)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument(
        "--clicks-wait",
        choices=("redraw", "ack"),
        default="redraw",
        help="a clicker's next click waits for the ended message (default, as a person) or the HTTP answer",
    )
    parser.add_argument("--warm", type=int, default=20, help="asks of the uncounted warm-up round")
    parser.add_argument("--idle", type=float, default=5.0, help="seconds the idle replica is watched")
    parser.add_argument("--kill-asks", type=int, default=16, help="asks the killed replica holds (0: skip)")
    parser.add_argument("--kill-wait", type=float, default=300, help="seconds to wait for their results")
    parser.add_argument(
        "--redis-config",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="CONFIG SET on the private Redis first (repeatable): hash-max-listpack-value 1024",
    )
    asyncio.run(main(parser.parse_args()))


if __name__ == "__main__":
    cli()
