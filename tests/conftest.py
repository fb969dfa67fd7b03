"""Shared fixtures: a real Redis (or an embedded one), unique key prefixes, and clean-up.

Redis: ``SLACK_ASK_TEST_REDIS_URL`` when set; else the server at 127.0.0.1:6379 when it answers;
else a ``redis-server`` started on a free port; else fakeredis's TCP server. The session header
says which, so a fallback never passes for the real thing. Tests never flush a database: each
uses its own key prefix and deletes only the keys under it.
"""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import redis as syncredis
from redis.asyncio import Redis

from bot.storage.embedded import EmbeddedRedis, redis_answers, start_embedded_redis

_EMBEDDED: EmbeddedRedis | None = None


def _choose_redis() -> tuple[str, str]:
    global _EMBEDDED
    url = os.environ.get("SLACK_ASK_TEST_REDIS_URL")
    if url:
        return url, "SLACK_ASK_TEST_REDIS_URL"
    if redis_answers("127.0.0.1", 6379):
        return "redis://127.0.0.1:6379/0", "the Redis server at 127.0.0.1:6379"
    _EMBEDDED = start_embedded_redis()
    return _EMBEDDED.url, f"an embedded {_EMBEDDED.kind} (no Redis answered at 127.0.0.1:6379)"


_REDIS_URL, _REDIS_KIND = _choose_redis()


def pytest_report_header() -> list[str]:
    return [f"slack-ask tests use {_REDIS_KIND}: {_REDIS_URL}"]


@functools.cache
def _module_starts_processes(path: str) -> bool:
    with open(path, encoding="utf-8") as f:
        source = f.read()
    return any(line in source for line in ("import subprocess", "create_subprocess_", "BotProc("))


def _starts_processes(item: pytest.Item) -> bool:
    return _module_starts_processes(str(item.path))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests that talk to a Redis and those of the inner loop, and start the slow ones first.

    ``redis``: the test asks for ``redis_url`` (every Redis fixture does) or says so itself; the run
    without Redis (``.ci/without-redis``) selects these, the rest never touch a Redis and run the same
    in both (docs/development.md). ``fast`` (``make test-fast``): no Redis, not slow, no browser, no
    wall-clock bound, and a module that starts no child process. Slow first: pytest-xdist hands tests
    out in this order, so the minute-long ones (chaos, topologies) run beside the short ones instead
    of forming the tail.
    """
    for item in items:
        if "redis_url" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.redis)
        if not any(item.get_closest_marker(m) for m in ("redis", "slow", "browser", "serial")) and (
            not _starts_processes(item)
        ):
            item.add_marker(pytest.mark.fast)
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable: otherwise in order


def pytest_sessionfinish() -> None:
    if _EMBEDDED is not None:
        _EMBEDDED.stop()


@pytest.fixture(scope="session")
def redis_url() -> str:
    return _REDIS_URL


REDIS_IS_FAKE = _EMBEDDED is not None and _EMBEDDED.kind == "fakeredis"
"""True when the tests run on fakeredis's TCP server (no Redis and no ``redis-server`` here)."""


@pytest.fixture
def prefix() -> str:
    """A key prefix no other test uses."""
    return f"test-{uuid.uuid4().hex[:12]}"


async def _delete_prefixed(client: Redis, prefix: str) -> None:
    keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=1000)]
    for start in range(0, len(keys), 500):
        await client.delete(*keys[start : start + 500])


@pytest.fixture
async def redis(redis_url: str, prefix: str) -> AsyncIterator[Redis]:
    """An asyncio client; every key under this test's prefix is deleted afterwards."""
    client = Redis.from_url(redis_url, socket_timeout=60)
    try:
        yield client
    finally:
        await _delete_prefixed(client, prefix)
        await client.aclose()


def _delete_prefixed_sync(client: syncredis.Redis, prefix: str) -> None:
    keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
    for start in range(0, len(keys), 500):
        client.delete(*keys[start : start + 500])


@pytest.fixture
def sync_redis(redis_url: str, prefix: str) -> Iterator[syncredis.Redis]:
    """A synchronous client; every key under this test's prefix is deleted afterwards."""
    client = syncredis.Redis.from_url(redis_url)
    try:
        yield client
    finally:
        _delete_prefixed_sync(client, prefix)
        client.close()


@pytest.fixture
def reply_to(prefix: str) -> str:
    return f"{prefix}:reply:{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def fake_slack() -> AsyncIterator[Any]:
    from bot.playground import FakeSlack
    from tests.harness import SIGNING_SECRET

    fake = FakeSlack.with_demo_workspace(signing_secret=SIGNING_SECRET)
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()


@pytest.fixture
async def harness(fake_slack: Any, redis: Redis, redis_url: str, prefix: str) -> AsyncIterator[Any]:
    """A fake Slack and one running bot replica (more with ``await harness.start_replica()``)."""
    from tests.harness import running

    # Every end-to-end test ends with the invariant check and a log without crashes (guarantee 10.5).
    async with running(fake_slack, redis, redis_url, prefix) as h:
        yield h
