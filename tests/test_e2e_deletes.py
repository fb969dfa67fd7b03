"""End to end: deleting an ask's message, or archiving its channel, dismisses the ask, whatever event
Slack sends for it and whenever it comes; the bot's own deletes of its copies never do.

A message with thread replies (a reminded ask has some) becomes a tombstone and Slack sends
`message_changed`; in a group DM the events carry `channel_type: "mpim"`. Slack sends a message's
events while the reply to `chat.postMessage` may still be on its way, so a delete or an archive can
reach the bot before it has recorded the message.
"""

from __future__ import annotations

import pytest

from bot.playground import Message
from bot.storage.keys import slot_tag
from tests.harness import Harness

Q = {"id": "cache", "question": "Enable the cache?", "options": ["Yes", "No"], "recommended": 1}
GROUP = "G0GROUP"


@pytest.mark.parametrize(
    ("channel", "thread"),
    [("C0DEPLOY", False), ("C0DEPLOY", True), (GROUP, False), (GROUP, True)],
    ids=["channel-deleted", "channel-tombstone", "mpim-deleted", "mpim-tombstone"],
)
async def test_tombstone_and_mpim_deletions_dismiss(harness: Harness, channel: str, thread: bool) -> None:
    harness.fake.add_channel(GROUP, "mpdm-alice--bob-1", is_mpim=True, members=["U0ALICE", "U0BOB"])
    env = harness.envelope(Q, route={"channel": channel})
    await harness.send(env)
    [message] = await harness.posted(channel)
    if thread:
        await harness.fake.say("U0ALICE", channel, "looking into it", thread_ts=message.ts)

    await harness.fake.delete_message(channel, message.ts)

    result = await harness.result(env["reply_to"])
    assert result["outcome"] == "dismissed"
    assert result["text"] == "User answers:\ncache: (dismissed)"
    (event,) = [e.envelope["event"] for e in harness.fake.state.events if e.envelope["event"].get("hidden")]
    assert event["subtype"] == ("message_changed" if thread else "message_deleted")
    assert event["channel_type"] == ("mpim" if channel == GROUP else "channel")


async def test_a_reminded_ask_whose_message_is_deleted_is_dismissed(harness: Harness) -> None:
    await harness.stop()
    await harness.start_replica(min_remind_ms=300)
    env = harness.envelope(Q, remind_every_ms=300, timeout_ms=30_000)
    await harness.send(env)
    [message] = await harness.posted()
    await harness.fake.wait_for(
        lambda: harness.fake.thread("C0DEPLOY", message.ts), timeout=5, what="a reminder"
    )

    await harness.fake.delete_message("C0DEPLOY", message.ts)

    assert (await harness.result(env["reply_to"]))["outcome"] == "dismissed"
    parent = harness.fake.state.find_message("C0DEPLOY", message.ts)
    assert parent is not None and parent.tombstone  # Slack's placeholder, with the reminders under it


@pytest.mark.parametrize("gone", ["message-deleted", "channel-archived"])
@pytest.mark.parametrize("reply_s", [0.0, 1.0], ids=["recorded-first", "event-first"])
async def test_deleting_the_message_or_archiving_its_channel_dismisses_the_ask(
    harness: Harness, gone: str, reply_s: float
) -> None:
    # With the reply to chat.postMessage held back, Slack's event (sent once the message exists)
    # reaches the bot before the bot has recorded the message it is about.
    harness.fake.reply_latency["chat.postMessage"] = reply_s
    env = harness.envelope(Q)
    await harness.send(env)
    [message] = await harness.posted()

    if gone == "message-deleted":
        await harness.fake.delete_message("C0DEPLOY", message.ts)
    else:
        await harness.fake.archive_channel("C0DEPLOY", by="U0ALICE")

    result = await harness.result(env["reply_to"])
    assert result["outcome"] == "dismissed"
    assert result["text"] == "User answers:\ncache: (dismissed)"


