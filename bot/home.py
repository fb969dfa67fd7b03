"""Pure: who an ask's Home row is for (docs/home.md), and the rows the Home tab is drawn from.

Two questions, asked at two times. When an ask starts, :func:`named_on` lists everyone it could
ever be waiting for (the DM's person, responders, every escalation step's person and mentions, with
user groups expanded): each gets a row in their index. When a tab is drawn, :func:`waits_for` decides
again from the ask's record as it is now (its step, its responders, group membership now): the index
is only a hint, in another Redis slot than the ask, and may be stale. Privacy rests on the second.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from bot.model import AskRecord, PostedMessage
from contract.envelopes import ResultVote

__all__ = [
    "HOME_PAGE_SIZE",
    "RECENT_MAX",
    "AskedRow",
    "HomeData",
    "Named",
    "RecentRow",
    "WaitingRow",
    "asked_of",
    "indexes_anyone",
    "is_user_id",
    "named_on",
    "soonest_first",
    "waits_for",
]

HOME_PAGE_SIZE = 15
"""Asks per page of "Waiting for you" (Slack allows 100 blocks per Home view; a row takes four)."""
RECENT_MAX = 10
"""How many asks "Recently answered by you" keeps."""

Members = Callable[[str], frozenset[str] | None]
"""A user group's members (as the who-may-answer check knows them), None when not known."""


def is_user_id(value: str) -> bool:
    return len(value) > 2 and value[0] in "UW" and value[1:].isalnum() and value.isupper()


def _is_group(value: str) -> bool:
    return len(value) > 2 and value[0] == "S" and value[1:].isalnum() and value.isupper()


@dataclass(frozen=True, slots=True)
class Named:
    """Who an ask names: user ids and e-mail addresses (resolved by the caller) and user groups."""

    users: frozenset[str] = frozenset()
    emails: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()


def _add(value: str | None, users: set[str], emails: set[str], groups: set[str]) -> None:
    if not value:
        return
    if is_user_id(value):
        users.add(value)
    elif _is_group(value):
        groups.add(value)
    elif "@" in value:
        emails.add(value)


def named_on(rec: AskRecord) -> Named:
    """Everyone the ask may ever wait for, whatever step it reaches (the index's superset)."""
    users: set[str] = set()
    emails: set[str] = set()
    groups: set[str] = set()
    if rec.target is not None and rec.target.user:
        _add(rec.target.user, users, emails, groups)
    if rec.route is not None:
        _add(rec.route.user, users, emails, groups)
    if rec.responders is not None:
        users.update(rec.responders.users)
        groups.update(rec.responders.usergroups)
    for step in rec.escalate:
        _add(step.user, users, emails, groups)
        for mention in step.mention:
            _add(mention, users, emails, groups)
    return Named(frozenset(users), frozenset(emails), frozenset(groups))


def indexes_anyone(rec: AskRecord) -> bool:
    """Whether the ask's start puts it in anyone's index (someone named on it, or ``asked_of``): the
    superset ``bot.engine.home.Home.index`` indexes. An ask that does not has no set of indexed
    people to read at its end (resolve.lua skips the read)."""
    named = named_on(rec)
    return bool(named.users or named.emails or named.groups) or asked_of(rec) is not None


def asked_of(rec: AskRecord) -> str | None:
    """The requester whose "Asked for you" holds the ask: only one given as a user id."""
    requester = rec.requester.user if rec.requester is not None else None
    return requester if requester and is_user_id(requester) else None


def _in_any(user: str, groups: Iterable[str], members: Members) -> bool | None:
    unknown = False
    for group in groups:
        got = members(group)
        if got is None:
            unknown = True
        elif user in got:
            return True
    return None if unknown else False


def waits_for(rec: AskRecord, step: int, user: str, members: Members, *, indexed: bool) -> bool:
    """Whether the ask, at escalation ``step``, is waiting for ``user``: they may answer it (section 7)
    and it names them (a DM to them, ``responders``, a step reached that is to them or mentions them).
    An ask without responders posted in a channel waits for nobody in particular.

    ``indexed``: the person's own index holds the ask; for names only Slack can resolve (an e-mail
    route, a group whose members are not known right now) that is taken as the name, never for
    anything the record itself decides. Fails closed otherwise."""
    who = rec.responders
    if who is not None and (who.users or who.usergroups):
        if user in who.users:
            allowed: bool | None = True
        else:
            allowed = _in_any(user, who.usergroups, members)
        if allowed is None:
            return indexed
        if not allowed:
            return False
        return not _excluded(rec, user)
    # No responders: anyone who sees a message may answer, so only a person it was sent to is named.
    names: set[str] = set()
    groups: set[str] = set()
    emails = False
    if rec.route is not None and rec.route.user:
        names.add(rec.route.user)
    if rec.target is not None and rec.target.user:
        names.add(rec.target.user)
    for reached in rec.escalate[: max(step, 0)]:
        for value in [reached.user, *reached.mention]:
            if value and _is_group(value):
                groups.add(value)
            elif value:
                names.add(value)
    emails = any("@" in n for n in names)
    if user in names:
        return not _excluded(rec, user)
    in_group = _in_any(user, groups, members)
    if in_group:
        return not _excluded(rec, user)
    return indexed and (emails or in_group is None) and not _excluded(rec, user)


def _excluded(rec: AskRecord, user: str) -> bool:
    """An approval's requester may not vote: the ask waits for others (it is "Asked for you")."""
    return (
        rec.approval is not None
        and rec.approval.exclude_requester
        and rec.requester is not None
        and rec.requester.user == user
    )


@dataclass(frozen=True, slots=True)
class WaitingRow:
    """One pending ask waiting for the person, as its record is now."""

    record: AskRecord
    step: int
    messages: Sequence[PostedMessage]
    votes: Sequence[ResultVote] | None = None

    def voted(self, user: str) -> int | None:
        """The option this person voted for (approvals), else None."""
        for vote in self.votes or []:
            if vote.user.id == user and vote.selected:
                return vote.selected[0]
        return None


@dataclass(frozen=True, slots=True)
class AskedRow:
    """One pending ask an agent asked for the person (``requester.user``)."""

    record: AskRecord
    step: int
    messages: Sequence[PostedMessage]
    votes: Sequence[ResultVote] | None = None


@dataclass(frozen=True, slots=True)
class RecentRow:
    """One ask the person answered or voted on, and how it ended (None: still pending)."""

    record: AskRecord
    outcome: str | None
    by: str | None
    resolved_ms: int | None
    messages: Sequence[PostedMessage] = ()


@dataclass(frozen=True, slots=True)
class HomeData:
    """Everything one person's tab shows, read and checked by the caller (bot.engine.home)."""

    user: str
    waiting: Sequence[WaitingRow] = ()
    asked: Sequence[AskedRow] = ()
    recent: Sequence[RecentRow] = ()
    notice: str | None = None
    """A private word about the person's last act from the tab (refused, late, ...), shown on top."""
    names: Mapping[str, str] = field(default_factory=dict)
    """Slack user id -> display name, for the people shown by name."""


def soonest_first(rows: Sequence[WaitingRow]) -> list[WaitingRow]:
    """Soonest deadline first; asks without one last, oldest first."""
    return sorted(
        rows,
        key=lambda r: (r.record.deadline_ms is None, r.record.deadline_ms or 0, r.record.created_ms),
    )
