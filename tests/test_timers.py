"""The sweeper's per-ask work in a batch (``Timers._bounded``): bounded by its slots, and cancelled
cleanly when the replica stops mid-batch."""

from __future__ import annotations

import asyncio
import gc
import warnings

import pytest

from bot.engine.timers import Timers


async def test_a_batch_cancelled_before_its_work_got_a_slot_leaves_no_coroutine_never_awaited() -> None:
    # A replica stopping mid-sweep cancels the batch; work still waiting for a slot (or not yet started
    # at all) must not be left as a coroutine nobody awaited: Python warns at collection, and under the
    # suite's -W error that warning fails whichever test happens to be running.
    ran: list[int] = []

    async def work(n: int) -> None:
        ran.append(n)

    slots = asyncio.Semaphore(0)  # no slot ever frees: nothing may run
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        batch = asyncio.ensure_future(
            asyncio.gather(*(Timers._bounded(slots, lambda n=n: work(n)) for n in range(3)))
        )
        batch.cancel()  # before any of them started
        with pytest.raises(asyncio.CancelledError):
            await batch
        gc.collect()
    assert ran == []
    assert [str(w.message) for w in seen if "never awaited" in str(w.message)] == []


async def test_work_runs_once_a_slot_is_free() -> None:
    ran: list[int] = []

    async def work(n: int) -> None:
        ran.append(n)

    slots = asyncio.Semaphore(1)
    await asyncio.gather(*(Timers._bounded(slots, lambda n=n: work(n)) for n in range(3)))
    assert sorted(ran) == [0, 1, 2]
