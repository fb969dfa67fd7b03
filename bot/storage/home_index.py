"""The App Home tab's Redis side (docs/home.md): per-person indexes of asks, who opened the tab, and
whose tab is to be published again.

A person's index (``P:home:wait:<user>``, ``P:home:asked:<user>``) is in another slot than the ask
(Redis Cluster), so it cannot change in the ask's own script there (on one server the ending's
``resolve.lua`` and ``finish.lua`` do the bookkeeping and take the rows out, in the ending's own
round trips). The order makes every crash safe:

- on start, the ask's own set of indexed people (``P:{tag}:home:<id>``, the ask's slot) is written
  first, then each person's row: a crash between leaves a person without the row (``slack-ask check``
  adds it), never a row nobody would take out;
- on the end, the rows go when the ended ask's messages are finished (``finalize_many``); a crash
  before that leaves the clean-up timer, whose sweep takes them out. Meanwhile every row is checked
  against the ask's record when a tab is drawn (``bot.engine.home``), and dropped there if it ended.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from bot.home import RECENT_MAX
from bot.storage.base import Step, StoreBase
from bot.storage.keys import due_member, parse_due_member
from bot.storage.records import HomePeople, _s

__all__ = ["HOME_COALESCE_MS", "HOME_OPENED_KEEP_MS", "NO_DEADLINE", "HomeIndex", "HomeRows"]

HOME_OPENED_KEEP_MS = 30 * 86_400_000
"""Someone who has not opened the tab for this long is no longer published to (until they do)."""
NO_DEADLINE = 2**52
"""The index score of an ask without a deadline: after every ask that has one."""

HOME_COALESCE_MS = 1_000
"""A change is published this long after it, so a burst of changes for one person is one publish."""

_WAIT, _ASKED = "w:", "r:"
"""Members of an ask's own set: the people whose "Waiting for you" (w:) or "Asked for you" (r:) has it."""


@dataclass(frozen=True, slots=True)
class HomeRows:
    """What one person's indexes hold: ``(ask_id, tag)`` pairs, and the view last published."""

    waiting: list[tuple[str, str]]
    asked: list[tuple[str, str]]
    recent: list[tuple[str, str]]
    view_hash: str | None
    page: int


