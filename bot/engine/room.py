"""What every room of the engine shares: settings, the store, the Slack gateway and who this replica is."""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from redis.exceptions import RedisError

from bot.config import Settings
from bot.errors import NotReplicatedError, SlackError
from bot.model import AskRecord, PostedMessage
from bot.slack.gateway import SlackGateway
from bot.storage.store import LoadedAsk, Store

__all__ = ["LEASE_MARGIN", "RecordedPosts", "Refusal", "Room", "Shared", "lease_deadline"]

log = logging.getLogger(__name__)

LEASE_MARGIN = 0.2
"""The share of a lease kept free at its end: Slack calls stop before it, so a call cut at the deadline
has landed (or not) before another replica may take the work over."""


def lease_deadline(lease_ms: int) -> float:
    """The ``time.monotonic()`` by which the Slack calls under a lease taken now must be done."""
    return time.monotonic() + lease_ms / 1000 * (1 - LEASE_MARGIN)


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a human action changed nothing; told privately to that human."""

    kind: str
    text: str
    ended: LoadedAsk | None = None
    """For ``ended``: the ask as loaded, so its messages can be healed without another read."""
    audit: str | None = None
    """The audit event to record once the person has been told (``refused_ended``, ...)."""


class RecordedPosts:
    """The messages this replica posted and recorded in their ask lately (the last ``keep``). Slack's
    event for each of them comes back to the bot; for these the record is known to hold the message,
    so learning it (a Redis look, ``Actions.learn_message``) is skipped."""

    def __init__(self, keep: int = 10_000) -> None:
        self.keep = keep
        self._seen: OrderedDict[tuple[str, str], None] = OrderedDict()

    def add(self, channel: str, ts: str) -> None:
        self._seen[(channel, ts)] = None
        while len(self._seen) > self.keep:
            self._seen.popitem(last=False)

    def __contains__(self, message: object) -> bool:
        return message in self._seen


@dataclass(frozen=True, slots=True)
class Shared:
    """The engine's collaborators, handed to every room."""

    settings: Settings
    store: Store
    slack: SlackGateway
    consumer: str
    recorded: RecordedPosts = field(default_factory=RecordedPosts)


class Room:
    """One room of the engine; reads its collaborators from :class:`Shared`."""

    def __init__(self, shared: Shared) -> None:
        self.settings = shared.settings
        self.store = shared.store
        self.slack = shared.slack
        self.consumer = shared.consumer
        self.recorded = shared.recorded

    async def withdraw(self, rec: AskRecord, message: PostedMessage, *, why: str) -> bool:
        """Take one of the bot's own copies of an ask out of Slack: marked withdrawn in the ask's record
        first (``Store.withdraw``), and only then deleted (``chat.delete``), so neither Slack's event
        for the delete nor a record or a learned stray arriving late ever takes it for the ask's.

        True once the mark is written (the copy is no longer the ask's, even if Slack then refuses
        the delete). False when the copy is all a posted or ended ask has (a takeover adopted it): it
        stays, as the ask's message. False when Redis did not take the mark: nothing is deleted, and
        the copy stays a message of the ask (recorded, it is redrawn at the end), since a copy
        deleted without its mark could be taken for a person's delete and dismiss the ask. A
        NotReplicatedError means the mark is on the master, which every replica reads: the copy is
        deleted."""
        try:
            marked = await self.store.withdraw(
                rec.tag, rec.ask_id, [message], actor=self.consumer, detail=why
            )
        except NotReplicatedError:
            marked = "ok"
        except RedisError as exc:
            log.warning(
                "could not mark %s/%s of %s withdrawn (%s): it is not deleted",
                message.channel,
                message.ts,
                rec.ask_id,
                exc,
            )
            return False
        if marked == "carries":
            # A takeover adopted this very copy (learned from Slack's event): it is the ask's message.
            log.info("%s/%s carries %s now: kept, not withdrawn", message.channel, message.ts, rec.ask_id)
            return False
        await self.delete_withdrawn(message)
        return True

    async def delete_withdrawn(self, message: PostedMessage) -> None:
        """``chat.delete`` of a copy already marked withdrawn (``withdraw``, or ``advance.lua``'s
        ``moved``). A copy Slack does not delete stays in Slack, outside the record, until the ask's
        messages are finished, which deletes every withdrawn copy again (``Endings.finish_messages``);
        meanwhile a click on it still answers the ask."""
        try:
            await self.slack.delete(message.channel, message.ts)
        except SlackError as exc:
            log.warning(
                "could not delete the withdrawn copy %s/%s: %s (deleted again when the ask ends)",
                message.channel,
                message.ts,
                exc,
            )
