"""Deleting a message in the fake Slack sends the bot what real Slack sends.

No thread replies: `message_deleted`. With replies: the message stays as a tombstone and the event is
`message_changed` whose `message.subtype` is `tombstone` (slack-edge/slack-edge#10,
slackapi/java-slack-sdk#1384). Group DMs carry `channel_type: "mpim"`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.playground import FakeSlack, FakeSlackError
from bot.playground.demo import Playground
from tests.fakeslack_helpers import CaptureServer, question_blocks, serve_capture

SECRET = "test-signing-secret"
TOKEN = "xoxb-test-token"


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack.with_demo_workspace(signing_secret=SECRET, bot_token=TOKEN) as running:
        running.add_channel("G0GROUP", "mpdm-alice--bob-1", is_mpim=True, members=["U0ALICE", "U0BOB"])
        yield running


@pytest.fixture
def client(fake: FakeSlack) -> AsyncWebClient:
    return AsyncWebClient(token=TOKEN, base_url=fake.api_url, retry_handlers=[])


@pytest.fixture
async def app(fake: FakeSlack) -> AsyncIterator[CaptureServer]:
    async with serve_capture(fake) as capture:
        yield capture


def events(app: CaptureServer) -> list[dict[str, Any]]:
    return [json.loads(r.body)["event"] for r in app.requests if r.body.startswith("{")]


async def post_with_replies(fake: FakeSlack, client: AsyncWebClient, channel: str = "C0DEPLOY") -> str:
    posted = await client.chat_postMessage(channel=channel, text="Deploy now?", blocks=question_blocks())
    await client.chat_postMessage(channel=channel, text="Still waiting (reminder 1)", thread_ts=posted["ts"])
    await fake.say("U0ALICE", channel, "looking", thread_ts=posted["ts"])
    return str(posted["ts"])


async def test_a_message_without_replies_is_gone_and_the_bot_gets_message_deleted(
    fake: FakeSlack, client: AsyncWebClient, app: CaptureServer
) -> None:
    posted = await client.chat_postMessage(channel="C0DEPLOY", text="Deploy now?", blocks=question_blocks())

    response = await fake.delete_message("C0DEPLOY", posted["ts"])

    assert response is not None and response.status == 200
    # The bot also hears its own post (as from Slack): the delete's event is the one with a subtype.
    (event,) = [e for e in events(app) if e.get("subtype")]
    assert event["subtype"] == "message_deleted"
    assert event["deleted_ts"] == posted["ts"]
    assert event["previous_message"]["blocks"][1]["elements"][0]["action_id"] == "choose:0"
    assert event["channel_type"] == "channel"
    assert fake.messages("C0DEPLOY") == []


async def test_a_thread_parent_becomes_a_tombstone_and_the_bot_gets_message_changed(
    fake: FakeSlack, client: AsyncWebClient, app: CaptureServer
) -> None:
    ts = await post_with_replies(fake, client)
    app.requests.clear()

    await fake.delete_message("C0DEPLOY", ts)

    (event,) = events(app)
    assert event["subtype"] == "message_changed"
    assert event["channel"] == "C0DEPLOY"
    assert event["channel_type"] == "channel"
    assert event["message"] == {
        "type": "message",
        "subtype": "tombstone",
        "text": "This message was deleted.",
        "user": "USLACKBOT",
        "hidden": True,
        "ts": ts,
        "thread_ts": ts,
        "parent_user_id": "USLACKBOT",
        "reply_count": 2,
        "reply_users_count": 2,
        "latest_reply": fake.thread("C0DEPLOY", ts)[-1].ts,
        "reply_users": [fake.state.bot.user_id, "U0ALICE"],
        "is_locked": False,
        "subscribed": False,
    }
    previous = event["previous_message"]
    assert (previous["ts"], previous["user"], previous["reply_count"]) == (ts, fake.state.bot.user_id, 2)
    assert previous["blocks"][1]["elements"][0]["action_id"] == "choose:0"
    # The placeholder keeps its place and its thread; nothing of the ask is left to click.
    parent = fake.state.find_message("C0DEPLOY", ts)
    assert parent is not None and parent.tombstone and parent.blocks == []
    assert parent.text == "This message was deleted."
    assert len(fake.thread("C0DEPLOY", ts)) == 2
    with pytest.raises(FakeSlackError, match="no element with"):
        await fake.click("U0ALICE", "C0DEPLOY", ts, "choose:0")


async def test_a_tombstone_cannot_be_updated_by_the_bot_or_deleted_again(
    fake: FakeSlack, client: AsyncWebClient, app: CaptureServer
) -> None:
    ts = await post_with_replies(fake, client)
    await fake.delete_message("C0DEPLOY", ts)

    with pytest.raises(SlackApiError, match="cant_update_message"):
        await client.chat_update(channel="C0DEPLOY", ts=ts, text="ended")
    with pytest.raises(FakeSlackError, match="already deleted"):
        await fake.delete_message("C0DEPLOY", ts)


async def test_deleting_in_a_group_dm_says_mpim(
    fake: FakeSlack, client: AsyncWebClient, app: CaptureServer
) -> None:
    alone = await client.chat_postMessage(channel="G0GROUP", text="Which one?", blocks=question_blocks())
    threaded = await post_with_replies(fake, client, channel="G0GROUP")
    app.requests.clear()

    await fake.delete_message("G0GROUP", alone["ts"])
    await fake.delete_message("G0GROUP", threaded)

    deleted, changed = events(app)
    assert (deleted["subtype"], deleted["channel_type"], deleted["channel"]) == (
        "message_deleted",
        "mpim",
        "G0GROUP",
    )
    assert (changed["subtype"], changed["message"]["subtype"], changed["channel_type"]) == (
        "message_changed",
        "tombstone",
        "mpim",
    )
    info = await client.conversations_info(channel="G0GROUP")
    assert (info["channel"]["is_mpim"], info["channel"]["is_private"], info["channel"]["is_channel"]) == (
        True,
        True,
        False,
    )


async def test_the_bots_own_deletes_follow_the_same_rule(
    fake: FakeSlack, client: AsyncWebClient, app: CaptureServer
) -> None:
    threaded = await post_with_replies(fake, client)
    plain_ts = (await client.chat_postMessage(channel="C0DEPLOY", text="no thread"))["ts"]
    app.requests.clear()

    await client.chat_delete(channel="C0DEPLOY", ts=plain_ts)
    await client.chat_delete(channel="C0DEPLOY", ts=threaded)

    await fake.wait_for(lambda: len(events(app)) == 2, what="two deletion events")
    assert sorted(e["subtype"] for e in events(app)) == ["message_changed", "message_deleted"]


async def test_delete_original_through_a_response_url_tombstones_a_thread_parent(
    fake: FakeSlack, client: AsyncWebClient, app: CaptureServer
) -> None:
    ts = await post_with_replies(fake, client)
    await fake.click("U0ALICE", "C0DEPLOY", ts, "choose:0")
    url = fake.state.response_urls[next(reversed(fake.state.response_urls))]
    app.requests.clear()

    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{fake.base_url}response/{url.token}", json={"delete_original": True}) as reply,
    ):
        assert reply.status == 200

    await fake.wait_for(lambda: events(app), what="the deletion event")
    (event,) = events(app)
    assert (event["subtype"], event["message"]["subtype"]) == ("message_changed", "tombstone")


async def test_the_bot_hears_nothing_where_it_is_not_a_member(
    fake: FakeSlack, client: AsyncWebClient, app: CaptureServer
) -> None:
    # #random: the bot may post there (chat:write.public) without being in it, so it gets no events.
    posted = await client.chat_postMessage(channel="C0RANDOM", text="hello")
    app.requests.clear()

    assert await fake.delete_message("C0RANDOM", posted["ts"]) is None
    assert events(app) == []


def test_the_playgrounds_delete_dialog_says_what_the_bot_will_get() -> None:
    playground = Playground()
    ws = playground.fake.state
    alone = ws.post_as_bot("C0DEPLOY", text="alone", blocks=[], thread_ts=None)
    parent = ws.post_as_bot("C0DEPLOY", text="parent", blocks=[], thread_ts=None)
    ws.post_as_bot("C0DEPLOY", text="reminder", blocks=[], thread_ts=parent.ts)
    elsewhere = ws.post_as_bot("C0RANDOM", text="not a member", blocks=[], thread_ts=None)

    def note(channel: str, ts: str) -> str:
        (shown,) = [m for m in playground.page.page_state()["messages"][channel] if m["ts"] == ts]
        return str(shown["delete_note"])

    assert "sends the bot message_deleted" in note("C0DEPLOY", alone.ts)
    assert "message_changed (a tombstone)" in note("C0DEPLOY", parent.ts)
    assert "not a member of #random, so Slack sends it no event" in note("C0RANDOM", elsewhere.ts)
    ws.delete_message(parent)
    assert note("C0DEPLOY", parent.ts).startswith("Already deleted")


async def test_after_joining_a_public_channel_the_bot_hears_its_deletes(
    fake: FakeSlack, client: AsyncWebClient, app: CaptureServer
) -> None:
    posted = await client.chat_postMessage(channel="C0RANDOM", text="hello")
    joined = await client.conversations_join(channel="C0RANDOM")
    assert joined["channel"]["is_member"] is True
    assert (await client.conversations_join(channel="C0RANDOM"))["warning"] == "already_in_channel"
    app.requests.clear()

    await fake.delete_message("C0RANDOM", posted["ts"])

    assert [e["subtype"] for e in events(app)] == ["message_deleted"]


@pytest.mark.parametrize(
    ("channel", "error"),
    [
        ("C0PRIV", "channel_not_found"),  # private and the bot is not in it: invisible
        ("C0INCIDENT", "method_not_supported_for_channel_type"),
        ("G0GROUP", "method_not_supported_for_channel_type"),
        ("C0ARCH", "is_archived"),
        ("C0NOPE", "channel_not_found"),
    ],
)
async def test_only_public_live_channels_can_be_joined(
    client: AsyncWebClient, channel: str, error: str
) -> None:
    with pytest.raises(SlackApiError, match=error):
        await client.conversations_join(channel=channel)
