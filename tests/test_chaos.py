"""Chaos (issue 11): three replicas as real processes, a few hundred asks of every kind, a replica
SIGKILLed every few seconds, the fake Slack failing a quarter of its calls (5xx with JSON and with
plain-text bodies, and 429 windows), and one Redis restart (its own redis-server with AOF). One replica
(never killed) reaches Redis through a proxy that partitions it (issue 24): blackholed or reset for
longer than the leases, a few times, while it keeps getting half of the clicks.

The pause mode (issue 24) freezes replicas instead (SIGSTOP past their leases, then SIGCONT): some
inside a held chat.postMessage reply, some right after a click routed to them, some at a deadline;
afterwards no ask also has two live copies in the channel.

Afterwards every ask has exactly one result, consistent with what happened to it; no message of an
ended ask is still interactive; the invariant check is clean. Seeded (``SLACK_ASK_CHAOS_SEED``,
printed) and bounded (about 2 minutes); it prints its figures on one line."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import random
import signal
import time
import urllib.parse
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from redis.asyncio import Redis
from redis.exceptions import RedisError

from bot import render
from bot.ids import AskRef
from bot.playground import FakeSlack
from bot.storage.check import check_prefix
from bot.storage.embedded import free_port
from bot.storage.keys import slot_tag
from bot.storage.scripts import script_source
from bot.storage.store import Store
from tests.harness import SIGNING_SECRET, interactive_elements
from tests.redis_procs import BotProc, TcpProxy, redis_server

pytestmark = [pytest.mark.slow, pytest.mark.redis]

ASKS = int(os.environ.get("SLACK_ASK_CHAOS_ASKS", "300"))
SEND_FOR_S = 40.0
FAIL_RATE = 0.25
HUMANS = ["U0ALICE", "U0BOB", "U0CAROL"]
CHANNEL = "C0DEPLOY"


@dataclass
class Plan:
    """What happens to one ask, decided by the seed before the run."""

    env: dict[str, Any]
    kind: str  # click | timeout | cancel | unavailable | race
    clickers: list[tuple[str, int]] = field(default_factory=list)  # (person, option)
    cancel_after_s: float | None = None
    clicked: set[str] = field(default_factory=set)
    cancel_sent: bool = False
    sent_at: float = 0.0


@dataclass
class Faults:
    """The fake Slack's misbehaviour, as an aiohttp middleware in front of its Web API."""

    rng: random.Random
    on: bool = True
    rate_limited_until: float = 0.0
    counts: Counter[str] = field(default_factory=Counter)
    on_post: Callable[[web.Request], None] | None = None  # the pause mode's eye on held posts

    @web.middleware
    async def middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        method = request.path.removeprefix("/api/")
        if not self.on or not request.path.startswith("/api/") or method == "auth.test":
            return await handler(request)
        if time.monotonic() < self.rate_limited_until:
            self.counts["429"] += 1
            return web.json_response(
                {"ok": False, "error": "ratelimited"}, status=429, headers={"Retry-After": "1"}
            )
        if self.rng.random() < FAIL_RATE:
            await request.read()
            if self.rng.random() < 0.5:
                self.counts["5xx_json"] += 1
                return web.json_response({"ok": False, "error": "internal_error"}, status=500)
            self.counts["5xx_text"] += 1
            status = self.rng.choice([500, 502, 503])
            return web.Response(
                text="<html><body>upstream error</body></html>", status=status, content_type="text/html"
            )
        if self.on_post is not None and method == "chat.postMessage":
            self.on_post(request)
        return await handler(request)


# -- the pause mode (issue 24) ------------------------------------------------------------------

PAUSE_S = (8.5, 12.5)  # longer than every lease: intake's 6 s, the timer's 2 s, the reclaim's 1.5 s


