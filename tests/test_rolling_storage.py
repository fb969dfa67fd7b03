"""Rolling update across the compact storage format: records written by the version before it (a
fixture of raw hashes captured from its code at 29b8775) are read, answered and finalized by this one,
and what this one writes is read by the same readers the version before uses."""

from __future__ import annotations

import json
import time
from pathlib import Path

from redis.asyncio import Redis

from bot.model import AskRecord, PostedMessage
from bot.storage.check import check_prefix
from bot.storage.records import compact_record, messages_json
from bot.storage.store import Lease, Resolution, Store
from contract import normalize_ask_request
from contract.envelopes import Route

FIXTURE = Path(__file__).parent / "rolling" / "posted_ask_29b8775.json"


def _prefix(rec: AskRecord) -> str:
    body = {
        "v": 1,
        "ask_id": rec.ask_id,
        "format": "pi-question",
        "outcome": "answered",
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


def _new_record(ask_id: str, reply_to: str, *, deadline_ms: int | None = None) -> AskRecord:
    """An ask as this version's intake records it."""
    return AskRecord(
        ask_id=ask_id,
        tag=reply_to,
        reply_to=reply_to,
        request=normalize_ask_request({"id": "deploy", "question": "Deploy?", "options": ["Yes", "No"]}),
        route=Route(channel="C0DEPLOY"),
        route_text="#C0DEPLOY",
        created_ms=int(time.time() * 1000),
        deadline_ms=deadline_ms,
    )


async def _write_old(redis: Redis, store: Store, reply_to: str) -> AskRecord:
    """The fixture's posted ask, under this test's keys, as the version before left it."""
    old = json.loads(FIXTURE.read_text())
    fields = {k: v.replace(old["reply_to"], reply_to) for k, v in old["hash"].items()}
    k = store.ask_keys(reply_to, old["ask_id"])
    await redis.hset(k.ask, mapping=fields)  # type: ignore[misc]
    await redis.pexpire(k.ask, 600_000)
    await redis.rpush(k.audit, *old["audit"])  # type: ignore[misc]
    await redis.pexpire(k.audit, 600_000)
    await redis.set(store.keys.index(old["ask_id"]), reply_to, px=600_000)
    await redis.sadd(store.keys.channel("C0DEPLOY"), f"{old['ask_id']} {reply_to}")  # type: ignore[misc]
    await redis.pexpire(store.keys.channel("C0DEPLOY"), 600_000)
    await store.schedule(old["ask_id"], reply_to, int(fields["deadline_ms"]))
    return AskRecord.model_validate(json.loads(fields["rec"]))


async def test_an_ask_the_version_before_posted_is_answered_and_finalized_by_this_one(
    redis: Redis, prefix: str, reply_to: str
) -> None:
    store = Store(redis, prefix, retention_ms=60_000)
    rec = await _write_old(redis, store, reply_to)
    loaded = await store.load(rec.tag, rec.ask_id)
    assert loaded is not None and loaded.state == "posted" and loaded.record == rec
    assert loaded.messages == [PostedMessage(channel="C0DEPLOY", ts="1700000000.000100")]
    # A retried record of the same message (written now without a null permalink) is still one message.
    assert await store.posted(rec.tag, rec.ask_id, loaded.messages, actor="new", stray=True) == "ok"
    verdict = await store.resolve(Resolution(rec, "answered", _prefix(rec), "U1", "answered", "via button"))
    assert verdict.verdict == "won" and len(verdict.messages) == 1
    assert verdict.channels == {"C0DEPLOY"}
    await store.finalize(rec.tag, rec.ask_id, 1, channels=verdict.channels)
    assert [json.loads(r)["ask_id"] for r in await redis.lrange(reply_to, 0, -1)] == [rec.ask_id]  # type: ignore[misc]
    ended = await store.load(rec.tag, rec.ask_id)
    assert ended is not None and ended.state == "ended" and ended.finalized
    audit = await store.read_audit(rec.tag, rec.ask_id)
    assert [a.event for a in audit] == ["accepted", "posted", "posted", "answered"]
    assert audit[0].detail is None and audit[0].lease == "old-replica#1" and audit[-1].by == "U1"
    assert not await redis.exists(store.keys.channel("C0DEPLOY"))  # it left its channel
    assert await check_prefix(redis, prefix) == []  # timer gone, index and keys expiring


async def test_what_this_version_writes_reads_back_as_the_version_before_reads_it(
    redis: Redis, prefix: str, reply_to: str
) -> None:
    # The version before reads `rec` with AskRecord.model_validate(json.loads(...)) and `msgs` with
    # PostedMessage.model_validate, the same models as this one: fields left out at their defaults
    # come back as the full record. Its scripts read rec.reply_to (cancel.lua) and m.channel, m.ts
    # (posted.lua, withdraw), and every audit entry's at and event (read_audit).
    store = Store(redis, prefix, retention_ms=60_000)
    rec = _new_record("ask-new-1", reply_to, deadline_ms=int(time.time() * 1000) + 600_000)
    stored = compact_record(rec)
    assert AskRecord.model_validate(json.loads(stored)) == rec
    assert json.loads(stored)["reply_to"] == reply_to
    assert len(stored) < len(json.dumps(rec.model_dump(mode="python"))) / 2
    message = PostedMessage(channel="C0DEPLOY", ts="1.2")
    assert [PostedMessage.model_validate(m) for m in json.loads(messages_json([message]))] == [message]
    verdict = await store.accept(
        rec, consumer="new", lease_ms=60_000, pending_ttl_ms=600_000, entry_id="1-0", schedule_at_ms=None
    )
    assert verdict.verdict == "post"
    k = store.ask_keys(rec.tag, rec.ask_id)
    assert AskRecord.model_validate(json.loads(await redis.hget(k.ask, "rec"))) == rec  # type: ignore[misc]
    lease = Lease("new", verdict.token, float("inf"))
    assert await store.posted(rec.tag, rec.ask_id, [message], actor="new", lease=lease) == "ok"
    raw = json.loads(await redis.hget(k.ask, "msgs"))  # type: ignore[misc]
    assert [(m["channel"], m["ts"]) for m in raw] == [("C0DEPLOY", "1.2")]
    # The version before reads its trail from the audit list, which this one no longer writes for a
    # live ask (the log field is new): an old replica's `status` shows only the list's entries
    # during a rolling update, and this version reads both (test_store_commands).
    log = (await redis.hget(k.ask, "log")).split(b"\n")  # type: ignore[misc]
    for entry in log:
        data = json.loads(entry)
        assert isinstance(data["at"], int) and data["event"] in ("accepted", "posted")
    assert len(log) == 2 and not await redis.exists(k.audit)


async def test_a_pending_ask_keeps_only_the_fields_something_reads_and_both_versions_read_them(
    redis: Redis, prefix: str, reply_to: str
) -> None:
    # Issue 22: no `created_ms` in the hash (it is in `rec`) and no `finalized` before the end (both
    # versions read a missing one as not finalized); an audit entry made under the replica's own
    # lease does not repeat the replica, which the lease names; an ask with no escalation steps and no
    # reminders has no `step` nor `reminders` counter (both versions read a missing one as 0, and
    # compare them only for an ask that has such steps).
    store = Store(redis, prefix, retention_ms=60_000)
    rec = _new_record("ask-new-2", reply_to)
    verdict = await store.accept(
        rec, consumer="new-1", lease_ms=60_000, pending_ttl_ms=600_000, entry_id="1-0", schedule_at_ms=None
    )
    lease = Lease("new-1", verdict.token, float("inf"))
    message = PostedMessage(channel="C0DEPLOY", ts="1.2")
    assert await store.posted(rec.tag, rec.ask_id, [message], actor="new-1", lease=lease) == "ok"
    k = store.ask_keys(rec.tag, rec.ask_id)
    fields = {f.decode() for f in await redis.hkeys(k.ask)}  # type: ignore[misc]
    assert fields == {"rec", "state", "deadline_ms", "owner", "lease_until", "tries", "msgs", "entry", "log"}
    loaded = await store.load(rec.tag, rec.ask_id)
    assert loaded is not None and loaded.record == rec and not loaded.finalized
    raw = [json.loads(e) for e in (await redis.hget(k.ask, "log")).split(b"\n")]  # type: ignore[misc]
    assert [(e["event"], e["by"], e["lease"], "replica" in e) for e in raw] == [
        ("accepted", "new-1", "new-1#1", False),
        ("posted", "new-1", "new-1#1", False),
    ]
    audit = await store.read_audit(rec.tag, rec.ask_id)
    assert [(a.replica, a.lease) for a in audit] == [("new-1", "new-1#1")] * 2
    # An ending on another replica's behalf keeps its replica: the person is `by`, nobody's lease.
    won = await store.resolve(Resolution(rec, "answered", _prefix(rec), "U1", "answered", replica="new-2"))
    assert won.verdict == "won"
    [*_, last] = await store.read_audit(rec.tag, rec.ask_id)
    assert (last.by, last.replica, last.lease) == ("U1", "new-2", None)
    ended = await store.load(rec.tag, rec.ask_id)
    assert ended is not None and ended.state == "ended" and not ended.finalized
    await store.finalize(rec.tag, rec.ask_id, 1, channels=won.channels)
    done = await store.load(rec.tag, rec.ask_id)
    assert done is not None and done.finalized
