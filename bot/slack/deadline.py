"""The deadline a Slack call is bounded by: the end of the lease covering it, fixed or renewed."""

from __future__ import annotations

import contextlib
from typing import Protocol

__all__ = ["Deadline", "MovingDeadline", "at"]


class MovingDeadline(Protocol):
    """The end of a lease that is renewed while the call is in flight (an intake delivery's,
    ``bot.engine.leases.HeldLease``): a slow answer keeps waiting for as long as the lease is renewed,
    and is cut as soon as it is not."""

    @property
    def at(self) -> float:
        """The ``time.monotonic()`` the lease ends at now."""
        ...

    def bound(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Runs its block until ``at`` (which may move meanwhile), then raises TimeoutError."""
        ...


Deadline = float | MovingDeadline | None
"""When the calls covered by a lease must be done: fixed, moving with renewals, or none."""


def at(deadline: Deadline) -> float | None:
    return deadline if deadline is None or isinstance(deadline, float | int) else deadline.at
