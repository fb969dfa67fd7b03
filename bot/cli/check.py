"""``slack-ask check [--json]``: the invariant check of one prefix (bot.storage.check)."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from redis.asyncio import Redis

from bot.cli.redis_args import RedisTarget, add_redis_args, run_with_redis
from bot.storage.check import check_prefix

__all__ = ["EXIT_BROKEN", "add_parser"]

EXIT_BROKEN = 1


def add_parser(sub: Any) -> None:
    p = sub.add_parser("check", help="report every broken invariant of the bot's keys under one prefix")
    add_redis_args(p)
    p.add_argument(
        "--reclaim-idle-ms",
        type=int,
        default=int(os.environ.get("SLACK_ASK_RECLAIM_IDLE_MS", "60000")),
        help="a stream entry pending longer than this is reported (default: SLACK_ASK_RECLAIM_IDLE_MS)",
    )
    p.add_argument("--json", action="store_true", help="print exactly one JSON document")
    p.add_argument(
        "--fix",
        action="store_true",
        help="repair what needs no Slack (the Home tab's index drift: docs/home.md), then report it",
    )
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    return run_with_redis("slack-ask check", args, lambda redis, target: _check(redis, target, args))


async def _check(redis: Redis, target: RedisTarget, args: argparse.Namespace) -> int:
    problems = await check_prefix(redis, target.prefix, reclaim_idle_ms=args.reclaim_idle_ms, fix=args.fix)
    if args.json:
        doc = {"prefix": target.prefix, "ok": not problems, "problems": [p.to_json() for p in problems]}
        print(json.dumps(doc))
    elif not problems:
        print(f"{target.prefix}: every invariant holds.")
    else:
        for problem in problems:
            # repr: key names are agents' text, and must not write lines of their own.
            print(f"{problem.kind}: {problem.key!r} {problem.detail}")
        print(f"{len(problems)} broken invariant(s) under {target.prefix}")
        if args.fix:
            repaired = sum(1 for p in problems if p.kind in ("stale_home_row", "missing_home_row"))
            print(f"{repaired} of them repaired (the Home tab's indexes)")
    return EXIT_BROKEN if problems else 0
