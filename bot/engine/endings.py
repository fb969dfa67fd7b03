"""Endings: resolve an ask once (the store decides who wins), then draw its messages in their ended form."""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence

from bot import render, results
from bot.engine.acts import Act, ended_with
from bot.engine.home import quietly
from bot.engine.room import Room
from bot.errors import SlackError, SlackPermanentError
from bot.logs import bind_ask_id
from bot.metrics import METRICS
from bot.model import AskRecord, PostedMessage
from bot.slack.interactions import SlackUser
from bot.slack.pacing import Priority
from bot.storage.records import HomePeople
from bot.storage.store import Lease, Resolution, ResolveVerdict, iso_ms
from contract.envelopes import ResultResponder, ResultSlack, Via

__all__ = ["Endings"]

log = logging.getLogger(__name__)


class Endings(Room):
    async def end(
        self,
        rec: AskRecord,
        ending: results.Ending,
        *,
        actor: SlackUser | None,
        event: str,
        detail: str,
        messages: Sequence[PostedMessage],
        acted_on: PostedMessage | None = None,
        refuse_late: bool = False,
        reason: str | None = None,
        release_lease: bool = False,
        lease: Lease | None = None,
        act: Act | None = None,
        via: Via | None = None,
    ) -> ResolveVerdict:
        """End the ask with ``ending`` unless something else already did; then update Slack.

        ``release_lease``: intake ends it without posting, so no delivery is in flight. ``lease``: the
        intake lease the ending is made under (fenced: ``stale`` once another holds the ask). ``act``:
        a person's act, whose write is bounded and refused by Redis once the bot gave up on it
        (``bot.engine.acts``). ``via``: where a person's deciding act came from (protocol section 14)."""
        prefix = await self.result_prefix(
            rec, ending, actor=actor, where=acted_on or (messages[-1] if messages else None), via=via
        )
        resolution = Resolution(
            rec,
            ending.outcome,
            prefix,
            actor.id if actor is not None else None,
            event,
            _audit_detail(reason if reason is not None else detail, via)[:500],
            refuse_late=refuse_late,
            release_lease=release_lease,
            reason=reason or "",
            replica=self.consumer,
            lease=lease,
            not_after_ms=act.arm() if act is not None else 0,
        )
        if act is None:
            verdict = await self.store.resolve(resolution)
        else:
            assert actor is not None
            counted = ended_with(ending.outcome, ending.text, actor.id)
            verdict = await act.write(self.store.resolve(resolution), counted)
            act.recorded = verdict.verdict == "won"
        self.log_ending(rec, event, ending.outcome, verdict, actor=actor, lease=lease)
        if verdict.verdict == "won":
            METRICS.results.labels(outcome=ending.outcome).inc()
            assert verdict.result is not None
            person = actor.id if actor is not None else None
            # The tabs first: a tab is drawn from the records, so it need not wait for the redraw,
            # which waits for Slack's chat.update pacing (seconds when many asks end at once). On one
            # server the ending's own round trip did it (the store told whose tabs hold the ask).
            people = verdict.people if verdict.people is not None else await self.home_after(rec, person)
            await self.finish_messages(
                rec,
                verdict.messages,
                verdict.result,
                person,
                reason=reason,
                channels=verdict.channels,
                people=people,
                withdrawn=verdict.withdrawn,
            )
        return verdict

    async def home_after(self, rec: AskRecord, person: str | None) -> HomePeople | None:
        """The Home tabs showing an ask that just ended or was voted on are published again, and the
        person who answered or voted has it in "Recently answered by you" (docs/home.md). Returns
        whose indexes hold the ask, as read on the way (None when Redis did not tell)."""
        work = self.store.home_changed(rec.tag, rec.ask_id, answered_by=person)
        return await quietly(work, f"publishing the tabs showing {rec.ask_id}")

    def log_ending(
        self,
        rec: AskRecord,
        event: str,
        outcome: str,
        verdict: ResolveVerdict,
        *,
        actor: SlackUser | None = None,
        lease: Lease | None = None,
    ) -> None:
        """One line per ending this replica made, naming who ended it (person, replica, lease)."""
        if verdict.verdict != "won":
            return
        who = f"{actor.id}" if actor is not None else "-"
        held = f", lease {lease}" if lease is not None else ""
        log.info(
            "ask %s ended %s (%s) by %s on replica %s%s", rec.ask_id, outcome, event, who, self.consumer, held
        )

    async def result_prefix(
        self,
        rec: AskRecord,
        ending: results.Ending,
        *,
        actor: SlackUser | None,
        where: PostedMessage | None,
        via: Via | None = None,
    ) -> str:
        slack_ref = None
        if where is not None:
            slack_ref = ResultSlack(
                channel=where.channel,
                ts=where.ts,
                permalink=where.permalink or await self.slack.permalink(where.channel, where.ts),
            )
        return results.result_prefix(
            ask_id=rec.ask_id,
            format=rec.format,
            ending=ending,
            responder=ResultResponder(id=actor.id, name=actor.display) if actor is not None else None,
            slack=slack_ref,
            created_at=iso_ms(rec.created_ms),
            via=via,
        )

    async def finish_messages(
        self,
        rec: AskRecord,
        messages: Sequence[PostedMessage],
        result: results.StoredResult,
        by: str | None,
        *,
        reason: str | None = None,
        priority: Priority = "now",
        deadline: float | None = None,
        channels: Collection[str] | None = None,
        people: HomePeople | None = None,
        withdrawn: Collection[tuple[str, str]] = (),
    ) -> None:
        """Turn every message of an ended ask into its ended form (no buttons left), delete again every
        copy the bot withdrew, then mark it done.

        ``priority``: ``now`` after what a person did, ``clear`` for the sweeper's clean-up; ``deadline``:
        the end of the timer lease the sweeper holds (bot.slack.pacing, bot.engine.room); ``channels``:
        the channels the ask was tracked in, when the ending script told them, and ``people`` whose Home
        indexes hold it, when ``home_after`` told them (finalize reads them otherwise); ``withdrawn``:
        ``(channel, ts)`` of the copies withdrawn (``Room.withdraw``). Their first ``chat.delete`` may
        have failed, or never run (the replica died after the mark): each is deleted again here, and
        Slack's ``message_not_found`` for one already gone counts as done."""
        bind_ask_id(rec.ask_id)
        if not messages:
            # Nothing to draw (a refused ask has no message, and maybe no request to draw from):
            # the clean-up timer goes at once.
            if await self._delete_withdrawn(withdrawn, priority=priority, deadline=deadline):
                await self.store.finalize(rec.tag, rec.ask_id, 0, channels=channels, people=people)
            return
        if reason is None and result.outcome == "cancelled" and by is None:
            # An agent's cancel: its reason is kept beside the result (a post that lands after the
            # cancel, and every redraw by the sweeper, show it too).
            reason = result.reason or ""
        if reason is None and result.outcome == "cancelled":
            # A Decline's reason travels in every answer's note (protocol section 9), so a redraw
            # by the sweeper shows it too.
            reason = next((a.note for a in result.answers if a.note), None)
        ended = render.render_ended_message(
            rec,
            outcome=result.outcome,
            responder_id=by,
            resolved_ms=result.resolved_ms,
            answers=result.answers,
            form=result.form,
            reason=reason,
            votes=result.envelope.votes,
        )
        ok = 0
        for message in messages:
            try:
                await self.slack.update(
                    message.channel,
                    message.ts,
                    text=ended.text,
                    blocks=ended.blocks,
                    priority=priority,
                    deadline=deadline,
                )
                ok += 1
            except SlackPermanentError as exc:
                # A deleted message or archived channel cannot carry a live button: that is done too.
                log.info("could not update %s/%s: %s", message.channel, message.ts, exc.code)
                ok += 1
            except SlackError as exc:
                log.warning(
                    "could not update %s/%s yet: %s (the sweeper retries)", message.channel, message.ts, exc
                )
        # The copies the bot withdrew after the redraw, which a person waits for; not finalized (the
        # clean-up timer stays, and the sweeper comes back) while one is left in Slack.
        deleted = await self._delete_withdrawn(withdrawn, priority=priority, deadline=deadline)
        if ok == len(messages) and deleted:
            await self.store.finalize(rec.tag, rec.ask_id, len(messages), channels=channels, people=people)

    async def _delete_withdrawn(
        self, withdrawn: Collection[tuple[str, str]], *, priority: Priority, deadline: float | None
    ) -> bool:
        """``chat.delete`` of each withdrawn copy; True when none is left in Slack."""
        gone = 0
        for channel, ts in sorted(withdrawn):
            try:
                await self.slack.delete(channel, ts, priority=priority, deadline=deadline)
                gone += 1
            except SlackPermanentError as exc:
                # Done either way: retrying cannot change Slack's answer, and the sweeper must not spin.
                if exc.code in _GONE:
                    log.debug("withdrawn copy %s/%s: %s", channel, ts, exc.code)
                else:
                    log.warning("the withdrawn copy %s/%s stays in Slack: %s", channel, ts, exc)
                gone += 1
            except SlackError as exc:
                log.warning(
                    "could not delete the withdrawn copy %s/%s yet: %s (the sweeper retries)",
                    channel,
                    ts,
                    exc,
                )
        return gone == len(withdrawn)


_GONE = frozenset({"message_not_found", "channel_not_found", "is_archived"})
"""Slack's answers to ``chat.delete`` of a copy that is gone already: the first delete went through,
or the conversation went, and the copy with it."""


def _audit_detail(detail: str, via: Via | None) -> str:
    """The audit line says where the deciding act came from (protocol section 14), then the detail."""
    if via is None:
        return detail
    return f"via {via}: {detail}" if detail else f"via {via}"
