"""What the package asks pip for, the version it reports, and what the demo says when its Redis fallback
is not installed."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _pyproject() -> dict[str, object]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _names(requirements: object) -> dict[str, str]:
    assert isinstance(requirements, list)
    out: dict[str, str] = {}
    for req in requirements:
        assert isinstance(req, str)
        name = req.split(">", 1)[0].split("<", 1)[0].split("=", 1)[0].split("[", 1)[0].strip()
        out[name] = req
    return out


def test_a_production_install_does_not_pull_in_fakeredis_but_the_demo_extra_does() -> None:
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    assert "fakeredis" not in _names(project["dependencies"])
    extras = project["optional-dependencies"]
    assert isinstance(extras, dict)
    assert _names(extras["demo"])["fakeredis"].startswith("fakeredis[lua]")


def test_mcp_1_is_refused_and_setuptools_reads_an_spdx_license() -> None:
    data = _pyproject()
    project = data["project"]
    assert isinstance(project, dict)
    assert _names(project["dependencies"])["mcp"] == "mcp>=2,<3"
    build = data["build-system"]
    assert isinstance(build, dict)
    assert "setuptools>=77" in build["requires"]
    assert project["license"] == "MIT"


def test_the_makefile_installs_the_demo_extra_for_make_demo_and_the_tests() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "pip install -q -e '.[demo,dev]'" in makefile


def test_version_option_prints_the_installed_version_through_the_console_script() -> None:
    # The console script pip wrote (what the image's ENTRYPOINT runs), not the module.
    script = Path(sys.executable).parent / "slack-ask"
    done = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == f"slack-ask {importlib.metadata.version('slack-ask')}\n"


def test_the_demo_without_redis_server_or_fakeredis_says_so_in_one_line() -> None:
    # No redis-server on PATH, no REDIS_URL, and fakeredis made unimportable (as when the demo extra
    # is not installed): one line on stderr and exit status 2, never a traceback.
    code = (
        "import sys; sys.modules['fakeredis'] = None\n"
        "from bot.cli import main\n"
        "sys.exit(main(['demo', '--port', '0', '--no-sample']))\n"
    )
    env = {"HOME": os.environ.get("HOME", "/tmp"), "PATH": "/nonexistent"}
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=50
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines == [
        "slack-ask demo: no usable redis-server on PATH and fakeredis is not installed: install "
        "redis-server, set REDIS_URL, or pip install 'slack-ask[demo]'"
    ]


FRAMEWORK_EXTRAS = {
    "langgraph": {"langgraph", "langchain", "langchain-core"},
    "openai-agents": {"openai-agents"},
    "claude-agent": {"claude-agent-sdk"},
}


def test_the_agent_frameworks_are_extras_pinned_to_a_major_and_in_the_dev_extra() -> None:
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    frameworks = set().union(*FRAMEWORK_EXTRAS.values())
    assert not frameworks & set(_names(project["dependencies"])), "a plain `pip install .` pulls none"
    extras = project["optional-dependencies"]
    assert isinstance(extras, dict)
    for extra, names in FRAMEWORK_EXTRAS.items():
        pinned = _names(extras[extra])
        assert set(pinned) == names
        assert all("<" in req for req in pinned.values()), pinned  # an upper bound: the tested major
    assert "slack-ask[langgraph,openai-agents,claude-agent]" in extras["dev"]


def test_the_client_and_the_integrations_core_import_without_any_framework() -> None:
    blocked = ["langgraph", "langchain", "langchain_core", "agents", "claude_agent_sdk"]
    code = (
        f"import sys\nfor name in {blocked!r}: sys.modules[name] = None\n"
        "import bot.client, bot.integrations.common, bot.cli, bot.mcp_server, bot.runtime\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=50)
    assert (proc.returncode, proc.stdout.strip()) == (0, "ok"), proc.stderr


async def test_the_bot_s_redis_connections_read_replies_with_hiredis() -> None:
    """redis-py's pure-Python reply parser was a tenth of the bot's CPU per ask (docs/performance.md);
    with hiredis installed redis-py picks its C parser by itself, on every connection the bot opens."""
    from redis._parsers import _AsyncHiredisParser
    from redis.asyncio.connection import Connection

    from bot.storage.connection import connect

    assert "hiredis" in _names(_pyproject()["project"]["dependencies"])  # type: ignore[index]
    client = connect("redis://127.0.0.1:1/0")  # nothing is dialled until a command is sent
    try:
        connection = client.connection_pool.make_connection()
        assert isinstance(connection, Connection)
        assert isinstance(connection._parser, _AsyncHiredisParser)
    finally:
        await client.aclose()


def test_ci_installs_the_pinned_versions_and_each_pin_is_in_its_range() -> None:
    # A release on PyPI between two CI runs once failed mypy (redis-py 8.2.0 typed a constructor): CI
    # installs constraints.txt, and every requirement of pyproject.toml, extras too, is pinned there
    # within its range (pip would refuse a pin outside it, but only when CI installs).
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pins: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"constraints.txt pins exact versions only: {line!r}"
            pins[canonicalize_name(name)] = version
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    extras = project["optional-dependencies"]
    assert isinstance(extras, dict)
    wanted = [*project["dependencies"], *(req for reqs in extras.values() for req in reqs)]
    checked = 0
    for text in wanted:
        req = Requirement(text)
        if canonicalize_name(req.name) == "slack-ask" or (req.marker and not req.marker.evaluate()):
            continue
        assert canonicalize_name(req.name) in pins, f"{req.name} is not in constraints.txt (make lock)"
        assert req.specifier.contains(pins[canonicalize_name(req.name)], prereleases=True), (
            f"constraints.txt pins {req.name}=={pins[canonicalize_name(req.name)]}, outside {req.specifier}"
        )
        checked += 1
    assert checked >= 10
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert 'export PIP_CONSTRAINT="$PWD/constraints.txt"' in ci
    assert ci.index("export PIP_CONSTRAINT") < ci.index("\nmake test\n")
