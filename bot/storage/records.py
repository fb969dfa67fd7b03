"""The store's records: what it reads from Redis and hands back, typed (entries, verdicts, loaded asks,
statuses), and the conversions at that edge."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel

from bot.errors import StoreError
from bot.model import AskRecord, AskState, PostedMessage
from bot.results import StoredResult, parse_result
from contract.envelopes import ResultEnvelope, ResultResponder, ResultVote

__all__ = [
    "AcceptVerdict",
    "AskStatus",
    "AuditEntry",
    "Entry",
    "Lease",
    "LoadedAsk",
    "Resolution",
    "ResolveVerdict",
    "Vote",
    "VoteVerdict",
    "compact_record",
    "iso_ms",
    "messages_json",
    "tracked_channels",
]


def iso_ms(ms: int) -> str:
    """RFC 3339 UTC with milliseconds, the same form the Lua scripts write."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _votes(stored: str | None) -> list[ResultVote]:
    """The hash's ``votes`` field (see vote.lua) as the result shows it."""
    return [
        ResultVote(
            user=ResultResponder.model_validate_json(v["user"]), selected=[int(v["s"])], at=str(v["at"])
        )
        for v in (json.loads(stored) if stored else [])
    ]


def _withdrawn(raw: Any) -> frozenset[tuple[str, str]]:
    """The ask hash's ``withdrawn`` field (``"<channel> <ts>"`` each, see withdraw.lua) as pairs."""
    ids = json.loads(_s(raw)) if raw else []
    return frozenset((channel, ts) for channel, _, ts in (str(i).partition(" ") for i in ids))


def tracked_channels(msgs: Any, withdrawn: Any) -> set[str]:
    """The channels an ask was tracked in, from its hash's ``msgs`` and ``withdrawn`` fields (raw)."""
    channels = {str(m.get("channel")) for m in json.loads(_s(msgs) if msgs else "[]") or []}
    return channels | {channel for channel, _ in _withdrawn(withdrawn)}


def compact_record(record: AskRecord) -> str:
    """The record as the ask hash's ``rec`` field: fields at their defaults left out (the model fills
    them in again on load, this version or the one before), so each ask stores only what it sets.
    ensure_ascii: a text cut at 4000 UTF-16 units may end in half a surrogate pair."""
    return json.dumps(
        record.model_dump(mode="python", exclude_defaults=True), ensure_ascii=True, separators=(",", ":")
    )


def messages_json(messages: Sequence[PostedMessage]) -> str:
    """Messages for the scripts (stored as given in ``msgs``): a permalink only when known."""
    return json.dumps([m.model_dump(exclude_none=True) for m in messages], separators=(",", ":"))


def _stored_result(key: str, text: str | None, reason: str | None = None) -> StoredResult | None:
    if not text:
        return None
    try:
        result = parse_result(text)
    except ValueError as exc:  # json's and pydantic's errors both are
        raise StoreError(f"ask record {key} holds a result that cannot be read: {exc}") from None
    return replace(result, reason=reason) if reason else result


@dataclass(frozen=True, slots=True)
class Entry:
    """One intake stream entry."""

    id: str
    fields: dict[str, str]
    deliveries: int = 1
    problem: str | None = None
    """Why the entry cannot be read at all (a field name or value that is not UTF-8); such fields are
    kept with their bytes escaped, so the dead letter still shows them."""

    @property
    def created_ms(self) -> int:
        return int(self.id.split("-", 1)[0])


def _entry(entry_id: Any, raw: dict[Any, Any], deliveries: int = 1) -> Entry:
    # A stream entry is agent input: one undecodable byte must become a dead letter, not an
    # exception that ends the loop reading the stream (protocol section 1).
    fields: dict[str, str] = {}
    problem: str | None = None
    for key, value in raw.items():
        name, bad_name = _decode(key)
        text, bad_value = _decode(value)
        if bad_name and problem is None:
            problem = f"a field name ({name[:40]!r}) is not UTF-8"
        elif bad_value and problem is None:
            problem = f"the {name[:40]!r} field is not UTF-8"
        fields[name] = text
    return Entry(_s(entry_id), fields, deliveries, problem)


def _decode(value: Any) -> tuple[str, bool]:
    if not isinstance(value, bytes):
        return str(value), False
    try:
        return value.decode(), False
    except UnicodeDecodeError:
        return value.decode("utf-8", "backslashreplace"), True


@dataclass(frozen=True, slots=True)
class Lease:
    """An intake lease as ``accept.lua`` granted it: every change made under it carries ``owner`` and
    ``token`` (fencing: the script refuses it once the lease is no longer the current one)."""

    owner: str
    token: str
    until: float
    """``time.monotonic()`` by which the lease has surely run out in Redis too (measured from when the
    grant came back, so never before Redis's own end of it): no Redis call made under it outlives it."""

    def __str__(self) -> str:
        return f"{self.owner}#{self.token}"


@dataclass(frozen=True, slots=True)
class AcceptVerdict:
    verdict: Literal["post", "busy", "posted", "ended", "cancel", "expired", "refused"]
    detail: str = ""
    entry: str = ""
    """For ``ended``: the stream entry that first carried the ask (a different one means a re-send)."""
    token: str = ""
    """For ``post``, ``cancel``, ``expired``: the lease's fencing token (see :class:`Lease`)."""


