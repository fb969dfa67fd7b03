"""The intake loop: the consumer group on ``P:asks``, with reclaim of entries dead replicas left behind."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from bot.engine import Engine
from bot.storage.store import Entry, Store

__all__ = ["Intake"]

log = logging.getLogger(__name__)


class Intake:
    """Reads asks and cancels, handles up to ``concurrency`` at once, and never dies of bad input."""

    def __init__(
        self,
        engine: Engine,
        store: Store,
        *,
        consumer: str,
        reclaim_idle_ms: int,
        block_ms: int = 2_000,
        count: int = 32,
        concurrency: int = 32,
    ) -> None:
        self.engine = engine
        self.store = store
        self.consumer = consumer
        self.reclaim_idle_ms = reclaim_idle_ms
        self.block_ms = block_ms
        self.count = count
        self._slots = asyncio.Semaphore(concurrency)
        self._tasks: set[asyncio.Task[None]] = set()
        self._in_flight: set[str] = set()

    async def _one(self, entry: Entry) -> None:
        try:
            await self.engine.handle_entry(entry)
        except Exception:
            # Left pending on purpose: reclaim retries it, and after SLACK_ASK_MAX_DELIVERIES it is
            # parked on the dead-letter stream with its reason.
            log.exception("intake entry %s failed; it stays pending for a retry", entry.id)
        finally:
            self._in_flight.discard(entry.id)
            self._slots.release()

    async def _dispatch(self, entries: list[Entry]) -> None:
        for entry in entries:
            if entry.id in self._in_flight:
                continue  # still being handled here (a slow Slack call): reclaim must not start it twice
            self._in_flight.add(entry.id)
            await self._slots.acquire()
            task = asyncio.create_task(self._one(entry))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def abort(self) -> None:
        """Cancel every entry in flight (a crash, in tests): they stay pending for a reclaim."""
        for task in self._tasks:
            task.cancel()

    async def run(self, stop: asyncio.Event) -> None:
        await self.store.ensure_group()
        # Entries this consumer name held before a restart come first.
        own = await self.store.read(self.consumer, count=1000, block_ms=None, own_pending=True)
        await self._dispatch(own)
        reclaimer = asyncio.create_task(self._reclaim_loop(stop))
        try:
            while not stop.is_set():
                try:
                    entries = await self.store.read(self.consumer, count=self.count, block_ms=self.block_ms)
                except (RedisConnectionError, RedisTimeoutError) as exc:
                    log.warning("intake: Redis unavailable (%s); retrying", exc)
                    await _sleep_or_stop(stop, 1.0)
                    continue
                except RedisError as exc:
                    if "NOGROUP" in str(exc):
                        await self.store.ensure_group()
                        continue
                    raise
                await self._dispatch(entries)
        finally:
            reclaimer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reclaimer
            if self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _reclaim_loop(self, stop: asyncio.Event) -> None:
        interval = max(self.reclaim_idle_ms / 2000, 0.05)
        while not stop.is_set():
            await _sleep_or_stop(stop, interval)
            try:
                entries = await self.store.reclaim(self.consumer, min_idle_ms=self.reclaim_idle_ms)
            except RedisError as exc:
                log.warning("reclaim failed: %s", exc)
                continue
            if entries:
                log.info("reclaimed %d entries left by other replicas", len(entries))
                await self._dispatch(entries)


async def _sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)
