"""FakeSlack behaves like Slack for the real slack_sdk client and the real Bolt app, over loopback HTTP."""

from __future__ import annotations

import json
import re
import time
import urllib.parse
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient

from bot.playground import FakeSlack, FakeSlackError, webapi
from tests.fakeslack_helpers import modal, plain, question_blocks, serve_bolt, serve_capture

SECRET = "test-signing-secret"
TOKEN = "xoxb-test-token"
TS = re.compile(r"^\d{10}\.\d{6}$")


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack.with_demo_workspace(signing_secret=SECRET, bot_token=TOKEN) as running:
        yield running


@pytest.fixture
def client(fake: FakeSlack) -> AsyncWebClient:
    # No retry handlers: each test sees exactly what Slack answered.
    return AsyncWebClient(token=TOKEN, base_url=fake.api_url, retry_handlers=[])


async def slack_error(call: Any) -> SlackApiError:
    with pytest.raises(SlackApiError) as caught:
        await call
    return caught.value


def recorder(into: list[str]) -> Any:
    """A Bolt event listener that records each deleted message's ts."""

    async def on_deleted(event: dict[str, Any]) -> None:
        into.append(event["deleted_ts"])

    return on_deleted


async def post_question(client: AsyncWebClient, channel: str = "C0DEPLOY") -> str:
    response = await client.chat_postMessage(channel=channel, text="Deploy now?", blocks=question_blocks())
    return str(response["ts"])


