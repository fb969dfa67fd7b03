"""The Redis connection of the commands that read the bot's store (``list``, ``status``, ``cancel``,
``dismiss``, ``check``): the shared ``--redis``/``--prefix`` options and their two failures.

A malformed URL is a configuration error (exit 2) and an unreachable Redis exit 8 (protocol
section 12), each one line naming the setting the URL came from, so the fix is obvious.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from redis.asyncio import Redis
from redis.exceptions import RedisClusterException, ResponseError

from bot.client import add_connection_args, resolve_connection
from bot.storage.connection import connect, redacted
from bot.storage.diagnose import is_unreachable, unreachable_reason, url_problem

__all__ = ["EXIT_REDIS", "EXIT_USAGE", "RedisTarget", "add_redis_args", "redis_target", "run_with_redis"]

EXIT_USAGE = 2
EXIT_REDIS = 8


@dataclass(frozen=True)
class RedisTarget:
    url: str
    prefix: str
    setting: str
    """Where the URL came from, as the user wrote it: ``--redis``, ``REDIS_URL`` or the default."""

    def problem(self) -> str | None:
        """One line saying what is wrong with the URL, naming its setting; None when it is usable."""
        problem = url_problem(self.url)
        return None if problem is None else f"{self.setting} {problem}"

    def unreachable(self, exc: BaseException) -> str:
        return f"cannot reach Redis at {redacted(self.url)} ({self.setting}): {unreachable_reason(exc)}"

    def refused(self, exc: BaseException) -> str | None:
        """The line for a Redis that answered but cannot be used as the URL says (a database number
        out of range, a Cluster URL naming a standalone Redis); None for any other exception."""
        if isinstance(exc, RedisClusterException):
            return f"{self.setting}: {unreachable_reason(exc)}"
        if isinstance(exc, ResponseError):
            return f"{self.setting}: Redis at {redacted(self.url)} answered: {unreachable_reason(exc)}"
        return None


def add_redis_args(parser: argparse._ActionsContainer) -> None:
    """``--redis`` (env ``REDIS_URL``) and ``--prefix`` (env ``SLACK_ASK_PREFIX``)."""
    add_connection_args(parser)


def redis_target(redis: str | None, prefix: str | None) -> RedisTarget:
    url, resolved_prefix = resolve_connection(redis, prefix)
    if redis:
        setting = "--redis"
    elif os.environ.get("REDIS_URL"):
        setting = "REDIS_URL"
    else:
        setting = "the default Redis URL"
    return RedisTarget(url, resolved_prefix, setting)


def run_with_redis(
    prog: str, args: argparse.Namespace, command: Callable[[Redis, RedisTarget], Awaitable[int]]
) -> int:
    """Run ``command`` with a connection to the Redis that ``args`` names; the exit code."""
    target = redis_target(args.redis, args.prefix)
    if (problem := target.problem()) is not None:
        print(f"{prog}: error: {problem}", file=sys.stderr)
        return EXIT_USAGE

    async def go() -> int:
        redis = connect(target.url, socket_connect_timeout=5)
        try:
            return await command(redis, target)
        finally:
            await redis.aclose()

    try:
        return asyncio.run(go())
    except Exception as exc:
        if is_unreachable(exc):
            print(f"{prog}: error: {target.unreachable(exc)}", file=sys.stderr)
            return EXIT_REDIS
        if (line := target.refused(exc)) is not None:
            print(f"{prog}: error: {line}", file=sys.stderr)
            return EXIT_USAGE
        raise
