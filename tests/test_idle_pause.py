"""The polling loops' pause (bot.loops.IdlePause): the interval while rounds find work, doubling while
they find none, never past its max; and, through a real replica, a timer that comes due after an idle
spell still fires, and brings the pause back to the interval."""

from __future__ import annotations

import pytest

from bot.loops import IdlePause
from tests.harness import Harness


def _bounds(pause: IdlePause) -> tuple[float, float]:
    return pause.current_s * 0.75, pause.current_s * 1.25


def test_the_pause_doubles_while_rounds_find_nothing_and_resets_on_work() -> None:
    pause = IdlePause(0.2, 1.0)
    seen = []
    for _ in range(6):
        waited = pause.after(0)
        low, high = _bounds(pause)
        assert low <= waited <= high  # jittered by a quarter either way
        seen.append(pause.current_s)
    assert seen == pytest.approx([0.2, 0.4, 0.8, 1.0, 1.0, 1.0])
    pause.after(3)
    assert pause.current_s == pytest.approx(0.2)
    pause.after(0)
    assert pause.current_s == pytest.approx(0.4)


def test_a_max_at_or_below_the_interval_keeps_the_interval() -> None:
    for top in (0.2, 0.05):
        pause = IdlePause(0.2, top)
        for _ in range(5):
            pause.after(0)
            assert pause.current_s == pytest.approx(0.2)


class _Recorded(IdlePause):
    """The same pause, keeping each round's (found, pause) so the test reads what the loop did."""

    rounds: list[tuple[int, float]]

    def after(self, found: int) -> float:
        waited = super().after(found)
        self.rounds.append((found, self.current_s))
        return waited


async def test_a_timer_due_after_an_idle_spell_fires_and_the_pause_comes_back_to_the_interval(
    harness: Harness,
) -> None:
    sweeper = harness.replicas[0].sweeper
    pause = _Recorded(sweeper.pause.interval_s, sweeper.pause.max_s, sweeper.pause.current_s)
    pause.rounds = []
    sweeper.pause = pause
    assert pause.max_s > pause.interval_s  # the harness's replica grows its pause
    # Nothing due: the pause grows to its max (read from the loop's own state, not timed).
    await harness.fake.wait_for(lambda: pause.current_s == pause.max_s, timeout=10, what="an idle sweeper")
    env = harness.envelope({"id": "go", "question": "Go?", "options": ["Yes", "No"]}, timeout_ms=300)
    await harness.send(env)
    result = await harness.result(env["reply_to"], timeout=10)
    assert result["outcome"] == "timeout"
    # The round that fired it found work (its pause is chosen once its timers are handled, after the
    # result went out), and the pause after it was the interval again.
    fired = await harness.fake.wait_for(
        lambda: [i for i, (found, _) in enumerate(pause.rounds) if found], timeout=10, what="the firing round"
    )
    assert pause.rounds[fired[0]][1] == pytest.approx(pause.interval_s)
    assert pause.rounds[fired[0] - 1] == (0, pause.max_s)  # it came out of the idle spell's longest pause
