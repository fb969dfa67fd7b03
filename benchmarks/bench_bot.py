"""Pushes N asks through one bot process against the fake Slack (no added latency) and prints:

* asks per second (XADD of all asks -> all posted), and bare ``chat.postMessage`` per second with the
  same client, concurrency and fake, in the same run, and their ratio;
* p50/p99 from XADD to the post reaching the fake, and from a click to the result on ``reply_to``;
* bot-side Redis round trips per answered ask, plus the agent's own (XADD, BLPOP).

The bot runs in its own process (as in production); this process hosts the fake Slack and plays
the agent and the people clicking. Run:
``.venv/bin/python -m benchmarks.bench_bot [--asks 1000] [--concurrency 32]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import time
import uuid
from multiprocessing.connection import Connection as Pipe
from typing import Any

from redis.asyncio import Redis

from benchmarks._common import CountingConnection, choose_redis, summary
from bot.playground import FakeSlack

SECRET = "bench-secret"


def _sample_blocks() -> list[dict[str, Any]]:
    from bot.ids import AskRef  # noqa: F401 - keeps the render import path warm like the bot's
    from bot.model import AskRecord, Target
    from bot.render import render_ask_message
    from contract import normalize_ask_request

    record = AskRecord(
        ask_id="bench-x",
        tag="t",
        reply_to="r",
        request=normalize_ask_request(
            {"id": "deploy", "question": "Deploy build 1?", "options": ["Yes", "No"]}
        ),
        target=Target(channel="C0RANDOM"),
        created_ms=int(time.time() * 1000),
    )
    return render_ask_message(record, now_ms=record.created_ms).blocks


TRACE: dict[str, list[float]] = {}


def _trace(cls: Any, name: str) -> None:
    original = getattr(cls, name)

    async def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await original(self, *args, **kwargs)
        finally:
            TRACE.setdefault(f"{cls.__name__}.{name}", []).append(time.perf_counter() - started)

    setattr(cls, name, timed)


def _bot_process(pipe: Pipe, api_url: str, token: str, redis_url: str, prefix: str, concurrency: int) -> None:
    """The bot replica under test; answers the parent's commands over ``pipe``."""

    async def run() -> None:
        from bot.config import Settings
        from bot.engine import Engine
        from bot.runtime import BotRuntime
        from bot.slack.gateway import SlackGateway
        from bot.storage.connection import connect
        from bot.storage.store import Store

        if os.environ.get("BENCH_TRACE"):
            for cls, names in (
                (Store, ["claim_index", "accept", "posted", "load", "resolve", "finalize"]),
                (SlackGateway, ["post", "update", "permalink"]),
                (Engine, ["handle_entry", "on_choose"]),
            ):
                for name in names:
                    _trace(cls, name)

        settings = Settings(
            slack_bot_token=token,
            slack_signing_secret=SECRET,
            slack_api_url=api_url,
            redis_url=redis_url,
            prefix=prefix,
            sweep_interval_ms=200,
        )
        runtime = BotRuntime(settings, redis=connect(redis_url, connection_class=CountingConnection))
        runtime.intake._slots = asyncio.Semaphore(concurrency)
        await runtime.start()
        port = await runtime.serve_http("127.0.0.1", 0)
        loop = asyncio.get_running_loop()
        pipe.send(("port", port))
        while True:
            command, arg = await loop.run_in_executor(None, pipe.recv)
            if command == "count":
                pipe.send(CountingConnection.sent)
            elif command == "trace":
                pipe.send({k: (len(v), sum(v) / max(len(v), 1)) for k, v in TRACE.items()})
            elif command == "commands":
                pipe.send(dict(CountingConnection.commands))
                CountingConnection.commands.clear()
            elif command == "bare":
                # The bot's own client and session, posting the very blocks the bot posts for an ask.
                slots = asyncio.Semaphore(concurrency)
                blocks = _sample_blocks()

                async def one(
                    i: int, slots: asyncio.Semaphore = slots, blocks: list[dict[str, Any]] = blocks
                ) -> None:
                    async with slots:
                        await runtime.client.chat_postMessage(
                            channel="C0RANDOM", text=f"bare {i}", blocks=blocks
                        )

                started = time.perf_counter()
                await asyncio.gather(*(one(i) for i in range(int(arg))))
                pipe.send(int(arg) / (time.perf_counter() - started))
            elif command == "stop":
                await runtime.aclose()
                pipe.send("stopped")
                return

    if os.environ.get("BENCH_PROFILE"):
        import cProfile

        cProfile.runctx("asyncio.run(run())", globals(), locals(), os.environ["BENCH_PROFILE"])
    else:
        asyncio.run(run())


def _per(commands: dict[str, int], n: int) -> str:
    return ", ".join(
        f"{name} {count / n:.2f}" for name, count in sorted(commands.items(), key=lambda kv: -kv[1])
    )


async def _ask(pipe: Pipe, command: str, arg: Any = None) -> Any:
    pipe.send((command, arg))
    return await asyncio.get_running_loop().run_in_executor(None, pipe.recv)


