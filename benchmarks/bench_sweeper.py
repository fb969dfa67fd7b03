"""Timers at scale. Prints:

* 10,000 pending asks with deadlines spread over 30 s (``--spread``), swept by the bot's sweeper:
  timeout lateness (result ``resolved_at`` minus deadline) p50/p99, and Redis commands per sweep.

(What an idle sweeper costs with many asks pending, none due, is in the scale table: bench_scale.)

It uses its own redis-server (when installed) so ``INFO commandstats`` counts only this run.
Run: ``.venv/bin/python -m benchmarks.bench_sweeper [--due 10000] [--replicas 1]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from datetime import datetime
from typing import Any

from redis.asyncio import Redis
from slack_sdk.web.async_client import AsyncWebClient

from benchmarks._common import CountingConnection, pct
from bot.config import Settings
from bot.engine import Engine
from bot.model import AskRecord, Target
from bot.slack.gateway import SlackGateway
from bot.storage.connection import connect
from bot.storage.embedded import start_embedded_redis
from bot.storage.keys import slot_tag
from bot.storage.store import Store
from bot.sweeper import Sweeper
from contract import normalize_ask_request

REQUEST = normalize_ask_request({"id": "cache", "question": "Enable the cache?", "options": ["Yes", "No"]})


class NoWebClient(AsyncWebClient):
    """The sweeper's asks here carry no Slack messages; any Slack call would be a bug in the bench."""

    async def api_call(self, api_method: str, **kwargs: Any) -> Any:
        raise AssertionError(f"no Slack call expected, got {api_method}")


def no_slack() -> SlackGateway:
    return SlackGateway(NoWebClient(token="xoxb-bench"))


async def server_commands(redis: Redis) -> int:
    stats = await redis.info("commandstats")
    return sum(int(v["calls"]) for v in stats.values() if isinstance(v, dict))


async def seed(
    store: Store, n: int, *, first_ms: int, spread_ms: int, reply_to: str, chunk: int = 2000
) -> None:
    tag = slot_tag(reply_to)
    for start in range(0, n, chunk):
        records = []
        for i in range(start, min(n, start + chunk)):
            deadline = first_ms + (spread_ms * i) // max(n, 1)
            records.append(
                AskRecord(
                    ask_id=f"a{i}",
                    tag=tag,
                    reply_to=reply_to,
                    request=REQUEST,
                    target=Target(channel="C1"),
                    created_ms=deadline - 60_000,
                    deadline_ms=deadline,
                )
            )
        await asyncio.gather(
            *(
                store.accept(
                    r,
                    consumer="seed",
                    lease_ms=1,
                    pending_ttl_ms=3_600_000,
                    entry_id=f"{r.ask_id}-0",
                    schedule_at_ms=r.deadline_ms,
                )
                for r in records
            )
        )
        await asyncio.gather(*(store.posted(r.tag, r.ask_id, [], actor="seed") for r in records))


async def due_run(url: str, n: int, replicas: int, spread: int) -> None:
    admin = connect(url)
    prefix = "sweep-due"
    reply_to = f"{prefix}:results"
    seeder = Store(admin, prefix)
    now = await seeder.server_time_ms()
    # The first deadline lies after the seeding (about 1.5 ms an ask here), so the lateness measured
    # is the sweeper's, not a backlog the seeding built up.
    lead_ms = 3_000 + n * 3 // 2
    await seed(seeder, n, first_ms=now + lead_ms, spread_ms=spread, reply_to=reply_to)
    seeded_in = await seeder.server_time_ms() - now
    print(
        f"seeded {n} pending asks in {seeded_in / 1000:.1f} s, deadlines from {lead_ms / 1000:.1f} s over "
        f"{spread / 1000:.1f} s, {replicas} sweeping replica(s)"
    )
    if seeded_in > lead_ms:
        print("warning: seeding outlasted the first deadline; early lateness includes that backlog")
    stop = asyncio.Event()
    sweepers = []
    clients = []
    for _ in range(replicas):
        client = connect(url, connection_class=CountingConnection)
        clients.append(client)
        store = Store(client, prefix)
        await store.load_scripts()
        engine = Engine(Settings(prefix=prefix), store, no_slack(), consumer="bench")
        sweepers.append(Sweeper(engine, store, interval_ms=200))
    sweeps = 0
    original = Sweeper.sweep_once

    async def counted(self: Sweeper) -> int:
        nonlocal sweeps
        sweeps += 1
        return await original(self)

    Sweeper.sweep_once = counted  # type: ignore[method-assign]
    before_cmds = await server_commands(admin)
    CountingConnection.sent = 0
    tasks = [asyncio.create_task(s.run(stop)) for s in sweepers]
    deadline = time.monotonic() + 120
    while await admin.llen(reply_to) < n and time.monotonic() < deadline:  # noqa: ASYNC110 - polls Redis
        await asyncio.sleep(0.2)
    stop.set()
    await asyncio.gather(*tasks)
    Sweeper.sweep_once = original  # type: ignore[method-assign]
    after_cmds = await server_commands(admin)
    results = [json.loads(x) for x in await admin.lrange(reply_to, 0, -1)]
    lateness = []
    for result in results:
        index = int(result["ask_id"][1:])
        deadline_ms = now + lead_ms + (spread * index) // n
        resolved = datetime.fromisoformat(result["resolved_at"].replace("Z", "+00:00")).timestamp() * 1000
        lateness.append((resolved - deadline_ms) / 1000)
    outcomes = sorted({r["outcome"] for r in results})
    duplicates = len(results) - len({r["ask_id"] for r in results})
    print(f"timed out: {len(results)} of {n} (outcomes {outcomes}; duplicates: {duplicates})")
    print(
        f"timeout lateness:        p50 {pct(lateness, 50) * 1000:7.1f} ms"
        f"   p99 {pct(lateness, 99) * 1000:7.1f} ms   max {max(lateness) * 1000:7.1f} ms"
    )
    print(
        f"sweeps: {sweeps}; per sweep: {CountingConnection.sent / max(sweeps, 1):.1f} client round trips, "
        f"{(after_cmds - before_cmds) / max(sweeps, 1):.1f} server commands "
        f"({(after_cmds - before_cmds) / max(len(results), 1):.1f} per timed-out ask)"
    )
    for client in clients:
        await client.aclose()
    await admin.aclose()


async def main(args: Any) -> None:
    embedded = start_embedded_redis()
    print(f"slack-ask sweeper bench on an embedded {embedded.kind} ({embedded.url})")
    try:
        await due_run(embedded.url, args.due, args.replicas, int(args.spread * 1000))
    finally:
        embedded.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--due", type=int, default=10_000)
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--spread", type=float, default=30.0, help="seconds over which deadlines fall")
    asyncio.run(main(parser.parse_args()))
