"""End to end: answers typed in an ask's thread (and its DM), through the real Bolt app (issue 23).

A person's reply is a real-shaped `message` event from the fake Slack (`thread_ts`, `parent_user_id`);
an exact reading ends the ask at once, anything else is shown privately with Confirm / Change.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from bot.playground import Message
from bot.playground.state import Ephemeral
from bot.storage.keys import slot_tag
from bot.storage.store import Store
from tests.harness import Harness
from tests.test_render_mrkdwn import HOSTILE

DEPLOY = {"id": "deploy", "question": "Deploy build 42?", "options": ["Yes", "No"]}
SHIP = {"id": "ship", "question": "Ship the release?", "options": ["Yes, ship it", "Hold"]}
FEATURES = {
    "id": "features",
    "question": "Which features?",
    "options": ["Logging", "Metrics", "Tracing"],
    "multi": True,
}
TWO = {
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


async def _ask(
    harness: Harness, request: Any, channel: str = "C0DEPLOY", **fields: Any
) -> tuple[dict[str, Any], Message]:
    """Send an ask and wait for its message (the one whose buttons carry its id) in ``channel``."""
    env = harness.envelope(request, **fields)
    await harness.send(env)
    return env, await _message_of(harness, env, channel)


async def _message_of(harness: Harness, env: dict[str, Any], channel: str) -> Message:
    def posted() -> Message | None:
        mine = [
            m
            for m in harness.fake.messages(channel)
            if not m.thread_ts and json.dumps(env["ask_id"])[1:-1] in json.dumps(m.blocks)
        ]
        return mine[-1] if mine else None

    return await harness.fake.wait_for(posted, what=f"the message of {env['ask_id']} in {channel}")


async def _in_the_record(harness: Harness, env: dict[str, Any], message: Message) -> None:
    """Until the ask's record lists ``message`` (Slack shows a post before the bot has recorded it)."""
    store = harness.replicas[0].store

    async def recorded() -> bool:
        loaded = await store.find(env["ask_id"])
        return loaded is not None and any(m.ts == message.ts for m in loaded.messages)

    deadline = asyncio.get_running_loop().time() + 10
    while not await recorded():
        assert asyncio.get_running_loop().time() < deadline, f"{env['ask_id']} never recorded its post"
        await asyncio.sleep(0.02)


async def _private(harness: Harness, user: str, count: int = 1) -> Ephemeral:
    """The ``count``-th private message ``user`` got."""
    found = await harness.fake.wait_for(
        lambda: (lambda got: got if len(got) >= count else None)(harness.fake.ephemerals_for(user)),
        what=f"{count} private message(s) for {user}",
    )
    return found[count - 1]


def _thread_says(harness: Harness, channel: str, ts: str) -> list[str]:
    return [m.text for m in harness.fake.thread(channel, ts) if m.bot_id and m.ts != ts]


async def _recorded(harness: Harness, channel: str, ts: str) -> str:
    said = await harness.fake.wait_for(
        lambda: [t for t in _thread_says(harness, channel, ts) if "recorded" in t.lower()] or None,
        what="the bot's Recorded reply",
    )
    return said[0]


@pytest.mark.parametrize(
    ("typed", "selected", "shown"), [("2", [1], "No"), ("  no!  ", [1], "No"), ("Yes", [0], "Yes")]
)
async def test_a_number_or_a_label_in_the_thread_answers_at_once(
    harness: Harness, typed: str, selected: list[int], shown: str
) -> None:
    env, message = await _ask(harness, DEPLOY)
    assert "You can also reply in this thread" in json.dumps(message.blocks)
    await harness.fake.reply("U0ALICE", "C0DEPLOY", message.ts, typed)
    result = await harness.result(env["reply_to"])
    assert result["outcome"] == "answered" and result["answers"][0]["selected"] == selected
    assert result["via"] == "thread" and result["responder"] == {"id": "U0ALICE", "name": "alice"}
    assert result["slack"]["ts"] == message.ts
    await harness.ended("C0DEPLOY", message.ts)
    assert await _recorded(harness, "C0DEPLOY", message.ts) == f"Recorded: {shown} (by alice)"
    audit = await Store(harness.redis, harness.prefix).read_audit(slot_tag(env["reply_to"]), env["ask_id"])
    assert [(a.event, a.by, a.detail) for a in audit if a.event == "answered"] == [
        ("answered", "U0ALICE", "via thread")
    ]


