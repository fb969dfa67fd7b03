"""Group commit: callers that each need one small write (an intake entry's ``XACK``) while such a write
is on its way to Redis are sent together in the next one, so many deliveries finishing at once cost
one round trip instead of one each. A caller alone pays nothing extra: with no write in flight, its
own goes at once. Each caller still waits for its write and sees its failure, as if it were alone."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

__all__ = ["GroupCommit"]


class GroupCommit:
    """``await commit(item)`` sends ``item`` through ``send`` with every item that arrived while the
    previous ``send`` was in flight. ``send`` must be idempotent: a batch whose sender was cancelled
    is sent again by the next one (its items may or may not have landed)."""

    def __init__(self, send: Callable[[Sequence[str]], Awaitable[None]], *, max_batch: int = 500) -> None:
        self._send = send
        self._max_batch = max_batch
        self._queue: list[tuple[str, asyncio.Future[None]]] = []
        self._idle = asyncio.Event()
        self._idle.set()  # no send in flight

    async def commit(self, item: str) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append((item, done))
        try:
            while not done.done():
                if self._idle.is_set():
                    await self._lead()
                    continue
                turn = asyncio.ensure_future(self._idle.wait())
                try:
                    await asyncio.wait((done, turn), return_when=asyncio.FIRST_COMPLETED)
                finally:
                    turn.cancel()
        finally:
            if not done.done():
                done.cancel()  # this caller is gone; a sender skips (or sends, harmlessly) its item
        done.result()

    async def _lead(self) -> None:
        """Send what is queued (this caller's item among it), and settle every caller in the batch."""
        self._idle.clear()
        batch, self._queue = self._queue[: self._max_batch], self._queue[self._max_batch :]
        try:
            await self._send([item for item, _ in batch])
        except asyncio.CancelledError:
            # The sender is gone, its batch maybe not sent: the next sender takes it again.
            self._queue[:0] = [(item, f) for item, f in batch if not f.done()]
            raise
        except Exception as exc:
            for _, f in batch:
                if not f.done():
                    f.set_exception(exc)
        else:
            for _, f in batch:
                if not f.done():
                    f.set_result(None)
        finally:
            self._idle.set()
