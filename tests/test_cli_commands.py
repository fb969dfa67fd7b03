"""The ``slack-ask`` command table: ``main`` imports only the module of the command it runs."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bot.cli import COMMAND_MODULES, build_parser


def _commands(parser_modules: tuple[str, ...] | None = None) -> set[str]:
    parser = build_parser() if parser_modules is None else build_parser(parser_modules)
    [sub] = [a for a in parser._actions if a.dest == "command"]
    assert isinstance(sub.choices, dict)
    return set(sub.choices)


def test_the_table_names_every_command_and_the_module_that_registers_it() -> None:
    assert set(COMMAND_MODULES) == _commands()
    for command, module in COMMAND_MODULES.items():
        assert command in _commands((module,)), (command, module)


@pytest.mark.parametrize("command", ["ask", "serve", "list", "check", "doctor"])
def test_a_command_other_than_mcp_does_not_import_the_mcp_sdk(command: str) -> None:
    # The MCP SDK takes about a second to import: `slack-ask ask`, which agents run for every
    # question, and `serve` must not pay for it.
    code = (
        "import sys\n"
        "from bot.cli import main\n"
        "try:\n"
        f"    main([{command!r}, '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith('mcp.')))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert run.stdout.strip().splitlines()[-1] == "[]"


def test_help_without_a_command_still_lists_every_command() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "bot.cli", "--help"], capture_output=True, text=True, timeout=60, check=True
    )
    for command in COMMAND_MODULES:
        assert command in run.stdout
