"""Reads of ask records, with no state change: one ask (by its keys, or its id alone through the id
index), many at once, with the Redis time of the read (``look``), and the operators' views of
them (status, audit trail, the pending asks)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from bot.errors import StoreError
from bot.model import AskRecord, PostedMessage
from bot.storage.base import StoreBase, time_ms
from bot.storage.keys import AskKeys, glob_escape
from bot.storage.records import (
    AskStatus,
    AuditEntry,
    LoadedAsk,
    _s,
    _stored_result,
    _votes,
    _withdrawn,
    iso_ms,
)

__all__ = ["AskReads"]


class AskReads(StoreBase):
    """Loading ask records and the operators' reads of them."""

    def ask_keys(self, tag: str, ask_id: str) -> AskKeys:
        return self.keys.for_ask(tag, ask_id)

    async def lookup_tag(self, ask_id: str) -> str | None:
        value = await self.redis.get(self.keys.index(ask_id))
        return _s(value) if value is not None else None

    async def find(self, ask_id: str) -> LoadedAsk | None:
        """An ask from its id alone (operators, cancels): through the id index, then its record."""
        tag = await self.lookup_tag(ask_id)
        return await self.load(tag, ask_id) if tag is not None else None

    async def load(self, tag: str, ask_id: str) -> LoadedAsk | None:
        k = self.ask_keys(tag, ask_id)
        return self._loaded(k.ask, await self.redis.hgetall(k.ask))

    async def look(self, tag: str, ask_id: str, *, confirm: bool = False) -> tuple[LoadedAsk | None, int]:
        """``load``, with the Redis time it was read at (never later than the read).
        That time anchors a person's act (``bot.engine.acts``). ``confirm``: what it shows is held by
        ``min_replicas`` replicas (else ``NotReplicatedError``), an act's own unconfirmed write too."""
        k = self.ask_keys(tag, ask_id)
        confirmed = confirm and self.min_replicas > 0
        if not confirmed and not self._cluster:
            # One server: TIME then HGETALL in one pipeline, two commands instead of a script's
            # three (issue 22). Not atomic, but in that order the time is never later than the read,
            # which is all an act's anchor needs (a look after a time sees every write before it).
            now, raw = await self._run(
                [lambda pipe: pipe.time(), lambda pipe: pipe.hgetall(k.ask)],
                confirm=False,
            )
            return self._loaded(k.ask, raw), time_ms(now)
        script = self._script("look", [k.ask], ["1" if confirmed else "0"])
        [reply] = await self._run([script], confirm=confirmed)
        flat = list(reply[1])
        return self._loaded(k.ask, dict(zip(flat[::2], flat[1::2], strict=True))), int(reply[0])

    async def load_many(self, asks: Sequence[tuple[str, str]]) -> list[LoadedAsk | None]:
        """``load`` for many ``(ask_id, tag)`` pairs in one round trip."""
        keys = [self.ask_keys(tag, ask_id).ask for ask_id, tag in asks]
        replies = await self._run(
            [lambda pipe, key=key: pipe.hgetall(key) for key in keys],  # type: ignore[misc]
            confirm=False,
        )
        return [self._loaded(key, raw) for key, raw in zip(keys, replies, strict=True)]

    @staticmethod
    def _loaded(key: str, raw: Any) -> LoadedAsk | None:
        if not raw:
            return None
        h = {_s(a): _s(b) for a, b in raw.items()}
        if "rec" not in h:
            raise StoreError(f"ask record {key} has no 'rec' field; was it written by something else?")
        # json.loads, not model_validate_json: a text cut at 4000 UTF-16 units may end in half a
        # surrogate pair (as upstream keeps it), which only the stdlib parser accepts.
        record = AskRecord.model_validate(json.loads(h["rec"]))
        return LoadedAsk(
            record=record,
            state=h.get("state", "accepted"),  # type: ignore[arg-type]
            messages=[PostedMessage.model_validate(m) for m in json.loads(h.get("msgs") or "[]") or []],
            step=int(h.get("step") or 0),
            reminders=int(h.get("reminders") or 0),
            outcome=h.get("outcome") or None,
            result=_stored_result(key, h.get("result"), h.get("reason")),
            by=h.get("by") or None,
            resolved_ms=int(h["resolved_ms"]) if h.get("resolved_ms") else None,
            finalized=h.get("finalized") == "1",
            votes=_votes(h.get("votes")) if record.approval is not None else None,
            withdrawn=_withdrawn(h.get("withdrawn")),
        )

    async def read_audit(self, tag: str, ask_id: str) -> list[AuditEntry]:
        """The ask's audit trail, oldest first: its hash's ``log`` merged by time with its audit list
        (where the version before wrote, and where an entry for an ask already gone goes)."""
        k = self.ask_keys(tag, ask_id)
        listed, log = await self._run(
            [lambda pipe: pipe.lrange(k.audit, 0, -1), lambda pipe: pipe.hget(k.ask, "log")],
            confirm=False,
        )
        lines = [*listed, *(_s(log).split("\n") if log else [])]
        # sorted() is stable: at the same millisecond the list's entries (the older version's) first.
        return sorted((_audit_entry(json.loads(line)) for line in lines), key=lambda e: e.at)

    def _status(self, loaded: LoadedAsk, *, audit: list[AuditEntry] | None, full: bool) -> AskStatus:
        rec = loaded.record
        return AskStatus(
            ask_id=rec.ask_id,
            state=loaded.state,
            outcome=loaded.outcome,
            created_at=iso_ms(rec.created_ms),
            deadline=iso_ms(rec.deadline_ms) if rec.deadline_ms else None,
            route=rec.route_text,
            step=loaded.step,
            audit=audit if full else None,
            result=loaded.result.envelope if full and loaded.result is not None else None,
        )

    async def get_status(self, ask_id: str) -> AskStatus | None:
        """The state, audit trail and stored result of one ask (None when unknown or expired)."""
        loaded = await self.find(ask_id)
        if loaded is None:
            return None
        return self._status(loaded, audit=await self.read_audit(loaded.record.tag, ask_id), full=True)

    async def list_pending(self, limit: int = 1000) -> list[AskStatus]:
        """Pending asks, oldest first, found through the id index (bounded by ``limit``)."""
        out: list[AskStatus] = []
        head = self.keys.index("")
        async for key in self.redis.scan_iter(match=f"{glob_escape(head)}*", count=500):
            ask_id = _s(key)[len(head) :]  # an ask_id may itself contain ":id:"
            tag = await self.lookup_tag(ask_id)
            if tag is None:
                continue
            loaded = await self.load(tag, ask_id)
            if loaded is not None and loaded.state != "ended":
                out.append(self._status(loaded, audit=None, full=False))
            if len(out) >= limit:
                break
        out.sort(key=lambda s: s.created_at)
        return out


def _audit_entry(data: dict[str, Any]) -> AuditEntry:
    lease = str(data.get("lease") or "") or None
    # An entry made under the replica's own lease leaves the replica out (_common.lua's
    # audit_entry): the lease, '<replica>#<token>', names it.
    replica = str(data.get("replica") or "") or (lease.rpartition("#")[0] if lease else "") or None
    return AuditEntry(
        at=iso_ms(int(data["at"])),
        event=str(data["event"]),
        by=str(data.get("by") or "") or None,
        detail=str(data.get("detail") or "") or None,
        replica=replica,
        lease=lease,
    )
