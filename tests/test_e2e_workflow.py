"""The Workflow Builder step "Ask a question" end to end (issue 21): the fake Slack runs the step of
manifest.yml (``function_executed``, signed, through the real Bolt app), people answer the ask it
made in Slack, and the fake checks the bot's ``functions.completeSuccess`` outputs against the types
manifest.yml declares. Real Redis, real replicas."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import aiohttp
import pytest
from redis.asyncio import Redis

from bot.playground import FakeSlack
from bot.playground.functions import Execution
from bot.storage.embedded import free_port
from bot.storage.keys import Keys
from tests.decline_helpers import decline
from tests.harness import SIGNING_SECRET, Harness
from tests.redis_procs import BotProc

SHIP = {"question": "Ship build 42?", "options": ["Ship", "Wait"], "channel": "C0DEPLOY"}


async def _ended(harness: Harness, execution: Execution, timeout: float = 10) -> Execution:
    """Wait for the step to be completed (or failed) at Slack."""
    return await harness.fake.wait_for(
        lambda: execution if execution.state != "running" else None,
        timeout=timeout,
        what=f"step {execution.id} to end",
    )


async def _record_done(harness: Harness, execution: Execution) -> dict[bytes, bytes]:
    """The bot's record of the execution, once it says done (its token forgotten)."""
    key = Keys(harness.prefix).step(f"wf.{execution.id}")
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        record: dict[bytes, bytes] = await harness.redis.hgetall(key)  # type: ignore[misc]
        if record.get(b"state") == b"done":
            return record
        assert asyncio.get_running_loop().time() < deadline, f"step record {key} never said done: {record}"
        await asyncio.sleep(0.05)  # polling a condition, not waiting out a guess


async def _looked_at(harness: Harness, execution: Execution) -> None:
    """Wait for the sweep's first look at the step's ask: its next look is then after the deadline
    (a day away at least), so only a result taken off the reply list can bring it sooner."""
    keys = Keys(harness.prefix)
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        score = await harness.redis.zscore(keys.step_due, f"wf.{execution.id}")
        now_ms = (await harness.redis.time())[0] * 1000
        if score is not None and score > now_ms + 86_400_000:
            return
        assert asyncio.get_running_loop().time() < deadline, f"no first look (next look {score})"
        await asyncio.sleep(0.05)  # polling a condition


async def test_an_answered_step_completes_with_the_choice_and_who_answered(harness: Harness) -> None:
    execution = await harness.fake.run_step(SHIP)
    [message] = await harness.posted()
    assert "Ship build 42?" in str(message.blocks)
    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:1")
    await _ended(harness, execution)
    assert execution.state == "completed"
    assert execution.outputs == {
        "outcome": "answered",
        "ask_id": f"wf.{execution.id}",
        "choice": "Wait",
        "choice_index": 1,
        "answered_by": "U0ALICE",
    }
    [completion] = execution.accepted
    assert completion.token == "jit"  # the token function_executed brought, as Slack requires
    record = await _record_done(harness, execution)
    assert b"token" not in record
    await harness.ended("C0DEPLOY", message.ts)


async def test_a_declined_step_completes_with_the_reason(harness: Harness) -> None:
    execution = await harness.fake.run_step(SHIP)
    [message] = await harness.posted()
    await decline(harness.fake, "U0BOB", "C0DEPLOY", message.ts, reason="Freeze until Monday")
    await _ended(harness, execution)
    assert execution.outputs == {
        "outcome": "declined",
        "ask_id": f"wf.{execution.id}",
        "answered_by": "U0BOB",
        "note": "Freeze until Monday",
    }


async def test_a_step_nobody_answers_completes_with_outcome_timeout(harness: Harness) -> None:
    execution = await harness.fake.run_step({**SHIP, "timeout_minutes": 0.03})  # 1.8 s
    [message] = await harness.posted()
    await _ended(harness, execution)
    assert execution.state == "completed"
    assert execution.outputs == {"outcome": "timeout", "ask_id": f"wf.{execution.id}"}
    await harness.ended("C0DEPLOY", message.ts)


