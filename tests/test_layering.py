"""The module map of docs/architecture.md, kept by parsing every import (``ast``, lazy ones included).

Layers, each importing only from the ones before it: ``contract`` (pure wire models) <- the pure parts
of ``bot`` (decisions and drawing, no I/O) <- the I/O shell (Redis, Slack, HTTP, loops) <- ``bot.cli``.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 600

# The pure parts of bot: they decide and draw, and are handed what they need.
PURE = (
    "bot.asks",
    "bot.results",
    "bot.model",
    "bot.ids",
    "bot.render",
    "bot.slack.interactions",
    "bot.slack.replies",
    "bot.slack.blockkit",
    "bot.slack.blockkit_rules",
    "bot.slack.scopes",
    "bot.workflow",
    "bot.home",
)
# Shared by every layer of bot: settings, errors, durations, logging, metrics. They import only
# contract and libraries, never another part of bot.
BASE = ("bot.config", "bot.errors", "bot.durations", "bot.logs", "bot.metrics", "bot.gc_tuning")
# The commands (the MCP server is `slack-ask mcp`) and the local playground sit on top of everything.
TOP = ("bot.cli", "bot.mcp_server", "bot.playground")

# What I/O looks like from an import: network clients and servers, processes, the event loop.
IO_LIBRARIES = (
    "redis",
    "fakeredis",
    "aiohttp",
    "slack_bolt",
    "slack_sdk.web",
    "slack_sdk.socket_mode",
    "slack_sdk.http_retry",
    "mcp",
    "asyncio",
    "socket",
    "subprocess",
    "threading",
    "urllib.request",
    "http",
    "prometheus_client",
)
IO_SHELL = (
    "bot.storage",
    "bot.slack.gateway",
    "bot.slack.deadline",
    "bot.slack.edge",
    "bot.slack.pacing",
    "bot.engine",
    "bot.intake",
    "bot.sweeper",
    "bot.step_loop",
    "bot.loops",
    "bot.tasks",
    "bot.app",
    "bot.runtime",
    "bot.client",
    "bot.integrations",
    "bot.blpop",
    "bot.home_loop",
)
# The agent frameworks (optional extras): each imported only inside its own integration module.
FRAMEWORKS = {
    "bot.integrations.langgraph": ("langgraph", "langchain", "langchain_core"),
    "bot.integrations.openai_agents": ("agents",),
    "bot.integrations.claude_agent": ("claude_agent_sdk",),
}
BASE_MAY_IMPORT = ("bot.storage.diagnose",)
"""Settings check the Redis URL as they are read (a pure parse, no connection)."""
CONTRACT_MAY_IMPORT = ("pydantic", "pydantic_core", "typing_extensions", "contract")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    files = sorted([*(ROOT / "bot").rglob("*.py"), *(ROOT / "contract").rglob("*.py")])
    return {_module_name(p): p for p in files if "__pycache__" not in p.parts}


MODULES = _modules()


def _imports(path: Path, module: str | None = None) -> set[str]:
    """Every module ``path`` imports, absolute, lazy imports and ``TYPE_CHECKING`` ones included."""
    module = module or _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            found.add(name)
            # `from bot import render` imports the module bot.render.
            found.update(f"{name}.{alias.name}" for alias in node.names if f"{name}.{alias.name}" in MODULES)
    return found


# Parsed once, while the tests are collected: CPython 3.11's parser can fail spuriously ("AST constructor
# recursion depth mismatch") when it runs right after another test left an exception unraised.
IMPORTS = {name: _imports(path) for name, path in MODULES.items()}


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _offending(module: str, forbidden: tuple[str, ...]) -> list[str]:
    return sorted(name for name in IMPORTS[module] if _within(name, forbidden))


def _in(prefixes: tuple[str, ...]) -> list[str]:
    return [m for m in MODULES if _within(m, prefixes)]


def test_every_module_of_bot_and_contract_is_in_one_layer() -> None:
    """A new module gets a place in this map (and in docs/architecture.md) when it is written."""
    placed = (*PURE, *BASE, *TOP, *IO_SHELL, "contract")
    packages = {"bot", "bot.slack"}  # package files that hold no code of their own
    unplaced = [m for m in MODULES if m not in packages and not _within(m, placed)]
    assert unplaced == [], "add them to a layer here and to docs/architecture.md"
    assert all(not (MODULES[p].read_text(encoding="utf-8").count("def ")) for p in packages)


@pytest.mark.parametrize("module", _in(("contract",)))
def test_contract_imports_only_the_standard_library_and_pydantic(module: str) -> None:
    outside = [
        name
        for name in IMPORTS[module]
        if name != "__future__"
        and name.partition(".")[0] not in sys.stdlib_module_names
        and not _within(name, CONTRACT_MAY_IMPORT)
    ]
    assert outside == []
    assert _offending(module, ("asyncio", "socket", "subprocess", "threading", "http", "urllib")) == []


@pytest.mark.parametrize("module", _in(PURE))
def test_the_pure_parts_do_no_io(module: str) -> None:
    assert _offending(module, (*IO_LIBRARIES, *IO_SHELL, *TOP)) == []


@pytest.mark.parametrize("module", _in(BASE))
def test_the_base_modules_import_no_other_part_of_bot(module: str) -> None:
    found = _offending(module, (*PURE, *IO_SHELL, *TOP))
    assert [name for name in found if not _within(name, BASE_MAY_IMPORT)] == []


@pytest.mark.parametrize("module", _in(IO_SHELL))
def test_the_io_shell_never_imports_the_commands_or_the_playground(module: str) -> None:
    assert _offending(module, TOP) == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_each_agent_framework_is_imported_only_inside_its_integration_module(module: str) -> None:
    """``pip install slack-ask`` pulls no framework: nothing else may need one (issue 20)."""
    foreign = [lib for owner, libs in FRAMEWORKS.items() if owner != module for lib in libs]
    assert _offending(module, tuple(foreign)) == []
    assert not module.startswith("bot.integrations.") or module in FRAMEWORKS or module.endswith(".common")
    if not _within(module, ("bot.integrations",)):
        assert _offending(module, ("bot.integrations",)) == [], "only the agent's own code imports these"


def test_what_the_base_may_import_does_no_io() -> None:
    assert _offending("bot.storage.diagnose", (*IO_SHELL, *TOP, *PURE)) == []
    assert [n for n in IMPORTS["bot.storage.diagnose"] if _within(n, ("redis.asyncio", "socket"))] == []


@pytest.mark.parametrize("module", _in(("bot.storage",)))
def test_the_redis_layer_knows_nothing_of_slack_or_the_engine(module: str) -> None:
    forbidden = (
        "bot.engine",
        "bot.slack",
        "bot.render",
        "bot.app",
        "bot.runtime",
        "bot.intake",
        "bot.sweeper",
    )
    assert _offending(module, forbidden) == []


@pytest.mark.parametrize("module", _in(("bot.engine",)))
def test_the_engine_is_called_by_the_loops_and_the_app_never_the_other_way(module: str) -> None:
    loops = ("bot.intake", "bot.sweeper", "bot.home_loop", "bot.app", "bot.runtime", "bot.loops")
    assert _offending(module, loops) == []


def test_the_layering_check_sees_lazy_relative_and_from_package_imports(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from . import mrkdwn\n"
        "from bot import results\n"
        "def f() -> None:\n"
        "    import redis.asyncio\n"
        "    from bot.storage.store import Store\n",
        encoding="utf-8",
    )
    found = _imports(probe, "bot.render.probe")
    assert found >= {"bot.render.mrkdwn", "bot.results", "redis.asyncio", "bot.storage.store"}
    assert _within("redis.asyncio", IO_LIBRARIES) and not _within("bot.rendering", ("bot.render",))


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_is_longer_than_600_lines(module: str) -> None:
    """One concept per module: past 600 lines a module holds more than one (issue 9)."""
    lines = len(MODULES[module].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{MODULES[module].relative_to(ROOT)} has {lines} lines; split it by concept"