@dataclass
class Pauses:
    """SIGSTOP and SIGCONT for the replicas, and the moments the pauser aims at: a replica whose
    chat.postMessage reply the fake Slack holds (found through the request's source port), a replica
    a click was just routed to, and an ask's deadline."""

    bots: list[BotProc]
    rng: random.Random
    paused: set[int] = field(default_factory=set)  # pids
    count: Counter[str] = field(default_factory=Counter)
    aim: str | None = None  # "reply" or "click": pause the next replica seen doing that
    tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def live(self) -> list[BotProc]:
        return [b for b in self.bots if b.alive and b.proc is not None and b.proc.pid not in self.paused]

    def pause(self, bot: BotProc, why: str) -> None:
        """Freeze ``bot`` for a while (never the last live replica), then let it go on."""
        if bot.proc is None or bot.proc.pid in self.paused or len(self.live()) < 2:
            return
        pid = bot.proc.pid
        os.kill(pid, signal.SIGSTOP)
        self.paused.add(pid)
        self.count[why] += 1
        task = asyncio.create_task(self._resume_later(pid, self.rng.uniform(*PAUSE_S)))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _resume_later(self, pid: int, after_s: float) -> None:
        try:
            await asyncio.sleep(after_s)
        finally:
            self.resume(pid)

    def resume(self, pid: int) -> None:
        if pid in self.paused:
            self.paused.discard(pid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def resume_all(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        for pid in list(self.paused):
            self.resume(pid)

    def bot_on_port(self, peer_port: int) -> BotProc | None:
        """The replica whose socket has local port ``peer_port`` (/proc/net/tcp and its fds)."""
        inode = _socket_inode(peer_port)
        for bot in self.bots:
            if inode is not None and bot.proc is not None and inode in _socket_inodes(bot.proc.pid):
                return bot
        return None

    def seen(self, what: str, bot: BotProc | None) -> None:
        """A replica is doing ``what`` now: paused 50 ms later when the pauser aims at it."""
        if bot is not None and self.aim == what:
            self.aim = None
            asyncio.get_running_loop().call_later(0.05, self.pause, bot, what)


def _socket_inode(port: int) -> str | None:
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if int(fields[1].rsplit(":", 1)[1], 16) == port:
                    return fields[9]
    return None


def _socket_inodes(pid: int) -> set[str]:
    found: set[str] = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    found.add(target[8:-1])
    return found


# -- the partition fault (issue 24) -------------------------------------------------------------

PARTITION_EVERY_S = (2.0, 5.0)
PARTITION_S = (7.0, 9.0)
"""How long one cut lasts: longer than every lease of the run (intake 2 x 3 s, timers 2 s)."""
ACK_LIMIT_S = 3.0
UNCONFIRMED = render.render_refusal("unconfirmed")
CONFIRMED = render.render_refusal("confirmed")


@dataclass
class Acks:
    """What the load balancer saw of the replicas' answers, and which replica got which click."""

    seconds: list[float] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    """Answers that were no ack (not HTTP 200)."""
    clicks: dict[str, tuple[int, str, int, str]] = field(default_factory=dict)
    """response_url token -> (replica port, person, option, ask_id)."""

    def record(self, port: int, body: bytes, seconds: float, status: int) -> None:
        self.seconds.append(seconds)
        if status != 200:
            self.refused.append(f"HTTP {status} from {port} after {seconds:.2f}s")
        raw = urllib.parse.parse_qs(body.decode()).get("payload")
        if not raw:
            return  # an event
        payload = json.loads(raw[0])
        action = (payload.get("actions") or [{}])[0]
        ref = AskRef.decode(str(action.get("value") or ""))
        if payload.get("response_url") and ref is not None and ref.option is not None:
            token = str(payload["response_url"]).rsplit("/", 1)[-1]
            self.clicks[token] = (port, str(payload["user"]["id"]), ref.option, ref.ask_id)


RESOLVE_SHA = hashlib.sha1(script_source("resolve").encode()).hexdigest().encode()
CUTS = ("blackhole", "reset", "blackhole at a write", "blackhole at an answer")
"""Held from now; connections reset and refused; held from the next answer or vote this replica
sends (its write reaches Redis late); held from the next answer Redis gives one (it ran; its
reply comes late)."""


async def partitioner(
    proxy: TcpProxy,
    rng: random.Random,
    stop: asyncio.Event,
    counts: Counter[str],
    serving: Callable[[], Awaitable[bool]],
) -> None:
    """Cut the proxied replica off from Redis every few seconds, each kind of cut once, in turn; the
    first once it serves (a replica that cannot reach Redis at start does not start)."""
    while not await serving():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.2)
        if stop.is_set():
            return
    first = rng.randrange(len(CUTS))
    while not stop.is_set() and counts.total() < len(CUTS):
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), rng.uniform(*PARTITION_EVERY_S))
        if stop.is_set():
            return
        mode = CUTS[(first + counts.total()) % len(CUTS)]
        counts[mode] += 1
        if mode == "reset":
            await proxy.reset()
        elif mode == "blackhole at a write":
            proxy.blackhole(when=RESOLVE_SHA)
        elif mode == "blackhole at an answer":
            proxy.blackhole(when=b"\r\n$3\r\nwon\r\n")
        else:
            proxy.blackhole()
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), rng.uniform(*PARTITION_S))
        finally:
            await proxy.heal()