async def test_the_copy_a_losing_sweeper_withdraws_does_not_dismiss_the_ask(harness: Harness) -> None:
    # Two sweepers post the same escalation step (one outlived its timer lease); the loser of
    # advance.lua deletes its copy, and Slack tells the bot of that delete.
    env = harness.envelope(Q, escalate=[{"after_ms": 600_000, "channel": "C0INCIDENT"}], timeout_ms=900_000)
    await harness.send(env)
    [first] = await harness.posted()
    runtime = harness.replicas[0]
    tag, timers = slot_tag(env["reply_to"]), runtime.engine.timers
    stale = await runtime.store.load(tag, env["ask_id"])  # the slow sweeper's snapshot, at step 0
    assert stale is not None and stale.step == 0
    step, now = stale.record.escalate[0], await runtime.store.server_time_ms()
    assert await timers._escalate(stale, 0, step, now, None)  # the other sweeper: step 0 -> 1
    [winner] = await harness.posted("C0INCIDENT")
    assert await timers._escalate(stale, 0, step, now, None)  # the slow one, from its stale snapshot
    [loser] = [m for m in harness.fake.messages("C0INCIDENT", include_deleted=True) if m.deleted]
    await harness.fake.wait_for(
        lambda: _deletion_delivered(harness, "C0INCIDENT", loser), what="the delete event delivered"
    )

    assert await harness.no_more_results(env["reply_to"], wait=1.0), "the bot's own delete dismissed it"
    loaded = await runtime.store.load(tag, env["ask_id"])
    assert loaded is not None and loaded.state == "posted" and loaded.step == 1
    assert [(m.channel, m.ts) for m in loaded.messages] == [("C0DEPLOY", first.ts), ("C0INCIDENT", winner.ts)]
    assert loaded.withdrawn == {("C0INCIDENT", loser.ts)}
    await harness.fake.click("U0ALICE", "C0INCIDENT", winner.ts, "slack_ask:choose:0")
    assert (await harness.result(env["reply_to"]))["outcome"] == "answered"
    await harness.ended("C0DEPLOY", first.ts)
    await harness.ended("C0INCIDENT", winner.ts)


def _deletion_delivered(harness: Harness, channel: str, message: Message) -> bool:
    """The bot has answered Slack's message_deleted event for ``message``."""
    return any(
        e.delivered
        and e.envelope["event"].get("subtype") == "message_deleted"
        and e.envelope["event"].get("channel") == channel
        and e.envelope["event"].get("deleted_ts") == message.ts
        for e in harness.fake.state.events
    )


@pytest.mark.parametrize("ending", ["click", "vote", "timeout"])
async def test_a_withdrawn_copy_slack_did_not_delete_goes_when_its_pending_ask_ends(
    harness: Harness, ending: str
) -> None:
    # The losing sweeper's copy is withdrawn while Slack fails every chat.delete: it stays in Slack,
    # outside the record, while the ask is pending. The ending (a click's, or the deadline's in the
    # sweeper's batch; the deciding vote of an approval) deletes it with the redraw: no live button is
    # left once the ask has ended.
    # (An escalation step must come before the deadline; this test takes the step itself, at once.)
    after_ms, timeout_ms = (5_000, 6_000) if ending == "timeout" else (600_000, 900_000)
    approval = {"approval": {"count": 2}} if ending == "vote" else {}
    env = harness.envelope(
        Q, escalate=[{"after_ms": after_ms, "channel": "C0INCIDENT"}], timeout_ms=timeout_ms, **approval
    )
    await harness.send(env)
    [first] = await harness.posted()
    runtime = harness.replicas[0]
    tag, timers = slot_tag(env["reply_to"]), runtime.engine.timers
    stale = await runtime.store.load(tag, env["ask_id"])
    assert stale is not None
    step, now = stale.record.escalate[0], await runtime.store.server_time_ms()
    assert await timers._escalate(stale, 0, step, now, None)
    [winner] = await harness.posted("C0INCIDENT")
    harness.fake.fail_next("chat.delete", status=503, times=10_000)
    assert await timers._escalate(stale, 0, step, now, None)  # its delete gives up (Slack down)
    harness.fake.clear_faults()
    [loser] = [m for m in harness.fake.messages("C0INCIDENT") if m.ts != winner.ts]
    loaded = await runtime.store.load(tag, env["ask_id"])
    assert loaded is not None and loaded.withdrawn == {("C0INCIDENT", loser.ts)}
    assert loaded.state == "posted" and not loaded.finalized

    if ending != "timeout":
        await harness.fake.click("U0ALICE", "C0INCIDENT", winner.ts, "slack_ask:choose:0")
    if ending == "vote":  # the second approval decides
        await harness.fake.click("U0BOB", "C0DEPLOY", first.ts, "slack_ask:choose:0")
    assert (await harness.result(env["reply_to"], timeout=15))["outcome"] == (
        "timeout" if ending == "timeout" else "answered"
    )
    await harness.ended("C0DEPLOY", first.ts)
    await harness.ended("C0INCIDENT", winner.ts)
    await harness.fake.wait_for(
        lambda: (
            harness.fake.state.find_message("C0INCIDENT", loser.ts) is None
            or harness.fake.state.find_message("C0INCIDENT", loser.ts).deleted  # type: ignore[union-attr]
            or None
        ),
        what="the withdrawn copy deleted",
    )
    assert [m.ts for m in harness.fake.messages("C0INCIDENT")] == [winner.ts]
