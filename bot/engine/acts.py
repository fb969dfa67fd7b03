"""Nobody is left unanswered: what a person does (a click, opening a form, submitting one) is acked
within Slack's 3 s whatever Redis does, and when the bot cannot record it the person is told so
privately and can try again. An act the person was told failed never counts later.

An :class:`Act` follows one person's act through three phases:

* ``before``: nothing of it is written. The ask is read (``Store.look``, within ``READ_BUDGET_S`` for
  a form's open or submission, ``CLICK_READ_BUDGET_S`` for a click Slack already has its ack for),
  who-may-answer decided, a message the record lacks learned of (within the same bound). A Redis
  failure here (an error, or no answer in time) is told at once: not recorded, try again.
* ``sent``: its one write (``resolve.lua`` or ``vote.lua``) is on its way with a deadline in Redis
  time (``not_after_ms``: the look's Redis time, plus the time since, plus ``WRITE_BUDGET_S``), and
  the bot waits for its answer until ``CLOCK_MARGIN_S`` after that deadline. Without an answer by
  then, the outcome is unknown but fixed: a write that reaches Redis later (a blackholed link that
  delivers it at the heal, a retry on a fresh connection) is refused by its script. The person is
  told the bot is finding out; once Redis answers, a look whose Redis time is past the deadline says
  whether the act counted, and they are told which (``Acts.settle``).
* ``done``: recorded, or refused and told why. A failure after this (redrawing, an audit line) is one
  log line; the clean-up timer the ending set finishes its messages. A recorded act whose follow-up
  failed is confirmed to its person (a vote's tally may not have been redrawn).

Private answers go to the click's ``response_url`` (no token, no pacing: no Redis), else as an
ephemeral message (pacing waits at most ``bot.slack.pacing.BUCKET_BUDGET_S`` for Redis).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeVar

from redis.exceptions import RedisError

from bot import render
from bot.engine.room import Refusal, Room, Shared
from bot.errors import SlackError, StoreError, failure
from bot.ids import AskRef
from bot.slack.interactions import BlockAction, SlackUser
from bot.storage.store import LoadedAsk

if TYPE_CHECKING:
    from bot.engine.endings import Endings

__all__ = [
    "CLICK_READ_BUDGET_S",
    "CLOCK_MARGIN_S",
    "READ_BUDGET_S",
    "SETTLE_FOR_S",
    "UNAVAILABLE",
    "WRITE_BUDGET_S",
    "Act",
    "Acts",
    "chose",
    "ended_with",
    "voted",
]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

READ_BUDGET_S = 1.0
"""What one Redis step of a form's open or submission may take before its write (the look, learning
a message): the submission is acked, and the form opened (its ``trigger_id`` lives 3 s), well inside
Slack's 3 s."""
CLICK_READ_BUDGET_S = 3.0
"""The same for a click, which Slack has had its ack for: a slow Redis still counts it, a gone one
is told within seconds."""
WRITE_BUDGET_S = 3.0
"""How long after it is sent (in Redis time) an act's write may still count."""
CLOCK_MARGIN_S = 0.25
"""How much longer than ``WRITE_BUDGET_S`` the bot waits for the write's answer: covers the gap
between the look's Redis time and its answer's arrival being counted the other way, and clock rates."""
SETTLE_FOR_S = 600.0
"""How long the bot keeps trying to find out whether an unconfirmed act counted (a response_url
lives 30 minutes)."""

UNAVAILABLE = (RedisError, OSError, StoreError)
"""What Redis being away looks like (``TimeoutError`` is an ``OSError``); anything else is a bug."""

Kind = Literal["click", "open", "submission", "reply"]
Counted = Callable[[LoadedAsk], bool]


