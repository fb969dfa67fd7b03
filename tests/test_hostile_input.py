"""End to end: no input stops or corrupts the bot (issue 10; protocol sections 1, 2, 8, 10.5, 11).

Each test sends what an attacker or a buggy agent would, to a running bot on real Redis, and checks
the bot's answer and its state; the harness fixture then runs the invariant check and fails on any
crash in the bot's log.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest

from bot.playground import payloads
from bot.storage.keys import Keys, slot_tag
from tests.harness import SIGNING_SECRET, Harness
from tests.redis_procs import TcpProxy

DEPLOY = {"id": "deploy", "question": "Deploy?", "options": ["Yes", "No"]}


async def _dead_letters(harness: Harness, count: int, timeout: float = 10) -> list[dict[str, str]]:
    deadline = time.monotonic() + timeout
    while True:
        rows = await harness.redis.xrange(f"{harness.prefix}:dead")
        if len(rows) >= count or time.monotonic() > deadline:
            return [{k.decode(): v.decode() for k, v in fields.items()} for _, fields in rows]
        await asyncio.sleep(0.05)


async def _eventually(check: Callable[[], Awaitable[bool]], timeout: float = 10) -> bool:
    """Poll ``check`` until it holds or ``timeout`` passes (no sleep as synchronization)."""
    deadline = time.monotonic() + timeout
    while True:
        if await check():
            return True
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)


async def _stream_drained(harness: Harness, timeout: float = 10) -> None:
    async def drained() -> bool:
        return await harness.redis.xlen(f"{harness.prefix}:asks") == 0

    assert await _eventually(drained, timeout), "entries left on the stream"


async def _still_works(harness: Harness) -> None:
    """A normal ask is posted and answered."""
    env = harness.envelope(DEPLOY)
    await harness.send(env)
    messages = await harness.posted(count=len(harness.fake.messages("C0DEPLOY")) + 1)
    await harness.fake.click("U0ALICE", "C0DEPLOY", messages[-1].ts, "slack_ask:choose:0")
    assert (await harness.result(env["reply_to"]))["outcome"] == "answered"


async def _healthz(harness: Harness) -> tuple[int, dict[str, Any]]:
    port = harness.replicas[0].port
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/healthz") as response,
    ):
        return response.status, await response.json()


# -- 1. bytes that are not UTF-8 -------------------------------------------------------------------


async def test_an_entry_that_is_not_utf8_is_dead_lettered_and_intake_goes_on(harness: Harness) -> None:
    stream = f"{harness.prefix}:asks"
    await harness.redis.xadd(stream, {"ask": b"\xff\xfe{not utf-8"})
    await harness.redis.xadd(stream, {b"\xc3\x28": b"{}"})
    dead = await _dead_letters(harness, 2)
    # Both entries are handled at once, so their dead letters may come in either order.
    assert sorted(d["reason"] for d in dead) == [
        "a field name ('\\\\xc3(') is not UTF-8",
        "the 'ask' field is not UTF-8",
    ]
    [bad_value] = [d for d in dead if "ask" in d]
    assert bad_value["ask"] == "\\xff\\xfe{not utf-8"  # the bytes are kept, escaped
    await _stream_drained(harness)
    await _still_works(harness)
    assert (await _healthz(harness))[0] == 200


async def test_a_non_utf8_entry_left_by_a_dead_replica_does_not_stop_reclaim(harness: Harness) -> None:
    stream = f"{harness.prefix}:asks"
    # Delivered to a replica that died at once: only reclaim can take it.
    await harness.replicas[0].aclose()
    harness.replicas.clear()
    await harness.redis.xadd(stream, {"ask": b"\xff"})
    await harness.redis.xreadgroup("bots", "dead-replica", {stream: ">"}, count=10)
    await harness.start_replica()
    dead = await _dead_letters(harness, 1)
    assert dead[0]["reason"] == "the 'ask' field is not UTF-8"
    await _still_works(harness)
    status, body = await _healthz(harness)
    assert status == 200 and body["loops"] == {
        "intake": "running",
        "reclaim": "running",
        "sweeper": "running",
        "workflow": "running",
        "home": "running",
    }


# -- 2. no loop dies; /healthz names the one that is down -------------------------------------------


async def test_intake_survives_a_redis_error_and_healthz_names_it_while_it_fails(harness: Harness) -> None:
    await harness.stop()
    runtime = await harness.start_replica(loop_failing_ms=300)
    stream = f"{harness.prefix}:asks"
    # P:asks replaced by a key of another type: every XREADGROUP fails with WRONGTYPE (not NOGROUP).
    await harness.redis.delete(stream)
    await harness.redis.set(stream, "not a stream")

    def failing() -> bool:
        return runtime.loops()["intake"].startswith("failing")

    await harness.fake.wait_for(lambda: failing() or None, timeout=10, what="intake to report failing")
    status, body = await _healthz(harness)
    assert status == 503 and "intake" in body["down"] and "WRONGTYPE" in body["loops"]["intake"]
    await harness.redis.delete(stream)  # Redis is sane again: the same loop carries on
    await _still_works(harness)

    async def healthy() -> bool:
        return (await _healthz(harness))[0] == 200

    assert await _eventually(healthy)


async def test_the_sweeper_survives_its_timer_set_being_the_wrong_type(harness: Harness) -> None:
    await harness.stop()
    runtime = await harness.start_replica(loop_failing_ms=300)
    due = f"{harness.prefix}:due"
    await harness.redis.set(due, "junk")
    await harness.fake.wait_for(
        lambda: runtime.loops()["sweeper"].startswith("failing") or None, timeout=10, what="sweeper failing"
    )
    assert (await _healthz(harness))[0] == 503
    await harness.redis.delete(due)
    await harness.fake.wait_for(lambda: runtime.loops()["sweeper"] == "running" or None, timeout=10)
    await _still_works(harness)


async def test_healthz_is_503_naming_a_loop_whose_task_ended(harness: Harness) -> None:
    runtime = harness.replicas[0]
    [sweeper] = [t for t in runtime._tasks if t.get_name() == "sweeper"]

    async def ended() -> bool:
        sweeper.cancel()  # again each time: a cancel can land while wait_for swallows it
        return sweeper.done()

    assert await _eventually(ended)
    status, body = await _healthz(harness)
    assert status == 503 and body["down"] == ["sweeper"] and body["loops"]["sweeper"] == "stopped"


async def test_a_click_while_redis_is_unreachable_is_one_log_line_not_a_traceback(
    fake_slack: Any, redis: Any, redis_url: str, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    proxy = TcpProxy(port)
    await proxy.start()
    h = Harness(fake=fake_slack, redis=redis, redis_url=proxy.url, prefix=prefix)
    try:
        await h.start_replica()
        env = h.envelope(DEPLOY)
        await h.send(env)
        [message] = await h.posted()
        # Cut once the bot has recorded the message: cut between the post and its record, the bot
        # withdraws the message (it cannot tell Redis about it) and there is nothing left to click.
        keys = Keys(prefix).for_ask(slot_tag(env["reply_to"]), env["ask_id"])
        for _ in range(500):  # up to 10 s
            if message.ts in str(await redis.hget(keys.ask, "msgs")):
                break
            await asyncio.sleep(0.02)
        else:
            raise AssertionError("the bot never recorded its message")
        proxy.cut()
        caplog.set_level(logging.WARNING)
        await h.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
        # One line, from the act that could not be recorded (bot.engine.acts), no traceback.
        await h.fake.wait_for(
            lambda: [r for r in caplog.records if "was not recorded: Redis failed" in r.getMessage()] or None,
            timeout=20,
            what="the click's failure to be logged",
        )
        assert not h.log_watch.crashes, h.log_watch.crashes
        proxy.restore()
        await h.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
        assert (await h.result(env["reply_to"]))["outcome"] == "answered"
        await h.verify()
    finally:
        await h.stop()
        await proxy.stop()


# -- 3. reply_to may not name the bot's keys, and is pushed to only when a list or missing ------------


@pytest.mark.parametrize("name", ["asks", "due", "dead", "id:x", "chan:C0DEPLOY", "{t}:audit:other"])
async def test_a_reply_to_naming_a_key_of_the_bot_is_dead_lettered_and_changes_nothing(
    harness: Harness, name: str
) -> None:
    # A timer and a stream entry exist, so P:due and P:asks are there to be harmed.
    first = harness.envelope(DEPLOY)
    await harness.send(first)
    await harness.posted()
    reply_to = f"{harness.prefix}:{name}"
    before = {k: await harness.redis.type(k) for k in (f"{harness.prefix}:asks", f"{harness.prefix}:due")}
    env = harness.envelope(DEPLOY, reply_to=reply_to)
    await harness.send(env)
    dead = await _dead_letters(harness, 1)
    assert (
        "must not name a key under" in dead[0]["reason"] and f"{harness.prefix}:reply:" in dead[0]["reason"]
    )
    for key, kind in before.items():
        assert await harness.redis.type(key) == kind
    assert await harness.redis.pttl(f"{harness.prefix}:asks") == -1
    assert await harness.redis.pttl(f"{harness.prefix}:due") == -1
    assert await harness.redis.exists(f"{harness.prefix}:id:{env['ask_id']}") == 0
    assert len(harness.fake.messages("C0DEPLOY")) == 1


async def test_a_reply_to_of_another_type_gets_nothing_and_the_record_says_why(harness: Harness) -> None:
    reply_to = f"{harness.prefix}:reply:a-hash"
    await harness.redis.hset(reply_to, "mine", "untouched")
    env = harness.envelope(DEPLOY, reply_to=reply_to)
    await harness.send(env)
    dead = await _dead_letters(harness, 1)
    assert dead[0]["reason"].startswith(f"reply_to {reply_to} is not a list")
    assert await harness.redis.hgetall(reply_to) == {b"mine": b"untouched"}
    assert await harness.redis.pttl(reply_to) == -1
    status = await harness.replicas[0].store.get_status(env["ask_id"])
    assert status is not None and status.state == "ended" and status.audit is not None
    assert any(a.event == "refused_reply_to" and "is a hash" in (a.detail or "") for a in status.audit)
    assert harness.fake.find_calls("chat.postMessage") == []


async def test_a_reply_to_that_became_another_type_before_the_end_is_left_alone(harness: Harness) -> None:
    env = harness.envelope(DEPLOY)
    await harness.send(env)
    [message] = await harness.posted()
    await harness.redis.sadd(env["reply_to"], "agent data")
    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    await harness.ended("C0DEPLOY", message.ts)
    assert await harness.redis.smembers(env["reply_to"]) == {b"agent data"}
    assert await harness.redis.pttl(env["reply_to"]) == -1
    status = await harness.replicas[0].store.get_status(env["ask_id"])
    assert status is not None and status.outcome == "answered" and status.audit is not None
    assert any(a.event == "not_pushed" for a in status.audit)


async def test_a_resent_ask_whose_reply_to_is_now_a_hash_is_dead_lettered(harness: Harness) -> None:
    env = harness.envelope(DEPLOY, timeout_ms=60_000)
    await harness.send(env)
    [message] = await harness.posted()
    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    await harness.past_the_end(await harness.result(env["reply_to"]))
    await harness.redis.hset(env["reply_to"], "x", "y")
    await harness.send(env)
    dead = await _dead_letters(harness, 1)
    assert "is a hash, not a list: nothing was pushed" in dead[0]["reason"]
    assert await harness.redis.hgetall(env["reply_to"]) == {b"x": b"y"}
    assert await harness.redis.pttl(env["reply_to"]) == -1


# -- 4. operator actions cannot be forged ---------------------------------------------------------


async def test_a_dismiss_field_on_the_stream_changes_nothing(harness: Harness) -> None:
    env = harness.envelope(DEPLOY)
    await harness.send(env)
    await harness.posted()
    await harness.send(json.dumps({"ask_id": env["ask_id"], "by": "U0EVIL"}), field_name="dismiss")
    dead = await _dead_letters(harness, 1)
    assert dead[0]["reason"] == "the entry must have exactly one field, 'ask' or 'cancel' (it has 'dismiss')"
    status = await harness.replicas[0].store.get_status(env["ask_id"])
    assert status is not None and status.state == "posted"


async def test_an_operator_dismiss_shows_the_operator_as_a_name_never_a_mention(harness: Harness) -> None:
    env = harness.envelope(DEPLOY)
    await harness.send(env)
    [message] = await harness.posted()
    done = await asyncio.to_thread(
        subprocess.run,
        [
            *(sys.executable, "-m", "bot.cli", "dismiss", env["ask_id"], "--by", "U0CAROL", "--json"),
            *("--redis", harness.redis_url, "--prefix", harness.prefix),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    result = await harness.result(env["reply_to"])
    assert result["outcome"] == "dismissed"
    ended = await harness.ended("C0DEPLOY", message.ts)
    drawn = json.dumps(ended.blocks) + ended.text
    assert "<@U0CAROL>" not in drawn and "operator U0CAROL" in drawn
    assert await harness.redis.xlen(f"{harness.prefix}:asks") == 0  # it never went through the stream


# -- 5. every refused ask: result, ack, nothing drawn, no timer -------------------------------------


@pytest.mark.parametrize(
    "changes",
    [
        {"request": {"questions": [{"question": "Pick", "options": []}]}},
        {"format": "rich", "request": {"title": "x", "questions": []}},
        {"v": 2},
        {"route": {"policy": "no-such-policy"}},
        {"timeout_ms": -1},
        {
            "request": {
                "questions": [
                    {"question": "Grant root?", "options": ["Yes", "No"], "category": "security-permission"}
                ]
            }
        },
    ],
    ids=["invalid-request", "invalid-rich-form", "version-2", "unknown-policy", "invalid-envelope", "guard"],
)
async def test_every_refused_ask_gets_its_result_and_leaves_nothing_behind(
    harness: Harness, changes: dict[str, Any]
) -> None:
    env = {**harness.envelope(DEPLOY), **changes}
    await harness.send(env)
    result = await harness.result(env["reply_to"])
    assert result["outcome"] == "error" and result["ask_id"] == env["ask_id"]
    await _stream_drained(harness)
    pending = await harness.redis.xpending(f"{harness.prefix}:asks", "bots")
    assert pending["pending"] == 0

    async def no_timer() -> bool:
        return await harness.redis.zcard(f"{harness.prefix}:due") == 0

    assert await _eventually(no_timer, 5), "a timer was left for a refused ask"
    assert harness.fake.find_calls("chat.postMessage") == []


# -- 6. numbers are bounded; every ask has a deadline ------------------------------------------------


@pytest.mark.parametrize("timeout_ms", [10**15, 10**18, 2**63, 10**400])
async def test_a_huge_timeout_is_an_invalid_envelope_naming_the_field_and_range(
    harness: Harness, timeout_ms: int
) -> None:
    env = harness.envelope(DEPLOY, timeout_ms=timeout_ms)
    await harness.send(env)
    result = await harness.result(env["reply_to"])
    assert result["error"]["code"] == "invalid_envelope"
    assert result["error"]["message"].startswith("timeout_ms must be from 0 to 2592000000")
    assert harness.fake.find_calls("chat.postMessage") == []
    listed = await harness.replicas[0].store.list_pending()
    assert listed == []


async def test_an_escalation_after_the_deadline_is_an_invalid_envelope(harness: Harness) -> None:
    env = harness.envelope(DEPLOY, timeout_ms=60_000, escalate=[{"after_ms": 60_000, "channel": "C0OPS"}])
    await harness.send(env)
    result = await harness.result(env["reply_to"])
    assert result["error"]["code"] == "invalid_envelope"
    assert result["error"]["message"].startswith("escalate.0.after_ms must be before the deadline")


async def test_an_ask_that_names_no_deadline_gets_the_default_one(harness: Harness) -> None:
    await harness.stop()
    await harness.start_replica(default_timeout_ms=3_600_000)
    env = harness.envelope(DEPLOY)
    await harness.send(env)
    await harness.posted()
    [status] = await harness.replicas[0].store.list_pending()
    created = time.mktime(time.strptime(status.created_at[:19], "%Y-%m-%dT%H:%M:%S"))
    deadline = time.mktime(time.strptime(str(status.deadline)[:19], "%Y-%m-%dT%H:%M:%S"))
    assert deadline - created == 3600
    record = f"{harness.prefix}:{{{env['reply_to']}}}:ask:{env['ask_id']}"
    assert await harness.redis.pttl(record) > 0


# -- 7. whole-value patterns -----------------------------------------------------------------------


async def test_an_ask_id_with_a_trailing_newline_is_not_readable(harness: Harness) -> None:
    env = harness.envelope(DEPLOY, ask_id="abc\n", reply_to=f"{harness.prefix}:reply:nl")
    await harness.send(env)
    result = await harness.result(env["reply_to"])
    assert result["ask_id"] is None and result["error"]["code"] == "invalid_envelope"
    assert [k async for k in harness.redis.scan_iter(match=f"{harness.prefix}:id:*")] == []


async def test_a_reply_to_with_a_trailing_newline_is_dead_lettered(harness: Harness) -> None:
    env = harness.envelope(DEPLOY, reply_to=f"{harness.prefix}:reply:nl\n")
    await harness.send(env)
    dead = await _dead_letters(harness, 1)
    assert "no readable reply_to" in dead[0]["reason"]
    assert await harness.redis.exists(f"{harness.prefix}:reply:nl\n") == 0


async def test_route_user_names_one_person_never_a_group_dm(harness: Harness) -> None:
    env = harness.envelope(DEPLOY, route={"user": "U0ALICE,U0BOB,U0CAROL"})
    await harness.send(env)
    result = await harness.result(env["reply_to"])
    assert result["error"]["code"] == "invalid_envelope" and "route.user" in result["error"]["message"]
    assert harness.fake.find_calls("conversations.open") == []


# -- 8. the HTTP edge ------------------------------------------------------------------------------


async def _post(harness: Harness, body: bytes, headers: dict[str, str]) -> tuple[int, str]:
    port = harness.replicas[0].port
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"http://127.0.0.1:{port}/slack/events", data=io.BytesIO(body), headers=headers
        ) as response,
    ):
        return response.status, await response.text()


JUNK = [
    b"{broken json",
    b"payload=%7Bbroken",
    b"[" * 100_000 + b"]" * 100_000,
    b"\xff\xfe\xfd",
    b"[1, 2, 3]",
    b"line one\nrefused POST /slack/events from 1.2.3.4 with 200: forged line\n",
]


@pytest.mark.parametrize("body", JUNK, ids=["json", "payload", "nested", "not-utf8", "array", "newlines"])
async def test_unsigned_junk_gets_401_and_one_log_line_without_its_body(
    harness: Harness, body: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    status, _ = await _post(harness, body, {"Content-Type": "application/json"})
    assert status == 401
    refused = [r for r in caplog.records if r.getMessage().startswith("refused POST /slack/events")]
    assert len(refused) == 1 and "\n" not in refused[0].getMessage()
    assert b"forged" not in caplog.text.encode() and b"broken" not in caplog.text.encode()


async def test_a_non_integer_timestamp_gets_401(harness: Harness) -> None:
    body = b'{"type": "url_verification"}'
    headers = payloads.signed_headers(SIGNING_SECRET, body.decode())
    headers["X-Slack-Request-Timestamp"] = "12.5e3"
    assert (await _post(harness, body, headers))[0] == 401


async def test_a_body_too_large_gets_413_without_being_logged(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    body = b"x" * (1024 * 1024 + 1)
    status, _ = await _post(harness, body, {"Content-Type": "application/json"})
    assert status == 413
    assert len(caplog.text) < 10_000


async def test_a_signed_body_that_is_not_slacks_gets_400(harness: Harness) -> None:
    for body in ("[1, 2]", "payload=%7Bbroken", "{" * 5, "payload=%5B1%5D"):
        headers = payloads.signed_headers(SIGNING_SECRET, body)
        if body.startswith("["):
            headers["Content-Type"] = "application/json"
        status, _ = await _post(harness, body.encode(), headers)
        assert status == 400, body


async def test_a_client_that_disconnects_mid_body_leaves_no_traceback(harness: Harness) -> None:
    port = harness.replicas[0].port
    assert port is not None
    headers = payloads.signed_headers(SIGNING_SECRET, "x" * 1000)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    writer.write(
        f"POST /slack/events HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n{head}\r\n".encode() + b"x" * 10
    )
    await writer.drain()
    writer.close()
    await writer.wait_closed()
    del reader
    await _still_works(harness)  # and the fixture finds no traceback in the log


# -- 9. lifetimes ----------------------------------------------------------------------------------


async def test_an_ask_leaves_its_channel_set_when_it_ends(harness: Harness) -> None:
    # Slack's answer to the post comes 0.3 s after the message shows: the window a loaded machine opens.
    harness.fake.reply_latency["chat.postMessage"] = 0.3
    env = harness.envelope(DEPLOY)
    await harness.send(env)
    [message] = await harness.posted()
    chan = f"{harness.prefix}:chan:C0DEPLOY"

    async def joined() -> bool:
        return await harness.redis.scard(chan) == 1

    # The bot records the message (and the channel set) once Slack's answer to the post is back.
    assert await _eventually(joined, 5)
    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    await harness.ended("C0DEPLOY", message.ts)

    async def left() -> bool:
        return await harness.redis.scard(chan) == 0

    assert await _eventually(left, 5)


async def test_the_id_index_lives_as_long_as_a_long_ask(harness: Harness) -> None:
    env = harness.envelope(DEPLOY, timeout_ms=30 * 86_400_000)
    await harness.send(env)
    await harness.posted()
    record = f"{harness.prefix}:{{{env['reply_to']}}}:ask:{env['ask_id']}"
    index = f"{harness.prefix}:id:{env['ask_id']}"
    assert await harness.redis.pttl(index) >= await harness.redis.pttl(record) - 60_000


async def test_restarts_do_not_pile_up_consumers(harness: Harness) -> None:
    for _ in range(3):
        await harness.stop()
        await harness.start_replica()
        await _still_works(harness)
    stream = f"{harness.prefix}:asks"

    async def one_consumer() -> bool:
        return len(await harness.redis.xinfo_consumers(stream, "bots")) == 1

    assert await _eventually(one_consumer, 10)


async def test_list_shows_asks_whose_id_contains_the_index_marker(harness: Harness) -> None:
    env = harness.envelope(DEPLOY, ask_id="team:id:42")
    await harness.send(env)
    await harness.posted()
    listed = await harness.replicas[0].store.list_pending()
    assert [s.ask_id for s in listed] == ["team:id:42"]


# -- the invariant check itself --------------------------------------------------------------------


async def test_the_check_command_reports_broken_invariants(harness: Harness) -> None:
    p = harness.prefix
    await harness.redis.set(f"{p}:id:ghost", "nowhere", px=60_000)
    await harness.redis.hset(f"{p}:{{t}}:ask:orphan", mapping={"state": "posted", "rec": "{}"})
    await harness.redis.lpush(f"{p}:{{t}}:audit:orphan", "x")
    await harness.redis.sadd(f"{p}:chan:C1", "gone t")
    await harness.redis.expire(f"{p}:chan:C1", 60)
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "bot.cli", "check", "--json", "--redis", harness.redis_url, "--prefix", p],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    kinds = sorted((x["kind"], x["key"]) for x in report["problems"])
    assert kinds == [
        ("index_without_record", f"{p}:id:ghost"),
        ("no_timer", f"{p}:{{t}}:ask:orphan"),
        ("no_ttl", f"{p}:{{t}}:ask:orphan"),
        ("no_ttl", f"{p}:{{t}}:audit:orphan"),
        ("posted_without_message", f"{p}:{{t}}:ask:orphan"),
        ("stale_channel_member", f"{p}:chan:C1"),
    ]
    for key in (f"{p}:id:ghost", f"{p}:{{t}}:ask:orphan", f"{p}:{{t}}:audit:orphan", f"{p}:chan:C1"):
        await harness.redis.delete(key)
