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

__all__ = ["COMMAND_MODULES", "EXIT_USAGE", "build_parser", "installed_version", "main"]

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

# The module that registers each command: `main` imports only that one, so `slack-ask ask` (run by
# agents for every question) and `serve` do not pay a second for importing the MCP SDK. `--help`, no
# command or an unknown one import them all (tests/test_cli_ask.py checks this table against them).
COMMAND_MODULES = {
    "serve": "bot.cli.serve",
    "demo": "bot.cli.demo",
    "ask": "bot.cli.ask",
    "mcp": "bot.mcp_server",
    "list": "bot.cli.ops",
    "status": "bot.cli.ops",
    "cancel": "bot.cli.ops",
    "dismiss": "bot.cli.ops",
    "check": "bot.cli.check",
    "doctor": "bot.cli.doctor",
}


def installed_version() -> str:
    """The installed package's version (``slack-ask --version``, the MCP handshake's serverInfo)."""
    try:
        return importlib.metadata.version("slack-ask")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return bot.__version__


def build_parser(modules: Sequence[str] = _SUBCOMMANDS) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="slack-ask",
        description="Ask people structured questions in Slack on behalf of software agents.",
    )
    parser.add_argument("--version", action="version", version=f"slack-ask {installed_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    module = COMMAND_MODULES.get(words[0]) if words else None
    parser = build_parser(_SUBCOMMANDS if module is None else (module,))
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
