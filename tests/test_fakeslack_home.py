"""The fake Slack's App Home tab: ``views.publish`` validated as Slack does, stored per user."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.playground import FakeSlack

SECRET = "home-secret"
TOKEN = "xoxb-home"


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack.with_demo_workspace(signing_secret=SECRET, bot_token=TOKEN) as running:
        yield running


@pytest.fixture
def client(fake: FakeSlack) -> AsyncWebClient:
    return AsyncWebClient(token=TOKEN, base_url=fake.api_url, retry_handlers=[])


def _home(text: str = "hello", blocks: int = 1, **extra: Any) -> dict[str, Any]:
    section = {"type": "section", "text": {"type": "mrkdwn", "text": text}}
    return {"type": "home", "blocks": [dict(section) for _ in range(blocks)], **extra}


async def _error(call: Any) -> str:
    with pytest.raises(SlackApiError) as caught:
        await call
    return str(caught.value.response["error"])


async def test_publish_stores_the_view_per_user_with_a_new_hash_each_time(
    fake: FakeSlack, client: AsyncWebClient
) -> None:
    first = await client.views_publish(user_id="U0ALICE", view=_home("one"))
    second = await client.views_publish(user_id="U0ALICE", view=_home("two"), hash=first["view"]["hash"])
    home = fake.home("U0ALICE")
    assert home is not None and home.hash == second["view"]["hash"] != first["view"]["hash"]
    assert home.view["blocks"][0]["text"]["text"] == "two" and home.id == first["view"]["id"]
    assert fake.home("U0BOB") is None and fake.home_publishes("U0ALICE") == 2 and fake.home_publishes() == 2


async def test_publish_refuses_what_slack_refuses(fake: FakeSlack, client: AsyncWebClient) -> None:
    first = await client.views_publish(user_id="U0ALICE", view=_home("one"))
    await client.views_publish(user_id="U0ALICE", view=_home("two"))
    assert await _error(
        client.views_publish(user_id="U0ALICE", view=_home(), hash=first["view"]["hash"])
    ) == ("hash_conflict")
    assert (
        await _error(client.views_publish(user_id="U0ALICE", view=_home(blocks=101))) == "invalid_arguments"
    )
    assert await _error(client.views_publish(user_id="U0ALICE", view={**_home(), "type": "modal"})) == (
        "invalid_arguments"
    )
    too_long = _home(private_metadata="x" * 3001)
    assert await _error(client.views_publish(user_id="U0ALICE", view=too_long)) == "invalid_arguments"
    assert await _error(client.views_publish(user_id="U0NOBODY", view=_home())) == "user_not_found"
    assert await _error(client.views_publish(user_id="U0ALICE", view=_home("x" * 2900, blocks=99))) == (
        "view_too_large"
    )
    home = fake.home("U0ALICE")
    assert home is not None and home.view["blocks"][0]["text"]["text"] == "two"  # none of those landed
