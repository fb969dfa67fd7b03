"""A malformed or unreachable Redis URL: one line naming the setting and exit 2 or 8, never a traceback.

Every command runs as the installed program would (a subprocess), so what is checked is exactly what
a person sees in the terminal.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from bot.storage.diagnose import url_problem
from tests.conftest import REDIS_IS_FAKE

ROOT = Path(__file__).resolve().parents[1]

# Every command that opens Redis, with the arguments it needs to get that far.
COMMANDS = {
    "list": ["list"],
    "status": ["status", "01J00000000000000000000000"],
    "cancel": ["cancel", "01J00000000000000000000000"],
    "dismiss": ["dismiss", "01J00000000000000000000000"],
    "check": ["check"],
    "ask": ["ask", "--channel", "C0123", "Deploy?", "--option", "Yes", "--timeout", "1m", "--wait", "5s"],
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _run(
    args: list[str], env: dict[str, str] | None = None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "SLACK_ASK_PREFIX")}
    full_env |= env or {}
    return subprocess.run(
        [sys.executable, "-m", "bot.cli", *args],
        cwd=ROOT,
        env=full_env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )


def _one_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_redis_url_without_a_scheme_in_the_environment_is_exit_2_naming_redis_url(command: str) -> None:
    done = _run(COMMANDS[command], {"REDIS_URL": "localhost:6379"})
    line = _one_line(done.stderr)
    assert done.returncode == 2, done.stderr
    assert f"slack-ask {command}: error: REDIS_URL needs a scheme: redis://" in line


@pytest.mark.parametrize("command", ["list", "status", "dismiss", "ask"])
def test_a_port_that_is_not_a_number_given_with_redis_is_exit_2_naming_the_option(command: str) -> None:
    done = _run([*COMMANDS[command], "--redis", "redis://:s3cret@localhost:notaport/0"])
    line = _one_line(done.stderr)
    assert done.returncode == 2, done.stderr
    assert "--redis has port 'notaport', which is not a port number (1-65535)" in line
    assert "s3cret" not in done.stderr


@pytest.mark.parametrize("command", ["list", "cancel", "check", "ask"])
def test_an_unreachable_cluster_is_exit_8_naming_where_and_the_setting(command: str) -> None:
    url = f"redis+cluster://127.0.0.1:{_free_port()}"
    done = _run(COMMANDS[command], {"REDIS_URL": url})
    line = _one_line(done.stderr)
    assert done.returncode == 8, done.stderr
    assert f"cannot reach Redis at {url} (REDIS_URL): Redis Cluster cannot be connected" in line


def test_an_unreachable_standalone_redis_is_exit_8_too() -> None:
    url = f"redis://127.0.0.1:{_free_port()}/0"
    done = _run(["status", "01J00000000000000000000000", "--redis", url])
    assert done.returncode == 8, done.stderr
    assert f"cannot reach Redis at {url} (--redis)" in _one_line(done.stderr)


def test_a_cluster_url_that_names_a_standalone_redis_is_exit_2(redis_url: str) -> None:
    url = "redis+cluster://" + redis_url.removeprefix("redis://")
    done = _run(["list", "--redis", url])
    assert done.returncode == 2, done.stderr
    # The reason is the server's (a real Redis: "Cluster mode is not enabled"); the setting is ours.
    assert "slack-ask list: error: --redis: Redis Cluster cannot be connected" in _one_line(done.stderr)


def test_the_mcp_server_refuses_a_malformed_url_before_serving() -> None:
    done = _run(["mcp"], {"REDIS_URL": "redis://localhost:6379/zero"})
    assert done.returncode == 2, done.stderr
    assert "slack-ask mcp: error: REDIS_URL names database 'zero', which is not a number" in _one_line(
        done.stderr
    )


@pytest.mark.parametrize("command", [["serve"], ["doctor"]])
def test_serve_and_doctor_read_a_malformed_url_as_a_bad_setting(command: list[str]) -> None:
    env = {
        "REDIS_URL": "redis+sentinel://s1:26379,,s2/mymaster",
        "SLACK_BOT_TOKEN": "xoxb-not-used",
        "SLACK_APP_TOKEN": "xapp-not-used",
        "SLACK_API_URL": f"http://127.0.0.1:{_free_port()}/api/",
    }
    done = _run(command, env)
    assert done.returncode == 2, done.stdout + done.stderr
    output = (done.stdout + done.stderr).strip()
    assert "Traceback" not in output
    assert "setting REDIS_URL: names an empty Sentinel host" in output


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("", "is empty"),
        ("foo://x", "its scheme is 'foo'"),
        ("redis://h:70000", "port '70000'"),
        ("redis+cluster://h:1/3", "a Cluster has only database 0"),
        ("redis+sentinel://h:x/m", "Sentinel host with port 'x'"),
        ("redis+sentinel://h/m?db=x", "database 'x'"),
        ("redis://h/0?socket_timeout=abc", "socket_timeout"),
        ("user:hunter2@h:6379", "it has none"),
    ],
)
def test_each_malformed_url_gets_its_own_reason_and_never_the_password(url: str, problem: str) -> None:
    said = url_problem(url)
    assert said is not None and problem in said
    assert "hunter2" not in said


@pytest.mark.parametrize(
    "url",
    [
        "redis://localhost:6379/0",
        "rediss://:pw@[::1]:6380/2",
        "unix:///run/redis.sock",
        "redis+sentinel://[::1]:26379,s2/mymaster?db=1",
        "redis+cluster://n1:7000",
    ],
)
def test_the_urls_the_bot_documents_pass(url: str) -> None:
    assert url_problem(url) is None


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("localhost:6379", "setting REDIS_URL: needs a scheme"),
        (
            "redis+cluster://127.0.0.1:{port}",
            "setting REDIS_URL: cannot reach Redis at redis+cluster://127.0.0.1:",
        ),
    ],
)
def test_the_demo_says_in_one_line_when_redis_url_is_unusable(url: str, said: str) -> None:
    done = _run(["demo", "--port", "0", "--no-sample"], {"REDIS_URL": url.format(port=_free_port())})
    assert done.returncode == 2, done.stdout + done.stderr
    assert said in _one_line(done.stderr)


@pytest.mark.skipif(REDIS_IS_FAKE, reason="fakeredis has any number of databases")
@pytest.mark.parametrize("command", ["list", "check", "ask"])
def test_a_database_the_redis_does_not_have_is_exit_2_with_what_redis_said(
    command: str, redis_url: str
) -> None:
    url = redis_url.rsplit("/", 1)[0] + "/99" if redis_url.count("/") > 2 else redis_url + "/99"
    done = _run([*COMMANDS[command], "--redis", url])
    assert done.returncode == 2, done.stderr
    assert f"--redis: Redis at {url} answered: DB index is out of range" in _one_line(done.stderr)
