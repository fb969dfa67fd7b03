"""The fake Slack enforces Slack's rate limits when asked to, and answers over-limit calls as Slack does."""

from __future__ import annotations

import argparse
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from bot.cli import demo as demo_cli
from bot.playground import FakeSlack
from bot.playground.demo import Playground
from bot.playground.ratelimits import METHOD_LIMITS, POST_PER_CHANNEL, Limit

SECRET = "test-signing-secret"
TOKEN = "xoxb-test-token"


class ManualClock:
    """The limiter's clock, moved on only by the test: no refill happens while a test makes its calls."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def fake(clock: ManualClock) -> AsyncIterator[FakeSlack]:
    async with FakeSlack.with_demo_workspace(signing_secret=SECRET, bot_token=TOKEN, rate_limits=True) as f:
        f.limits.clock = clock
        yield f


@pytest.fixture
def client(fake: FakeSlack) -> AsyncWebClient:
    return AsyncWebClient(token=TOKEN, base_url=fake.api_url, retry_handlers=[])


async def raw_call(fake: FakeSlack, method: str, **params: Any) -> tuple[int, dict[str, str], str]:
    """POST a Web API call and return (status, headers, body) exactly as the fake sent them."""
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{fake.api_url}{method}", json=params, headers={"Authorization": f"Bearer {TOKEN}"}
        ) as reply,
    ):
        return reply.status, dict(reply.headers), await reply.text()


async def calls_until_refused(fake: FakeSlack, method: str, limit: int = 500, **params: Any) -> int:
    """How many calls of `method` succeed before the first 429 (at most `limit`)."""
    for done in range(limit):
        status, _, _ = await raw_call(fake, method, **params)
        if status == 429:
            return done
    return limit


async def test_off_by_default_nothing_is_refused_but_calls_are_counted() -> None:
    async with FakeSlack.with_demo_workspace(signing_secret=SECRET, bot_token=TOKEN) as fake:
        client = AsyncWebClient(token=TOKEN, base_url=fake.api_url, retry_handlers=[])
        for _ in range(30):
            await client.chat_postMessage(channel="C0DEPLOY", text="hi")
        assert fake.limits.enabled is False
        assert fake.limits.stats() == {"chat.postMessage": {"calls": 30, "ratelimited": 0}}


async def test_over_the_limit_the_answer_is_exactly_slacks(fake: FakeSlack) -> None:
    burst = METHOD_LIMITS["usergroups.users.list"].burst  # Tier 2
    assert await calls_until_refused(fake, "usergroups.users.list", usergroup="S0ONCALL") == burst

    status, headers, body = await raw_call(fake, "usergroups.users.list", usergroup="S0ONCALL")

    assert status == 429
    assert json.loads(body) == {"ok": False, "error": "ratelimited"}
    # Tier 2 is 20 a minute: the next token is 3 s away, and Slack says so in whole seconds.
    assert headers["Retry-After"] == "3"
    assert fake.find_calls("usergroups.users.list")[-1].status == 429


async def test_slack_sdk_sees_a_ratelimited_error_and_nothing_was_done(
    fake: FakeSlack, client: AsyncWebClient
) -> None:
    posted = await client.chat_postMessage(channel="C0DEPLOY", text="v0")
    for i in range(METHOD_LIMITS["chat.update"].burst):
        await client.chat_update(channel="C0DEPLOY", ts=posted["ts"], text=f"v{i + 1}")
    last = fake.last_message("C0DEPLOY")
    assert last is not None
    before = last.text

    with pytest.raises(SlackApiError) as caught:
        await client.chat_update(channel="C0DEPLOY", ts=posted["ts"], text="one too many")

    assert caught.value.response.status_code == 429
    assert caught.value.response["error"] == "ratelimited"
    assert int(caught.value.response.headers["retry-after"]) >= 1
    assert last.text == before


async def test_waiting_as_retry_after_says_is_enough_on_the_fakes_own_clock() -> None:
    async with FakeSlack.with_demo_workspace(
        signing_secret=SECRET, bot_token=TOKEN, rate_limits=True
    ) as fake:
        await calls_until_refused(fake, "chat.update", channel="C0DEPLOY", ts="1.0")
        status, headers, _ = await raw_call(fake, "chat.update", channel="C0DEPLOY", ts="1.0")
        assert status == 429

        fake.advance_clock(int(headers["Retry-After"]))  # the limiter runs on the fake's clock

        status, _, body = await raw_call(fake, "chat.update", channel="C0DEPLOY", ts="1.0")
        assert status == 200  # admitted (the fake then says the message does not exist, as Slack would)
        assert json.loads(body)["error"] == "message_not_found"


async def test_each_tier_allows_its_rate_over_a_minute(fake: FakeSlack, clock: ManualClock) -> None:
    """Over one Slack minute, each method gets its burst plus its per-minute rate, never more."""
    methods = {
        "usergroups.users.list": {"usergroup": "S0ONCALL"},  # Tier 2
        "conversations.open": {"users": "U0ALICE"},  # Tier 3
        "users.info": {"user": "U0ALICE"},  # Tier 4
    }
    admitted = dict.fromkeys(methods, 0)
    for _ in range(61):  # calls at 0 s, 1 s, ... 60 s: one Slack minute of refill after the burst
        for method, params in methods.items():
            admitted[method] += await calls_until_refused(fake, method, **params)
        clock.advance(1)
    for method in methods:
        limit = METHOD_LIMITS[method]
        # The burst, then the minute's rate (less one, should rounding leave the last token at 0.999...).
        assert limit.burst + limit.per_minute - 1 <= admitted[method] <= limit.burst + limit.per_minute
    assert fake.limits.limited["users.info"] == 61


async def test_posts_are_limited_per_channel_and_one_busy_channel_leaves_the_others_alone(
    fake: FakeSlack, client: AsyncWebClient, clock: ManualClock
) -> None:
    assert await calls_until_refused(fake, "chat.postMessage", channel="C0DEPLOY", text="x") == (
        POST_PER_CHANNEL.burst
    )
    # The busy channel is refused; another channel, and a DM (named by user id or by D id), are not.
    await client.chat_postMessage(channel="C0INCIDENT", text="elsewhere")
    for _ in range(POST_PER_CHANNEL.burst):
        await client.chat_postMessage(channel="U0ALICE", text="dm")
    status, headers, _ = await raw_call(fake, "chat.postMessage", channel="D0ALICE", text="dm")
    assert (status, headers["Retry-After"]) == (429, "1")  # one a second per channel
    assert fake.limits.limited_channels == {"C0DEPLOY": 1, "D0ALICE": 1}

    clock.advance(1)
    await client.chat_postMessage(channel="C0DEPLOY", text="a second later")


async def test_the_workspace_wide_post_limit_spans_channels(fake: FakeSlack, client: AsyncWebClient) -> None:
    fake.limits.limits = {**METHOD_LIMITS, "chat.postMessage": Limit(per_minute=60, burst=2)}
    await client.chat_postMessage(channel="C0DEPLOY", text="1")
    await client.chat_postMessage(channel="C0INCIDENT", text="2")

    status, _, _ = await raw_call(fake, "chat.postMessage", channel="U0BOB", text="3")

    assert status == 429
    assert fake.limits.limited_channels == {}  # refused for the workspace, not for the DM


@pytest.mark.parametrize(("speedup", "retry_after"), [(1, "3"), (2, "2"), (20, "1"), (0.1, "30")])
async def test_retry_after_is_scaled_by_the_speedup_rounded_up_and_at_least_one(
    speedup: float, retry_after: str, clock: ManualClock
) -> None:
    async with FakeSlack.with_demo_workspace(
        signing_secret=SECRET, bot_token=TOKEN, rate_limits=True, speedup=speedup
    ) as fake:
        fake.limits.clock = clock
        await calls_until_refused(fake, "usergroups.users.list", usergroup="S0ONCALL")

        # Tier 2: a token every 3 Slack seconds, so every 3 / speedup real seconds.
        status, headers, _ = await raw_call(fake, "usergroups.users.list", usergroup="S0ONCALL")

        assert (status, headers["Retry-After"]) == (429, retry_after)


async def test_a_speedup_runs_slacks_clock_faster(clock: ManualClock) -> None:
    async with FakeSlack.with_demo_workspace(
        signing_secret=SECRET, bot_token=TOKEN, rate_limits=True, speedup=20
    ) as fake:
        fake.limits.clock = clock
        await calls_until_refused(fake, "usergroups.users.list", usergroup="S0ONCALL")
        clock.advance(3 / 20)  # 3 Slack seconds: one Tier 2 token
        assert await calls_until_refused(fake, "usergroups.users.list", usergroup="S0ONCALL") == 1


async def test_slack_sdks_own_retry_handler_parses_retry_after_and_succeeds() -> None:
    async with FakeSlack.with_demo_workspace(
        signing_secret=SECRET, bot_token=TOKEN, rate_limits=True
    ) as fake:
        client = AsyncWebClient(
            token=TOKEN,
            base_url=fake.api_url,
            retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=1)],
        )
        await calls_until_refused(fake, "chat.postMessage", channel="C0DEPLOY", text="x")
        # Time stands still until the sdk's own call was refused too; then it runs (a post a second).
        frozen = fake.now()
        fake.limits.clock = lambda: fake.now() if fake.limits.limited["chat.postMessage"] >= 2 else frozen

        response = await client.chat_postMessage(channel="C0DEPLOY", text="after one retry")

        assert response["ok"] is True
        assert [c.status for c in fake.find_calls("chat.postMessage")][-2:] == [429, 200]


async def test_calls_that_fail_authentication_take_no_token(fake: FakeSlack) -> None:
    bad = AsyncWebClient(token="xoxb-wrong", base_url=fake.api_url, retry_handlers=[])
    for _ in range(20):
        with pytest.raises(SlackApiError, match="invalid_auth"):
            await bad.usergroups_users_list(usergroup="S0ONCALL")
    burst = METHOD_LIMITS["usergroups.users.list"].burst
    assert await calls_until_refused(fake, "usergroups.users.list", usergroup="S0ONCALL") == burst


async def test_counters_are_served_for_benchmarks_and_reset(fake: FakeSlack, client: AsyncWebClient) -> None:
    await calls_until_refused(fake, "chat.postMessage", channel="C0DEPLOY", text="x")
    await client.users_info(user="U0ALICE")

    async with aiohttp.ClientSession() as session, session.get(fake.base_url + "_fake/limits") as reply:
        served = await reply.json()

    assert served == {
        "enabled": True,
        "speedup": 1.0,
        "methods": {
            "chat.postMessage": {"calls": POST_PER_CHANNEL.burst + 1, "ratelimited": 1},
            "users.info": {"calls": 1, "ratelimited": 0},
        },
        "limited_channels": {"C0DEPLOY": 1},
    }
    fake.limits.reset()
    assert fake.limits.stats() == {}
    await client.chat_postMessage(channel="C0DEPLOY", text="buckets refilled")


@pytest.mark.parametrize("speedup", [0, -1, float("inf"), float("nan")])
def test_a_speedup_must_be_a_positive_number(speedup: float) -> None:
    with pytest.raises(ValueError, match="speedup must be a positive number"):
        FakeSlack(signing_secret=SECRET, rate_limits=True, speedup=speedup)


def test_the_demo_can_turn_the_limits_on() -> None:
    parser = argparse.ArgumentParser()
    demo_cli.add_parser(parser.add_subparsers())
    args = parser.parse_args(["demo", "--rate-limits", "--speedup", "20"])
    assert (args.rate_limits, args.speedup) == (True, 20.0)
    assert parser.parse_args(["demo"]).rate_limits is False
    with pytest.raises(SystemExit):
        parser.parse_args(["demo", "--speedup", "0"])

    playground = Playground(rate_limits=args.rate_limits, speedup=args.speedup)
    assert (playground.fake.limits.enabled, playground.fake.limits.speedup) == (True, 20.0)
