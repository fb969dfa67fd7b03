"""Decline as a person does it: the Decline button opens a small modal, its Decline button ends the ask."""

from __future__ import annotations

from bot.playground.fakeslack import FakeSlack

__all__ = ["decline"]


async def decline(fake: FakeSlack, user: str, channel: str, ts: str, *, reason: str | None = None) -> None:
    """Press Decline on message ``ts``, then Decline in the modal (with ``reason`` typed, if given)."""
    before = {v.id for v in fake.open_views(user)}
    await fake.click(user, channel, ts, "slack_ask:decline")
    views = await fake.wait_for(
        lambda: [v for v in fake.open_views(user) if v.id not in before] or None, what="the decline modal"
    )
    await fake.fill_and_submit(user, views[0].id, {"reason": reason} if reason is not None else {})
