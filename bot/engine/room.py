"""What every room of the engine shares: settings, the store, the Slack gateway and who this replica is."""

from __future__ import annotations

import time
from dataclasses import dataclass

from bot.config import Settings
from bot.slack.gateway import SlackGateway
from bot.storage.store import LoadedAsk, Store

__all__ = ["LEASE_FACTOR", "LEASE_MARGIN", "Refusal", "Room", "Shared", "lease_deadline"]

LEASE_FACTOR = 2  # an intake lease outlives the delivery window, so a slow Slack never causes a double post
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


@dataclass(frozen=True, slots=True)
class Shared:
    """The engine's collaborators, handed to every room."""

    settings: Settings
    store: Store
    slack: SlackGateway
    consumer: str


class Room:
    """One room of the engine; reads its collaborators from :class:`Shared`."""

    def __init__(self, shared: Shared) -> None:
        self.settings = shared.settings
        self.store = shared.store
        self.slack = shared.slack
        self.consumer = shared.consumer
