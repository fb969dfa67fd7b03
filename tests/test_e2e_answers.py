"""End to end: an ask on the stream, a post in (fake) Slack, a signed click, one result on reply_to."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tests.decline_helpers import decline
from tests.harness import Harness, button_values, interactive_elements

FEATURES: dict[str, Any] = {
    "questions": [
        {
            "id": "features",
            "question": "Which features?",
            "options": ["Logging", "Metrics", "Tracing"],
            "multi": True,
        },
        {"id": "db", "question": "Database?", "options": ["Postgres", "MySQL"]},
    ]
}

DEPLOY = {
    "id": "deploy",
    "question": "Deploy build 42 to production?",
    "options": ["Yes", "No"],
    "recommended": 0,
}


async def test_one_click_answer_pushes_the_narration_and_ends_the_message(harness: Harness) -> None:
    env = harness.envelope(DEPLOY)
    await harness.send(env)
    [message] = await harness.posted()
    buttons = button_values(message)
    assert [b for b in buttons if b.startswith("slack_ask:choose")] == [
        "slack_ask:choose:0",
        "slack_ask:choose:1",
    ]
    assert "slack_ask:decline" in buttons and "slack_ask:other" in buttons

    response = await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:1")
    assert response.status == 200

    result = await harness.result(env["reply_to"])
    assert result["outcome"] == "answered"
    assert result["text"] == "User answers:\ndeploy: No"
    assert result["answers"] == [{"id": "deploy", "status": "answered", "selected": [1]}]
    assert result["details"]["selectedOptions"] == ["No"]
    assert result["responder"] == {"id": "U0ALICE", "name": "alice"}
    assert result["slack"]["channel"] == "C0DEPLOY" and result["slack"]["ts"] == message.ts
    assert result["delivery"] == {"surface": "host", "degraded": False}
    assert result["error"] is None and result["created_at"] <= result["resolved_at"]
    ended = await harness.ended("C0DEPLOY", message.ts)
    assert interactive_elements(ended.blocks) == []
    assert "U0ALICE" in str(ended.blocks)


async def _open_form(
    harness: Harness, request: dict[str, Any], user: str, **envelope: Any
) -> tuple[dict[str, Any], Any, Any]:
    """Send an ask, wait for its message and open its form as ``user``: (envelope, message, modal)."""
    env = harness.envelope(request, **envelope)
    await harness.send(env)
    [message] = await harness.posted()
    await harness.fake.click(user, "C0DEPLOY", message.ts, "slack_ask:open")
    view = (await harness.fake.wait_for(lambda: harness.fake.open_views(user), what="the form modal"))[0]
    return env, message, view


async def test_full_form_with_multi_choice_custom_text_and_note(harness: Harness) -> None:
    env, message, view = await _open_form(harness, FEATURES, "U0BOB")
    response = await harness.fake.fill_and_submit(
        "U0BOB",
        view.id,
        {
            "answer:0": ["Logging", "Tracing"],
            "custom:0": "Profiling",
            "note:0": "we need traces",
            "answer:1": "Postgres",
        },
    )
    assert response.status == 200 and not response.json.get("errors")
    result = await harness.result(env["reply_to"])
    assert result["outcome"] == "answered"
    assert result["text"] == 'User answers:\nfeatures: [Logging, Tracing] + Other: "Profiling"\ndb: Postgres'
    assert result["answers"][0] == {
        "id": "features",
        "status": "answered",
        "selected": [0, 2],
        "customText": "Profiling",
        "note": "we need traces",
    }
    await harness.ended("C0DEPLOY", message.ts)


async def test_form_without_an_answer_shows_the_error_beside_the_question(harness: Harness) -> None:
    # With custom text allowed, both the choice and the text input are optional in Slack's eyes:
    # the bot itself must insist on one of them.
    env = harness.envelope(
        {
            "questions": [
                {"id": "a", "question": "A?", "options": ["x", "y"]},
                {"id": "b", "question": "B?", "options": ["x", "y"], "allowCustom": False},
            ]
        }
    )
    await harness.send(env)
    [message] = await harness.posted()
    await harness.fake.click("U0BOB", "C0DEPLOY", message.ts, "slack_ask:open")
    view = (await harness.fake.wait_for(lambda: harness.fake.open_views("U0BOB")))[0]
    response = await harness.fake.fill_and_submit("U0BOB", view.id, {"answer:1": "x"})
    assert response.json["response_action"] == "errors"
    assert set(response.json["errors"]) == {"answer:0"}
    assert await harness.no_more_results(env["reply_to"], wait=0.3)


async def test_rich_form_with_a_text_question(harness: Harness) -> None:
    form = {
        "title": "Release review",
        "questions": [
            {
                "id": "target",
                "type": "radio",
                "prompt": "Where should we deploy?",
                "options": [
                    {"label": "Production", "value": "prod"},
                    {"label": "Staging", "value": "stage", "recommended": True},
                ],
            },
            {"id": "why", "type": "text", "prompt": "Anything to add?", "required": False},
        ],
    }
    env, _, view = await _open_form(harness, form, "U0CAROL", format="rich")
    response = await harness.fake.fill_and_submit(
        "U0CAROL",
        view.id,
        {"answer:0": "Staging", "note:0": "After smoke tests", "answer:1": "ship it\nplease"},
    )
    assert not response.json.get("errors"), response.json
    result = await harness.result(env["reply_to"])
    assert result["format"] == "rich" and result["outcome"] == "answered"
    answers = result["details"]["answers"]
    assert answers[0]["value"] == "stage" and answers[0]["selectedOptionIndexes"] == [1]
    assert answers[0]["optionNotes"] == [
        {"optionIndex": 1, "value": "stage", "label": "Staging", "note": "After smoke tests"}
    ]
    assert answers[1]["value"] == "ship it\nplease"
    assert "Q: Where should we deploy?" in result["text"] and "Answer: ship it\n  please" in result["text"]


async def test_decline_without_a_reason_cancels_every_question(harness: Harness) -> None:
    env = harness.envelope(DEPLOY)
    await harness.send(env)
    [message] = await harness.posted()
    await decline(harness.fake, "U0ALICE", "C0DEPLOY", message.ts)
    result = await harness.result(env["reply_to"])
    assert result["outcome"] == "cancelled"
    assert result["text"] == "User answers:\ndeploy: (cancelled)"
    assert result["responder"]["id"] == "U0ALICE"
    assert all("note" not in answer for answer in result["answers"])
    ended = await harness.ended("C0DEPLOY", message.ts)
    assert "Declined by <@U0ALICE>" in json.dumps(ended.blocks)


async def test_decline_opens_a_modal_and_nothing_ends_until_it_is_submitted(harness: Harness) -> None:
    env = harness.envelope(DEPLOY)
    await harness.send(env)
    [message] = await harness.posted()
    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:decline")
    [view] = await harness.fake.wait_for(lambda: harness.fake.open_views("U0ALICE"), what="the decline modal")
    assert view.view["submit"]["text"] == "Decline"
    assert await harness.no_more_results(env["reply_to"], wait=0.3)
    await harness.fake.close_view("U0ALICE", view.id)
    await harness.fake.click("U0BOB", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    assert (await harness.result(env["reply_to"]))["outcome"] == "answered"


async def test_decline_with_a_reason_puts_it_in_every_note_and_the_ended_message(harness: Harness) -> None:
    request = {
        "questions": [
            {"id": "deploy", "question": "Deploy?", "options": ["Yes", "No"]},
            {"id": "when", "question": "When?", "options": ["Now", "Later"]},
        ]
    }
    env = harness.envelope(request)
    await harness.send(env)
    [message] = await harness.posted()
    await decline(harness.fake, "U0ALICE", "C0DEPLOY", message.ts, reason="Freeze <!here> until Monday")
    result = await harness.result(env["reply_to"])
    assert result["outcome"] == "cancelled"
    assert [a["note"] for a in result["answers"]] == ["Freeze <!here> until Monday"] * 2
    assert [a["status"] for a in result["answers"]] == ["cancelled", "cancelled"]
    ended = await harness.ended("C0DEPLOY", message.ts)
    text = json.dumps(ended.blocks)
    assert "Declined by <@U0ALICE>: Freeze &lt;!here&gt; until Monday" in text
    assert "<!here>" not in text


async def test_a_person_not_allowed_is_told_privately_and_nothing_changes(harness: Harness) -> None:
    env = harness.envelope(DEPLOY, responders={"users": ["U0BOB"]})
    await harness.send(env)
    [message] = await harness.posted()
    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    note = await harness.fake.wait_for(lambda: harness.fake.ephemerals_for("U0ALICE"), what="a private note")
    assert "not" in note[0].text.lower()
    assert await harness.no_more_results(env["reply_to"], wait=0.3)
    assert interactive_elements(harness.fake.state.find_message("C0DEPLOY", message.ts).blocks)  # type: ignore[union-attr]
    await harness.fake.click("U0BOB", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    assert (await harness.result(env["reply_to"]))["responder"]["id"] == "U0BOB"


async def test_a_member_of_an_allowed_user_group_may_answer(harness: Harness) -> None:
    env = harness.envelope(DEPLOY, responders={"usergroups": ["S0ONCALL"]})
    await harness.send(env)
    [message] = await harness.posted()
    await harness.fake.click("U0CAROL", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    await harness.fake.wait_for(lambda: harness.fake.ephemerals_for("U0CAROL"))
    await harness.fake.click("U0BOB", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    assert (await harness.result(env["reply_to"]))["outcome"] == "answered"


async def test_a_click_after_the_end_is_refused_privately(harness: Harness) -> None:
    env = harness.envelope(DEPLOY)
    await harness.send(env)
    [message] = await harness.posted()
    stale = list(message.blocks)
    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    await harness.result(env["reply_to"])
    await harness.ended("C0DEPLOY", message.ts)
    # Bob's Slack client still shows the old buttons (a stale render): his click must change nothing.
    stored = harness.fake.state.find_message("C0DEPLOY", message.ts)
    assert stored is not None
    stored.blocks = stale
    await harness.fake.click("U0BOB", "C0DEPLOY", message.ts, "slack_ask:choose:1")
    note = await harness.fake.wait_for(lambda: harness.fake.ephemerals_for("U0BOB"))
    assert "already" in note[0].text.lower() or "ended" in note[0].text.lower()
    assert await harness.no_more_results(env["reply_to"], wait=0.3)


async def test_two_people_clicking_at_once_give_exactly_one_result(harness: Harness) -> None:
    env = harness.envelope(DEPLOY)
    await harness.send(env)
    [message] = await harness.posted()
    await asyncio.gather(
        harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0"),
        harness.fake.click("U0BOB", "C0DEPLOY", message.ts, "slack_ask:choose:1"),
        harness.fake.click("U0CAROL", "C0DEPLOY", message.ts, "slack_ask:decline"),
    )
    first = await harness.result(env["reply_to"])
    assert first["responder"]["id"] in {"U0ALICE", "U0BOB", "U0CAROL"}
    assert await harness.no_more_results(env["reply_to"], wait=0.8)


async def test_a_duplicate_ask_id_is_posted_once(harness: Harness) -> None:
    env = harness.envelope(DEPLOY)
    await asyncio.gather(*(harness.send(env) for _ in range(3)))
    [message] = await harness.posted()
    await asyncio.sleep(0.5)
    assert len([m for m in harness.fake.messages("C0DEPLOY") if not m.thread_ts]) == 1
    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    await harness.result(env["reply_to"])
    assert await harness.no_more_results(env["reply_to"], wait=0.5)


async def test_resending_an_ended_ask_pushes_its_stored_result_again(harness: Harness) -> None:
    env = harness.envelope(DEPLOY)
    await harness.send(env)
    [message] = await harness.posted()
    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    first = await harness.result(env["reply_to"])
    await harness.past_the_end(first)
    await harness.send({**env, "request": {"question": "changed", "options": ["z"]}, "reply_to": "ignored"})
    again = await harness.result(env["reply_to"])
    assert again == first
    assert len(harness.fake.messages("C0DEPLOY")) == 1


def _asks_posted(harness: Harness) -> int:
    return len(harness.fake.find_calls("chat.postMessage"))


async def test_many_asks_each_get_their_own_single_result(harness: Harness) -> None:
    envs: list[dict[str, Any]] = [harness.envelope(DEPLOY) for _ in range(10)]
    for env in envs:
        await harness.send(env)
    messages = await harness.posted(count=10)
    by_ask = {}
    for message in messages:
        value = button_values(message)["slack_ask:decline"]
        by_ask[value] = message
    await asyncio.gather(
        *(harness.fake.click("U0ALICE", "C0DEPLOY", m.ts, "slack_ask:choose:0") for m in messages)
    )
    for env in envs:
        assert (await harness.result(env["reply_to"]))["outcome"] == "answered"
    assert _asks_posted(harness) == 10


def _section_texts(blocks: list[dict[str, Any]]) -> list[str]:
    return [b["text"]["text"] for b in blocks if b.get("type") == "section" and "text" in b]


async def test_the_ended_message_shows_question_texts_option_labels_own_text_and_the_note(
    harness: Harness,
) -> None:
    env, message, view = await _open_form(harness, FEATURES, "U0BOB")
    await harness.fake.fill_and_submit(
        "U0BOB",
        view.id,
        {
            "answer:0": ["Logging", "Tracing"],
            "custom:0": "Profiling <!here>",
            "note:0": "we need traces <@U0ALICE>",
            "answer:1": "Postgres",
        },
    )
    await harness.result(env["reply_to"])
    ended = await harness.ended("C0DEPLOY", message.ts)
    [summary] = [t for t in _section_texts(ended.blocks) if t.startswith("• ")]
    assert summary.split("\n") == [
        "• Which features? → Logging, Tracing, “Profiling &lt;!here&gt;”"
        " · note: we need traces &lt;@U0ALICE&gt;",
        "• Database? → Postgres",
    ]


async def test_the_ended_rich_message_shows_option_labels_not_values_and_the_answers_text(
    harness: Harness,
) -> None:
    form = {
        "questions": [
            {
                "id": "target",
                "type": "radio",
                "prompt": "Where should we deploy?",
                "options": [{"label": "Production", "value": "prod"}, {"label": "Staging", "value": "stage"}],
            },
            {"id": "why", "type": "text", "prompt": "Anything to add?", "required": False},
        ],
    }
    env, message, view = await _open_form(harness, form, "U0CAROL", format="rich")
    await harness.fake.fill_and_submit(
        "U0CAROL", view.id, {"answer:0": "Production", "note:0": "after smoke tests", "answer:1": "ship it"}
    )
    await harness.result(env["reply_to"])
    ended = await harness.ended("C0DEPLOY", message.ts)
    [summary] = [t for t in _section_texts(ended.blocks) if t.startswith("• ")]
    assert summary.split("\n") == [
        "• Where should we deploy? → Production · note: after smoke tests",
        "• Anything to add? → “ship it”",
    ]
    assert "prod" not in summary.replace("Production", "") and "Q1" not in summary
