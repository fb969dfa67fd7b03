"""The I/O shell around the pure parts: intake, endings, human actions and timers.

Every state change goes through :class:`bot.storage.store.Store` (atomic Lua); every Slack call goes
through :class:`bot.slack.SlackGateway`; what to draw comes from :mod:`bot.render`; what a payload
means comes from :mod:`bot.slack.interactions`; how an ask ends comes from :mod:`bot.results`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bot import render, results
from bot.asks import Rejection, build_record
from bot.config import Settings
from bot.errors import SlackError, SlackPermanentError
from bot.ids import AskRef, FormMeta
from bot.logs import bind_ask_id
from bot.metrics import METRICS
from bot.model import AskRecord, PostedMessage
from bot.slack.gateway import SlackGateway
from bot.slack.interactions import (
    BlockAction,
    FormAnswers,
    FormErrors,
    SlackUser,
    ViewSubmission,
    read_form,
    read_other_text,
)
from bot.storage.keys import slot_tag
from bot.storage.store import AcceptVerdict, Entry, LoadedAsk, Resolution, ResolveVerdict, Store, iso_ms
from contract import QuestionAnswer
from contract.envelopes import EnvelopeError, EscalationStep, parse_ask_envelope, parse_cancel_envelope

__all__ = ["Engine", "Refusal"]

log = logging.getLogger(__name__)

LEASE_FACTOR = 2  # an intake lease outlives the delivery window, so a slow Slack never causes a double post


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a human action changed nothing; told privately to that human."""

    kind: str
    text: str
    ended: LoadedAsk | None = None
    """For ``ended``: the ask as loaded, so its messages can be healed without another read."""


def _iso_to_ms(text: str | None) -> int:
    if not text:
        return 0
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def summary_lines(rec: AskRecord, result: dict[str, Any]) -> list[str]:
    """A few lines saying what was answered, for the ended Slack message."""
    if rec.format == "rich" and rec.form is not None:
        labels = {q.id: q.label for q in rec.form.questions}
        lines = []
        for answer in result.get("answers") or []:
            value = answer.get("value")
            shown = ", ".join(value) if isinstance(value, list) else str(value or "")
            lines.append(f"{labels.get(answer.get('id'), answer.get('id'))}: {shown or '(empty)'}")
        return lines
    text = str(result.get("text") or "")
    body = text.split("\n\n", 1)[0].splitlines()
    return body[1:] if body and body[0] == "User answers:" else body


