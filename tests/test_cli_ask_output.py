"""What plain ``slack-ask ask`` says beyond the result's text: why an ask reached nobody, who ended it
(a person's Decline against the requester's cancel), and flags that would otherwise be ignored."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis as syncredis

from bot.cli import main
from tests.fakebot import make_result

QUESTION = ["--channel", "C0123", "Deploy to production?", "--option", "Yes", "--option", "No"]
Result = Callable[[dict[str, Any]], dict[str, Any]]


class ReplyingBot:
    """Plays the bot: every ask on ``P:asks`` gets the result ``reply(envelope)`` on its reply list."""

    def __init__(self, redis_url: str, prefix: str, reply: Result) -> None:
        self.redis = syncredis.Redis.from_url(redis_url)
        self.stream = f"{prefix}:asks"
        self.reply = reply
        self.asks: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        last = "0"
        while not self._stop.is_set():
            for _, items in self.redis.xread({self.stream: last}, block=50) or []:
                for entry_id, fields in items:
                    last = entry_id.decode()
                    if b"ask" in fields:
                        envelope = json.loads(fields[b"ask"])
                        self.asks.append(envelope)
                        self.redis.rpush(envelope["reply_to"], json.dumps(self.reply(envelope)))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.redis.close()


@pytest.fixture
def bot(redis_url: str, prefix: str) -> Iterator[Callable[[Result], ReplyingBot]]:
    bots: list[ReplyingBot] = []

    def start(reply: Result) -> ReplyingBot:
        bots.append(ReplyingBot(redis_url, prefix, reply))
        return bots[-1]

    yield start
    for b in bots:
        b.stop()
    with syncredis.Redis.from_url(redis_url) as r:
        keys = list(r.scan_iter(match=f"{prefix}:*", count=1000))
        if keys:
            r.delete(*keys)


@pytest.fixture
def ask(redis_url: str, prefix: str) -> Callable[..., int]:
    def run(*args: str) -> int:
        return main(["ask", "--redis", redis_url, "--prefix", prefix, *args])

    return run


def test_unavailable_says_why_from_the_results_error(
    ask: Callable[..., int], bot: Callable[[Result], ReplyingBot], capsys: pytest.CaptureFixture[str]
) -> None:
    bot(lambda env: make_result(env, "unavailable"))
    assert ask(*QUESTION, "--wait", "10s") == 6
    captured = capsys.readouterr()
    assert captured.out.startswith("User answers:\nq1: (unavailable)")  # stdout stays the result's text
    why = "Slack answered channel_not_found when posting to C0 (channel_not_found)"
    assert captured.err == f"slack-ask ask: Not delivered: {why}.\n"


def test_a_persons_decline_names_who_declined(
    ask: Callable[..., int], bot: Callable[[Result], ReplyingBot], capsys: pytest.CaptureFixture[str]
) -> None:
    # What the bot pushes for a Decline: outcome cancelled, the person who pressed it as responder.
    bot(lambda env: make_result(env, "cancelled", responder={"id": "U0ADA", "name": "ada"}))
    assert ask(*QUESTION, "--wait", "10s") == 3
    captured = capsys.readouterr()
    assert captured.out == "User answers:\nq1: (cancelled)\n"
    assert captured.err == "slack-ask ask: Declined in Slack by ada (U0ADA).\n"


def test_the_requesters_cancel_reads_differently_from_a_decline(
    ask: Callable[..., int], bot: Callable[[Result], ReplyingBot], capsys: pytest.CaptureFixture[str]
) -> None:
    # What the bot pushes for a cancel envelope: outcome cancelled, no responder.
    bot(lambda env: make_result(env, "cancelled"))
    assert ask(*QUESTION, "--wait", "10s") == 3
    captured = capsys.readouterr()
    assert captured.out == "User answers:\nq1: (cancelled)\n"
    assert captured.err == "slack-ask ask: Withdrawn by the requester (a cancel), not declined by a person.\n"


def test_a_responder_name_cannot_write_terminal_control_sequences(
    ask: Callable[..., int], bot: Callable[[Result], ReplyingBot], capsys: pytest.CaptureFixture[str]
) -> None:
    bot(lambda env: make_result(env, "dismissed", responder={"id": "U0X", "name": "eve\x1b[2J"}))
    assert ask(*QUESTION, "--wait", "10s") == 5
    assert capsys.readouterr().err == "slack-ask ask: Dismissed by eve?[2J (U0X).\n"


def test_json_output_is_still_one_document_with_nothing_on_stderr(
    ask: Callable[..., int], bot: Callable[[Result], ReplyingBot], capsys: pytest.CaptureFixture[str]
) -> None:
    bot(lambda env: make_result(env, "unavailable"))
    assert ask(*QUESTION, "--json", "--wait", "10s") == 6
    captured = capsys.readouterr()
    assert json.loads(captured.out)["error"]["code"] == "channel_not_found"
    assert captured.err == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--recommended", "2"],
            "--recommended 2 is out of range: give 0 to 1 (it counts the --option values from 0)",
        ),
        (
            ["--recommended", "-1"],
            "--recommended -1 is out of range: give 0 to 1 (it counts the --option values from 0)",
        ),
        (
            ["--recommended", "5", "--format", "rich"],
            "--recommended 5 is out of range: give 0 to 1 (it counts the --option values from 0)",
        ),
        (["--timeout", "0s"], "--timeout must be more than 0; leave it out for the bot's default"),
        (["--timeout", "0"], "--timeout must be more than 0; leave it out for the bot's default"),
    ],
)
def test_flags_that_would_be_ignored_are_usage_errors_and_send_nothing(
    ask: Callable[..., int],
    capsys: pytest.CaptureFixture[str],
    redis_url: str,
    prefix: str,
    args: list[str],
    message: str,
) -> None:
    assert ask(*QUESTION, *args, "--wait", "2s") == 2
    assert capsys.readouterr().err == f"slack-ask ask: error: {message}\n"
    with syncredis.Redis.from_url(redis_url) as r:
        assert r.xlen(f"{prefix}:asks") == 0


def test_recommended_without_options_says_what_it_needs(
    ask: Callable[..., int], capsys: pytest.CaptureFixture[str]
) -> None:
    assert ask("--channel", "C0123", "Free text?", "--recommended", "0") == 2
    assert "--recommended needs the options it points at" in capsys.readouterr().err


def test_an_in_range_recommended_is_sent(
    ask: Callable[..., int], bot: Callable[[Result], ReplyingBot], capsys: pytest.CaptureFixture[str]
) -> None:
    b = bot(lambda env: make_result(env, "answered"))
    assert ask(*QUESTION, "--recommended", "1", "--timeout", "90s", "--wait", "10s") == 0
    assert b.asks[0]["request"]["questions"][0]["recommended"] == 1
    assert b.asks[0]["timeout_ms"] == 90_000
    assert capsys.readouterr().err == ""