class HomeIndex(StoreBase):
    """The Home tab's keys (a part of :class:`bot.storage.store.Store`)."""

    def _person_ttl_ms(self) -> int:
        # A row outlives no ask: every ask's keys expire within twice the retention.
        return self.retention_ms * 2

    async def home_index(
        self, ask_id: str, tag: str, deadline_ms: int | None, *, waiting: Iterable[str], asked: str | None
    ) -> None:
        """Index a starting ask for the people it waits for, and for its requester (idempotent)."""
        people = sorted(set(waiting))
        members = [_WAIT + u for u in people] + ([_ASKED + asked] if asked else [])
        if not members:
            return
        own = self.keys.for_ask(tag, ask_id).home
        ttl = self._person_ttl_ms()
        await self._run(
            [lambda pipe: pipe.sadd(own, *members), lambda pipe: pipe.pexpire(own, ttl)], confirm=False
        )
        member = due_member(ask_id, tag)
        score = deadline_ms or NO_DEADLINE
        steps: list[Step] = []
        keys = [self.keys.home_waiting(u) for u in people] + ([self.keys.home_asked(asked)] if asked else [])
        for key in keys:
            steps.append(lambda pipe, key=key: pipe.zadd(key, {member: score}))  # type: ignore[misc]
            steps.append(lambda pipe, key=key: pipe.pexpire(key, ttl))  # type: ignore[misc]
        await self._run(steps, confirm=False)
        await self.home_touch_users(people + ([asked] if asked else []))

    async def home_people(self, tag: str, ask_id: str) -> HomePeople:
        """Whose "Waiting for you" and whose "Asked for you" hold the ask, from its own set."""
        return (await self._home_people_of([(ask_id, tag)]))[0]

    async def _home_people_of(self, asks: Sequence[tuple[str, str]]) -> list[HomePeople]:
        """``home_people`` of many asks in one round trip."""
        raws = await self._run(self._home_people_steps(asks), confirm=False)
        return self._home_people_parse(raws)

    def _home_people_steps(self, asks: Sequence[tuple[str, str]]) -> list[Step]:
        """The reads of ``_home_people_of``, for a caller to run in a round trip it makes anyway."""
        keys = [self.keys.for_ask(tag, ask_id).home for ask_id, tag in asks]
        return [lambda pipe, key=key: pipe.smembers(key) for key in keys]  # type: ignore[misc]

    @staticmethod
    def _home_people_parse(raws: Sequence[Iterable[object]]) -> list[HomePeople]:
        out: list[HomePeople] = []
        for raw in raws:
            members = sorted(_s(m) for m in raw)
            out.append(
                (
                    [m[len(_WAIT) :] for m in members if m.startswith(_WAIT)],
                    [m[len(_ASKED) :] for m in members if m.startswith(_ASKED)],
                )
            )
        return out

    def _home_leave_steps(self, asks: Sequence[tuple[str, str]], people: Sequence[HomePeople]) -> list[Step]:
        """The writes of ``home_leave`` once its people are known: the rows out, the tabs due."""
        steps: list[Step] = []
        touched: set[str] = set()
        for (ask_id, tag), (waiting, asked) in zip(asks, people, strict=True):
            member = due_member(ask_id, tag)
            keys = [self.keys.home_waiting(u) for u in waiting] + [self.keys.home_asked(u) for u in asked]
            steps.extend(lambda pipe, key=key, m=member: pipe.zrem(key, m) for key in keys)  # type: ignore[misc]
            touched.update(waiting, asked)
        if touched:
            steps.append(self._home_touch_step(sorted(touched)))
        return steps

    async def home_leave(self, asks: Sequence[tuple[str, str]]) -> None:
        """Ended asks leave every index they are in (their own set says whose); those people's tabs
        are published again. The own set stays (to its TTL): a repeat finds nothing left to take out.
        One round trip for asks nobody's tab holds (most: channel asks without responders).
        (``finalize_many`` does the same with what it knows or reads first.)"""
        if not asks:
            return
        steps = self._home_leave_steps(asks, await self._home_people_of(asks))
        if steps:
            await self._run(steps, confirm=False)

    async def home_holds(self, user: str, tag: str, ask_id: str) -> bool:
        """Whether the person's "Waiting for you" index holds the ask."""
        return await self.redis.zscore(self.keys.home_waiting(user), due_member(ask_id, tag)) is not None

    async def home_drop(self, user: str, kind: str, pairs: Sequence[tuple[str, str]]) -> None:
        """Take stale rows out of one person's index (``kind``: ``wait``, ``asked`` or ``recent``)."""
        if not pairs:
            return
        members = [due_member(a, t) for a, t in pairs]
        if kind == "recent":
            key = self.keys.home_recent(user)
            await self._run([lambda pipe, m=m: pipe.lrem(key, 0, m) for m in members], confirm=False)  # type: ignore[misc]
            return
        key = self.keys.home_waiting(user) if kind == "wait" else self.keys.home_asked(user)
        await self.redis.zrem(key, *members)

    async def home_rows(self, user: str) -> HomeRows:
        """One person's indexes and last published view, in one round trip."""
        wait, asked, recent = (
            self.keys.home_waiting(user),
            self.keys.home_asked(user),
            self.keys.home_recent(user),
        )
        view = self.keys.home_view(user)
        replies = await self._run(
            [
                lambda pipe: pipe.zrange(wait, 0, -1),
                lambda pipe: pipe.zrange(asked, 0, -1),
                lambda pipe: pipe.lrange(recent, 0, RECENT_MAX - 1),
                lambda pipe: pipe.hmget(view, ["hash", "page"]),
            ],
            confirm=False,
        )
        view_hash, page = replies[3]
        return HomeRows(
            waiting=[parse_due_member(_s(m)) for m in replies[0]],
            asked=[parse_due_member(_s(m)) for m in replies[1]],
            recent=[parse_due_member(_s(m)) for m in replies[2]],
            view_hash=_s(view_hash) if view_hash else None,
            page=int(_s(page)) if page and _s(page).isdigit() else 0,
        )

    async def home_published(self, user: str, view_hash: str | None, page: int) -> None:
        key = self.keys.home_view(user)
        mapping = {"hash": view_hash or "", "page": str(page)}
        await self._run(
            [
                lambda pipe: pipe.hset(key, mapping=mapping),
                lambda pipe: pipe.pexpire(key, HOME_OPENED_KEEP_MS),
            ],
            confirm=False,
        )

    async def home_changed(self, tag: str, ask_id: str, *, answered_by: str | None = None) -> HomePeople:
        """The ask changed (ended, voted on, a step reached): every tab showing it is to be published
        again; ``answered_by``: the person whose act it was, whose "Recently answered by you" gets it
        first. One round trip when nobody else's tab holds the ask (a channel ask without
        responders), else two. Returns whose indexes hold it (an ending's finalize takes it there)."""
        steps = self._home_people_steps([(ask_id, tag)])
        if answered_by is not None:
            key = self.keys.home_recent(answered_by)
            member = due_member(ask_id, tag)
            steps.append(self._script("home_recent", [key], [member, RECENT_MAX, self._person_ttl_ms()]))
            steps.append(self._home_touch_step([answered_by]))
        replies = await self._run(steps, confirm=False)
        [(waiting, asked)] = self._home_people_parse(replies[:1])
        others = sorted({*waiting, *asked} - {answered_by})
        if others:
            await self.home_touch_users(others)
        return waiting, asked

    def _home_ended_keys(
        self, tag: str, ask_id: str, answered_by: str | None, *, voted: bool, indexed: bool
    ) -> tuple[list[str], list[Any]]:
        """What resolve.lua needs, on one server only (every key on the same node), to do
        ``home_changed`` for the ask it ends in the same atomic step (``home_ended`` in _common.lua):
        the keys after its own, and the arguments after its own. Its reply's last element
        (``_home_ended_parse``) tells whose indexes hold the ask. ``voted``: the ask takes votes, and a
        vote puts it in the voter's recent list before the end; without them only the ending that
        wins puts it in anyone's, once, so it cannot be there already (no ``LREM`` to look).
        ``indexed``: its start may have indexed someone (``bot.home.indexes_anyone``); when not, its
        own set of people does not exist, and is not read."""
        keys = [
            self.keys.for_ask(tag, ask_id).home,
            self.keys.home_opened,
            self.keys.home_dirty,
            *([self.keys.home_recent(answered_by)] if answered_by else []),
        ]
        return keys, [
            answered_by or "",
            RECENT_MAX,
            self._person_ttl_ms(),
            HOME_COALESCE_MS,
            int(voted),
            int(indexed),
        ]

    def _home_ended_parse(self, raw: object) -> HomePeople | None:
        if not isinstance(raw, list):
            return None  # no bookkeeping in the reply
        return self._home_people_parse([raw])[0]

    async def home_touch_asks(self, asks: Sequence[tuple[str, str]]) -> None:
        """Every tab showing one of these asks is to be published again (two round trips for all)."""
        if not asks:
            return
        users = {u for waiting, asked in await self._home_people_of(asks) for u in (*waiting, *asked)}
        await self.home_touch_users(sorted(users))

    def _home_touch_step(self, users: Sequence[str], delay_ms: int = HOME_COALESCE_MS) -> Step:
        keys = [self.keys.home_opened, self.keys.home_dirty]
        return self._script("home_touch", keys, [delay_ms, *users])

    async def home_touch_users(self, users: Sequence[str], *, delay_ms: int = HOME_COALESCE_MS) -> None:
        """These people's tabs are to be published again (only those who opened it: ``home_touch.lua``)."""
        if users:
            await self._run([self._home_touch_step(users, delay_ms)], confirm=False)

    async def home_opened(self, user: str, *, delay_ms: int) -> None:
        keys = [self.keys.home_opened, self.keys.home_dirty]
        await self._run(
            [self._script("home_opened", keys, [user, delay_ms, HOME_OPENED_KEEP_MS])], confirm=False
        )

    async def home_claim(self, limit: int, lease_ms: int) -> list[tuple[str, str]]:
        """Up to ``limit`` people whose publish is due, claimed for ``lease_ms``: ``(user, claim)``."""
        [raw] = await self._run(
            [self._script("home_claim", [self.keys.home_dirty], [limit, lease_ms])], confirm=False
        )
        flat = [_s(x) for x in raw]
        return list(zip(flat[::2], flat[1::2], strict=True))

    async def home_done(self, user: str, claim: str) -> None:
        await self._run([self._script("home_done", [self.keys.home_dirty], [user, claim])], confirm=False)