async def test_a_click_says_via_button_and_the_form_via_form(harness: Harness) -> None:
    env, message = await _ask(harness, DEPLOY)
    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    assert (await harness.result(env["reply_to"]))["via"] == "button"


async def test_several_options_of_a_multi_choice_question(harness: Harness) -> None:
    for typed in ("1, 3", "1 3", "logging, TRACING"):
        env, message = await _ask(harness, {"questions": [FEATURES]})
        await harness.fake.reply("U0BOB", "C0DEPLOY", message.ts, typed)
        result = await harness.result(env["reply_to"])
        assert result["answers"][0]["selected"] == [0, 2], typed
        assert result["text"] == "User answers:\nfeatures: [Logging, Tracing]"


async def test_an_approve_keyword_with_a_reason_is_confirmed_then_applied_with_the_note(
    harness: Harness,
) -> None:
    env, message = await _ask(harness, SHIP)
    await harness.fake.reply("U0ALICE", "C0DEPLOY", message.ts, "lgtm - after the smoke tests")
    private = await _private(harness, "U0ALICE")
    assert "Yes, ship it" in private.text and private.thread_ts == message.ts
    assert await harness.no_more_results(env["reply_to"], wait=0.3)  # nothing counts before Confirm
    await harness.fake.click("U0ALICE", "C0DEPLOY", private.ts, "slack_ask:reply_confirm")
    result = await harness.result(env["reply_to"])
    assert result["answers"] == [
        {"id": "ship", "status": "answered", "selected": [0], "note": "after the smoke tests"}
    ]
    assert result["via"] == "thread" and result["slack"]["ts"] == message.ts
    assert (
        await _recorded(harness, "C0DEPLOY", message.ts)
        == "Recorded: Yes, ship it — note: after the smoke tests (by alice)"
    )


async def test_a_decline_keyword_with_a_reason_declines_after_confirmation(harness: Harness) -> None:
    env, message = await _ask(harness, SHIP)
    await harness.fake.reply("U0ALICE", "C0DEPLOY", message.ts, "deny: the canary is red")
    private = await _private(harness, "U0ALICE")
    await harness.fake.click("U0ALICE", "C0DEPLOY", private.ts, "slack_ask:reply_confirm")
    result = await harness.result(env["reply_to"])
    assert result["outcome"] == "cancelled" and result["answers"][0]["note"] == "the canary is red"
    assert result["via"] == "thread"


async def test_custom_text_is_applied_only_once_confirmed(harness: Harness) -> None:
    env, message = await _ask(harness, DEPLOY)
    await harness.fake.reply("U0CAROL", "C0DEPLOY", message.ts, "tomorrow morning\nafter the freeze")
    private = await _private(harness, "U0CAROL")
    assert "tomorrow morning" in private.text
    assert await harness.no_more_results(env["reply_to"], wait=0.3)
    await harness.fake.click("U0CAROL", "C0DEPLOY", private.ts, "slack_ask:reply_confirm")
    result = await harness.result(env["reply_to"])
    assert result["answers"] == [
        {
            "id": "deploy",
            "status": "answered",
            "selected": [],
            "customText": "tomorrow morning",
            "note": "after the freeze",
        }
    ]
    # A second Confirm (the private message keeps its button) changes nothing.
    await harness.fake.click("U0CAROL", "C0DEPLOY", private.ts, "slack_ask:reply_confirm")
    assert "already ended" in (await _private(harness, "U0CAROL", 2)).text
    assert await harness.no_more_results(env["reply_to"], wait=0.3)