class TestMessages:
    async def test_post_message_answers_like_slack_and_stores_the_message(
        self, fake: FakeSlack, client: AsyncWebClient
    ) -> None:
        response = await client.chat_postMessage(channel="C0DEPLOY", text="hello", blocks=question_blocks())

        assert response["ok"] is True
        assert response["channel"] == "C0DEPLOY"
        assert TS.match(response["ts"])
        assert response["message"]["bot_id"] == fake.state.bot.bot_id
        assert response["message"]["blocks"][1]["elements"][0]["value"] == "0"
        stored = fake.last_message("C0DEPLOY")
        assert stored is not None
        assert (stored.ts, stored.text, stored.user) == (response["ts"], "hello", fake.state.bot.user_id)

    async def test_blocks_sent_as_a_json_string_are_accepted(
        self, fake: FakeSlack, client: AsyncWebClient
    ) -> None:
        blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "hi"}}]

        await client.api_call("chat.postMessage", data={"channel": "C0DEPLOY", "blocks": json.dumps(blocks)})

        stored = fake.last_message("C0DEPLOY")
        assert stored is not None
        assert stored.blocks[0]["text"]["text"] == "hi"
        assert stored.blocks[0]["block_id"]  # Slack generates block ids the app left out

    async def test_ts_values_are_unique_and_increasing(self, fake: FakeSlack, client: AsyncWebClient) -> None:
        stamps = [(await client.chat_postMessage(channel="C0DEPLOY", text=str(i)))["ts"] for i in range(20)]

        assert stamps == sorted(stamps, key=float)
        assert len(set(stamps)) == 20

    async def test_posting_to_a_user_id_lands_in_their_stable_dm(
        self, fake: FakeSlack, client: AsyncWebClient
    ) -> None:
        opened = await client.conversations_open(users="U0ALICE")
        posted = await client.chat_postMessage(channel="U0ALICE", text="psst")
        reopened = await client.conversations_open(users="U0ALICE")

        assert opened["channel"]["id"] == posted["channel"] == reopened["channel"]["id"] == "D0ALICE"
        assert reopened["already_open"] is True
        assert [m.text for m in fake.messages("U0ALICE")] == ["psst"]

    async def test_thread_replies_keep_their_thread_ts(self, fake: FakeSlack, client: AsyncWebClient) -> None:
        parent = await post_question(client)

        await client.chat_postMessage(channel="C0DEPLOY", text="reminder", thread_ts=parent)

        assert [m.text for m in fake.thread("C0DEPLOY", parent)] == ["reminder"]

    @pytest.mark.parametrize(
        ("kwargs", "error"),
        [
            ({"channel": "C0NOPE", "text": "x"}, "channel_not_found"),
            ({"channel": "C0PRIV", "text": "x"}, "channel_not_found"),  # private, bot not in: invisible
            ({"channel": "C0ARCH", "text": "x"}, "is_archived"),
            ({"channel": "C0DEPLOY"}, "no_text"),
            ({"channel": "C0DEPLOY", "text": "x" * 40_001}, "msg_too_long"),
            ({"channel": "U0DEPLOYBOT", "text": "x"}, "cannot_dm_bot"),
            ({"channel": "U0DAVE", "text": "x"}, "user_disabled"),
            ({"channel": "C0DEPLOY", "blocks": [{"text": "no type"}]}, "invalid_blocks"),
        ],
    )
    async def test_post_message_refusals_use_slack_error_names(
        self, client: AsyncWebClient, kwargs: dict[str, Any], error: str
    ) -> None:
        # api_call: chat_postMessage would warn about the missing text before Slack could refuse it.
        caught = await slack_error(client.api_call("chat.postMessage", json=kwargs))

        assert caught.response.status_code == 200
        assert caught.response["error"] == error

    async def test_public_channel_without_the_bot_needs_chat_write_public(
        self, fake: FakeSlack, client: AsyncWebClient
    ) -> None:
        await client.chat_postMessage(channel="C0RANDOM", text="allowed with chat:write.public")
        fake.chat_write_public = False

        caught = await slack_error(client.chat_postMessage(channel="C0RANDOM", text="x"))

        assert caught.response["error"] == "not_in_channel"

    async def test_blockkit_problems_come_back_as_invalid_blocks(
        self, monkeypatch: pytest.MonkeyPatch, client: AsyncWebClient
    ) -> None:
        monkeypatch.setattr(
            webapi, "validate_message", lambda payload: ["too many buttons [json-pointer:/blocks/1]"]
        )

        caught = await slack_error(
            client.chat_postMessage(channel="C0DEPLOY", text="x", blocks=question_blocks())
        )

        assert caught.response["error"] == "invalid_blocks"
        assert caught.response["response_metadata"]["messages"] == [
            "[ERROR] too many buttons [json-pointer:/blocks/1]"
        ]

    async def test_update_replaces_content_and_keeps_the_old_version(
        self, fake: FakeSlack, client: AsyncWebClient
    ) -> None:
        ts = await post_question(client)

        response = await client.chat_update(channel="C0DEPLOY", ts=ts, text="Answered by alice", blocks=[])

        assert response["message"]["edited"]["user"] == fake.state.bot.user_id
        stored = fake.last_message("C0DEPLOY")
        assert stored is not None
        assert stored.text == "Answered by alice"
        assert [edit.text for edit in stored.edits] == ["Deploy now?"]

    async def test_metadata_is_kept_by_an_update_unless_cleared(
        self, fake: FakeSlack, client: AsyncWebClient
    ) -> None:
        metadata = {"event_type": "slack_ask", "event_payload": {"ask_id": "a1"}}
        ts = (await client.chat_postMessage(channel="C0DEPLOY", text="Q", metadata=metadata))["ts"]

        kept = await client.chat_update(channel="C0DEPLOY", ts=ts, text="Q2")
        cleared = await client.chat_update(channel="C0DEPLOY", ts=ts, text="Q3", metadata={})

        assert kept["message"]["metadata"] == metadata
        assert "metadata" not in cleared["message"]

    async def test_update_refuses_other_peoples_and_missing_messages(
        self, fake: FakeSlack, client: AsyncWebClient
    ) -> None:
        human = await fake.say("U0ALICE", "C0DEPLOY", "I wrote this")

        not_mine = await slack_error(client.chat_update(channel="C0DEPLOY", ts=human.ts, text="x"))
        missing = await slack_error(client.chat_update(channel="C0DEPLOY", ts="1.000001", text="x"))

        assert not_mine.response["error"] == "cant_update_message"
        assert missing.response["error"] == "message_not_found"

    async def test_delete_marks_the_message_deleted(self, fake: FakeSlack, client: AsyncWebClient) -> None:
        ts = await post_question(client)

        await client.chat_delete(channel="C0DEPLOY", ts=ts)

        assert fake.messages("C0DEPLOY") == []
        assert fake.messages("C0DEPLOY", include_deleted=True)[0].deleted is True

    async def test_ephemeral_reaches_only_a_member(self, fake: FakeSlack, client: AsyncWebClient) -> None:
        response = await client.chat_postEphemeral(channel="C0DEPLOY", user="U0BOB", text="only you")
        outsider = await slack_error(client.chat_postEphemeral(channel="C0INCIDENT", user="U0BOB", text="x"))

        assert TS.match(response["message_ts"])
        assert [(e.text, e.via) for e in fake.ephemerals_for("U0BOB")] == [("only you", "api")]
        assert outsider.response["error"] == "user_not_in_channel"

    async def test_permalink_points_at_the_message(self, client: AsyncWebClient) -> None:
        ts = await post_question(client)

        response = await client.chat_getPermalink(channel="C0DEPLOY", message_ts=ts)

        assert response["permalink"].endswith(f"/archives/C0DEPLOY/p{ts.replace('.', '')}")