async def _trail(agent: Redis, prefix: str, env: dict[str, Any]) -> list[dict[str, Any]]:
    """An ask's audit trail as the bot's own reader merges it (for a failure's printout)."""
    entries = await Store(agent, prefix).read_audit(slot_tag(env["reply_to"]), env["ask_id"])
    return [e.model_dump(exclude_none=True) for e in entries]


def unanswered(acks: Acks, fake: FakeSlack, results: dict[str, list[dict[str, Any]]], port: int) -> list[str]:
    """What went wrong with the clicks the partitioned replica (``port``) acked: one nobody answered
    (it did not count and no private word came), one left at "checking", one told it counted that did
    not, and any result a click's person was told did not count (unless another of their clicks for
    that option was not refused)."""
    told: dict[str, list[str]] = {}
    for post in fake.state.responses:
        told.setdefault(post.token, []).append(str(post.body.get("text") or ""))
    problems: list[str] = []
    for token, (at, person, option, ask_id) in acks.clicks.items():
        got = results.get(ask_id) or []
        won = bool(got) and (got[0].get("responder") or {}).get("id") == person
        counted = won and got[0]["answers"][0]["selected"] == [option]
        words = told.get(token, [])
        if words and words[-1] == UNCONFIRMED:
            problems.append(f"{person} on {ask_id} was told it is being checked, and nothing since")
        if CONFIRMED in words and not counted:
            problems.append(f"{person} on {ask_id} was told option {option} counted; the result: {got}")
        if at == port and not words and not counted:
            problems.append(
                f"{person}'s click for option {option} on {ask_id} neither counted nor was answered"
            )
    for ask_id, got in results.items():
        if not got or not (got[0].get("responder") or {}).get("id"):
            continue
        person, selected = got[0]["responder"]["id"], got[0]["answers"][0]["selected"]
        theirs = [t for t, (_, p, o, a) in acks.clicks.items() if (p, [o], a) == (person, selected, ask_id)]
        refused = [t for t in theirs if (w := told.get(t)) and w[-1] not in (UNCONFIRMED, CONFIRMED)]
        if theirs and len(refused) == len(theirs):
            problems.append(f"{ask_id} counted {person}'s option {selected}, and each such click was refused")
    return problems


def _seed() -> int:
    text = os.environ.get("SLACK_ASK_CHAOS_SEED")
    return int(text) if text else int(time.time()) % 100_000


