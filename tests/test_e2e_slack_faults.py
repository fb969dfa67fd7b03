"""End to end: Slack failing in the ways real Slack (and the proxies in front of it) fail, slow Slack
calls against the leases that cover them, and Slack's speed never deciding who wins (issue 11)."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from tests.harness import Harness, interactive_elements

DEPLOY = {"id": "deploy", "question": "Deploy?", "options": ["Yes", "No"]}
TWO_QUESTIONS = {
    "questions": [
        {"id": "db", "question": "Database?", "options": ["Postgres", "MySQL"]},
        {"id": "region", "question": "Region?", "options": ["EU", "US"]},
    ]
}


def calls_by_method(harness: Harness) -> Counter[str]:
    return Counter(c.method for c in harness.fake.state.calls if c.method != "auth.test")


@pytest.mark.parametrize(
    ("status", "content_type", "body"),
    [
        (500, "text/plain", "Internal Server Error"),
        (502, "text/html", "<html><body><h1>502 Bad Gateway</h1></body></html>"),
        (503, "text/html", "<!DOCTYPE html><title>Service Unavailable</title>"),
        (503, "application/json", "<html>upstream connect error</html>"),  # a lying content type
    ],
)
async def test_a_server_error_with_a_non_json_body_is_retried_then_the_ask_is_posted(
    harness: Harness, status: int, content_type: str, body: str
) -> None:
    harness.fake.fail_next("chat.postMessage", status=status, body=body, content_type=content_type, times=2)
    env = harness.envelope(DEPLOY)
    await harness.send(env)
    [message] = await harness.posted()
    assert [c.status for c in harness.fake.find_calls("chat.postMessage")] == [status, status, 200]
    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    assert (await harness.result(env["reply_to"]))["outcome"] == "answered"


async def test_a_retry_after_longer_than_the_lease_never_gives_two_posts_of_one_ask(harness: Harness) -> None:
    # Delivery window 1.5 s, so the intake lease is 3 s; Slack asks for 5 s. Two replicas, so one can
    # take the entry over as soon as the lease ends: the first must not post after that. (A high
    # poison limit: the point is the lease, not how many takeovers an entry may see.)
    await harness.stop()
    harness.overrides["max_deliveries"] = 100
    await harness.start_replica()
    await harness.start_replica()
    harness.fake.fail_next("chat.postMessage", retry_after=5)
    env = harness.envelope(DEPLOY)
    await harness.send(env)
    [message] = await harness.posted(timeout=15)
    await asyncio.sleep(3.5)  # past the 5 s Slack asked for: a waiting first post would land by now
    posts = [c for c in harness.fake.find_calls("chat.postMessage") if c.status == 200]
    assert len(posts) == 1 and len(harness.fake.messages("C0DEPLOY")) == 1
    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    assert (await harness.result(env["reply_to"]))["outcome"] == "answered"
    assert await harness.no_more_results(env["reply_to"])


async def test_an_escalation_post_slower_than_the_timer_lease_is_not_repeated(harness: Harness) -> None:
    # Timer lease 1.5 s; every post takes 2 s. A second replica's sweeper would take the timer over
    # at 1.5 s and post the step again unless the first keeps its claim while it waits.
    await harness.start_replica()
    harness.fake.method_latency["chat.postMessage"] = 2.0
    env = harness.envelope(DEPLOY, escalate=[{"after_ms": 2500, "channel": "C0INCIDENT"}], timeout_ms=30_000)
    await harness.send(env)
    [first] = await harness.posted(timeout=15)
    [escalated] = await harness.posted("C0INCIDENT", timeout=15)
    await asyncio.sleep(3.0)  # two more timer leases: a repeat would have landed
    assert len(harness.fake.messages("C0INCIDENT")) == 1
    harness.fake.method_latency.clear()
    await harness.fake.click("U0ALICE", "C0INCIDENT", escalated.ts, "slack_ask:choose:1")
    assert (await harness.result(env["reply_to"]))["outcome"] == "answered"
    for channel, ts in (("C0DEPLOY", first.ts), ("C0INCIDENT", escalated.ts)):
        assert interactive_elements((await harness.ended(channel, ts)).blocks) == []


async def test_a_click_in_time_is_never_refused_as_late_when_slack_is_slow(harness: Harness) -> None:
    env = harness.envelope(DEPLOY, timeout_ms=2_500)
    await harness.send(env)
    [message] = await harness.posted()
    harness.fake.method_latency.update({"chat.update": 3.0, "chat.getPermalink": 3.0})
    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    result = await harness.result(env["reply_to"])
    assert result["outcome"] == "answered"
    ts = message.ts.replace(".", "")
    assert result["slack"]["permalink"] == f"https://fake-workspace.slack.com/archives/C0DEPLOY/p{ts}"
    await harness.ended("C0DEPLOY", message.ts)
    assert harness.fake.ephemerals_for("U0ALICE") == []  # no "Too late"


async def test_an_answered_one_click_ask_costs_the_post_and_the_update(harness: Harness) -> None:
    env = harness.envelope(DEPLOY)
    await harness.send(env)
    [message] = await harness.posted()
    await harness.fake.click("U0BOB", "C0DEPLOY", message.ts, "slack_ask:choose:1")
    await harness.result(env["reply_to"])
    await harness.ended("C0DEPLOY", message.ts)
    assert calls_by_method(harness) == Counter({"chat.postMessage": 1, "chat.update": 1})


async def test_a_timed_out_ask_costs_no_permalink_call(harness: Harness) -> None:
    env = harness.envelope(DEPLOY, timeout_ms=300)
    await harness.send(env)
    [message] = await harness.posted()
    assert (await harness.result(env["reply_to"]))["responder"] is None  # ended by its deadline
    await harness.ended("C0DEPLOY", message.ts)
    assert calls_by_method(harness) == Counter({"chat.postMessage": 1, "chat.update": 1})


async def test_a_form_is_opened_and_its_submission_acked_in_time_while_the_user_group_is_slow(
    harness: Harness,
) -> None:
    # The group takes 4 s to read: the trigger_id (3 s) and the ack (3 s) cannot wait for it.
    env = harness.envelope(TWO_QUESTIONS, responders={"usergroups": ["S0ONCALL"]})
    await harness.send(env)
    [message] = await harness.posted()
    harness.fake.method_latency["usergroups.users.list"] = 4.0
    await harness.fake.click("U0BOB", "C0DEPLOY", message.ts, "slack_ask:open")
    [view] = await harness.fake.wait_for(lambda: harness.fake.open_views("U0BOB"), what="the form modal")
    response = await harness.fake.fill_and_submit("U0BOB", view.id, {"answer:0": "MySQL", "answer:1": "EU"})
    assert response.status == 200, response.error  # acked within Slack's 3 s
    result = await harness.result(env["reply_to"], timeout=15)
    assert result["outcome"] == "answered" and result["responder"]["id"] == "U0BOB"


async def test_a_submission_from_outside_the_user_group_is_refused_after_a_slow_check(
    harness: Harness,
) -> None:
    # Slow from the start: the Home tab's index gives up on the group at intake (after 1 s) and caches
    # nothing, so the who-may-answer check at the click does not know the group's members yet either.
    harness.fake.method_latency["usergroups.users.list"] = 4.0
    env = harness.envelope(TWO_QUESTIONS, responders={"usergroups": ["S0ONCALL"]})
    await harness.send(env)
    [message] = await harness.posted()
    await harness.fake.click("U0CAROL", "C0DEPLOY", message.ts, "slack_ask:open")
    [view] = await harness.fake.wait_for(lambda: harness.fake.open_views("U0CAROL"), what="the form modal")
    response = await harness.fake.fill_and_submit("U0CAROL", view.id, {"answer:0": "MySQL", "answer:1": "EU"})
    assert response.status == 200, response.error
    await harness.fake.wait_for(lambda: harness.fake.ephemerals_for("U0CAROL"), timeout=15, what="refusal")
    assert await harness.no_more_results(env["reply_to"], wait=0.5)
    assert interactive_elements(harness.fake.state.find_message("C0DEPLOY", message.ts).blocks)  # type: ignore[union-attr]
