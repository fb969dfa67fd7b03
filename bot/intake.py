"""The intake loop: the consumer group on ``P:asks``, with reclaim of entries dead replicas left behind.

No input stops it (guarantee 10.5): an entry that breaks protocol section 1 (not exactly one field
``ask`` or ``cancel``, or bytes that are not UTF-8) goes to the dead-letter stream with its reason
before the engine sees it, and any exception, from Redis or from a bug, costs one log line and a
backoff, never the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque

from redis.exceptions import ClusterDownError, ReadOnlyError, RedisError, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from bot.engine import Engine
from bot.errors import Deferred, NotReplicatedError
from bot.loops import LoopHealth, log_failure, sleep_or_stop
from bot.metrics import METRICS
from bot.storage.store import Entry, Store
from bot.tasks import cancel_and_wait

_REDIS_AWAY = (
    NotReplicatedError,
    RedisConnectionError,
    RedisTimeoutError,
    ReadOnlyError,
    TryAgainError,
    ClusterDownError,
)
"""Errors that say Redis is unreachable or changing hands, nothing about the entry being handled."""

__all__ = ["Intake", "entry_problem"]

log = logging.getLogger(__name__)

_FIELDS = ("ask", "cancel")


def entry_problem(entry: Entry) -> str | None:
    """Why ``entry`` breaks protocol section 1 (one field, ``ask`` or ``cancel``, UTF-8), or None."""
    if entry.problem is not None:
        return entry.problem
    names = list(entry.fields)
    if len(names) == 1 and names[0] in _FIELDS:
        return None
    if not names:
        return "the entry has no field; it must have exactly one, 'ask' or 'cancel'"
    shown = ", ".join(repr(n[:40]) for n in names[:5]) + (", ..." if len(names) > 5 else "")
    return f"the entry must have exactly one field, 'ask' or 'cancel' (it has {shown})"


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
        # Entries waiting for a busy channel's post limit, by bucket, oldest first; they hold no slot.
        self._waiting: dict[str, deque[Entry]] = {}
        self._waiting_key: dict[str, str] = {}
        self._wakers: dict[str, asyncio.TimerHandle] = {}
        self.health = LoopHealth("intake")
        self.reclaim_health = LoopHealth("reclaim")
        self.reclaimer: asyncio.Task[None] | None = None
        self._aborted = False

    async def _one(self, entry: Entry) -> None:
        deferred: Deferred | None = None
        try:
            problem = entry_problem(entry)
            if problem is not None:
                METRICS.dead_letters.labels(reason="bad_entry").inc()
                await self.store.dead_letter(entry, problem)
                return
            await self.engine.handle_entry(entry)
        except asyncio.CancelledError:
            raise
        except Deferred as exc:
            deferred = exc
        except _REDIS_AWAY as exc:
            # Redis away, failing over or short of replicas says nothing about this entry: it is
            # retried without counting towards SLACK_ASK_MAX_DELIVERIES, so an outage parks no ask as
            # poison (a failover with a short SLACK_ASK_RECLAIM_IDLE_MS used to). An entry that
            # crashes its replica, or makes Redis answer an error, still counts.
            log_failure(log, f"intake entry {entry.id} (it stays pending for a retry)", exc)
            with contextlib.suppress(RedisError):
                await self.store.unclaim_busy(
                    entry, self.consumer, lease_left_ms=0, reclaim_idle_ms=self.reclaim_idle_ms
                )
        except Exception as exc:
            # Left pending on purpose: reclaim retries it, and after SLACK_ASK_MAX_DELIVERIES it is
            # parked on the dead-letter stream with its reason.
            log_failure(log, f"intake entry {entry.id} (it stays pending for a retry)", exc)
        finally:
            self._slots.release()
            key = self._waiting_key.pop(entry.id, None)
            if deferred is not None:
                self._defer(entry, deferred, first=key is not None)
            else:
                self._in_flight.discard(entry.id)
                if key is not None:
                    self._arm(key, 0.0)  # the channel took this one: its next waiting entry may try

    def _defer(self, entry: Entry, deferred: Deferred, *, first: bool) -> None:
        """Park an entry whose channel is busy, without a slot, until its bucket has a token again:
        one busy channel never holds back asks to the others (only each channel's oldest entry asks
        its bucket again, so the busy channel drains in order, at Slack's pace)."""
        queue = self._waiting.setdefault(deferred.key, deque())
        if first:
            queue.appendleft(entry)
        else:
            queue.append(entry)
        self._waiting_key[entry.id] = deferred.key
        self._arm(deferred.key, deferred.retry_in_s)

    def _arm(self, key: str, delay_s: float) -> None:
        loop = asyncio.get_running_loop()
        current = self._wakers.get(key)
        if current is not None:
            if current.when() <= loop.time() + delay_s:
                return
            current.cancel()
        self._wakers[key] = loop.call_later(delay_s, self._wake, key)

    def _wake(self, key: str) -> None:
        self._wakers.pop(key, None)
        queue = self._waiting.get(key)
        if not queue:
            self._waiting.pop(key, None)
            return
        entry = queue.popleft()
        if not queue:
            del self._waiting[key]
        task = asyncio.create_task(self._start(entry))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _start(self, entry: Entry) -> None:
        if self._aborted:
            return  # killed: the entry stays pending for another replica's reclaim
        await self._slots.acquire()
        task = asyncio.create_task(self._one(entry))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _dispatch(self, entries: list[Entry]) -> None:
        for entry in entries:
            if entry.id in self._in_flight:
                continue  # still being handled here (a slow Slack call): reclaim must not start it twice
            self._in_flight.add(entry.id)
            await self._start(entry)

    def waiting(self) -> list[str]:
        """Ids of the entries parked for a busy channel."""
        return [entry.id for queue in self._waiting.values() for entry in queue]

    def abort(self) -> list[asyncio.Task[None]]:
        """Cancel every entry in flight and the reclaim loop (a crash, in tests): the entries stay
        pending for another replica's reclaim, and nothing starts here again. Returns the tasks
        cancelled (the entries', the reclaimer's, the lease renewal's), for the caller to wait on.

        The reclaimer is among them, not left to ``run``'s own ending: on Python 3.11 a cancel can be
        lost (``bot.runtime._end_tasks``), and a ``run`` cancelled again while it waited for the
        reclaimer left it running, taking over the dead replica's asks for it (a flaky lease test)."""
        self._aborted = True
        for waker in self._wakers.values():
            waker.cancel()
        self._wakers.clear()
        self._waiting.clear()
        tasks = list(self._tasks)
        if self.reclaimer is not None:
            tasks.append(self.reclaimer)
        for task in tasks:
            task.cancel()
        renewal = self.engine.intake.leases.close()
        return tasks if renewal is None else [*tasks, renewal]

    async def run(self, stop: asyncio.Event) -> None:
        self.reclaimer = asyncio.create_task(self._reclaim_loop(stop), name="reclaim")
        started = False
        try:
            while not stop.is_set():
                try:
                    if not started:
                        await self.store.ensure_group()
                        # Entries this consumer name held before a restart come first.
                        own = await self.store.read(
                            self.consumer, count=1000, block_ms=None, own_pending=True
                        )
                        await self._dispatch(own)
                        started = True
                    entries = await self.store.read(self.consumer, count=self.count, block_ms=self.block_ms)
                except Exception as exc:
                    if isinstance(exc, RedisError) and "NOGROUP" in str(exc):
                        started = False  # the stream or group was deleted: create it again at once
                        continue
                    # A read that failed mid-way (a timeout on a half-open link, a failover) may
                    # have been served: its entries are pending to this consumer but never arrived.
                    # Reading this consumer's own pending entries again brings them back at once.
                    started = False
                    delay = self.health.failed(exc)
                    log_failure(log, "intake: reading the stream", exc, retry_s=delay)
                    await sleep_or_stop(stop, delay)
                    continue
                self.health.ok()
                await self._dispatch(entries)
        finally:
            try:
                await cancel_and_wait(self.reclaimer)
                # Entries set aside for a busy channel stay pending: another replica takes them over.
                for waker in self._wakers.values():
                    waker.cancel()
                self._wakers.clear()
                self._waiting.clear()
                if self._tasks:
                    await asyncio.gather(*self._tasks, return_exceptions=True)
            finally:
                self.engine.intake.leases.close()  # even when cancelled again while waiting above

    async def _reclaim_loop(self, stop: asyncio.Event) -> None:
        interval = max(self.reclaim_idle_ms / 2000, 0.05)
        while not stop.is_set():
            await sleep_or_stop(stop, interval)
            try:
                # Entries parked for a busy channel, or in a slow delivery (its lease renewed), are
                # still this replica's: they must not look idle (one XCLAIM JUSTID for all of them).
                await self.store.touch(
                    self.consumer, sorted(self._in_flight), min_idle_ms=max(self.reclaim_idle_ms // 4, 1)
                )
                # Not the entries this replica is handling now: claiming them would count a delivery.
                entries = await self.store.reclaim(
                    self.consumer, min_idle_ms=self.reclaim_idle_ms, skip=set(self._in_flight)
                )
                # Replicas that restarted under a new name leave their old consumer behind; one with
                # nothing pending and idle past the reclaim time is gone for good.
                dropped = await self.store.drop_idle_consumers(
                    self.consumer, min_idle_ms=max(self.reclaim_idle_ms, self.block_ms * 5)
                )
            except Exception as exc:
                if isinstance(exc, RedisError) and "NOGROUP" in str(exc):
                    with contextlib.suppress(RedisError):
                        await self.store.ensure_group()  # the stream was deleted: it comes back empty
                    continue
                delay = self.reclaim_health.failed(exc)
                log_failure(log, "reclaim", exc, retry_s=delay)
                await sleep_or_stop(stop, delay)
                continue
            self.reclaim_health.ok()
            if dropped:
                log.info(
                    "removed %d idle consumers with nothing pending: %s", len(dropped), ", ".join(dropped)
                )
            if entries:
                log.info("reclaimed %d entries left by other replicas", len(entries))
                await self._dispatch(entries)
