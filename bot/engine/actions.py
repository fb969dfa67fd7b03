"""Human actions: who may answer, the buttons and forms people use, and dismissals from Slack events."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from bot import render, results
from bot.engine.acts import UNAVAILABLE, Act, Acts, chose
from bot.engine.endings import Endings
from bot.engine.room import Refusal, Room, Shared
from bot.engine.timers import Timers
from bot.engine.votes import Votes
from bot.errors import SlackError, failure
from bot.home import named_on, waits_for
from bot.ids import VIEW_DECLINE, AskRef, FormMeta
from bot.logs import bind_ask_id
from bot.metrics import METRICS
from bot.model import AskRecord, PostedMessage
from bot.slack.interactions import (
    BlockAction,
    FormAnswers,
    FormErrors,
    SlackUser,
    ViewSubmission,
    read_form,
    read_other_text,
    read_reason,
)
from bot.storage.store import LoadedAsk, ResolveVerdict
from contract import QuestionAnswer
from contract.envelopes import Via

__all__ = ["Actions"]

log = logging.getLogger(__name__)

LEARN_AFTER_S = 2.0
"""How long after Slack tells of one of the bot's messages the record is checked for it."""

LEARN_FOR_S = 60.0
"""How long a message event whose record Redis cannot take is retried (Slack sends it once)."""

ACK_BUDGET_S = 1.0
"""What a path that must answer Slack within 3 s (a form's ack, a trigger_id's life) may spend on
who-may-answer; past it, the check is made again after the ack, with retries."""


