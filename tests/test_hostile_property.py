"""Property: whatever arrives on ``P:asks`` and at ``/slack/events``, the bot keeps working (guarantee 10.5).

Hypothesis draws hostile stream entries (random field names and counts, random bytes, random JSON,
envelopes with random fields and numbers, ``reply_to`` drawn from the bot's own key names and from
keys of other types) and random unsigned HTTP bodies; all of it goes into a running bot on real
Redis. Afterwards a normal ask is still posted and answered, ``/healthz`` is 200, the keys of other
types are untouched, and (the harness fixture) the invariant check is clean and the log has no crash.

The examples are drawn first and then sent as one batch (a running bot cannot be restarted per
example within the time budget), so a failure reports the whole batch rather than a shrunk example.
"""

from __future__ import annotations

import asyncio
import io
import json
import time
from typing import Any

import aiohttp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.harness import Harness

DEPLOY = {"id": "deploy", "question": "Deploy?", "options": ["Yes", "No"]}
ENTRIES = 150
BODIES = 60


def _draw(strategy: st.SearchStrategy[Any], count: int) -> list[Any]:
    """``count`` examples of ``strategy`` (hypothesis explores its edges: empty, huge, odd)."""
    out: list[Any] = []

    @settings(
        max_examples=count,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(value: Any) -> None:
        out.append(value)

    collect()
    return out[:count]


def _json() -> st.SearchStrategy[Any]:
    scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
        max_leaves=12,
    )


def _numbers() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.integers(min_value=-(2**70), max_value=2**70),
        st.sampled_from([0, 1, 10**15, 10**18, 2**63, 2**64, -1, 1.5, 1e308, 10**400]),
        st.text(max_size=5),
        st.none(),
    )


def _reply_tos(prefix: str) -> st.SearchStrategy[Any]:
    own = [
        f"{prefix}:asks",
        f"{prefix}:due",
        f"{prefix}:dead",
        f"{prefix}:id:x",
        f"{prefix}:chan:C0DEPLOY",
        f"{prefix}:{{t}}:ask:victim",
        f"{prefix}:{{t}}:audit:victim",
        f"{prefix}:{{t}}:cancel:victim",
        f"{prefix}:rate:chat.postMessage",
    ]
    others = [f"{prefix}:reply:hash", f"{prefix}:reply:zset", f"{prefix}-app:string", f"{prefix}-app:set"]
    lists = [f"{prefix}:reply:ok", f"{prefix}:reply:{{tag}}x", f"{prefix}-app:list"]
    return st.one_of(
        st.sampled_from(own + others + lists),
        st.text(max_size=30).map(lambda t: f"{prefix}:reply:{t}"),
        st.text(max_size=30).map(lambda t: f"{prefix}:{t}"),
        _json(),
    )


def _envelope(prefix: str) -> st.SearchStrategy[dict[str, Any]]:
    ask_ids = st.one_of(
        st.sampled_from(["a1", "victim", "x:id:y", "abc\n", "", "a" * 129]), st.text(max_size=20), _json()
    )
    requests = st.one_of(st.just(DEPLOY), _json(), st.just({"questions": []}))
    routes = st.one_of(
        st.none(),
        st.fixed_dictionaries({"channel": st.sampled_from(["C0DEPLOY", "C0NOPE", "", "C\n"])}),
        st.fixed_dictionaries({"user": st.sampled_from(["U0ALICE", "U1,U2,U3", "a@b.c", "x"])}),
        st.fixed_dictionaries({"policy": st.text(max_size=10)}),
        _json(),
    )
    steps = st.lists(
        st.fixed_dictionaries(
            {"after_ms": _numbers(), "channel": st.sampled_from(["C0OPS", "C0DEPLOY"])},
            optional={"mention": st.sampled_from(["U0BOB", "S0TEAM", "<!here>", ["U1", "U2"]])},
        ),
        max_size=3,
    )
    return st.fixed_dictionaries(
        {},
        optional={
            "v": st.sampled_from([1, 1, 1, 2, "1", 1.0, None, True]),
            "ask_id": ask_ids,
            "reply_to": _reply_tos(prefix),
            "format": st.sampled_from(["pi-question", "rich", "other"]),
            "request": requests,
            "route": routes,
            "timeout_ms": _numbers(),
            "on_timeout": st.sampled_from(["cancel", "recommended", "error", "never"]),
            "remind_every_ms": _numbers(),
            "escalate": st.one_of(steps, _json()),
            "responders": st.one_of(
                st.fixed_dictionaries({"users": st.lists(st.text(max_size=12), max_size=3)}), _json()
            ),
            "requester": st.one_of(st.fixed_dictionaries({"url": st.text(max_size=30)}), _json()),
            "reason": st.text(max_size=30),
            "extra": _json(),
        },
    )


