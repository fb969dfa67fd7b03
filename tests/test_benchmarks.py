"""The benchmark harness still runs against the bot (a smoke test at tiny sizes: it times nothing and
checks no figure's value, only that every figure of issue 22's tables is printed)."""

from __future__ import annotations

import argparse
import shutil

import pytest

from benchmarks import bench_bot, bench_scale

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="the benchmarks start a redis-server"),
]


@pytest.mark.timeout(240)
async def test_bench_bot_prints_every_figure_of_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    args = argparse.Namespace(asks=4, rounds=1, concurrency=2, warm=1, idle=0.5, kill_asks=2, kill_wait=60)
    # Short leases, so the killed replica's asks come back in seconds rather than minutes (how they
    # end depends on the machine's speed: a lease may run out while the fake holds its post).
    await bench_bot.main(args, delivery_window_ms=3_000, reclaim_idle_ms=500)
    out = capsys.readouterr().out
    for figure in [
        "Redis commands issued by the bot",
        "Redis round trips (entry to result)",
        "Redis memory per pending ask",
        "Redis memory per ended ask in retention",
        "bot intake / bare chat.postMessage loop",
        "click -> result on the agent's list, p99",
        "click ack, p99",
        "replica killed mid-delivery -> result, p99",
    ]:
        line = next((x for x in out.splitlines() if figure in x), "")
        assert "target" in line, f"{figure!r} not printed with its target:\n{out}"
    assert "results: {'answered': 4} of 4 asks" in out
    assert "missing 0, duplicate posts 0" in out  # every held ask ended, none posted twice


@pytest.mark.timeout(240)
async def test_bench_scale_prints_every_figure_per_size(capsys: pytest.CaptureFixture[str]) -> None:
    await bench_scale.main(argparse.Namespace(sizes="20,50", asks=3, concurrency=2, idle=0.5))
    out = capsys.readouterr().out
    assert "filled 20 asks (now 20 pending)" in out and "filled 30 asks (now 50 pending)" in out
    for figure in [
        "Redis memory per pending ask",
        "idle replica: Redis commands/s",
        "idle replica: CPU",
        "intake (asks/s)",
        "click -> result p99",
        "replica start, BotRuntime -> serving",
        "Slack calls per answered ask",
        "Redis commands per answered ask",
    ]:
        assert figure in out, f"{figure!r} not printed:\n{out}"
    assert out.count("results {'answered': 3} of 3") == 2