class TestDirectory:
    async def test_conversation_info_and_members(self, fake: FakeSlack, client: AsyncWebClient) -> None:
        info = await client.conversations_info(channel="C0INCIDENT")
        members = await client.conversations_members(channel="C0INCIDENT")

        assert (info["channel"]["is_private"], info["channel"]["is_member"]) == (True, True)
        assert members["members"] == ["U0ALICE", "U0CAROL", fake.state.bot.user_id]

    async def test_private_channel_without_the_bot_does_not_exist_for_it(
        self, client: AsyncWebClient
    ) -> None:
        caught = await slack_error(client.conversations_info(channel="C0PRIV"))

        assert caught.response["error"] == "channel_not_found"

    @pytest.mark.parametrize(
        ("users", "error"),
        [("U0NOBODY", "user_not_found"), ("U0DEPLOYBOT", "cannot_dm_bot"), ("U0DAVE", "user_disabled")],
    )
    async def test_opening_a_dm_refusals(self, client: AsyncWebClient, users: str, error: str) -> None:
        caught = await slack_error(client.conversations_open(users=users))

        assert caught.response["error"] == error

    async def test_users_are_found_by_id_and_email(self, client: AsyncWebClient) -> None:
        by_id = await client.users_info(user="U0BOB")
        by_email = await client.users_lookupByEmail(email="carol@example.com")
        deleted = await client.users_info(user="U0DAVE")

        assert (by_id["user"]["name"], by_id["user"]["tz_offset"]) == ("bob", -18000)
        assert by_email["user"]["id"] == "U0CAROL"
        assert deleted["user"]["deleted"] is True

    async def test_directory_lookups_report_missing_things(self, client: AsyncWebClient) -> None:
        no_user = await slack_error(client.users_info(user="U0NOBODY"))
        no_email = await slack_error(client.users_lookupByEmail(email="nobody@example.com"))
        no_group = await slack_error(client.usergroups_users_list(usergroup="S0NOPE"))

        assert [e.response["error"] for e in (no_user, no_email, no_group)] == [
            "user_not_found",
            "users_not_found",
            "no_such_subteam",
        ]

    async def test_usergroup_expands_to_its_members(self, client: AsyncWebClient) -> None:
        response = await client.usergroups_users_list(usergroup="S0ONCALL")

        assert response["users"] == ["U0ALICE", "U0BOB"]

    async def test_wrong_token_is_invalid_auth(self, fake: FakeSlack) -> None:
        stranger = AsyncWebClient(token="xoxb-wrong", base_url=fake.api_url, retry_handlers=[])

        caught = await slack_error(stranger.auth_test())

        assert caught.response["error"] == "invalid_auth"

    async def test_unknown_method_is_refused(self, client: AsyncWebClient) -> None:
        caught = await slack_error(client.api_call("chat.teleport"))

        assert caught.response["error"] == "unknown_method"

    async def test_every_call_is_logged_without_the_token(
        self, fake: FakeSlack, client: AsyncWebClient
    ) -> None:
        await client.users_info(user="U0ALICE")

        [call] = fake.find_calls("users.info")
        assert call.params == {"user": "U0ALICE"}
        assert call.ok


