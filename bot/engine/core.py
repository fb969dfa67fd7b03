"""The thin engine: wires the rooms together; what the intake loop, the sweeper and the Bolt app call."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from bot.config import Settings
from bot.engine.actions import Actions
from bot.engine.endings import Endings
from bot.engine.home import Home
from bot.engine.intake import Intake
from bot.engine.replies import Replies
from bot.engine.room import Shared
from bot.engine.timers import Timers
from bot.ids import AskRef
from bot.slack.gateway import SlackGateway
from bot.slack.interactions import BlockAction, SlackUser, ViewSubmission
from bot.storage.store import Entry, ResolveVerdict, Store

__all__ = ["Engine"]


class Engine:
    """One replica's engine. Each room holds one concern; this class only hands work to them."""

    def __init__(self, settings: Settings, store: Store, slack: SlackGateway, *, consumer: str) -> None:
        shared = Shared(settings=settings, store=store, slack=slack, consumer=consumer)
        self.settings = settings
        self.store = store
        self.slack = slack
        self.consumer = consumer
        self.endings = Endings(shared)
        self.timers = Timers(shared, endings=self.endings)
        self.actions = Actions(shared, endings=self.endings, timers=self.timers)
        self.replies = Replies(shared, actions=self.actions)
        self.home = Home(shared)
        self.actions.acts.notice = self.home.notice  # a Home act has no conversation to be told in
        self.intake = Intake(
            shared, endings=self.endings, timers=self.timers, actions=self.actions, home=self.home
        )
        self.lease_ms = self.intake.lease_ms

    # ------------------------------------------------------------------ intake

    async def handle_entry(self, entry: Entry) -> None:
        """Handle one intake entry; never raises for bad input (it ends up on a queue instead)."""
        await self.intake.handle_entry(entry)

    # ------------------------------------------------------------------ human actions

    async def on_choose(self, action: BlockAction) -> None:
        await self.actions.on_choose(action)

    async def on_decline(self, action: BlockAction) -> None:
        await self.actions.on_decline(action)

    async def on_open(self, action: BlockAction, *, other: bool = False) -> None:
        await self.actions.on_open(action, other=other)

    async def on_submit(
        self, sub: ViewSubmission
    ) -> tuple[dict[str, Any] | None, Callable[[], Awaitable[None]] | None]:
        return await self.actions.on_submit(sub)

    async def on_reply(self, event: dict[str, Any]) -> None:
        """A person's message: an answer typed in an ask's thread or DM (bot.engine.replies)."""
        await self.replies.on_message(event)

    async def on_reply_confirm(self, action: BlockAction, value: str | None) -> None:
        await self.replies.on_confirm(action, value)

    async def on_reply_change(self, action: BlockAction, value: str | None) -> None:
        await self.replies.on_change(action, value)

    # ------------------------------------------------------------------ the Home tab

    async def on_home_opened(self, user: str) -> None:
        await self.home.opened(user)

    async def on_home_page(self, action: BlockAction) -> None:
        await self.home.on_page(action)

    # ------------------------------------------------------------------ operators and events

    async def dismiss(self, ask_id: str, *, by: SlackUser | None, detail: str) -> ResolveVerdict | None:
        return await self.actions.dismiss(ask_id, by=by, detail=detail)

    async def dismiss_message(self, channel: str, ts: str, ref: AskRef | None, *, detail: str) -> None:
        await self.actions.dismiss_message(channel, ts, ref, detail=detail)

    async def learn_message(
        self, channel: str, ts: str, ref: AskRef, *, bot_id: str | None, app_id: str | None
    ) -> None:
        await self.actions.learn_message(channel, ts, ref, bot_id=bot_id, app_id=app_id)

    async def dismiss_channel(self, channel: str, *, detail: str) -> None:
        await self.actions.dismiss_channel(channel, detail=detail)

    # ------------------------------------------------------------------ timers

    async def on_due_many(
        self, due: Sequence[tuple[str, str]], now_ms: int, *, concurrency: int = 32
    ) -> None:
        await self.timers.on_due_many(due, now_ms, concurrency=concurrency)