@dataclass
class Act:
    """One person's act on one ask, from the Slack request to its last private word."""

    user: SlackUser
    ref: AskRef | None
    channel: str | None
    kind: Kind = "click"
    response_url: str | None = None
    thread_ts: str | None = None
    """Where a private word goes when there is no ``response_url`` (a reply typed in a thread)."""
    phase: Literal["before", "sent", "done"] = "before"
    recorded: bool = False
    """Done and counted (an answer won, a vote was counted)."""
    anchor: tuple[int, float] | None = None
    """(Redis ms, ``time.monotonic()`` when that answer was in) of the last look."""
    not_after_ms: int = 0
    give_up_at: float = 0.0
    counted: Counted | None = None
    """Whether a record shows this act's effect: what settles it when its write went unanswered."""
    home: bool = False
    """Made on the person's Home tab (docs/home.md): ``via: home``, told on the tab."""

    @classmethod
    def of_click(cls, action: BlockAction, kind: Kind = "click") -> Act:
        return cls(
            action.user,
            action.ref,
            action.channel,
            kind=kind,
            response_url=action.response_url,
            home=action.home,
        )

    @property
    def read_budget_s(self) -> float:
        # A click and a typed reply are acked to Slack before the bot reads anything.
        return CLICK_READ_BUDGET_S if self.kind in ("click", "reply") else READ_BUDGET_S

    @property
    def name(self) -> str:
        return f"the {self.kind} of {self.user.id} on {self.ref.ask_id if self.ref else 'an unknown ask'}"

    async def before(self, work: Awaitable[_T]) -> _T:
        """A Redis step before the write, within ``read_budget_s``."""
        async with asyncio.timeout(self.read_budget_s):
            return await work

    def arm(self) -> int:
        """The write's deadline in Redis time (``not_after_ms``), just before it is sent."""
        assert self.anchor is not None, "an act looks at its ask before it writes"
        redis_ms, seen = self.anchor
        now = time.monotonic()
        # A lower bound of Redis's clock now: the look ran before its answer came in at ``seen``.
        self.not_after_ms = redis_ms + int((now - seen + WRITE_BUDGET_S) * 1000)
        self.give_up_at = now + WRITE_BUDGET_S + CLOCK_MARGIN_S
        return self.not_after_ms

    async def write(self, work: Awaitable[_T], counted: Counted) -> _T:
        """The act's one write (armed), waited for until ``give_up_at``; ``counted`` settles it
        should no answer come."""
        self.phase = "sent"
        self.counted = counted
        async with asyncio.timeout(max(self.give_up_at - time.monotonic(), 0.0)):
            verdict = await work
        self.phase = "done"
        return verdict


def ended_with(outcome: str, text: str, user_id: str) -> Counted:
    """The ask ended with this person's ending (the same outcome and narration: the same answers)."""

    def check(loaded: LoadedAsk) -> bool:
        envelope = loaded.result.envelope if loaded.result is not None else None
        if envelope is None or envelope.responder is None:
            return False
        return envelope.outcome == outcome and envelope.responder.id == user_id and envelope.text == text

    return check


def chose(user_id: str, option: int) -> Counted:
    """This person's one-click choice of ``option`` counted: their vote for it (an approval ask), or
    the ask answered by them with that option."""

    def check(loaded: LoadedAsk) -> bool:
        if loaded.record.approval is not None:
            return voted(user_id, option)(loaded)
        result = loaded.result
        if result is None or result.outcome != "answered" or result.envelope.responder is None:
            return False
        return result.envelope.responder.id == user_id and [a.selected for a in result.answers] == [[option]]

    return check


def voted(user_id: str, option: int) -> Counted:
    """This person's vote for ``option`` is among the ask's votes."""

    def check(loaded: LoadedAsk) -> bool:
        return any(v.user.id == user_id and v.selected == [option] for v in loaded.votes or [])

    return check


