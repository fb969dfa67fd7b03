"""Real Redis components for the topology tests: servers (with AOF), Sentinel groups, a 3-master
Cluster, and a TCP proxy that can cut or freeze the bot's connections. Every process is started on a
free loopback port and stopped by its pid; work directories are temporary."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
import redis

from bot.storage.embedded import die_with_parent, free_port

__all__ = [
    "BotProc",
    "Cluster",
    "RedisProc",
    "SentinelGroup",
    "TcpProxy",
    "cluster",
    "cluster_node_port",
    "private_redis",
    "redis_server",
    "sentinel_group",
    "wait_until",
]


def wait_until(condition: Callable[[], object], *, timeout: float, what: str, every: float = 0.05) -> None:
    """Poll ``condition`` until it is truthy; fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if condition():
                return
        except (redis.RedisError, OSError):
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(every)


def _binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed")
    return path


def _answers(port: int) -> bool:
    """The server on ``port`` answers PING: PONG, or NOAUTH when it was started with a password."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as s:
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            return s.recv(64).startswith((b"+PONG", b"-NOAUTH"))
    except OSError:
        return False


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def cluster_node_port() -> int:
    """A free port for a cluster node whose bus port (port + 10000) is a valid port and free too: with
    the suite in parallel, another worker's server may hold the port 10000 above a free one."""
    return next(p for p in iter(free_port, 0) if p < 55_000 and _bindable(p + 10_000))


@dataclass
class RedisProc:
    """One ``redis-server`` (or ``redis-server FILE --sentinel``) process, restartable on its port."""

    args: list[str]
    port: int
    workdir: str
    sentinel: bool = False
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        cmd = [_binary("redis-server")]
        if self.sentinel:
            cmd += [os.path.join(self.workdir, "sentinel.conf"), "--sentinel"]
        cmd += ["--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.workdir, *self.args]
        log = open(os.path.join(self.workdir, "server.log"), "ab")  # noqa: SIM115 - closed with the process
        # Its own session, yet it dies with the test run: a crashed or killed pytest leaves no server.
        self.proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=die_with_parent()
        )
        log.close()
        wait_until(lambda: _answers(self.port), timeout=20, what=f"redis on {self.port}")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, sig)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        self.proc = None

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=10)

    def log_tail(self) -> str:
        with contextlib.suppress(OSError), open(os.path.join(self.workdir, "server.log"), "rb") as f:
            return f.read()[-3000:].decode(errors="replace")
        return ""


@contextlib.contextmanager
def _workdir(name: str) -> Iterator[str]:
    path = tempfile.mkdtemp(prefix=f"slack-ask-{name}-")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def redis_server(*args: str, aof: bool = False) -> Iterator[RedisProc]:
    """A private ``redis-server``; with ``aof``: ``appendonly yes`` and ``appendfsync always``."""
    with _workdir("redis") as workdir:
        persistence = ["--appendonly", "yes", "--appendfsync", "always"] if aof else ["--appendonly", "no"]
        server = RedisProc([*persistence, "--save", "", *args], free_port(), workdir)
        server.start()
        try:
            yield server
        finally:
            server.stop()


@contextlib.contextmanager
def private_redis(*options: str) -> Iterator[int]:
    """A private ``redis-server`` configured the test's own way (an eviction policy, CONFIG renamed, a
    password), never the shared server whose settings tests must not change; yields its port."""
    with redis_server(*options) as server:
        yield server.port


@dataclass
class SentinelGroup:
    master: RedisProc
    replica: RedisProc
    sentinels: list[RedisProc]
    name: str = "mymaster"

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{self.name}"

    def master_port(self) -> int:
        with self.sentinels[0].client() as s:
            _host, port = s.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.name)
            return int(port)

    def failover(self) -> int:
        """``SENTINEL FAILOVER``; returns the new master's port once a sentinel reports it."""
        before = self.master_port()
        with self.sentinels[0].client() as s:
            s.execute_command("SENTINEL", "FAILOVER", self.name)

        def promoted() -> bool:
            if self.master_port() == before:
                return False
            with redis.Redis(port=self.master_port(), socket_timeout=2) as m:
                return bool(m.info("replication")["role"] == "master")

        wait_until(promoted, timeout=30, what="the Sentinel failover")
        return self.master_port()


