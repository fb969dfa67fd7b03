"""Recovery time: a replica SIGKILLed while it holds asks mid-delivery -> their results, default settings.

Two replicas (``python -m bot.cli serve --http``, real processes, the bot's pacing off) share one
Redis and the fake Slack. Replica A reaches Slack through a proxy that, once the asks are sent, holds
every byte: the asks A takes are stuck inside ``chat.postMessage``, as when Slack is slow. A is
then SIGKILLed; replica B takes A's asks over, posts them, the "person" clicks each post as soon as
it appears, and the figure is, per ask A held, the time from the kill to its result on the agent's
list. B's own asks are answered too, and not counted.

    python -m benchmarks.bench_recovery [asks]

Settings are the code's defaults (only what the fake needs is set), so run on two branches this gives
before and after (``PYTHONPATH`` chooses the code the replicas run).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

from redis.asyncio import Redis

from benchmarks._common import choose_redis, pct
from bot.config import Settings
from bot.playground import FakeSlack
from bot.storage.keys import GROUP, Keys, slot_tag

SECRET = "bench-signing-secret"


class HoldingProxy:
    """A loopback TCP proxy; once ``hold`` is set, nothing more is forwarded either way (the link
    stays open: a request sent then is in flight for good)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.hold = False
        self.port = 0
        self._server: asyncio.Server | None = None
        self._links: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        self._links.update((writer, up_writer))
        await asyncio.gather(
            self._pipe(reader, up_writer), self._pipe(up_reader, writer), return_exceptions=True
        )

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await src.read(65536):
                if not self.hold:
                    dst.write(data)
                    await dst.drain()

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for link in self._links:
            link.close()


