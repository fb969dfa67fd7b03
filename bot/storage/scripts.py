"""Loads the Lua scripts of ``bot/storage/lua`` once, with the shared helpers prepended."""

from __future__ import annotations

import functools
from importlib import resources

__all__ = ["SCRIPT_NAMES", "script_source"]

SCRIPT_NAMES = (
    "accept",
    "advance",
    "ask_state",
    "audit",
    "cancel",
    "claim_due",
    "drop_consumers",
    "finalize",
    "finish",
    "home_claim",
    "home_done",
    "home_opened",
    "home_recent",
    "home_touch",
    "look",
    "posted",
    "push",
    "renew",
    "resolve",
    "schedule_in",
    "step_begin",
    "step_done",
    "step_later",
    "step_take",
    "vote",
    "withdraw",
)


@functools.cache
def script_source(name: str) -> str:
    """The full source of script ``name``: ``_common.lua`` followed by ``<name>.lua``."""
    if name not in SCRIPT_NAMES:
        raise KeyError(f"unknown script {name!r}; known: {', '.join(SCRIPT_NAMES)}")
    lua = resources.files("bot.storage") / "lua"
    common = (lua / "_common.lua").read_text(encoding="utf-8")
    body = (lua / f"{name}.lua").read_text(encoding="utf-8")
    return common + "\n" + body
