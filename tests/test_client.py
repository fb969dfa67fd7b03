"""The agent-side client against a real Redis, with a tiny in-test bot side (XREAD + RPUSH)."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis as syncredis
import redis.asyncio as aioredis

from bot.client import (
    AskClient,
    AskRequestError,
    MalformedResultError,
    RedisUnavailableError,
    SyncAskClient,
    ask_sync,
    new_ask_id,
)
from bot.model import AskRecord
from bot.storage.keys import slot_tag
from bot.storage.store import Resolution, Store
from contract import ContractError, normalize_ask_request, normalize_rich_form
from contract.envelopes import ASK_ID_PATTERN, ResultEnvelope, parse_ask_envelope, parse_cancel_envelope
from tests.conftest import REDIS_IS_FAKE
from tests.fakebot import FakeBot, make_result
from tests.redis_procs import TcpProxy

DEPLOY = {"questions": [{"question": "Deploy to production?", "options": ["Yes", "No"], "recommended": 0}]}


# ``redis_url``, ``prefix`` (unique per test), ``redis`` (deletes the prefix's keys) and ``sync_redis``
# come from conftest.


@pytest.fixture
def bot(redis: aioredis.Redis, prefix: str) -> FakeBot:
    return FakeBot(redis, prefix)


@pytest.fixture
async def client(redis_url: str, prefix: str) -> AsyncIterator[AskClient]:
    async with AskClient(redis_url, prefix=prefix) as c:
        yield c


# ---------------------------------------------------------------- ids and envelopes


def test_generated_ask_ids_are_valid_unique_and_sortable() -> None:
    ids = [new_ask_id() for _ in range(2000)]
    assert all(re.match(ASK_ID_PATTERN, i) for i in ids)
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)
    later = new_ask_id()
    time.sleep(0.002)
    assert new_ask_id() > later


async def test_submit_sends_a_valid_ask_envelope_on_its_own_reply_list(
    client: AskClient, bot: FakeBot, prefix: str
) -> None:
    ask_id = await client.submit(
        DEPLOY,
        route={"channel": "C0123", "thread_ts": "1700000000.000100"},
        timeout_ms=600_000,
        on_timeout="recommended",
        responders={"users": ["U0123"], "usergroups": ["S0456"]},
        requester={"name": "deploy-bot", "url": "https://ci.example.com/run/1"},
        escalate=[{"after_ms": 60_000, "user": "U0999", "mention": "U0999"}],
        remind_every_ms=120_000,
    )
    field, envelope = await bot.next_entry()
    assert field == "ask"
    assert re.match(ASK_ID_PATTERN, ask_id)
    parsed = parse_ask_envelope(json.dumps(envelope))
    assert parsed.ask_id == ask_id
    assert parsed.reply_to == f"{prefix}:reply:{ask_id}"
    assert parsed.format == "pi-question"
    assert envelope["request"] == DEPLOY  # sent as given: the bot normalizes it itself
    assert envelope["route"] == {"channel": "C0123", "thread_ts": "1700000000.000100"}
    assert envelope["timeout_ms"] == 600_000
    assert envelope["on_timeout"] == "recommended"
    assert envelope["responders"] == {"users": ["U0123"], "usergroups": ["S0456"]}
    assert envelope["escalate"] == [{"after_ms": 60_000, "user": "U0999", "mention": "U0999"}]
    assert envelope["remind_every_ms"] == 120_000


async def test_submit_omits_unset_fields_so_the_bot_applies_its_defaults(
    client: AskClient, bot: FakeBot
) -> None:
    ask_id = await client.submit(DEPLOY)
    _, envelope = await bot.next_entry()
    assert set(envelope) == {"v", "ask_id", "reply_to", "format", "request"}
    assert envelope["ask_id"] == ask_id


async def test_submit_keeps_a_chosen_ask_id_and_reply_to(
    client: AskClient, bot: FakeBot, prefix: str
) -> None:
    ask_id = await client.submit(DEPLOY, ask_id="agent-7~run.42", reply_to=f"{prefix}:reply:agent-7")
    _, envelope = await bot.next_entry()
    assert ask_id == envelope["ask_id"] == "agent-7~run.42"
    assert envelope["reply_to"] == f"{prefix}:reply:agent-7"


async def test_bad_request_fails_in_the_caller_with_the_contract_message_and_sends_nothing(
    client: AskClient, redis: aioredis.Redis, prefix: str
) -> None:
    bad = {"questions": [{"question": "Deploy?", "options": ["Yes"]}, {"question": "Why?", "options": []}]}
    with pytest.raises(ContractError) as expected:
        normalize_ask_request(bad)
    with pytest.raises(AskRequestError) as caught:
        await client.submit(bad)
    assert str(caught.value) == str(expected.value)
    assert caught.value.message == str(expected.value)
    assert caught.value.code == "invalid_request"
    assert await redis.exists(f"{prefix}:asks") == 0


async def test_bad_rich_form_fails_with_the_rich_normalizer_message(
    client: AskClient, redis: aioredis.Redis, prefix: str
) -> None:
    bad = {"questions": []}
    with pytest.raises(ContractError) as expected:
        normalize_rich_form(bad)
    with pytest.raises(AskRequestError) as caught:
        await client.submit(bad, format="rich")
    assert caught.value.message == str(expected.value)
    assert await redis.exists(f"{prefix}:asks") == 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"ask_id": "has space"}, "ask_id must be 1-128 characters of A-Z a-z 0-9 . _ : ~ -"),
        ({"reply_to": "two words"}, "reply_to must be 1-512 characters with no whitespace"),
        ({"route": {"channel": "C1", "user": "U1"}}, "a route names exactly one of channel, user or policy"),
        ({"timeout_ms": -1}, "timeout_ms"),
        ({"responders": {"users": ["not-an-id"]}}, "is not a Slack id"),
    ],
)
async def test_bad_envelope_fields_fail_in_the_caller_as_invalid_envelope(
    client: AskClient, redis: aioredis.Redis, prefix: str, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(AskRequestError) as caught:
        await client.submit(DEPLOY, **kwargs)
    assert caught.value.code == "invalid_envelope"
    assert message in caught.value.message
    assert await redis.exists(f"{prefix}:asks") == 0


# ---------------------------------------------------------------- waiting


async def test_wait_returns_the_result_the_bot_pushed(client: AskClient, bot: FakeBot) -> None:
    ask_id = await client.submit(DEPLOY)
    pushed = await bot.answer_next("answered")
    result = await client.wait(ask_id, 5)
    assert isinstance(result, ResultEnvelope)
    assert result.to_wire() == pushed
    assert result.text == "User answers:\nq1: Yes"


async def test_wait_returns_none_when_the_timeout_passes(client: AskClient) -> None:
    ask_id = await client.submit(DEPLOY)
    started = time.monotonic()
    assert await client.wait(ask_id, 0.3) is None
    assert 0.25 <= time.monotonic() - started < 3


async def test_wait_with_zero_timeout_only_looks_once(client: AskClient, bot: FakeBot) -> None:
    ask_id = await client.submit(DEPLOY)
    assert await client.wait(ask_id, 0) is None
    await bot.answer_next()
    result = await client.wait(ask_id, 0)
    assert result is not None
    assert result.ask_id == ask_id


async def test_wait_survives_the_connection_being_killed(
    redis_url: str, prefix: str, redis: aioredis.Redis, bot: FakeBot
) -> None:
    if REDIS_IS_FAKE:
        pytest.skip("fakeredis lists no blocked clients and kills none (CLIENT LIST, CLIENT KILL)")
    name = f"{prefix}-waiter"
    own = aioredis.Redis.from_url(redis_url, client_name=name)

    async def blocked_ids() -> list[int]:
        clients = await redis.client_list()
        return [int(c["id"]) for c in clients if c.get("name") == name and c.get("cmd") == "blpop"]

    async def until_blocked(exclude: set[int]) -> int:
        for _ in range(200):
            ids = [i for i in await blocked_ids() if i not in exclude]
            if ids:
                return ids[0]
            await asyncio.sleep(0.025)
        raise AssertionError("the client never blocked in BLPOP")

    try:
        async with AskClient(own, prefix=prefix) as client:
            ask_id = await client.submit(DEPLOY)
            waiting = asyncio.create_task(client.wait(ask_id, 30))
            try:
                first = await until_blocked(set())
                assert await redis.execute_command("CLIENT", "KILL", "ID", first) == 1
                # The wait goes on, on a new connection.
                await until_blocked({first})
                assert not waiting.done()
                pushed = await bot.answer_next()
                result = await asyncio.wait_for(waiting, 10)
            finally:
                waiting.cancel()
            assert result is not None
            assert result.to_wire() == pushed
    finally:
        await own.aclose()


async def test_wait_retries_while_redis_is_down_and_raises_when_the_timeout_passes(prefix: str) -> None:
    async with AskClient("redis://127.0.0.1:1/0", prefix=prefix) as client:
        started = time.monotonic()
        with pytest.raises(RedisUnavailableError):
            await client.wait("some-ask", 0.5)
        assert time.monotonic() - started >= 0.45


async def test_results_of_other_asks_on_a_shared_list_are_kept_for_their_own_wait(
    client: AskClient, bot: FakeBot, prefix: str
) -> None:
    shared = f"{prefix}:reply:shared"
    first = await client.submit(DEPLOY, reply_to=shared)
    second = await client.submit(DEPLOY, reply_to=shared)
    _, env_first = await bot.next_entry()
    _, env_second = await bot.next_entry()
    await bot.push(shared, make_result(env_second, "cancelled"))
    await bot.push(shared, make_result(env_first, "answered"))
    got_first = await client.wait(first, 5)
    got_second = await client.wait(second, 0)
    assert got_first is not None
    assert got_first.outcome == "answered"
    assert got_second is not None
    assert got_second.outcome == "cancelled"


async def test_a_result_with_fields_from_a_newer_bot_still_parses(client: AskClient, bot: FakeBot) -> None:
    ask_id = await client.submit(DEPLOY)
    _, envelope = await bot.next_entry()
    await bot.push(envelope["reply_to"], make_result(envelope, "answered", future_field={"x": 1}))
    result = await client.wait(ask_id, 5)
    assert result is not None
    assert result.outcome == "answered"


async def test_a_malformed_element_on_the_reply_list_raises(client: AskClient, bot: FakeBot) -> None:
    ask_id = await client.submit(DEPLOY)
    _, envelope = await bot.next_entry()
    await bot.push(envelope["reply_to"], "not json")
    with pytest.raises(MalformedResultError) as caught:
        await client.wait(ask_id, 5)
    assert caught.value.raw == b"not json"


@pytest.mark.parametrize("outcome", ["answered", "cancelled", "timeout", "dismissed", "unavailable", "error"])
async def test_ask_submits_then_returns_the_result_of_each_outcome(
    client: AskClient, bot: FakeBot, outcome: str
) -> None:
    answering = asyncio.create_task(bot.answer_next(outcome))
    result = await client.ask(DEPLOY, wait=10)
    pushed = await answering
    assert isinstance(result, ResultEnvelope)
    assert result.outcome == outcome
    assert result.to_wire() == pushed


async def test_ask_returns_the_ask_id_when_not_waiting_or_nothing_came(
    client: AskClient, bot: FakeBot
) -> None:
    not_waiting = await client.ask(DEPLOY, wait=False)
    assert isinstance(not_waiting, str)
    timed_out = await client.ask(DEPLOY, wait=0.2)
    assert isinstance(timed_out, str)
    assert timed_out != not_waiting
    assert (await bot.next_entry())[1]["ask_id"] == not_waiting


# ---------------------------------------------------------------- cancel, recover, result


async def test_cancel_sends_a_cancel_envelope_for_the_asks_reply_list(
    client: AskClient, bot: FakeBot, prefix: str
) -> None:
    ask_id = await client.submit(DEPLOY, reply_to=f"{prefix}:reply:mine")
    await bot.next_entry()
    await client.cancel(ask_id, reason="build failed")
    field, envelope = await bot.next_entry()
    assert field == "cancel"
    parsed = parse_cancel_envelope(json.dumps(envelope))
    assert (parsed.ask_id, parsed.reply_to, parsed.reason) == (ask_id, f"{prefix}:reply:mine", "build failed")


async def test_cancel_of_an_ask_from_elsewhere_uses_the_default_reply_list(
    client: AskClient, bot: FakeBot, prefix: str
) -> None:
    await client.cancel("other-agent-1")
    field, envelope = await bot.next_entry()
    assert field == "cancel"
    assert envelope == {"v": 1, "ask_id": "other-agent-1", "reply_to": f"{prefix}:reply:other-agent-1"}


async def test_recover_resends_the_original_envelope(client: AskClient, bot: FakeBot) -> None:
    ask_id = await client.submit(DEPLOY, timeout_ms=60_000)
    _, original = await bot.next_entry()
    await client.recover(ask_id, original)
    field, resent = await bot.next_entry()
    assert field == "ask"
    assert resent == original
    await bot.push(original["reply_to"], make_result(original))
    result = await client.wait(ask_id, 5)
    assert result is not None
    assert result.ask_id == ask_id


async def test_recover_refuses_an_envelope_of_another_ask(client: AskClient, bot: FakeBot) -> None:
    await client.submit(DEPLOY)
    _, original = await bot.next_entry()
    with pytest.raises(AskRequestError, match="not 'someone-else'"):
        await client.recover("someone-else", original)


async def test_result_of_an_unknown_ask_is_none(client: AskClient) -> None:
    assert await client.result("never-sent") is None


async def test_result_reads_the_stored_result_of_an_ended_ask_through_the_store(
    client: AskClient, redis: aioredis.Redis, prefix: str
) -> None:
    store = Store(redis, prefix)
    ask_id = new_ask_id()
    reply_to = client.reply_key(ask_id)
    record = AskRecord(
        ask_id=ask_id,
        tag=slot_tag(reply_to),
        reply_to=reply_to,
        request=normalize_ask_request(DEPLOY),
        created_ms=await store.server_time_ms(),
    )
    assert await store.claim_index(ask_id, record.tag, 120_000) == record.tag  # as the bot's intake does
    accepted = await store.accept(
        record, consumer="c1", lease_ms=30_000, pending_ttl_ms=120_000, entry_id="1-0", schedule_at_ms=None
    )
    assert accepted.verdict == "post"
    assert await client.result(ask_id) is None  # pending: no result yet

    stored = make_result({"ask_id": ask_id, "request": DEPLOY})
    del stored["resolved_at"]  # the resolve script appends Redis time
    result_prefix = json.dumps(stored)[:-1] + ',"resolved_at":'
    verdict = await store.resolve(Resolution(record, "answered", result_prefix, "U0HUMAN", "answered"))
    assert verdict.verdict == "won"
    assert verdict.result is not None

    result = await client.result(ask_id)
    assert result is not None
    assert result == verdict.result.envelope
    assert result.to_wire() == {**stored, "resolved_at": verdict.result.envelope.resolved_at}
    assert result.text == "User answers:\nq1: Yes"
    assert await redis.llen(reply_to) == 1  # read from the store: the reply list is left as it was
    assert await client.result(new_ask_id()) is None


# ---------------------------------------------------------------- connections


async def test_submit_to_an_unreachable_redis_raises_redis_unavailable(prefix: str) -> None:
    async with AskClient("redis://127.0.0.1:1/0", prefix=prefix) as client:
        with pytest.raises(RedisUnavailableError, match=re.escape("127.0.0.1:1")):
            await client.submit(DEPLOY)


async def test_a_callers_redis_stays_open_after_the_client_closes(redis_url: str, prefix: str) -> None:
    own = aioredis.Redis.from_url(redis_url)
    try:
        async with AskClient(own, prefix=prefix):
            pass
        assert await own.ping()
    finally:
        await own.aclose()


# ---------------------------------------------------------------- the synchronous wrapper


def _answer_sync(r: syncredis.Redis, prefix: str, outcome: str = "answered") -> dict[str, Any]:
    reply = r.xread({f"{prefix}:asks": "0"}, count=1, block=5000)
    assert reply
    fields = reply[0][1][0][1]
    envelope = json.loads(fields[b"ask"])
    result = make_result(envelope, outcome)
    r.rpush(envelope["reply_to"], json.dumps(result))
    return result


def test_sync_client_submits_and_waits(redis_url: str, prefix: str, sync_redis: syncredis.Redis) -> None:
    with SyncAskClient(redis_url, prefix=prefix) as client:
        ask_id = client.submit(DEPLOY)
        pushed = _answer_sync(sync_redis, prefix)
        result = client.wait(ask_id, 5)
        assert result is not None
        assert result.to_wire() == pushed
        with pytest.raises(AskRequestError, match="questions must not be empty"):
            client.submit({"questions": []})


def test_ask_sync_reads_the_environment_and_waits(
    redis_url: str, prefix: str, sync_redis: syncredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("SLACK_ASK_PREFIX", prefix)
    ask_id = ask_sync(DEPLOY, wait=False)
    assert isinstance(ask_id, str)
    pushed = _answer_sync(sync_redis, prefix, "timeout")
    with SyncAskClient(redis_url, prefix=prefix) as client:
        result = client.wait(ask_id, 5)
    assert result is not None
    assert result.to_wire() == pushed


async def test_an_approval_is_sent_with_the_requester_and_checked_before_sending(
    redis: aioredis.Redis,
) -> None:
    async with AskClient(redis, prefix="approval-test") as client:
        request = {"question": "Deploy?", "options": ["Approve", "Reject"]}
        envelope = client.build_envelope(
            request, approval={"count": 2, "veto": [1]}, requester={"user": "ada@example.com"}
        )
        assert envelope["approval"] == {"count": 2, "veto": [1]}
        assert envelope["requester"] == {"user": "ada@example.com"}
        with pytest.raises(AskRequestError, match=r"approval\.veto: 2 is not an option") as caught:
            client.build_envelope(request, approval={"count": 2, "veto": [2]})
        assert caught.value.code == "invalid_envelope"
        with pytest.raises(AskRequestError, match="exactly one question"):
            client.build_envelope({"questions": [request, {**request, "id": "b"}]}, approval={"count": 2})


@pytest.mark.skipif(REDIS_IS_FAKE, reason="fakeredis lists no blocked clients (CLIENT LIST flags)")
async def test_a_wait_cancelled_while_its_blpop_is_served_keeps_the_popped_result(
    redis: aioredis.Redis, redis_url: str, prefix: str
) -> None:
    # The Pi extension's grace period, in Python: Redis popped the result for the blocked BLPOP and
    # its reply is on the way when the wait is cancelled. Closing that connection at once would lose
    # it (the list is empty now); the BLPOP goes on instead, and the next wait() returns it.
    port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    proxy = TcpProxy(port)
    await proxy.start()
    try:
        async with AskClient(proxy.url, prefix=prefix) as client:
            ask_id = new_ask_id()
            key = client.reply_list(ask_id)

            async def blocked() -> bool:  # this client's BLPOP, not another test's
                clients = await redis.client_list()
                return any("b" in c.get("flags", "") and c.get("addr") in proxy.upstream for c in clients)

            waiting = asyncio.create_task(client.wait(ask_id))
            await _until(blocked, what="the wait's BLPOP blocked in Redis")
            proxy.hold()  # the reply is slow on its way (a remote Redis)
            envelope = {"ask_id": ask_id, "request": {"question": "Ship?", "options": ["Yes", "No"]}}
            await redis.rpush(key, json.dumps(make_result(envelope, "cancelled")))
            await _until(lambda: _not(blocked), what="Redis served the BLPOP")
            assert await redis.llen(key) == 0  # popped server-side
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            proxy.release()
            got = await client.wait(ask_id, timeout=5)
            assert got is not None and got.ask_id == ask_id and got.outcome == "cancelled"
    finally:
        await proxy.stop()


async def _not(check: Any) -> bool:
    return not await check()


async def _until(check: Any, *, what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        await asyncio.sleep(0.01)