class TestFaults:
    async def test_ratelimited_answer_carries_retry_after(
        self, fake: FakeSlack, client: AsyncWebClient
    ) -> None:
        fake.fail_next("chat.postMessage", retry_after=7)

        caught = await slack_error(client.chat_postMessage(channel="C0DEPLOY", text="x"))

        assert caught.response.status_code == 429
        assert caught.response["error"] == "ratelimited"
        assert caught.response.headers["retry-after"] == "7"

    async def test_rate_limit_retry_handler_waits_retry_after_then_succeeds(self, fake: FakeSlack) -> None:
        retrying = AsyncWebClient(
            token=TOKEN,
            base_url=fake.api_url,
            retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=1)],
        )
        fake.fail_next("chat.postMessage", retry_after=1)
        started = time.monotonic()

        response = await retrying.chat_postMessage(channel="C0DEPLOY", text="patient")

        assert response["ok"] is True
        assert time.monotonic() - started >= 1.0
        assert [call.status for call in fake.find_calls("chat.postMessage")] == [429, 200]

    async def test_server_errors_are_retried_by_the_server_error_handler(self, fake: FakeSlack) -> None:
        retrying = AsyncWebClient(
            token=TOKEN,
            base_url=fake.api_url,
            retry_handlers=[AsyncServerErrorRetryHandler(max_retry_count=2)],
        )
        fake.fail_next("chat.postMessage", status=500)
        fake.fail_next("chat.postMessage", status=503)

        response = await retrying.chat_postMessage(channel="C0DEPLOY", text="eventually")

        assert response["ok"] is True
        assert [call.status for call in fake.find_calls("chat.postMessage")] == [500, 503, 200]

    async def test_server_error_reaches_a_client_without_retries(
        self, fake: FakeSlack, client: AsyncWebClient
    ) -> None:
        fake.fail_next("users.info", status=500)

        caught = await slack_error(client.users_info(user="U0ALICE"))

        assert caught.response.status_code == 500

    async def test_injected_api_error_is_http_200_ok_false(
        self, fake: FakeSlack, client: AsyncWebClient
    ) -> None:
        fake.fail_next("chat.postMessage", error="channel_not_found", times=2)

        first = await slack_error(client.chat_postMessage(channel="C0DEPLOY", text="x"))
        second = await slack_error(client.chat_postMessage(channel="C0DEPLOY", text="x"))
        third = await client.chat_postMessage(channel="C0DEPLOY", text="x")

        assert [first.response.status_code, second.response.status_code] == [200, 200]
        assert first.response["error"] == second.response["error"] == "channel_not_found"
        assert third["ok"] is True

    async def test_unreachable_slack_drops_connections_until_restored(
        self, fake: FakeSlack, client: AsyncWebClient
    ) -> None:
        fake.set_unreachable(True)

        with pytest.raises(aiohttp.ClientError):
            await client.chat_postMessage(channel="C0DEPLOY", text="x")
        fake.set_unreachable(False)
        response = await client.chat_postMessage(channel="C0DEPLOY", text="x")

        assert response["ok"] is True

    async def test_latency_delays_every_answer(self, fake: FakeSlack, client: AsyncWebClient) -> None:
        fake.latency = 0.2
        started = time.monotonic()

        await client.auth_test()

        assert time.monotonic() - started >= 0.2


class TestViews:
    async def test_views_open_needs_a_fresh_unused_trigger(
        self, fake: FakeSlack, client: AsyncWebClient
    ) -> None:
        trigger = fake.issue_trigger("U0ALICE")
        opened = await client.views_open(trigger_id=trigger, view=modal())
        reused = await slack_error(client.views_open(trigger_id=trigger, view=modal()))
        bogus = await slack_error(client.views_open(trigger_id="1.2.nope", view=modal()))
        stale = fake.issue_trigger("U0ALICE")
        fake.advance_clock(3.5)
        expired = await slack_error(client.views_open(trigger_id=stale, view=modal()))

        assert [v.id for v in fake.open_views("U0ALICE")] == [opened["view"]["id"]]
        assert opened["view"]["state"]["values"] == {
            "choice": {"pick": {"type": "radio_buttons", "selected_option": None}},
            "extras": {"extras": {"type": "checkboxes", "selected_options": []}},
            "size": {"size": {"type": "static_select", "selected_option": None}},
            "note": {"note": {"type": "plain_text_input", "value": None}},
        }
        assert reused.response["error"] == "exchanged_trigger_id"
        assert bogus.response["error"] == "invalid_trigger_id"
        assert expired.response["error"] == "expired_trigger_id"

    async def test_views_update_refuses_a_stale_hash(self, fake: FakeSlack, client: AsyncWebClient) -> None:
        opened = await client.views_open(trigger_id=fake.issue_trigger("U0ALICE"), view=modal())
        view_id, first_hash = opened["view"]["id"], opened["view"]["hash"]

        updated = await client.views_update(view_id=view_id, hash=first_hash, view=modal("second"))
        stale = await slack_error(client.views_update(view_id=view_id, hash=first_hash, view=modal("third")))

        assert updated["view"]["callback_id"] == "second"
        assert updated["view"]["hash"] != first_hash
        assert stale.response["error"] == "hash_conflict"

    async def test_views_push_stacks_up_to_three(self, fake: FakeSlack, client: AsyncWebClient) -> None:
        await client.views_open(trigger_id=fake.issue_trigger("U0ALICE"), view=modal())
        for _ in range(2):
            await client.views_push(trigger_id=fake.issue_trigger("U0ALICE"), view=modal("pushed"))

        caught = await slack_error(client.views_push(trigger_id=fake.issue_trigger("U0ALICE"), view=modal()))

        assert len(fake.open_views("U0ALICE")) == 3
        assert caught.response["error"] == "push_limit_reached"

    async def test_invalid_view_is_invalid_arguments(self, fake: FakeSlack, client: AsyncWebClient) -> None:
        caught = await slack_error(
            client.views_open(trigger_id=fake.issue_trigger("U0ALICE"), view={"blocks": []})
        )

        assert caught.response["error"] == "invalid_arguments"
        assert caught.response["response_metadata"]["messages"]


