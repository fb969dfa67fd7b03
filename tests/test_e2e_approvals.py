"""Approvals end to end (protocol section 13): real Bolt app, real Redis, the fake Slack over HTTP."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest

from tests.harness import Harness, interactive_elements

DEPLOY = {"id": "deploy", "question": "Deploy v2 to production?", "options": ["Approve", "Reject"]}
RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def _blocks_text(harness: Harness, ts: str) -> str:
    message = harness.fake.state.find_message("C0DEPLOY", ts)
    assert message is not None
    return json.dumps(message.blocks, ensure_ascii=False)


async def _tally(harness: Harness, ts: str, expected: str) -> str:
    """Wait until the message shows ``expected`` in its tally."""
    return await harness.fake.wait_for(
        lambda: text if expected in (text := _blocks_text(harness, ts)) else None,
        what=f"the tally to show {expected!r}",
    )


def _votes(result: dict[str, Any]) -> list[tuple[str, list[int]]]:
    return [(v["user"]["id"], v["selected"]) for v in result["votes"]]


async def _plain_result(harness: Harness, user: str, option: int) -> dict[str, Any]:
    """The result of the same question answered by one person choosing ``option`` (no approval)."""
    env = harness.envelope(DEPLOY)
    await harness.send(env)
    ts = (await harness.posted(count=len(harness.fake.messages("C0DEPLOY")) + 1))[-1].ts
    await harness.fake.click(user, "C0DEPLOY", ts, f"slack_ask:choose:{option}")
    return await harness.result(env["reply_to"])


async def test_two_of_three_shows_the_tally_ignores_a_repeat_and_decides_on_the_second_vote(
    harness: Harness,
) -> None:
    env = harness.envelope(DEPLOY, approval={"count": 2})
    await harness.send(env)
    [message] = await harness.posted()
    assert "0 of 2" in _blocks_text(harness, message.ts)

    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    shown = await _tally(harness, message.ts, "1 of 2 · alice")
    assert "@U0ALICE" not in shown  # names, not mentions
    assert await harness.no_more_results(env["reply_to"], wait=0.3)
    stored = harness.fake.state.find_message("C0DEPLOY", message.ts)
    assert stored is not None and "slack_ask:choose:0" in interactive_elements(stored.blocks)
    edits = len(stored.edits)

    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")  # a repeat
    assert await harness.no_more_results(env["reply_to"], wait=0.3)
    assert len(stored.edits) == edits and "1 of 2 · alice" in _blocks_text(harness, message.ts)

    await harness.fake.click("U0BOB", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    result = await harness.result(env["reply_to"])
    assert result["outcome"] == "answered"
    assert result["responder"] == {"id": "U0BOB", "name": "bob"}
    assert _votes(result) == [("U0ALICE", [0]), ("U0BOB", [0])]
    assert all(RFC3339.fullmatch(v["at"]) for v in result["votes"])
    assert [v["user"]["name"] for v in result["votes"]] == ["alice", "bob"]
    ended = await harness.ended("C0DEPLOY", message.ts)
    assert "alice: Approve" in json.dumps(ended.blocks) and "bob: Approve" in json.dumps(ended.blocks)
    assert await harness.no_more_results(env["reply_to"], wait=0.3)

    # Text and details exactly as for one person choosing that option.
    plain = await _plain_result(harness, "U0BOB", 0)
    for name in ("answers", "text", "details", "delivery"):
        assert result[name] == plain[name], name
    assert plain["votes"] is None  # the field is always there, null without approval


async def test_a_veto_ends_the_ask_at_once(harness: Harness) -> None:
    env = harness.envelope(DEPLOY, approval={"count": 3, "veto": [1]})
    await harness.send(env)
    [message] = await harness.posted()
    await harness.fake.click("U0CAROL", "C0DEPLOY", message.ts, "slack_ask:choose:1")
    result = await harness.result(env["reply_to"])
    assert (result["outcome"], result["answers"][0]["selected"]) == ("answered", [1])
    assert result["text"] == "User answers:\ndeploy: Reject"
    assert result["responder"]["id"] == "U0CAROL"
    assert _votes(result) == [("U0CAROL", [1])]
    await harness.ended("C0DEPLOY", message.ts)


async def test_a_changed_vote_counts_only_the_last_one(harness: Harness) -> None:
    env = harness.envelope(DEPLOY, approval={"count": 2})
    await harness.send(env)
    [message] = await harness.posted()
    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    await _tally(harness, message.ts, "*Approve*: 1 of 2 · alice")
    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:1")  # changes her mind
    shown = await _tally(harness, message.ts, "*Reject*: 1 of 2 · alice")
    assert "*Approve*: 0 of 2 · no votes yet" in shown
    await harness.fake.click("U0BOB", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    await _tally(harness, message.ts, "*Approve*: 1 of 2 · bob")
    assert await harness.no_more_results(env["reply_to"], wait=0.3)  # Alice's first vote no longer counts
    await harness.fake.click("U0CAROL", "C0DEPLOY", message.ts, "slack_ask:choose:1")
    result = await harness.result(env["reply_to"])
    assert result["answers"][0]["selected"] == [1]
    assert result["responder"]["id"] == "U0CAROL"
    assert _votes(result) == [("U0ALICE", [1]), ("U0BOB", [0]), ("U0CAROL", [1])]
    ended = json.dumps((await harness.ended("C0DEPLOY", message.ts)).blocks)
    assert "alice: Reject" in ended and "bob: Approve" in ended and "carol: Reject" in ended


async def test_the_requester_is_refused_privately_and_not_counted(harness: Harness) -> None:
    env = harness.envelope(
        DEPLOY, approval={"count": 2}, requester={"name": "deploy-bot", "user": "bob@example.com"}
    )
    await harness.send(env)
    [message] = await harness.posted()
    await harness.fake.click("U0BOB", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    note = await harness.fake.wait_for(lambda: harness.fake.ephemerals_for("U0BOB"), what="a private note")
    assert "cannot vote" in note[0].text
    assert harness.fake.find_calls("users.lookupByEmail")
    assert "0 of 2" in _blocks_text(harness, message.ts)
    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    await _tally(harness, message.ts, "1 of 2 · alice")
    assert await harness.no_more_results(env["reply_to"], wait=0.3)
    await harness.fake.click("U0CAROL", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    result = await harness.result(env["reply_to"])
    assert _votes(result) == [("U0ALICE", [0]), ("U0CAROL", [0])]


async def test_the_requester_may_vote_when_the_exclusion_is_off(harness: Harness) -> None:
    env = harness.envelope(
        DEPLOY, approval={"count": 2, "exclude_requester": False}, requester={"user": "U0BOB"}
    )
    await harness.send(env)
    [message] = await harness.posted()
    await harness.fake.click("U0BOB", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    await _tally(harness, message.ts, "1 of 2 · bob")
    assert not harness.fake.ephemerals_for("U0BOB")
    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    assert _votes(await harness.result(env["reply_to"])) == [("U0BOB", [0]), ("U0ALICE", [0])]


async def test_a_timeout_result_carries_the_votes_recorded(harness: Harness) -> None:
    env = harness.envelope(DEPLOY, approval={"count": 3}, timeout_ms=4000, on_timeout="cancel")
    await harness.send(env)
    [message] = await harness.posted()
    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    await _tally(harness, message.ts, "1 of 3 · alice")  # the order cast is the order shown below
    await harness.fake.click("U0BOB", "C0DEPLOY", message.ts, "slack_ask:choose:1")
    await _tally(harness, message.ts, "1 of 3 · bob")
    result = await harness.result(env["reply_to"])
    assert result["outcome"] == "timeout"
    assert result["responder"] is None
    assert _votes(result) == [("U0ALICE", [0]), ("U0BOB", [1])]
    ended = await harness.ended("C0DEPLOY", message.ts)
    assert "alice: Approve" in json.dumps(ended.blocks)


TWO = {"questions": [DEPLOY, {"id": "when", "question": "When?", "options": ["Now", "Later"]}]}
RICH = {
    "title": "Deploy",
    "questions": [{"id": "ok", "type": "single", "label": "OK?", "options": ["Yes", "No"]}],
}


@pytest.mark.parametrize(
    ("fields", "rule"),
    [
        ({"approval": {"count": 1}}, "approval.count"),
        ({"approval": {"count": 21}}, "approval.count"),
        ({"approval": {"count": "2"}}, "approval.count"),
        ({"approval": {"count": True}}, "approval.count"),
        ({"approval": {"count": 2, "veto": [2]}}, "approval.veto: 2 is not an option"),
        ({"approval": {"count": 2, "veto": [1, 1]}}, "veto lists each option index once"),
        ({"approval": {"count": 2, "veto": [-1]}}, "veto lists option indexes"),
        ({"approval": {"count": 2, "exclude_requester": "yes"}}, "approval.exclude_requester"),
        ({"approval": {"count": 2}, "on_timeout": "recommended"}, 'on_timeout "recommended" is not allowed'),
        ({"approval": {"count": 2}, "request": TWO}, "exactly one question (this one has 2)"),
        ({"approval": {"count": 2}, "request": {**DEPLOY, "multi": True}}, "must be single choice"),
        ({"approval": {"count": 2}, "format": "rich", "request": RICH}, "only a pi-question ask"),
        ({"approval": {"count": 2}, "requester": {"user": "<@U0BOB>"}}, "requester.user"),
    ],
)
async def test_every_broken_rule_of_section_13_is_an_invalid_envelope_naming_it(
    harness: Harness, fields: dict[str, Any], rule: str
) -> None:
    request = fields.pop("request", DEPLOY)
    env = harness.envelope(request, **fields)
    await harness.send(env)
    result = await harness.result(env["reply_to"])
    assert result["outcome"] == "error"
    assert result["error"]["code"] == "invalid_envelope"
    assert rule in result["error"]["message"], result["error"]["message"]
    assert result["votes"] is None
    assert not harness.fake.messages("C0DEPLOY")


async def test_two_last_votes_racing_give_exactly_one_result(harness: Harness) -> None:
    env = harness.envelope(DEPLOY, approval={"count": 2})
    await harness.send(env)
    [message] = await harness.posted()
    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    await _tally(harness, message.ts, "1 of 2 · alice")
    # Both clicks are in flight at once: each is its own signed request and its own vote script.
    await asyncio.gather(
        harness.fake.click("U0BOB", "C0DEPLOY", message.ts, "slack_ask:choose:0"),
        harness.fake.click("U0CAROL", "C0DEPLOY", message.ts, "slack_ask:choose:0"),
    )
    result = await harness.result(env["reply_to"])
    assert result["responder"]["id"] in {"U0BOB", "U0CAROL"}
    assert [v[0] for v in _votes(result)] == ["U0ALICE", result["responder"]["id"]]
    assert await harness.no_more_results(env["reply_to"], wait=0.8)
    await harness.ended("C0DEPLOY", message.ts)
    # The late voter was told privately that it had ended.
    late = "U0CAROL" if result["responder"]["id"] == "U0BOB" else "U0BOB"
    note = await harness.fake.wait_for(lambda: harness.fake.ephemerals_for(late), what="a private note")
    assert "ended" in note[0].text


async def test_a_vote_racing_a_cancel_gives_exactly_one_result(harness: Harness) -> None:
    env = harness.envelope(DEPLOY, approval={"count": 2})
    await harness.send(env)
    [message] = await harness.posted()
    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    await _tally(harness, message.ts, "1 of 2 · alice")
    cancel = {"v": 1, "ask_id": env["ask_id"], "reply_to": env["reply_to"], "reason": "rolled back"}
    await asyncio.gather(
        harness.fake.click("U0BOB", "C0DEPLOY", message.ts, "slack_ask:choose:0"),
        harness.send(cancel, field_name="cancel"),
    )
    result = await harness.result(env["reply_to"])
    assert result["outcome"] in {"answered", "cancelled"}
    expected = [("U0ALICE", [0]), ("U0BOB", [0])] if result["outcome"] == "answered" else [("U0ALICE", [0])]
    assert _votes(result) == expected
    assert await harness.no_more_results(env["reply_to"], wait=0.8)
    await harness.ended("C0DEPLOY", message.ts)


async def test_only_eligible_people_vote_and_a_requester_named_by_id_is_refused(harness: Harness) -> None:
    env = harness.envelope(
        DEPLOY,
        approval={"count": 2},
        responders={"users": ["U0ALICE", "U0BOB", "U0CAROL"]},
        requester={"user": "U0ALICE"},
    )
    await harness.send(env)
    [message] = await harness.posted()
    harness.fake.add_user("U0EVE", "eve")
    harness.fake.state.channels["C0DEPLOY"].members.append("U0EVE")
    await harness.fake.click("U0EVE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    note = await harness.fake.wait_for(lambda: harness.fake.ephemerals_for("U0EVE"), what="a private note")
    assert "someone else" in note[0].text
    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    refused = await harness.fake.wait_for(
        lambda: harness.fake.ephemerals_for("U0ALICE"), what="a private note"
    )
    assert "cannot vote" in refused[0].text
    assert "0 of 2" in _blocks_text(harness, message.ts)
    await harness.fake.click("U0BOB", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    await _tally(harness, message.ts, "1 of 2 · bob")
    await harness.fake.click("U0CAROL", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    result = await harness.result(env["reply_to"])
    assert [user for user, _ in _votes(result)] == ["U0BOB", "U0CAROL"]
