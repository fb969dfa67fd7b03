"""Leases, reclaim, poison limits, cancels in a race, and messages the bot learns of around crashes and
Redis blips (issue 11: items 2, 5, 6, 8). Real Redis, the fake Slack over HTTP, real replicas."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from redis.asyncio import Redis

from bot.asks import build_record
from bot.errors import ConfigError
from bot.model import AskRecord
from bot.playground import FakeSlack, Message
from bot.storage.connection import SENTINEL_PORT, connect, sentinel_hosts
from bot.storage.keys import GROUP, Keys, due_member, slot_tag
from bot.storage.store import Store
from contract.envelopes import parse_ask_envelope
from tests.harness import SIGNING_SECRET, Harness, interactive_elements
from tests.redis_procs import TcpProxy

DEPLOY = {"id": "deploy", "question": "Deploy?", "options": ["Yes", "No"]}


@pytest.fixture
async def idle(fake_slack: FakeSlack, redis: Redis, redis_url: str, prefix: str) -> AsyncIterator[Harness]:
    """A harness with no replica running yet: the test sets the scene first."""
    h = Harness(fake=fake_slack, redis=redis, redis_url=redis_url, prefix=prefix)
    try:
        yield h
        await h.verify()  # the invariant check and a log without crashes, as for every harness
    finally:
        await h.stop()


async def _held_by_a_ghost(h: Harness, env: dict[str, Any], *, lease_ms: int, deliveries: int = 1) -> str:
    """The scene a replica that died mid-delivery leaves: the entry pending to consumer ``ghost``
    (delivered ``deliveries`` times), and the ask accepted by it with a lease of ``lease_ms``."""
    store = Store(h.redis, h.prefix)
    await store.load_scripts()
    await store.ensure_group()
    entry = await h.send(env)
    await store.read("ghost", count=10, block_ms=None)
    if deliveries > 1:
        await h.redis.xclaim(
            f"{h.prefix}:asks", GROUP, "ghost", min_idle_time=0, message_ids=[entry], retrycount=deliveries
        )
    tag = slot_tag(env["reply_to"])
    await store.claim_index(env["ask_id"], tag, 86_400_000)
    rec = build_record(
        parse_ask_envelope(json.dumps(env)),
        tag=tag,
        created_ms=int(entry.split("-")[0]),
        settings=h.settings(),
    )
    assert isinstance(rec, AskRecord)
    verdict = await store.accept(
        rec,
        consumer="ghost",
        lease_ms=lease_ms,
        pending_ttl_ms=86_400_000,
        entry_id=entry,
        schedule_at_ms=rec.deadline_ms,
    )
    assert verdict.verdict == "post"
    return entry


async def test_reclaims_that_find_a_live_lease_do_not_count_toward_the_poison_limit(idle: Harness) -> None:
    env = idle.envelope(DEPLOY)
    # The lease outlives many reclaim rounds (reclaim every 0.2 s, idle 0.4 s, poison limit 3).
    await _held_by_a_ghost(idle, env, lease_ms=4_000)
    await idle.start_replica(max_deliveries=3)
    [message] = await idle.posted(timeout=15)
    assert await idle.redis.xlen(f"{idle.prefix}:dead") == 0
    await idle.fake.click("U0BOB", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    result = await idle.result(env["reply_to"])
    assert result["outcome"] == "answered"


async def test_an_accepted_ask_past_its_deadline_times_out_while_its_lease_holds(idle: Harness) -> None:
    env = idle.envelope(DEPLOY, timeout_ms=1_000)
    await _held_by_a_ghost(idle, env, lease_ms=60_000)
    await idle.start_replica()
    result = await idle.result(env["reply_to"], timeout=8)
    assert result["outcome"] == "timeout"
    assert await idle.no_more_results(env["reply_to"])


async def test_an_ask_whose_entry_is_parked_ends_unavailable_with_the_reason(idle: Harness) -> None:
    env = idle.envelope(DEPLOY)
    await _held_by_a_ghost(idle, env, lease_ms=1, deliveries=3)
    await idle.start_replica(max_deliveries=3)
    result = await idle.result(env["reply_to"], timeout=10)
    assert result["outcome"] == "unavailable"
    assert result["error"]["code"] == "delivery_failed"
    assert "failed 3 times" in result["error"]["message"]
    [dead] = await idle.redis.xrange(f"{idle.prefix}:dead")
    assert b"parked" in dead[1][b"reason"]


async def test_forty_back_to_back_ask_and_cancel_pairs_are_all_cancelled(harness: Harness) -> None:
    envs = [harness.envelope(DEPLOY) for _ in range(40)]
    async with harness.redis.pipeline(transaction=False) as pipe:
        for env in envs:
            pipe.xadd(f"{harness.prefix}:asks", {"ask": json.dumps(env)})
            cancel = {"v": 1, "ask_id": env["ask_id"], "reply_to": env["reply_to"], "reason": "never mind"}
            pipe.xadd(f"{harness.prefix}:asks", {"cancel": json.dumps(cancel)})
        await pipe.execute()
    outcomes = [(await harness.result(env["reply_to"], timeout=20))["outcome"] for env in envs]
    assert outcomes == ["cancelled"] * 40

    def settled() -> bool:
        return all(not interactive_elements(m.blocks) for m in harness.fake.messages("C0DEPLOY"))

    await harness.fake.wait_for(settled, timeout=20, what="every posted copy redrawn as cancelled")
    # 40 clean-ups, some waiting for a delivery lease to end: give a loaded machine time to settle.
    await harness.verify(timeout=30)


async def test_a_cancel_naming_another_reply_to_changes_nothing(harness: Harness) -> None:
    env = harness.envelope(DEPLOY)
    await harness.send(env)
    [message] = await harness.posted()
    other = {"v": 1, "ask_id": env["ask_id"], "reply_to": f"{harness.prefix}:reply:intruder"}
    await harness.send(other, "cancel")

    async def handled() -> bool:
        return await harness.redis.xlen(f"{harness.prefix}:asks") == 0

    await _until(handled, timeout=10, what="the foreign cancel handled")
    assert await harness.no_more_results(env["reply_to"])
    await harness.send({**other, "reply_to": env["reply_to"]}, "cancel")  # the owner's, afterwards
    result = await harness.result(env["reply_to"])
    assert result["outcome"] == "cancelled"
    assert await harness.redis.llen(other["reply_to"]) == 0
    await harness.ended("C0DEPLOY", message.ts)


async def test_an_early_cancel_from_another_reply_to_sharing_the_hash_tag_changes_nothing(
    harness: Harness,
) -> None:
    # The protocol recommends P:reply:{agent-7}:<ask_id>: one agent's lists share one hash tag, and
    # so one tombstone key per ask_id. Protocol section 8: a cancel naming another reply_to changes
    # nothing, also when it comes before the ask.
    agent = f"agent-7-{uuid.uuid4().hex[:6]}"
    mine, other = f"{harness.prefix}:reply:{{{agent}}}:a", f"{harness.prefix}:reply:{{{agent}}}:b"
    env = harness.envelope(DEPLOY, reply_to=mine)
    await harness.send({"v": 1, "ask_id": env["ask_id"], "reply_to": other, "reason": "not yours"}, "cancel")
    await harness.send(env)
    [message] = await harness.posted()
    assert interactive_elements(message.blocks)
    assert await harness.no_more_results(mine)
    await harness.send({"v": 1, "ask_id": env["ask_id"], "reply_to": mine, "reason": "mine"}, "cancel")
    assert (await harness.result(mine))["outcome"] == "cancelled"
    assert await harness.redis.llen(other) == 0
    await harness.ended("C0DEPLOY", message.ts)


async def _outage_after_the_post(redis: Redis, redis_url: str, prefix: str, *, outage_s: float) -> None:
    """Redis goes away for ``outage_s`` the moment Slack takes the post; afterwards the ask has exactly
    one live message, it is in the ask's record, and answering it ends it. The message is never
    deleted: withdrawing it needs its withdrawal marked in Redis first, which is away too."""
    port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    proxy = TcpProxy(port)
    await proxy.start()
    cut_once: list[float] = []

    @web.middleware
    async def cut_on_post(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path.endswith("/chat.postMessage") and not cut_once:
            proxy.cut()  # the post is taken; recording it fails for a while
            cut_once.append(asyncio.get_running_loop().time())
        return await handler(request)

    fake = FakeSlack.with_demo_workspace(signing_secret=SIGNING_SECRET)
    fake.app.middlewares.append(cut_on_post)
    await fake.start()
    h = Harness(fake=fake, redis=redis, redis_url=proxy.url, prefix=prefix)
    try:
        # An intake lease (2 x the delivery window) well past the outage: the record is retried
        # throughout, by the replica that posted.
        await h.start_replica(delivery_window_ms=max(1500, int(outage_s * 2000)))
        env = h.envelope(DEPLOY)
        key = f"{prefix}:{{{slot_tag(env['reply_to'])}}}:ask:{env['ask_id']}"
        await h.send(env)
        await h.posted(timeout=10)
        await _after(outage_s)
        proxy.restore()

        async def recorded() -> bool:
            raw = await redis.hget(key, "msgs")
            live = [m.ts for m in fake.messages("C0DEPLOY") if not m.thread_ts]
            return raw is not None and len(live) == 1 and live[0] in raw.decode()

        await _until(recorded, timeout=15, what="one live message, recorded in the ask")
        [message] = [m for m in fake.messages("C0DEPLOY") if not m.thread_ts]
        await fake.click("U0BOB", "C0DEPLOY", message.ts, "slack_ask:choose:0")
        assert (await h.result(env["reply_to"]))["outcome"] == "answered"
        await h.ended("C0DEPLOY", message.ts)
        assert len([m for m in fake.messages("C0DEPLOY") if not m.thread_ts]) == 1
        deletes = len(fake.find_calls("chat.delete"))
    finally:
        await h.stop()
        await proxy.stop()
        await fake.stop()
    assert deletes == 0


async def test_a_redis_blip_between_the_post_and_its_record_keeps_the_message_in_the_ask(
    redis: Redis, redis_url: str, prefix: str
) -> None:
    await _outage_after_the_post(redis, redis_url, prefix, outage_s=0.3)


async def test_a_long_redis_outage_after_a_post_keeps_the_message_and_records_it_once_back(
    redis: Redis, redis_url: str, prefix: str
) -> None:
    # Longer than the in-place retry (1 s), after which the bot would withdraw the message if Redis
    # took the withdrawal's mark: it does not, so nothing is deleted and the record lands later.
    await _outage_after_the_post(redis, redis_url, prefix, outage_s=2.5)


async def test_an_answer_on_a_message_the_record_lacks_redraws_that_message(harness: Harness) -> None:
    env = harness.envelope(DEPLOY)
    await harness.send(env)
    [recorded] = await harness.posted()
    # A copy the record lacks, as a crash between post and record leaves behind.
    stray = await _post_as_the_bot(harness.fake, "C0DEPLOY", recorded.blocks)
    await harness.fake.click("U0BOB", "C0DEPLOY", stray, "slack_ask:choose:1")
    result = await harness.result(env["reply_to"])
    assert result["outcome"] == "answered"
    await harness.ended("C0DEPLOY", stray)
    await harness.ended("C0DEPLOY", recorded.ts)


@pytest.mark.parametrize("reason", [None, "build 1235 replaces it"])
async def test_a_post_that_lands_after_a_cancel_is_redrawn_until_done_with_its_reason(
    harness: Harness, reason: str | None
) -> None:
    harness.fake.latency = 1.0  # every Slack call takes a second: the post is in flight for that long
    # Every redraw fails for a while: the message must still end up redrawn (the one that lands is
    # the sweeper's, from the record alone, so the cancel's reason must be in the record).
    harness.fake.fail_next("chat.update", status=500, times=1_000)
    env = harness.envelope(DEPLOY)
    key = f"{harness.prefix}:{{{slot_tag(env['reply_to'])}}}:ask:{env['ask_id']}"
    await harness.send(env)

    async def accepted() -> bool:
        return await harness.redis.hget(key, "state") == b"accepted"

    await _until(accepted, timeout=10, what="the ask accepted (its post now in flight)")
    cancel = {"v": 1, "ask_id": env["ask_id"], "reply_to": env["reply_to"]}
    await harness.send({**cancel, "reason": reason} if reason else cancel, "cancel")
    assert (await harness.result(env["reply_to"]))["outcome"] == "cancelled"
    assert harness.fake.find_calls("chat.postMessage") == []  # ended before the post landed
    [message] = await harness.posted()
    await harness.fake.wait_for(lambda: harness.fake.find_calls("chat.update"), timeout=10)
    await _after(2.5)  # longer than the delivery window (1.5 s): that replica gave up on this update
    harness.fake.latency = 0.0
    harness.fake.clear_faults()
    ended = await harness.ended("C0DEPLOY", message.ts, timeout=25)
    if reason is not None:
        assert f"Withdrawn by the requester: {reason}" in json.dumps(ended.blocks)
        loaded = await Store(harness.redis, harness.prefix).load(slot_tag(env["reply_to"]), env["ask_id"])
        assert loaded is not None and loaded.result is not None and loaded.result.reason == reason


async def test_an_ask_id_reused_after_retention_with_another_reply_to_lives_in_the_new_slot(
    harness: Harness,
) -> None:
    first = harness.envelope(DEPLOY, ask_id=f"reused-{uuid.uuid4().hex[:6]}")
    await harness.send({**first, "timeout_ms": 1})
    assert (await harness.result(first["reply_to"]))["outcome"] == "timeout"
    # An ask read within its one millisecond is posted, then timed out: let its ending finish (the
    # message redrawn, the channel set left), as it long has once retention is over.
    old_tag = slot_tag(first["reply_to"])
    channel_set, member = Keys(harness.prefix).channel("C0DEPLOY"), due_member(first["ask_id"], old_tag)

    async def finished() -> bool:
        return not await harness.redis.sismember(channel_set, member)

    await _until(finished, timeout=10, what="the first ask's ending to finish")
    earlier = {m.ts for m in harness.fake.messages("C0DEPLOY")}
    # Retention over: the ask's keys are gone, its id index (which lives longer) is not.
    keys = [k async for k in harness.redis.scan_iter(match=f"{harness.prefix}:{{{old_tag}}}:*")]
    await harness.redis.delete(*keys)
    second = {**first, "reply_to": f"{harness.prefix}:reply:other-{uuid.uuid4().hex[:6]}"}
    await harness.send(second)
    message = await harness.fake.wait_for(
        lambda: next(
            (m for m in harness.fake.messages("C0DEPLOY") if m.ts not in earlier and not m.thread_ts), None
        ),
        timeout=10,
        what="the second ask's message",
    )
    store = Store(harness.redis, harness.prefix)
    assert await store.lookup_tag(first["ask_id"]) == slot_tag(second["reply_to"])
    await harness.fake.click("U0BOB", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    assert (await harness.result(second["reply_to"]))["outcome"] == "answered"


def test_a_sentinel_url_without_a_port_uses_26379() -> None:
    assert sentinel_hosts("h1,h2:26380,[::1]") == [
        ("h1", SENTINEL_PORT),
        ("h2", 26380),
        ("::1", SENTINEL_PORT),
    ]
    connect("redis+sentinel://localhost/mymaster")  # no IndexError


def test_a_sentinel_url_with_a_bad_port_names_it() -> None:
    with pytest.raises(ConfigError, match="'x1'"):
        connect("redis+sentinel://h:x1/mymaster")


async def test_a_half_open_connection_does_not_block_intake_forever(
    fake_slack: FakeSlack, redis: Redis, redis_url: str, prefix: str
) -> None:
    port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    proxy = TcpProxy(port)
    await proxy.start()
    h = Harness(fake=fake_slack, redis=redis, redis_url=proxy.url, prefix=prefix)
    try:
        # Reclaim far away, so that only intake's own read can bring the second ask in.
        await h.start_replica(reclaim_idle_ms=120_000)
        env = h.envelope(DEPLOY)
        await h.send(env)
        await h.posted()
        proxy.freeze()  # every open link goes silent, as when a host vanishes without a FIN
        second = h.envelope(DEPLOY)
        await h.send(second)
        # Intake read the second ask (and tried to post it) despite the silent links.
        await fake_slack.wait_for(
            lambda: len(fake_slack.find_calls("chat.postMessage")) >= 2, timeout=40, what="the second post"
        )
    finally:
        await h.stop()
        await proxy.stop()


async def _post_as_the_bot(
    fake: FakeSlack, channel: str, blocks: list[dict[str, Any]], *, thread_ts: str | None = None
) -> str:
    import aiohttp

    params: dict[str, Any] = {"channel": channel, "text": "copy", "blocks": blocks}
    if thread_ts is not None:
        params["thread_ts"] = thread_ts
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            fake.api_url + "chat.postMessage",
            headers={"Authorization": f"Bearer {fake.bot_token}"},
            json=params,
        ) as response,
    ):
        body = await response.json()
    assert body["ok"], body
    return str(body["ts"])


async def _after(seconds: float) -> None:
    """Let a fault last ``seconds`` (the fault's duration, not a synchronization)."""
    await asyncio.sleep(seconds)


async def _until(check: Any, *, timeout: float, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await check():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.05)


async def test_waiting_out_a_long_rate_limit_is_not_a_failed_delivery(idle: Harness) -> None:
    # Each Retry-After outlasts the intake lease (2 x 1.5 s), so each delivery gives up before
    # posting; with a poison limit of 1, counting those would park the ask on the second round.
    idle.fake.fail_next("chat.postMessage", retry_after=4, times=2)
    await idle.start_replica(max_deliveries=1)
    env = idle.envelope(DEPLOY)
    await idle.send(env)
    [message] = await idle.posted(timeout=30)
    assert await idle.redis.xlen(f"{idle.prefix}:dead") == 0
    await idle.fake.click("U0BOB", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    assert (await idle.result(env["reply_to"]))["outcome"] == "answered"


async def test_an_unrecorded_copy_of_an_ask_nobody_clicks_is_learned_and_redrawn(harness: Harness) -> None:
    # What a replica dying between Slack's answer and the record leaves: a live copy the record lacks.
    env = harness.envelope(DEPLOY)
    await harness.send(env)
    [recorded] = await harness.posted()
    stray = await _post_as_the_bot(harness.fake, "C0DEPLOY", recorded.blocks)
    await harness.send({"v": 1, "ask_id": env["ask_id"], "reply_to": env["reply_to"]}, "cancel")
    assert (await harness.result(env["reply_to"]))["outcome"] == "cancelled"
    await harness.ended("C0DEPLOY", recorded.ts)
    await harness.ended("C0DEPLOY", stray, timeout=15)


async def test_an_unrecorded_copy_in_a_thread_is_learned_and_redrawn(harness: Harness) -> None:
    # A thread-routed ask: the copy a crash between post and record leaves is a thread reply too.
    parent = await harness.fake.say("U0ALICE", "C0DEPLOY", "Which build goes out?")
    env = harness.envelope(DEPLOY, route={"channel": "C0DEPLOY", "thread_ts": parent.ts})
    await harness.send(env)
    recorded = await harness.fake.wait_for(
        lambda: next((m for m in harness.fake.thread("C0DEPLOY", parent.ts) if m.bot_id), None),
        what="the ask in the thread",
    )
    stray = await _post_as_the_bot(harness.fake, "C0DEPLOY", recorded.blocks, thread_ts=parent.ts)
    await harness.send({"v": 1, "ask_id": env["ask_id"], "reply_to": env["reply_to"]}, "cancel")
    assert (await harness.result(env["reply_to"]))["outcome"] == "cancelled"
    await harness.ended("C0DEPLOY", recorded.ts)
    await harness.ended("C0DEPLOY", stray, timeout=15)


async def test_a_vote_on_a_copy_the_record_lacks_records_it_and_redraws_it(harness: Harness) -> None:
    # In a public channel the bot has not joined Slack sends it no events, so nothing but the vote
    # itself can bring the copy into the record.
    env = harness.envelope(DEPLOY, approval={"count": 2}, route={"channel": "C0RANDOM"})
    await harness.send(env)
    [recorded] = await harness.posted("C0RANDOM")
    stray = await _post_as_the_bot(harness.fake, "C0RANDOM", recorded.blocks)
    await harness.fake.click("U0ALICE", "C0RANDOM", stray, "slack_ask:choose:0")
    await harness.fake.wait_for(
        lambda: "1 of 2" in json.dumps(harness.fake.state.find_message("C0RANDOM", stray).blocks),  # type: ignore[union-attr]
        what="the tally on the copy voted on",
    )
    await harness.fake.click("U0BOB", "C0RANDOM", stray, "slack_ask:choose:0")
    result = await harness.result(env["reply_to"])
    assert result["outcome"] == "answered"
    assert result["slack"]["ts"] == stray
    await harness.ended("C0RANDOM", recorded.ts)
    await harness.ended("C0RANDOM", stray)


async def test_another_apps_copy_of_an_ask_is_never_learned_so_its_delete_dismisses_nothing(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="bot.engine.actions")
    env = harness.envelope(DEPLOY)
    await harness.send(env)
    [message] = await harness.posted()
    # Another app in the channel posts a message whose buttons carry the ask's reference.
    ws = harness.fake.state
    copy = Message(
        channel="C0DEPLOY",
        ts=ws.next_ts(),
        text="copy",
        user="U0DEPLOYBOT",
        team=ws.team_id,
        blocks=json.loads(json.dumps(message.blocks)),
        bot_id="B0DEPLOYBOT",
        app_id="A0DEPLOYBOT",
    )
    ws.messages["C0DEPLOY"].append(copy)
    ws.touch()
    await harness.fake.send_event(
        {**copy.to_slack(), "channel": "C0DEPLOY", "event_ts": copy.ts, "channel_type": "channel"}
    )
    key = f"{harness.prefix}:{{{slot_tag(env['reply_to'])}}}:ask:{env['ask_id']}"

    async def decided() -> bool:
        refused = any(f"{copy.ts} carries ask" in r.getMessage() for r in caplog.records)
        return refused or copy.ts in str(await harness.redis.hget(key, "msgs"))

    await _until(decided, timeout=10, what="the bot to learn the copy or refuse it")
    assert copy.ts not in str(await harness.redis.hget(key, "msgs")), "another app's copy was learned"
    # That app deletes its copy: the ask lives on.
    await harness.fake.delete_message("C0DEPLOY", copy.ts)
    assert await harness.no_more_results(env["reply_to"], wait=1.0), "dismissed by another app's delete"
    await harness.fake.click("U0BOB", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    assert (await harness.result(env["reply_to"]))["outcome"] == "answered"
