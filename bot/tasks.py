"""Ending helper tasks (a lease renewal, a freeze watch, the reclaim loop) from the task that
started them, without losing a cancel of that task itself."""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["RECANCEL_S", "cancel_and_wait"]

RECANCEL_S = 0.5
"""How long a cancelled task is waited for before it is cancelled again (a cancel may be lost)."""


async def cancel_and_wait(task: asyncio.Task[Any]) -> None:
    """Cancel a helper task and wait for it to end. Unlike ``task.cancel()`` followed by ``await task``
    under ``suppress(CancelledError)``, a cancel of the caller itself that arrives meanwhile is not
    swallowed: it propagates (``asyncio.wait`` never raises the task's own outcome).

    Cancelled again every ``RECANCEL_S`` while it runs: on Python 3.11 ``asyncio.wait_for`` loses a
    cancel that lands just as its inner step finishes (CPython gh-86296), and redis-py sends every
    command through it, so a renewal loop cancelled there ran on, past its replica's stop and its
    Redis client's close (the connection it then opened was the tests' "unclosed Connection")."""
    task.cancel()
    while not (await asyncio.wait([task], timeout=RECANCEL_S))[0]:
        task.cancel()
    if not task.cancelled():
        task.exception()  # retrieved (a helper's failure was logged where it happened)
