"""The embedded Redis of the demo (and of test runs without one): it dies with the process that
started it, however that process dies (issue 25, defect 8)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys

import pytest
import redis

from bot.storage.embedded import redis_answers
from tests.redis_procs import wait_until

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs a redis-server binary")

# Parents that start a redis-server, say where it is, and wait (on stdin) to be killed: the demo's
# embedded one, and the tests' private servers (tests/redis_procs.py).
PARENTS = {
    "embedded": """
import sys
from bot.storage.embedded import start_embedded_redis
embedded = start_embedded_redis()
assert embedded.kind.startswith("redis-server"), embedded.kind
print(embedded.url, flush=True)
sys.stdin.read()
""",
    "private": """
import sys
from tests.redis_procs import redis_server
with redis_server() as server:
    print(f"redis://127.0.0.1:{server.port}/0", flush=True)
    sys.stdin.read()
""",
}


@pytest.mark.parametrize("kind", sorted(PARENTS))
def test_a_killed_parent_takes_its_redis_server_along(kind: str) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENTS[kind]], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    url = parent.stdout.readline().strip()
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    pid = int(redis.Redis(port=port, socket_timeout=5).info("server")["process_id"])
    try:
        parent.kill()  # SIGKILL: no handler, no clean-up of its own runs
        parent.wait(timeout=10)
        wait_until(lambda: not redis_answers(port=port), timeout=10, what="the orphaned redis-server gone")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)  # without the fix it lives on: do not leave it behind
        if parent.stdin is not None:
            parent.stdin.close()
        if parent.stdout is not None:
            parent.stdout.close()