async def test_a_person_not_allowed_to_answer_changes_nothing(harness: Harness) -> None:
    execution = await harness.fake.run_step({**SHIP, "answerers": ["U0BOB"]})
    [message] = await harness.posted()
    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    note = await harness.fake.wait_for(lambda: harness.fake.ephemerals_for("U0ALICE"), what="a private note")
    assert "not" in note[0].text.lower()
    assert execution.state == "running" and execution.calls == []
    await harness.fake.click("U0BOB", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    await _ended(harness, execution)
    assert execution.outputs is not None
    assert (execution.outputs["outcome"], execution.outputs["answered_by"]) == ("answered", "U0BOB")


async def test_a_step_needing_two_approvals_waits_for_the_second(harness: Harness) -> None:
    execution = await harness.fake.run_step({**SHIP, "approvals": 2, "requester": "U0CAROL"})
    [message] = await harness.posted()
    await harness.fake.click("U0CAROL", "C0DEPLOY", message.ts, "slack_ask:choose:0")  # not their own
    await harness.fake.wait_for(lambda: harness.fake.ephemerals_for("U0CAROL"), what="a private refusal")
    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    await harness.fake.wait_for(lambda: message.edits or None, what="the tally")
    assert execution.state == "running"
    await harness.fake.click("U0BOB", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    await _ended(harness, execution)
    assert execution.outputs is not None
    assert (execution.outputs["choice"], execution.outputs["answered_by"]) == ("Ship", "U0BOB")


@pytest.mark.parametrize(
    ("inputs", "says"),
    [
        ({**SHIP, "options": []}, "options: give at least 1 option"),
        (
            {**SHIP, "options": [f"Option {i}" for i in range(1, 14)]},
            "at most 12 options can be offered (got 13)",
        ),
        ({**SHIP, "channel": "C0NOPE"}, "Slack answered channel_not_found when posting to C0NOPE"),
        ({**SHIP, "user": "U0BOB"}, "in a channel or in a DM with one person, not both"),
    ],
    ids=["no-options", "13-options", "unknown-channel", "channel-and-person"],
)
async def test_bad_inputs_end_the_step_with_a_clear_error(
    harness: Harness, inputs: dict[str, Any], says: str
) -> None:
    execution = await harness.fake.run_step(inputs)
    await _ended(harness, execution)
    assert execution.state == "failed"
    assert execution.error is not None and says in execution.error, execution.error
    assert execution.error.startswith("slack-ask could not ask: ")
    assert len(execution.accepted) == 1
    assert not [m for m in harness.fake.messages("C0DEPLOY") if not m.thread_ts]


async def test_function_executed_sent_twice_asks_once(harness: Harness) -> None:
    execution = await harness.fake.run_step(SHIP)
    await harness.fake.send_event(
        harness.fake.functions.event(execution, app_id=harness.fake.state.bot.app_id)
    )
    [message] = await harness.posted()
    await harness.fake.click("U0CAROL", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    await _ended(harness, execution)
    assert len(execution.accepted) == 1
    assert len([m for m in harness.fake.messages("C0DEPLOY") if not m.thread_ts]) == 1


async def test_an_execution_the_bot_could_not_record_is_not_acknowledged(harness: Harness) -> None:
    execution = harness.fake.functions.start("ask_question", SHIP)
    event = harness.fake.functions.event(execution, app_id=harness.fake.state.bot.app_id)
    key = Keys(harness.prefix).step(f"wf.{execution.id}")
    await harness.redis.set(key, "in the way")  # Redis refuses the record (WRONGTYPE)
    refused = await harness.fake.send_event(event)
    assert refused is not None and refused.status != 200  # so Slack sends the event again
    await harness.redis.delete(key)
    again = await harness.fake.send_event(event)
    assert again is not None and again.status == 200
    [message] = await harness.posted()
    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    await _ended(harness, execution)
    assert len(execution.accepted) == 1


async def test_an_expired_step_token_falls_back_to_the_bot_token(harness: Harness) -> None:
    execution = await harness.fake.run_step(SHIP)
    harness.fake.functions.token_ttl = 0.0  # Slack's 15 minutes are over (or the token was revoked)
    [message] = await harness.posted()
    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    await _ended(harness, execution)
    [completion] = execution.accepted
    assert completion.token == "bot"
    refused = [c for c in harness.fake.state.calls if c.method == "functions.completeSuccess" and not c.ok]
    assert [c.error for c in refused] == ["token_expired"]


async def test_a_replica_killed_after_the_answer_leaves_the_step_to_another(harness: Harness) -> None:
    first = harness.replicas[0]
    execution = await harness.fake.run_step(SHIP)
    [message] = await harness.posted()
    await _looked_at(harness, execution)  # nothing due before the deadline but the answer's claim
    harness.fake.set_unreachable()  # the first replica's completeSuccess never reaches Slack...
    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    await harness.fake.wait_for(
        lambda: [c for c in harness.fake.state.calls if c.method == "functions.completeSuccess"] or None,
        what="the first replica's completeSuccess",
    )
    await first.kill()  # ... and it dies trying: the result is off the reply list, the step not done
    harness.replicas.remove(first)
    await first.aclose()
    assert execution.state == "running"
    harness.fake.clear_faults()
    await harness.start_replica()
    await _ended(harness, execution, timeout=15)
    assert execution.state == "completed"
    assert execution.outputs is not None and execution.outputs["answered_by"] == "U0ALICE"
    assert len(execution.accepted) == 1
    await _record_done(harness, execution)


async def test_the_invariant_check_sees_a_pending_step_without_its_look(harness: Harness) -> None:
    execution = await harness.fake.run_step(SHIP)
    [message] = await harness.posted()
    keys = Keys(harness.prefix)
    await harness.redis.zrem(keys.step_due, f"wf.{execution.id}")
    assert [(p.kind, p.key) for p in await harness.problems()] == [
        ("no_timer", keys.step(f"wf.{execution.id}"))
    ]
    await harness.redis.zadd(keys.step_due, {f"wf.{execution.id}": 0})
    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    await _ended(harness, execution)


async def _healthy(port: int, proc: BotProc) -> None:
    """Wait for a replica process to serve (its /healthz answers 200)."""
    deadline = asyncio.get_running_loop().time() + 30
    async with aiohttp.ClientSession() as session:
        while True:
            with contextlib.suppress(aiohttp.ClientError):
                async with session.get(f"http://127.0.0.1:{port}/healthz") as answer:
                    if answer.status == 200:
                        return
            assert proc.alive, f"replica {proc.name} died:\n{proc.log()[-3000:]}"
            assert asyncio.get_running_loop().time() < deadline, f"replica {proc.name} never served"
            await asyncio.sleep(0.1)  # polling a condition


async def test_a_replica_process_sigkilled_after_the_answer_leaves_the_step_to_another(
    fake_slack: FakeSlack, redis: Redis, redis_url: str, prefix: str
) -> None:
    """As above, with replicas as real processes: the first is SIGKILLed while Slack does not answer its
    completeSuccess; a second process completes the step from Redis alone, once."""
    env = {
        "SLACK_BOT_TOKEN": fake_slack.bot_token,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "SLACK_API_URL": fake_slack.api_url,
        "REDIS_URL": redis_url,
        "SLACK_ASK_PREFIX": prefix,
        "SLACK_ASK_DELIVERY_WINDOW_MS": "1500",
        "SLACK_ASK_TIMER_LEASE_MS": "1500",
        "SLACK_ASK_SWEEP_INTERVAL_MS": "50",
        "SLACK_ASK_PACE_SCALE": "0",
    }
    first, second = BotProc(env, free_port(), "wf-first"), BotProc(env, free_port(), "wf-second")
    try:
        first.start()
        await _healthy(first.port, first)
        fake_slack.events_url = f"http://127.0.0.1:{first.port}/slack/events"
        execution = await fake_slack.run_step(SHIP)
        h = Harness(fake=fake_slack, redis=redis, redis_url=redis_url, prefix=prefix)
        try:
            [message] = await h.posted()
            await _looked_at(h, execution)
            fake_slack.set_unreachable()
            await fake_slack.click("U0BOB", "C0DEPLOY", message.ts, "slack_ask:choose:0")
            await fake_slack.wait_for(
                lambda: (
                    [c for c in fake_slack.state.calls if c.method == "functions.completeSuccess"] or None
                ),
                what="the first replica's completeSuccess",
            )
            first.kill()
            assert execution.state == "running"
            fake_slack.clear_faults()
            second.start()
            await _healthy(second.port, second)
            fake_slack.events_url = f"http://127.0.0.1:{second.port}/slack/events"
            await _ended(h, execution, timeout=20)
            assert execution.state == "completed" and len(execution.accepted) == 1
            assert execution.outputs is not None and execution.outputs["answered_by"] == "U0BOB"
            await _record_done(h, execution)
            assert await h.problems() == []
        finally:
            h.log_watch.__exit__()
    finally:
        first.kill()
        second.stop()
