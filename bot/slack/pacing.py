"""The bot paces its own Slack calls, so that Slack's rate limits are met before a 429 says so.

Slack limits each Web API method per app per workspace by tier, and ``chat.postMessage`` to about one
message per second per channel (docs/slack-limits.md). Every call first takes a token from the
method's bucket (and, for a post, from the channel's bucket too); the buckets live in Redis
(``bot.storage.buckets``), so N replicas together stay within one workspace's limits.

Priorities share a bucket without starving what matters: a lower priority may use less of the burst
(it leaves the rest to higher ones) and may reserve only a short way ahead (so it never queues in
front of a person's click for long). In order:

* ``now``: what a person just did (the update after a click, an ephemeral note, a form).
* ``clear``: turning ended messages into their ended form (no stale buttons).
* ``post``: new asks and escalation posts.
* ``remind``: reminders in threads.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from dataclasses import dataclass
from typing import Literal

from redis.exceptions import RedisError

from bot.errors import Deferred, SlackBusyError, failure
from bot.storage.buckets import Buckets

__all__ = ["BUCKET_BUDGET_S", "LIMITS", "POST_PER_CHANNEL", "Limit", "Pacer", "Priority"]

log = logging.getLogger(__name__)

Priority = Literal["now", "clear", "post", "remind"]


@dataclass(frozen=True, slots=True)
class Limit:
    per_minute: float
    burst: int


# Slack publishes no burst sizes ("short bursts", "sporadic bursts are welcome"); the bot uses about
# half of what the fake Slack tolerates (bot.playground.ratelimits), so jitter between replicas and
# the network never turns its own bursts into 429s.
TIER_2, TIER_3, TIER_4 = Limit(20, 3), Limit(50, 5), Limit(100, 10)

LIMITS: dict[str, Limit] = {
    "auth.test": TIER_4,
    "chat.getPermalink": TIER_4,
    # Workspace-wide, posts are limited only by Slack's general "several hundred a minute";
    # the binding limit is the channel's (POST_PER_CHANNEL).
    "chat.postMessage": Limit(300, 15),
    "chat.postEphemeral": TIER_4,
    "chat.update": TIER_3,
    "conversations.join": TIER_3,
    "conversations.open": TIER_3,
    "usergroups.users.list": TIER_2,
    "users.lookupByEmail": TIER_3,
    "views.open": TIER_4,
    "views.publish": TIER_4,
}
"""Calls per minute and burst of each method the bot calls (unknown methods: Tier 3)."""

BUCKET_BUDGET_S = 0.5
"""What taking one token from Redis may take: past it the call goes ahead unpaced (as when Redis
fails), so a Redis that holds its answers never holds a person's form (a ``trigger_id`` lives 3 s)
or a private answer to a click behind it."""

POST_PER_CHANNEL = Limit(60, 1)
"""``chat.postMessage`` in one channel: one a second. Slack allows short bursts, but a channel's burst is
small (the fake's is 3): taking none of it leaves all of it to absorb posts that bunch on the way."""

_HEADROOM = 0.9
"""The bot runs at 90% of each published rate: calls delayed on their way (a busy event loop, the
network) then bunch up at Slack without finding its buckets empty."""

# Of the burst, the share each priority may use, and how many intervals ahead it may reserve.
_SHARE: dict[Priority, float] = {"now": 1.0, "clear": 0.75, "post": 0.5, "remind": 0.25}
_AHEAD: dict[Priority, float] = {"now": math.inf, "clear": 3.0, "post": 2.0, "remind": 1.0}


class Pacer:
    """Takes tokens for Slack calls; ``scale`` multiplies every rate (tests and benchmarks run Slack's
    limits faster, keeping their ratios). Without ``buckets`` (or with ``scale`` 0) nothing waits."""

    def __init__(self, buckets: Buckets | None, *, scale: float = 1.0) -> None:
        self.buckets = buckets if scale > 0 else None
        self.scale = scale
        self._warned_at = 0.0

    def _interval_ms(self, limit: Limit) -> float:
        return 60_000 / (limit.per_minute * self.scale * _HEADROOM)

    async def take(self, method: str, *, priority: Priority, deadline: float | None = None) -> None:
        """Wait for the workspace-wide token of one call to ``method``.

        ``deadline`` (``time.monotonic()``) bounds the wait: a token that would come later raises
        :class:`SlackBusyError`, with nothing reserved."""
        await self._take_one(method, None, LIMITS.get(method, TIER_3), priority, deadline, defer=False)

    async def take_channel(
        self, channel: str, *, priority: Priority, deadline: float | None = None, defer: bool = False
    ) -> None:
        """Wait for the token of one ``chat.postMessage`` in ``channel`` (besides ``take``'s).

        ``defer``: when the token is more than one interval away, raise :class:`Deferred` with nothing
        reserved, so the caller does other work meanwhile (intake, fair across channels)."""
        await self._take_one("chat.postMessage", channel, POST_PER_CHANNEL, priority, deadline, defer=defer)

    async def _take_one(
        self,
        method: str,
        channel: str | None,
        limit: Limit,
        priority: Priority,
        deadline: float | None,
        *,
        defer: bool,
    ) -> None:
        if self.buckets is None:
            return
        interval = self._interval_ms(limit)
        defer_after = interval / 1000 if defer else None
        tolerance = interval * (limit.burst - 1) * _SHARE[priority]
        while True:
            left = math.inf if deadline is None else deadline - time.monotonic()
            ahead = _AHEAD[priority] * interval / 1000
            bound = min(left, ahead, math.inf if defer_after is None else defer_after)
            try:
                async with asyncio.timeout(BUCKET_BUDGET_S):
                    slot = await self.buckets.take(
                        method,
                        channel,
                        interval_ms=interval,
                        tolerance_ms=tolerance,
                        max_wait_ms=min(bound, 86_400.0) * 1000,
                    )
            except (RedisError, OSError) as exc:  # OSError: TimeoutError too
                # Pacing is a courtesy to Slack, not a condition of working: without Redis the call
                # goes ahead, and Slack's 429 (still honoured) is the backstop.
                self._warn(f"cannot take a {method} token ({failure(exc)}); calling without pacing")
                return
            if slot.reserved:
                if slot.wait_s > 0:
                    await asyncio.sleep(slot.wait_s)
                return
            if bound == left:
                where = f" in {channel}" if channel else ""
                raise SlackBusyError(
                    f"Slack's rate limit for {method}{where} leaves no call before this work's lease ends",
                    method=method,
                )
            if defer_after is not None and bound == defer_after:
                raise Deferred(slot.wait_s, key=f"{method}:{channel or ''}")
            # Jitter: waiters of one bucket do not all ask again at the same instant.
            await asyncio.sleep(slot.wait_s + random.random() * interval / 2000)

    def _warn(self, message: str) -> None:
        now = time.monotonic()
        if now - self._warned_at > 30:
            self._warned_at = now
            log.warning("%s", message)
