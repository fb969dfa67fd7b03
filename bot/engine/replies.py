"""Answers typed in an ask's thread, or in the DM of a DM-routed ask (protocol section 14, ``via: thread``).

The reading is pure (:mod:`bot.slack.replies`); this room finds the ask a reply is about, and applies
an exact reading through the same atomic decision as a click (``Actions._answer`` / ``_vote``: who may
answer, late answers refused, an ended ask told). A reading that needs confirmation is shown privately
with Confirm / Change; only Confirm applies it, after checking again that the ask is pending, that the
person may answer and that the reading still fits the ask.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from bot import results
from bot.engine.actions import LEARN_AFTER_S, Actions
from bot.engine.acts import Act
from bot.engine.room import Refusal, Room, Shared
from bot.errors import SlackError
from bot.ids import AskRef
from bot.render.replies import render_reading, render_recorded, render_unreadable
from bot.slack.interactions import BlockAction, SlackUser
from bot.slack.replies import Pending, Words, read_reply, still_fits
from bot.storage.store import LoadedAsk

__all__ = ["Replies"]

log = logging.getLogger(__name__)

SEVERAL_PENDING = (
    "Several questions are waiting here, so this message was not taken as an answer: "
    "use the buttons of the one you mean."
)
NO_LONGER_FITS = "This reading no longer fits the question, so nothing was recorded. Please answer again."


class Replies(Room):
    def __init__(self, shared: Shared, *, actions: Actions) -> None:
        super().__init__(shared)
        self.actions = actions
        self.words = Words.of(_split(self.settings.approve_words), _split(self.settings.decline_words))

    async def on_message(self, event: Mapping[str, Any]) -> None:
        """A person's plain message (no subtype, not from a bot): an answer attempt when it is a reply
        in the thread of a pending ask's message, or a DM with exactly one ask pending there."""
        user, channel, ts = (str(event.get(k) or "") for k in ("user", "channel", "ts"))
        thread_ts = str(event.get("thread_ts") or "")
        text = event.get("text")
        if not user or not channel or not ts or not isinstance(text, str):
            return
        if user == await self.slack.bot_user_id():
            return
        in_thread = bool(thread_ts) and thread_ts != ts
        if not in_thread and event.get("channel_type") != "im":
            return  # a plain channel message is never an answer
        found = await self._find(channel, thread_ts if in_thread else None)
        if found is None:
            # About no pending ask that Redis lists (yet): a post is in Slack, and can be answered, a
            # moment before the reply to chat.postMessage reaches the replica that records it: under
            # one of the bot's messages, in the thread a thread-routed ask was asked in, in the DM of
            # a DM-routed one. A second look once a recording would have landed; a message about no
            # ask costs one more look, never an answer lost.
            await asyncio.sleep(LEARN_AFTER_S)
            found = await self._find(channel, thread_ts if in_thread else None)
        if found is None:
            return
        if isinstance(found, str):
            await self._tell(channel, user, found, thread_ts if in_thread else None)
            return
        loaded, message_ts = found
        rec = loaded.record
        if not rec.thread_answers:
            return
        where = thread_ts if in_thread else None
        if rec.request is None:
            await self._tell(channel, user, "This ask is a form: answer it with its Answer… button.", where)
            return
        person = SlackUser(id=user, name=await self.slack.user_name(user))
        # The same act as a click (bot.engine.acts): read with a bound, told privately when Redis
        # fails, and never counted after the person was told it did not.
        act = Act(person, AskRef(tag=rec.tag, ask_id=rec.ask_id), channel, kind="reply", thread_ts=where)
        await self.actions.acts.run(act, self._read(act, text, message_ts, where))

    async def _read(self, act: Act, text: str, message_ts: str, where: str | None) -> None:
        checked = await self.actions._load_for_action(act)
        if isinstance(checked, Refusal):
            await self.actions.acts.refuse(act, checked)
            return
        rec = checked.record
        assert rec.request is not None and act.channel is not None
        reading = read_reply(text, rec.request.questions, words=self.words, approval=rec.approval is not None)
        pending = Pending(
            rec.tag,
            rec.ask_id,
            act.channel,
            message_ts,
            answers=reading.answers,
            declined=reading.declined,
            reason=reading.reason,
        )
        if reading.kind == "exact":
            await self._apply(checked, pending, act, reply_in=where or message_ts)
        elif reading.kind == "confirm":
            shown = render_reading(rec.request.questions, reading, pending)
            await self._tell(act.channel, act.user.id, shown.text, where, blocks=shown.blocks)
        else:
            await self._tell(act.channel, act.user.id, render_unreadable(reading), where)

    async def _find(self, channel: str, thread_ts: str | None) -> tuple[LoadedAsk, str] | str | None:
        """The pending ask a reply is about, with the ts of its message there; a sentence to tell the
        person when a DM has several; None when the message is about no ask."""
        tracked = await self.store.asks_in_channel(channel)
        loaded = [a for a in await self.store.load_many(tracked) if a is not None]
        if thread_ts is not None:
            for ask in loaded:
                if any(m.channel == channel and m.ts == thread_ts for m in ask.messages):
                    return ask, thread_ts
            # A thread-routed ask is itself a reply in the thread it was asked in: a later reply there
            # is about it, when it is the only one pending in that thread.
            inside = [
                (ask, m.ts)
                for ask in loaded
                if ask.state != "ended"
                and ask.record.route is not None
                and ask.record.route.thread_ts == thread_ts
                for m in ask.messages
                if m.channel == channel and m.step == 0
            ]
            if len({ask.record.ask_id for ask, _ in inside}) > 1:
                return SEVERAL_PENDING
            return inside[0] if inside else None
        pending = [
            (ask, m.ts)
            for ask in loaded
            if ask.state != "ended"  # the caller checked that this is a DM: its asks were routed to it
            for m in ask.messages
            if m.channel == channel
        ]
        asks = {ask.record.ask_id for ask, _ in pending}
        if len(asks) > 1:
            return SEVERAL_PENDING
        return pending[-1] if pending else None

    async def _apply(self, loaded: LoadedAsk, pending: Pending, act: Act, *, reply_in: str) -> None:
        """Apply a reading through the click's decision (a refusal is told to the person), then say
        so in the thread."""
        rec = loaded.record
        assert rec.request is not None
        channel = pending.channel
        if act.response_url is None:
            act.thread_ts = reply_in
        if rec.approval is not None and not pending.declined:
            await self.actions._vote(
                loaded, act, pending.answers[0].selected[0], channel=channel, ts=pending.ts, via="thread"
            )
        else:
            ending = (
                results.declined(rec, pending.reason)
                if pending.declined
                else results.answered(rec, list(pending.answers))
            )
            await self.actions._answer(
                loaded,
                ending,
                act,
                channel=channel,
                ts=pending.ts,
                event="declined" if pending.declined else "answered",
                via="thread",
            )
        if not act.recorded:
            return
        said = render_recorded(
            rec.request.questions,
            pending.answers,
            declined=pending.declined,
            reason=pending.reason,
            by=act.user.display,
            vote=rec.approval is not None and not pending.declined,
        )
        try:
            await self.slack.reply(channel, reply_in, text=said, blocks=_blocks(said), priority="now")
        except SlackError as exc:
            log.info("could not say in %s/%s that the answer was recorded: %s", channel, reply_in, exc)

    async def on_confirm(self, action: BlockAction, value: str | None) -> None:
        """Confirm on a private reading: applied only if the ask is still pending, the person may still
        answer, and the reading still fits the ask."""
        pending = Pending.decode(value or "")
        if pending is None:
            return
        ref = AskRef(tag=pending.tag, ask_id=pending.ask_id)
        act = Act(action.user, ref, pending.channel, response_url=action.response_url)
        await self.actions.acts.run(act, self._confirm(act, pending))

    async def _confirm(self, act: Act, pending: Pending) -> None:
        loaded = await self.actions._load_for_action(act)
        if isinstance(loaded, Refusal):
            await self.actions.acts.refuse(act, loaded)
            return
        rec = loaded.record
        if rec.request is None or not (
            pending.declined
            or still_fits(pending.answers, rec.request.questions, approval=rec.approval is not None)
        ):
            await self.actions.acts.tell(act, NO_LONGER_FITS)
            return
        await self._apply(loaded, pending, act, reply_in=_thread_of(loaded, pending))

    async def on_change(self, action: BlockAction, value: str | None) -> None:
        """Change on a private reading: the ask's form opens, as from its Answer… button."""
        pending = Pending.decode(value or "")
        if pending is None:
            return
        ref = AskRef(tag=pending.tag, ask_id=pending.ask_id)
        # The form answers on the ask's message, never on the private reply the button was on.
        await self.actions.on_open(replace(action, ref=ref, channel=pending.channel, message_ts=pending.ts))

    async def _tell(
        self,
        channel: str,
        user: str,
        text: str,
        thread_ts: str | None,
        *,
        blocks: list[dict[str, Any]] | None = None,
    ) -> None:
        try:
            await self.slack.ephemeral(channel, user, text, blocks=blocks, thread_ts=thread_ts)
        except SlackError as exc:
            log.info("could not tell %s privately: %s", user, exc)


def _thread_of(loaded: LoadedAsk, pending: Pending) -> str:
    """The thread of the ask's message a reading was about: its own, or for the first post of a
    thread-routed ask, the thread it was posted in."""
    route = loaded.record.route
    first = next((m for m in loaded.messages if m.step == 0), None)
    if (
        route is not None
        and route.thread_ts
        and first is not None
        and (first.channel, first.ts)
        == (
            pending.channel,
            pending.ts,
        )
    ):
        return route.thread_ts
    return pending.ts


def _blocks(text: str) -> list[dict[str, Any]]:
    block: dict[str, Any] = {"type": "section", "text": {"type": "mrkdwn", "text": text, "verbatim": True}}
    return [block]


def _split(words: str) -> list[str]:
    return [w for w in (part.strip() for part in words.split(",")) if w]
