"""The TcpProxy the partition tests cut Redis off with (tests/redis_procs.py): a cut or a reset ends
every link, including one accepted but still connecting to Redis at that moment. It once let such a
link come up after the reset, so a replica meant to be cut off answered a click through it (the
rare failure of test_e2e_partition's ``reset`` cases under a loaded CI)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable

import pytest

from tests.redis_procs import TcpProxy


@pytest.fixture
async def slow_upstream() -> AsyncIterator[socket.socket]:
    """A listening socket whose accept queue is full: a connect to it hangs (Linux drops the SYN and
    retries it about a second later) until the queue is drained with ``accept``."""
    upstream = socket.socket()
    upstream.bind(("127.0.0.1", 0))
    upstream.listen(0)
    upstream.setblocking(False)
    filler = socket.create_connection(upstream.getsockname())  # the one place in the queue
    try:
        yield upstream
    finally:
        filler.close()
        upstream.close()


async def _until(check: Callable[[], bool]) -> None:
    deadline = asyncio.get_running_loop().time() + 5
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("fault", ["reset", "cut"])
async def test_a_link_still_connecting_to_redis_is_ended_by_a_cut_or_reset(
    slow_upstream: socket.socket, fault: str
) -> None:
    proxy = TcpProxy(slow_upstream.getsockname()[1])
    await proxy.start()
    loop = asyncio.get_running_loop()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        await _until(lambda: proxy.connecting == 1)  # the proxy is connecting upstream
        if fault == "reset":
            await proxy.reset()
        else:
            proxy.cut()
        first, _ = await loop.sock_accept(slow_upstream)  # the filler: the queue has room again
        first.close()
        async with asyncio.timeout(5):  # the proxy's SYN, retried, gets through now
            late, _ = await loop.sock_accept(slow_upstream)
        await _until(lambda: proxy.connecting == 0)  # its connect is done
        try:
            # The client's end: reset or closed, never a link that still works.
            writer.write(b"PING\r\n")
            async with asyncio.timeout(5):
                assert await reader.read() == b""
        except ConnectionResetError:
            assert fault == "reset"
        # The proxy's end at Redis is closed, never used.
        async with asyncio.timeout(5):
            assert await loop.sock_recv(late, 64) == b""
        late.close()
        writer.close()
    finally:
        await proxy.stop()