def _plans(rng: random.Random, prefix: str) -> list[Plan]:
    plans: list[Plan] = []
    for _ in range(ASKS):
        ask_id = f"chaos-{uuid.uuid4().hex[:10]}"
        env: dict[str, Any] = {
            "v": 1,
            "ask_id": ask_id,
            "reply_to": f"{prefix}:reply:{ask_id}",
            "request": {"id": "go", "question": "Go?", "options": ["Yes", "No", "Later"]},
            "route": {"channel": CHANNEL},
            "timeout_ms": 60_000,
        }
        roll = rng.random()
        if roll < 0.45:
            people = rng.sample(HUMANS, rng.choice([1, 1, 2, 3]))
            plan = Plan(env, "click", [(p, rng.randrange(3)) for p in people])
        elif roll < 0.60:
            env["timeout_ms"] = rng.randint(2_000, 6_000)
            plan = Plan(env, "timeout")
        elif roll < 0.75:
            plan = Plan(env, "cancel", cancel_after_s=rng.uniform(0, 3))
        elif roll < 0.85:
            env["route"] = {"channel": rng.choice(["C0PRIV", "C0NOPE"])}
            plan = Plan(env, "unavailable")
        else:
            people = rng.sample(HUMANS, 2)
            plan = Plan(
                env, "race", [(p, rng.randrange(3)) for p in people], cancel_after_s=rng.uniform(0, 2)
            )
        plans.append(plan)
    return plans


async def _retrying(call: Callable[[], Awaitable[Any]], *, attempts: int = 120) -> Any:
    for attempt in range(attempts):
        try:
            return await call()
        except (RedisError, OSError):
            if attempt == attempts - 1:
                raise
            await asyncio.sleep(0.25)
    raise AssertionError("unreachable")


