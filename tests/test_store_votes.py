"""The vote script against real Redis: one atomic step per vote decides once, whoever races."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from bot.errors import NotReplicatedError
from bot.model import AskRecord, PostedMessage
from bot.storage.check import check_prefix
from bot.storage.keys import due_member, slot_tag
from bot.storage.store import Resolution, Store, Vote
from contract import normalize_ask_request
from contract.envelopes import Approval, ResultEnvelope, ResultResponder
from tests.conftest import REDIS_IS_FAKE


def _record(
    reply_to: str, *, count: int = 2, veto: list[int] | None = None, deadline_ms: int | None = None
) -> AskRecord:
    return AskRecord(
        ask_id="ask-1",
        tag=slot_tag(reply_to),
        reply_to=reply_to,
        request=normalize_ask_request({"question": "Deploy?", "options": ["Approve", "Reject"]}),
        created_ms=1_700_000_000_000,
        deadline_ms=deadline_ms,
        approval=Approval(count=count, veto=veto or []),
    )


def _prefix(rec: AskRecord, outcome: str = "answered") -> str:
    body = {
        "v": 1,
        "ask_id": rec.ask_id,
        "format": "pi-question",
        "outcome": outcome,
        "answers": [],
        "text": "",
        "details": {},
        "delivery": {"surface": "host", "degraded": False},
        "responder": None,
        "slack": None,
        "error": None,
        "created_at": None,
    }
    return json.dumps(body)[:-1] + ',"resolved_at":'


def _vote(rec: AskRecord, user: str, option: int) -> Vote:
    return Vote(rec, ResultResponder(id=user, name=user.lower()), option, _prefix(rec))


@pytest.fixture
def store(redis: Redis, prefix: str) -> Store:
    return Store(redis, prefix, retention_ms=60_000)


@pytest.fixture
async def other(redis_url: str) -> AsyncIterator[Redis]:
    """A second connection, as a second bot replica would have."""
    client = Redis.from_url(redis_url)
    yield client
    await client.aclose()


async def _posted(store: Store, rec: AskRecord) -> None:
    verdict = await store.accept(
        rec, consumer="c1", lease_ms=30_000, pending_ttl_ms=120_000, entry_id="1-0", schedule_at_ms=None
    )
    assert verdict.verdict == "post"
    await store.posted(rec.tag, rec.ask_id, [PostedMessage(channel="C1", ts="1.1")], actor="c1")


async def _results(redis: Redis, reply_to: str) -> list[dict[str, object]]:
    return [json.loads(x) for x in await redis.lrange(reply_to, 0, -1)]


async def test_a_vote_below_the_count_is_recorded_and_a_repeat_changes_nothing(
    store: Store, redis: Redis, reply_to: str
) -> None:
    rec = _record(reply_to)
    await _posted(store, rec)
    first = await store.vote(_vote(rec, "UANN", 0))
    assert first.verdict == "counted"
    assert [(v.user, v.selected) for v in first.votes] == [(ResultResponder(id="UANN", name="uann"), [0])]
    again = await store.vote(_vote(rec, "UANN", 0))
    assert (again.verdict, again.votes) == ("same", first.votes)
    loaded = await store.load(rec.tag, rec.ask_id)
    assert loaded is not None and loaded.state == "posted" and loaded.votes == first.votes
    assert await _results(redis, reply_to) == []


async def test_the_vote_that_reaches_the_count_ends_the_ask_with_every_final_vote(
    store: Store, redis: Redis, reply_to: str
) -> None:
    rec = _record(reply_to)
    await _posted(store, rec)
    assert (await store.vote(_vote(rec, "UANN", 1))).verdict == "counted"
    assert (await store.vote(_vote(rec, "UBOB", 0))).verdict == "counted"
    assert (await store.vote(_vote(rec, "UANN", 0))).verdict == "won"  # Ann changed her vote
    [result] = await _results(redis, reply_to)
    ResultEnvelope.model_validate(result)
    votes = result["votes"]
    assert isinstance(votes, list)
    # Ann's final vote moved after Bob's: the order the final votes were cast.
    assert [(v["user"]["id"], v["selected"]) for v in votes] == [("UBOB", [0]), ("UANN", [0])]
    assert votes[0]["at"] <= votes[1]["at"] == result["resolved_at"]
    loaded = await store.load(rec.tag, rec.ask_id)
    assert loaded is not None and loaded.state == "ended" and loaded.by == "UANN"


async def test_a_veto_vote_ends_the_ask_at_once(store: Store, redis: Redis, reply_to: str) -> None:
    rec = _record(reply_to, count=3, veto=[1])
    await _posted(store, rec)
    verdict = await store.vote(_vote(rec, "UANN", 1))
    assert verdict.verdict == "won" and verdict.result is not None
    assert verdict.messages == [PostedMessage(channel="C1", ts="1.1")]
    assert [v.selected for v in verdict.result.envelope.votes or []] == [[1]]
    assert len(await _results(redis, reply_to)) == 1


async def test_two_last_votes_racing_decide_once(
    store: Store, other: Redis, redis: Redis, reply_to: str, prefix: str
) -> None:
    rec = _record(reply_to, count=2)
    await _posted(store, rec)
    await store.vote(_vote(rec, "UANN", 0))
    replica = Store(other, prefix, retention_ms=60_000)
    verdicts = await asyncio.gather(store.vote(_vote(rec, "UBOB", 0)), replica.vote(_vote(rec, "UCAT", 0)))
    assert sorted(v.verdict for v in verdicts) == ["ended", "won"]
    [result] = await _results(redis, reply_to)
    winner = next(v for v in verdicts if v.verdict == "won")
    assert winner.result is not None and winner.result.envelope == ResultEnvelope.model_validate(result)
    assert len(result["votes"]) == 2  # type: ignore[arg-type]


async def test_a_vote_racing_a_cancel_loses_cleanly_or_wins_alone(
    store: Store, other: Redis, redis: Redis, reply_to: str, prefix: str
) -> None:
    rec = _record(reply_to, count=2)
    await _posted(store, rec)
    await store.vote(_vote(rec, "UANN", 0))
    replica = Store(other, prefix, retention_ms=60_000)
    vote, cancel = await asyncio.gather(
        store.vote(_vote(rec, "UBOB", 0)),
        replica.resolve(Resolution(rec, "cancelled", _prefix(rec, "cancelled"), None, "cancelled")),
    )
    [result] = await _results(redis, reply_to)
    if vote.verdict == "won":
        assert cancel.verdict == "ended" and result["outcome"] == "answered"
    else:
        assert (vote.verdict, cancel.verdict, result["outcome"]) == ("ended", "won", "cancelled")
        # The losing vote changed nothing: the votes are those at the cancel.
        assert [v["user"]["id"] for v in result["votes"]] == ["UANN"]  # type: ignore[index,union-attr]
    after = await store.vote(_vote(rec, "UCAT", 1))
    assert after.verdict == "ended"
    assert len(await _results(redis, reply_to)) == 1


async def test_a_timeout_result_carries_the_votes_recorded(store: Store, redis: Redis, reply_to: str) -> None:
    rec = _record(reply_to, count=3)
    await _posted(store, rec)
    await store.vote(_vote(rec, "UANN", 0))
    await store.vote(_vote(rec, "UBOB", 1))
    verdict = await store.resolve(Resolution(rec, "timeout", _prefix(rec, "timeout"), None, "timeout"))
    assert verdict.verdict == "won" and verdict.result is not None
    assert [(v.user.id, v.selected) for v in verdict.result.envelope.votes or []] == [
        ("UANN", [0]),
        ("UBOB", [1]),
    ]


async def test_an_approval_nobody_voted_on_ends_with_an_empty_list_and_a_plain_ask_with_null(
    store: Store, redis: Redis, reply_to: str
) -> None:
    rec = _record(reply_to)
    await _posted(store, rec)
    verdict = await store.resolve(Resolution(rec, "timeout", _prefix(rec, "timeout"), None, "timeout"))
    assert verdict.result is not None and verdict.result.envelope.votes == []
    plain = rec.model_copy(update={"ask_id": "ask-2", "approval": None})
    await store.accept(
        plain, consumer="c1", lease_ms=30_000, pending_ttl_ms=120_000, entry_id="2-0", schedule_at_ms=None
    )
    verdict = await store.resolve(Resolution(plain, "timeout", _prefix(plain, "timeout"), None, "timeout"))
    assert verdict.result is not None and verdict.result.envelope.votes is None


async def test_a_vote_after_the_deadline_is_refused_and_not_recorded(store: Store, reply_to: str) -> None:
    deadline = await store.server_time_ms() + 200
    rec = _record(reply_to, deadline_ms=deadline)
    await _posted(store, rec)
    for _ in range(200):  # poll Redis time past the deadline (at most 4 s)
        if await store.server_time_ms() > deadline:
            break
        await asyncio.sleep(0.02)
    verdict = await store.vote(_vote(rec, "UANN", 0))
    assert verdict.verdict == "late"
    loaded = await store.load(rec.tag, rec.ask_id)
    assert loaded is not None and loaded.votes == [] and loaded.state == "posted"


async def _decide(store: Store, rec: AskRecord, decide: str) -> str:
    """End a posted approval ask with one deciding vote, or with a resolve (a cancel)."""
    if decide == "vote":
        return (await store.vote(_vote(rec, "U1", 1))).verdict  # a veto decides alone
    cancel = Resolution(rec, "cancelled", _prefix(rec, "cancelled"), None, "cancelled")
    return (await store.resolve(cancel)).verdict


@pytest.mark.parametrize("decide", ["vote", "resolve"])
async def test_an_ask_decided_by_a_vote_or_resolve_keeps_its_id_index_only_for_the_retention(
    redis: Redis, prefix: str, reply_to: str, decide: str
) -> None:
    # Like every other ending: otherwise the index outlives the record by the whole pending life,
    # and `slack-ask check` reports index_without_record once the record has expired.
    store = Store(redis, prefix, retention_ms=300)
    rec = _record(reply_to, veto=[1])
    await store.claim_index(rec.ask_id, rec.tag, 120_000)
    await _posted(store, rec)  # the index now lives as long as the pending ask: 120 s
    assert await _decide(store, rec, decide) == "won"
    # The ending's finalize (which follows every ending: at once, or from the clean-up timer) gives
    # the index the retention, in the round trip that marks the messages done.
    await store.finalize(rec.tag, rec.ask_id, 1)
    assert 0 < int(await redis.pttl(store.keys.index(rec.ask_id))) <= 300
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while await redis.exists(store.ask_keys(rec.tag, rec.ask_id).ask):
        assert loop.time() < deadline, "the record did not expire"
        await asyncio.sleep(0.05)
    while problems := await check_prefix(redis, prefix):
        assert loop.time() < deadline, problems
        await asyncio.sleep(0.05)


@pytest.mark.skipif(REDIS_IS_FAKE, reason="fakeredis has no WAIT")
@pytest.mark.parametrize("decide", ["vote", "resolve"])
async def test_an_ending_the_replicas_did_not_confirm_still_gives_its_index_the_retention(
    redis: Redis, prefix: str, reply_to: str, decide: str
) -> None:
    # The test Redis has no replica: every confirmed write raises NotReplicatedError after it ran on
    # the master. The ask did end there (a retry finds it ended), so its index must follow.
    plain = Store(redis, prefix, retention_ms=60_000)
    rec = _record(reply_to, veto=[1])
    await plain.claim_index(rec.ask_id, rec.tag, 120_000)
    await _posted(plain, rec)
    store = Store(redis, prefix, retention_ms=60_000, min_replicas=1, replica_wait_ms=10)
    with pytest.raises(NotReplicatedError):
        await _decide(store, rec, decide)
    loaded = await plain.load(rec.tag, rec.ask_id)
    assert loaded is not None and loaded.state == "ended"
    assert 0 < int(await redis.pttl(plain.keys.index(rec.ask_id))) <= 60_000


async def test_on_one_server_only_the_deciding_vote_sets_the_clean_up_timer_in_its_own_step(
    store: Store, redis: Redis, reply_to: str
) -> None:
    # An undecided vote leaves the ask's own timer (its deadline) alone: no early sweep of a pending
    # approval after every vote. The deciding vote brings it forward to the clean-up time in vote.lua.
    rec = _record(reply_to)
    await _posted(store, rec)
    member = due_member(rec.ask_id, rec.tag)
    far = 9_000_000_000_000
    await redis.zadd(store.keys.due, {member: far})
    assert (await store.vote(_vote(rec, "UANN", 0))).verdict == "counted"
    assert (await store.vote(_vote(rec, "UANN", 0))).verdict == "same"
    assert await redis.zscore(store.keys.due, member) == far
    now = await store.server_time_ms()
    assert (await store.vote(_vote(rec, "UBOB", 0))).verdict == "won"
    at = await redis.zscore(store.keys.due, member)
    assert at is not None and now + store.finalize_after_ms <= at < now + store.finalize_after_ms + 5_000
    # A vote that finds the ask ended changes no timer either.
    await redis.zadd(store.keys.due, {member: far})
    assert (await store.vote(_vote(rec, "UCAT", 0))).verdict == "ended"
    assert await redis.zscore(store.keys.due, member) == far


async def test_on_cluster_the_clean_up_timer_goes_first_and_an_undecided_vote_only_brings_it_forward(
    store: Store, redis: Redis, reply_to: str
) -> None:
    # The due zset is in another slot there: the timer is set before the vote, whatever it decides.
    store._cluster = True
    rec = _record(reply_to)
    await _posted(store, rec)
    member = due_member(rec.ask_id, rec.tag)
    await redis.zadd(store.keys.due, {member: 9_000_000_000_000})
    now = await store.server_time_ms()
    assert (await store.vote(_vote(rec, "UANN", 0))).verdict == "counted"
    at = await redis.zscore(store.keys.due, member)
    assert at is not None and now + store.finalize_after_ms <= at < now + store.finalize_after_ms + 5_000