class TestSignedPayloads:
    async def test_click_payload_is_signed_and_shaped_like_slack(
        self, fake: FakeSlack, client: AsyncWebClient
    ) -> None:
        ts = await post_question(client)
        async with serve_capture(fake) as capture:
            response = await fake.click("U0ALICE", "C0DEPLOY", ts, "choose:1", value="1")

        [request] = capture.requests
        assert response.status == 200
        assert SignatureVerifier(SECRET).is_valid_request(request.body, request.headers)
        assert request.headers["Content-Type"] == "application/x-www-form-urlencoded"
        payload = json.loads(urllib.parse.parse_qs(request.body)["payload"][0])
        assert payload["type"] == "block_actions"
        assert payload["user"] == {"id": "U0ALICE", "username": "alice", "name": "alice", "team_id": "T0FAKE"}
        assert payload["container"] == {
            "type": "message",
            "message_ts": ts,
            "channel_id": "C0DEPLOY",
            "is_ephemeral": False,
        }
        assert payload["channel"] == {"id": "C0DEPLOY", "name": "deploys"}
        assert payload["message"]["ts"] == ts
        assert payload["response_url"].startswith(fake.base_url + "response/")
        [action] = payload["actions"]
        assert (action["action_id"], action["block_id"], action["value"], action["type"]) == (
            "choose:1",
            "q1-buttons",
            "1",
            "button",
        )
        assert payload["state"]["values"]["q1-checks"]["regions"] == {
            "type": "checkboxes",
            "selected_options": [],
        }

    async def test_checkbox_picks_ride_in_the_state_of_the_next_click(
        self, fake: FakeSlack, client: AsyncWebClient
    ) -> None:
        ts = await post_question(client)
        async with serve_capture(fake) as capture:
            await fake.click("U0ALICE", "C0DEPLOY", ts, "regions", value="eu")
            await fake.click("U0ALICE", "C0DEPLOY", ts, "regions", value="asia")
            await fake.click("U0ALICE", "C0DEPLOY", ts, "submit")

        payload = json.loads(urllib.parse.parse_qs(capture.requests[-1].body)["payload"][0])
        picked = payload["state"]["values"]["q1-checks"]["regions"]["selected_options"]
        assert [o["value"] for o in picked] == ["eu", "asia"]

    async def test_clicking_what_was_not_rendered_fails_clearly(
        self, fake: FakeSlack, client: AsyncWebClient
    ) -> None:
        ts = await post_question(client)

        with pytest.raises(
            FakeSlackError, match=r"no element with action_id 'choose:0' with value '7'.*rendered"
        ):
            await fake.click("U0ALICE", "C0DEPLOY", ts, "choose:0", value="7")

    async def test_people_outside_a_private_channel_cannot_click_in_it(
        self, fake: FakeSlack, client: AsyncWebClient
    ) -> None:
        ts = await post_question(client, channel="C0INCIDENT")

        with pytest.raises(FakeSlackError, match="not a member"):
            await fake.click("U0BOB", "C0INCIDENT", ts, "choose:0")

    async def test_clicking_an_ephemeral_message_has_an_ephemeral_container(
        self, fake: FakeSlack, client: AsyncWebClient
    ) -> None:
        sent = await client.chat_postEphemeral(
            channel="C0DEPLOY", user="U0BOB", text="Q", blocks=question_blocks()
        )
        async with serve_capture(fake) as capture:
            await fake.click("U0BOB", "C0DEPLOY", sent["message_ts"], "decline")

        payload = json.loads(urllib.parse.parse_qs(capture.requests[0].body)["payload"][0])
        assert payload["container"]["is_ephemeral"] is True
        assert "message" not in payload
        with pytest.raises(FakeSlackError, match="no message"):
            await fake.click("U0ALICE", "C0DEPLOY", sent["message_ts"], "decline")  # not shown to alice

    async def test_text_typed_in_a_message_input_rides_with_the_next_click(
        self, fake: FakeSlack, client: AsyncWebClient
    ) -> None:
        blocks: list[dict[str, Any]] = [
            {
                "type": "input",
                "block_id": "other",
                "dispatch_action": True,  # typed text reaches the app on Enter, or with the next click
                "label": plain("Other"),
                "element": {"type": "plain_text_input", "action_id": "text"},
            },
            {"type": "actions", "elements": [{"type": "button", "action_id": "send", "text": plain("Send")}]},
        ]
        ts = (await client.chat_postMessage(channel="C0DEPLOY", text="Q", blocks=blocks))["ts"]
        async with serve_capture(fake) as capture:
            fake.enter("U0ALICE", "C0DEPLOY", ts, "text", "my own answer")
            await fake.click("U0ALICE", "C0DEPLOY", ts, "send")

        [request] = capture.requests
        payload = json.loads(urllib.parse.parse_qs(request.body)["payload"][0])
        assert payload["state"]["values"]["other"]["text"] == {
            "type": "plain_text_input",
            "value": "my own answer",
        }

    async def test_click_in_a_modal_has_a_view_container(
        self, fake: FakeSlack, client: AsyncWebClient
    ) -> None:
        view = modal()
        view["blocks"].append(
            {
                "type": "actions",
                "block_id": "more",
                "elements": [{"type": "button", "action_id": "add", "text": plain("Add")}],
            }
        )
        opened = await client.views_open(trigger_id=fake.issue_trigger("U0ALICE"), view=view)
        async with serve_capture(fake) as capture:
            await fake.click_in_view("U0ALICE", opened["view"]["id"], "add")

        payload = json.loads(urllib.parse.parse_qs(capture.requests[0].body)["payload"][0])
        assert payload["container"] == {"type": "view", "view_id": opened["view"]["id"]}
        assert payload["view"]["callback_id"] == "ask-modal"
        assert "response_url" not in payload

    async def test_events_are_signed_event_callbacks(self, fake: FakeSlack) -> None:
        async with serve_capture(fake) as capture:
            await fake.archive_channel("C0DEPLOY", by="U0BOB")

        [request] = capture.requests
        assert SignatureVerifier(SECRET).is_valid_request(request.body, request.headers)
        envelope = json.loads(request.body)
        assert envelope["type"] == "event_callback"
        assert envelope["event"] == {
            "type": "channel_archive",
            "channel": "C0DEPLOY",
            "user": "U0BOB",
            "is_moved": 0,
            "event_ts": envelope["event"]["event_ts"],
        }
        assert fake.state.channels["C0DEPLOY"].is_archived