async def test_change_opens_the_form_and_the_form_answers(harness: Harness) -> None:
    env, message = await _ask(harness, DEPLOY)
    await harness.fake.reply("U0CAROL", "C0DEPLOY", message.ts, "maybe friday")
    private = await _private(harness, "U0CAROL")
    await harness.fake.click("U0CAROL", "C0DEPLOY", private.ts, "slack_ask:reply_change")
    [view] = await harness.fake.wait_for(lambda: harness.fake.open_views("U0CAROL"), what="the form")
    response = await harness.fake.fill_and_submit("U0CAROL", view.id, {"answer:0": "No"})
    assert not response.json.get("errors"), response.json
    result = await harness.result(env["reply_to"])
    assert result["answers"][0]["selected"] == [1] and result["via"] == "form"
    assert result["slack"]["ts"] == message.ts  # the ask's message, not the private reply
    await harness.ended("C0DEPLOY", message.ts)


@pytest.mark.parametrize("typed", ["features: 1, 3\ndb: postgres", "1: Logging, Tracing\n2: 1"])
async def test_several_questions_one_line_each_by_id_or_by_number(harness: Harness, typed: str) -> None:
    env, message = await _ask(harness, TWO)
    await harness.fake.reply("U0BOB", "C0DEPLOY", message.ts, typed)
    result = await harness.result(env["reply_to"])
    assert [a["selected"] for a in result["answers"]] == [[0, 2], [0]]


async def test_a_missing_question_is_named_back_and_nothing_changes(harness: Harness) -> None:
    env, message = await _ask(harness, TWO)
    await harness.fake.reply("U0BOB", "C0DEPLOY", message.ts, "features: 2")
    private = await _private(harness, "U0BOB")
    assert "Not answered: db." in private.text and "nothing was recorded" in private.text
    assert await harness.no_more_results(env["reply_to"], wait=0.3)


async def test_someone_not_allowed_is_told_privately_and_nothing_changes(harness: Harness) -> None:
    env, message = await _ask(harness, DEPLOY, responders={"users": ["U0BOB"]})
    await harness.fake.reply("U0ALICE", "C0DEPLOY", message.ts, "1")
    assert "for someone else" in (await _private(harness, "U0ALICE")).text
    assert await harness.no_more_results(env["reply_to"], wait=0.3)
    await harness.fake.reply("U0BOB", "C0DEPLOY", message.ts, "1")
    assert (await harness.result(env["reply_to"]))["responder"]["id"] == "U0BOB"


async def test_a_late_reply_is_refused_and_the_timeout_policy_decides(harness: Harness) -> None:
    await harness.stop()
    await harness.start_replica(sweep_interval_ms=60_000)  # the sweeper must not end it first
    env, message = await _ask(harness, DEPLOY, timeout_ms=1200, on_timeout="cancel")
    await asyncio.sleep(1.4)  # the ask's deadline passes (time, not synchronization)
    await harness.fake.reply("U0ALICE", "C0DEPLOY", message.ts, "1")
    result = await harness.result(env["reply_to"], timeout=5)
    assert result["outcome"] == "timeout" and result["via"] is None
    assert "Too late" in (await _private(harness, "U0ALICE")).text


async def test_bots_replies_and_edits_are_never_answers(harness: Harness) -> None:
    env, message = await _ask(harness, {"questions": [{**DEPLOY, "allowCustom": False}]})
    bot_id = harness.fake.state.bot.bot_id
    await harness.fake.say_as_bot("C0DEPLOY", "1", thread_ts=message.ts)  # another app
    await harness.fake.say_as_bot("C0DEPLOY", "2", thread_ts=message.ts, bot_id=bot_id)  # this bot
    reply = await harness.fake.reply("U0ALICE", "C0DEPLOY", message.ts, "hello")
    assert "not one of the options" in (await _private(harness, "U0ALICE")).text
    await harness.fake.edit("C0DEPLOY", reply.ts, "2")  # an edit is not a new answer
    assert await harness.no_more_results(env["reply_to"], wait=0.5)
    assert len(harness.fake.ephemerals_for("U0ALICE")) == 1
    await harness.fake.reply("U0BOB", "C0DEPLOY", message.ts, "1")
    result = await harness.result(env["reply_to"])
    assert result["responder"]["id"] == "U0BOB"


