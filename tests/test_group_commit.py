"""Group commit (bot.storage.group_commit): writes that arrive while one is in flight go in the next,
every caller sees its own write's outcome, and a sender cancelled mid-send loses nobody's write."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from bot.storage.group_commit import GroupCommit


class Sender:
    """A ``send`` that records each batch, then holds it in flight until the test lets one through
    (``release``), unless ``free``."""

    def __init__(self, *, free: bool = False) -> None:
        self.batches: list[list[str]] = []
        self.in_flight: asyncio.Queue[list[str]] = asyncio.Queue()
        self.free = free
        self._permits = asyncio.Semaphore(0)
        self.fail: Exception | None = None

    def release(self, batches: int = 1) -> None:
        for _ in range(batches):
            self._permits.release()

    async def __call__(self, items: Sequence[str]) -> None:
        self.batches.append(list(items))
        self.in_flight.put_nowait(list(items))
        if not self.free:
            await self._permits.acquire()
        if self.fail is not None:
            raise self.fail


async def _queued(commit: GroupCommit, count: int) -> None:
    """Let the callers just started run up to their wait: ``count`` of them queued for the next send."""
    await asyncio.sleep(0)
    assert len(commit._queue) == count


async def test_a_lone_write_goes_at_once_and_later_ones_in_one_batch() -> None:
    send = Sender(free=True)
    commit = GroupCommit(send)
    await commit.commit("a")
    assert send.batches == [["a"]] and await send.in_flight.get() == ["a"]
    send.free = False
    first = asyncio.create_task(commit.commit("b"))
    assert await send.in_flight.get() == ["b"]
    rest = [asyncio.create_task(commit.commit(x)) for x in "cde"]
    await _queued(commit, 3)
    assert not any(t.done() for t in [first, *rest])  # every caller waits for its own write
    send.release(2)
    await asyncio.gather(first, *rest)
    assert send.batches == [["a"], ["b"], ["c", "d", "e"]]


async def test_a_failed_send_fails_every_caller_of_its_batch_and_only_them() -> None:
    send = Sender()
    commit = GroupCommit(send)
    first = asyncio.create_task(commit.commit("a"))
    await send.in_flight.get()
    batch = [asyncio.create_task(commit.commit(x)) for x in "bc"]
    await _queued(commit, 2)
    send.fail = ConnectionError("redis went away")
    send.release(2)
    outcomes = await asyncio.gather(first, *batch, return_exceptions=True)
    assert [type(o) for o in outcomes] == [ConnectionError] * 3
    send.fail, send.free = None, True
    await commit.commit("d")  # the next write goes as usual
    assert send.batches == [["a"], ["b", "c"], ["d"]]


async def test_a_sender_cancelled_mid_send_leaves_its_batch_to_the_next_sender() -> None:
    send = Sender()
    commit = GroupCommit(send)
    leader = asyncio.create_task(commit.commit("a"))
    await send.in_flight.get()
    followers = {x: asyncio.create_task(commit.commit(x)) for x in "bc"}
    await _queued(commit, 2)
    send.release()
    await leader
    assert await send.in_flight.get() == ["b", "c"]  # sent by "b", the first of them
    followers["b"].cancel()
    with pytest.raises(asyncio.CancelledError):
        await followers["b"]
    # "c" takes the batch again (its write may not have landed) and returns normally.
    assert await send.in_flight.get() == ["b", "c"]
    assert not followers["c"].done()
    send.release()
    await followers["c"]
    assert commit._queue == [] and commit._idle.is_set()


async def test_a_caller_cancelled_while_waiting_does_not_hold_up_the_rest() -> None:
    send = Sender()
    commit = GroupCommit(send)
    first = asyncio.create_task(commit.commit("a"))
    await send.in_flight.get()
    gone = asyncio.create_task(commit.commit("b"))
    stays = asyncio.create_task(commit.commit("c"))
    await _queued(commit, 2)
    gone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gone
    send.release(2)
    await asyncio.gather(first, stays)
    assert send.batches[0] == ["a"] and send.batches[1][-1] == "c"


async def test_batches_are_bounded() -> None:
    send = Sender()
    commit = GroupCommit(send, max_batch=2)
    first = asyncio.create_task(commit.commit("a"))
    await send.in_flight.get()
    rest = [asyncio.create_task(commit.commit(x)) for x in "bcde"]
    await _queued(commit, 4)
    send.release(3)
    await asyncio.gather(first, *rest)
    assert send.batches == [["a"], ["b", "c"], ["d", "e"]]
