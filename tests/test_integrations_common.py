"""The rules every framework integration keeps (bot/integrations/common.py), against real Redis: a wait
that no bot answers ends at the deadline with the contract's timeout result, Redis down is one clear
error, a cancelled task withdraws its ask, and an approval's answer becomes the right decision."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from redis.asyncio import Redis

from bot.client import AskClient, RedisUnavailableError
from bot.integrations.common import (
    WITHDRAWN_REASON,
    approval_request,
    ask_and_wait,
    decision_of,
    stable_ask_id,
    timeout_result,
)
from bot.storage.embedded import free_port
from contract import ResultEnvelope, normalize_ask_request
from tests.harness import Harness

QUESTION = {"questions": [{"id": "go", "question": "Ship it?", "options": ["Yes", "No"], "recommended": 0}]}


async def _stream(redis: Redis, prefix: str) -> list[tuple[str, dict[str, Any]]]:
    entries = await redis.xrange(f"{prefix}:asks")
    out = []
    for _, fields in entries:
        [(name, value)] = fields.items()
        out.append((name.decode(), json.loads(value)))
    return out


@pytest.mark.parametrize(
    ("on_timeout", "outcome", "text"),
    [
        (None, "timeout", "User answers:\ngo: (timeout)"),
        ("recommended", "answered", "User answers:\ngo: (timeout; default applied, no human answered: Yes)"),
        ("error", "error", "Error: the question timed out and no default is allowed."),
    ],
)
async def test_a_wait_no_bot_answers_ends_at_the_deadline_with_the_contracts_timeout_result(
    redis: Redis, redis_url: str, prefix: str, on_timeout: Any, outcome: str, text: str
) -> None:
    async with AskClient(redis_url, prefix=prefix) as client:
        result = await ask_and_wait(
            client,
            QUESTION,
            grace_s=0.2,
            route={"channel": "C0DEPLOY"},
            timeout_ms=200,
            on_timeout=on_timeout,
        )
    assert (result.outcome, result.text) == (outcome, text)
    # ... and the ask is withdrawn, so a bot that comes back later does not post it.
    [(kind, ask), (kind2, cancel)] = await _stream(redis, prefix)
    assert (kind, kind2) == ("ask", "cancel")
    assert cancel == {
        "v": 1,
        "ask_id": ask["ask_id"],
        "reply_to": ask["reply_to"],
        "reason": WITHDRAWN_REASON,
    }


@pytest.mark.parametrize("on_timeout", ["cancel", "recommended", "error"])
async def test_the_timeout_result_built_without_a_bot_is_the_one_the_bot_pushes(
    harness: Harness, on_timeout: Any
) -> None:
    async with AskClient(harness.redis_url, prefix=harness.prefix) as client:
        ask_id = await client.submit(
            QUESTION, route={"channel": "C0DEPLOY"}, timeout_ms=300, on_timeout=on_timeout
        )
        pushed = await client.wait(ask_id, 15)
    assert pushed is not None
    built = timeout_result(QUESTION, on_timeout, ask_id)
    fields = ("ask_id", "format", "outcome", "answers", "text", "details", "delivery", "error")
    assert built.model_dump(include=set(fields)) == pushed.model_dump(include=set(fields))


@pytest.mark.parametrize("ask_id", [None, "known-ask"])
async def test_redis_down_is_one_clear_error(ask_id: str | None) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    async with AskClient(url) as client:
        with pytest.raises(RedisUnavailableError, match="is unavailable"):
            await asyncio.wait_for(ask_and_wait(client, QUESTION, ask_id=ask_id), timeout=30)


async def test_a_cancelled_wait_withdraws_its_ask_in_slack(harness: Harness) -> None:
    async with AskClient(harness.redis_url, prefix=harness.prefix) as client:
        task = asyncio.create_task(ask_and_wait(client, QUESTION, route={"channel": "C0DEPLOY"}))
        [message] = await harness.posted()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        ended = await harness.ended("C0DEPLOY", message.ts)
    assert WITHDRAWN_REASON in str(ended.blocks)


def _result(outcome: str, answer: dict[str, Any], responder: dict[str, Any] | None = None) -> ResultEnvelope:
    return ResultEnvelope.model_validate(
        {
            "ask_id": "a",
            "format": "pi-question",
            "outcome": outcome,
            "answers": [answer],
            "text": "User answers:\napproval: ...",
            "details": {},
            "delivery": {"surface": "host"},
            "responder": responder,
        }
    )


def test_only_a_persons_approve_approves() -> None:
    alice = {"id": "U0ALICE", "name": "alice"}
    approve = {"id": "approval", "status": "answered", "selected": [0]}
    assert decision_of(_result("answered", approve, alice), "rm").approved
    defaulted = {**approve, "defaulted": True}
    assert not decision_of(_result("answered", defaulted), "rm").approved
    rejected = decision_of(
        _result("answered", {**approve, "selected": [1], "note": "too risky"}, alice), "rm"
    )
    assert (rejected.approved, rejected.message) == (
        False,
        "alice rejected the call to rm in Slack: too risky",
    )
    declined = decision_of(
        _result("cancelled", {"id": "approval", "status": "cancelled", "note": "no"}), "rm"
    )
    assert (declined.approved, declined.message) == (False, "no")
    dismissed = decision_of(_result("dismissed", {"id": "approval", "status": "dismissed"}), "rm")
    assert not dismissed.approved and dismissed.message is not None and "dismissed" in dismissed.message


def test_arguments_are_shown_in_a_code_block_no_backtick_run_can_close() -> None:
    request = approval_request("run", {"cmd": "echo ```` done"})
    description = request["questions"][0]["description"]
    assert description.startswith("Arguments:\n\n`````\n") and description.endswith("\n`````")
    normalize_ask_request(request)  # a request the contract takes


def test_stable_ask_ids_are_readable_when_they_can_be_and_hashed_when_not() -> None:
    assert stable_ask_id("lg", "thread-1", "node", 3, 0) == "lg:thread-1:node:3:0"
    hashed = stable_ask_id("lg", "a thread/with spaces", "node")
    assert hashed == stable_ask_id("lg", "a thread/with spaces", "node") and hashed.startswith("lg:")
    assert stable_ask_id("lg", "x" * 200) != stable_ask_id("lg", "x" * 201)
    assert len(stable_ask_id("lg", "x" * 200)) <= 128
