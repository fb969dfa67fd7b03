"""Intake decisions that need no Slack: poison entries, unknown fields, eviction warnings."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from bot.config import Settings
from bot.engine import Engine
from bot.runtime import BotRuntime
from bot.storage.base import COMPACT_HASH_VALUE_BYTES
from bot.storage.embedded import start_embedded_redis
from bot.storage.store import Entry, Store


class NoSlack:
    """Any Slack call here would be a bug."""


async def _engine(redis: Redis, prefix: str) -> Engine:
    store = Store(redis, prefix)
    await store.ensure_group()
    return Engine(Settings(prefix=prefix, max_deliveries=3), store, NoSlack(), consumer="c")


async def test_an_entry_delivered_too_often_is_parked_with_its_reason(redis: Redis, prefix: str) -> None:
    engine = await _engine(redis, prefix)
    entry_id = (await redis.xadd(f"{prefix}:asks", {"ask": "{}"})).decode()
    await engine.handle_entry(Entry(entry_id, {"ask": "{}"}, deliveries=4))
    [(_, fields)] = await redis.xrange(f"{prefix}:dead")
    assert fields[b"reason"] == b"failed 3 times; parked for an operator"
    assert fields[b"entry_id"].decode() == entry_id
    assert await redis.xlen(f"{prefix}:asks") == 0


async def test_an_entry_with_neither_ask_nor_cancel_is_parked(redis: Redis, prefix: str) -> None:
    engine = await _engine(redis, prefix)
    entry_id = (await redis.xadd(f"{prefix}:asks", {"hello": "world"})).decode()
    await engine.handle_entry(Entry(entry_id, {"hello": "world"}))
    [(_, fields)] = await redis.xrange(f"{prefix}:dead")
    assert b"neither an 'ask' nor a 'cancel'" in fields[b"reason"]


async def test_a_malformed_cancel_is_parked_not_dropped(redis: Redis, prefix: str) -> None:
    engine = await _engine(redis, prefix)
    entry_id = (await redis.xadd(f"{prefix}:asks", {"cancel": "[1]"})).decode()
    await engine.handle_entry(Entry(entry_id, {"cancel": "[1]"}))
    [(_, fields)] = await redis.xrange(f"{prefix}:dead")
    assert fields[b"reason"].startswith(b"invalid_envelope")


@pytest.fixture
async def own_server() -> AsyncIterator[tuple[Redis, BotRuntime]]:
    """A redis-server of the test's own (its settings are the test's to change) and a replica's
    runtime on it, not started."""
    embedded = start_embedded_redis()
    if embedded.kind == "fakeredis":
        embedded.stop()
        pytest.skip("fakeredis has no server settings to change; needs a redis-server binary")
    client = Redis.from_url(embedded.url)
    try:
        settings = Settings(
            slack_bot_token="xoxb-test", redis_url=embedded.url, slack_api_url="http://127.0.0.1:9/"
        )
        yield client, BotRuntime(settings, redis=client)
    finally:
        await client.aclose()
        embedded.stop()


@pytest.mark.redis  # a private redis-server of its own (skipped where there is none)
async def test_the_bot_warns_when_redis_may_evict_asks(
    own_server: tuple[Redis, BotRuntime], caplog: pytest.LogCaptureFixture
) -> None:
    client, runtime = own_server
    await client.config_set("maxmemory-policy", "allkeys-lru")
    with caplog.at_level(logging.WARNING, logger="bot.runtime"):
        await runtime.check_redis()
    assert "allkeys-lru" in caplog.text and "noeviction" in caplog.text
    caplog.clear()
    await client.config_set("maxmemory-policy", "noeviction")
    with caplog.at_level(logging.WARNING, logger="bot.runtime"):
        await runtime.check_redis()
    assert caplog.text == ""


def test_settings_never_show_secrets_in_their_repr() -> None:
    settings = Settings(
        slack_bot_token="xoxb-not-a-real-secret",
        slack_signing_secret="sig-secret",
        redis_url="redis://:pw-secret@localhost:6379/0",
    )
    shown = repr(settings) + str(settings) + json.dumps(settings.model_dump(mode="json"))
    for secret in ("xoxb-not-a-real-secret", "sig-secret", "pw-secret"):
        assert secret not in shown


@pytest.mark.redis  # a private redis-server of its own (skipped where there is none)
async def test_the_bot_says_once_at_start_when_redis_keeps_asks_in_the_larger_encoding(
    own_server: tuple[Redis, BotRuntime], caplog: pytest.LogCaptureFixture
) -> None:
    client, runtime = own_server
    # The embedded server starts as docs/operations.md recommends: nothing to say.
    assert await runtime.store.compact_value_limit() == COMPACT_HASH_VALUE_BYTES
    with caplog.at_level(logging.INFO, logger="bot.runtime"):
        await runtime.check_redis()
    assert "hash-max-listpack-value" not in caplog.text
    # Redis's default: an ask's hash becomes a hash table (a third more memory), said in one line.
    await client.config_set("hash-max-ziplist-value", 64)  # the older name: Redis 6.2 takes it too
    key = f"t-{uuid.uuid4().hex[:8]}"
    await client.hset(key, mapping={"state": "posted", "rec": "x" * 300})
    assert await client.object("encoding", key) == b"hashtable"
    with caplog.at_level(logging.INFO, logger="bot.runtime"):
        await runtime.check_redis()
    [line] = [r.getMessage() for r in caplog.records if "hash-max-listpack-value" in r.getMessage()]
    assert "is 64" in line and str(COMPACT_HASH_VALUE_BYTES) in line
    await client.config_set("hash-max-ziplist-value", COMPACT_HASH_VALUE_BYTES)
    await client.hset(f"{key}-2", mapping={"state": "posted", "rec": "x" * 300})
    assert await client.object("encoding", f"{key}-2") in (b"listpack", b"ziplist")
