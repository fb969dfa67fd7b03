"""``slack-ask ask`` against a real Redis, with an in-test bot side answering from a thread."""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis as syncredis

from bot.cli import main
from tests.fakebot import make_result

ROOT = Path(__file__).resolve().parents[1]
SLACK_ASK = ROOT / ".venv" / "bin" / "slack-ask"
EXIT = {"answered": 0, "cancelled": 3, "timeout": 4, "dismissed": 5, "unavailable": 6, "error": 7}


class ThreadBot:
    """Plays the bot: reads ``P:asks`` with XREAD and RPUSHes one result per ask with ``outcome``."""

    def __init__(self, redis_url: str, prefix: str, outcome: str | None) -> None:
        self.redis = syncredis.Redis.from_url(redis_url)
        self.stream = f"{prefix}:asks"
        self.outcome = outcome
        self.entries: list[tuple[str, dict[str, Any]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        last = "0"
        while not self._stop.is_set():
            for _, items in self.redis.xread({self.stream: last}, block=50) or []:
                for entry_id, fields in items:
                    last = entry_id.decode()
                    ((field, value),) = fields.items()
                    envelope = json.loads(value)
                    self.entries.append((field.decode(), envelope))
                    if field == b"ask" and self.outcome is not None:
                        result = make_result(envelope, self.outcome)
                        self.redis.rpush(envelope["reply_to"], json.dumps(result))

    def envelope(self) -> dict[str, Any]:
        for _ in range(100):
            if self.entries:
                return self.entries[0][1]
            time.sleep(0.02)
        raise AssertionError("no ask arrived")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.redis.close()


# ``redis_url`` and ``prefix`` (unique per test) come from conftest.


@pytest.fixture
def cleanup(redis_url: str, prefix: str) -> Iterator[None]:
    yield
    with syncredis.Redis.from_url(redis_url) as r:
        keys = list(r.scan_iter(match=f"{prefix}:*", count=1000))
        if keys:
            r.delete(*keys)


@pytest.fixture
def bot(redis_url: str, prefix: str, cleanup: None) -> Iterator[Callable[[str | None], ThreadBot]]:
    bots: list[ThreadBot] = []

    def start(outcome: str | None = "answered") -> ThreadBot:
        bots.append(ThreadBot(redis_url, prefix, outcome))
        return bots[-1]

    yield start
    for b in bots:
        b.stop()


@pytest.fixture
def ask(redis_url: str, prefix: str, cleanup: None) -> Callable[..., int]:
    """Runs ``slack-ask ask`` in-process on the test's Redis and prefix; returns the exit code."""

    def run(*args: str) -> int:
        return main(["ask", "--redis", redis_url, "--prefix", prefix, *args])

    return run


QUESTION = ["--channel", "C0123", "Deploy to production?", "--option", "Yes", "--option", "No"]


@pytest.mark.parametrize(("outcome", "code"), EXIT.items())
def test_exit_code_follows_the_outcome(
    ask: Callable[..., int],
    bot: Callable[[str | None], ThreadBot],
    capsys: pytest.CaptureFixture[str],
    outcome: str,
    code: int,
) -> None:
    b = bot(outcome)
    assert ask(*QUESTION, "--wait", "10s") == code
    out = capsys.readouterr().out
    if outcome == "answered":
        assert out == "User answers:\nq1: Yes\n"
    elif outcome == "error":
        assert out == "Error: the question timed out and no default is allowed.\n"
    elif outcome == "unavailable":
        assert out.startswith("User answers:\nq1: (unavailable)\n\nNo human answer surface is available")
        assert out == make_result(b.envelope(), outcome)["text"] + "\n"
    else:
        assert out == f"User answers:\nq1: ({outcome})\n"


def test_json_prints_exactly_one_document_the_result_envelope(
    ask: Callable[..., int], bot: Callable[[str | None], ThreadBot], capsys: pytest.CaptureFixture[str]
) -> None:
    b = bot("answered")
    assert ask(*QUESTION, "--json") == 0
    out = capsys.readouterr().out
    doc = json.loads(out)  # one document, nothing else: json.loads refuses trailing data
    assert doc == make_result(b.envelope(), "answered")


def test_flags_build_the_envelope(
    ask: Callable[..., int], prefix: str, bot: Callable[[str | None], ThreadBot]
) -> None:
    b = bot("answered")
    code = ask(
        "--channel", "C0123", "--thread", "1700000000.000100",
        "Which region?", "--option", "eu", "--option", "us", "--recommended", "1", "--multi", "--no-custom",
        "--category", "implementation", "--description", "We *must* pick one.", "--id", "region",
        "--timeout", "10m", "--on-timeout", "recommended",
        "--responder", "U0AAA", "--responder", "U0BBB", "--usergroup", "S0CCC",
        "--requester-name", "deploy-bot", "--remind-every", "2m", "--ask-id", "cli-test-1",
    )  # fmt: skip
    assert code == 0
    envelope = b.envelope()
    assert envelope["ask_id"] == "cli-test-1"
    assert envelope["reply_to"] == f"{prefix}:reply:cli-test-1"
    assert envelope["route"] == {"channel": "C0123", "thread_ts": "1700000000.000100"}
    assert envelope["request"] == {
        "questions": [
            {
                "id": "region",
                "question": "Which region?",
                "options": [{"label": "eu"}, {"label": "us"}],
                "description": "We *must* pick one.",
                "multi": True,
                "recommended": 1,
                "allowCustom": False,
                "category": "implementation",
            }
        ]
    }
    assert envelope["timeout_ms"] == 600_000
    assert envelope["on_timeout"] == "recommended"
    assert envelope["responders"] == {"users": ["U0AAA", "U0BBB"], "usergroups": ["S0CCC"]}
    assert envelope["requester"] == {"name": "deploy-bot"}
    assert envelope["remind_every_ms"] == 120_000


def test_approval_flags_build_the_approval_and_the_requester(
    ask: Callable[..., int], bot: Callable[[str | None], ThreadBot]
) -> None:
    b = bot("answered")
    code = ask(
        "--channel", "C0123", "Deploy v2?", "--option", "Approve", "--option", "Reject",
        "--approvals", "2", "--veto", "Reject", "--requester", "ada@example.com", "--requester-name", "ci",
    )  # fmt: skip
    assert code == 0
    envelope = b.envelope()
    assert envelope["approval"] == {"count": 2, "veto": [1]}
    assert envelope["requester"] == {"name": "ci", "user": "ada@example.com"}


def test_approval_flags_by_index_and_with_the_requester_allowed(
    ask: Callable[..., int], bot: Callable[[str | None], ThreadBot]
) -> None:
    b = bot("answered")
    code = ask(*QUESTION, "--approvals", "3", "--veto", "1", "--requester", "U0ADA", "--requester-may-vote")
    assert code == 0
    envelope = b.envelope()
    assert envelope["approval"] == {"count": 3, "veto": [1], "exclude_requester": False}
    assert envelope["requester"] == {"user": "U0ADA"}


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--approvals", "1"], "approval.count"),
        (["--approvals", "2", "--veto", "Maybe"], "--veto 'Maybe' is not an option of the question"),
        (["--approvals", "2", "--veto", "5"], "approval.veto: 5 is not an option"),
        (["--veto", "No"], "need --approvals N"),
        (["--approvals", "2", "--multi"], "must be single choice"),
        (["--approvals", "2", "--on-timeout", "recommended"], "approval"),
        (["--requester", "not an id"], "requester.user"),
    ],
)
def test_broken_approval_flags_are_usage_errors_and_send_nothing(
    ask: Callable[..., int],
    redis_url: str,
    prefix: str,
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    message: str,
) -> None:
    assert ask(*QUESTION, *flags) == 2  # usage
    assert message in capsys.readouterr().err
    with syncredis.Redis.from_url(redis_url) as r:
        assert r.xlen(f"{prefix}:asks") == 0  # the client checks before it sends