@pytest.mark.timeout(240)  # bounded by design to about 70 s; the margin is for a loaded CI machine
@pytest.mark.parametrize("mode", ["kills", "pauses"])
async def test_chaos_every_ask_gets_exactly_one_consistent_result(prefix: str, mode: str) -> None:
    seed = _seed()
    rng = random.Random(seed)
    print(f"\nchaos seed={seed} asks={ASKS} mode={mode}")
    faults = Faults(random.Random(seed + 1))
    fake = FakeSlack.with_demo_workspace(signing_secret=SIGNING_SECRET)
    fake.app.middlewares.append(faults.middleware)
    plans = _plans(rng, prefix)
    started = time.monotonic()
    with redis_server(aof=True) as server:
        # Started once Redis is: without a redis-server the test skips above, and a fake started
        # before that would leak its server socket and HTTP session into the next test.
        await fake.start()
        url = f"redis://127.0.0.1:{server.port}/0"
        agent = Redis.from_url(url, socket_timeout=10)
        env = {
            "SLACK_BOT_TOKEN": fake.bot_token,
            "SLACK_SIGNING_SECRET": SIGNING_SECRET,
            "SLACK_API_URL": fake.api_url,
            "REDIS_URL": url,
            "SLACK_ASK_PREFIX": prefix,
            "SLACK_ASK_RECLAIM_IDLE_MS": "1500",
            "SLACK_ASK_DELIVERY_WINDOW_MS": "3000",
            "SLACK_ASK_TIMER_LEASE_MS": "2000",
            "SLACK_ASK_SWEEP_INTERVAL_MS": "100",
            "SLACK_ASK_PACE_SCALE": "0",
        }
        # The partition fault (issue 24): replica 0 reaches Redis through a proxy that cuts it off.
        proxy = TcpProxy(server.port)
        await proxy.start()
        partitions: Counter[str] = Counter()
        acks = Acks()
        bots = [BotProc(env, free_port(), f"chaos-{i}") for i in range(3)]
        bots[0].env = {**env, "REDIS_URL": proxy.url}
        cut_off, killable = bots[0], bots[1:]
        for bot in bots:
            bot.start()
        kills = 0
        stop_chaos = asyncio.Event()
        pauses = Pauses(bots, random.Random(seed + 2))

        def live_bot() -> BotProc | None:
            alive = pauses.live()  # a load balancer's health check leaves frozen replicas out
            if mode == "pauses":
                return rng.choice(alive) if alive else None
            others = [b for b in alive if b is not cut_off]
            if cut_off in alive and (not others or rng.random() < 0.5):
                return cut_off  # half of the clicks, cut off from Redis or not
            return rng.choice(others) if others else None

        # A load balancer in front of the replicas, as in a real deployment: each request (a click,
        # an event) goes to a live replica, and to another when that one refuses the connection.
        lb_session = aiohttp.ClientSession()

        async def balance(request: web.Request) -> web.Response:
            body = await request.read()
            headers = {
                k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")
            }
            for _ in range(20):
                target = live_bot()
                if target is not None:
                    if mode == "pauses" and b"payload=" in body:
                        pauses.seen("click", target)  # frozen 50 ms into handling this click
                    try:
                        sent = time.monotonic()
                        async with lb_session.post(
                            f"http://127.0.0.1:{target.port}/slack/events",
                            data=body,
                            headers=headers,
                            # Slack waits 3 s for an answer; a replica frozen meanwhile gets no retry.
                            timeout=aiohttp.ClientTimeout(total=3 if mode == "pauses" else None),
                        ) as answer:
                            answered = await answer.read()
                            acks.record(target.port, body, time.monotonic() - sent, answer.status)
                            return web.Response(
                                body=answered, status=answer.status, content_type=answer.content_type
                            )
                    except TimeoutError:
                        return web.Response(status=504)
                    except aiohttp.ClientError:
                        pass
                await asyncio.sleep(0.2)
            return web.Response(status=502)

        async def serving() -> bool:
            with contextlib.suppress(aiohttp.ClientError):
                async with lb_session.get(f"http://127.0.0.1:{cut_off.port}/healthz") as answer:
                    return answer.status == 200
            return False

        lb = web.Application()
        lb.router.add_post("/slack/events", balance)
        lb_runner = web.AppRunner(lb, access_log=None)
        await lb_runner.setup()
        lb_port = free_port()
        await web.TCPSite(lb_runner, "127.0.0.1", lb_port).start()
        fake.events_url = f"http://127.0.0.1:{lb_port}/slack/events"

        async def click(plan: Plan, person: str, option: int) -> None:
            """A person clicks until the message stops being interactive (a click lost with a dying
            replica or a failing Slack is clicked again); also some clicks after the end."""
            deadline = time.monotonic() + 90
            ts: str | None = None
            await asyncio.sleep(rng.uniform(0, 2))
            while time.monotonic() < deadline:
                if ts is None:
                    ts = _message_ts(fake, plan.env["ask_id"])
                    ended = await _retrying(lambda: agent.exists(plan.env["reply_to"]))
                    if ts is None and ended:
                        return  # ended before it was ever posted (cancelled, unavailable)
                message = fake.state.find_message(CHANNEL, ts) if ts is not None else None
                if message is not None and message.deleted:
                    ts, message = None, None  # withdrawn by its poster: the person clicks the copy left
                if message is not None:
                    if not interactive_elements(message.blocks):
                        return
                    with contextlib.suppress(Exception):
                        await fake.click(person, CHANNEL, message.ts, f"slack_ask:choose:{option}")
                        plan.clicked.add(person)
                await asyncio.sleep(rng.uniform(0.3, 1.0))

        async def cancel(plan: Plan) -> None:
            assert plan.cancel_after_s is not None
            await asyncio.sleep(plan.cancel_after_s)
            body = {"v": 1, "ask_id": plan.env["ask_id"], "reply_to": plan.env["reply_to"], "reason": "chaos"}
            await _retrying(lambda: agent.xadd(f"{prefix}:asks", {"cancel": json.dumps(body)}))
            plan.cancel_sent = True

        async def killer() -> None:
            nonlocal kills
            while not stop_chaos.is_set():
                await asyncio.sleep(rng.uniform(2.0, 4.0))
                if stop_chaos.is_set():
                    return
                victim = rng.choice(killable)
                victim.kill()
                kills += 1
                await asyncio.sleep(rng.uniform(0.3, 1.5))
                victim.start()

        async def pauser() -> None:
            """The pause mode's faults: a replica frozen past its leases every few seconds, aimed at
            a held chat.postMessage reply, a click just routed to it, an ask's deadline, or nothing."""
            prng = pauses.rng

            def on_post(request: web.Request) -> None:
                if pauses.aim == "reply":
                    peer = request.transport.get_extra_info("peername") if request.transport else None
                    pauses.seen("reply", pauses.bot_on_port(int(peer[1])) if peer else None)

            faults.on_post = on_post
            while not stop_chaos.is_set():
                await asyncio.sleep(prng.uniform(2.5, 4.5))
                if stop_chaos.is_set():
                    return
                kind = prng.choice(["reply", "reply", "click", "deadline", "any"])
                if kind in ("reply", "click"):
                    if kind == "reply":
                        fake.reply_latency["chat.postMessage"] = 1.5  # Slack holds its answers
                    pauses.aim = kind
                    for _ in range(30):  # aimed for up to 3 s, else it lands on nothing in particular
                        await asyncio.sleep(0.1)
                        if pauses.aim is None:
                            break
                    pauses.aim = None
                    await asyncio.sleep(0.2)
                    fake.reply_latency.pop("chat.postMessage", None)
                    continue
                if kind == "deadline":
                    now = time.monotonic()
                    due = [
                        p.sent_at + p.env["timeout_ms"] / 1000 - now
                        for p in plans
                        if p.kind == "timeout" and p.sent_at
                    ]
                    soon = [d for d in due if 0 < d < 4]
                    if soon:
                        await asyncio.sleep(min(soon))
                victim = live_bot()
                if victim is not None:
                    pauses.pause(victim, kind)

        async def slack_weather() -> None:
            while not stop_chaos.is_set():
                await asyncio.sleep(rng.uniform(6, 10))
                faults.rate_limited_until = time.monotonic() + rng.uniform(1.0, 2.5)

        async def redis_restart() -> None:
            await asyncio.sleep(SEND_FOR_S / 2)
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, lambda: server.stop(signal.SIGKILL))
            await asyncio.sleep(0.5)
            await loop.run_in_executor(None, server.start)

        workers: list[asyncio.Task[None]] = []
        if mode == "kills":  # the kills run also partitions replica 0 from Redis
            faulters = [killer(), partitioner(proxy, rng, stop_chaos, partitions, serving)]
        else:
            faulters = [pauser()]
        chaos = [asyncio.create_task(f) for f in [*faulters, slack_weather()]]
        restart = asyncio.create_task(redis_restart())
        try:
            for plan in plans:
                await _retrying(lambda plan=plan: agent.xadd(f"{prefix}:asks", {"ask": json.dumps(plan.env)}))
                plan.sent_at = time.monotonic()
                for person, option in plan.clickers:
                    workers.append(asyncio.create_task(click(plan, person, option)))
                if plan.cancel_after_s is not None:
                    workers.append(asyncio.create_task(cancel(plan)))
                await asyncio.sleep(SEND_FOR_S / ASKS)
            await restart
            await asyncio.sleep(5)  # chaos goes on a little after the last ask
            stop_chaos.set()
            await asyncio.gather(*chaos)  # the partitioner heals its cut as it stops
            pauses.resume_all()
            fake.reply_latency.clear()
            faults.on = False
            for bot in bots:
                if not bot.alive:
                    bot.start()
            _, stragglers = await asyncio.wait(workers, timeout=60)
            for plan in plans:  # what the record says about an ask whose clickers still see a button
                ts = _message_ts(fake, plan.env["ask_id"])
                shown = fake.state.find_message(CHANNEL, ts) if ts else None
                if stragglers and shown is not None and interactive_elements(shown.blocks):
                    where = f"{prefix}:{{{plan.env['reply_to']}}}"
                    events = await _trail(agent, prefix, plan.env)
                    state = await agent.hget(f"{where}:ask:{plan.env['ask_id']}", "state")
                    print(f"stuck {plan.kind} {plan.env['ask_id']} {ts} {state!r}: {events}")
            assert not stragglers, f"{len(stragglers)} clickers still see a live button 60 s after the chaos"

            results: dict[str, list[dict[str, Any]]] = {p.env["ask_id"]: [] for p in plans}

            async def collect() -> None:
                for plan in plans:
                    while (
                        raw := await _retrying(lambda plan=plan: agent.lpop(plan.env["reply_to"]))
                    ) is not None:
                        results[plan.env["ask_id"]].append(json.loads(raw))

            deadline = time.monotonic() + 40
            while time.monotonic() < deadline and any(not r for r in results.values()):
                await collect()
                await asyncio.sleep(0.5)
            await asyncio.sleep(2)
            await collect()

            def live_buttons() -> list[str]:
                return [
                    m.ts for m in fake.messages(CHANNEL) if not m.thread_ts and interactive_elements(m.blocks)
                ]

            for _ in range(60):  # the sweeper finishes ended asks' messages: up to 30 s
                if not live_buttons():
                    break
                await asyncio.sleep(0.5)
            problems = await check_prefix(agent, prefix, reclaim_idle_ms=1500 + 2 * 3000 + 1000)
            settle = time.monotonic() + 20
            while problems and time.monotonic() < settle:
                await asyncio.sleep(0.5)
                problems = await check_prefix(agent, prefix, reclaim_idle_ms=1500 + 2 * 3000 + 1000)

            missing = [a for a, r in results.items() if not r]
            doubled = [a for a, r in results.items() if len(r) > 1]
            # A crash can leave two copies of an ask (both redrawn); a pause never may: the frozen
            # replica's copy is withdrawn when it resumes (fenced).
            copies = _live_copies(fake, plans)
            two_copies = [a for a, n in copies.items() if n > 1] if mode == "pauses" else []
            wrong = [f"{p.kind} {p.env['ask_id']}: {w}" for p in plans if (w := _inconsistent(p, results))]
            outcomes = Counter(r[0]["outcome"] for r in results.values() if r)
            silent = unanswered(acks, fake, results, cut_off.port)
            slow = [f"{t:.2f}s" for t in acks.seconds if t >= ACK_LIMIT_S]
            told = Counter(str(r.body.get("text") or "")[:24] for r in fake.state.responses)
            to_cut_off = sum(c[0] == cut_off.port for c in acks.clicks.values())
            print(
                f"partition seed={seed} cuts={dict(partitions)} held_chunks={proxy.blackholed} "
                f"clicks={len(acks.clicks)} to_cut_off={to_cut_off} "
                f"told={dict(told)} max_ack={max(acks.seconds, default=0):.2f}s slow_acks={len(slow)} "
                f"not_acked={len(acks.refused)} unanswered={len(silent)}"
            )
            print(
                f"chaos seed={seed} mode={mode} asks={ASKS} elapsed={time.monotonic() - started:.0f}s "
                f"kills={kills} pauses={dict(pauses.count)} two_copies={len(two_copies)} "
                f"bot_starts={sum(b.starts for b in bots)} slack_calls={len(fake.state.calls)} "
                f"faults={dict(faults.counts)} outcomes={dict(outcomes)} missing={len(missing)} "
                f"doubled={len(doubled)} inconsistent={len(wrong)} "
                f"live_buttons_after_end={len(live_buttons())} "
                f"invariant_problems={len(problems)}"
            )
            for ts in live_buttons():  # what the record says about a message left interactive
                message = fake.state.find_message(CHANNEL, ts)
                ask = next((p for p in plans if message and p.env["ask_id"] in str(message.blocks)), None)
                if ask is not None:
                    tag = ask.env["reply_to"]
                    record = await agent.hgetall(f"{prefix}:{{{tag}}}:ask:{ask.env['ask_id']}")
                    audit = await _trail(agent, prefix, ask.env)
                    print(f"live {ts}: {ask.kind} {record.get(b'msgs')} {record.get(b'finalized')} {audit}")
            for ask_id in two_copies:  # what the record says about an ask left with two live copies
                plan = next(p for p in plans if p.env["ask_id"] == ask_id)
                where = f"{prefix}:{{{plan.env['reply_to']}}}"
                audit = await _trail(agent, prefix, plan.env)
                msgs = await agent.hget(f"{where}:ask:{ask_id}", "msgs")
                print(f"two copies {ask_id} {plan.kind} msgs={msgs!r} audit={audit}")
            for problem in problems:
                print(f"problem {problem.kind} {problem.key}: {problem.detail}")
                stale = next((p for p in plans if p.env["ask_id"] in problem.detail), None)
                if stale is not None:
                    where = f"{prefix}:{{{stale.env['reply_to']}}}"
                    audit = await _trail(agent, prefix, stale.env)
                    msgs = await agent.hget(f"{where}:ask:{stale.env['ask_id']}", "msgs")
                    print(f"  {stale.kind} msgs={msgs!r} audit={[a['event'] for a in audit]}")
            for plan in [p for p in plans if _inconsistent(p, results)][:5]:  # what happened to a wrong one
                events = await _trail(agent, prefix, plan.env)
                print(f"wrong {plan.kind} {plan.env['ask_id']} clickers={plan.clickers}: {events}")
            assert not missing, f"{len(missing)} asks without a result: {missing[:5]}"
            assert not doubled, f"{len(doubled)} asks with more than one result: {doubled[:5]}"
            assert not wrong, "\n".join(wrong[:10])
            assert not live_buttons(), f"messages of ended asks still interactive: {live_buttons()[:5]}"
            assert not problems, "\n".join(f"{p.kind} {p.key}: {p.detail}" for p in problems[:10])
            assert not two_copies, f"asks with two live copies: {two_copies[:5]}"
            if mode == "kills":  # a frozen replica cannot answer Slack in 3 s: that is the pause mode's fault
                assert not slow, f"answers to Slack that took {ACK_LIMIT_S} s or more: {slow[:10]}"
                assert not acks.refused, f"requests not acked: {acks.refused[:10]}"
                assert not silent, "\n".join(silent[:10])
        finally:
            stop_chaos.set()
            for task in [*workers, *chaos, restart]:
                task.cancel()
            await asyncio.gather(*workers, *chaos, restart, return_exceptions=True)
            pauses.resume_all()  # a stopped process would hold SIGTERM until SIGCONT
            for bot in bots:
                bot.stop()
            await lb_runner.cleanup()
            await lb_session.close()
            await proxy.stop()
            await agent.aclose()
            await fake.stop()


