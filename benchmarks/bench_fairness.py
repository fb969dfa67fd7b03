"""Fair across channels under Slack's enforced rate limits (issue 12).

The fake Slack enforces Slack's limits (per-method tiers, one post a second per channel) sped up by
``--speedup``, and the bot replicas pace themselves at the same speed through their shared Redis
buckets. Two phases, each one-click asks answered by a click:

* alone: 5 asks to each of 4 quiet channels;
* under load: 100 asks to one busy channel plus 5 to each of the 4 quiet ones, all at once.

Prints per-channel post latency (XADD to the post reaching Slack) p50/p99/max in both phases, 429s
per method, Slack calls per answered ask by method, and results lost or doubled, then the goals:
quiet channels' p99 under load within 3 s, 429s under 1% of calls, exactly 2 calls per answered
one-click ask. Run: ``.venv/bin/python -m benchmarks.bench_fairness [--speedup 10] [--replicas 2]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import time
import uuid
from collections import Counter
from typing import Any

from redis.asyncio import Redis

from benchmarks._common import choose_redis, pct
from bot.config import Settings
from bot.playground import FakeSlack
from bot.runtime import BotRuntime

SECRET = "bench-secret"
QUIET = ["C0QUIET1", "C0QUIET2", "C0QUIET3", "C0QUIET4"]
BUSY = "C0BUSY"
PEOPLE = ["U0ALICE", "U0BOB", "U0CAROL"]


def _line(label: str, values: list[float]) -> str:
    if not values:
        return f"  {label:<22} (none)"
    return (
        f"  {label:<22} n {len(values):4d}   p50 {pct(values, 50):6.2f} s   p99 {pct(values, 99):6.2f} s"
        f"   max {max(values):6.2f} s"
    )


class Bench:
    def __init__(self, args: argparse.Namespace, redis: Redis, redis_url: str) -> None:
        self.args = args
        self.redis = redis
        self.redis_url = redis_url
        self.prefix = f"bench-fair-{uuid.uuid4().hex[:8]}"
        self.fake = FakeSlack.with_demo_workspace(
            signing_secret=SECRET, rate_limits=True, speedup=args.speedup
        )
        for channel in [*QUIET, BUSY]:
            self.fake.add_channel(channel, channel.lower(), members=PEOPLE)
        self.replicas: list[BotRuntime] = []

    async def start(self) -> None:
        await self.fake.start()
        for _ in range(self.args.replicas):
            settings = Settings(
                slack_bot_token=self.fake.bot_token,
                slack_signing_secret=SECRET,
                slack_api_url=self.fake.api_url,
                redis_url=self.redis_url,
                prefix=self.prefix,
                pace_scale=self.args.speedup,
                reclaim_idle_ms=2_000,
                sweep_interval_ms=100,
            )
            runtime = BotRuntime(settings, intake_block_ms=200)
            await runtime.start()
            port = await runtime.serve_http("127.0.0.1", 0)
            self.fake.events_url = f"http://127.0.0.1:{port}/slack/events"
            self.replicas.append(runtime)

    async def stop(self) -> None:
        for runtime in self.replicas:
            await runtime.aclose()
        await self.fake.stop()
        keys = [key async for key in self.redis.scan_iter(match=f"{self.prefix}*", count=1000)]
        for start in range(0, len(keys), 500):
            await self.redis.delete(*keys[start : start + 500])

    async def phase(self, routes: list[str]) -> dict[str, Any]:
        """Send one ask per route at once, wait for every post, click each, collect the results."""
        self.fake.limits.reset()
        calls_before = len(self.fake.state.calls)
        envs: list[dict[str, Any]] = []
        for channel in routes:
            ask_id = f"fair-{uuid.uuid4().hex[:10]}"
            envs.append(
                {
                    "v": 1,
                    "ask_id": ask_id,
                    "reply_to": f"{self.prefix}:reply:{ask_id}",
                    "request": {"id": "go", "question": "Go?", "options": ["Yes", "No"]},
                    "route": {"channel": channel},
                }
            )
        sent = time.time()
        async with self.redis.pipeline(transaction=False) as pipe:
            for env in envs:
                pipe.xadd(f"{self.prefix}:asks", {"ask": json.dumps(env)})
            await pipe.execute()
        wanted = Counter(routes)
        before = {c: len(self.fake.messages(c)) for c in wanted}

        def all_posted() -> bool:
            return all(len(self.fake.messages(c)) - before[c] >= n for c, n in wanted.items())

        await self.fake.wait_for(all_posted, timeout=600, what="every ask posted")
        calls = self.fake.state.calls[calls_before:]
        latency: dict[str, list[float]] = {}
        for call in calls:
            if call.method == "chat.postMessage" and call.ok:
                latency.setdefault(str(call.params.get("channel")), []).append(call.at - sent)
        messages = [m for c in wanted for m in self.fake.messages(c)[before[c] :]]
        clicks = [
            self.fake.click(PEOPLE[i % 3], m.channel, m.ts, "slack_ask:choose:0")
            for i, m in enumerate(messages)
        ]
        acks = await asyncio.gather(*clicks)
        results: Counter[str] = Counter()
        for env in envs:
            got = await self.redis.blpop([env["reply_to"]], timeout=120)
            if got is not None:
                results[json.loads(got[1])["outcome"]] += 1
        await asyncio.sleep(1.0)  # a doubled result would be there by now
        doubled = 0
        for env in envs:
            doubled += await self.redis.llen(env["reply_to"])

        def all_ended() -> bool:
            return all(
                any(c.method == "chat.update" and c.params.get("ts") == m.ts for c in self.fake.state.calls)
                for m in messages
            )

        await self.fake.wait_for(all_ended, timeout=600, what="every message ended")
        return {
            "latency": latency,
            "stats": self.fake.limits.stats(),
            "calls": Counter(c.method for c in self.fake.state.calls[calls_before:]),
            "answered": results["answered"],
            "sent": len(envs),
            "lost": len(envs) - sum(results.values()),
            "doubled": doubled,
            "slow_acks": sum(1 for a in acks if a.status != 200),
        }


async def main(args: argparse.Namespace) -> None:
    logging.basicConfig(level=logging.WARNING)
    redis_url, kind, embedded = choose_redis()
    redis = Redis.from_url(redis_url)
    bench = Bench(args, redis, redis_url)
    await bench.start()
    try:
        alone = await bench.phase([c for c in QUIET for _ in range(5)])
        load = await bench.phase([BUSY] * args.busy + [c for c in QUIET for _ in range(5)])
    finally:
        await bench.stop()
        await redis.aclose()
        if embedded is not None:
            embedded.stop()
    print(
        f"fairness under Slack's limits (x{args.speedup:g}), {args.replicas} replicas, {kind}: "
        f"{args.busy} one-click asks to one channel plus 5 to each of {len(QUIET)} others"
    )
    print("post latency, XADD to chat.postMessage reaching Slack (real seconds):")
    quiet_alone = [v for c in QUIET for v in alone["latency"].get(c, [])]
    quiet_load = [v for c in QUIET for v in load["latency"].get(c, [])]
    print(_line("quiet, alone", quiet_alone))
    for channel in QUIET:
        print(_line(f"  {channel} under load", load["latency"].get(channel, [])))
    print(_line("quiet, under load", quiet_load))
    print(_line(f"busy {BUSY}, under load", load["latency"].get(BUSY, [])))
    total_calls = 0
    total_429 = 0
    print("429s per method (under load):")
    for method, stats in load["stats"].items():
        total_calls += stats["calls"]
        total_429 += stats["ratelimited"]
        print(f"  {method:<24} {stats['ratelimited']:4d} of {stats['calls']:5d} calls")
    answered = load["answered"] or 1
    print(f"Slack calls per answered ask (under load, {load['answered']} answered):")
    per_ask = {m: n for m, n in load["calls"].items() if m != "auth.test"}  # 429s included
    for method, count in sorted(per_ask.items()):
        print(f"  {method:<24} {count / answered:5.2f}")
    per_answered = sum(per_ask.values()) / answered
    print(f"  {'total':<24} {per_answered:5.2f}")
    lost, doubled = alone["lost"] + load["lost"], alone["doubled"] + load["doubled"]
    slow = alone["slow_acks"] + load["slow_acks"]
    print(f"results: lost {lost}, doubled {doubled}; clicks not acked within 3 s: {slow}")
    rate_429 = total_429 / max(total_calls, 1)
    quiet_p99 = pct(quiet_load, 99)
    goals = [
        (f"quiet channels' p99 under load {quiet_p99:.2f} s <= 3 s", quiet_p99 <= 3.0),
        (f"429s {rate_429:.2%} of calls < 1%", rate_429 < 0.01),
        (f"{per_answered:.2f} Slack calls per answered one-click ask == 2", abs(per_answered - 2) < 1e-9),
        ("no result lost or doubled", lost == 0 and doubled == 0),
    ]
    for text, ok in goals:
        print(f"goal: {text}: {'ok' if ok else 'MISSED'}")


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speedup", type=float, default=10.0, help="Slack's clock, sped up (default 10)")
    parser.add_argument("--replicas", type=int, default=2, help="bot replicas (default 2)")
    parser.add_argument("--busy", type=int, default=100, help="asks to the busy channel (default 100)")
    asyncio.run(main(parser.parse_args()))


if __name__ == "__main__":
    cli()