@pytest.mark.parametrize(
    ("flags", "route"),
    [
        (["--user", "U0123"], {"user": "U0123"}),
        (["--user", "someone@example.com"], {"user": "someone@example.com"}),
        (["--policy", "deploys"], {"policy": "deploys"}),
        ([], None),
    ],
)
def test_route_flags(
    ask: Callable[..., int],
    bot: Callable[[str | None], ThreadBot],
    flags: list[str],
    route: dict[str, str] | None,
) -> None:
    b = bot("answered")
    assert ask(*flags, "Go?", "--option", "Yes") == 0
    assert b.envelope().get("route") == route


def test_a_request_file_is_sent_as_given(
    ask: Callable[..., int], bot: Callable[[str | None], ThreadBot], tmp_path: Path
) -> None:
    b = bot("answered")
    request = {"questions": [{"prompt": "Ship it?", "choices": ["Ship", "Hold"], "recommendedIndex": 0}]}
    path = tmp_path / "ask.json"
    path.write_text(json.dumps(request))
    assert ask("--channel", "C0123", "-f", str(path)) == 0
    assert b.envelope()["request"] == request


def test_a_request_on_stdin_in_rich_format(
    ask: Callable[..., int], bot: Callable[[str | None], ThreadBot], monkeypatch: pytest.MonkeyPatch
) -> None:
    b = bot(None)
    form = {"title": "Release", "questions": [{"prompt": "Notes?", "type": "text"}]}
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(form)))
    assert ask("-f", "-", "--format", "rich", "--no-wait") == 0
    envelope = b.envelope()
    assert envelope["format"] == "rich"
    assert envelope["request"] == form


