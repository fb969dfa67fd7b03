"""Approvals (protocol section 13): a click is a vote; the store records it and decides in one step.

The vote script (``vote.lua``) decides atomically in the ask's slot, so this room only prepares the
result the vote would give should it decide (the usual single-question result for that option, with
the voter as responder), then draws what the store said: the ended message, or the live tally.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from bot import render, results
from bot.engine.acts import Act, Acts, voted
from bot.engine.endings import Endings
from bot.engine.room import Refusal, Room, Shared
from bot.engine.timers import Timers, place
from bot.errors import SlackError, SlackPermanentError
from bot.logs import bind_ask_id
from bot.metrics import METRICS
from bot.model import AskRecord, PostedMessage
from bot.storage.store import LoadedAsk, Vote
from contract import QuestionAnswer
from contract.envelopes import ResultResponder, ResultVote, Via

__all__ = ["REQUESTER_UNKNOWN", "Votes"]

log = logging.getLogger(__name__)

_EMAIL_CACHE_S = 600.0
"""How long an e-mail's Slack user id is reused (users.lookupByEmail is rate limited)."""
_REDRAWS = 3
"""Tally redraws per vote at most; each one re-reads the votes, so the last drawn is the newest."""

REQUESTER_UNKNOWN = (
    "Slack could not tell right now whether you asked for this approval, so your vote was not counted. "
    "Please try again in a moment."
)


class Votes(Room):
    def __init__(self, shared: Shared, *, endings: Endings, timers: Timers, acts: Acts) -> None:
        super().__init__(shared)
        self.endings = endings
        self.timers = timers
        self.acts = acts
        self._emails: dict[str, tuple[float, str | None]] = {}

    async def vote(
        self,
        loaded: LoadedAsk,
        act: Act,
        option: int,
        *,
        acted_on: PostedMessage | None,
        via: Via = "button",
    ) -> None:
        """Count the person's vote for ``option``; when it cannot count, they are told why. ``via``:
        where the vote came from (protocol section 14)."""
        rec = loaded.record
        user = act.user
        assert rec.approval is not None and rec.request is not None
        if rec.approval.exclude_requester:
            requester = await self._is_requester(rec, user.id)
            if requester is None:
                await self.acts.refuse(act, Refusal("requester_unknown", REQUESTER_UNKNOWN))
                return
            if requester:
                METRICS.refusals.labels(kind="requester").inc()
                refusal = Refusal("requester", render.render_refusal("requester"), audit="refused_requester")
                await self.acts.refuse(act, refusal)
                return
        question = rec.request.questions[0]
        # Exactly the result of one person choosing this option, should this vote decide.
        ending = results.answered(rec, [QuestionAnswer(id=question.id, status="answered", selected=[option])])
        prefix = await self.endings.result_prefix(rec, ending, actor=user, where=acted_on, via=via)
        ballot = Vote(
            rec,
            ResultResponder(id=user.id, name=user.display),
            option,
            prefix,
            not_after_ms=act.arm(),
            replica=self.consumer,
        )
        verdict = await act.write(self.store.vote(ballot), voted(user.id, option))
        act.recorded = verdict.verdict in ("won", "counted", "same")
        if verdict.verdict == "won":
            assert verdict.result is not None
            METRICS.results.labels(outcome="answered").inc()
            log.info("ask %s ended answered (vote) by %s on replica %s", rec.ask_id, user.id, self.consumer)
            # The tabs before the redraws, which wait for Slack's pacing (bot.engine.endings.end).
            await self.endings.home_after(rec, user.id)
            await self.endings.finish_messages(
                rec,
                verdict.messages,
                verdict.result,
                user.id,
                channels=verdict.channels,
                withdrawn=verdict.withdrawn,
            )
        elif verdict.verdict == "counted":
            await self.endings.home_after(rec, user.id)  # its tally changed on the tabs showing it
            await self.redraw(rec)
        elif verdict.verdict == "same":
            pass  # a repeat of the vote already counted changes nothing
        elif verdict.verdict == "late":
            METRICS.refusals.labels(kind="late").inc()
            await self.acts.refuse(act, Refusal("late", render.render_refusal("late")))
            await self.timers.time_out(loaded)
        elif verdict.verdict == "expired":
            await self.acts.refuse(act, Refusal("unrecorded", render.render_refusal("unrecorded")))
        elif not await self.acts.counted_after_all(act):
            await self.acts.refuse(act, Refusal("ended", render.render_refusal("ended")))

    async def redraw(self, rec: AskRecord) -> None:
        """Draw the current tally on every message of a pending approval ask.

        Votes arriving together may draw out of order, and the ask may end between a read and a draw:
        after drawing, the votes are read again and the tally redrawn (or the ended form drawn) until
        what Slack shows is what Redis holds."""
        drawn: list[ResultVote] | None = None
        # Every draw is followed by a read: a draw is never the last word if the ask ended meanwhile.
        for attempt in range(_REDRAWS + 1):
            fresh = await self.store.load(rec.tag, rec.ask_id)
            if fresh is None:
                return
            if fresh.state == "ended":
                if drawn is not None and fresh.result is not None:
                    # A tally drawn after the ending's update would leave live buttons: end them again.
                    await self.endings.finish_messages(
                        fresh.record, fresh.messages, fresh.result, fresh.by, withdrawn=fresh.withdrawn
                    )
                return
            if (drawn is not None and fresh.votes == drawn) or attempt == _REDRAWS:
                return  # what Slack shows is what Redis holds (or the next vote redraws it)
            drawn = list(fresh.votes or [])
            await self._draw(fresh, drawn)

    async def _draw(self, loaded: LoadedAsk, votes: Sequence[ResultVote]) -> None:
        rec = loaded.record
        bind_ask_id(rec.ask_id)
        now_ms = int(time.time() * 1000)  # display only ("due in 5 min"); decisions use Redis time
        for message in loaded.messages:
            places = [place(s) for s in rec.escalate[message.step : loaded.step]]
            redrawn = render.render_ask_message(
                rec, now_ms=now_ms, step=message.step, elsewhere=places, votes=votes
            )
            try:
                await self.slack.update(message.channel, message.ts, text=redrawn.text, blocks=redrawn.blocks)
            except SlackError as exc:
                log.info("could not draw the tally on %s/%s: %s", message.channel, message.ts, exc)

    async def _is_requester(self, rec: AskRecord, user_id: str) -> bool | None:
        """Whether ``user_id`` is the person named by ``requester.user``; None when Slack cannot tell
        (the vote is then refused: exclusion fails closed, like who-may-answer)."""
        named = rec.requester.user if rec.requester is not None else None
        if not named:
            return False
        if "@" not in named:
            return named == user_id
        key = named.lower()
        cached = self._emails.get(key)
        now = time.monotonic()
        if cached is None or now - cached[0] >= _EMAIL_CACHE_S:
            try:
                found: str | None = await self.slack.resolve_user(named)
            except SlackPermanentError as exc:
                if exc.code != "users_not_found":
                    log.warning("cannot look up the requester %s: %s", named, exc)
                    return None
                found = None  # nobody in this workspace has that address: nobody here is the requester
            except SlackError as exc:
                log.warning("cannot look up the requester %s: %s", named, exc)
                return None
            cached = (now, found)
            self._emails[key] = cached
        return cached[1] == user_id
