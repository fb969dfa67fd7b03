"""End to end: bad input, Slack errors, rate limits, signatures, and a replica dying mid-ask."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import aiohttp

from bot.playground import FakeSlack
from bot.storage.keys import Keys, slot_tag
from tests.harness import Harness

DEPLOY = {"id": "deploy", "question": "Deploy?", "options": ["Yes", "No"]}
UNAVAILABLE_WARNING = (
    "No human answer surface is available in this session. Do not assume an answer; continue only with "
    "choices you can justify, or report the open question upward."
)


async def test_an_invalid_request_gets_the_contracts_exact_message(harness: Harness) -> None:
    env = harness.envelope({"questions": [{"question": "Pick", "options": []}]})
    await harness.send(env)
    result = await harness.result(env["reply_to"])
    assert result["outcome"] == "error"
    assert result["error"] == {"code": "invalid_request", "message": "questions[0] needs at least 1 option"}
    assert result["text"] == "Error: questions[0] needs at least 1 option"
    assert result["details"] == {} and result["answers"] == []
    assert harness.fake.find_calls("chat.postMessage") == []


async def test_an_invalid_envelope_names_the_field(harness: Harness) -> None:
    env = harness.envelope(DEPLOY, timeout_ms=-5)
    await harness.send(env)
    result = await harness.result(env["reply_to"])
    assert result["error"]["code"] == "invalid_envelope"
    assert "timeout_ms" in result["error"]["message"]
    assert result["ask_id"] == env["ask_id"]


async def test_an_unreadable_ask_id_still_gets_its_error_with_a_null_id(harness: Harness) -> None:
    env = harness.envelope(DEPLOY, ask_id="has spaces", reply_to=f"{harness.prefix}:reply:unreadable")
    await harness.send(env)
    result = await harness.result(env["reply_to"])
    assert result["ask_id"] is None
    assert result["error"]["code"] == "invalid_envelope"


async def test_an_unsupported_version_is_refused_with_its_code(harness: Harness) -> None:
    env = {**harness.envelope(DEPLOY), "v": 2}
    await harness.send(env)
    result = await harness.result(env["reply_to"])
    assert result["error"]["code"] == "unsupported_version"


async def test_an_envelope_without_reply_to_goes_to_the_dead_letter_stream(harness: Harness) -> None:
    await harness.send("{not json")
    await harness.send(json.dumps({"v": 1, "ask_id": "x"}))

    async def dead() -> list[Any]:
        return await harness.redis.xrange(f"{harness.prefix}:dead")  # type: ignore[no-any-return]

    for _ in range(100):
        entries = await dead()
        if len(entries) == 2:
            break
        await asyncio.sleep(0.05)
    reasons = sorted(fields[b"reason"].decode() for _, fields in entries)
    assert any("not valid JSON" in r for r in reasons)
    assert any("reply_to is required" in r for r in reasons)
    assert await harness.redis.xlen(f"{harness.prefix}:asks") == 0


async def test_an_unknown_channel_is_unavailable_at_once_with_the_warning(harness: Harness) -> None:
    env = harness.envelope(DEPLOY, route={"channel": "C0NOSUCH"})
    await harness.send(env)
    result = await harness.result(env["reply_to"])
    assert result["outcome"] == "unavailable"
    assert result["error"]["code"] == "channel_not_found"
    assert result["error"]["message"] == "Slack answered channel_not_found when posting to C0NOSUCH"
    assert result["text"] == f"User answers:\ndeploy: (unavailable)\n\n{UNAVAILABLE_WARNING}"
    assert result["delivery"] == {"surface": "none", "degraded": False}


async def test_a_private_channel_without_the_bot_is_unavailable(harness: Harness) -> None:
    # Slack hides private conversations the bot is not in: channel_not_found, as for a typo.
    env = harness.envelope(DEPLOY, route={"channel": "C0PRIV"})
    await harness.send(env)
    assert (await harness.result(env["reply_to"]))["error"]["code"] == "channel_not_found"


async def test_a_public_channel_the_bot_may_not_post_in_is_unavailable_not_in_channel(
    harness: Harness,
) -> None:
    harness.fake.chat_write_public = False
    env = harness.envelope(DEPLOY, route={"channel": "C0RANDOM"})
    await harness.send(env)
    assert (await harness.result(env["reply_to"]))["error"]["code"] == "not_in_channel"


async def test_an_archived_channel_is_unavailable_is_archived(harness: Harness) -> None:
    env = harness.envelope(DEPLOY, route={"channel": "C0ARCH"})
    await harness.send(env)
    assert (await harness.result(env["reply_to"]))["error"]["code"] == "is_archived"


async def test_a_dm_to_a_deactivated_user_is_unavailable(harness: Harness) -> None:
    env = harness.envelope(DEPLOY, route={"user": "U0DAVE"})
    await harness.send(env)
    result = await harness.result(env["reply_to"])
    assert result["outcome"] == "unavailable"
    assert result["error"]["code"] == "user_disabled"  # Slack's own name, passed through


async def test_an_ask_without_a_route_and_no_default_is_unavailable_no_route(harness: Harness) -> None:
    env = harness.envelope(DEPLOY)
    del env["route"]
    await harness.send(env)
    result = await harness.result(env["reply_to"])
    assert (result["outcome"], result["error"]["code"]) == ("unavailable", "no_route")


async def test_a_dm_by_email_reaches_the_user(harness: Harness) -> None:
    env = harness.envelope(DEPLOY, route={"user": "bob@example.com"})
    await harness.send(env)
    channel = harness.fake.state.dm_id_for("U0BOB")
    [message] = await harness.posted(channel)
    await harness.fake.click("U0BOB", channel, message.ts, "slack_ask:choose:0")
    assert (await harness.result(env["reply_to"]))["outcome"] == "answered"


async def test_a_rate_limit_is_waited_out_then_the_ask_is_posted(harness: Harness) -> None:
    harness.fake.fail_next("chat.postMessage", retry_after=1)
    env = harness.envelope(DEPLOY)
    started = time.monotonic()
    await harness.send(env)
    [message] = await harness.posted()
    assert time.monotonic() - started >= 0.9  # Retry-After was honoured, not ignored
    calls = harness.fake.find_calls("chat.postMessage")
    assert [c.status for c in calls] == [429, 200]
    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    assert (await harness.result(env["reply_to"]))["outcome"] == "answered"


async def test_server_errors_are_retried_inside_the_delivery_window(harness: Harness) -> None:
    harness.fake.fail_next("chat.postMessage", status=503, times=2)
    env = harness.envelope(DEPLOY)
    await harness.send(env)
    await harness.posted()
    assert [c.status for c in harness.fake.find_calls("chat.postMessage")] == [503, 503, 200]


async def test_slack_unreachable_past_the_window_is_unavailable(harness: Harness) -> None:
    harness.fake.set_unreachable(True)
    env = harness.envelope(DEPLOY)
    await harness.send(env)
    result = await harness.result(env["reply_to"], timeout=15)
    assert (result["outcome"], result["error"]["code"]) == ("unavailable", "slack_unreachable")


async def test_a_replica_killed_mid_ask_is_finished_by_another(harness: Harness) -> None:
    first = harness.replicas[0]
    harness.fake.latency = 1.0  # the post is in flight when the replica dies
    env = harness.envelope(DEPLOY)
    await harness.send(env)
    # Killed once it holds the ask's lease: its post (1 s of latency) is then on its way or about to be.
    ask_key = Keys(harness.prefix).for_ask(slot_tag(str(env["reply_to"])), str(env["ask_id"])).ask

    async def leased() -> bool:
        return bool(await harness.redis.hget(ask_key, "owner"))

    for _ in range(500):  # up to 10 s
        if await leased():
            break
        await asyncio.sleep(0.02)
    else:
        raise AssertionError("the first replica never took the ask's lease")
    await first.kill()
    harness.replicas.remove(first)
    harness.fake.latency = 0.0
    await harness.start_replica()
    messages = await harness.posted(timeout=15)
    message = messages[-1]
    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    result = await harness.result(env["reply_to"])
    assert result["outcome"] == "answered"
    assert await harness.no_more_results(env["reply_to"], wait=0.5)
    # The entry is acked in the same round trip that records the message, which may still be on its
    # way when a quick click has already ended the ask (on fakeredis, served from a thread, it often is).
    for _ in range(250):  # up to 5 s
        if await harness.redis.xlen(f"{harness.prefix}:asks") == 0:
            break
        await asyncio.sleep(0.02)
    else:
        raise AssertionError("the ask's intake entry was never acknowledged")
    await first.aclose()


async def test_a_bad_signature_gets_401_and_changes_nothing(harness: Harness) -> None:
    body = "payload=" + json.dumps({"type": "block_actions"})
    headers = harness.fake.signed_request(body)
    headers["X-Slack-Signature"] = "v0=" + "0" * 64
    response = await harness.fake.post_raw(body, headers)
    assert response.status == 401


async def test_a_stale_timestamp_gets_401(harness: Harness) -> None:
    body = "payload=" + json.dumps({"type": "block_actions"})
    headers = harness.fake.signed_request(body, timestamp=int(time.time()) - 301)
    assert (await harness.fake.post_raw(body, headers)).status == 401


async def test_healthz_says_redis_is_up(harness: Harness) -> None:
    port = harness.replicas[0].port
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/healthz") as response,
    ):
        assert response.status == 200
        assert (await response.json())["redis"] == "up"


async def test_the_cancel_envelope_withdraws_a_pending_ask(harness: Harness) -> None:
    env = harness.envelope(DEPLOY)
    await harness.send(env)
    [message] = await harness.posted()
    await harness.send(
        {"v": 1, "ask_id": env["ask_id"], "reply_to": env["reply_to"], "reason": "fixed it myself"}, "cancel"
    )
    result = await harness.result(env["reply_to"])
    assert result["outcome"] == "cancelled"
    assert result["text"] == "User answers:\ndeploy: (cancelled)"
    assert result["responder"] is None
    ended = await harness.ended("C0DEPLOY", message.ts)
    assert "fixed it myself" in json.dumps(ended.blocks)


async def test_a_cancel_before_its_ask_ends_the_ask_when_it_arrives(harness: Harness) -> None:
    env = harness.envelope(DEPLOY)
    await harness.send({"v": 1, "ask_id": env["ask_id"], "reply_to": env["reply_to"]}, "cancel")
    await asyncio.sleep(0.3)
    assert await harness.no_more_results(env["reply_to"], wait=0.1)
    await harness.send(env)
    assert (await harness.result(env["reply_to"]))["outcome"] == "cancelled"
    assert harness.fake.find_calls("chat.postMessage") == []


async def test_the_biggest_hostile_ask_is_accepted_by_slacks_limits(harness: Harness) -> None:
    hostile = ("<!channel> <@U0ALICE> <http://evil.example|click> **bold** [x](http://y) @here & " * 60)[
        :4000
    ]
    questions = [
        {
            "id": f"q{i}",
            "question": hostile,
            "description": hostile,
            "options": [{"label": hostile, "description": hostile} for _ in range(12)],
            "multi": i % 2 == 0,
            "recommended": 3,
        }
        for i in range(8)
    ]
    env = harness.envelope({"questions": questions})
    await harness.send(env)
    [message] = await harness.posted()
    text = json.dumps(message.blocks)
    for forbidden in ("<!channel>", "<@U0ALICE>", "<http://evil"):
        assert forbidden not in text
    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:open")
    view = (await harness.fake.wait_for(lambda: harness.fake.open_views("U0ALICE"), what="the modal"))[0]
    assert "<!channel>" not in json.dumps(view.view["blocks"])
    assert all(c.ok for c in harness.fake.find_calls("views.open"))


def _unused(fake: FakeSlack) -> None:  # keeps the import honest for type checkers
    del fake