@contextlib.contextmanager
def sentinel_group() -> Iterator[SentinelGroup]:
    """A master, one replica and three sentinels (quorum 2), all on free loopback ports."""
    with _workdir("master") as mdir, _workdir("replica") as rdir:
        # No 5 s diskless-sync delay (Redis 7's default): a replica, and the old master after a
        # failover, is in sync (WAIT counts it) within a moment.
        common = ["--appendonly", "no", "--save", "", "--repl-diskless-sync-delay", "0"]
        master = RedisProc(common, free_port(), mdir)
        master.start()
        replica = RedisProc([*common, "--replicaof", "127.0.0.1", str(master.port)], free_port(), rdir)
        replica.start()
        sentinels: list[RedisProc] = []
        try:
            wait_until(
                lambda: replica.client().info("replication")["master_link_status"] == "up",
                timeout=20,
                what="the replica to sync",
            )
            for _ in range(3):
                sdir = tempfile.mkdtemp(prefix="slack-ask-sentinel-")
                with open(os.path.join(sdir, "sentinel.conf"), "w") as f:
                    f.write(
                        f"sentinel monitor mymaster 127.0.0.1 {master.port} 2\n"
                        "sentinel down-after-milliseconds mymaster 1000\n"
                        "sentinel failover-timeout mymaster 5000\n"
                        "sentinel parallel-syncs mymaster 1\n"
                    )
                sentinel = RedisProc([], free_port(), sdir, sentinel=True)
                sentinel.start()
                sentinels.append(sentinel)

            def all_see_each_other() -> bool:
                for s in sentinels:
                    with s.client() as c:
                        info = c.sentinel_master("mymaster")  # parsed by redis-py into a dict
                        if int(info["num-other-sentinels"]) < 2 or int(info["num-slaves"]) < 1:
                            return False
                return True

            wait_until(all_see_each_other, timeout=30, what="the sentinels to find each other")
            yield SentinelGroup(master, replica, sentinels)
        finally:
            for s in sentinels:
                s.stop()
                shutil.rmtree(s.workdir, ignore_errors=True)
            replica.stop()
            master.stop()


@dataclass
class Cluster:
    nodes: list[RedisProc]

    @property
    def url(self) -> str:
        return f"redis+cluster://127.0.0.1:{self.nodes[0].port}"

    def node_for_slot(self, slot: int) -> RedisProc:
        with self.nodes[0].client() as c:
            for start, end, master, *_ in c.execute_command("CLUSTER", "SLOTS"):
                if int(start) <= slot <= int(end):
                    port = int(master[1])
                    return next(n for n in self.nodes if n.port == port)
        raise AssertionError(f"no node serves slot {slot}")

    def node_id(self, node: RedisProc) -> str:
        with node.client() as c:
            return str(c.execute_command("CLUSTER", "MYID").decode())


@contextlib.contextmanager
def cluster(masters: int = 3) -> Iterator[Cluster]:
    """``masters`` nodes with ``--cluster-enabled yes``, joined by ``redis-cli --cluster create``."""
    cli = _binary("redis-cli")
    nodes: list[RedisProc] = []
    try:
        for _ in range(masters):
            workdir = tempfile.mkdtemp(prefix="slack-ask-cnode-")
            node = RedisProc(
                [
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--appendonly",
                    "no",
                    "--save",
                    "",
                    "--cluster-node-timeout",
                    "3000",
                ],
                cluster_node_port(),
                workdir,
            )
            node.start()
            nodes.append(node)
        subprocess.run(
            [cli, "--cluster", "create", *(f"127.0.0.1:{n.port}" for n in nodes), "--cluster-yes"],
            check=True,
            capture_output=True,
            timeout=60,
        )

        def ok() -> bool:
            for n in nodes:
                with n.client() as c:
                    if b"cluster_state:ok" not in c.execute_command("CLUSTER", "INFO"):
                        return False
            return True

        wait_until(ok, timeout=30, what="cluster_state:ok on every node")
        yield Cluster(nodes)
    finally:
        for n in nodes:
            n.stop()
            shutil.rmtree(n.workdir, ignore_errors=True)


