"""What keeps the bot's loops (intake, reclaim, sweeper) alive: one log line per failure, backoff,
and a record of how long a loop has been failing, which ``/healthz`` reports (guarantee 10.5)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
import traceback
from dataclasses import dataclass

from redis.exceptions import RedisError

__all__ = ["IdlePause", "LoopHealth", "describe_failure", "log_failure", "sleep_or_stop"]

BACKOFF_MIN_S = 0.1
BACKOFF_MAX_S = 5.0


def describe_failure(exc: BaseException) -> str:
    """``Type: message`` on one line, bounded, with where it was raised for anything but Redis errors."""
    message = " ".join(str(exc).split())
    if len(message) > 300:
        message = message[:297] + "..."
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    if not isinstance(exc, RedisError) and exc.__traceback__ is not None:
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        text += f" (at {frame.filename.rsplit('/', 1)[-1]}:{frame.lineno} in {frame.name})"
    return text


def log_failure(log: logging.Logger, what: str, exc: BaseException, *, retry_s: float | None = None) -> None:
    """One line, never a traceback: Redis trouble is a warning; anything else is a bug in the bot,
    logged as an error carrying ``crash=True`` (the test suite fails on those)."""
    tail = f"; retrying in {retry_s:.1f}s" if retry_s is not None else ""
    if isinstance(exc, RedisError | OSError | TimeoutError):
        log.warning("%s failed: %s%s", what, describe_failure(exc), tail)
    else:
        log.error("%s failed (a bug): %s%s", what, describe_failure(exc), tail, extra={"crash": True})


@dataclass
class LoopHealth:
    """How one loop is doing: when it started failing without a success since (None: it is fine)."""

    name: str
    failing_since: float | None = None
    failures: int = 0
    last_error: str = ""

    def ok(self) -> None:
        self.failing_since = None
        self.failures = 0

    def failed(self, exc: BaseException) -> float:
        """Record a failure; returns the backoff before the next attempt (doubling, capped)."""
        if self.failing_since is None:
            self.failing_since = time.monotonic()
        self.failures += 1
        self.last_error = describe_failure(exc)
        backoff: float = BACKOFF_MIN_S * 2.0 ** min(self.failures - 1, 10)
        return min(backoff, BACKOFF_MAX_S)

    def failing_for_ms(self) -> int:
        if self.failing_since is None:
            return 0
        return int((time.monotonic() - self.failing_since) * 1000)


@dataclass
class IdlePause:
    """The pause between two rounds of a polling loop (sweeper, workflow steps, Home tab): its interval
    while rounds find work; doubled after each round that found none, up to ``max_s``. An idle replica
    polled Redis 57 times a second at a 200 ms interval (``make bench``), which a Redis billed by the
    command charges for; the price is that a timer coming due after an idle spell fires up to
    ``max_s`` late. Jittered by a quarter either way, so that replicas' rounds spread."""

    interval_s: float
    max_s: float
    current_s: float = 0.0

    def __post_init__(self) -> None:
        self.max_s = max(self.max_s, self.interval_s)  # at most the interval: no growing pause

    @classmethod
    def of(cls, interval_ms: int, idle_max_ms: int | None) -> IdlePause:
        """From a loop's settings (None: no growing pause)."""
        return cls(interval_ms / 1000, (idle_max_ms or interval_ms) / 1000)

    def after(self, found: int) -> float:
        """The pause after a round that found ``found`` items of work."""
        if found or self.current_s == 0.0:
            self.current_s = self.interval_s
        else:
            self.current_s = min(self.current_s * 2, self.max_s)
        return self.current_s * (0.75 + random.random() / 2)


async def sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
    # asyncio.timeout, not wait_for: Python 3.11's wait_for can lose a cancel (CPython gh-86296).
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await stop.wait()
