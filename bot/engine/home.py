"""The App Home tab (docs/home.md): who an ask is indexed for, each person's tab drawn from the ask
records as they are now, and ``views.publish``.

The indexes (bot/storage/home_index.py) are hints in another slot than the asks: every row is read
back against its ask's record when a tab is drawn; a row whose ask ended or is gone is dropped there
and taken out of the index (the repair a crash between an ask's end and its index update needs).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Sequence
from typing import Any, TypeVar

from bot.engine.acts import UNAVAILABLE
from bot.engine.room import Room, Shared
from bot.errors import SlackError, SlackPermanentError, failure
from bot.home import AskedRow, HomeData, RecentRow, WaitingRow, asked_of, named_on, waits_for
from bot.model import AskRecord
from bot.render.home import HomeMeta, render_home
from bot.slack.interactions import BlockAction
from bot.slack.pacing import Priority
from bot.storage.home_index import HomeRows
from bot.storage.store import LoadedAsk

__all__ = ["OPEN_DEBOUNCE_MS", "QUIET_BUDGET_S", "Home", "quietly"]

log = logging.getLogger(__name__)

OPEN_DEBOUNCE_MS = 300
"""``app_home_opened`` is published this long after: a person flicking between tabs is one publish."""
_LOOKUP_BUDGET_S = 1.0
"""What indexing a starting ask may spend asking Slack for a group's members or an e-mail's user."""
_CONFLICTS = 3
"""``hash_conflict`` answers taken (each: read again, draw again) before publishing without a hash."""
NOTICE_FOR_S = 120.0


_T = TypeVar("_T")

QUIET_BUDGET_S = 2.0
"""What Home bookkeeping may add to what it rides on (an ending, a vote) when Redis does not answer."""


async def quietly(work: Awaitable[_T], what: str) -> _T | None:
    """Home bookkeeping never fails what it rides on (an answer, a post) nor holds it for long: one
    log line instead, and None; the tab is drawn from the records and ``slack-ask check`` repairs an
    index. Otherwise what ``work`` returned."""
    try:
        async with asyncio.timeout(QUIET_BUDGET_S):
            return await work
    except (*UNAVAILABLE, SlackError) as exc:
        log.warning("home tab: %s failed: %s", what, failure(exc))
        return None


class Home(Room):
    def __init__(self, shared: Shared) -> None:
        super().__init__(shared)
        self._notices: dict[str, tuple[float, str]] = {}

    # -- indexing ----------------------------------------------------------------------------

    async def index(self, rec: AskRecord) -> None:
        """Index a starting ask for everyone it may wait for, and its requester (before its accept)."""
        named = named_on(rec)
        people = set(named.users)
        deadline = time.monotonic() + _LOOKUP_BUDGET_S
        for group in sorted(named.groups):
            try:
                budget = max(deadline - time.monotonic(), 0.05)
                people |= await self.slack.usergroup_members(group, budget_s=budget)
            except SlackError as exc:
                log.warning(
                    "home tab: members of %s unknown (%s): not indexed for %s", group, exc, rec.ask_id
                )
        for email in sorted(named.emails):
            try:
                people.add(await self.slack.resolve_user(email, deadline=time.monotonic() + _LOOKUP_BUDGET_S))
            except SlackError as exc:
                log.info("home tab: %s not resolved (%s): not indexed for %s", email, exc, rec.ask_id)
        await self.store.home_index(
            rec.ask_id, rec.tag, rec.deadline_ms, waiting=sorted(people), asked=asked_of(rec)
        )

    # -- what a tab shows --------------------------------------------------------------------

    async def _members(self, groups: set[str]) -> dict[str, frozenset[str] | None]:
        out: dict[str, frozenset[str] | None] = {}
        for group in sorted(groups):
            try:
                out[group] = await self.slack.usergroup_members(group)
            except SlackError as exc:
                log.info("home tab: members of %s unknown right now: %s", group, exc)
                out[group] = None
        return out

    async def data(self, user: str, rows: HomeRows) -> tuple[HomeData, dict[str, str]]:
        """The person's rows checked against the ask records as they are now (stale ones dropped and
        taken out of the index), and the permalinks of the asks' messages."""
        pairs = [*rows.waiting, *rows.asked, *rows.recent]
        loaded = await self.store.load_many(pairs) if pairs else []
        found = dict(zip(pairs, loaded, strict=True))
        groups: set[str] = set()
        for item in found.values():
            if item is not None:
                named = named_on(item.record)
                groups |= set(named.groups)
        members = await self._members(groups)
        waiting: list[WaitingRow] = []
        asked: list[AskedRow] = []
        recent: list[RecentRow] = []
        stale: dict[str, list[tuple[str, str]]] = {"wait": [], "asked": [], "recent": []}
        for pair in rows.waiting:
            ask = found.get(pair)
            if ask is None or ask.state == "ended":
                stale["wait"].append(pair)
            elif waits_for(ask.record, ask.step, user, members.get, indexed=True):
                waiting.append(WaitingRow(ask.record, ask.step, ask.messages, ask.votes))
        for pair in rows.asked:
            ask = found.get(pair)
            if ask is None or ask.state == "ended":
                stale["asked"].append(pair)
            elif asked_of(ask.record) == user:
                asked.append(AskedRow(ask.record, ask.step, ask.messages, ask.votes))
        for pair in rows.recent:
            ask = found.get(pair)
            if ask is None:
                stale["recent"].append(pair)
            else:
                recent.append(RecentRow(ask.record, ask.outcome, ask.by, ask.resolved_ms, ask.messages))
        for kind, gone in stale.items():
            if gone:
                log.info("home tab of %s: %d stale %s row(s) dropped", user, len(gone), kind)
                await quietly(self.store.home_drop(user, kind, gone), f"dropping stale rows of {user}")
        links = await self._links([a for a in found.values() if a is not None])
        notice = self._notices.get(user)
        text = notice[1] if notice is not None and notice[0] > time.monotonic() else None
        return HomeData(user=user, waiting=waiting, asked=asked, recent=recent, notice=text), links

    async def _links(self, asks: Sequence[LoadedAsk]) -> dict[str, str]:
        out: dict[str, str] = {}
        for ask in asks:
            first = ask.messages[0] if ask.messages else None
            if first is None:
                continue
            url = first.permalink or await self.slack.permalink(first.channel, first.ts)
            if url:
                out[ask.record.ask_id] = url
        return out

    # -- publishing --------------------------------------------------------------------------

    async def publish(
        self, user: str, *, page: int | None = None, view_hash: str | None = None, priority: Priority = "post"
    ) -> bool:
        """Draw the person's tab fresh and publish it. ``views.publish`` gets the hash of the view
        last published (or the one the person clicked on): a conflict means another replica published
        meanwhile, so this one reads and draws again rather than overwrite a newer view with an older
        one. False when it gave up on Slack (the caller tries again later)."""
        for attempt in range(_CONFLICTS + 1):
            rows = await self.store.home_rows(user)
            shown = page if page is not None else rows.page
            data, links = await self.data(user, rows)
            view = render_home(data, page=shown, now_ms=int(time.time() * 1000), links=links)
            shown = HomeMeta.decode(view["private_metadata"])
            expected = view_hash if attempt == 0 and view_hash else rows.view_hash
            params: dict[str, Any] = {"user_id": user, "view": view}
            if expected and attempt < _CONFLICTS:
                params["hash"] = expected
            try:
                answer = await self.slack.call(
                    "views.publish", where=f"for {user}", priority=priority, **params
                )
            except SlackPermanentError as exc:
                if exc.code == "hash_conflict":
                    log.info("home tab of %s changed under this publish: drawn again", user)
                    continue
                log.warning("home tab of %s not published: %s", user, exc)
                return True  # Slack refuses it for good (a deleted user, say): not retried
            published = answer.get("view")
            new_hash = str(published.get("hash") or "") if isinstance(published, dict) else ""
            await self.store.home_published(user, new_hash or None, shown)
            return True
        return False

    async def opened(self, user: str) -> None:
        """``app_home_opened``: the person looks at the tab; drawn fresh, debounced."""
        await self.store.home_opened(user, delay_ms=OPEN_DEBOUNCE_MS)

    async def on_page(self, action: BlockAction) -> None:
        """Next / Previous: the page asked for, over the view the person clicked on (its hash)."""
        value = action.value or ""
        page = int(value) if value.isdigit() and len(value) < 5 else 0
        await self.publish(action.user.id, page=page, view_hash=action.view_hash, priority="now")

    async def notice(self, user: str, text: str) -> None:
        """Tell the person privately on their tab (an act from it has no message to answer in)."""
        now = time.monotonic()
        for old in [u for u, (until, _) in self._notices.items() if until <= now]:
            del self._notices[old]
        self._notices[user] = (now + NOTICE_FOR_S, text)
        await quietly(self.publish(user, priority="now"), f"telling {user} on the tab")
