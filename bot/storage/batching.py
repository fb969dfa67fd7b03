"""Auto-pipelining: the store's round trips (``StoreBase._run``) that start while others are on their
way to Redis are sent together, in one pipeline, as soon as one of those returns. Under load (many
asks at once) a step of every ask in flight costs one round trip, not one each; a caller alone pays
nothing extra, as its pipeline goes at once.

Each caller's commands stay together and in order in the combined pipeline, and a pipeline was never
atomic (another client's command may come between any two of its commands), so combining them
changes nothing any step relies on. Each caller gets the replies of its own commands only, with the
error of a failed command in its place (``execute(raise_on_error=False)``), so one caller's failing
script fails nobody else. A caller cancelled before its pipeline is sent is left out of it; one
cancelled after has it run, as a cancelled pipeline of its own would have."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

__all__ = ["Batches", "Step"]

Step = Callable[[Any], Any]
"""Queues one command on a pipeline (or, on Redis Cluster, returns its coroutine on the client)."""


@dataclass(slots=True)
class _Job:
    steps: Sequence[Step]
    wait: tuple[int, int] | None
    done: asyncio.Future[list[Any]]


STALLED_S = 0.02
"""A pipeline out this long is not waited behind: a stalled link (a dropped connection before its
socket timeout, a slow ``WAIT``) must not hold back every other task's round trip."""


class Batches:
    """Runs pipelines for ``StoreBase._run``: a caller's goes at once unless ``in_flight`` pipelines
    sent less than ``STALLED_S`` ago are still out; then it goes in the next one of those to return
    (with every other caller waiting, up to ``max_commands``), or in a pipeline of its own should it
    wait longer than ``STALLED_S`` (``most`` pipelines out at once, at most)."""

    def __init__(
        self, redis: Redis, *, in_flight: int = 2, most: int = 32, max_commands: int = 2_000
    ) -> None:
        self._redis = redis
        self._limit = in_flight
        self._most = most
        self._max_commands = max_commands
        self._queue: list[_Job] = []
        self._sending: dict[asyncio.Task[None], float] = {}  # each flyer's current send, since when
        self._flyers: set[asyncio.Task[None]] = set()
        self._rescue: asyncio.TimerHandle | None = None

    async def run(self, steps: Sequence[Step], *, wait: tuple[int, int] | None = None) -> list[Any]:
        """The replies of ``steps`` in one pipeline shared with other callers (a failed command's
        error in its place, not raised); with ``wait`` (replicas, timeout_ms) a ``WAIT`` after them
        on the same connection, whose answer comes last."""
        loop = asyncio.get_running_loop()
        job = _Job(steps, wait, loop.create_future())
        self._queue.append(job)
        # A flyer is taken as coming back soon unless its send has been out for STALLED_S.
        stalled = sum(1 for since in self._sending.values() if loop.time() - since >= STALLED_S)
        if len(self._flyers) - stalled < self._limit:
            self._launch()
        elif self._rescue is None:
            self._rescue = loop.call_later(STALLED_S, self._unstall)
        return await job.done  # a cancel of the caller cancels its future: a batch not sent leaves it out

    def _launch(self) -> None:
        if len(self._flyers) >= self._most:
            return  # they take the queue as they return
        task = asyncio.get_running_loop().create_task(self._fly(), name="redis-pipeline")
        self._flyers.add(task)
        task.add_done_callback(self._flyers.discard)

    def _unstall(self) -> None:
        """Callers still queued ``STALLED_S`` after they came: the pipelines out are slow (a stalled
        link, a long ``WAIT``), so they go in one of their own."""
        self._rescue = None
        if self._waiting():
            self._launch()

    def _waiting(self) -> bool:
        return any(not job.done.done() for job in self._queue)

    async def _fly(self) -> None:
        """Send what is queued, again and again until nothing is: one pipeline at a time."""
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        try:
            while True:
                batch = self._take()
                if not batch:
                    return
                self._sending[task] = loop.time()
                try:
                    await self._send(batch)
                finally:
                    self._sending.pop(task, None)
        finally:
            if self._waiting():
                self._launch()  # cancelled with callers still waiting: another takes them

    def _take(self) -> list[_Job]:
        batch: list[_Job] = []
        commands = 0
        while self._queue:
            job = self._queue[0]
            if job.done.done():
                self._queue.pop(0)  # its caller is gone: never sent
                continue
            if batch and commands + len(job.steps) > self._max_commands:
                break
            batch.append(self._queue.pop(0))
            commands += len(job.steps)
        return batch

    async def _send(self, batch: list[_Job]) -> None:
        spans: list[tuple[_Job, int, int]] = []
        waits = [job.wait for job in batch if job.wait is not None]
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                for job in batch:
                    start = len(pipe.command_stack)
                    try:
                        for step in job.steps:
                            step(pipe)
                    except Exception as exc:  # a step that cannot be sent (a bug): its caller's alone
                        del pipe.command_stack[start:]
                        if not job.done.done():
                            job.done.set_exception(exc)
                        continue
                    spans.append((job, start, len(pipe.command_stack)))
                # Every caller gone (a replica killed or stopping cancels them all): the pipeline
                # goes with them, as each caller's own would have; one caller left keeps it going.
                out = _Out(asyncio.current_task(), spans)
                for job, _, _ in spans:
                    job.done.add_done_callback(out.caller_gone)
                if waits:
                    # The strictest: replicas counted for every write in the pipeline, on its connection.
                    pipe.execute_command("WAIT", max(w[0] for w in waits), max(w[1] for w in waits))
                try:
                    replies = list(await pipe.execute(raise_on_error=False)) if spans else []
                finally:
                    out.back = True
        except BaseException as exc:
            for job, _, _ in spans:
                if not job.done.done():
                    if isinstance(exc, asyncio.CancelledError):
                        job.done.cancel()
                    else:
                        job.done.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for job, start, end in spans:
            if not job.done.done():
                mine = replies[start:end]
                if job.wait is not None:
                    mine.append(replies[-1])
                job.done.set_result(mine)


@dataclass(slots=True)
class _Out:
    """One pipeline on its way: cancelled when every caller in it is gone, while it is still out
    (a done-callback runs later than the cancel it reports: the flyer may be on its next pipeline)."""

    flyer: asyncio.Task[Any] | None
    spans: Sequence[tuple[_Job, int, int]]
    back: bool = False

    def caller_gone(self, _done: object) -> None:
        if self.back or self.flyer is None or self.flyer.done():
            return
        if all(job.done.cancelled() for job, _, _ in self.spans):
            self.flyer.cancel()
