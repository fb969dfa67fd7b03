"""A Redis for trying slack-ask and for tests on machines without one.

Order of preference: a ``redis-server`` binary on a free loopback port (real Redis, nothing kept on
disk); else fakeredis's TCP server in a background thread (Lua through lupa; the ``demo`` extra).
Callers say which one they got, so nobody mistakes the fallback for a real server.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bot.errors import ConfigError
from bot.storage.base import COMPACT_HASH_VALUE_BYTES

__all__ = ["EmbeddedRedis", "die_with_parent", "free_port", "redis_answers", "start_embedded_redis"]

_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A ``preexec_fn`` for :class:`subprocess.Popen` that ties the child's life to this process: on
    Linux the child gets ``sig`` when its parent dies, however it dies (SIGKILL, a crash), so no
    server started here outlives a killed demo or test. ``prctl(PR_SET_PDEATHSIG)`` through ctypes
    (no library needed); should the parent already be gone when the child sets it, the child exits.
    None where there is no prctl (not Linux): the child then lives on as before.

    Linux sends the signal when the *thread* that started the child ends: start it from the main
    thread, or from an executor's worker (which lives until its executor shuts down)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # bound now: the child only calls it
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        if prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0 or os.getppid() != parent:
            os._exit(1)  # could not tie it, or the parent died before it was tied

    return preexec


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def redis_answers(host: str = "127.0.0.1", port: int = 6379, timeout: float = 0.5) -> bool:
    """True when something at host:port answers PING with PONG."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


@dataclass
class EmbeddedRedis:
    url: str
    kind: str
    """``redis-server <version>`` or ``fakeredis``."""
    _stop: Any = field(default=None, repr=False)

    def stop(self) -> None:
        if self._stop is not None:
            self._stop()
            self._stop = None


def _start_redis_server(binary: str) -> EmbeddedRedis:
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="slack-ask-redis-")
    proc = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            workdir,
            "--maxmemory-policy",
            "noeviction",
            # As docs/operations.md recommends (the older name, which Redis 7 and 8 still take, so
            # that a 6.2 server starts too).
            "--hash-max-ziplist-value",
            str(COMPACT_HASH_VALUE_BYTES),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        # Its own session: a Ctrl-C meant for the demo must not kill Redis before the bot stops.
        start_new_session=True,
        # ... but a demo that is killed, or crashes, takes it along (nothing else would stop it).
        preexec_fn=die_with_parent(),
    )
    deadline = time.monotonic() + 10
    while not redis_answers(port=port, timeout=0.2):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"{binary} did not start on port {port}")
        time.sleep(0.05)
    version = subprocess.run(
        [binary, "--version"], capture_output=True, text=True, check=False
    ).stdout.split()

    def stop() -> None:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        if proc.poll() is None:
            proc.kill()
        shutil.rmtree(workdir, ignore_errors=True)

    label = next((v.removeprefix("v=") for v in version if v.startswith("v=")), "")
    return EmbeddedRedis(f"redis://127.0.0.1:{port}/0", f"redis-server {label}".strip(), stop)


def _start_fakeredis() -> EmbeddedRedis:
    try:
        from fakeredis import TcpFakeServer
    except ImportError:
        # fakeredis is the demo extra, not a runtime dependency: say what to do in one line.
        raise ConfigError(
            "no usable redis-server on PATH and fakeredis is not installed: install redis-server, "
            "set REDIS_URL, or pip install 'slack-ask[demo]'"
        ) from None

    port = free_port()
    server = TcpFakeServer(("127.0.0.1", port), server_type="redis")
    thread = threading.Thread(target=server.serve_forever, name="fakeredis", daemon=True)
    thread.start()

    def stop() -> None:
        server.shutdown()
        server.server_close()

    return EmbeddedRedis(f"redis://127.0.0.1:{port}/0", "fakeredis", stop)


def start_embedded_redis(*, prefer_fake: bool = False) -> EmbeddedRedis:
    binary = shutil.which("redis-server")
    if binary and not prefer_fake:
        with contextlib.suppress(RuntimeError, OSError):
            return _start_redis_server(binary)
    return _start_fakeredis()