def test_no_wait_prints_the_ask_id(
    ask: Callable[..., int], bot: Callable[[str | None], ThreadBot], capsys: pytest.CaptureFixture[str]
) -> None:
    b = bot(None)
    assert ask(*QUESTION, "--no-wait") == 0
    assert capsys.readouterr().out == b.envelope()["ask_id"] + "\n"


def test_a_wait_bound_that_passes_exits_4_and_names_the_pending_ask(
    ask: Callable[..., int],
    prefix: str,
    bot: Callable[[str | None], ThreadBot],
    capsys: pytest.CaptureFixture[str],
) -> None:
    b = bot(None)
    assert ask(*QUESTION, "--wait", "300ms", "--json") == 4
    captured = capsys.readouterr()
    ask_id = b.envelope()["ask_id"]
    assert json.loads(captured.out) == {
        "ask_id": ask_id,
        "reply_to": f"{prefix}:reply:{ask_id}",
        "status": "pending",
    }
    assert f"the ask {ask_id} is still pending" in captured.err
    assert "\r" not in captured.err  # no live line when stderr is not a terminal


def test_a_contract_error_exits_2_with_the_contract_message_and_sends_nothing(
    ask: Callable[..., int], bot: Callable[[str | None], ThreadBot], capsys: pytest.CaptureFixture[str]
) -> None:
    b = bot(None)
    assert ask("--channel", "C0123", "Deploy?") == 2
    assert capsys.readouterr().err == "slack-ask ask: error: questions[0] needs at least 1 option\n"
    time.sleep(0.1)
    assert b.entries == []


@pytest.mark.parametrize(
    "args",
    [
        ["--channel", "C1", "--user", "U1", "Q?", "--option", "A"],
        ["Q?", "--option", "A", "--timeout", "soon"],
        ["Q?", "--option", "A", "--wait", "1s", "--no-wait"],
        ["Q?", "--category", "other"],
    ],
)
def test_argparse_usage_errors_exit_2(ask: Callable[..., int], args: list[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        ask(*args)
    assert caught.value.code == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "give a question, or the whole request with -f FILE"),
        (["--thread", "1.2", "Q?", "--option", "A"], "--thread needs --channel"),
        (["Q?", "-f", "x.json"], "-f gives the whole request; drop QUESTION"),
        (["-f", "/nonexistent/ask.json"], "cannot read /nonexistent/ask.json"),
        (["--channel", "C1", "Q?", "--option", "A", "--responder", "nobody"], "is not a Slack id"),
    ],
)
def test_input_errors_exit_2_with_a_message(
    ask: Callable[..., int], capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert ask(*args) == 2
    assert message in capsys.readouterr().err


def test_unreachable_redis_exits_8(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["ask", "--redis", "redis://127.0.0.1:1/0", *QUESTION])
    assert code == 8
    assert "127.0.0.1:1" in capsys.readouterr().err


def test_environment_gives_redis_url_and_prefix(
    redis_url: str, prefix: str, bot: Callable[[str | None], ThreadBot], monkeypatch: pytest.MonkeyPatch
) -> None:
    bot("cancelled")
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("SLACK_ASK_PREFIX", prefix)
    assert main(["ask", *QUESTION]) == 3


def _env(redis_url: str, prefix: str) -> dict[str, str]:
    return {**os.environ, "REDIS_URL": redis_url, "SLACK_ASK_PREFIX": prefix}


@pytest.mark.skipif(not SLACK_ASK.exists(), reason="the slack-ask script is not installed")
def test_installed_command_prints_the_answer_and_exits_0(
    redis_url: str, prefix: str, bot: Callable[[str | None], ThreadBot]
) -> None:
    bot("answered")
    proc = subprocess.run(
        [str(SLACK_ASK), "ask", *QUESTION],
        env=_env(redis_url, prefix),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "User answers:\nq1: Yes\n", "")


@pytest.mark.skipif(not SLACK_ASK.exists(), reason="the slack-ask script is not installed")
def test_a_terminal_shows_a_live_waiting_line_with_the_time_left(
    redis_url: str, prefix: str, cleanup: None
) -> None:
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run(
            [str(SLACK_ASK), "ask", *QUESTION, "--timeout", "1h", "--wait", "1500ms"],
            env=_env(redis_url, prefix),
            stdout=subprocess.PIPE,
            stderr=follower,
            timeout=30,
        )
        os.close(follower)
        follower = -1
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
    finally:
        if follower != -1:
            os.close(follower)
        os.close(leader)
    assert proc.returncode == 4
    text = shown.decode()
    assert "\rWaiting for an answer to" in text or "\r\x1b[KWaiting for an answer to" in text
    assert " left" in text