HomePeople = tuple[list[str], list[str]]
"""Whose "Waiting for you" and whose "Asked for you" hold an ask (its own set, ``P:{tag}:home:<id>``)."""


@dataclass(frozen=True, slots=True)
class ResolveVerdict:
    verdict: Literal["won", "ended", "late", "missing", "moved", "stale", "expired"]
    result: StoredResult | None = None
    messages: list[PostedMessage] = field(default_factory=list)
    detail: str = ""
    undelivered: str = ""
    """For ``won``: why the result was not pushed ('' when it was): reply_to is a key of another type."""
    channels: frozenset[str] | None = None
    """For ``won``: the channels the ask was tracked in (its messages' and withdrawn copies'), read by
    the ending script, so finalizing it need not read them again."""
    withdrawn: frozenset[tuple[str, str]] = frozenset()
    """For ``won``: ``(channel, ts)`` of the copies the bot withdrew (deleted again as it finishes)."""
    people: HomePeople | None = None
    """For ``won`` on one server: whose Home indexes hold the ask (waiting, asked), read in the ending's
    round trip, whose tabs were marked to publish there too (``home_ended.lua``); None when the engine
    is to do that after (``Endings.home_after``)."""


@dataclass(frozen=True, slots=True)
class Vote:
    """One click on an approval ask (protocol section 13), ready for the vote script."""

    record: AskRecord
    voter: ResultResponder
    """The voter as the result shows them."""
    option: int
    result_prefix: str
    """The result should this vote decide (the usual single-question result for ``option``)."""
    not_after_ms: int = 0
    """Refused (``expired``) when it reaches Redis after this Redis time (0: never; ``bot.engine.acts``)."""
    replica: str = ""
    """The replica counting the vote: the audit names it."""


@dataclass(frozen=True, slots=True)
class VoteVerdict:
    """``won``: this vote decided (``result``, ``messages`` as for resolve); ``counted``: recorded,
    undecided; ``same``: a repeat of the voter's current vote, nothing changed; ``ended``, ``late``,
    ``missing``, ``expired`` (it reached Redis after ``Vote.not_after_ms``): refused, nothing changed.
    ``votes`` is the result-form list after the vote."""

    verdict: Literal["won", "counted", "same", "ended", "late", "missing", "expired"]
    votes: list[ResultVote] = field(default_factory=list)
    result: StoredResult | None = None
    messages: list[PostedMessage] = field(default_factory=list)
    detail: str = ""
    channels: frozenset[str] | None = None
    """For ``won``: as ``ResolveVerdict.channels``."""
    withdrawn: frozenset[tuple[str, str]] = frozenset()
    """For ``won``: as ``ResolveVerdict.withdrawn``."""


@dataclass(frozen=True, slots=True)
class LoadedAsk:
    record: AskRecord
    state: AskState
    messages: list[PostedMessage]
    step: int
    reminders: int
    outcome: str | None
    result: StoredResult | None
    by: str | None
    resolved_ms: int | None
    finalized: bool
    votes: list[ResultVote] | None = None
    """Approval asks: the votes so far, as the result will show them (None without approval)."""
    withdrawn: frozenset[tuple[str, str]] = frozenset()
    """``(channel, ts)`` of the copies the bot withdrew (``Store.withdraw``): never among ``messages``."""


@dataclass(frozen=True, slots=True)
class Resolution:
    """One ending for ``resolve_many``."""

    record: AskRecord
    outcome: str
    result_prefix: str
    actor: str | None
    event: str
    detail: str = ""
    refuse_late: bool = False
    """An answer: refused (``late``) when it reaches Redis after the deadline."""
    release_lease: bool = False
    """Intake ends the ask without posting it (refused, unavailable, parked): no delivery is in flight,
    so its clean-up need not wait for the intake lease (``finalize.lua``)."""
    reason: str = ""
    """A cancel's reason: kept in the record beside the result (``StoredResult.reason``), so every
    later redraw of the ended messages shows it, also of a message that lands after the end."""
    replica: str = ""
    """The replica (consumer name) making this ending: the audit names it."""
    lease: Lease | None = None
    """The intake lease this ending is made under (fenced: ``stale`` once it is not current)."""
    not_after_ms: int = 0
    """A person's act: refused (``expired``) when it reaches Redis after this Redis time (0: never)."""


class AuditEntry(BaseModel):
    at: str
    event: str
    by: str | None
    detail: str | None
    replica: str | None = None
    """The replica that made the change (absent in entries written before fencing)."""
    lease: str | None = None
    """The intake lease it was made under, ``owner#token`` (absent when the work was not leased)."""


class AskStatus(BaseModel):
    """What ``slack-ask status`` and ``list`` print (protocol section 12)."""

    ask_id: str
    state: AskState
    outcome: str | None
    created_at: str
    deadline: str | None
    route: str
    step: int = 0
    audit: list[AuditEntry] | None = None
    result: ResultEnvelope | None = None
