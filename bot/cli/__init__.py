"""The ``slack-ask`` command. Each subcommand lives in its own module and registers itself here.

A subcommand module exposes ``add_parser(subparsers) -> None`` which sets ``func`` on its parser
to a callable ``(args) -> int`` returning the exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

__all__ = ["EXIT_USAGE", "build_parser", "main"]

EXIT_USAGE = 2

# Module per subcommand; a module that fails to import must not take the others down.
_SUBCOMMANDS = (
    "bot.cli.serve",
    "bot.cli.demo",
    "bot.cli.ask",
    "bot.mcp_server",
    "bot.cli.ops",
    "bot.cli.check",
    "bot.cli.doctor",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="slack-ask",
        description="Ask people structured questions in Slack on behalf of software agents.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _SUBCOMMANDS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        code: int = func(args)
    except KeyboardInterrupt:
        return 130
    return code
