"""Durations on the command line and in policy files: ``90s``, ``10m``, ``2h``, ``1d`` or plain ms."""

from __future__ import annotations

import re

__all__ = ["format_duration", "parse_duration"]

_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")


def parse_duration(text: str | int) -> int:
    """Return milliseconds; raise ValueError naming the text and the accepted forms."""
    if isinstance(text, int) and not isinstance(text, bool):
        if text < 0:
            raise ValueError(f"duration {text} is negative; use 0 or more milliseconds")
        return text
    match = _RE.fullmatch(str(text))
    if match is None:
        raise ValueError(f"{text!r} is not a duration; write 90s, 10m, 2h, 1d or plain milliseconds")
    number, unit = match.groups()
    if unit is None and "." in number:
        raise ValueError(f"{text!r}: plain milliseconds must be a whole number")
    return round(float(number) * _UNITS[unit or "ms"])


def format_duration(ms: int) -> str:
    """A short human form: ``1d 2h``, ``5m 3s``, ``800ms``."""
    if ms < 1000:
        return f"{ms}ms"
    seconds = ms // 1000
    parts: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return " ".join(parts[:2])