def _value(prefix: str) -> st.SearchStrategy[bytes]:
    return st.one_of(
        st.binary(max_size=64),
        _json().map(lambda j: json.dumps(j).encode()),
        _envelope(prefix).map(lambda e: json.dumps(e).encode()),
        # A valid ask with one field made hostile.
        _envelope(prefix)
        .map(
            lambda e: json.dumps(
                {"v": 1, "ask_id": "p1", "reply_to": f"{prefix}:reply:p", "request": DEPLOY, **e}
            )
        )
        .map(str.encode),
    )


def _entry(prefix: str) -> st.SearchStrategy[dict[bytes, bytes]]:
    names = st.one_of(
        st.sampled_from([b"ask", b"ask", b"cancel", b"dismiss", b"", b"ASK"]), st.binary(max_size=8)
    )
    return st.dictionaries(names, _value(prefix), min_size=1, max_size=4)


def _body() -> st.SearchStrategy[tuple[bytes, dict[str, str]]]:
    headers = st.fixed_dictionaries(
        {},
        optional={
            "Content-Type": st.sampled_from(
                ["application/json", "application/x-www-form-urlencoded", "text/plain", "multipart/form-data"]
            ),
            "X-Slack-Request-Timestamp": st.one_of(
                st.just(str(int(time.time()))),
                st.sampled_from(["", "abc", "1e9", "-1", "99999999999999999999"]),
            ),
            "X-Slack-Signature": st.one_of(
                st.just("v0=" + "0" * 64), st.text(max_size=70).filter(str.isprintable)
            ),
        },
    )
    bodies = st.one_of(
        st.binary(max_size=512),
        _json().map(lambda j: json.dumps(j).encode()),
        _json().map(lambda j: b"payload=" + json.dumps(j).encode()),
        st.integers(min_value=1, max_value=5000).map(lambda n: b"[" * n + b"]" * n),
    )
    return st.tuples(bodies, headers)


async def test_no_hostile_input_stops_or_corrupts_the_bot(harness: Harness) -> None:
    p = harness.prefix
    r = harness.redis
    # Keys of other types the hostile reply_to values name; none may change.
    await r.hset(f"{p}:reply:hash", "k", "v")
    await r.zadd(f"{p}:reply:zset", {"m": 1})
    await r.set(f"{p}-app:string", "s")
    await r.sadd(f"{p}-app:set", "m")
    foreign = {
        f"{p}:reply:hash": "hash",
        f"{p}:reply:zset": "zset",
        f"{p}-app:string": "string",
        f"{p}-app:set": "set",
    }
    # A pending ask that the hostile entries target by id ("victim", "p1", ...).
    victim = harness.envelope(DEPLOY, ask_id="victim")
    await harness.send(victim)
    await harness.posted()

    entries = _draw(_entry(p), ENTRIES)
    bodies = _draw(_body(), BODIES)
    assert len(entries) == ENTRIES and len(bodies) == BODIES
    for fields in entries:
        await r.xadd(f"{p}:asks", fields)  # type: ignore[arg-type]
    port = harness.replicas[0].port
    async with aiohttp.ClientSession() as session:
        for body, headers in bodies:
            async with session.post(
                f"http://127.0.0.1:{port}/slack/events", data=io.BytesIO(body), headers=headers
            ) as response:
                assert response.status in (400, 401, 413), (response.status, body[:80], headers)

    async def drained() -> bool:
        pending = await r.xpending(f"{p}:asks", "bots")
        return int(pending["pending"]) == 0 and await r.xlen(f"{p}:asks") == 0

    deadline = time.monotonic() + 40
    while True:
        if await drained():
            break
        assert time.monotonic() < deadline, "the bot did not handle every hostile entry"
        await asyncio.sleep(0.1)

    # Still works: a normal ask is posted and answered.
    env = harness.envelope(DEPLOY, ask_id="after-the-storm")
    await harness.send(env)

    def posted() -> Any:
        found = [m for m in harness.fake.messages("C0DEPLOY") if "after-the-storm" in json.dumps(m.blocks)]
        return found or None

    [message] = await harness.fake.wait_for(posted, timeout=15, what="the normal ask")
    await harness.fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
    assert (await harness.result(env["reply_to"], timeout=15))["outcome"] == "answered"

    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/healthz") as response,
    ):
        assert response.status == 200, await response.text()
    for key, kind in foreign.items():
        assert (await r.type(key)).decode() == kind and await r.pttl(key) == -1, key
    assert await r.hgetall(f"{p}:reply:hash") == {b"k": b"v"}
    assert (await r.type(f"{p}:asks")).decode() == "stream" and await r.pttl(f"{p}:asks") == -1
    # An empty zset is no key at all: P:due is gone when no timer is left, never another type.
    assert (await r.type(f"{p}:due")).decode() in ("zset", "none") and await r.pttl(f"{p}:due") in (-1, -2)
    assert (await r.type(f"{p}:dead")).decode() == "stream"
    # Nothing was lost silently: every hostile entry was acked after its result or dead-lettered.
    assert await r.xlen(f"{p}:dead") > 0
    # The harness fixture ends the test: the invariant check is clean, no crash in the log.