class TestWithBolt:
    @pytest.fixture
    def app(self, fake: FakeSlack) -> AsyncApp:
        return AsyncApp(client=AsyncWebClient(token=TOKEN, base_url=fake.api_url), signing_secret=SECRET)

    async def test_bolt_receives_a_click_acks_it_and_updates_the_message(
        self, fake: FakeSlack, app: AsyncApp, client: AsyncWebClient
    ) -> None:
        @app.action(re.compile("^choose:"))
        async def on_answer(
            ack: Any, body: dict[str, Any], action: dict[str, Any], client: AsyncWebClient
        ) -> None:
            await ack()
            await client.chat_update(
                channel=body["container"]["channel_id"],
                ts=body["container"]["message_ts"],
                text=f"{body['user']['name']} chose {action['value']}",
                blocks=[],
            )

        ts = await post_question(client)
        async with serve_bolt(app, fake):
            response = await fake.click("U0ALICE", "C0DEPLOY", ts, "choose:0")
            message = await fake.wait_for(
                lambda: fake.last_message("C0DEPLOY") if fake.find_calls("chat.update") else None
            )

        assert response.status == 200
        assert message.text == "alice chose 0"
        assert len(fake.find_calls("auth.test")) == 1

    async def test_bolt_answers_a_bad_or_stale_signature_with_401(
        self, fake: FakeSlack, app: AsyncApp
    ) -> None:
        body = "payload=%7B%7D"
        async with serve_bolt(app, fake):
            forged = await fake.post_raw(
                body, {**fake.signed_request(body), "X-Slack-Signature": "v0=" + "0" * 64}
            )
            stale = await fake.post_raw(body, fake.signed_request(body, timestamp=int(time.time()) - 301))

        assert (forged.status, stale.status) == (401, 401)

    async def test_modal_errors_then_submission_closes_it(
        self, fake: FakeSlack, app: AsyncApp, client: AsyncWebClient
    ) -> None:
        submitted: list[dict[str, Any]] = []

        @app.action(re.compile("^choose:"))
        async def open_modal(ack: Any, body: dict[str, Any], client: AsyncWebClient) -> None:
            await ack()
            await client.views_open(trigger_id=body["trigger_id"], view=modal())

        @app.view("ask-modal")
        async def on_submit(ack: Any, view: dict[str, Any]) -> None:
            values = view["state"]["values"]
            if values["choice"]["pick"]["selected_option"]["value"] == "1":
                await ack(response_action="errors", errors={"choice": "Green is out of stock"})
                return
            submitted.append(values)
            await ack()

        ts = await post_question(client)
        async with serve_bolt(app, fake):
            await fake.click("U0ALICE", "C0DEPLOY", ts, "choose:0")
            [view] = await fake.wait_for(lambda: fake.open_views("U0ALICE"))
            refused = await fake.fill_and_submit("U0ALICE", view.id, {"choice": "Green", "note": "hi"})
            errors = view.errors
            accepted = await fake.fill_and_submit(
                "U0ALICE", view.id, {"choice": "0", "extras": ["fast", "cheap"], "size": "Large"}
            )

        assert refused.json == {"response_action": "errors", "errors": {"choice": "Green is out of stock"}}
        assert errors == {"choice": "Green is out of stock"}
        assert accepted.status == 200
        assert fake.open_views("U0ALICE") == []
        [values] = submitted
        assert values["extras"]["extras"]["selected_options"][1]["value"] == "cheap"
        assert values["size"]["size"]["selected_option"]["value"] == "l"
        assert values["note"]["note"] == {
            "type": "plain_text_input",
            "value": "hi",
        }  # kept from the first try

    async def test_required_input_cannot_be_submitted_empty(
        self, fake: FakeSlack, client: AsyncWebClient
    ) -> None:
        opened = await client.views_open(trigger_id=fake.issue_trigger("U0ALICE"), view=modal())

        with pytest.raises(FakeSlackError, match="'choice' is required"):
            await fake.fill_and_submit("U0ALICE", opened["view"]["id"], {"note": "only a note"})

    async def test_response_action_update_replaces_the_modal(
        self, fake: FakeSlack, app: AsyncApp, client: AsyncWebClient
    ) -> None:
        @app.view("ask-modal")
        async def on_submit(ack: Any) -> None:
            await ack(response_action="update", view=modal("thanks"))

        opened = await client.views_open(trigger_id=fake.issue_trigger("U0ALICE"), view=modal())
        async with serve_bolt(app, fake):
            await fake.fill_and_submit("U0ALICE", opened["view"]["id"], {"pick": "Blue"})

        [view] = fake.open_views("U0ALICE")
        assert view.id == opened["view"]["id"]
        assert view.callback_id == "thanks"

    async def test_closing_a_notify_on_close_modal_sends_view_closed(
        self, fake: FakeSlack, app: AsyncApp, client: AsyncWebClient
    ) -> None:
        closed: list[str] = []

        @app.view_closed("ask-modal")
        async def on_closed(ack: Any, body: dict[str, Any]) -> None:
            await ack()
            closed.append(body["user"]["id"])

        opened = await client.views_open(
            trigger_id=fake.issue_trigger("U0BOB"), view=modal(notify_on_close=True)
        )
        async with serve_bolt(app, fake):
            response = await fake.close_view("U0BOB", opened["view"]["id"])
            await fake.wait_for(lambda: closed)

        assert response is not None
        assert response.status == 200
        assert closed == ["U0BOB"]

    async def test_respond_through_response_url_replaces_or_whispers(
        self, fake: FakeSlack, app: AsyncApp, client: AsyncWebClient
    ) -> None:
        @app.action(re.compile("^choose:"))
        async def on_answer(ack: Any, respond: Any) -> None:
            await ack()
            await respond(replace_original=True, text="Answered")

        @app.action("decline")
        async def on_decline(ack: Any, respond: Any) -> None:
            await ack()
            await respond(response_type="ephemeral", replace_original=False, text="You may not answer this")

        ts = await post_question(client)
        async with serve_bolt(app, fake):
            await fake.click("U0CAROL", "C0DEPLOY", ts, "decline")
            [whisper] = await fake.wait_for(lambda: fake.ephemerals_for("U0CAROL"))
            await fake.click("U0ALICE", "C0DEPLOY", ts, "choose:0")
            await fake.wait_for(lambda: [r for r in fake.state.responses if r.outcome == "replaced"])

        assert (whisper.text, whisper.via) == ("You may not answer this", "response_url")
        message = fake.last_message("C0DEPLOY")
        assert message is not None
        assert (message.ts, message.text) == (ts, "Answered")

    async def test_archiving_a_channel_reaches_a_bolt_event_listener(
        self, fake: FakeSlack, app: AsyncApp
    ) -> None:
        archived: list[str] = []

        @app.event("channel_archive")
        async def on_archive(event: dict[str, Any]) -> None:
            archived.append(event["channel"])

        async with serve_bolt(app, fake):
            response = await fake.archive_channel("C0DEPLOY")
            await fake.wait_for(lambda: archived)

        assert response is not None
        assert response.status == 200
        assert archived == ["C0DEPLOY"]

    async def test_deleting_the_bots_message_is_a_self_event_bolt_drops_by_default(
        self, fake: FakeSlack, client: AsyncWebClient
    ) -> None:
        seen: dict[str, list[str]] = {"default": [], "not_ignoring": []}
        apps = {
            "default": AsyncApp(
                client=AsyncWebClient(token=TOKEN, base_url=fake.api_url), signing_secret=SECRET
            ),
            "not_ignoring": AsyncApp(
                client=AsyncWebClient(token=TOKEN, base_url=fake.api_url),
                signing_secret=SECRET,
                ignoring_self_events_enabled=False,
            ),
        }
        for name, bolt in apps.items():
            bolt.event({"type": "message", "subtype": "message_deleted"})(recorder(seen[name]))

        first, second = await post_question(client), await post_question(client)
        async with serve_bolt(apps["default"], fake):
            await fake.delete_message("C0DEPLOY", first)
        async with serve_bolt(apps["not_ignoring"], fake):
            await fake.delete_message("C0DEPLOY", second)
            await fake.wait_for(lambda: seen["not_ignoring"])

        assert seen == {"default": [], "not_ignoring": [second]}
        assert fake.state.events[-1].envelope["event"]["previous_message"]["user"] == fake.state.bot.user_id


class TestState:
    async def test_whole_state_is_json_and_served_to_the_playground(
        self, fake: FakeSlack, client: AsyncWebClient
    ) -> None:
        await post_question(client)

        async with aiohttp.ClientSession() as session, session.get(fake.base_url + "_fake/state") as response:
            served = await response.json()

        assert served == json.loads(json.dumps(fake.state.snapshot()))
        assert served["messages"]["C0DEPLOY"][0]["text"] == "Deploy now?"
        assert {u["id"] for u in served["users"]} >= {"U0ALICE", "U0BOB", "U0CAROL", "U0DAVE"}

    async def test_wait_for_times_out_with_a_clear_error(self, fake: FakeSlack) -> None:
        with pytest.raises(TimeoutError, match=r"timed out after 0\.05s waiting for a reply"):
            await fake.wait_for(lambda: fake.last_message("C0DEPLOY"), timeout=0.05, what="a reply")