def _text(value: bytes | str | None) -> str:
    return value.decode() if isinstance(value, bytes) else value or ""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _replica(env: dict[str, str], name: str, port: int) -> subprocess.Popen[bytes]:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "REDIS_URL"))}
    full.update(env, SLACK_ASK_CONSUMER=name)
    log = tempfile.NamedTemporaryFile(prefix=f"bench-recovery-{name}-", suffix=".log", delete=False)  # noqa: SIM115
    cmd = [sys.executable, "-m", "bot.cli", "serve", "--http", "--host", "127.0.0.1", "--port", str(port)]
    return subprocess.Popen(cmd, env=full, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


async def main(n: int) -> None:
    url, kind, embedded = choose_redis()
    prefix = f"bench-rec-{uuid.uuid4().hex[:8]}"
    defaults = Settings()
    lease_ms = getattr(defaults, "intake_lease", defaults.delivery_window_ms * 2)
    fake = FakeSlack.with_demo_workspace(signing_secret=SECRET)
    await fake.start()
    slack_port = int(fake.api_url.split(":")[2].split("/")[0])
    proxy = HoldingProxy(slack_port)
    await proxy.start()
    agent = Redis.from_url(url, socket_timeout=30)
    base = {
        "SLACK_BOT_TOKEN": fake.bot_token,
        "SLACK_SIGNING_SECRET": SECRET,
        "SLACK_API_URL": fake.api_url,
        "REDIS_URL": url,
        "SLACK_ASK_PREFIX": prefix,
        "SLACK_ASK_PACE_SCALE": "0",
    }
    port_b = _free_port()
    a = _replica(
        {**base, "SLACK_API_URL": fake.api_url.replace(f":{slack_port}/", f":{proxy.port}/")},
        "A",
        _free_port(),
    )
    b = _replica(base, "B", port_b)
    fake.events_url = f"http://127.0.0.1:{port_b}/slack/events"
    print(
        f"slack-ask recovery bench: {n} asks, {kind}, intake lease {lease_ms} ms, reclaim idle "
        f"{defaults.reclaim_idle_ms} ms (defaults of the code under test)"
    )
    reply_to = f"{prefix}:reply:bench"
    try:
        deadline = time.monotonic() + 60
        while True:  # both replicas in the consumer group
            with contextlib.suppress(Exception):
                found = await agent.xinfo_consumers(f"{prefix}:asks", GROUP)
                names = {_text(c["name"]) for c in found}
                if {"A", "B"} <= names:
                    break
            assert time.monotonic() < deadline, "replicas did not start"
            await asyncio.sleep(0.2)
        proxy.hold = True
        for i in range(n):
            env = {
                "v": 1,
                "ask_id": f"rec-{i}",
                "reply_to": reply_to,
                "route": {"channel": "C0DEPLOY"},
                "request": {"id": "deploy", "question": f"Deploy build {i}?", "options": ["Yes", "No"]},
            }
            await agent.xadd(f"{prefix}:asks", {"ask": json.dumps(env)})
            # Spread over a lease (at most 10 s): the kill finds each lease at another point of its
            # renewal cycle.
            await asyncio.sleep(min(lease_ms / 1000, 10) / n)

        keys = Keys(prefix)

        async def owner(i: int) -> str:
            state, who = await agent.hmget(keys.for_ask(slot_tag(reply_to), f"rec-{i}").ask, "state", "owner")
            return f"{_text(state)}:{_text(who)}"

        held: list[str] = []
        deadline = time.monotonic() + 60
        while True:
            states = [await owner(i) for i in range(n)]
            if all(s.startswith("posted") or s == "accepted:A" for s in states):
                held = [f"rec-{i}" for i, s in enumerate(states) if s == "accepted:A"]
                break
            assert time.monotonic() < deadline, f"asks not all taken: {states}"
            await asyncio.sleep(0.1)
        # A's posts in flight for 3 s more (the same on every version: under the HTTP client's 15 s
        # timeout, so no ask A holds has ended before the kill)
        await asyncio.sleep(3)
        os.killpg(a.pid, signal.SIGKILL)
        killed = time.time()
        arrived: dict[str, float] = {}
        outcomes: dict[str, str] = {}
        clicked: set[str] = set()

        async def clicker() -> None:
            while len(arrived) < n:
                for message in fake.messages("C0DEPLOY"):
                    if message.ts in clicked:
                        continue
                    clicked.add(message.ts)
                    with contextlib.suppress(Exception):
                        await fake.click("U0ALICE", "C0DEPLOY", message.ts, "slack_ask:choose:0")
                await asyncio.sleep(0.02)

        clicks = asyncio.create_task(clicker())
        stop_at = time.monotonic() + max(600, lease_ms / 1000 * 5)
        while len(arrived) < n and time.monotonic() < stop_at:
            got = await agent.blpop([reply_to], timeout=5)
            if got is not None:
                result = json.loads(got[1])
                arrived.setdefault(result["ask_id"], time.time())
                outcomes[result["ask_id"]] = result["outcome"]
        clicks.cancel()
        times = [arrived[i] - killed for i in held if i in arrived]
        answered = sum(outcomes.get(i) == "answered" for i in held)
        print(
            f"asks held by the killed replica: {len(held)} of {n}; their results: {len(times)} "
            f"({answered} answered)"
        )
        if times:
            print(
                f"kill -> result: p50 {pct(times, 50):6.1f} s   p99 {pct(times, 99):6.1f} s   "
                f"max {max(times):6.1f} s   min {min(times):6.1f} s"
            )
        posts = len(fake.messages("C0DEPLOY"))
        print(f"messages posted: {posts} for {n} asks (one each: {posts == n})")
    finally:
        for proc in (a, b):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        proxy.close()
        with contextlib.suppress(Exception):
            left = [k async for k in agent.scan_iter(f"{prefix}*", count=1000)]
            if left and not os.environ.get("BENCH_KEEP"):
                await agent.delete(*left)
        await agent.aclose()
        await fake.stop()
        if embedded is not None:
            embedded.stop()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 40))
