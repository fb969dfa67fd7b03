"""Slack gets the bot's HTTP answer at the listener's ack, never behind a timer (bot.app).

The test freezes the event loop's clock while the fake sends its click: no timer can fire, and only
I/O moves. The answer must still arrive. (Bolt's own background mode checks for the ack every 10 ms,
a timer that never fires here.) The clock then runs again, and the work after the ack must finish as
usual: events and view submissions go through the same wrapper and are covered by the e2e suites.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import pytest

from bot.playground.people import BotResponse
from tests.harness import Harness, interactive_elements

T = TypeVar("T")

SPINS = 200_000
"""Loop passes the answer may take with the clock stopped (each one polls the sockets once). A
loopback request needs a few hundred; this bound is only reached when the answer waits on a timer."""

DEPLOY = {"id": "deploy", "question": "Deploy build 42 to production?", "options": ["Yes", "No"]}


@contextmanager
def _clock_stopped() -> Iterator[None]:
    loop = asyncio.get_running_loop()
    frozen = loop.time()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(loop, "time", lambda: frozen)
        yield


async def _without_a_timer(request: Awaitable[T]) -> T | None:
    """``request``'s outcome if it completes while no timer can fire, else None (it then completes
    once the clock runs again)."""
    with _clock_stopped():
        task = asyncio.ensure_future(request)
        for _ in range(SPINS):
            if task.done():
                return task.result()
            await asyncio.sleep(0)
    await task
    return None


async def test_a_click_is_answered_at_its_ack_and_its_result_follows(harness: Harness) -> None:
    env = harness.envelope(DEPLOY)
    await harness.send(env)
    [message] = await harness.posted()

    click = harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    response = await _without_a_timer(click)

    assert isinstance(response, BotResponse), "the click's answer waited for a timer"
    assert response.status == 200
    result = await harness.result(env["reply_to"])
    assert result["outcome"] == "answered" and result["answers"][0]["selected"] == [0]
    assert interactive_elements((await harness.ended("C0DEPLOY", message.ts)).blocks) == []
    assert await harness.no_more_results(env["reply_to"])
