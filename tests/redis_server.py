"""A private ``redis-server`` for tests that need one configured their own way (an eviction policy,
CONFIG disabled, a password): never the shared server, whose settings tests must not change."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
from collections.abc import Iterator

import pytest

from bot.storage.embedded import free_port


@contextlib.contextmanager
def private_redis(*options: str) -> Iterator[int]:
    """Start ``redis-server`` on a free loopback port with ``options``; yields the port; stops it by pid.

    Readiness is Redis's own "Ready to accept connections" line, read from its log on stdout."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (the test needs a Redis configured its own way)")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="slack-ask-test-redis-") as workdir:
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
                "--loglevel",
                "notice",
                *options,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            assert proc.stdout is not None
            seen: list[str] = []
            for line in proc.stdout:
                seen.append(line)
                if "Ready to accept connections" in line:
                    break
            else:
                pytest.fail(f"redis-server did not start: {''.join(seen)[-2000:]}")
            yield port
        finally:
            proc.terminate()
            proc.wait(timeout=10)
            if proc.stdout is not None:
                proc.stdout.close()
