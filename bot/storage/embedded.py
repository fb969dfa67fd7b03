"""A Redis for trying slack-ask and for tests on machines without one.

Order of preference: a ``redis-server`` binary on a free loopback port (real Redis, nothing kept on
disk); else fakeredis's TCP server in a background thread (Lua through lupa; the ``demo`` extra).
Callers say which one they got, so nobody mistakes the fallback for a real server.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from bot.errors import ConfigError

__all__ = ["EmbeddedRedis", "free_port", "redis_answers", "start_embedded_redis"]


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
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        # Its own session: a Ctrl-C meant for the demo must not kill Redis before the bot stops.
        start_new_session=True,
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
