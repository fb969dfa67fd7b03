"""Token buckets shared by every replica: the Redis half of the bot's Slack pacing (``bot.slack.pacing``).

One key per bucket (``Keys.rate``), one atomic script per call (``lua/rate.lua``), Redis time only:
N replicas together take no more than one bucket's rate, whatever their clocks say.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from importlib import resources

from redis.asyncio import Redis
from redis.exceptions import NoScriptError

from bot.storage.keys import Keys

__all__ = ["Buckets", "Slot"]


@functools.cache
def _source() -> str:
    return (resources.files("bot.storage") / "lua" / "rate.lua").read_text(encoding="utf-8")


@dataclass(frozen=True, slots=True)
class Slot:
    """The answer of one ``take``: ``reserved`` with ``wait_s`` to wait before calling, or not
    reserved, to ask again in ``wait_s``."""

    reserved: bool
    wait_s: float


class Buckets:
    def __init__(self, redis: Redis, prefix: str) -> None:
        self.redis = redis
        self.keys = Keys(prefix)
        self._sha = hashlib.sha1(_source().encode()).hexdigest()

    async def take(
        self, method: str, channel: str | None, *, interval_ms: float, tolerance_ms: float, max_wait_ms: float
    ) -> Slot:
        """Reserve the next call of ``method`` (in ``channel``) if it may happen within ``max_wait_ms``."""
        key = self.keys.rate(method, channel)
        args = (f"{interval_ms:.3f}", f"{tolerance_ms:.3f}", f"{max(max_wait_ms, 0):.3f}")
        try:
            reply = await self.redis.evalsha(self._sha, 1, key, *args)
        except NoScriptError:
            # Redis lost its scripts (restart, failover): load this one again; the call is safe to repeat.
            await self.redis.script_load(_source())
            reply = await self.redis.evalsha(self._sha, 1, key, *args)
        reserved, wait_ms = int(reply[0]), int(reply[1])
        return Slot(reserved=reserved == 1, wait_s=wait_ms / 1000)
