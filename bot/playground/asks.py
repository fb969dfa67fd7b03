"""The asks in the bot's store, as the playground shows them: pending ones with a countdown and a
Withdraw button, and the results of ended ones wherever they were sent from.

Results are read from the store (each ended ask keeps its result for the retention period), not only
from reply lists: an ask sent with ``slack-ask ask`` has a reply list of its own, which the command
empties when it takes the result, yet the panel should show it too.

    GET  /ui/pending    {"now_ms", "asks": [...]}: pending asks, oldest first
    POST /ui/withdraw   {ask_id}: the agent's cancel envelope for it (protocol section 8)
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, Final, Protocol

from aiohttp import web

from bot.storage.keys import glob_escape
from bot.storage.store import LoadedAsk, Store

__all__ = [
    "MAX_LISTED",
    "WITHDRAW_REASON",
    "AsksHost",
    "WithdrawError",
    "install",
    "pending_asks",
    "stored_results",
    "withdraw",
]

MAX_LISTED: Final = 100
WITHDRAW_REASON: Final = "withdrawn from the playground"


class AsksHost(Protocol):
    """What the routes need from the running playground."""

    @property
    def store(self) -> Store: ...


class WithdrawError(Exception):
    """The ask cannot be withdrawn (unknown, or already ended); the message says which."""


async def _asks(store: Store) -> AsyncIterator[LoadedAsk]:
    """Every ask the store still knows (pending and ended), through the id index; at most a bounded
    number, which a playground never reaches."""
    head = store.keys.index("")
    seen = 0
    async for key in store.redis.scan_iter(match=f"{glob_escape(head)}*", count=500):
        ask_id = (key.decode() if isinstance(key, bytes) else str(key))[len(head) :]
        tag = await store.lookup_tag(ask_id)
        loaded = None if tag is None else await store.load(tag, ask_id)
        if loaded is not None:
            yield loaded
            seen += 1
            if seen >= 10 * MAX_LISTED:
                return


def _summary(loaded: LoadedAsk) -> dict[str, Any]:
    rec = loaded.record
    if rec.request is not None:
        prompts = [q.question for q in rec.request.questions]
    elif rec.form is not None:
        prompts = [rec.form.title or q.prompt for q in rec.form.questions[:1]]
    else:
        prompts = []
    responders = rec.responders
    return {
        "ask_id": rec.ask_id,
        "state": loaded.state,
        "format": rec.format,
        "question": prompts[0] if prompts else "",
        "questions": len(prompts) if rec.request is not None else rec.question_count,
        "route": rec.route_text,
        "reply_to": rec.reply_to,
        "created_ms": rec.created_ms,
        "deadline_ms": rec.deadline_ms,
        "on_timeout": rec.on_timeout,
        # Who may answer, as ids: the page names them from the workspace it already has.
        "responders": None
        if responders is None or not (responders.users or responders.usergroups)
        else {"users": list(responders.users), "usergroups": list(responders.usergroups)},
        "approval": None if rec.approval is None else rec.approval.count,
        # Where it was posted, so the page can say on those messages who may answer (Slack does not).
        "messages": [{"channel": m.channel, "ts": m.ts} for m in loaded.messages],
    }


async def pending_asks(store: Store) -> dict[str, Any]:
    """Pending asks, oldest first, with the Redis server's clock for the page's countdowns."""
    pending = [_summary(loaded) async for loaded in _asks(store) if loaded.state != "ended"]
    pending.sort(key=lambda ask: (int(ask["created_ms"]), str(ask["ask_id"])))
    return {"now_ms": await store.server_time_ms(), "asks": pending[:MAX_LISTED]}


async def stored_results(store: Store) -> list[dict[str, Any]]:
    """The result of every ended ask the store keeps, tagged with its reply list as ``_list``."""
    found = []
    async for loaded in _asks(store):
        if loaded.state == "ended" and loaded.result is not None:
            found.append({**loaded.result.envelope.to_wire(), "_list": loaded.record.reply_to})
    return found


async def withdraw(store: Store, ask_id: str) -> str:
    """Send the agent's cancel envelope for a pending ask onto the stream; returns its reply_to.

    Exactly what the agent that owns the ask would send (its own ``reply_to``), so the bot ends it
    as ``cancelled`` the way it ends any agent's cancel."""
    loaded = await store.find(ask_id)
    if loaded is None:
        raise WithdrawError(f"No ask {ask_id!r} (never sent, or its retention has ended)")
    if loaded.state == "ended":
        raise WithdrawError(f"{ask_id} already ended ({loaded.outcome}); there is nothing to withdraw")
    envelope = {"v": 1, "ask_id": ask_id, "reply_to": loaded.record.reply_to, "reason": WITHDRAW_REASON}
    await store.redis.xadd(store.keys.asks, {"cancel": json.dumps(envelope)})
    return loaded.record.reply_to


def install(app: web.Application, host: AsksHost) -> None:
    """The two routes on the fake's app (under /ui/, so the page's same-origin guard covers them)."""

    async def pending(request: web.Request) -> web.StreamResponse:
        return web.json_response(await pending_asks(host.store))

    async def withdraw_route(request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return web.json_response({"ok": False, "error": "the request body is not JSON"}, status=400)
        ask_id = body.get("ask_id") if isinstance(body, dict) else None
        if not isinstance(ask_id, str) or not ask_id:
            return web.json_response({"ok": False, "error": "ask_id is required"}, status=400)
        try:
            reply_to = await withdraw(host.store, ask_id)
        except WithdrawError as exc:
            return web.json_response({"ok": False, "error": str(exc)}, status=409)
        return web.json_response({"ok": True, "ask_id": ask_id, "reply_to": reply_to})

    app.add_routes([web.get("/ui/pending", pending), web.post("/ui/withdraw", withdraw_route)])
