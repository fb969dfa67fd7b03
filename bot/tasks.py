"""Ending helper tasks (a lease renewal, a freeze watch, the reclaim loop) from the task that
started them, without losing a cancel of that task itself."""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["cancel_and_wait"]


async def cancel_and_wait(task: asyncio.Task[Any]) -> None:
    """Cancel a helper task and wait for it to end. Unlike ``task.cancel()`` followed by ``await task``
    under ``suppress(CancelledError)``, a cancel of the caller itself that arrives meanwhile is not
    swallowed: it propagates (``asyncio.wait`` never raises the task's own outcome)."""
    task.cancel()
    await asyncio.wait([task])
    if not task.cancelled():
        task.exception()  # retrieved (a helper's failure was logged where it happened)