class Actions(Room):
    def __init__(self, shared: Shared, *, endings: Endings, timers: Timers) -> None:
        super().__init__(shared)
        self.endings = endings
        self.timers = timers
        self.acts = Acts(shared, endings=endings)
        self.votes = Votes(shared, endings=endings, timers=timers, acts=self.acts)

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

    async def may_answer_soon(self, rec: AskRecord, user_id: str) -> bool | None:
        """``may_answer`` within ``ACK_BUDGET_S``: cached membership, else one quick attempt per group.
        None when Slack could not tell in time; ``may_answer`` then decides after the ack."""
        who = rec.responders
        if who is None or (not who.users and not who.usergroups) or user_id in who.users:
            return True
        deadline = time.monotonic() + ACK_BUDGET_S
        unknown = False
        for group in who.usergroups:
            members = self.slack.cached_members(group)
            if members is None:
                try:
                    members = await self.slack.usergroup_members(
                        group, budget_s=max(deadline - time.monotonic(), 0.0)
                    )
                except SlackError as exc:
                    log.info("user group %s not read within the ack's budget (%s); checked later", group, exc)
                    unknown = True
                    continue
            if user_id in members:
                return True
        return None if unknown else False

    async def _load_for_action(self, act: Act, *, soon: bool = False) -> LoadedAsk | Refusal:
        """The ask an act is about, or why not (told by ``_refuse``). ``soon``: the caller must answer
        Slack within 3 s, so who-may-answer is decided only when it can be within ``ACK_BUDGET_S``
        (``may_answer_soon``); otherwise the caller checks ``may_answer`` again after its ack."""
        ref = act.ref
        if ref is None:
            return Refusal("unknown", render.render_refusal("ended"))
        bind_ask_id(ref.ask_id)  # the rest of this Slack request's task is about this ask
        loaded = await self.acts.look(act, ref)
        if loaded is None:
            return Refusal("unknown", render.render_refusal("ended"))
        if loaded.state == "ended":
            ended = loaded if loaded.result else None
            return Refusal("ended", render.render_refusal("ended"), ended, audit="refused_ended")
        allowed = await (
            self.may_answer_soon(loaded.record, act.user.id)
            if soon
            else self.may_answer(loaded.record, act.user.id)
        )
        if allowed is False or (allowed and act.home and not await act.before(self._named(loaded, act))):
            return self._not_allowed()
        return loaded

    async def _named(self, loaded: LoadedAsk, act: Act) -> bool:
        """An act from the Home tab (a click, or a form opened there) counts only for a person the ask
        waits for (docs/home.md): whoever is shown the row. A crafted ``block_actions`` naming an ask
        that is not on the person's tab is refused, as on a message someone may not answer."""
        rec, user = loaded.record, act.user.id
        indexed = await self.store.home_holds(user, rec.tag, rec.ask_id)
        groups = set(named_on(rec).groups)
        members = {g: self.slack.cached_members(g) for g in groups}
        return waits_for(rec, loaded.step, user, members.get, indexed=indexed)

    @staticmethod
    def _not_allowed() -> Refusal:
        METRICS.refusals.labels(kind="not_allowed").inc()
        return Refusal("not_allowed", render.render_refusal("not_allowed"), audit="refused_not_allowed")

    async def _refuse(
        self, act: Act, refusal: Refusal, *, channel: str | None = None, ts: str | None = None
    ) -> None:
        """Tell the person why their act changed nothing (``Acts.refuse``), then heal the message they
        acted on if the ask has ended: it may be a stray the bot never recorded (a crash between post
        and record), or an update that has not landed yet."""
        if refusal.ended is not None and act.ref is not None and self.store.min_replicas:
            # With SLACK_ASK_REDIS_MIN_REPLICAS the person is told and shown only an ending that
            # replicas hold: one the master alone has (its WAIT fell short) a failover can take back.
            again, _ = await act.before(self.store.look(act.ref.tag, act.ref.ask_id, confirm=True))
            if again is None or again.state != "ended" or again.result is None:
                refusal = Refusal("unrecorded", render.render_refusal("unrecorded"))
            else:
                refusal = replace(refusal, ended=again)
        mine = refusal.ended is not None and act.counted is not None and act.counted(refusal.ended)
        if mine:
            # The ask ended with this very act: the same click sent twice (a load balancer's retry)
            # or made again before its message was redrawn. It counted: not told otherwise.
            act.phase, act.recorded = "done", True
            await self.acts.tell(act, render.render_refusal("confirmed"))
        else:
            await self.acts.refuse(act, refusal)
        if refusal.ended is not None and channel and ts:
            ended = refusal.ended
            assert ended.result is not None
            clicked = PostedMessage(channel=channel, ts=ts)
            known = {(m.channel, m.ts) for m in ended.messages}
            stray = [clicked] if (clicked.channel, clicked.ts) not in known else []
            if stray:
                # Recorded first, so that it is redrawn until done even if this update fails.
                await self._learn(ended, clicked)
            await self.endings.finish_messages(
                ended.record, [*ended.messages, *stray], ended.result, ended.by, withdrawn=ended.withdrawn
            )

    async def _actionable(self, action: BlockAction, act: Act, *, soon: bool = False) -> LoadedAsk | None:
        """The ask a button belongs to, or None after telling the clicker privately why not."""
        loaded = await self._load_for_action(act, soon=soon)
        if not isinstance(loaded, Refusal):
            return loaded
        await self._refuse(act, loaded, channel=action.channel, ts=action.message_ts)
        return None

    async def learn_message(
        self, channel: str, ts: str, ref: AskRef, *, bot_id: str | None, app_id: str | None
    ) -> None:
        """Slack told of a message carrying an ask (a message event). Only this bot's own messages
        (its ``bot_id`` or ``app_id``, as ``auth.test`` gave them) are learned: another app's copy,
        once recorded, could be deleted to dismiss the ask. The replica that posted it records it
        within milliseconds; one still missing from the record ``LEARN_AFTER_S`` later was posted by a
        replica that died before recording it (the one duplicate a crash can make), in a channel or
        a thread. It is recorded now, so it is redrawn when the ask ends, or at once if the ask has
        ended; a copy the bot withdrew is never learned (posted.lua refuses it).

        Slack sends the event once: a Redis that does not answer (this replica cut off from it) is
        waited out, with backoff, for up to ``LEARN_FOR_S``."""
        if not await self.slack.is_own_message(bot_id=bot_id, app_id=app_id):
            log.info("message %s/%s carries ask %s, not from this bot: not learned", channel, ts, ref.ask_id)
            return
        await asyncio.sleep(LEARN_AFTER_S)
        if (channel, ts) in self.recorded:
            return  # posted and recorded by this replica (the event often comes first): the record has it
        give_up = time.monotonic() + LEARN_FOR_S
        backoff = 0.25
        while True:
            try:
                loaded = await self.store.load(ref.tag, ref.ask_id)
                if loaded is None or any(m.channel == channel and m.ts == ts for m in loaded.messages):
                    return
                message = PostedMessage(channel=channel, ts=ts)
                if not await self._learn(loaded, message):
                    return
                break
            except UNAVAILABLE as exc:
                if time.monotonic() + backoff > give_up:
                    raise
                log.info("cannot look for message %s/%s in its ask yet (%s)", channel, ts, failure(exc))
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
        if loaded.state == "ended" and loaded.result is not None:
            await self.endings.finish_messages(
                loaded.record,
                [*loaded.messages, message],
                loaded.result,
                loaded.by,
                withdrawn=loaded.withdrawn,
            )

    async def _learn(self, loaded: LoadedAsk, message: PostedMessage) -> bool:
        """A message of the ask the bot did not know (a post whose record a crash or a Redis blip
        lost): every message the bot learns of goes into the ask's record, so it is redrawn at the end.
        False when it is one the bot withdrew (``Room.withdraw``): never the ask's again."""
        rec = loaded.record
        state = await self.store.posted(
            rec.tag,
            rec.ask_id,
            [message],
            actor=self.consumer,
            event="learned",
            track_channel=True,
            stray=True,
        )
        return state != "withdrawn"

    async def _learn_acted_on(self, loaded: LoadedAsk, acted_on: PostedMessage | None) -> None:
        """Answered or voted on a message the record lacks: recorded before the ask is resolved or
        voted on, so the ending (which redraws the recorded messages) redraws this one too."""
        if acted_on is not None and acted_on not in loaded.messages:
            await self._learn(loaded, acted_on)

    def _acted_on(self, loaded: LoadedAsk, channel: str | None, ts: str | None) -> PostedMessage | None:
        for message in loaded.messages:
            if message.channel == channel and message.ts == ts:
                return message
        return PostedMessage(channel=channel, ts=ts) if channel and ts else None

    async def _answer(
        self,
        loaded: LoadedAsk,
        ending: results.Ending,
        act: Act,
        *,
        channel: str | None,
        ts: str | None,
        event: str,
        via: Via,
    ) -> None:
        """End the ask with a person's answer (or decline); a refusal is told to them. ``via``: where
        the act came from (protocol section 14)."""
        acted_on = self._acted_on(loaded, channel, ts)
        await act.before(self._learn_acted_on(loaded, acted_on))
        verdict = await self.endings.end(
            loaded.record,
            ending,
            actor=act.user,
            event=event,
            detail="",
            messages=loaded.messages,
            acted_on=acted_on,
            refuse_late=True,
            act=act,
            via=via,
        )
        if verdict.verdict == "won":
            return
        if verdict.verdict == "late":
            METRICS.refusals.labels(kind="late").inc()
            await self._refuse(act, Refusal("late", render.render_refusal("late")))
            await self.timers.time_out(loaded)
        elif verdict.verdict == "expired":
            await self._refuse(act, Refusal("unrecorded", render.render_refusal("unrecorded")))
        elif not await self.acts.counted_after_all(act):
            await self._refuse(act, Refusal("ended", render.render_refusal("ended")))

    async def on_choose(self, action: BlockAction) -> None:
        act = Act.of_click(action)
        await self.acts.run(act, self._choose(action, act))

    async def _choose(self, action: BlockAction, act: Act) -> None:
        if action.option is not None:
            act.counted = chose(act.user.id, action.option)  # an ended ask may show this click counted
        loaded = await self._actionable(action, act)
        if loaded is None:
            return
        rec = loaded.record
        option = action.option
        if rec.request is None or option is None or not 0 <= option < len(rec.request.questions[0].options):
            await self._refuse(act, Refusal("ended", render.render_refusal("ended")))
            return
        if rec.approval is not None:
            await self._vote(
                loaded, act, option, channel=action.channel, ts=action.message_ts, via=_via(action)
            )
            return
        question = rec.request.questions[0]
        answers = [QuestionAnswer(id=question.id, status="answered", selected=[option])]
        await self._answer(
            loaded,
            results.answered(rec, answers),
            act,
            channel=action.channel,
            ts=action.message_ts,
            event="answered",
            via=_via(action),
        )

    async def _vote(
        self,
        loaded: LoadedAsk,
        act: Act,
        option: int,
        *,
        channel: str | None,
        ts: str | None,
        via: Via,
    ) -> None:
        """An approval ask (protocol section 13): the act is a vote (bot.engine.votes), on a message
        recorded first if the record lacks it."""
        acted_on = self._acted_on(loaded, channel, ts)
        await act.before(self._learn_acted_on(loaded, acted_on))
        if acted_on is None and loaded.messages:
            acted_on = loaded.messages[-1]  # a vote from the Home tab: the result names the ask's message
        await self.votes.vote(loaded, act, option, acted_on=acted_on, via=via)

    async def on_decline(self, action: BlockAction) -> None:
        """Decline opens a small modal with an optional reason (protocol section 9); its Decline button
        ends the ask. Without a trigger (no modal can open) the click declines at once, without one."""
        act = Act.of_click(action, "open" if action.trigger_id is not None else "click")
        await self.acts.run(act, self._decline(action, act))

    async def _decline(self, action: BlockAction, act: Act) -> None:
        loaded = await self._actionable(action, act)
        if loaded is None:
            return
        if action.trigger_id is not None and action.ref is not None:
            ref = AskRef(tag=action.ref.tag, ask_id=action.ref.ask_id)
            meta = FormMeta(ref=ref, channel=action.channel, ts=action.message_ts, home=action.home)
            await self._open_view(act, action.trigger_id, render.render_decline_modal(loaded.record, meta))
            return
        ending = results.declined(loaded.record, None)
        await self._answer(
            loaded,
            ending,
            act,
            channel=action.channel,
            ts=action.message_ts,
            event="declined",
            via=_via(action),
        )

    async def on_open(self, action: BlockAction, *, other: bool = False) -> None:
        """Open the full form (or the one-question "Other..." form) in a modal."""
        act = Act.of_click(action, "open")
        await self.acts.run(act, self._open(action, act, other=other))

    async def _open(self, action: BlockAction, act: Act, *, other: bool) -> None:
        # The trigger_id lives 3 s: who-may-answer is settled by the submission if not by then.
        loaded = await self._actionable(action, act, soon=True)
        if loaded is None:
            return
        if action.trigger_id is None or action.ref is None:
            return
        ref = AskRef(tag=action.ref.tag, ask_id=action.ref.ask_id)
        if other:
            meta = FormMeta(
                ref=ref, channel=action.channel, ts=action.message_ts, question=0, home=action.home
            )
            view = render.render_other_modal(loaded.record, 0, meta)
        else:
            meta = FormMeta(ref=ref, channel=action.channel, ts=action.message_ts, home=action.home)
            view = render.render_form_modal(loaded.record, meta)
        await self._open_view(act, action.trigger_id, view)

    async def _open_view(self, act: Act, trigger_id: str, view: dict[str, Any]) -> None:
        act.phase = "done"  # nothing of an open is recorded
        try:
            await self.slack.open_view(trigger_id, view)
        except SlackError as exc:
            log.warning("could not open a form for %s: %s", act.name, exc)
            await self.acts.tell(act, "Slack did not open the form in time. Please click again.")

    async def on_submit(
        self, sub: ViewSubmission
    ) -> tuple[dict[str, Any] | None, Callable[[], Awaitable[None]] | None]:
        """A modal was submitted. Returns the ack body (``response_action``, or None for a plain ack)
        and the work to run after the ack.

        Validation errors go back at once, next to the fields; an ask that ended or a person who may
        not answer gets the modal replaced by a short explanation; a Redis that does not answer within
        ``READ_BUDGET_S`` gets an error beside the first field (the form stays as filled, nothing was
        recorded, submitting again retries). The answer itself is resolved after the ack (by the
        caller), so Slack's 3-second limit is never at risk.
        """
        meta = sub.meta
        if meta is None:
            return _notice_view("This form is no longer valid."), None
        act = Act(sub.user, meta.ref, meta.channel, kind="submission", home=meta.home)
        via: Via = "home" if meta.home else "form"
        # The ack must reach Slack within 3 s: a slow user-group read is finished after it.
        try:
            loaded = await self._load_for_action(act, soon=True)
        except UNAVAILABLE as exc:
            log.warning("%s was not recorded: Redis failed (%s); told so in the form", act.name, failure(exc))
            return _unreachable(sub), None
        if isinstance(loaded, Refusal):
            refusal = loaded
            act.phase = "done"  # told in the ack

            async def audit() -> None:
                if refusal.audit is not None and act.ref is not None:
                    await self.store.audit(act.ref.tag, act.ref.ask_id, refusal.audit, by=act.user.id)

            return _notice_view(refusal.text), lambda: self.acts.run(act, audit())
        event = "answered"
        vote: int | None = None
        if sub.callback_id == VIEW_DECLINE:
            ending = results.declined(loaded.record, read_reason(sub.values))
            event = "declined"
        elif meta.question is not None:
            parsed_other = read_other_text(loaded.record, meta.question, sub.values)
            if isinstance(parsed_other, FormErrors):
                return {"response_action": "errors", "errors": parsed_other.errors}, None
            ending = results.answered(loaded.record, [parsed_other])
        else:
            parsed = read_form(loaded.record, sub.values)
            if isinstance(parsed, FormErrors):
                return {"response_action": "errors", "errors": parsed.errors}, None
            ending = _form_ending(loaded.record, parsed)
            if loaded.record.approval is not None:
                # The full form of an approval ask (its text was cut in the message) casts a vote.
                selected = parsed.answers[0].selected if parsed.answers else []
                if len(selected) != 1:
                    return {
                        "response_action": "errors",
                        "errors": {"answer:0": render.render_refusal("no_option")},
                    }, None
                vote = selected[0]

        async def resolve() -> None:
            if not await self.may_answer(loaded.record, sub.user.id) or (
                act.home and not await act.before(self._named(loaded, act))
            ):
                # Decided again, with retries: the ack may have gone before Slack said who is in a group.
                await self._refuse(act, self._not_allowed())
                return
            if vote is not None:
                await self._vote(loaded, act, vote, channel=meta.channel, ts=meta.ts, via=via)
            else:
                await self._answer(
                    loaded, ending, act, channel=meta.channel, ts=meta.ts, event=event, via=via
                )

        return None, lambda: self.acts.run(act, resolve())

    async def dismiss(self, ask_id: str, *, by: SlackUser | None, detail: str) -> ResolveVerdict | None:
        loaded = await self.store.find(ask_id)
        if loaded is None:
            return None
        return await self.endings.end(
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
        # Slack sends a message's events while the reply to chat.postMessage may still be on its way,
        # so the delete of a message just posted can come before the poster records it: a second look
        # once a recording would have landed (as learn_message does). A message still unknown then is
        # a stray copy of a replica that died; the ask lives on in the message it recorded. A copy the
        # bot withdrew itself is marked so before its delete is sent, and is never the ask's message.
        for look in range(2 if ts else 1):
            if look:
                await asyncio.sleep(LEARN_AFTER_S)
            loaded = await self.store.load(ref.tag, ref.ask_id)
            if loaded is None or loaded.state == "ended" or (channel, ts) in loaded.withdrawn:
                return
            gone = [m for m in loaded.messages if m.channel == channel and (not ts or m.ts == ts)]
            if gone:
                break
        else:
            return
        await self.endings.end(
            loaded.record,
            results.ended_without_answer(loaded.record, "dismissed"),
            actor=None,
            event="dismissed",
            detail=detail,
            messages=[m for m in loaded.messages if m not in gone],  # the gone ones cannot be updated
        )

    async def dismiss_channel(self, channel: str, *, detail: str) -> None:
        """A conversation was archived: every pending ask whose message lived there is dismissed."""
        # A second look once a recording would have landed: a message posted just before the archive
        # may still be on its way into its ask's record (see dismiss_message).
        for look in range(2):
            if look:
                await asyncio.sleep(LEARN_AFTER_S)
            for ask_id, tag in await self.store.asks_in_channel(channel):
                await self.dismiss_message(channel, "", AskRef(tag=tag, ask_id=ask_id), detail=detail)
                await self.store.untrack_channel(channel, ask_id, tag)


def _via(action: BlockAction) -> Via:
    """Where a click came from (protocol section 14): an ask's message, or the person's Home tab."""
    return "home" if action.home else "button"


def _form_ending(rec: AskRecord, parsed: FormAnswers) -> results.Ending:
    if parsed.rich is not None:
        return results.answered_rich(rec, parsed.rich)
    return results.answered(rec, parsed.answers)


def _unreachable(sub: ViewSubmission) -> dict[str, Any]:
    """The ack of a submission the bot could not record (Redis away): an error beside the form's first
    field, so the form stays open as filled and the person can submit again; needs no Redis."""
    text = render.render_refusal("unrecorded")
    if sub.inputs:
        return {"response_action": "errors", "errors": {sub.inputs[0]: text}}
    return _notice_view(text)


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