@dataclass
class TcpProxy:
    """A loopback TCP proxy in front of a Redis: ``cut()`` drops every connection and refuses new ones
    until ``restore()``; ``freeze()`` keeps connections open but forwards nothing (a half-open link).

    A partition (issue 24): ``blackhole()`` holds every byte, both ways, on every connection (new
    ones are accepted and held too) and ``heal()`` delivers them all, late and in order, even those
    of connections the client has closed meanwhile (a write the client gave up on still reaches
    Redis); ``blackhole(when=b"...")`` starts that with the first chunk containing those bytes, in
    either direction (a script's sha: its request is held; a reply's text: it ran, its answer is
    held). ``reset()`` resets every connection (TCP RST) and refuses new connects until ``heal()``."""

    target_port: int
    port: int = 0
    _server: asyncio.Server | None = None
    _links: set[asyncio.StreamWriter] = field(default_factory=set)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    refusing: bool = False
    frozen: set[asyncio.StreamWriter] = field(default_factory=set)
    held: dict[asyncio.StreamWriter, list[bytes]] = field(default_factory=dict)
    """Replies held back on their way to the client (``hold``) until ``release``."""
    upstream: set[str] = field(default_factory=set)
    """``host:port`` of the proxy's own connections to Redis (as CLIENT LIST shows them)."""
    _flowing: asyncio.Event = field(default_factory=asyncio.Event)
    _trigger: bytes | None = None
    blackholed: int = 0
    """Chunks held by the blackhole so far (they flow at the heal)."""
    connecting: int = 0
    """Accepted connections whose link to Redis is still being made."""
    is_reset: bool = False
    """Between ``reset()`` and ``heal()``: a connection accepted before the reset is reset too."""

    def __post_init__(self) -> None:
        self._flowing.set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port, reuse_address=True)
        self.port = int(self._server.sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.is_reset:
            _rst(writer)  # accepted just before a reset, handed over after it: reset with the rest
            return
        if self.refusing:
            writer.close()
            return
        # One of the links from the start, so that a cut or a reset while Redis is being connected
        # to ends it too: else it would come up after the cut, and a client meant to be cut off
        # from Redis would still reach it through it (the flake of test_e2e_partition's reset).
        self._links.add(writer)
        self.connecting += 1
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            self._links.discard(writer)
            writer.close()
            return
        finally:
            self.connecting -= 1
        if writer not in self._links:  # cut or reset meanwhile
            up_writer.close()
            return
        self._links.add(up_writer)
        host, port = up_writer.get_extra_info("sockname")[:2]
        self.upstream.add(f"{host}:{port}")
        for src, dst, client in ((reader, up_writer, writer), (up_reader, writer, writer)):
            task = asyncio.create_task(self._pipe(src, dst, client))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pipe(
        self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, client: asyncio.StreamWriter
    ) -> None:
        ended = False  # the source said all it will say (EOF), rather than failing
        try:
            while data := await src.read(65536):
                if client in self.frozen:
                    continue  # swallowed: the peer waits for an answer that never comes
                if dst is client and client in self.held:
                    self.held[client].append(data)  # on its way, not there yet
                    continue
                if self._trigger is not None and self._trigger in data:
                    self._trigger = None
                    self._flowing.clear()
                if not self._flowing.is_set():
                    self.blackholed += 1
                    await self._flowing.wait()  # held; the rest waits in the socket's buffer
                dst.write(data)
                await dst.drain()
            ended = True
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            if ended and dst is not client and dst.can_write_eof() and not dst.is_closing():
                # A client that closed after its last command: Redis still runs every command it
                # got (a real server reads the whole buffer first), so only the FIN goes on; Redis
                # closes its side once done, which ends the other pipe. Closing here would cut
                # fakeredis's server off mid-pipeline (it stops at the first reply it cannot send).
                try:
                    dst.write_eof()
                except OSError:  # Redis's side went first (ENOTCONN): nothing is left to forward
                    dst.close()
            else:
                dst.close()

    def cut(self) -> None:
        self.refusing = True
        for w in list(self._links):
            w.close()
        self._links.clear()

    def restore(self) -> None:
        self.refusing = False

    def freeze(self) -> None:
        """Every connection open now goes silent (new ones work)."""
        self.frozen.update(w for w in self._links if w not in self.frozen)

    def hold(self) -> None:
        """Replies to every client connected now are held on their way (a slow link), until ``release``."""
        for w in self._links:
            self.held.setdefault(w, [])

    def release(self) -> None:
        """The held replies go on to their clients (those still connected)."""
        held, self.held = self.held, {}
        for client, chunks in held.items():
            if not client.is_closing():
                for data in chunks:
                    client.write(data)

    def blackhole(self, *, when: bytes | None = None) -> None:
        """Hold every byte from now (or from the first chunk containing ``when``) until ``heal()``."""
        if when is None:
            self._flowing.clear()
        else:
            self._trigger = when

    async def reset(self) -> None:
        """Reset every connection (RST, not FIN); refuse new connects (nothing listens) until ``heal()``."""
        self.is_reset = True
        for w in list(self._links):
            _rst(w)
        self._links.clear()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def heal(self) -> None:
        """The end of a blackhole (everything held is delivered) or of a reset (connects work again)."""
        self._trigger = None
        self._flowing.set()
        self.is_reset = False
        if self._server is None:
            await self.start()

    async def stop(self) -> None:
        self._flowing.set()
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def _rst(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP RST, not a FIN: what a peer sees when a link is reset."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


@dataclass
class BotProc:
    """One ``python -m bot.cli serve --http`` replica as a real process (killed with SIGKILL, restarted
    on the same port and consumer name, as a crashed pod comes back)."""

    env: dict[str, str]
    port: int
    name: str
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0
    log_path: str = ""

    def start(self) -> None:
        import sys

        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "REDIS_URL"))}
        env.update(self.env)
        env["SLACK_ASK_CONSUMER"] = self.name
        self.log_path = self.log_path or tempfile.mkstemp(prefix=f"slack-ask-{self.name}-", suffix=".log")[1]
        log = open(self.log_path, "ab")  # noqa: SIM115 - closed once the child has it
        cmd = [
            sys.executable,
            "-m",
            "bot.cli",
            "serve",
            "--http",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
        ]
        self.proc = subprocess.Popen(
            cmd,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent(),
        )
        log.close()
        self.starts += 1

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self.proc = None

    def stop(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.kill()
        self.proc = None

    def log(self) -> str:
        with contextlib.suppress(OSError), open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")
        return ""
