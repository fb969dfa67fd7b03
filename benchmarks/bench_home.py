"""The App Home tab under load (issue 19, docs/home.md): 200 people, each named on 5 asks, the asks ending
at random while everyone has the tab open.

The fake Slack enforces Slack's limits (``views.publish`` is Tier 4, one post a second per channel) sped up
by ``--speedup``, and the bot paces itself at the same speed (``SLACK_ASK_PACE_SCALE``): the default x10
with a 60 s window is the load of 1,000 asks ending over 10 minutes against Slack's real budget. The
publisher's own delays (coalescing, debounce) are not sped up, so times are wall-clock. Phases:

1. ``--people`` x ``--asks-each`` one-click asks, each with ``responders.users`` one person, spread over
   ``--channels`` channels; all posted. The Redis memory the Home indexes hold is read here (``MEMORY
   USAGE`` of every index key: the people's ``home:wait`` rows and each ask's ``home`` set).
2. Everyone opens the tab (``app_home_opened``) and waits for their 5 rows.
3. The asks are answered from their messages in a random order over ``--window`` seconds.

Prints: publishes per change (phase 3's ``views.publish`` calls / asks ended), time from an ask's end (the
click) to the first publish of its person's tab without it, p50/p99/max, the 429s Slack answered (the
goal is 0), and the index memory per ask. Run:
``.venv/bin/python -m benchmarks.bench_home [--people 200] [--asks-each 5] [--speedup 10] [--window 60]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import random
import time
import uuid
from typing import Any

from redis.asyncio import Redis

from benchmarks._common import choose_redis, pct
from bot.config import Settings
from bot.ids import AskRef
from bot.playground import FakeSlack
from bot.runtime import BotRuntime

SECRET = "bench-secret"


def _ask_ids(blocks: list[dict[str, Any]]) -> set[str]:
    """The asks a message or Home view carries, read from its buttons' values."""
    found: set[str] = set()
    for block in blocks:
        for element in block.get("elements") or []:
            ref = AskRef.decode(str(element.get("value") or ""))
            if ref is not None:
                found.add(ref.ask_id)
    return found


def _view_of(call_params: dict[str, Any]) -> dict[str, Any]:
    view = call_params.get("view")
    return json.loads(view) if isinstance(view, str) else dict(view or {})