def _live_copies(fake: FakeSlack, plans: list[Plan]) -> Counter[str]:
    """How many messages each ask was posted as that are still in the channel (not deleted): an ended
    message no longer names its ask, so the posts Slack accepted say which ask each one carried."""
    live = {m.ts for m in fake.messages(CHANNEL) if not m.thread_ts}
    ids = [p.env["ask_id"] for p in plans]
    copies: Counter[str] = Counter()
    for call in fake.find_calls("chat.postMessage"):
        ts = (call.response or {}).get("ts")
        if call.status == 200 and ts in live and not call.params.get("thread_ts"):
            blocks = json.dumps(call.params.get("blocks"))
            copies.update(a for a in ids if a in blocks)
    return copies


def _message_ts(fake: FakeSlack, ask_id: str) -> str | None:
    for message in fake.messages(CHANNEL):
        if not message.thread_ts and ask_id in json.dumps(message.blocks):
            return message.ts
    return None


def _inconsistent(plan: Plan, results: dict[str, list[dict[str, Any]]]) -> str | None:
    """Why the ask's one result does not fit what happened to it (None when it fits)."""
    got = results[plan.env["ask_id"]]
    if len(got) != 1:
        return None  # counted as missing or doubled
    result = got[0]
    outcome = result["outcome"]
    # Slack failing past the delivery window may make any ask that needed a post unavailable.
    allowed = {
        "click": {"answered", "unavailable"},
        "timeout": {"timeout", "unavailable"},
        "cancel": {"cancelled", "unavailable"},
        "unavailable": {"unavailable"},
        "race": {"answered", "cancelled", "unavailable"},
    }[plan.kind]
    if outcome not in allowed:
        return f"outcome {outcome!r}, expected one of {sorted(allowed)}"
    if outcome == "answered":
        responder = (result.get("responder") or {}).get("id")
        options = dict(plan.clickers)
        if responder not in options:
            return f"answered by {responder!r}, who did not click"
        selected = result["answers"][0]["selected"]
        if selected != [options[responder]]:
            return f"{responder} clicked option {options[responder]}, the result says {selected}"
    if outcome == "cancelled" and plan.kind == "race" and not plan.cancel_sent:
        return "cancelled without a cancel"
    return None
