"""The Workflow Builder step's part of Redis: one record per step execution, when each is looked at
next, and the step's reply list (bot/workflow.py; docs/workflow-step.md, "Exactly once").

An execution's record is written (``step_begin.lua``) before its ask is sent, with its first look
already scheduled; its ask's result lands on ``P:reply:workflow-step`` like any agent's, and
``step_take.lua`` takes it off that list and claims the execution in one atomic step. Whoever holds a
claim and dies leaves the execution due again when the lease ends, and a sweep (``claim_due.lua`` on
the step's own zset) completes it from the ask's stored result. ``step_done.lua`` ends it: its look
goes, its token is forgotten.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.storage.base import StoreBase
from bot.storage.records import _s

__all__ = ["StepRecord", "StepStore"]


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One step execution as Redis holds it."""

    ask_id: str
    execution_id: str
    token: str | None
    """The just-in-time token ``function_executed`` brought (forgotten once the step is done)."""
    token_ms: int
    """When that token arrived (Redis time): Slack lets it live 15 minutes at most."""
    envelope: str
    """The ask envelope the step sends ('' when its inputs were refused)."""
    refusal: str
    """Why the inputs were refused ('' when they were good): the step ends with completeError."""
    state: str
    """``pending`` or ``done``."""
    how: str = ""


class StepStore(StoreBase):
    """Redis access for the step's executions (all in the slot of the step's reply list)."""

    async def begin(
        self,
        ask_id: str,
        *,
        execution_id: str,
        token: str,
        envelope: str,
        refusal: str,
        first_look_ms: int,
        ttl_ms: int,
    ) -> bool:
        """Record a new execution (its first look scheduled in the same step); False when Slack sent
        this execution before and it is recorded already."""
        [reply] = await self._run(
            [
                self._script(
                    "step_begin",
                    [self.keys.step(ask_id), self.keys.step_due],
                    [ask_id, execution_id, token, envelope, refusal, first_look_ms, ttl_ms],
                )
            ]
        )
        return _s(reply[0]) == "new"

    async def send_ask(self, envelope: str) -> None:
        """The step's ask onto the intake stream, as any agent sends one (protocol section 2)."""
        await self.redis.xadd(self.keys.asks, {"ask": envelope})

    async def load(self, ask_id: str) -> StepRecord | None:
        raw: dict[Any, Any] = await self.redis.hgetall(self.keys.step(ask_id))
        if not raw:
            return None
        h = {_s(k): _s(v) for k, v in raw.items()}
        return StepRecord(
            ask_id=ask_id,
            execution_id=h.get("exec", ""),
            token=h.get("token") or None,
            token_ms=int(h.get("token_ms") or 0),
            envelope=h.get("env", ""),
            refusal=h.get("fail", ""),
            state=h.get("state", "pending"),
            how=h.get("how", ""),
        )

    async def take(self, *, limit: int, lease_ms: int) -> tuple[int, list[tuple[str, str]]]:
        """Results waiting on the step's reply list, each execution claimed for ``lease_ms``:
        Redis time and (ask_id, result JSON) pairs."""
        [reply] = await self._run(
            [self._script("step_take", [self.keys.step_replies, self.keys.step_due], [limit, lease_ms])],
            confirm=False,
        )
        now = int(_s(reply[0]))
        items = [_s(x) for x in reply[1:]]
        return now, list(zip(items[0::2], items[1::2], strict=True))

    async def claim_due(self, *, limit: int, lease_ms: int) -> tuple[int, list[str]]:
        """Executions whose look is due, each claimed for ``lease_ms`` (the timers' own script)."""
        [reply] = await self._run(
            [self._script("claim_due", [self.keys.step_due], [limit, lease_ms])], confirm=False
        )
        return int(_s(reply[0])), [_s(m) for m in reply[1:]]

    async def later(self, ask_id: str, *, claimed_until_ms: int, at_ms: int) -> bool:
        """Move a claimed execution's next look to ``at_ms``, unless a result was taken meanwhile."""
        [moved] = await self._run(
            [self._script("step_later", [self.keys.step_due], [claimed_until_ms, at_ms, ask_id])],
            confirm=False,
        )
        return bool(moved)

    async def done(self, ask_id: str, how: str) -> bool:
        """The execution is over (completed, or no longer running at Slack); True the first time."""
        [first] = await self._run(
            [
                self._script(
                    "step_done",
                    [self.keys.step(ask_id), self.keys.step_due],
                    [ask_id, how, self.retention_ms],
                )
            ]
        )
        return bool(first)