class Acts(Room):
    """Looks, private answers, the guard around every act, and settling unconfirmed ones."""

    def __init__(self, shared: Shared, *, endings: Endings) -> None:
        super().__init__(shared)
        self.endings = endings
        self.notice: Callable[[str, str], Awaitable[None]] | None = None
        """Tells a person on their Home tab (``bot.engine.home``; wired by the engine)."""

    async def look(self, act: Act, ref: AskRef) -> LoadedAsk | None:
        """The ask, read within the act's ``read_budget_s``; its Redis time anchors the act's write."""
        async with asyncio.timeout(act.read_budget_s):
            loaded, redis_ms = await self.store.look(ref.tag, ref.ask_id)
        act.anchor = (redis_ms, time.monotonic())
        return loaded

    async def tell(self, act: Act, text: str) -> None:
        """Tell the person privately: the click's response_url, else an ephemeral message."""
        if act.response_url is not None:
            try:
                await self.slack.respond(act.response_url, text)
                return
            except SlackError as exc:
                log.info("could not answer %s through its response_url: %s", act.name, exc)
        if act.channel is None:
            if act.home and self.notice is not None:
                await self.notice(act.user.id, text)  # no conversation to be private in: the tab
            return
        try:
            await self.slack.ephemeral(act.channel, act.user.id, text, thread_ts=act.thread_ts)
        except SlackError as exc:
            log.info("could not tell %s privately: %s", act.user.id, exc)

    async def refuse(self, act: Act, refusal: Refusal) -> None:
        """The act changed nothing: told why first, then audited (whatever Redis does, they hear it)."""
        act.phase = "done"
        await self.tell(act, refusal.text)
        if refusal.audit is not None and act.ref is not None:
            await self.store.audit(act.ref.tag, act.ref.ask_id, refusal.audit, by=act.user.id)

    async def run(self, act: Act, work: Awaitable[None]) -> None:
        """Run an act's work; Redis failing is one log line and a private word, never silence."""
        try:
            await work
        except UNAVAILABLE as exc:
            reason = failure(exc)
            if act.phase == "before":
                log.warning("%s was not recorded: Redis failed (%s); told so", act.name, reason)
                await self.tell(
                    act, render.render_refusal("unopened" if act.kind == "open" else "unrecorded")
                )
            elif act.phase == "sent":
                log.warning("%s is unconfirmed: Redis failed (%s); settled once it answers", act.name, reason)
                await self.tell(act, render.render_refusal("unconfirmed"))
                await self.settle(act)
            else:
                log.warning(
                    "%s is done, what follows it failed: %s (the sweeper finishes it)", act.name, reason
                )
                if act.recorded:
                    await self.tell(act, render.render_refusal("confirmed"))

    async def settle(self, act: Act) -> None:
        """Find out whether an act whose write went unanswered counted, and tell its person.

        The look must run after the write's deadline in Redis time: from then on the write either
        has run (the look shows it) or never will (its script refuses it)."""
        assert act.ref is not None and act.counted is not None
        give_up = time.monotonic() + SETTLE_FOR_S
        backoff = 0.25
        while True:
            try:
                async with asyncio.timeout(READ_BUDGET_S + self.store.replica_wait_ms / 1000):
                    # Confirmed: an act whose write replicas did not confirm (NotReplicatedError)
                    # is told it counted only once a failover can no longer take it back.
                    loaded, redis_ms = await self.store.look(act.ref.tag, act.ref.ask_id, confirm=True)
            except UNAVAILABLE:
                if time.monotonic() > give_up:
                    log.warning(
                        "%s could not be settled: Redis did not answer for %.0f s", act.name, SETTLE_FOR_S
                    )
                    await self.tell(act, render.render_refusal("unsettled"))
                    return
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            if redis_ms <= act.not_after_ms:  # the write may still be on its way: look again after
                await asyncio.sleep((act.not_after_ms - redis_ms) / 1000 + 0.01)
                continue
            break
        if loaded is not None and act.counted(loaded):
            log.info("%s counted after all; told so", act.name)
            await self.tell(act, render.render_refusal("confirmed"))
            await self._finish(loaded)
            return
        log.info("%s did not count; told so", act.name)
        ended = loaded is not None and loaded.state == "ended"
        await self.tell(act, render.render_refusal("ended" if ended else "unrecorded"))

    async def counted_after_all(self, act: Act) -> bool:
        """Whether an act its write called ``ended`` (or ``missing``) is in fact the one that ended the
        ask: a write whose answer a dropped connection lost is sent again on a fresh one (redis-py's
        retry), and finds the ask ended by itself. Then it is recorded, not refused."""
        assert act.ref is not None and act.counted is not None
        act.phase = "sent"  # not known yet: a failure of this look settles it
        loaded = await self.look(act, act.ref)
        act.phase = "done"
        if loaded is None or not act.counted(loaded):
            return False
        act.recorded = True
        await self._finish(loaded)
        return True

    async def _finish(self, loaded: LoadedAsk) -> None:
        """The ending's own redraw never ran: its messages are finished now, not by the clean-up timer
        ``FINALIZE_AFTER_MS`` later."""
        if loaded.state == "ended" and loaded.result is not None and not loaded.finalized:
            await self.endings.finish_messages(
                loaded.record, loaded.messages, loaded.result, loaded.by, withdrawn=loaded.withdrawn
            )
