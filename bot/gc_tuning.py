"""The garbage collector set for a long-running replica (docs/performance.md, "Garbage collection").

CPython collects its youngest generation after every 700 allocations net of frees, and now and then
walks every tracked object (a full collection). A replica holds some 90,000 objects from start-up
(modules, the Bolt app, pydantic's validators) that live as long as the process, and an ask makes
thousands of short-lived ones: measured in ``make bench``, full collections paused a replica for up
to 64-84 ms (clicks waited that long for their ack) and collection took about a tenth of its CPU.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass

__all__ = ["YOUNG_THRESHOLD", "GcSetting", "tune_for_serving"]

YOUNG_THRESHOLD = 10_000
"""Allocations between two young collections (CPython's default: 700). Almost all of an ask's objects
are freed by reference counting as its work returns; the collector is for cycles, and a cycle waiting
a little longer costs a few MB at most."""


@dataclass(frozen=True)
class GcSetting:
    frozen: int
    """Objects moved to the permanent generation: never walked by a collection again."""
    thresholds: tuple[int, int, int]


def tune_for_serving() -> GcSetting:
    """Once, when start-up is done (``slack-ask serve``): freeze what start-up made, then collect the
    young generation less often. Not for a process that runs many bots and ends them (the tests): what
    is frozen is never freed."""
    gc.collect()  # what start-up left as garbage goes now, not frozen with the rest
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
    return GcSetting(frozen=gc.get_freeze_count(), thresholds=gc.get_threshold())
