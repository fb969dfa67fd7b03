"""``python -m benchmarks [--sizes 10000,100000,1000000]``: every benchmark in turn, as ``make bench``
runs them (issue 22's per-ask table, its scale table, timers, fairness, the Home tab). Copy
``benchmarks/`` into an older checkout and run the same command there to measure that version
(docs/performance.md)."""

from __future__ import annotations

import argparse
import subprocess
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="10000,100000,1000000", help="pending asks of the scale table")
    args = parser.parse_args()
    runs = [
        ("bench_bot", []),
        ("bench_scale", ["--sizes", args.sizes]),
        ("bench_sweeper", []),
        ("bench_fairness", []),
        ("bench_home", []),
    ]
    failed = []
    began = time.monotonic()
    for module, extra in runs:
        print(f"\n== benchmarks.{module} {' '.join(extra)}".rstrip(), flush=True)
        started = time.monotonic()
        code = subprocess.call([sys.executable, "-m", f"benchmarks.{module}", *extra])
        print(f"== benchmarks.{module}: {time.monotonic() - started:.0f} s", flush=True)
        if code:
            failed.append(f"{module} (exit {code})")
    print(
        f"\n== all benchmarks: {time.monotonic() - began:.0f} s"
        + (f"; failed: {', '.join(failed)}" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
