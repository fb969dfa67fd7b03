"""BLPOP slices that outlive a cancelled caller: the agent side's ``AskClient.wait`` (bot/client.py).

Cancelling a coroutine blocked in BLPOP makes redis-py close its connection; should Redis already
have popped a result for that BLPOP (its reply on the way), the result is lost: it is neither on
the list any more nor anywhere else. So each slice runs as a task of its own, which a cancelled
``wait`` leaves running to its end (at most one slice, a few seconds: the Pi extension's grace
period, in Python), and what it pops waits here for the next ``wait`` on that list.
"""

from __future__ import annotations

import asyncio
from typing import Any

from redis.asyncio import Redis

__all__ = ["Slices"]


class Slices:
    """The BLPOP slice in flight on each reply list, and what slices popped that no caller took yet."""

    def __init__(self, redis: Redis) -> None:
        self._redis = redis
        self._inflight: dict[str, asyncio.Task[Any]] = {}
        self._late: dict[str, list[bytes | str]] = {}

    def late(self, key: str) -> bytes | str | None:
        """What a slice popped from ``key`` after its caller was cancelled (oldest first), if anything."""
        late = self._late.get(key)
        return late.pop(0) if late else None

    async def pop(self, key: str, block: float) -> bytes | str | None:
        """One BLPOP slice on ``key`` (or the rest of the one still in flight there) for at most
        ``block`` seconds; raises what BLPOP raised. Cancelling the caller leaves the slice running."""
        task = self._inflight.get(key)
        if task is None:
            task = asyncio.ensure_future(self._redis.blpop([key], timeout=block))
            self._inflight[key] = task
            task.add_done_callback(lambda done: self._collect(key, done))
        finished, _ = await asyncio.wait({task}, timeout=block)
        if not finished:
            return None  # a longer slice, left by a cancelled caller, is still blocked
        self._collect(key, task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            raise exc
        return self.late(key)

    def _collect(self, key: str, task: asyncio.Task[Any]) -> None:
        """Collect a finished slice once: what it popped waits in ``_late`` for the next caller,
        whether or not one is still there (an error is the waiting caller's to raise)."""
        if self._inflight.get(key) is not task:
            return  # collected already
        del self._inflight[key]
        if task.cancelled() or task.exception() is not None:
            return
        item = task.result()
        if item is not None:
            self._late.setdefault(key, []).append(item[1])

    async def aclose(self) -> None:
        """Stop the slices still running (what they would pop stays on its list)."""
        tasks = list(self._inflight.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