class Engine:
    def __init__(self, settings: Settings, store: Store, slack: SlackGateway, *, consumer: str) -> None:
        self.settings = settings
        self.store = store
        self.slack = slack
        self.consumer = consumer
        self.lease_ms = max(settings.delivery_window_ms * LEASE_FACTOR, 1_000)

    # ------------------------------------------------------------------ intake

    async def handle_entry(self, entry: Entry) -> None:
        """Handle one intake entry; never raises for bad input (it ends up on a queue instead)."""
        if entry.deliveries > self.settings.max_deliveries:
            METRICS.dead_letters.labels(reason="poison").inc()
            await self.store.dead_letter(
                entry, f"failed {entry.deliveries - 1} times; parked for an operator"
            )
            return
        if "ask" in entry.fields:
            await self._handle_ask(entry)
        elif "cancel" in entry.fields:
            await self._handle_cancel(entry)
        elif "dismiss" in entry.fields:
            await self._handle_dismiss(entry)
        else:
            METRICS.dead_letters.labels(reason="no_field").inc()
            await self.store.dead_letter(entry, "the entry has neither an 'ask' nor a 'cancel' field")

    def _pending_ttl_ms(self, rec: AskRecord | None) -> int:
        # Bounded lifetime for every key: pending life (deadline, or retention for open-ended asks)
        # plus the retention that follows the end.
        life = (
            (rec.deadline_ms - rec.created_ms)
            if rec is not None and rec.deadline_ms
            else self.store.retention_ms
        )
        return life + self.store.retention_ms + 86_400_000

    async def _handle_ask(self, entry: Entry) -> None:
        created_ms = entry.created_ms
        try:
            env = parse_ask_envelope(entry.fields["ask"])
        except EnvelopeError as exc:
            METRICS.asks.labels(result="invalid_envelope").inc()
            await self._reject_unparsed(entry, exc, created_ms)
            return
        bind_ask_id(env.ask_id)  # every log line of this entry's task names the ask
        tag = await self.store.claim_index(env.ask_id, slot_tag(env.reply_to), self._pending_ttl_ms(None))
        built = build_record(env, tag=tag, created_ms=created_ms, settings=self.settings)
        if isinstance(built, Rejection):
            rec = built.record or AskRecord(
                ask_id=env.ask_id, tag=tag, reply_to=env.reply_to, format=env.format, created_ms=created_ms
            )
        else:
            rec = built
        if tag != slot_tag(env.reply_to):
            # The id is known under another reply_to: only a re-send of that ask can be meant.
            loaded = await self.store.load(tag, env.ask_id)
            if loaded is not None:
                rec = loaded.record
        schedule = rec.deadline_ms if isinstance(built, AskRecord) else None
        verdict = await self.store.accept(
            rec,
            consumer=self.consumer,
            lease_ms=self.lease_ms,
            pending_ttl_ms=self._pending_ttl_ms(rec),
            entry_id=entry.id,
            schedule_at_ms=schedule,
        )
        if verdict.verdict == "ended":
            await self._recover(verdict, entry, tag, env.ask_id, env.reply_to)
            await self.store.ack(entry.id)
            return
        if verdict.verdict == "posted":
            METRICS.asks.labels(result="duplicate").inc()
            await self.store.ack(entry.id)
            return
        if verdict.verdict == "busy":
            return  # another live replica holds it; reclaim brings it back if that one dies
        if isinstance(built, Rejection):
            METRICS.asks.labels(result=built.code).inc()
            if built.kind == "unavailable":
                error = {"code": built.code, "message": built.message}
                ending = results.ended_without_answer(rec, "unavailable", error=error)
            else:
                ending = results.envelope_error(built.code, built.message)
            await self.end(rec, ending, actor=None, event=built.code, detail=built.message, messages=[])
            await self.store.ack(entry.id)
            return
        if verdict.verdict == "cancel":
            await self.end(
                rec,
                results.ended_without_answer(rec, "cancelled"),
                actor=None,
                event="cancelled",
                detail=verdict.detail,
                messages=[],
            )
            await self.store.ack(entry.id)
            return
        if verdict.verdict == "expired":
            await self.end(
                rec,
                results.timed_out(rec),
                actor=None,
                event="timeout",
                detail="read after its deadline",
                messages=[],
            )
            await self.store.ack(entry.id)
            return
        await self._deliver(rec, entry)

    async def _recover(
        self, verdict: AcceptVerdict, entry: Entry, tag: str, ask_id: str, reply_to: str
    ) -> None:
        """An ask that already ended came again in a new entry: push its stored result once more,
        onto the reply_to it was first sent with (protocol section 10, point 1)."""
        if verdict.entry == entry.id or not verdict.detail:
            return  # the same entry reclaimed after a crash: its result is already out
        METRICS.asks.labels(result="resent").inc()
        stored = await self.store.load(tag, ask_id)
        await self.store.repush(stored.record.reply_to if stored else reply_to, verdict.detail)

    async def _reject_unparsed(self, entry: Entry, exc: EnvelopeError, created_ms: int) -> None:
        if exc.reply_to is None:
            METRICS.dead_letters.labels(reason=exc.code).inc()
            await self.store.dead_letter(entry, f"{exc.code}: {exc.message} (no readable reply_to)")
            return
        ending = results.envelope_error(exc.code, exc.message)
        if exc.ask_id is None:
            now = await self.store.server_time_ms()
            prefix = results.result_prefix(
                ask_id=None,
                format="pi-question",
                ending=ending,
                responder=None,
                slack=None,
                created_at=iso_ms(created_ms),
            )
            await self.store.repush(exc.reply_to, prefix + json.dumps(iso_ms(now)) + "}")
            await self.store.ack(entry.id)
            return
        tag = await self.store.claim_index(exc.ask_id, slot_tag(exc.reply_to), self._pending_ttl_ms(None))
        rec = AskRecord(ask_id=exc.ask_id, tag=tag, reply_to=exc.reply_to, created_ms=created_ms)
        verdict = await self.store.accept(
            rec,
            consumer=self.consumer,
            lease_ms=self.lease_ms,
            pending_ttl_ms=self._pending_ttl_ms(None),
            entry_id=entry.id,
            schedule_at_ms=None,
        )
        if verdict.verdict in ("post", "cancel", "expired"):
            await self.end(rec, ending, actor=None, event=exc.code, detail=exc.message, messages=[])
        elif verdict.verdict == "ended":
            await self._recover(verdict, entry, tag, exc.ask_id, exc.reply_to)
        if verdict.verdict != "busy":
            await self.store.ack(entry.id)

    async def _handle_cancel(self, entry: Entry) -> None:
        try:
            env = parse_cancel_envelope(entry.fields["cancel"])
        except EnvelopeError as exc:
            METRICS.dead_letters.labels(reason="bad_cancel").inc()
            await self.store.dead_letter(entry, f"{exc.code}: {exc.message}")
            return
        bind_ask_id(env.ask_id)
        loaded = await self.store.find(env.ask_id)
        if loaded is None:
            await self.store.remember_cancel(slot_tag(env.reply_to), env.ask_id, env.reason or "")
        elif loaded.state != "ended":
            await self.end(
                loaded.record,
                results.ended_without_answer(loaded.record, "cancelled"),
                actor=None,
                event="cancelled",
                detail=env.reason or "",
                messages=loaded.messages,
                reason=env.reason or "",
            )
        await self.store.ack(entry.id)

    async def _handle_dismiss(self, entry: Entry) -> None:
        """``slack-ask dismiss``: an operator ends a pending ask as ``dismissed`` (bot-internal entry)."""
        try:
            data = json.loads(entry.fields["dismiss"])
            ask_id, by = str(data["ask_id"]), str(data.get("by") or "operator")
        except (ValueError, KeyError, TypeError):
            await self.store.dead_letter(entry, 'dismiss entry is not {"ask_id": ..., "by": ...}')
            return
        bind_ask_id(ask_id)
        user = SlackUser(id=by) if by.startswith(("U", "W")) else None
        await self.dismiss(ask_id, by=user, detail=f"dismissed by {by}")
        await self.store.ack(entry.id)

    async def _deliver(self, rec: AskRecord, entry: Entry) -> None:
        assert rec.route is not None
        route = rec.route
        try:
            target = await self.slack.target_for(
                channel=route.channel, user=route.user, thread_ts=route.thread_ts
            )
            # Display only ("due in 5 min"); every decision uses Redis time.
            message = render.render_ask_message(rec, now_ms=int(time.time() * 1000))
            ts = await self.slack.post(target, text=message.text, blocks=message.blocks)
        except SlackError as exc:
            METRICS.asks.labels(result="unavailable").inc()
            message_text = str(exc)
            await self.end(
                rec,
                results.ended_without_answer(
                    rec, "unavailable", error={"code": exc.code, "message": message_text}
                ),
                actor=None,
                event="unavailable",
                detail=message_text,
                messages=[],
            )
            await self.store.ack(entry.id)
            return
        posted = PostedMessage(channel=target.channel, ts=ts, step=0)
        METRICS.asks.labels(result="posted").inc()
        state = await self.store.posted(
            rec.tag, rec.ask_id, [posted], actor=self.consumer, ack_entry=entry.id, track_channel=True
        )
        if state == "ended":
            # Ended (cancelled, say) while we were posting: never leave a live button behind.
            loaded = await self.store.load(rec.tag, rec.ask_id)
            if loaded is not None and loaded.result is not None:
                await self.finish_messages(loaded.record, loaded.messages, loaded.result, loaded.by)
        elif self._next_timer(rec, step=0, reminders=0) != rec.deadline_ms:
            # The deadline timer was set at accept; only earlier escalation or reminder timers are new.
            await self._schedule_next(rec, step=0, reminders=0)

    # ------------------------------------------------------------------ endings

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
    ) -> ResolveVerdict:
        """End the ask with ``ending`` unless something else already did; then update Slack."""
        prefix = await self._result_prefix(
            rec, ending, actor=actor, where=acted_on or (messages[-1] if messages else None)
        )
        verdict = await self.store.resolve(
            Resolution(
                rec,
                ending.outcome,
                prefix,
                actor.id if actor is not None else None,
                event,
                (reason if reason is not None else detail)[:500],
                refuse_late=refuse_late,
            )
        )
        if verdict.verdict == "won":
            METRICS.results.labels(outcome=ending.outcome).inc()
            assert verdict.result is not None
            await self.finish_messages(
                rec, verdict.messages, verdict.result, actor.id if actor else None, reason=reason
            )
        return verdict

    async def _result_prefix(
        self, rec: AskRecord, ending: results.Ending, *, actor: SlackUser | None, where: PostedMessage | None
    ) -> str:
        slack_ref = None
        if where is not None:
            slack_ref = {
                "channel": where.channel,
                "ts": where.ts,
                "permalink": where.permalink or await self.slack.permalink(where.channel, where.ts),
            }
        return results.result_prefix(
            ask_id=rec.ask_id,
            format=rec.format,
            ending=ending,
            responder={"id": actor.id, "name": actor.display} if actor is not None else None,
            slack=slack_ref,
            created_at=iso_ms(rec.created_ms),
        )

    async def finish_messages(
        self,
        rec: AskRecord,
        messages: Sequence[PostedMessage],
        result: dict[str, Any],
        by: str | None,
        *,
        reason: str | None = None,
    ) -> None:
        """Turn every message of an ended ask into its ended form (no buttons left), then mark it done."""
        bind_ask_id(rec.ask_id)
        if reason is None and result.get("outcome") == "cancelled" and by is None:
            reason = ""
        ended = render.render_ended_message(
            rec,
            outcome=str(result.get("outcome")),
            responder_id=by,
            resolved_ms=_iso_to_ms(result.get("resolved_at")),
            summary=summary_lines(rec, result),
            reason=reason,
        )
        ok = 0
        for message in messages:
            try:
                await self.slack.update(message.channel, message.ts, text=ended.text, blocks=ended.blocks)
                ok += 1
            except SlackPermanentError as exc:
                # A deleted message or archived channel cannot carry a live button: that is done too.
                log.info("could not update %s/%s: %s", message.channel, message.ts, exc.code)
                ok += 1
            except SlackError as exc:
                log.warning(
                    "could not update %s/%s yet: %s (the sweeper retries)", message.channel, message.ts, exc
                )
        if ok == len(messages):
            await self.store.finalize(rec.tag, rec.ask_id, len(messages))

    # ------------------------------------------------------------------ human actions

    async def may_answer(self, rec: AskRecord, user_id: str) -> bool:
        """Server-side who-may-answer (protocol section 7); fails closed when Slack cannot tell."""
        who = rec.responders
        if who is None or (not who.users and not who.usergroups):
            return True
        if user_id in who.users:
            return True
        for group in who.usergroups:
            try:
                if user_id in await self.slack.usergroup_members(group):
                    return True
            except SlackError as exc:
                log.warning("cannot read user group %s: %s; refusing %s", group, exc, user_id)
        return False

    async def _load_for_action(self, ref: AskRef | None, user: SlackUser) -> LoadedAsk | Refusal:
        if ref is None:
            return Refusal("unknown", render.render_refusal("ended"))
        bind_ask_id(ref.ask_id)  # the rest of this Slack request's task is about this ask
        loaded = await self.store.load(ref.tag, ref.ask_id)
        if loaded is None:
            return Refusal("unknown", render.render_refusal("ended"))
        if loaded.state == "ended":
            await self.store.audit(ref.tag, ref.ask_id, "refused_ended", by=user.id)
            return Refusal("ended", render.render_refusal("ended"), loaded if loaded.result else None)
        if not await self.may_answer(loaded.record, user.id):
            METRICS.refusals.labels(kind="not_allowed").inc()
            await self.store.audit(ref.tag, ref.ask_id, "refused_not_allowed", by=user.id)
            return Refusal("not_allowed", render.render_refusal("not_allowed"))
        return loaded

    async def tell(self, channel: str | None, user: str, text: str) -> None:
        if channel is None:
            return
        try:
            await self.slack.ephemeral(channel, user, text)
        except SlackError as exc:
            log.info("could not tell %s privately: %s", user, exc)

    async def _actionable(self, action: BlockAction) -> LoadedAsk | None:
        """The ask a button belongs to, or None after telling the clicker privately why not.

        A click on an ended ask also heals that message: it may be a stray the bot never recorded
        (a crash between post and record), or an update that has not landed yet."""
        loaded = await self._load_for_action(action.ref, action.user)
        if not isinstance(loaded, Refusal):
            return loaded
        await self.tell(action.channel, action.user.id, loaded.text)
        if loaded.ended is not None and action.channel and action.message_ts:
            ended = loaded.ended
            assert ended.result is not None
            clicked = PostedMessage(channel=action.channel, ts=action.message_ts)
            known = {(m.channel, m.ts) for m in ended.messages}
            stray = [clicked] if (clicked.channel, clicked.ts) not in known else []
            await self.finish_messages(ended.record, [*ended.messages, *stray], ended.result, ended.by)
        return None

    def _acted_on(self, loaded: LoadedAsk, channel: str | None, ts: str | None) -> PostedMessage | None:
        for message in loaded.messages:
            if message.channel == channel and message.ts == ts:
                return message
        return PostedMessage(channel=channel, ts=ts) if channel and ts else None

    async def _answer(
        self,
        loaded: LoadedAsk,
        ending: results.Ending,
        user: SlackUser,
        *,
        channel: str | None,
        ts: str | None,
        event: str,
    ) -> Refusal | None:
        verdict = await self.end(
            loaded.record,
            ending,
            actor=user,
            event=event,
            detail="",
            messages=loaded.messages,
            acted_on=self._acted_on(loaded, channel, ts),
            refuse_late=True,
        )
        if verdict.verdict == "late":
            METRICS.refusals.labels(kind="late").inc()
            await self.time_out(loaded)
            return Refusal("late", render.render_refusal("late"))
        if verdict.verdict in ("ended", "missing"):
            return Refusal("ended", render.render_refusal("ended"))
        return None

    async def time_out(self, loaded: LoadedAsk) -> None:
        await self.end(
            loaded.record,
            results.timed_out(loaded.record),
            actor=None,
            event="timeout",
            detail="deadline passed",
            messages=loaded.messages,
        )

    async def on_choose(self, action: BlockAction) -> None:
        loaded = await self._actionable(action)
        if loaded is None:
            return
        rec = loaded.record
        option = action.option
        if rec.request is None or option is None or not 0 <= option < len(rec.request.questions[0].options):
            await self.tell(action.channel, action.user.id, render.render_refusal("ended"))
            return
        question = rec.request.questions[0]
        answers = [QuestionAnswer(id=question.id, status="answered", selected=[option])]
        refusal = await self._answer(
            loaded,
            results.answered(rec, answers),
            action.user,
            channel=action.channel,
            ts=action.message_ts,
            event="answered",
        )
        if refusal is not None:
            await self.tell(action.channel, action.user.id, refusal.text)

    async def on_decline(self, action: BlockAction) -> None:
        loaded = await self._actionable(action)
        if loaded is None:
            return
        ending = results.ended_without_answer(loaded.record, "cancelled")
        refusal = await self._answer(
            loaded, ending, action.user, channel=action.channel, ts=action.message_ts, event="declined"
        )
        if refusal is not None:
            await self.tell(action.channel, action.user.id, refusal.text)

    async def on_open(self, action: BlockAction, *, other: bool = False) -> None:
        """Open the full form (or the one-question "Other..." form) in a modal."""
        loaded = await self._actionable(action)
        if loaded is None:
            return
        if action.trigger_id is None or action.ref is None:
            return
        ref = AskRef(tag=action.ref.tag, ask_id=action.ref.ask_id)
        if other:
            meta = FormMeta(ref=ref, channel=action.channel, ts=action.message_ts, question=0)
            view = render.render_other_modal(loaded.record, 0, meta)
        else:
            meta = FormMeta(ref=ref, channel=action.channel, ts=action.message_ts)
            view = render.render_form_modal(loaded.record, meta)
        try:
            await self.slack.open_view(action.trigger_id, view)
        except SlackError as exc:
            log.warning("could not open the form for %s: %s", ref.ask_id, exc)
            await self.tell(
                action.channel, action.user.id, "Slack did not open the form in time. Please click again."
            )

    async def on_submit(
        self, sub: ViewSubmission
    ) -> tuple[dict[str, Any] | None, Callable[[], Awaitable[None]] | None]:
        """A modal was submitted. Returns the ack body (``response_action``, or None for a plain ack)
        and the work to run after the ack.

        Validation errors go back at once, next to the fields; an ask that ended or a person who may
        not answer gets the modal replaced by a short explanation. The answer itself is resolved
        after the ack (by the caller), so Slack's 3-second limit is never at risk.
        """
        meta = sub.meta
        if meta is None:
            return _notice_view("This form is no longer valid."), None
        loaded = await self._load_for_action(meta.ref, sub.user)
        if isinstance(loaded, Refusal):
            return _notice_view(loaded.text), None
        if meta.question is not None:
            parsed_other = read_other_text(loaded.record, meta.question, sub.values)
            if isinstance(parsed_other, FormErrors):
                return {"response_action": "errors", "errors": parsed_other.errors}, None
            ending = results.answered(loaded.record, [parsed_other])
        else:
            parsed = read_form(loaded.record, sub.values)
            if isinstance(parsed, FormErrors):
                return {"response_action": "errors", "errors": parsed.errors}, None
            ending = _form_ending(loaded.record, parsed)

        async def resolve() -> None:
            refusal = await self._answer(
                loaded, ending, sub.user, channel=meta.channel, ts=meta.ts, event="answered"
            )
            if refusal is not None:
                await self.tell(meta.channel, sub.user.id, refusal.text)

        return None, resolve

    # ------------------------------------------------------------------ operators and events

    async def dismiss(self, ask_id: str, *, by: SlackUser | None, detail: str) -> ResolveVerdict | None:
        loaded = await self.store.find(ask_id)
        if loaded is None:
            return None
        return await self.end(
            loaded.record,
            results.ended_without_answer(loaded.record, "dismissed"),
            actor=by,
            event="dismissed",
            detail=detail,
            messages=loaded.messages,
        )

    async def dismiss_message(self, channel: str, ts: str, ref: AskRef | None, *, detail: str) -> None:
        """A message carrying an ask was deleted, or its conversation archived."""
        if ref is None:
            return
        loaded = await self.store.load(ref.tag, ref.ask_id)
        if loaded is None or loaded.state == "ended":
            return
        gone = [m for m in loaded.messages if m.channel == channel and (not ts or m.ts == ts)]
        if not gone:
            return
        await self.end(
            loaded.record,
            results.ended_without_answer(loaded.record, "dismissed"),
            actor=None,
            event="dismissed",
            detail=detail,
            messages=[m for m in loaded.messages if m not in gone],  # the gone ones cannot be updated
        )

    async def dismiss_channel(self, channel: str, *, detail: str) -> None:
        """A conversation was archived: every pending ask whose message lived there is dismissed."""
        for ask_id, tag in await self.store.asks_in_channel(channel):
            await self.dismiss_message(channel, "", AskRef(tag=tag, ask_id=ask_id), detail=detail)
            await self.store.untrack_channel(channel, ask_id, tag)

    # ------------------------------------------------------------------ timers

    def _next_timer(self, rec: AskRecord, *, step: int, reminders: int) -> int | None:
        candidates: list[int] = []
        if rec.deadline_ms:
            candidates.append(rec.deadline_ms)
        if step < len(rec.escalate):
            candidates.append(rec.created_ms + rec.escalate[step].after_ms)
        if rec.remind_every_ms and reminders < rec.max_reminders:
            candidates.append(rec.created_ms + rec.remind_every_ms * (reminders + 1))
        return min(candidates) if candidates else None

    async def _schedule_next(self, rec: AskRecord, *, step: int, reminders: int) -> None:
        at = self._next_timer(rec, step=step, reminders=reminders)
        if at is None:
            await self.store.unschedule(rec.ask_id, rec.tag)
        else:
            await self.store.schedule(rec.ask_id, rec.tag, at)

    async def on_due_many(
        self, due: Sequence[tuple[str, str]], now_ms: int, *, concurrency: int = 32
    ) -> None:
        """Timers fired for ``due`` ``(ask_id, tag)`` pairs. Timeouts, the bulk of the work, are
        loaded, resolved and finalized a batch at a time (three round trips for the batch); the rest
        (messages to finish, escalation, reminders) is handled one ask at a time."""
        loaded_all = await self.store.load_many(due)
        gone = [pair for pair, loaded in zip(due, loaded_all, strict=True) if loaded is None]
        await self.store.unschedule_many(gone)
        expired = [
            loaded
            for loaded in loaded_all
            if loaded is not None
            and loaded.state == "posted"
            and loaded.record.deadline_ms
            and now_ms >= loaded.record.deadline_ms
        ]
        rest = [loaded for loaded in loaded_all if loaded is not None and loaded not in expired]
        slots = asyncio.Semaphore(concurrency)
        await asyncio.gather(
            self._time_out_many(expired, slots),
            *(self._bounded(slots, self._on_due_loaded(loaded, now_ms)) for loaded in rest),
        )

    async def _time_out_many(self, expired: Sequence[LoadedAsk], slots: asyncio.Semaphore) -> None:
        if not expired:
            return

        async def prepare(loaded: LoadedAsk) -> Resolution:
            async with slots:
                rec = loaded.record
                bind_ask_id(rec.ask_id)
                ending = results.timed_out(rec)
                where = loaded.messages[-1] if loaded.messages else None
                prefix = await self._result_prefix(rec, ending, actor=None, where=where)
                return Resolution(rec, ending.outcome, prefix, None, "timeout", "deadline passed")

        resolutions = await asyncio.gather(*(prepare(loaded) for loaded in expired))
        verdicts = await self.store.resolve_many(resolutions)
        quiet: list[tuple[str, str, int]] = []
        noisy: list[Awaitable[None]] = []
        for resolution, verdict in zip(resolutions, verdicts, strict=True):
            if verdict.verdict != "won" or verdict.result is None:
                continue
            METRICS.timeouts.inc()
            METRICS.results.labels(outcome=resolution.outcome).inc()
            rec = resolution.record
            if verdict.messages:
                noisy.append(
                    self._bounded(slots, self.finish_messages(rec, verdict.messages, verdict.result, None))
                )
            else:
                quiet.append((rec.ask_id, rec.tag, 0))
        await asyncio.gather(self.store.finalize_many(quiet), *noisy)

    @staticmethod
    async def _bounded(slots: asyncio.Semaphore, work: Awaitable[None]) -> None:
        async with slots:
            await work

    async def _on_due_loaded(self, loaded: LoadedAsk, now_ms: int) -> None:
        """A timer fired for an ask that is not timing out: finish an ended ask's messages (finalize
        removes the timer), wait for intake, escalate or remind."""
        ask_id, tag = loaded.record.ask_id, loaded.record.tag
        bind_ask_id(ask_id)
        rec = loaded.record
        if loaded.state == "ended":
            if not loaded.finalized and loaded.result is not None:
                await self.finish_messages(rec, loaded.messages, loaded.result, loaded.by)
            else:
                await self.store.unschedule(ask_id, tag)
            return
        if loaded.state == "accepted":
            # Still being delivered by intake (or its replica died: reclaim handles that). Look later.
            await self.store.schedule(ask_id, tag, now_ms + 5_000)
            return
        step, reminders = loaded.step, loaded.reminders
        if step < len(rec.escalate) and now_ms >= rec.created_ms + rec.escalate[step].after_ms:
            await self._escalate(loaded, step, rec.escalate[step], now_ms)
            step += 1
        elif (
            rec.remind_every_ms
            and reminders < rec.max_reminders
            and (now_ms >= rec.created_ms + rec.remind_every_ms * (reminders + 1))
        ):
            await self._remind(loaded, reminders, now_ms)
            reminders += 1
        await self._schedule_next(rec, step=step, reminders=reminders)

    async def _escalate(self, loaded: LoadedAsk, step: int, how: EscalationStep, now_ms: int) -> None:
        rec = loaded.record
        where = _place(how)
        try:
            target = await self.slack.target_for(channel=how.channel, user=how.user)
            message = render.render_ask_message(rec, now_ms=now_ms, step=step + 1, mentions=how.mention)
            ts = await self.slack.post(target, text=message.text, blocks=message.blocks)
        except SlackError as exc:
            log.warning("escalation step %d of %s failed: %s", step + 1, rec.ask_id, exc)
            await self.store.advance(
                rec.tag,
                rec.ask_id,
                counter="step",
                expected=step,
                event="escalation_failed",
                actor=self.consumer,
                detail=f"{where}: {exc}",
            )
            return
        new = PostedMessage(channel=target.channel, ts=ts, step=step + 1)
        await self.store.track_channel(target.channel, rec.ask_id, rec.tag)
        outcome = await self.store.advance(
            rec.tag,
            rec.ask_id,
            counter="step",
            expected=step,
            messages=[new],
            event="escalated",
            actor=self.consumer,
            detail=where,
        )
        METRICS.escalations.inc()
        if outcome == "ended":
            fresh = await self.store.load(rec.tag, rec.ask_id)
            if fresh is not None and fresh.result is not None:
                await self.finish_messages(rec, [*fresh.messages, new], fresh.result, fresh.by)
            return
        # Earlier messages stay answerable and say every place the ask went since.
        for earlier in loaded.messages:
            places = [_place(s) for s in rec.escalate[earlier.step : step + 1]]
            redrawn = render.render_ask_message(rec, now_ms=now_ms, step=earlier.step, elsewhere=places)
            try:
                await self.slack.update(earlier.channel, earlier.ts, text=redrawn.text, blocks=redrawn.blocks)
            except SlackError as exc:
                log.info("could not note the escalation on %s/%s: %s", earlier.channel, earlier.ts, exc)

    async def _remind(self, loaded: LoadedAsk, reminders: int, now_ms: int) -> None:
        rec = loaded.record
        if not loaded.messages:
            return
        newest = loaded.messages[-1]
        reminder = render.render_reminder(rec, number=reminders + 1, now_ms=now_ms)
        try:
            await self.slack.reply(newest.channel, newest.ts, text=reminder.text, blocks=reminder.blocks)
        except SlackError as exc:
            log.info("reminder for %s failed: %s", rec.ask_id, exc)
        await self.store.advance(
            rec.tag,
            rec.ask_id,
            counter="reminders",
            expected=reminders,
            event="reminded",
            actor=self.consumer,
            detail=f"reminder {reminders + 1}",
        )


def _place(step: EscalationStep) -> str:
    return f"#{step.channel}" if step.channel else f"@{step.user}"


def _form_ending(rec: AskRecord, parsed: FormAnswers) -> results.Ending:
    if parsed.rich is not None:
        return results.answered_rich(rec, parsed.rich)
    return results.answered(rec, parsed.answers)


def _notice_view(text: str) -> dict[str, Any]:
    return {
        "response_action": "update",
        "view": {
            "type": "modal",
            "title": {"type": "plain_text", "text": "slack-ask"},
            "close": {"type": "plain_text", "text": "Close"},
            "blocks": [{"type": "section", "text": {"type": "plain_text", "text": text}}],
        },
    }
