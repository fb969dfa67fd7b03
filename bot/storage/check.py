"""The invariant check: scans one prefix and reports every broken invariant of the bot's own state
(guarantee 10.5: "the bot's own keys keep their types and lifetimes"). ``slack-ask check`` prints
it; the end-to-end tests run it after every test.

What must hold (bot/storage/keys.py documents the keys):

- every key of the bot has its type (``P:asks`` a stream, ``P:due`` a zset, an ask record a hash, ...);
- every key but the shared ``P:asks``, ``P:dead`` and ``P:due`` has a TTL;
- a pending ask has a timer (every ask has a deadline), and a pending Workflow Builder step its next look;
- a posted ask has a message (nobody posts it again: without one it would wait unseen);
- no timer is left for an ask that ended and whose messages are finished;
- no stream entry stays pending longer than the reclaim idle time;
- a ``P:chan`` member is an ask that can still be dismissed (not ended and finished, not gone);
- an id index entry has its record;
- a person's Home tab index holds pending asks only, and every person an ask names has its row
  (bot/storage/home_check.py; ``fix=True`` repairs these).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from redis.asyncio import Redis

from bot.storage.home_check import check_home, home_key_type
from bot.storage.keys import GROUP, Keys, due_member, glob_escape, parse_due_member

__all__ = ["Problem", "check_prefix"]

_BATCH = 500


@dataclass(frozen=True, slots=True)
class Problem:
    kind: str
    """``wrong_type``, ``no_ttl``, ``no_timer``, ``stale_timer``, ``posted_without_message``,
    ``stuck_entry``, ``stale_channel_member``, ``index_without_record``, ``stale_home_row``,
    ``missing_home_row``."""
    key: str
    detail: str

    def to_json(self) -> dict[str, str]:
        return asdict(self)


def _s(value: Any) -> str:
    return value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else str(value)


def _expected_type(keys: Keys, key: str) -> tuple[str, bool] | None:
    """``(type, needs_ttl)`` of a key of the bot's, or None for keys that are not the bot's own
    (agents' ``P:reply:*`` lists and anything unknown)."""
    p = keys.prefix
    fixed = {keys.asks: "stream", keys.dead: "stream", keys.due: "zset"}
    if key in fixed:
        return fixed[key], False
    rest = key[len(p) + 1 :]
    if rest.startswith("reply:"):
        return None
    if rest.startswith("id:"):
        return "string", True
    if rest.startswith("chan:"):
        return "set", True
    if rest.startswith("rate:"):
        return "string", True
    match = re.fullmatch(r"\{[^}]*\}:(ask|audit|cancel|step):.+", rest, flags=re.DOTALL)
    if match is not None:
        return {"ask": "hash", "audit": "list", "cancel": "hash", "step": "hash"}[match.group(1)], True
    if key == keys.step_due:
        return "zset", False
    return home_key_type(keys, key)


async def _pipelined(redis: Redis, calls: Sequence[tuple[str, tuple[Any, ...]]]) -> list[Any]:
    out: list[Any] = []
    for start in range(0, len(calls), _BATCH):
        async with redis.pipeline(transaction=False) as pipe:
            for name, args in calls[start : start + _BATCH]:
                getattr(pipe, name)(*args)
            out.extend(await pipe.execute(raise_on_error=False))
    return out


async def check_prefix(
    redis: Redis, prefix: str, *, reclaim_idle_ms: int = 60_000, fix: bool = False
) -> list[Problem]:
    """Every broken invariant under ``prefix`` (an empty list when all hold). ``fix``: the ones that
    can be repaired without Slack (the Home tab's index drift) are, as they are found."""
    keys = Keys(prefix)
    found = sorted({_s(k) async for k in redis.scan_iter(match=f"{glob_escape(prefix)}:*", count=1000)})
    problems: list[Problem] = []
    kinds = await _pipelined(redis, [("type", (k,)) for k in found])
    ttls = await _pipelined(redis, [("pttl", (k,)) for k in found])
    records: dict[tuple[str, str], str] = {}  # (ask_id, tag) -> record key, for the hashes that are right
    for key, kind, ttl in zip(found, kinds, ttls, strict=True):
        expected = _expected_type(keys, key)
        if expected is None:
            continue
        want, needs_ttl = expected
        actual = _s(kind)
        if actual != want:
            problems.append(Problem("wrong_type", key, f"is a {actual}, should be a {want}"))
            continue
        if needs_ttl and isinstance(ttl, int) and ttl == -1:
            problems.append(Problem("no_ttl", key, "has no TTL"))
        match = re.fullmatch(r"\{([^}]*)\}:ask:(.+)", key[len(prefix) + 1 :], flags=re.DOTALL)
        if match is not None:
            records[(match.group(2), match.group(1))] = key

    # Asks and their timers.
    pairs = sorted(records)
    states = await _pipelined(redis, [("hmget", (records[p], "state", "finalized", "msgs")) for p in pairs])
    scores = await _pipelined(redis, [("zscore", (keys.due, due_member(a, t))) for a, t in pairs])
    state_of: dict[tuple[str, str], tuple[str, bool]] = {}
    for pair, fields, score in zip(pairs, states, scores, strict=True):
        if isinstance(fields, Exception):
            continue
        state, finalized, msgs = (_s(f) if f is not None else "" for f in fields)
        state_of[pair] = (state, finalized == "1")
        if state == "posted" and msgs in ("", "[]"):
            # Nobody posts a posted ask again: one without a message waits unseen until its deadline.
            problems.append(Problem("posted_without_message", records[pair], "is posted but has no message"))
        if state in ("accepted", "posted") and score is None:
            problems.append(Problem("no_timer", records[pair], f"is {state} but has no timer in {keys.due}"))
        if state == "ended" and finalized == "1" and score is not None:
            problems.append(
                Problem("stale_timer", keys.due, f"timer for {records[pair]}, ended and finished")
            )

    # Workflow Builder step executions: a pending one has its next look (bot/storage/steps.py).
    head = keys.step("")
    steps = [k for k in found if k.startswith(head) and _expected_type(keys, k) == ("hash", True)]
    step_states = await _pipelined(redis, [("hget", (k, "state")) for k in steps])
    looks = await _pipelined(redis, [("zscore", (keys.step_due, k[len(head) :])) for k in steps])
    for key, state, look in zip(steps, step_states, looks, strict=True):
        if state is not None and _s(state) == "pending" and look is None:
            problems.append(Problem("no_timer", key, f"is pending but has no look in {keys.step_due}"))

    # Channel sets: only asks an archive could still dismiss.
    for key in found:
        if key.startswith(keys.channel("")) and _expected_type(keys, key) == ("set", True):
            try:
                members = [_s(m) for m in await redis.smembers(key)]
            except Exception:  # a wrong type, reported above
                continue
            for member in sorted(members):
                ask_id, tag = parse_due_member(member)
                state, done = state_of.get((ask_id, tag), ("", False))
                if not state:
                    problems.append(
                        Problem("stale_channel_member", key, f"{member!r}: its ask record is gone")
                    )
                elif state == "ended" and done:
                    problems.append(Problem("stale_channel_member", key, f"{member!r}: its ask has ended"))

    # The Home tab's indexes (in other slots than the asks: drift a crash can leave).
    problems += await check_home(redis, keys, found, state_of, fix=fix)

    # The id index.
    head = keys.index("")
    index_keys = [k for k in found if k.startswith(head) and _expected_type(keys, k) == ("string", True)]
    tags = await _pipelined(redis, [("get", (k,)) for k in index_keys])
    for key, tag in zip(index_keys, tags, strict=True):
        if tag is None or isinstance(tag, Exception):
            continue
        ask_id = key[len(head) :]
        if (ask_id, _s(tag)) not in records:
            problems.append(
                Problem("index_without_record", key, f"points to tag {_s(tag)!r}, no record there")
            )

    # Stream entries pending too long.
    if keys.asks in found and _s(kinds[found.index(keys.asks)]) == "stream":
        try:
            pending = await redis.xpending_range(
                keys.asks, GROUP, min="-", max="+", count=100, idle=reclaim_idle_ms
            )
        except Exception:  # no group yet
            pending = []
        for item in pending:
            problems.append(
                Problem(
                    "stuck_entry",
                    keys.asks,
                    f"entry {_s(item['message_id'])} pending for {int(item['time_since_delivered'])} ms "
                    f"(consumer {_s(item['consumer'])}, delivered {int(item['times_delivered'])} times)",
                )
            )
    return problems