async def main(n: int, concurrency: int, latency: float) -> None:
    url, kind, embedded = choose_redis()
    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    fake = FakeSlack.with_demo_workspace(signing_secret=SECRET)
    fake.add_channel("C0RANDOM", "random", members=["U0ALICE"])  # the bare posts land here, the bot's don't
    fake.latency = latency
    await fake.start()
    agent = Redis.from_url(url, socket_timeout=120)
    parent, child = mp.get_context("spawn").Pipe()
    proc = mp.get_context("spawn").Process(
        target=_bot_process, args=(child, fake.api_url, fake.bot_token, url, prefix, concurrency), daemon=True
    )
    proc.start()
    print(
        f"slack-ask bench: {n} asks, concurrency {concurrency}, Slack latency {latency * 1000:.0f} ms, "
        f"{kind} ({url}), bot in pid {proc.pid}"
    )
    try:
        _, port = await asyncio.get_running_loop().run_in_executor(None, parent.recv)
        fake.events_url = f"http://127.0.0.1:{port}/slack/events"
        bare = await _ask(parent, "bare", n)

        reply_to = f"{prefix}:reply:bench"  # the bot refuses reply_to keys under its prefix but :reply:
        envelopes = [
            {
                "v": 1,
                "ask_id": f"bench-{i}",
                "reply_to": reply_to,
                "route": {"channel": "C0DEPLOY"},
                "request": {"id": "deploy", "question": f"Deploy build {i}?", "options": ["Yes", "No"]},
            }
            for i in range(n)
        ]
        base = await _ask(parent, "count")
        started = time.perf_counter()
        async with agent.pipeline(transaction=False) as pipe:
            for env in envelopes:
                pipe.xadd(f"{prefix}:asks", {"ask": json.dumps(env)})
            ids = await pipe.execute()
        xadd_s = {
            str(e["ask_id"]): int(i.decode().split("-")[0]) / 1000
            for e, i in zip(envelopes, ids, strict=True)
        }

        def bot_posts() -> list[Any]:
            return [
                c
                for c in fake.find_calls("chat.postMessage")
                if c.params.get("channel") == "C0DEPLOY" and c.ok
            ]

        await fake.wait_for(lambda: len(bot_posts()) >= n, timeout=600, what="every ask to be posted")
        elapsed = time.perf_counter() - started
        await asyncio.sleep(0.3)  # the last `posted` records
        intake_trips = await _ask(parent, "count") - base
        intake_commands = await _ask(parent, "commands")

        ask_of: dict[str, str] = {}
        for message in fake.messages("C0DEPLOY"):
            for block in message.blocks:
                for element in block.get("elements") or []:
                    if '"a":"bench-' in str(element.get("value") or ""):
                        ask_of[message.ts] = json.loads(element["value"])["a"]
        post_latency = [
            c.at - xadd_s[ask_of[str(c.response.get("ts"))]]
            for c in bot_posts()
            if c.response and str(c.response.get("ts")) in ask_of
        ]

        base = await _ask(parent, "count")
        clicked: dict[str, float] = {}
        arrived: dict[str, float] = {}
        slots = asyncio.Semaphore(concurrency)

        async def click(ts: str, ask_id: str) -> None:
            async with slots:
                clicked[ask_id] = time.time()
                await fake.click("U0ALICE", "C0DEPLOY", ts, "slack_ask:choose:0")

        async def collect() -> None:
            while len(arrived) < len(ask_of):
                got = await agent.blpop([reply_to], timeout=60)
                if got is None:
                    return
                arrived[json.loads(got[1])["ask_id"]] = time.time()

        collector = asyncio.create_task(collect())
        await asyncio.gather(*(click(ts, a) for ts, a in ask_of.items()))
        await asyncio.wait_for(collector, timeout=600)
        await asyncio.sleep(0.5)  # message updates and finalize after the result
        click_trips = await _ask(parent, "count") - base
        click_commands = await _ask(parent, "commands")
        click_latency = [arrived[a] - clicked[a] for a in arrived]
        answered = len(arrived)

        rate = n / elapsed
        print(f"asks/s through the bot:         {rate:8.1f}  ({n} asks in {elapsed:.2f} s)")
        print(f"bare chat.postMessage/s:        {bare:8.1f}  (same client, concurrency and fake)")
        print(f"ratio bot / bare:               {rate / bare:8.2f}")
        print(f"XADD -> post at the fake:       {summary(post_latency)}")
        print(f"click -> result on reply_to:    {summary(click_latency)}")
        print(f"answered asks:                  {answered} of {n}")
        print(
            f"bot Redis round trips per ask:  {(intake_trips + click_trips) / max(answered, 1):8.2f}  "
            f"(intake+post {intake_trips / n:.2f}, "
            f"click+result+updates {click_trips / max(answered, 1):.2f}; "
            "idle loop reads included)"
        )
        print("agent Redis round trips per ask:    2.00  (XADD, BLPOP)")
        if os.environ.get("BENCH_TRACE"):
            for key, (count, mean) in sorted((await _ask(parent, "trace")).items()):
                print(f"  {key:28s} {count:6d} calls, mean {mean * 1000:7.1f} ms")
        print(f"bot commands sent, intake phase: {_per(intake_commands, n)}")
        print(f"bot commands sent, click phase:  {_per(click_commands, max(answered, 1))}")
    finally:
        if proc.is_alive():
            await _ask(parent, "stop")
            proc.join(timeout=10)
        await fake.stop()
        keys = [k async for k in agent.scan_iter(match=f"{prefix}*", count=1000)]
        for start in range(0, len(keys), 500):
            await agent.delete(*keys[start : start + 500])
        await agent.aclose()
        if embedded is not None:
            embedded.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--asks", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds the fake adds to every call")
    args = parser.parse_args()
    asyncio.run(main(args.asks, args.concurrency, args.latency))
