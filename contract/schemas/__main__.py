"""``python -m contract.schemas [--check]``: regenerate the committed JSON Schemas, or check them."""

from __future__ import annotations

import argparse
import sys

from contract.schemas import REGENERATE_COMMAND, SCHEMA_DIR, stale_schemas, write_schemas


def main(argv: list[str] | None = None) -> int:
    """Write the schema files (or with ``--check`` only report drift); returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m contract.schemas", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 when a file differs from the models")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_schemas()
        for name in stale:
            print(f"{SCHEMA_DIR / name} is out of date; run `{REGENERATE_COMMAND}`", file=sys.stderr)
        return 1 if stale else 0
    for path in write_schemas():
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