async def test_a_reply_racing_a_click_gives_exactly_one_result(harness: Harness) -> None:
    for _ in range(3):
        env, message = await _ask(harness, DEPLOY)
        await asyncio.gather(
            harness.fake.reply("U0ALICE", "C0DEPLOY", message.ts, "2"),
            harness.fake.click("U0BOB", "C0DEPLOY", message.ts, "slack_ask:choose:0"),
        )
        result = await harness.result(env["reply_to"])
        assert (result["via"], result["responder"]["id"]) in (("thread", "U0ALICE"), ("button", "U0BOB"))
        assert await harness.no_more_results(env["reply_to"], wait=0.3)
        await harness.ended("C0DEPLOY", message.ts)


async def test_a_reply_in_an_escalation_copys_thread(harness: Harness) -> None:
    env = harness.envelope(DEPLOY, escalate=[{"after_ms": 300, "channel": "C0INCIDENT"}], timeout_ms=20_000)
    await harness.send(env)
    [first] = await harness.posted()
    [second] = await harness.posted("C0INCIDENT", timeout=5)
    await harness.fake.reply("U0CAROL", "C0INCIDENT", second.ts, "No")
    result = await harness.result(env["reply_to"])
    assert result["slack"]["channel"] == "C0INCIDENT" and result["via"] == "thread"
    await harness.ended("C0DEPLOY", first.ts)
    await harness.ended("C0INCIDENT", second.ts)


async def test_a_message_in_the_dm_of_a_dm_routed_ask(harness: Harness) -> None:
    env = harness.envelope(DEPLOY, route={"user": "U0ALICE"})
    await harness.send(env)
    dm = harness.fake.state.dm_id_for("U0ALICE")
    message = await _message_of(harness, env, dm)
    await harness.fake.say("U0ALICE", dm, "2")
    result = await harness.result(env["reply_to"])
    assert result["answers"][0]["selected"] == [1] and result["via"] == "thread"
    assert result["slack"] == {**result["slack"], "channel": dm, "ts": message.ts}


async def test_answers_typed_can_be_turned_off_per_ask(harness: Harness) -> None:
    env, message = await _ask(harness, DEPLOY, thread_answers=False)
    assert "You can also reply in this thread" not in json.dumps(message.blocks)
    await harness.fake.reply("U0ALICE", "C0DEPLOY", message.ts, "1")
    assert await harness.no_more_results(env["reply_to"], wait=0.4)
    assert harness.fake.ephemerals_for("U0ALICE") == []


async def test_hostile_replies_never_make_the_bot_mention_or_link(harness: Harness) -> None:
    env, message = await _ask(harness, DEPLOY)
    for i, text in enumerate(HOSTILE):
        await harness.fake.reply("U0ALICE", "C0DEPLOY", message.ts, f"{text} - {text}\n{text}")
        await _private(harness, "U0ALICE", i + 1)
    spoken = [*harness.fake.ephemerals_for("U0ALICE"), *harness.fake.thread("C0DEPLOY", message.ts)]
    for said in spoken:
        if getattr(said, "bot_id", "x") is None:
            continue  # alice's own replies
        for out in [said.text, *_texts(said.blocks)]:
            assert "<" not in out and ">" not in out, out
    # The last hostile custom answer, confirmed, is recorded and echoed escaped.
    last = harness.fake.ephemerals_for("U0ALICE")[-1]
    await harness.fake.click("U0ALICE", "C0DEPLOY", last.ts, "slack_ask:reply_confirm")
    result = await harness.result(env["reply_to"])
    assert result["answers"][0]["customText"] == f"{HOSTILE[-1]} - {HOSTILE[-1]}"
    assert result["answers"][0]["note"] == HOSTILE[-1]
    said = await _recorded(harness, "C0DEPLOY", message.ts)
    assert "<" not in said and ">" not in said


def _texts(value: Any) -> list[str]:
    """Every text a person sees in ``value`` (blocks): the ``text`` strings, never a button's value."""
    if isinstance(value, dict):
        found = [value["text"]] if isinstance(value.get("text"), str) else []
        return found + [t for k, v in value.items() if k != "value" for t in _texts(v)]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    return []


