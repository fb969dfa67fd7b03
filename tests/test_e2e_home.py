"""The App Home tab end to end (docs/home.md, issue 19): real Bolt app, real Redis, the fake Slack over
HTTP; people open the tab (``app_home_opened``) and click in it (``block_actions`` from a home view)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from bot import results
from bot.ids import AskRef
from bot.playground.home import views_publish
from bot.storage.check import check_prefix
from bot.storage.keys import Keys, due_member, slot_tag
from bot.storage.store import Resolution, Store, iso_ms
from tests.harness import Harness, interactive_elements

DEPLOY = {"id": "deploy", "question": "Deploy v2 to production?", "options": ["Approve", "Reject"]}
HOUR = 3_600_000

View = dict[str, Any]


def _question(text: str) -> dict[str, Any]:
    return {"id": "q", "question": text, "options": ["Yes", "No"]}


def home_asks(view: View | None) -> list[str]:
    """The ask ids of the rows of a Home view, top to bottom (read from their buttons' values)."""
    order: list[str] = []
    for block in (view or {}).get("blocks") or []:
        for element in block.get("elements") or []:
            ref = AskRef.decode(str(element.get("value") or ""))
            if ref is not None and ref.ask_id not in order:
                order.append(ref.ask_id)
    return order


def _blocks(harness: Harness, ts: str, channel: str = "C0DEPLOY") -> list[dict[str, Any]]:
    message = harness.fake.state.find_message(channel, ts)
    return message.blocks if message is not None else []


def _text(view: View | None) -> str:
    return json.dumps(view or {}, ensure_ascii=False)


async def opened(harness: Harness, user: str, shows: Callable[[View], bool], timeout: float = 10) -> View:
    """``user`` opens the Home tab; the view published for them once it ``shows`` what is asked."""
    await harness.fake.open_home(user)
    return await home_when(harness, user, shows, timeout)


async def home_when(harness: Harness, user: str, shows: Callable[[View], bool], timeout: float = 10) -> View:
    def ready() -> View | None:
        home = harness.fake.home(user)
        return home.view if home is not None and shows(home.view) else None

    return await harness.fake.wait_for(ready, timeout=timeout, what=f"the Home tab of {user}")


async def _send(harness: Harness, request: Any, **fields: Any) -> dict[str, Any]:
    env = harness.envelope(request, **fields)
    await harness.send(env)
    return env


async def until(condition: Callable[[], Awaitable[bool]], what: str, timeout: float = 10) -> None:
    """Poll an async ``condition`` until it holds (bounded)."""
    deadline = time.monotonic() + timeout
    while not await condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def _all_posted(harness: Harness, envs: list[dict[str, Any]]) -> None:
    """Every ask is posted (its state in Redis), so the index holds all of them."""
    store = harness.replicas[0].store

    async def posted() -> bool:
        for env in envs:
            loaded = await store.find(env["ask_id"])
            if loaded is None or loaded.state != "posted":
                return False
        return True

    await until(posted, f"{len(envs)} ask(s) posted", timeout=30)


async def test_a_person_sees_their_asks_in_two_channels_and_a_dm_soonest_first_and_answers_from_home(
    harness: Harness,
) -> None:
    alice = {"users": ["U0ALICE"]}
    a = await _send(harness, _question("Ship A?"), responders=alice, timeout_ms=3 * HOUR)
    b = await _send(
        harness, _question("Page B?"), route={"channel": "C0INCIDENT"}, responders=alice, timeout_ms=HOUR
    )
    c = await _send(harness, _question("Rotate C?"), route={"user": "U0ALICE"}, timeout_ms=2 * HOUR)
    nobody = await _send(harness, _question("Anyone D?"), timeout_ms=HOUR // 2)  # a channel, no responders
    await _all_posted(harness, [a, b, c, nobody])

    view = await opened(harness, "U0ALICE", lambda v: len(home_asks(v)) == 3)
    assert home_asks(view) == [b["ask_id"], c["ask_id"], a["ask_id"]]  # soonest deadline first
    assert "Waiting for you: 3" in _text(view)
    assert "Anyone D?" not in _text(view)

    # Someone not named sees none of them: only the empty state.
    bob = await opened(harness, "U0BOB", lambda v: "Nothing is waiting" in _text(v))
    assert home_asks(bob) == []
    for title in ("Ship A?", "Page B?", "Rotate C?", "Anyone D?"):
        assert title not in _text(bob)

    # Answering from Home is the same act as from the message, via "home"; the row goes.
    await harness.fake.click_in_home(
        "U0ALICE", "slack_ask:choose:0", value=AskRef(slot_tag(b["reply_to"]), b["ask_id"], 0).encode()
    )
    result = await harness.result(b["reply_to"])
    assert result["outcome"] == "answered" and result["via"] == "home"
    assert result["responder"]["id"] == "U0ALICE"
    [message] = await harness.posted("C0INCIDENT")
    await harness.ended("C0INCIDENT", message.ts)  # the ask's message is redrawn as usual
    after = await home_when(harness, "U0ALICE", lambda v: b["ask_id"] not in home_asks(v))
    assert home_asks(after) == [c["ask_id"], a["ask_id"]]
    assert "Recently answered by you" in _text(after) and "Page B?" in _text(after)


async def test_a_crafted_block_actions_from_a_home_view_is_refused_for_someone_not_named(
    harness: Harness,
) -> None:
    mine = await _send(harness, _question("Alice only?"), responders={"users": ["U0ALICE"]}, timeout_ms=HOUR)
    open_ask = await _send(harness, _question("Channel only?"), timeout_ms=HOUR)  # anyone in #deploys
    await _all_posted(harness, [mine, open_ask])
    alice = await opened(harness, "U0ALICE", lambda v: mine["ask_id"] in home_asks(v))

    # Bob replays Alice's tab, and a tab forged with a button for the channel ask nobody is named on.
    mine_ref = AskRef(slot_tag(mine["reply_to"]), mine["ask_id"], 0).encode()
    await harness.fake.click_in_home("U0BOB", "slack_ask:choose:0", value=mine_ref, view=alice)
    forged = {
        "id": "V0FORGED",
        "type": "home",
        "hash": "1.forged",
        "blocks": [
            {
                "type": "actions",
                "block_id": "x",
                "elements": [
                    {
                        "type": "button",
                        "action_id": "slack_ask:choose:0",
                        "text": {"type": "plain_text", "text": "Yes"},
                        "value": AskRef(slot_tag(open_ask["reply_to"]), open_ask["ask_id"], 0).encode(),
                    }
                ],
            }
        ],
    }
    await harness.fake.click_in_home("U0BOB", "slack_ask:choose:0", view=forged)
    store = harness.replicas[0].store

    async def refused(ask_id: str) -> bool:
        status = await store.get_status(ask_id)
        return status is not None and any(e.event == "refused_not_allowed" for e in status.audit or [])

    for ask in (mine, open_ask):
        await until(lambda ask=ask: refused(ask["ask_id"]), f"{ask['ask_id']}'s refusal audited")  # type: ignore[misc]
        status = await store.get_status(ask["ask_id"])
        assert status is not None and status.state == "posted"  # nothing changed
        assert await harness.no_more_results(ask["reply_to"], wait=0.2)
    # Bob is told on his tab (there is no conversation to be private in).
    await home_when(
        harness, "U0BOB", lambda v: "not" in _text(v).lower() and "information_source" in _text(v)
    )
    # The same click on the channel ask from its message counts: only the Home tab asks for a name.
    [channel_message] = [
        m for m in await harness.posted(count=2) if open_ask["ask_id"] in json.dumps(_blocks(harness, m.ts))
    ]
    await harness.fake.click("U0BOB", "C0DEPLOY", channel_message.ts, "slack_ask:choose:0")
    assert (await harness.result(open_ask["reply_to"]))["via"] == "button"


async def test_an_approval_shows_its_tally_on_home_and_records_votes_from_there(harness: Harness) -> None:
    env = await _send(
        harness, DEPLOY, approval={"count": 2}, responders={"users": ["U0ALICE", "U0BOB"]}, timeout_ms=HOUR
    )
    await _all_posted(harness, [env])
    view = await opened(harness, "U0ALICE", lambda v: env["ask_id"] in home_asks(v))
    assert "0 of 2" in _text(view) and "you have not voted yet" in _text(view)
    ref = AskRef(slot_tag(env["reply_to"]), env["ask_id"], 0).encode()
    await harness.fake.click_in_home("U0ALICE", "slack_ask:choose:0", value=ref)
    voted = await home_when(harness, "U0ALICE", lambda v: "you voted" in _text(v))
    assert "1 of 2 · alice" in _text(voted)
    [message] = await harness.posted()
    await harness.fake.wait_for(
        lambda: "1 of 2 · alice" in json.dumps(_blocks(harness, message.ts), ensure_ascii=False) or None,
        what="the tally on the message",
    )
    assert await harness.no_more_results(env["reply_to"], wait=0.2)
    bob = await opened(harness, "U0BOB", lambda v: "1 of 2 · alice" in _text(v))
    assert "you have not voted yet" in _text(bob)
    await harness.fake.click_in_home("U0BOB", "slack_ask:choose:0", value=ref)
    result = await harness.result(env["reply_to"])
    assert result["outcome"] == "answered" and result["via"] == "home"
    assert sorted(v["user"]["id"] for v in result["votes"]) == ["U0ALICE", "U0BOB"]
    assert result["slack"]["ts"] == message.ts  # the ask's message, though voted on from the tab
    await home_when(harness, "U0BOB", lambda v: env["ask_id"] not in home_asks(v))


async def test_a_user_group_member_sees_the_group_s_asks_and_others_do_not(harness: Harness) -> None:
    env = await _send(harness, _question("On-call: restart?"), responders={"usergroups": ["S0ONCALL"]})
    await _all_posted(harness, [env])
    bob = await opened(harness, "U0BOB", lambda v: env["ask_id"] in home_asks(v))
    assert "On-call: restart?" in _text(bob)
    carol = await opened(harness, "U0CAROL", lambda v: "Nothing is waiting" in _text(v))
    assert "On-call: restart?" not in _text(carol)


async def test_forty_asks_page_fifteen_at_a_time_with_next_and_previous(harness: Harness) -> None:
    envs = [
        await _send(
            harness, _question(f"Q{i:02}?"), responders={"users": ["U0CAROL"]}, timeout_ms=HOUR + i * 60_000
        )
        for i in range(40)
    ]
    await _all_posted(harness, envs)
    expected = [e["ask_id"] for e in envs]  # created in deadline order
    first = await opened(harness, "U0CAROL", lambda v: "Waiting for you: 40" in _text(v))
    assert home_asks(first) == expected[:15]
    assert len(first["blocks"]) <= 100 and "Previous" not in _text(first)
    await harness.fake.click_in_home("U0CAROL", "slack_ask:home_page:next", value="1")
    second = await home_when(harness, "U0CAROL", lambda v: home_asks(v)[:1] == expected[15:16])
    assert home_asks(second) == expected[15:30] and "Previous" in _text(second) and "Next" in _text(second)
    await harness.fake.click_in_home("U0CAROL", "slack_ask:home_page:next", value="2")
    third = await home_when(harness, "U0CAROL", lambda v: home_asks(v)[:1] == expected[30:31])
    assert home_asks(third) == expected[30:] and '"Next"' not in _text(third)
    assert json.loads(third["private_metadata"]) == {"p": 2}
    await harness.fake.click_in_home("U0CAROL", "slack_ask:home_page:prev", value="1")
    await home_when(harness, "U0CAROL", lambda v: home_asks(v) == expected[15:30])


async def test_a_replica_killed_between_an_ask_s_end_and_its_index_update_leaves_no_row(
    harness: Harness,
) -> None:
    env = await _send(harness, _question("Still there?"), responders={"users": ["U0ALICE"]}, timeout_ms=HOUR)
    await _all_posted(harness, [env])
    await opened(harness, "U0ALICE", lambda v: env["ask_id"] in home_asks(v))
    [dead] = harness.replicas
    async with asyncio.timeout(10):
        await dead.kill()
    harness.replicas.remove(dead)
    # What a replica did before it died: resolve.lua ended the ask; nothing after (no message
    # redrawn, the index not updated). The clean-up timer is far off, so nothing else repairs it.
    store = Store(harness.redis, harness.prefix, finalize_after_ms=HOUR)
    loaded = await store.find(env["ask_id"])
    assert loaded is not None
    ending = results.ended_without_answer(loaded.record, "cancelled")
    prefix = results.result_prefix(
        ask_id=env["ask_id"],
        format="pi-question",
        ending=ending,
        responder=None,
        slack=None,
        created_at=iso_ms(loaded.record.created_ms),
    )
    verdict = await store.resolve(Resolution(loaded.record, "cancelled", prefix, None, "cancelled"))
    assert verdict.verdict == "won"
    keys = Keys(harness.prefix)
    member = due_member(env["ask_id"], slot_tag(env["reply_to"]))
    assert await harness.redis.zscore(keys.home_waiting("U0ALICE"), member) is not None  # the stale row
    problems = await check_prefix(harness.redis, harness.prefix)
    assert not [p for p in problems if p.kind == "stale_home_row"]  # ended, not finished: not drift yet

    await harness.start_replica()
    view = await opened(harness, "U0ALICE", lambda v: "Nothing is waiting" in _text(v))
    assert env["ask_id"] not in home_asks(view)
    # The render repaired the index (the clean-up timer, an hour away, did not).
    assert await harness.redis.zscore(keys.home_waiting("U0ALICE"), member) is None
    assert (await store.find(env["ask_id"])).finalized is False  # type: ignore[union-attr]
    # Finish what the dead replica left (its message), as the sweeper would an hour later.
    await harness.redis.zadd(keys.due, {member: 0})
    await dead.aclose()


async def test_check_finds_and_fixes_index_drift(harness: Harness) -> None:
    env = await _send(harness, _question("Drift?"), responders={"users": ["U0ALICE"]}, timeout_ms=HOUR)
    await _all_posted(harness, [env])
    keys = Keys(harness.prefix)
    member = due_member(env["ask_id"], slot_tag(env["reply_to"]))
    # A replica died between the ask's own set and the person's row: the row is missing.
    await harness.redis.zrem(keys.home_waiting("U0ALICE"), member)
    # And a row left for an ask that is gone.
    await harness.redis.zadd(keys.home_waiting("U0BOB"), {"ask-gone sgone": 1})
    await harness.redis.pexpire(keys.home_waiting("U0BOB"), HOUR)
    found = await check_prefix(harness.redis, harness.prefix, fix=True)
    assert sorted(p.kind for p in found) == ["missing_home_row", "stale_home_row"]
    assert await check_prefix(harness.redis, harness.prefix) == []
    assert await harness.redis.zscore(keys.home_waiting("U0ALICE"), member) is not None
    view = await opened(harness, "U0ALICE", lambda v: env["ask_id"] in home_asks(v))
    assert "Drift?" in _text(view)


async def test_publishes_survive_429_5xx_and_a_newer_view_published_elsewhere(harness: Harness) -> None:
    first = await _send(harness, _question("First?"), responders={"users": ["U0ALICE"]}, timeout_ms=HOUR)
    await _all_posted(harness, [first])
    await opened(harness, "U0ALICE", lambda v: first["ask_id"] in home_asks(v))
    # Another replica published meanwhile (its hash is not the one this one last saw), and Slack
    # then answers a 429 and a 503: the change still reaches the tab, drawn fresh.
    views_publish(harness.fake.state, {"user_id": "U0ALICE", "view": {"type": "home", "blocks": []}})
    harness.fake.fail_next("views.publish", times=1)
    harness.fake.fail_next("views.publish", status=503, times=1)
    second = await _send(
        harness, _question("Second?"), responders={"users": ["U0ALICE"]}, timeout_ms=HOUR // 2
    )
    view = await home_when(harness, "U0ALICE", lambda v: home_asks(v) == [second["ask_id"], first["ask_id"]])
    assert "Waiting for you: 2" in _text(view)
    answers = [c.error for c in harness.fake.find_calls("views.publish")]
    assert "ratelimited" in answers and "hash_conflict" in answers


@pytest.mark.parametrize("redraw", ["works", "fails"])
async def test_an_answer_updates_every_tab_showing_the_ask_whether_or_not_its_message_redraws(
    harness: Harness, redraw: str
) -> None:
    # The ending's Home part rides in finalize's round trips once the message is redrawn; when the
    # redraw fails (the sweeper retries it later), it is done on its own: either way the answerer has
    # it in "Recently answered by you" and the other person's row goes.
    env = await _send(harness, DEPLOY, responders={"users": ["U0ALICE", "U0BOB"]}, timeout_ms=HOUR)
    await _all_posted(harness, [env])
    await opened(harness, "U0ALICE", lambda v: env["ask_id"] in home_asks(v))
    await opened(harness, "U0BOB", lambda v: env["ask_id"] in home_asks(v))
    [message] = await harness.posted()
    if redraw == "fails":
        harness.fake.fail_next("chat.update", status=500, times=50)
    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    assert (await harness.result(env["reply_to"]))["outcome"] == "answered"
    alice = await home_when(harness, "U0ALICE", lambda v: env["ask_id"] not in home_asks(v))
    assert "Recently answered by you" in _text(alice) and DEPLOY["question"] in _text(alice)
    await home_when(harness, "U0BOB", lambda v: env["ask_id"] not in home_asks(v))
    recent = await harness.redis.lrange(Keys(harness.prefix).home_recent("U0ALICE"), 0, -1)
    assert recent == [due_member(env["ask_id"], slot_tag(env["reply_to"])).encode()]
    if redraw == "fails":
        harness.fake._faults.clear()  # the sweeper redraws it now
    await harness.ended("C0DEPLOY", message.ts, timeout=30)


@pytest.mark.parametrize("ending", ["answered", "timed out"])
async def test_the_tabs_are_published_before_the_message_is_redrawn(harness: Harness, ending: str) -> None:
    # The redraw waits for Slack's chat.update pacing (seconds when many asks end at once); the tabs
    # are drawn from the records and need not wait for it. Held here: every chat.update takes 6 s.
    timeout_ms = 4_000 if ending == "timed out" else HOUR
    env = await _send(harness, DEPLOY, responders={"users": ["U0ALICE", "U0BOB"]}, timeout_ms=timeout_ms)
    await _all_posted(harness, [env])
    await opened(harness, "U0BOB", lambda v: env["ask_id"] in home_asks(v))
    [message] = await harness.posted()
    harness.fake.method_latency["chat.update"] = 6.0
    if ending == "answered":
        await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    assert (await harness.result(env["reply_to"]))["outcome"] == ending.replace("timed out", "timeout")
    await home_when(harness, "U0BOB", lambda v: env["ask_id"] not in home_asks(v), timeout=4)
    assert interactive_elements(_blocks(harness, message.ts))  # the message is not redrawn yet
    harness.fake.method_latency.clear()
    await harness.ended("C0DEPLOY", message.ts, timeout=30)


async def test_a_counted_vote_s_tally_reaches_the_tabs_before_the_redraw(harness: Harness) -> None:
    # As above for a vote that does not decide the approval: its tally is on the other voter's tab
    # while the message still shows none (every chat.update held 6 s).
    env = await _send(
        harness, DEPLOY, approval={"count": 2}, responders={"users": ["U0ALICE", "U0BOB"]}, timeout_ms=HOUR
    )
    await _all_posted(harness, [env])
    await opened(harness, "U0BOB", lambda v: env["ask_id"] in home_asks(v))
    [message] = await harness.posted()
    harness.fake.method_latency["chat.update"] = 6.0
    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    await home_when(harness, "U0BOB", lambda v: "1 of 2 · alice" in _text(v), timeout=4)
    assert "1 of 2" not in json.dumps(_blocks(harness, message.ts), ensure_ascii=False)  # not redrawn yet
    harness.fake.method_latency.clear()
    await harness.fake.wait_for(
        lambda: "1 of 2 · alice" in json.dumps(_blocks(harness, message.ts), ensure_ascii=False) or None,
        timeout=30,
        what="the tally on the message",
    )
