"""Fencing scenarios run on one Redis server (test_fencing) and on Redis Cluster (test_cluster)."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Literal

import pytest

from bot import results
from bot.model import AskRecord
from bot.storage.keys import due_member, slot_tag
from bot.storage.store import Lease, Resolution
from tests.harness import Harness, interactive_elements

DEPLOY = {"id": "deploy", "question": "Deploy?", "options": ["Yes", "No"]}


def leased_ending(
    rec: AskRecord, lease: Lease, outcome: Literal["cancelled", "unavailable"] = "cancelled"
) -> Resolution:
    """An ending intake makes under ``lease``, without an answer: ``cancelled`` for accept's
    ``cancel`` verdict (an agent's cancel that came first), ``unavailable`` for a failed post."""
    ending = results.ended_without_answer(rec, outcome)
    prefix = results.result_prefix(
        ask_id=rec.ask_id, format="pi-question", ending=ending, responder=None, slack=None, created_at=None
    )
    return Resolution(
        rec, outcome, prefix, None, outcome, release_lease=True, replica=lease.owner, lease=lease
    )


async def stale_copy_of_an_ended_ask_is_deleted(
    harness: Harness, caplog: pytest.LogCaptureFixture, *, refused: str | None = None
) -> None:
    """The scenario of test_fencing's and test_cluster's test of it. ``refused``: once Slack is back,
    it answers the sweeper's delete with that error for good (the copy stays, and the ask is
    finished all the same, with one warning)."""
    # The chaos test's live copy of an ended ask: the replica's post is on its way when another
    # replica takes the ask over and cancels it (finished: it had no message). The post lands, is
    # refused as stale and withdrawn, and its chat.delete fails (Slack down for the whole delivery
    # window; a crash right after the mark is the same). Nothing else would ever delete that copy:
    # the withdraw makes the ask unfinished again with its clean-up timer, and the sweeper deletes it.
    harness.fake.method_latency["chat.postMessage"] = 0.5
    env = harness.envelope(DEPLOY)
    await harness.send(env)
    store = harness.replicas[0].store
    assert store is not None
    tag = slot_tag(env["reply_to"])
    key = store.ask_keys(tag, env["ask_id"]).ask
    member = due_member(env["ask_id"], tag)

    while await harness.redis.hget(key, "state") != b"accepted":  # noqa: ASYNC110 - the replica's accept
        await asyncio.sleep(0.01)
    await harness.redis.hset(key, "lease_until", 1)
    rec = AskRecord.model_validate(json.loads(await harness.redis.hget(key, "rec") or b"{}"))
    entry = (await harness.redis.hget(key, "entry") or b"").decode()
    taken = await store.accept(
        rec, consumer="other", lease_ms=60_000, pending_ttl_ms=120_000, entry_id=entry, schedule_at_ms=None
    )
    assert taken.verdict == "post"
    other = Lease("other", taken.token, time.monotonic() + 60)
    assert (await store.resolve(leased_ending(rec, other))).verdict == "won"
    await store.finalize(tag, env["ask_id"], 0)
    assert await harness.redis.hget(key, "finalized") == b"1"
    assert await harness.redis.zscore(store.keys.due, member) is None  # finished: no timer left
    harness.fake.fail_next("chat.delete", status=503, times=10_000)

    async def gave_up(logger: str) -> None:
        def given_up() -> bool:
            return any(
                r.name == logger and "could not delete the withdrawn copy" in r.getMessage()
                for r in caplog.records
            )

        async with asyncio.timeout(10):
            while not given_up():  # noqa: ASYNC110 - a delete retried through its window (Slack down)
                await asyncio.sleep(0.02)

    with caplog.at_level(logging.WARNING):
        await gave_up("bot.engine.room")  # the replica's own delete, right after the mark
        [copy] = [m for m in harness.fake.messages("C0DEPLOY") if not m.thread_ts]
        assert interactive_elements(copy.blocks)  # a live button of an ended ask
        assert await harness.redis.hget(key, "finalized") == b"0"
        now = await store.server_time_ms()
        at = await harness.redis.zscore(store.keys.due, member)
        assert at is not None and now < at <= now + store.finalize_after_ms
        await harness.redis.zadd(store.keys.due, {member: 0})  # its time has come
        await gave_up("bot.engine.endings")  # the sweeper's, while Slack is still down: not done
        assert await harness.redis.hget(key, "finalized") == b"0"
        assert await harness.redis.zscore(store.keys.due, member) is not None  # it comes back
    harness.fake.clear_faults()
    if refused is not None:
        harness.fake.fail_next("chat.delete", error=refused, times=10_000)
    else:
        await harness.fake.wait_for(  # by the sweeper again, once the timer lease it held is over
            lambda: not [m for m in harness.fake.messages("C0DEPLOY") if not m.thread_ts] or None,
            timeout=10,
            what="the copy deleted",
        )
        deletes = [c for c in harness.fake.find_calls("chat.delete") if c.status == 200]
        assert [c.params["ts"] for c in deletes] == [copy.ts]

    async def finished() -> bool:  # on Cluster the timer goes in a round trip after the mark
        done = await harness.redis.hget(key, "finalized") == b"1"
        return done and await harness.redis.zscore(store.keys.due, member) is None

    with caplog.at_level(logging.WARNING):
        async with asyncio.timeout(10):
            while not await finished():  # noqa: ASYNC110 - the sweeper's finalize
                await asyncio.sleep(0.02)
    if refused is not None:
        assert [m.ts for m in harness.fake.messages("C0DEPLOY") if not m.thread_ts] == [copy.ts]
        stays = [r.getMessage() for r in caplog.records if "stays in Slack" in r.getMessage()]
        assert len(stays) == 1, stays  # one line, not one per sweep
        assert stays[0].startswith(f"the withdrawn copy C0DEPLOY/{copy.ts} stays in Slack: ")
        assert refused in stays[0]
    assert (await harness.result(env["reply_to"]))["outcome"] == "cancelled"
    assert await harness.no_more_results(env["reply_to"])
