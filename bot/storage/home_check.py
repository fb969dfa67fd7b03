"""The Home tab's part of the invariant check (bot/storage/check.py), and its repair.

What must hold: a row of a person's index (``P:home:wait:<user>``, ``P:home:asked:<user>``) is an ask
that is not ended and finished, nor gone (``stale_home_row``); every person an ask's own set names
(``P:{tag}:home:<id>``) has the row while the ask is pending (``missing_home_row``). Both happen
only when a replica dies between the two writes (the index is in another slot than the ask), and
both are harmless meanwhile (a tab drops a stale row when drawn); ``slack-ask check --fix`` repairs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from redis.asyncio import Redis

from bot.storage.home_index import NO_DEADLINE
from bot.storage.keys import Keys, due_member, parse_due_member

if TYPE_CHECKING:
    from bot.storage.check import Problem

__all__ = ["check_home", "home_key_type"]


def _s(value: Any) -> str:
    return value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else str(value)


def home_key_type(keys: Keys, key: str) -> tuple[str, bool] | None:
    """``(type, needs_ttl)`` of a Home tab key, None for any other key."""
    if key in (keys.home_opened, keys.home_dirty):
        # The dirty set empties itself as tabs are published (no TTL); opened has one.
        return ("zset", key == keys.home_opened)
    rest = key[len(keys.prefix) + 1 :]
    kinds = {"wait": "zset", "asked": "zset", "recent": "list", "view": "hash"}
    match = re.fullmatch(r"home:(wait|asked|recent|view):.+", rest, flags=re.DOTALL)
    if match is not None:
        return kinds[match.group(1)], True
    if re.fullmatch(r"\{[^}]*\}:home:.+", rest, flags=re.DOTALL):
        return "set", True
    return None


async def check_home(
    redis: Redis,
    keys: Keys,
    found: Sequence[str],
    state_of: dict[tuple[str, str], tuple[str, bool]],
    *,
    fix: bool,
) -> list[Problem]:
    """The Home tab's broken invariants among ``found`` keys (``state_of``: each ask's state and
    whether it is finished); with ``fix``, each is repaired as it is found."""
    from bot.storage.check import Problem

    problems: list[Problem] = []
    prefix = keys.prefix
    for key in found:
        kind = home_key_type(keys, key)
        rest = key[len(prefix) + 1 :]
        if kind == ("zset", True) and rest.startswith(("home:wait:", "home:asked:")):
            try:
                members = [_s(m) for m in await redis.zrange(key, 0, -1)]
            except Exception:  # a wrong type, reported by the caller
                continue
            for member in members:
                ask_id, tag = parse_due_member(member)
                state, done = state_of.get((ask_id, tag), ("", False))
                why = "its ask record is gone" if not state else "its ask has ended" if done else ""
                if state == "ended" and not done:
                    continue  # the clean-up timer takes it out with the ask's messages
                if why:
                    problems.append(Problem("stale_home_row", key, f"{member!r}: {why}"))
                    if fix:
                        await redis.zrem(key, member)
        elif kind == ("set", True) and rest.startswith("{"):
            match = re.fullmatch(r"\{([^}]*)\}:home:(.+)", rest, flags=re.DOTALL)
            if match is None:
                continue
            tag, ask_id = match.group(1), match.group(2)
            state, _ = state_of.get((ask_id, tag), ("", False))
            if state not in ("accepted", "posted"):
                continue
            try:
                people = sorted(_s(m) for m in await redis.smembers(key))
            except Exception:
                continue
            member = due_member(ask_id, tag)
            for person in people:
                role, user = person[:2], person[2:]
                index = keys.home_waiting(user) if role == "w:" else keys.home_asked(user)
                if await redis.zscore(index, member) is None:
                    problems.append(
                        Problem("missing_home_row", index, f"{member!r}: pending, named in {key!r}")
                    )
                    if fix:
                        deadline = await redis.hget(keys.for_ask(tag, ask_id).ask, "deadline_ms")
                        score = int(_s(deadline)) if deadline and _s(deadline).isdigit() else 0
                        await redis.zadd(index, {member: score or NO_DEADLINE})
                        ttl = await redis.pttl(key)
                        await redis.pexpire(index, max(int(ttl), 60_000))
    return problems
