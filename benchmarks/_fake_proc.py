"""The fake Slack in a process of its own, driven over a pipe: it answers the bot's Web API calls and
plays the people who click (signed ``block_actions`` POSTs to the bot, timed to their HTTP answer).

It can hold ``chat.postMessage`` calls unanswered (a replica then holds deliveries it cannot finish),
and click every new post as soon as it lands (the recovery measurement).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection as Pipe
from typing import Any

from benchmarks._bot_proc import SECRET
from benchmarks._common import Child, harness_gc_off

CHANNELS = {"C0BENCH": "bench", "C0KILL": "recovery"}
USER = "U0ALICE"


@dataclass
class Post:
    ask_id: str
    channel: str
    ts: str
    at: float


@dataclass
class Book:
    """What the fake has seen, indexed as its calls come in (only new calls are read each time)."""

    id_re: re.Pattern[str]
    cursor: int = 0
    posts: dict[str, list[Post]] = field(default_factory=dict)  # ask id -> its posts (a second: a duplicate)
    updated: set[tuple[str, str]] = field(default_factory=set)
    watch: str | None = None  # the channel whose new posts are kept for the auto-clicker
    new_posts: list[Post] = field(default_factory=list)
    redrawn: dict[tuple[str, str], asyncio.Event] = field(default_factory=dict)  # a clicker waits on it

    def read(self, fake: Any) -> None:
        calls = fake.state.calls
        for call in calls[self.cursor :]:
            if not call.ok:
                continue
            channel = str(call.params.get("channel") or "")
            if call.method == "chat.postMessage" and channel in CHANNELS:
                found = self.id_re.search(json.dumps(call.params, default=str))
                if found is not None:
                    post = Post(found.group(0), channel, str(call.response["ts"]), call.at)
                    self.posts.setdefault(post.ask_id, []).append(post)
                    if channel == self.watch:
                        self.new_posts.append(post)
            elif call.method == "chat.update":
                target = (channel, str(call.params.get("ts")))
                self.updated.add(target)
                if target in self.redrawn:
                    self.redrawn[target].set()
        self.cursor = len(calls)


def _first_button(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    for block in blocks:
        for element in block.get("elements") or []:
            if element.get("type") == "button":
                return dict(element)
        accessory = block.get("accessory") or {}
        if accessory.get("type") == "button":
            return dict(accessory)
    raise LookupError("no button in the message")


async def _click(fake: Any, channel: str, ts: str) -> tuple[float, float, int]:
    """Click the first button of message ``ts``: (when the click was sent, seconds to the bot's HTTP
    answer, its status)."""
    message = fake.state.find_message(channel, ts)
    if message is None:
        raise LookupError(f"no message {ts} in {channel}")
    button = _first_button(message.blocks)
    sent = time.time()
    started = time.perf_counter()
    response = await fake.click(USER, channel, ts, button["action_id"], value=button.get("value"))
    return sent, time.perf_counter() - started, response.status


def _hold_middleware(gate: dict[str, Any]) -> Callable[..., Awaitable[Any]]:
    from aiohttp import web

    @web.middleware
    async def hold(request: web.Request, handler: Callable[..., Awaitable[Any]]) -> Any:
        if gate["on"] and request.path.endswith("/chat.postMessage"):
            gate["held"] += 1
            try:
                await gate["released"].wait()
            finally:
                gate["held"] -= 1
            if request.transport is None or request.transport.is_closing():
                # Its replica was killed while Slack held the call: the post never happened.
                gate["dropped"] += 1
                return web.Response(status=503)
        return await handler(request)

    return hold


def _redraw_middleware(book: Book, fake: Any) -> Callable[..., Awaitable[Any]]:
    """Wakes the clickers whose message a ``chat.update`` just redrew (``Book.redrawn``)."""
    from aiohttp import web

    @web.middleware
    async def redrawn(request: web.Request, handler: Callable[..., Awaitable[Any]]) -> Any:
        response = await handler(request)
        if book.redrawn and request.path.endswith("/chat.update"):
            book.read(fake)
        return response

    return redrawn


def _main(pipe: Pipe, id_pattern: str) -> None:
    async def run() -> None:
        from bot.playground import FakeSlack

        fake = FakeSlack.with_demo_workspace(signing_secret=SECRET)
        for channel, name in CHANNELS.items():
            fake.add_channel(channel, name, members=[USER, "U0BOB"])
        gate: dict[str, Any] = {"on": False, "held": 0, "dropped": 0, "released": asyncio.Event()}
        fake.app.middlewares.append(_hold_middleware(gate))
        book = Book(re.compile(id_pattern))
        fake.app.middlewares.append(_redraw_middleware(book, fake))
        await fake.start()
        harness_gc_off()
        autoclicked: dict[str, tuple[float, float, int]] = {}
        auto: asyncio.Task[None] | None = None
        loop = asyncio.get_running_loop()
        pipe.send(("ready", {"api_url": fake.api_url, "bot_token": fake.bot_token}))

        async def autoclick(channel: str) -> None:
            clicks: set[asyncio.Task[None]] = set()
            while True:
                book.read(fake)
                for post in book.new_posts:
                    if post.channel == channel and post.ask_id not in autoclicked:
                        autoclicked[post.ask_id] = (0.0, 0.0, 0)

                        async def one(p: Post = post) -> None:
                            autoclicked[p.ask_id] = await _click(fake, p.channel, p.ts)

                        task = asyncio.create_task(one())
                        clicks.add(task)
                        task.add_done_callback(clicks.discard)
                book.new_posts.clear()
                await asyncio.sleep(0.005)

        while True:
            command, arg = await loop.run_in_executor(None, pipe.recv)
            if command == "events_url":
                fake.events_url = arg
                pipe.send(None)
            elif command == "posts":  # arg: ask ids; answers once each has a post (or the timeout)
                ids, timeout = arg
                deadline = time.monotonic() + timeout
                while True:
                    book.read(fake)
                    if all(a in book.posts for a in ids) or time.monotonic() > deadline:
                        break
                    await asyncio.sleep(0.005)
                pipe.send(
                    {a: [(p.channel, p.ts, p.at) for p in book.posts[a]] for a in ids if a in book.posts}
                )
            elif command == "click":  # arg: [(channel, ts)], concurrency, a clicker's next waits for
                targets, concurrency, until = arg  # "ack" (the HTTP answer) or "redraw" (the ended message)
                slots = asyncio.Semaphore(concurrency)

                async def clicked(
                    channel: str, ts: str, slots: asyncio.Semaphore = slots, until: str = until
                ) -> Any:
                    async with slots:
                        seen = book.redrawn.setdefault((channel, ts), asyncio.Event())
                        book.read(fake)
                        out = await _click(fake, channel, ts)
                        if until == "redraw":
                            with contextlib.suppress(TimeoutError):
                                await asyncio.wait_for(seen.wait(), 30)
                        del book.redrawn[(channel, ts)]
                        return out

                pipe.send(await asyncio.gather(*(clicked(c, t) for c, t in targets)))
            elif command == "updated":  # arg: [(channel, ts)], timeout: answers once each was redrawn
                targets, timeout = arg
                deadline = time.monotonic() + timeout
                while True:
                    book.read(fake)
                    done = sum(1 for t in targets if tuple(t) in book.updated)
                    if done == len(targets) or time.monotonic() > deadline:
                        break
                    await asyncio.sleep(0.01)
                pipe.send(done)
            elif command == "message":  # arg: (channel, ts): its text and blocks, as the bot posted them
                found = fake.state.find_message(*arg)
                pipe.send(None if found is None else {"text": found.text, "blocks": found.blocks})
            elif command == "calls":
                pipe.send(Counter(c.method for c in fake.state.calls))
            elif command == "hold":
                gate["on"] = bool(arg)
                if arg:
                    gate["released"].clear()
                else:
                    gate["released"].set()
                pipe.send(None)
            elif command == "held":
                pipe.send((gate["held"], gate["dropped"]))
            elif command == "autoclick":
                if auto is not None:
                    auto.cancel()
                book.read(fake)
                book.new_posts.clear()
                book.watch = arg or None
                auto = asyncio.create_task(autoclick(arg)) if arg else None
                pipe.send(None)
            elif command == "autoclicked":
                pipe.send(dict(autoclicked))
            elif command == "stop":
                if auto is not None:
                    auto.cancel()
                gate["released"].set()
                await fake.stop()
                pipe.send("stopped")
                return

    asyncio.run(run())


class FakeProc(Child):
    def __init__(self, id_pattern: str) -> None:
        super().__init__(_main, id_pattern)

    async def start(self) -> FakeProc:
        await self._spawn(120, "the fake Slack process")
        return self
