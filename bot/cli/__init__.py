"""The ``slack-ask`` command. Each subcommand lives in its own module and registers itself here.

A subcommand module exposes ``add_parser(subparsers) -> None`` which sets ``func`` on its parser
to a callable ``(args) -> int`` returning the exit code.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import sys
from collections.abc import Sequence

import bot

__all__ = ["EXIT_USAGE", "build_parser", "installed_version", "main"]

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


def installed_version() -> str:
    """The installed package's version (``slack-ask --version``, the MCP handshake's serverInfo)."""
    try:
        return importlib.metadata.version("slack-ask")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return bot.__version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="slack-ask",
        description="Ask people structured questions in Slack on behalf of software agents.",
    )
    parser.add_argument("--version", action="version", version=f"slack-ask {installed_version()}")
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
