"""Slack's rate limits, enforced by the fake Web API when asked to (`FakeSlack(rate_limits=True)`).

Slack limits every Web API method per app per workspace by tier, and `chat.postMessage` also to about one
message per second per channel; over the limit it answers HTTP 429 with a `Retry-After` header (whole
seconds) and `{"ok": false, "error": "ratelimited"}`. docs/slack-limits.md has the table and its sources.
Here each limit is a token bucket: `per_minute` tokens a minute, at most `burst` saved up. Slack publishes
no burst sizes ("short bursts", "sporadic bursts are welcome"), so the bursts below are this fake's choice:
small enough that a client which ignores the rate is refused within seconds, large enough that Slack's
documented "short bursts" pass.

`speedup` runs Slack's clock faster (tests and benchmarks stay short; the ratios between methods, channels
and bursts are what matter): at speed-up 20, Tier 3's 50 a minute is 50 every 3 seconds. `Retry-After` must
stay a whole number of seconds, at least 1 (Slack sends integers, and slack_sdk's retry handler parses it
with `int()`), so the scaled wait is rounded up: `max(1, ceil(wait / speedup))` where `wait` is what Slack
would say. A client that honours it therefore never retries early; under a speed-up it waits longer, in
Slack time, than real Slack would make it (up to `speedup` Slack seconds for a sub-second wait). The
allowed rates keep their ratio exactly; only the price of a 429 grows, which errs on the side of making a
client that collects 429s look worse, never better.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

__all__ = [
    "METHOD_LIMITS",
    "POST_PER_CHANNEL",
    "TIER_1",
    "TIER_2",
    "TIER_3",
    "TIER_4",
    "Limit",
    "RateLimiter",
    "TokenBucket",
]


@dataclass(frozen=True, slots=True)
class Limit:
    """`per_minute` calls a minute (in Slack time), with up to `burst` at once after a quiet spell."""

    per_minute: float
    burst: int


TIER_1 = Limit(1, 2)  # "a small amount of burst behavior is tolerated"
TIER_2 = Limit(20, 5)  # "occasional bursts of more requests"
TIER_3 = Limit(50, 10)  # "sporadic bursts are welcome"
TIER_4 = Limit(100, 20)  # "generous burst behavior"
POST_PER_CHANNEL = Limit(60, 3)
"""`chat.postMessage` in one conversation: "1 per second, short bursts >1 allowed"."""

METHOD_LIMITS: Mapping[str, Limit] = {
    "api.test": TIER_4,
    "apps.connections.open": TIER_3,
    # auth.test and chat.getPermalink are "Special" with no published figure ("hundreds per minute"
    # for permalinks); the fake gives them Tier 4.
    "auth.test": TIER_4,
    "chat.delete": TIER_3,
    "chat.getPermalink": TIER_4,
    # Special: the binding limit is the channel's (POST_PER_CHANNEL); Slack also keeps an unpublished
    # workspace-wide limit, which the fake sets at "several hundred a minute".
    "chat.postMessage": Limit(300, 30),
    "chat.postEphemeral": TIER_4,
    "chat.update": TIER_3,
    "conversations.info": TIER_3,
    "conversations.join": TIER_3,
    "conversations.members": TIER_4,
    "conversations.open": TIER_3,
    "usergroups.users.list": TIER_2,
    "users.info": TIER_4,
    "users.lookupByEmail": TIER_3,
    "views.open": TIER_4,
    "views.push": TIER_4,
    "views.update": TIER_4,
    "views.publish": TIER_4,
}
"""Each Web API method the fake serves, and its limit; docs/slack-limits.md has the sources."""


@dataclass(slots=True)
class TokenBucket:
    """`rate` tokens a second, holding at most `capacity`; starts full."""

    rate: float
    capacity: float
    tokens: float = math.nan
    updated: float = math.nan

    def _refill(self, now: float) -> None:
        if math.isnan(self.tokens):
            self.tokens, self.updated = self.capacity, now
        elapsed = max(0.0, now - self.updated)  # a clock set back refills nothing
        self.tokens = min(self.capacity, self.tokens + elapsed * self.rate)
        self.updated = max(self.updated, now)

    def wait(self, now: float) -> float:
        """Seconds until a token is there (0: one is there now)."""
        self._refill(now)
        return 0.0 if self.tokens >= 1 else (1 - self.tokens) / self.rate

    def take(self, now: float) -> None:
        self._refill(now)
        self.tokens -= 1


@dataclass
class RateLimiter:
    """The fake's limits and its counters; refuses nothing while `enabled` is False.

    `calls` counts every Web API call the fake answered, by method; `limited` the ones it answered with a
    rate-limit 429, by method, and `limited_channels` those of `chat.postMessage` refused for their
    channel's limit, by channel. Planned faults (`FakeSlack.fail_next`) are not counted as `limited`.
    """

    clock: Callable[[], float]
    enabled: bool = False
    speedup: float = 1.0
    limits: Mapping[str, Limit] = field(default_factory=lambda: dict(METHOD_LIMITS))
    per_channel: Limit = POST_PER_CHANNEL
    calls: Counter[str] = field(default_factory=Counter)
    limited: Counter[str] = field(default_factory=Counter)
    limited_channels: Counter[str] = field(default_factory=Counter)
    _buckets: dict[tuple[str, str], TokenBucket] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.speedup > 0 or math.isinf(self.speedup):
            msg = f"speedup must be a positive number, not {self.speedup!r}"
            raise ValueError(msg)

    def _bucket(self, kind: str, key: str, limit: Limit) -> TokenBucket:
        bucket = self._buckets.get((kind, key))
        if bucket is None:
            rate = limit.per_minute / 60 * self.speedup
            bucket = self._buckets[(kind, key)] = TokenBucket(rate=rate, capacity=max(1, limit.burst))
        return bucket

    def count(self, method: str) -> None:
        self.calls[method] += 1

    def admit(self, method: str, channel: str | None = None) -> int | None:
        """Take a token for a call of `method` (a post: also from `channel`'s bucket).

        None: the call may go ahead. A number: refused, and that is the `Retry-After` to send (whole
        seconds, at least 1; nothing is taken from any bucket).
        """
        limit = self.limits.get(method)
        if not self.enabled or limit is None:
            return None
        now = self.clock()
        buckets = [self._bucket("method", method, limit)]
        if method == "chat.postMessage" and channel:
            buckets.append(self._bucket("channel", channel, self.per_channel))
        waits = [bucket.wait(now) for bucket in buckets]
        if max(waits) <= 0:
            for bucket in buckets:
                bucket.take(now)
            return None
        self.limited[method] += 1
        if len(waits) > 1 and waits[1] > 0 and channel:
            self.limited_channels[channel] += 1
        # The waits are already in real seconds (the buckets run at the sped-up rate).
        return max(1, math.ceil(max(waits)))

    def stats(self) -> dict[str, dict[str, int]]:
        """`{method: {"calls": n, "ratelimited": m}}` for every method called, for tests and benchmarks."""
        return {
            method: {"calls": self.calls[method], "ratelimited": self.limited[method]}
            for method in sorted(self.calls | self.limited)
        }

    def reset(self) -> None:
        """Forget the counters and refill every bucket."""
        self.calls.clear()
        self.limited.clear()
        self.limited_channels.clear()
        self._buckets.clear()
