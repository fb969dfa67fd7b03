"""Check or rewrite the render corpus snapshots: ``python -m tests.render_corpus [--update]``."""

from __future__ import annotations

import argparse
import sys

from tests.render_corpus import CASES, HERE, snapshot_path, snapshot_text


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.render_corpus", description=__doc__)
    parser.add_argument("--update", action="store_true", help="rewrite the snapshots from today's code")
    args = parser.parse_args()
    stale = sorted(p.stem for p in HERE.glob("*.json") if p.stem not in CASES)
    changed = [
        name
        for name in CASES
        if not snapshot_path(name).exists()
        or snapshot_path(name).read_text(encoding="utf-8") != snapshot_text(name)
    ]
    if not args.update:
        for name in changed:
            print(f"differs: {name}")
        for name in stale:
            print(f"no such case: {name}")
        return 1 if changed or stale else 0
    for name in changed:
        snapshot_path(name).write_text(snapshot_text(name), encoding="utf-8")
        print(f"wrote {snapshot_path(name).name}")
    for name in stale:
        snapshot_path(name).unlink()
        print(f"removed {name}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
