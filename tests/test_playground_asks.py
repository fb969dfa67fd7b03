"""The playground's pending list and Withdraw over HTTP (no browser): what the page reads and sends."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest
from redis.asyncio import Redis

from bot.playground.demo import Playground


@pytest.fixture
async def playground(redis: Redis, redis_url: str, prefix: str) -> AsyncIterator[Playground]:
    running = Playground(redis_url=redis_url, prefix=prefix, port=0)
    await running.start()
    try:
        yield running
    finally:
        await running.stop()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        yield session


async def _pending(http: aiohttp.ClientSession, playground: Playground, count: int) -> dict[str, object]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while True:
        async with http.get(playground.url + "ui/pending") as response:
            data: dict[str, object] = await response.json()
        asks = data["asks"]
        assert isinstance(asks, list)
        if len(asks) == count:
            return data
        assert loop.time() < deadline, f"expected {count} pending asks, have {asks}"
        await asyncio.sleep(0.05)


async def test_pending_lists_who_may_answer_and_the_deadline_then_withdraw_ends_it(
    playground: Playground, http: aiohttp.ClientSession
) -> None:
    envelope = playground.envelope(
        {
            "request": {"questions": [{"question": "Rotate the key?", "options": ["Rotate", "Not now"]}]},
            "responders": {"users": ["U0BOB"], "usergroups": ["S0ONCALL"]},
            "timeout_ms": 20_000,
            "on_timeout": "error",
        }
    )
    await playground.send_ask(envelope)
    data = await _pending(http, playground, 1)
    [ask] = data["asks"]  # type: ignore[misc]
    assert ask["ask_id"] == envelope["ask_id"] and ask["question"] == "Rotate the key?"
    assert ask["responders"] == {"users": ["U0BOB"], "usergroups": ["S0ONCALL"]}
    assert ask["deadline_ms"] - ask["created_ms"] == 20_000 and ask["on_timeout"] == "error"
    assert isinstance(data["now_ms"], int) and data["now_ms"] < ask["deadline_ms"]

    async with http.post(playground.url + "ui/withdraw", json={"ask_id": envelope["ask_id"]}) as response:
        assert response.status == 200
        assert (await response.json())["reply_to"] == playground.reply_to
    await _pending(http, playground, 0)
    [result] = [r for r in await playground.results() if r["ask_id"] == envelope["ask_id"]]
    assert result["outcome"] == "cancelled" and result["responder"] is None

    # Withdrawing it again, or an ask nobody sent, changes nothing and says why.
    for ask_id, says in (
        (envelope["ask_id"], "already ended (cancelled)"),
        ("never-sent", "No ask 'never-sent'"),
    ):
        async with http.post(playground.url + "ui/withdraw", json={"ask_id": ask_id}) as response:
            assert response.status == 409
            assert says in (await response.json())["error"]


async def test_withdraw_takes_json_from_the_page_only(
    playground: Playground, http: aiohttp.ClientSession
) -> None:
    async with http.post(playground.url + "ui/withdraw", data="ask_id=x") as response:
        assert response.status == 403
    async with http.post(
        playground.url + "ui/withdraw", json={"ask_id": "x"}, headers={"Origin": "https://evil.example"}
    ) as response:
        assert response.status == 403