class Bench:
    def __init__(self, args: argparse.Namespace, redis: Redis, redis_url: str) -> None:
        self.args = args
        self.redis = redis
        self.redis_url = redis_url
        self.prefix = f"bench-home-{uuid.uuid4().hex[:8]}"
        self.fake = FakeSlack.with_demo_workspace(
            signing_secret=SECRET, rate_limits=True, speedup=args.speedup
        )
        self.people = [f"U0P{i:04d}" for i in range(args.people)]
        self.channels = [f"C0HOME{i:03d}" for i in range(args.channels)]
        for user in self.people:
            self.fake.add_user(user, user.lower())
        for channel in self.channels:
            self.fake.add_channel(channel, channel.lower(), members=self.people)
        self.runtime: BotRuntime | None = None

    async def start(self) -> None:
        await self.fake.start()
        settings = Settings(
            slack_bot_token=self.fake.bot_token,
            slack_signing_secret=SECRET,
            slack_api_url=self.fake.api_url,
            redis_url=self.redis_url,
            prefix=self.prefix,
            pace_scale=self.args.speedup,
            sweep_interval_ms=100,
        )
        self.runtime = BotRuntime(settings, intake_block_ms=200)
        await self.runtime.start()
        port = await self.runtime.serve_http("127.0.0.1", 0)
        self.fake.events_url = f"http://127.0.0.1:{port}/slack/events"

    async def stop(self) -> None:
        if self.runtime is not None:
            await self.runtime.aclose()
        await self.fake.stop()
        keys = [key async for key in self.redis.scan_iter(match=f"{self.prefix}*", count=1000)]
        for start in range(0, len(keys), 500):
            await self.redis.delete(*keys[start : start + 500])

    async def index_bytes(self) -> int:
        total = 0
        async for key in self.redis.scan_iter(match=f"{self.prefix}*", count=1000):
            name = key.decode()
            if ":home:wait:" in name or "}:home:" in name:
                total += int(await self.redis.memory_usage(key) or 0)
        return total

    async def run(self) -> None:
        args = self.args
        owner: dict[str, str] = {}
        envs: list[dict[str, Any]] = []
        for i, user in enumerate(self.people):
            for k in range(args.asks_each):
                ask_id = f"home-{i}-{k}-{uuid.uuid4().hex[:6]}"
                owner[ask_id] = user
                envs.append(
                    {
                        "v": 1,
                        "ask_id": ask_id,
                        "reply_to": f"{self.prefix}:reply:bench",
                        "request": {"id": "go", "question": f"Go {i}.{k}?", "options": ["Yes", "No"]},
                        "route": {"channel": self.channels[len(envs) % len(self.channels)]},
                        "responders": {"users": [user]},
                        "timeout_ms": random.randint(10, 600) * 60_000,
                    }
                )
        print(
            f"slack-ask home bench: {len(self.people)} people x {args.asks_each} asks, "
            f"{len(self.channels)} channels, Slack's limits sped up x{args.speedup}"
        )
        before = await self.index_bytes()
        started = time.monotonic()
        async with self.redis.pipeline(transaction=False) as pipe:
            for env in envs:
                pipe.xadd(f"{self.prefix}:asks", {"ask": json.dumps(env)})
            await pipe.execute()
        message_of: dict[str, tuple[str, str]] = {}

        def all_posted() -> bool:
            for channel in self.channels:
                for m in self.fake.messages(channel):
                    for ask_id in _ask_ids(m.blocks):
                        message_of[ask_id] = (channel, m.ts)
            return len(message_of) >= len(envs)

        await self.fake.wait_for(all_posted, timeout=3600, what="every ask posted")
        print(f"  1. {len(envs)} asks posted in {time.monotonic() - started:.1f} s")
        index = await self.index_bytes() - before

        started = time.monotonic()
        for user in self.people:
            await self.fake.open_home(user)

        def all_listed() -> bool:
            for user in self.people:
                home = self.fake.home(user)
                if home is None or len(_ask_ids(home.view.get("blocks") or [])) < args.asks_each:
                    return False
            return True

        await self.fake.wait_for(all_listed, timeout=3600, what="every tab listing its asks")
        print(f"  2. {len(self.people)} tabs opened and drawn in {time.monotonic() - started:.1f} s")

        self.fake.limits.reset()
        calls_from = len(self.fake.state.calls)
        order = list(owner)
        random.shuffle(order)
        clicked: dict[str, float] = {}
        started = time.monotonic()
        for n, ask_id in enumerate(order):
            wait = started + args.window * n / len(order) - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            channel, ts = message_of[ask_id]
            value = next(
                str(e.get("value"))
                for b in self.fake.state.find_message(channel, ts).blocks  # type: ignore[union-attr]
                for e in b.get("elements") or []
                if e.get("action_id") == "slack_ask:choose:0"
            )
            clicked[ask_id] = time.time()
            await self.fake.click(owner[ask_id], channel, ts, "slack_ask:choose:0", value=value)

        def all_gone() -> bool:
            for user in self.people:
                home = self.fake.home(user)
                if home is None or _ask_ids(home.view.get("blocks") or []) & set(order):
                    return False
            return True

        await self.fake.wait_for(all_gone, timeout=3600, what="every row gone from every tab")
        print(
            f"  3. {len(order)} asks answered over {args.window} s; every row gone after "
            f"{time.monotonic() - started:.1f} s"
        )

        calls = self.fake.state.calls[calls_from:]
        publishes = [c for c in calls if c.method == "views.publish" and c.ok]
        by_user: dict[str, list[tuple[float, set[str]]]] = {}
        for call in publishes:
            shown = _ask_ids(_view_of(call.params).get("blocks") or [])
            by_user.setdefault(str(call.params.get("user_id")), []).append((call.at, shown))
        latency: list[float] = []
        for ask_id, at in clicked.items():
            for when, shown in by_user.get(owner[ask_id], []):
                if when >= at and ask_id not in shown:
                    latency.append(when - at)
                    break
        limited = sum(self.fake.limits.limited.values())
        print()
        print(
            f"  publishes per change       {len(publishes) / len(order):6.2f}   "
            f"({len(publishes)} views.publish for {len(order)} asks ended; goal <= 1)"
        )
        print(
            f"  change -> publish          p50 {pct(latency, 50):6.2f} s   p99 {pct(latency, 99):6.2f} s   "
            f"max {max(latency, default=float('nan')):6.2f} s   (n {len(latency)}; goal about 5 s)"
        )
        print(f"  429s seen                  {limited:6d}   ({dict(self.fake.limits.limited)}; goal 0)")
        print(
            f"  index memory per ask       {index / len(envs):6.0f} B   ({index} B for {len(envs)} asks, "
            "MEMORY USAGE of the home:wait rows and each ask's home set)"
        )


async def main(args: argparse.Namespace) -> None:
    logging.basicConfig(level=logging.WARNING)
    url, kind, embedded = choose_redis()
    redis = Redis.from_url(url)
    bench = Bench(args, redis, url)
    try:
        await bench.start()
        await bench.run()
    finally:
        await bench.stop()
        await redis.aclose()
        if embedded is not None:
            embedded.stop()
    print(f"  (Redis: {kind})")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--people", type=int, default=200)
    parser.add_argument("--asks-each", type=int, default=5)
    parser.add_argument("--channels", type=int, default=20)
    parser.add_argument("--speedup", type=float, default=10)
    parser.add_argument("--window", type=float, default=60, help="seconds over which the asks are answered")
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse()))
