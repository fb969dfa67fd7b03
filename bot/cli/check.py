"""``slack-ask check [--json]``: the invariant check of one prefix (bot.storage.check)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from bot.cli.ask import EXIT_REDIS
from bot.storage.check import Problem, check_prefix
from bot.storage.connection import connect, redacted

__all__ = ["EXIT_BROKEN", "add_parser"]

EXIT_BROKEN = 1


def add_parser(sub: Any) -> None:
    p = sub.add_parser("check", help="report every broken invariant of the bot's keys under one prefix")
    p.add_argument(
        "--redis", default=os.environ.get("REDIS_URL", "redis://localhost:6379/0"), help="Redis URL"
    )
    p.add_argument("--prefix", default=os.environ.get("SLACK_ASK_PREFIX", "slack-ask"), help="key prefix")
    p.add_argument(
        "--reclaim-idle-ms",
        type=int,
        default=int(os.environ.get("SLACK_ASK_RECLAIM_IDLE_MS", "60000")),
        help="a stream entry pending longer than this is reported (default: SLACK_ASK_RECLAIM_IDLE_MS)",
    )
    p.add_argument("--json", action="store_true", help="print exactly one JSON document")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    async def go() -> list[Problem]:
        redis = connect(args.redis, socket_connect_timeout=5)
        try:
            return await check_prefix(redis, args.prefix, reclaim_idle_ms=args.reclaim_idle_ms)
        finally:
            await redis.aclose()

    try:
        problems = asyncio.run(go())
    except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
        print(f"slack-ask: cannot reach Redis at {redacted(args.redis)}: {exc}", file=sys.stderr)
        return EXIT_REDIS
    if args.json:
        doc = {"prefix": args.prefix, "ok": not problems, "problems": [p.to_json() for p in problems]}
        print(json.dumps(doc))
    elif not problems:
        print(f"{args.prefix}: every invariant holds.")
    else:
        for problem in problems:
            # repr: key names are agents' text, and must not write lines of their own.
            print(f"{problem.kind}: {problem.key!r} {problem.detail}")
        print(f"{len(problems)} broken invariant(s) under {args.prefix}")
    return EXIT_BROKEN if problems else 0
