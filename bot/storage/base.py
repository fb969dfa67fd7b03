"""What every part of the store shares: the connection, key names, and running Lua scripts in one round
trip (one command at a time on Redis Cluster)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import NoScriptError, ResponseError

from bot.errors import NotReplicatedError
from bot.storage.batching import Batches, Step
from bot.storage.keys import Keys
from bot.storage.records import _s
from bot.storage.scripts import SCRIPT_NAMES, script_source

__all__ = ["COMPACT_HASH_VALUE_BYTES", "FINALIZE_AFTER_MS", "Step", "StoreBase", "server_time_ms"]


COMPACT_HASH_VALUE_BYTES = 4096
"""The ``hash-max-listpack-value`` docs/operations.md recommends: an ask's hash stays a listpack (its
compact encoding) while each value is at most this long; Redis's default, 64, is shorter than any
ask's record. A listpack is read by scanning it, which at an ask's twenty fields costs nothing."""

FINALIZE_AFTER_MS = 15_000
"""How long after an ask ends a sweeper checks that its Slack messages were updated."""


async def server_time_ms(redis: Redis) -> int:
    """Redis's clock in ms: what deadlines, leases and stream entry ids are measured by."""
    return time_ms(await redis.time())


def time_ms(reply: Any) -> int:
    """``TIME``'s reply (seconds, microseconds) in ms, as the scripts' ``now_ms`` reads it."""
    seconds, micros = reply
    return int(seconds) * 1000 + int(micros) // 1000


class StoreBase:
    """Redis access for one deployment (key prefix): the connection, its keys, scripts and time."""

    def __init__(
        self,
        redis: Redis,
        prefix: str = "slack-ask",
        *,
        retention_ms: int = 7 * 86_400_000,
        finalize_after_ms: int = FINALIZE_AFTER_MS,
        min_replicas: int = 0,
        replica_wait_ms: int = 1_000,
    ) -> None:
        self.redis = redis
        self.keys = Keys(prefix)
        self.retention_ms = retention_ms
        self.finalize_after_ms = finalize_after_ms
        self._cluster = isinstance(redis, RedisCluster)
        # WAIT covers the writes of the connection it runs on, so it goes at the end of each
        # pipeline (one connection). Not on Cluster: there a pipeline is one command at a time,
        # each on its key's node, and redis-py would send WAIT to some other node.
        self.min_replicas = 0 if self._cluster else min_replicas
        self.replica_wait_ms = replica_wait_ms
        self._batches = Batches(redis)
        self._shas = {name: hashlib.sha1(script_source(name).encode()).hexdigest() for name in SCRIPT_NAMES}

    # -- scripts ---------------------------------------------------------------------------

    async def load_scripts(self) -> None:
        """SCRIPT LOAD every script (at start, and again after Redis lost them: restart, failover)."""
        for name in SCRIPT_NAMES:
            await self.redis.script_load(script_source(name))

    def _script(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> Step:
        sha = self._shas[name]
        return lambda pipe: pipe.evalsha(sha, len(keys), *keys, *args)

    async def _direct(self, step: Step) -> Any:
        try:
            return await step(self.redis)
        except NoScriptError:
            await self.load_scripts()
            return await step(self.redis)

    def _track(self, key: str, member: str) -> list[Step]:
        return [lambda pipe: pipe.sadd(key, member), lambda pipe: pipe.pexpire(key, self.retention_ms * 2)]

    async def _run(self, steps: Sequence[Step], *, confirm: bool = True) -> list[Any]:
        """Run ``steps`` in one pipeline: one round trip, shared with other tasks' steps that start
        meanwhile (``bot.storage.batching``). Scripts go as EVALSHA (redis-py would
        otherwise add a SCRIPT EXISTS round trip to every pipeline); NOSCRIPT reloads and retries,
        which is safe because every step is idempotent or a compare-and-set.

        With ``min_replicas`` set, the pipeline ends with ``WAIT``: the bot acts on these writes
        (posts to Slack, tells a person the answer is saved) only once that many replicas hold
        them, so a Sentinel failover cannot take back what Slack already shows. ``confirm=False``:
        reads and housekeeping, whose loss in a failover costs nothing but a repeat."""
        if self._cluster:
            # redis-py's cluster pipelines refuse EVALSHA: one command at a time, in order (each
            # script is still atomic; only the round-trip saving is lost).
            return [await self._direct(step) for step in steps]
        wait = (self.min_replicas, self.replica_wait_ms) if confirm and self.min_replicas else None
        for attempt in (1, 2):
            # Shared with the round trips other tasks start meanwhile (bot.storage.batching).
            replies = await self._batches.run(steps, wait=wait)
            failed = next((r for r in replies if isinstance(r, Exception)), None)
            if isinstance(failed, NoScriptError) and attempt == 1:
                await self.load_scripts()
                continue
            if failed is not None:
                raise failed
            if wait is not None:
                confirmed = int(replies.pop())
                if confirmed < self.min_replicas:
                    raise NotReplicatedError(
                        confirmed, self.min_replicas, self.replica_wait_ms, replies=replies
                    )
            return replies
        raise AssertionError("unreachable")  # pragma: no cover

    # -- time and health -------------------------------------------------------------------

    async def server_time_ms(self) -> int:
        return await server_time_ms(self.redis)

    async def compact_value_limit(self) -> int | None:
        """Redis's ``hash-max-listpack-value`` (``hash-max-ziplist-value`` before Redis 7), or None when
        the server does not tell: below :data:`COMPACT_HASH_VALUE_BYTES`, an ask's record (its
        request, then its result, are values of a few hundred bytes) turns its hash into a hash table,
        which takes about a third more memory per ask (docs/operations.md)."""
        for name in ("hash-max-listpack-value", "hash-max-ziplist-value"):
            try:
                conf = await self.redis.config_get(name)
            except ResponseError:
                return None
            value = conf.get(name) or conf.get(name.encode())  # type: ignore[call-overload]
            if value is not None:
                return int(_s(value))
        return None

    async def eviction_policy(self) -> str | None:
        """Redis's ``maxmemory-policy``, or None when the server does not tell (managed Redis)."""
        try:
            conf = await self.redis.config_get("maxmemory-policy")
        except ResponseError:
            return None
        value = conf.get("maxmemory-policy") or conf.get(b"maxmemory-policy")  # type: ignore[call-overload]
        return _s(value) if value is not None else None
