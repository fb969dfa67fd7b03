"""The bot's side of the wire protocol for client tests: a result as the bot would push it, and a
tiny bot that reads ``P:asks`` with XREAD and pushes results with RPUSH."""

from __future__ import annotations

import json
from typing import Any

import redis.asyncio as aioredis

from contract import build_details, narrate, normalize_ask_request

__all__ = ["FakeBot", "make_result"]


def make_result(envelope: dict[str, Any], outcome: str = "answered", **extra: Any) -> dict[str, Any]:
    """A result envelope as the bot would push it (pi-question format, first option on answered)."""
    questions = normalize_ask_request(envelope["request"]).questions
    status = {"answered": "answered", "error": "cancelled"}.get(outcome, outcome)
    answers = [
        {"id": q.id, "status": status, "selected": [0] if status == "answered" else []} for q in questions
    ]
    surface = "none" if outcome == "unavailable" else "host"
    delivery = {"surface": surface, "degraded": False}
    error = None
    if outcome == "error":
        error = {"code": "timeout_error", "message": "the question timed out and no default is allowed."}
    elif outcome == "unavailable":
        error = {
            "code": "channel_not_found",
            "message": "Slack answered channel_not_found when posting to C0",
        }
    result: dict[str, Any] = {
        "v": 1,
        "ask_id": envelope["ask_id"],
        "format": "pi-question",
        "outcome": outcome,
        "answers": answers,
        "text": f"Error: {error['message']}"
        if outcome == "error" and error
        else narrate(questions, answers, delivery),
        "details": {} if outcome == "error" else build_details(questions, answers, delivery),
        "delivery": delivery,
        "responder": {"id": "U0HUMAN", "name": "Ada"} if outcome == "answered" else None,
        "votes": None,
        "via": "button" if outcome == "answered" else None,
        "slack": None,
        "error": error,
        "created_at": "2026-01-01T00:00:00.000Z",
        "resolved_at": "2026-01-01T00:00:01.000Z",
    }
    result.update(extra)
    return result


class FakeBot:
    """Plays the bot's part of the protocol: reads ``P:asks`` with XREAD, pushes results with RPUSH."""

    def __init__(self, redis: aioredis.Redis, prefix: str) -> None:
        self.redis = redis
        self.stream = f"{prefix}:asks"
        self.last_id = "0"

    async def next_entry(self, timeout_s: float = 5.0) -> tuple[str, dict[str, Any]]:
        """The next stream entry as (field, envelope): field is ``ask`` or ``cancel``."""
        reply = await self.redis.xread({self.stream: self.last_id}, count=1, block=int(timeout_s * 1000))
        assert reply, f"nothing arrived on {self.stream} within {timeout_s}s"
        entry_id, fields = reply[0][1][0]
        self.last_id = entry_id.decode()
        ((field, value),) = fields.items()
        return field.decode(), json.loads(value)

    async def next_ask(self, timeout_s: float = 10.0) -> dict[str, Any]:
        """The envelope of the next stream entry, which must be an ask."""
        field, envelope = await self.next_entry(timeout_s)
        assert field == "ask", f"expected an ask, got a {field}"
        return envelope

    async def push(self, reply_to: str, result: dict[str, Any] | str) -> None:
        await self.redis.rpush(reply_to, result if isinstance(result, str) else json.dumps(result))

    async def answer(self, envelope: dict[str, Any], outcome: str = "answered") -> dict[str, Any]:
        """Push the result of ``envelope``'s ask with ``outcome``; returns it."""
        result = make_result(envelope, outcome)
        await self.push(envelope["reply_to"], result)
        return result

    async def answer_next(self, outcome: str = "answered") -> dict[str, Any]:
        return await self.answer(await self.next_ask(5.0), outcome)
