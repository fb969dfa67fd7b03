"""Nobody is left unanswered (issue 24): the replica's Redis traffic goes through a TcpProxy that
blackholes it (holds every byte, both ways, and delivers it all at the heal) or resets it (RST,
refused connects). Every click, form open and submission is still answered within Slack's 3 s (the
fake gives up after ``ack_timeout``, 3 s); when the bot cannot record an act the person is told so
privately (the click's response_url, the form's own error) and can try again; an act the person was
told did not count never counts later, and one whose answer Redis held is confirmed once it answers."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from redis.asyncio import Redis

from bot import render
from bot.engine.actions import LEARN_AFTER_S
from bot.model import PostedMessage
from bot.playground import FakeSlack, payloads
from bot.storage.buckets import Buckets
from bot.storage.keys import Keys, due_member, slot_tag
from bot.storage.records import Lease
from bot.storage.scripts import script_source
from bot.storage.store import Store
from tests.harness import Harness, interactive_elements
from tests.redis_procs import TcpProxy
from tests.test_reliability import _post_as_the_bot

DEPLOY = {"id": "deploy", "question": "Deploy build 42?", "options": ["Yes", "No"]}
FEATURES: dict[str, Any] = {
    "questions": [
        {"id": "features", "question": "Which features?", "options": ["Logging", "Metrics"], "multi": True},
        {"id": "db", "question": "Database?", "options": ["Postgres", "MySQL"]},
    ]
}
ANSWERS = {"answer:0": ["Metrics"], "answer:1": "MySQL"}
ACTS = "bot.engine.act"  # the names of bot.engine.acts and bot.engine.actions start so
UNRECORDED = render.render_refusal("unrecorded")
UNCONFIRMED = render.render_refusal("unconfirmed")
CONFIRMED = render.render_refusal("confirmed")


def _sha(name: str) -> bytes:
    return hashlib.sha1(script_source(name).encode()).hexdigest().encode()


@pytest.fixture
async def cut_off(
    fake_slack: FakeSlack, redis: Redis, redis_url: str, prefix: str
) -> AsyncIterator[tuple[Harness, TcpProxy]]:
    """One replica whose Redis is behind a TcpProxy (the test's own client goes straight to Redis)."""
    proxy = TcpProxy(int(redis_url.rsplit(":", 1)[1].split("/")[0]))
    await proxy.start()
    h = Harness(fake=fake_slack, redis=redis, redis_url=proxy.url, prefix=prefix)
    try:
        await h.start_replica()
        yield h, proxy
        await proxy.heal()
        await h.verify()
    finally:
        await h.stop()
        await proxy.stop()


async def _cut(proxy: TcpProxy, fault: str) -> None:
    if fault == "blackhole":
        proxy.blackhole()
    else:
        await proxy.reset()


def _told(fake: FakeSlack, user: str) -> list[str]:
    """What the bot told ``user`` through response_urls, in order."""
    return [e.text for e in fake.ephemerals_for(user) if e.via == "response_url"]


async def _told_exactly(fake: FakeSlack, user: str, texts: list[str]) -> None:
    try:
        await fake.wait_for(lambda: _told(fake, user) == texts, timeout=10, what=f"{user} to be told {texts}")
    except TimeoutError as exc:
        # What was told instead (nothing, something else, or the refusal twice) says which bug it is.
        raise TimeoutError(f"{exc}; told instead: {_told(fake, user)}") from exc


async def _posted(h: Harness, env: dict[str, Any]) -> Any:
    """The ask's message, once the bot has recorded it (so no cut falls into that record)."""
    [message] = await h.posted()
    key = f"{h.prefix}:{{{env['reply_to']}}}:ask:{env['ask_id']}"
    await _until(lambda: _has(h.redis, key, message.ts), what="the message recorded")

    async def handled() -> bool:  # the replica has read the record's answer too (else it withdraws)
        return not any(runtime.intake._in_flight for runtime in h.replicas)

    await _until(handled, what="the delivery finished")
    return message


async def _has(redis: Redis, key: str, ts: str) -> bool:
    return ts in ((await redis.hget(key, "msgs")) or b"").decode()


async def _until(check: Callable[[], Awaitable[bool]], *, what: str, timeout: float = 10) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await check():
        assert loop.time() < deadline, f"timed out after {timeout}s waiting for {what}"
        await asyncio.sleep(0.05)


async def _audited(redis: Redis, h: Harness, env: dict[str, Any], event: str) -> None:
    """Wait until the ask's audit trail has ``event``; its result appearing instead fails at once."""
    reads = Store(redis, h.prefix)

    async def seen() -> bool:
        events = [e.event for e in await reads.read_audit(slot_tag(env["reply_to"]), env["ask_id"])]
        assert not await redis.llen(env["reply_to"]), f"the ask ended instead: {events}"
        return event in events

    await _until(seen, what=f"{event} in the audit")


@pytest.mark.parametrize("fault", ["blackhole", "reset"])
async def test_a_submission_redis_cannot_take_gets_an_error_in_the_form_within_the_ack(
    cut_off: tuple[Harness, TcpProxy], fault: str, caplog: pytest.LogCaptureFixture
) -> None:
    h, proxy = cut_off
    env = h.envelope(FEATURES)
    await h.send(env)
    message = await _posted(h, env)
    await h.fake.click("U0BOB", "C0DEPLOY", message.ts, "slack_ask:open")
    [view] = await h.fake.wait_for(lambda: h.fake.open_views("U0BOB"), what="the form")
    await _cut(proxy, fault)
    with caplog.at_level(logging.WARNING, logger="bot.engine"):
        response = await h.fake.fill_and_submit("U0BOB", view.id, ANSWERS)
    assert response.status == 200, response.error or response.text
    assert response.json == {"response_action": "errors", "errors": {"answer:0": UNRECORDED}}
    assert [v.id for v in h.fake.open_views("U0BOB")] == [view.id]  # still open, as filled
    said = [r.getMessage() for r in caplog.records if r.name.startswith(ACTS)]
    assert len(said) == 1 and "the submission of U0BOB" in said[0] and "not recorded" in said[0], said
    await proxy.heal()
    response = await h.fake.fill_and_submit("U0BOB", view.id, ANSWERS)
    assert response.status == 200 and not response.json
    result = await h.result(env["reply_to"])
    assert result["outcome"] == "answered" and result["answers"][1]["selected"] == [1]
    await h.ended("C0DEPLOY", message.ts)


@pytest.mark.parametrize("fault", ["blackhole", "reset"])
@pytest.mark.parametrize("button", ["choose", "open"])
async def test_a_click_redis_cannot_take_is_told_so_and_counts_when_made_again(
    cut_off: tuple[Harness, TcpProxy], fault: str, button: str, caplog: pytest.LogCaptureFixture
) -> None:
    h, proxy = cut_off
    env = h.envelope(DEPLOY if button == "choose" else FEATURES)
    await h.send(env)
    message = await _posted(h, env)
    action = "slack_ask:choose:1" if button == "choose" else "slack_ask:open"
    expected = UNRECORDED if button == "choose" else render.render_refusal("unopened")
    await _cut(proxy, fault)
    with caplog.at_level(logging.WARNING, logger="bot.engine"):
        response = await h.fake.click("U0ALICE", "C0DEPLOY", message.ts, action)
        assert response.status == 200, response.error
        await _told_exactly(h.fake, "U0ALICE", [expected])
    said = [r.getMessage() for r in caplog.records if r.name.startswith(ACTS)]
    assert len(said) == 1 and "of U0ALICE" in said[0] and "not recorded" in said[0], said
    assert not h.fake.find_calls("views.open")  # no form opened on a trigger_id gone stale
    await proxy.heal()
    await h.fake.click("U0ALICE", "C0DEPLOY", message.ts, action)
    if button == "choose":
        result = await h.result(env["reply_to"])
        assert result["outcome"] == "answered" and result["answers"][0]["selected"] == [1]
        await h.ended("C0DEPLOY", message.ts)
    else:
        [view] = await h.fake.wait_for(lambda: h.fake.open_views("U0ALICE"), what="the form")
        await h.fake.fill_and_submit("U0ALICE", view.id, ANSWERS)
        assert (await h.result(env["reply_to"]))["outcome"] == "answered"
    assert _told(h.fake, "U0ALICE") == [expected]


@pytest.mark.parametrize("approval", [False, True], ids=["answer", "vote"])
async def test_a_write_held_past_its_deadline_never_counts_and_its_person_is_told(
    cut_off: tuple[Harness, TcpProxy], redis: Redis, approval: bool
) -> None:
    """The click's look goes through; its write is held by the blackhole until after the bot gave up
    on it, then delivered: Redis refuses it, and the person hears it did not count."""
    h, proxy = cut_off
    env = h.envelope(DEPLOY, **({"approval": {"count": 2}} if approval else {}))
    await h.send(env)
    message = await _posted(h, env)
    proxy.blackhole(when=_sha("vote" if approval else "resolve"))
    response = await h.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    assert response.status == 200, response.error
    await _told_exactly(h.fake, "U0ALICE", [UNCONFIRMED])
    assert proxy.blackholed
    await proxy.heal()  # the write reaches Redis now, after its deadline
    await _told_exactly(h.fake, "U0ALICE", [UNCONFIRMED, UNRECORDED])
    await _audited(redis, h, env, "refused_unconfirmed")
    assert await h.no_more_results(env["reply_to"], wait=0.2)
    record = await redis.hgetall(f"{h.prefix}:{{{env['reply_to']}}}:ask:{env['ask_id']}")
    assert record[b"state"] == b"posted" and b"votes" not in record
    stored = h.fake.state.find_message("C0DEPLOY", message.ts)
    assert stored is not None and interactive_elements(stored.blocks)
    # Told it did not count, the person tries again; that one counts.
    await h.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    if approval:
        await h.fake.wait_for(
            lambda: "1 of 2" in str(h.fake.state.find_message("C0DEPLOY", message.ts).blocks),  # type: ignore[union-attr]
            what="the tally",
        )
        await h.fake.click("U0BOB", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    result = await h.result(env["reply_to"])
    assert result["outcome"] == "answered" and result["answers"][0]["selected"] == [0]
    await h.ended("C0DEPLOY", message.ts)
    assert _told(h.fake, "U0ALICE") == [UNCONFIRMED, UNRECORDED]


async def test_a_write_whose_answer_is_held_is_confirmed_once_redis_answers(
    cut_off: tuple[Harness, TcpProxy],
) -> None:
    """The write runs; its answer is held until after the bot gave up waiting: the person is told it
    is being checked, then that it counted (never that it failed), and the message is ended."""
    h, proxy = cut_off
    env = h.envelope(DEPLOY)
    await h.send(env)
    message = await _posted(h, env)
    proxy.blackhole(when=b"\r\n$3\r\nwon\r\n")  # resolve.lua's answer
    response = await h.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:1")
    assert response.status == 200, response.error
    await _told_exactly(h.fake, "U0ALICE", [UNCONFIRMED])
    result = await h.result(env["reply_to"])  # the test's own client is not cut off
    assert result["outcome"] == "answered" and result["responder"]["id"] == "U0ALICE"
    await proxy.heal()
    await _told_exactly(h.fake, "U0ALICE", [UNCONFIRMED, CONFIRMED])
    await h.ended("C0DEPLOY", message.ts, timeout=5)  # at once, not by the 15 s clean-up timer
    assert await h.no_more_results(env["reply_to"], wait=0.2)


async def test_a_form_opens_while_the_pacing_buckets_redis_holds_its_answers(
    cut_off: tuple[Harness, TcpProxy], prefix: str
) -> None:
    """Pacing waits for Redis at most BUCKET_BUDGET_S: the views.open after a click still uses its
    trigger_id (3 s) in time, unpaced, while Redis holds the token's answer."""
    h, proxy = cut_off
    paced = await h.start_replica(pace_scale=1.0)
    for runtime in list(h.replicas):
        if runtime is not paced:
            await runtime.aclose()
            h.replicas.remove(runtime)
    env = h.envelope(FEATURES)
    await h.send(env)
    message = await _posted(h, env)
    bucket = Buckets(h.redis, prefix).keys.rate("views.open", None).encode()
    proxy.blackhole(when=bucket)
    await h.fake.click("U0CAROL", "C0DEPLOY", message.ts, "slack_ask:open")
    [view] = await h.fake.wait_for(lambda: h.fake.open_views("U0CAROL"), what="the form, opened in time")
    assert proxy.blackholed
    await proxy.heal()
    await h.fake.fill_and_submit("U0CAROL", view.id, ANSWERS)
    assert (await h.result(env["reply_to"]))["outcome"] == "answered"


async def test_a_copy_slack_tells_of_while_redis_is_away_is_learned_once_redis_answers(
    cut_off: tuple[Harness, TcpProxy], redis: Redis
) -> None:
    """A copy the record lacks (its poster died before recording it) is learned of from Slack's one
    message event; that event reaching a replica cut off from Redis is retried until Redis answers,
    so the copy is redrawn when the ask ends."""
    h, proxy = cut_off
    env = h.envelope(DEPLOY)
    await h.send(env)
    recorded = await _posted(h, env)
    await proxy.reset()
    stray = await _post_as_the_bot(h.fake, "C0DEPLOY", recorded.blocks)
    await h.fake.wait_for(
        lambda: [e for e in h.fake.state.events if e.delivered and stray in json.dumps(e.envelope)],
        what="Slack's event for the copy delivered",
    )
    await asyncio.sleep(LEARN_AFTER_S + 1.0)  # the outage outlasts the look the event leads to
    await proxy.heal()
    key = f"{h.prefix}:{{{env['reply_to']}}}:ask:{env['ask_id']}"
    await _until(lambda: _has(redis, key, stray), what="the copy learned")
    await h.send({"v": 1, "ask_id": env["ask_id"], "reply_to": env["reply_to"]}, "cancel")
    assert (await h.result(env["reply_to"]))["outcome"] == "cancelled"
    await h.ended("C0DEPLOY", recorded.ts)
    await h.ended("C0DEPLOY", stray)


async def test_the_same_click_delivered_twice_is_not_told_it_did_not_count(harness: Harness) -> None:
    """A load balancer resends a click whose first delivery counted (its replica died before it
    answered): the second finds the ask ended by that very click, and says it counted."""
    env = harness.envelope(DEPLOY)
    await harness.send(env)
    [message] = await harness.posted()
    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:1")
    assert (await harness.result(env["reply_to"]))["answers"][0]["selected"] == [1]
    await harness.ended("C0DEPLOY", message.ts)
    body = payloads.form_body(harness.fake.state.interactions[-1].payload)
    response = await harness.fake.post_raw(body, harness.fake.signed_request(body))
    assert response.status == 200
    await _told_exactly(harness.fake, "U0ALICE", [CONFIRMED])
    assert await harness.no_more_results(env["reply_to"], wait=0.2)


async def test_a_record_landing_after_its_ask_ended_leaves_no_channel_member(
    harness: Harness, redis_url: str
) -> None:
    # Kills mode of the chaos test: a delivery's record is held in a partition, its replica dies, and
    # the ask ends meanwhile and leaves its channels. At the heal the record lands: posted.lua refuses
    # it (stale), but the channel member its round trip tracks first stands, and nobody alive knows.
    h = harness
    env = h.envelope(DEPLOY)
    await h.send(env)
    message = await _posted(h, env)
    await h.fake.click("U0BOB", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    assert (await h.result(env["reply_to"]))["outcome"] == "answered"
    tag = slot_tag(env["reply_to"])
    keys = Keys(h.prefix)
    chan, member = keys.channel("C0DEPLOY"), due_member(env["ask_id"], tag)

    async def left() -> bool:  # finished: out of its channel, and no timer
        return not await h.redis.sismember(chan, member) and await h.redis.zscore(keys.due, member) is None

    await _until(left, what="the ended ask to leave its channel")
    proxy = TcpProxy(int(redis_url.rsplit(":", 1)[1].split("/")[0]))
    await proxy.start()
    late_redis = Redis.from_url(proxy.url)
    try:
        await late_redis.ping()  # connected before the partition: only the record is held
        late = Store(late_redis, h.prefix, finalize_after_ms=300)
        proxy.blackhole(when=_sha("posted"))
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.5):  # the dead replica's record, given up on
                await late.posted(
                    tag,
                    env["ask_id"],
                    [PostedMessage(channel="C0DEPLOY", ts="1700000000.000100")],
                    actor="dead-replica",
                    track_channel=True,
                    lease=Lease("dead-replica", "1", 0.0),
                )
        await proxy.heal()
        reads = Store(h.redis, h.prefix)

        async def refused() -> bool:
            return any(a.event == "refused_stale" for a in await reads.read_audit(tag, env["ask_id"]))

        await _until(refused, what="the late record to land, refused")
        # The timer that came in the same round trip takes the member out (the running replica's sweeper).
        await _until(left, what="the member the late record added to leave again")
    finally:
        await late_redis.aclose()
        await proxy.stop()