async def test_typed_votes_count_like_clicks_on_an_approval(harness: Harness) -> None:
    request = {"questions": [{"id": "ship", "question": "Ship?", "options": ["Approve", "Reject"]}]}
    env, message = await _ask(harness, request, approval={"count": 2})
    await harness.fake.reply("U0ALICE", "C0DEPLOY", message.ts, "1")
    assert await _recorded(harness, "C0DEPLOY", message.ts) == "Vote recorded: Approve (by alice)"
    assert await harness.no_more_results(env["reply_to"], wait=0.3)  # one vote of two
    await harness.fake.click("U0BOB", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    result = await harness.result(env["reply_to"])
    assert result["outcome"] == "answered" and result["via"] == "button"
    assert [v["user"]["id"] for v in result["votes"]] == ["U0ALICE", "U0BOB"]


async def _ask_in_a_thread(harness: Harness) -> tuple[dict[str, Any], Message, Message]:
    """A person's message, and a thread-routed ask posted under it: (envelope, parent, the ask)."""
    parent = await harness.fake.say("U0ALICE", "C0DEPLOY", "Which build goes out?")
    env = harness.envelope(DEPLOY, route={"channel": "C0DEPLOY", "thread_ts": parent.ts})
    await harness.send(env)
    asked = await harness.fake.wait_for(
        lambda: next((m for m in harness.fake.thread("C0DEPLOY", parent.ts) if m.bot_id), None),
        what="the ask in the thread",
    )
    return env, parent, asked


async def test_a_reply_in_the_thread_a_thread_routed_ask_was_asked_in(harness: Harness) -> None:
    env, parent, asked = await _ask_in_a_thread(harness)
    await harness.fake.reply("U0BOB", "C0DEPLOY", parent.ts, "lgtm")  # "Yes" by keyword: confirm
    private = await _private(harness, "U0BOB")
    await harness.fake.click("U0BOB", "C0DEPLOY", private.ts, "slack_ask:reply_confirm")
    result = await harness.result(env["reply_to"])
    assert result["answers"][0]["selected"] == [0] and result["slack"]["ts"] == asked.ts
    await _recorded(harness, "C0DEPLOY", parent.ts)


async def test_a_dm_with_two_pending_asks_answers_neither(harness: Harness) -> None:
    dm = harness.fake.state.dm_id_for("U0ALICE")
    first = harness.envelope(DEPLOY, route={"user": "U0ALICE"})
    second = harness.envelope(SHIP, route={"user": "U0ALICE"})
    for env in (first, second):
        await harness.send(env)
        # Both in the record before the person types: a message typed while the second post is in
        # Slack but not yet recorded finds one ask there and answers it (that window is the bot's
        # record landing after Slack's answer; CI's run without Redis once typed into it).
        await _in_the_record(harness, env, await _message_of(harness, env, dm))
    await harness.fake.say("U0ALICE", dm, "1")
    assert "Several questions are waiting here" in (await _private(harness, "U0ALICE")).text
    assert await harness.no_more_results(first["reply_to"], wait=0.3)
    assert await harness.no_more_results(second["reply_to"], wait=0.1)


@pytest.mark.parametrize("where", ["thread-routed", "dm"])
async def test_an_answer_typed_before_the_bot_recorded_its_post_is_not_lost(
    harness: Harness, where: str
) -> None:
    # Slack shows the ask (and a person can answer it) while the reply to chat.postMessage is still
    # on its way to the bot: the typed answer must wait for the record, not be dropped.
    harness.fake.reply_latency["chat.postMessage"] = 0.8
    if where == "dm":
        env = harness.envelope(DEPLOY, route={"user": "U0ALICE"})
        channel = harness.fake.state.dm_id_for("U0ALICE")
        await harness.send(env)
        message = await _message_of(harness, env, channel)
        await harness.fake.say("U0ALICE", channel, "2")
    else:
        env, parent, message = await _ask_in_a_thread(harness)
        await harness.fake.reply("U0ALICE", "C0DEPLOY", parent.ts, "2")
    result = await harness.result(env["reply_to"])
    assert result["answers"][0]["selected"] == [1] and result["via"] == "thread"
    assert result["slack"]["ts"] == message.ts
    assert await harness.no_more_results(env["reply_to"], wait=0.3)
