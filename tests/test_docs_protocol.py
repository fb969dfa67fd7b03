"""Every ``$ redis-cli`` line in docs/protocol.md runs against a real Redis and prints what the page shows.

The test plays the bot: before a ``BLPOP`` whose output shows a result, it pushes exactly that
result onto the list, after checking it is the result the bot would write for the ask the page sent
(same ask_id, and for pi-question the contract's narration and details). Keys are moved under a
per-test prefix; nothing else in the database is touched.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis as syncredis

from contract import build_details, narrate, normalize_ask_request, normalize_rich_form
from contract.envelopes import ResultEnvelope, parse_ask_envelope, parse_cancel_envelope
from tests.conftest import REDIS_IS_FAKE

DOC = Path(__file__).resolve().parents[1] / "docs" / "protocol.md"
DOC_PREFIX = "slack-ask:"
REDIS_CLI = "/usr/bin/redis-cli" if Path("/usr/bin/redis-cli").exists() else shutil.which("redis-cli")
STREAM_ID = re.compile(r'^"\d+-\d+"$')
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


@dataclass
class Example:
    line: str
    argv: list[str]
    output: list[str] = field(default_factory=list)


def fenced(lang: str) -> list[str]:
    return [body for tag, body in FENCE.findall(DOC.read_text(encoding="utf-8")) if tag == lang]


def examples() -> list[Example]:
    found: list[Example] = []
    for body in fenced("console"):
        for line in body.splitlines():
            if line.startswith("$ "):
                found.append(Example(line=line, argv=shlex.split(line[2:])))
            elif line.strip():
                assert found, f"output before any command in a console block: {line!r}"
                found[-1].output.append(line)
    return found


def command_of(argv: list[str]) -> tuple[list[str], list[str]]:
    """Split ``redis-cli [--raw|--no-raw] CMD args...`` into (options, command)."""
    rest = argv[1:]
    options = [a for a in rest if a in ("--raw", "--no-raw")]
    return options, [a for a in rest if a not in ("--raw", "--no-raw")]


# ---------------------------------------------------------------- running redis-cli


def _format(reply: Any, raw: bool, indent: str = "") -> list[str]:
    """redis-cli's output for the reply types the page uses (the fallback without the binary)."""
    if reply is None:
        return [""] if raw else ["(nil)"]
    if isinstance(reply, int):
        return [str(reply)] if raw else [f"(integer) {reply}"]
    if isinstance(reply, bytes | str):
        text = reply.decode() if isinstance(reply, bytes) else reply
        return [text] if raw else [json.dumps(text)]
    if isinstance(reply, list | tuple):
        if raw:
            return [line for item in reply for line in _format(item, raw)]
        width = len(str(len(reply)))
        return [f"{i + 1:>{width}}) {_format(item, raw)[0]}" for i, item in enumerate(reply)]
    raise AssertionError(f"no formatter for {reply!r}")


def run_cli(url: str, argv: list[str]) -> list[str]:
    options, cmd = command_of(argv)
    raw = "--raw" in options
    # fakeredis's TCP server encodes some replies otherwise than Redis, so redis-cli would print them
    # differently; there the page's output is checked with redis-py and redis-cli's formatting rules.
    if REDIS_CLI is not None and not REDIS_IS_FAKE:
        # --no-raw: the terminal form the page shows, even though stdout is a pipe here.
        args = [REDIS_CLI, "-u", url, *(options or ["--no-raw"]), *cmd]
        proc = subprocess.run(args, capture_output=True, text=True, timeout=30, check=True)
        return proc.stdout.splitlines()
    with syncredis.Redis.from_url(url) as r:
        return _format(r.execute_command(*cmd), raw)


# ---------------------------------------------------------------- the bot's part


def expected_result_text(envelope: dict[str, Any], result: dict[str, Any]) -> None:
    """The shown result is what the bot writes for this ask: ids, and the contract's text and details."""
    parsed = ResultEnvelope.model_validate(result)
    assert parsed.ask_id == envelope["ask_id"]
    assert parsed.format == envelope.get("format", "pi-question")
    if parsed.format == "pi-question" and parsed.outcome != "error":
        questions = normalize_ask_request(envelope["request"]).questions
        assert [a["id"] for a in result["answers"]] == [q.id for q in questions]
        assert result["text"] == narrate(questions, result["answers"], result["delivery"])
        assert result["details"] == build_details(questions, result["answers"], result["delivery"])


def test_the_page_has_submit_wait_and_cancel_examples() -> None:
    found = examples()
    assert found, "no $ redis-cli lines in docs/protocol.md"
    assert all(e.argv[0] == "redis-cli" for e in found), [e.line for e in found if e.argv[0] != "redis-cli"]
    commands = [(command_of(e.argv)[1][0].upper(), command_of(e.argv)[1][3:4]) for e in found]
    assert ("XADD", ["ask"]) in commands
    assert ("XADD", ["cancel"]) in commands
    assert any(name == "BLPOP" for name, _ in commands)


def test_every_redis_cli_example_runs_and_prints_what_the_page_shows(
    redis_url: str, prefix: str, sync_redis: syncredis.Redis
) -> None:
    stream = f"{prefix}:asks"
    asks: dict[str, dict[str, Any]] = {}  # reply_to -> the ask envelope sent to it
    for example in examples():
        argv = [a.replace(DOC_PREFIX, f"{prefix}:") for a in example.argv]
        shown = [line.replace(DOC_PREFIX, f"{prefix}:") for line in example.output]
        _, cmd = command_of(argv)
        name = cmd[0].upper()

        if name == "XADD":
            assert cmd[1] == stream, example.line
            kind, payload = cmd[3], cmd[4]
            before = sync_redis.xlen(stream)
            if kind == "ask":
                envelope = parse_ask_envelope(payload)
                normalize = normalize_rich_form if envelope.format == "rich" else normalize_ask_request
                normalize(envelope.request)
                asks[envelope.reply_to] = json.loads(payload)
            else:
                assert kind == "cancel", example.line
                cancel = parse_cancel_envelope(payload)
                assert cancel.reply_to in asks, "the page cancels an ask it never sent"
        elif name == "BLPOP" and len(shown) == 2:
            key, result_json = shown
            assert key == cmd[1]
            result = json.loads(result_json)
            expected_result_text(asks[key], result)
            # Playing the bot: the result it would push.
            sync_redis.rpush(key, result_json)

        printed = run_cli(redis_url, argv)

        if name == "XADD":
            assert sync_redis.xlen(stream) == before + 1
            last = sync_redis.xrevrange(stream, count=1)[0][1]
            assert last == {kind.encode(): payload.encode()}
        assert len(printed) == len(shown), f"{example.line}\nprinted: {printed}\nshown: {shown}"
        for got, want in zip(printed, shown, strict=True):
            if STREAM_ID.match(want):
                assert STREAM_ID.match(got), (example.line, got)
            else:
                assert got == want, example.line


def test_every_json_example_is_a_valid_envelope() -> None:
    blocks = [json.loads(body) for body in fenced("json")]
    assert blocks
    shown_results = {}
    for example in examples():
        if command_of(example.argv)[1][0].upper() == "BLPOP" and len(example.output) == 2:
            result = json.loads(example.output[1])
            shown_results[result["ask_id"]] = result
    for block in blocks:
        if "outcome" in block:
            ResultEnvelope.model_validate(block)
            if block["ask_id"] in shown_results:
                # The laid-out result is the one BLPOP printed.
                assert block == shown_results[block["ask_id"]]
        elif "request" in block:
            envelope = parse_ask_envelope(json.dumps(block))
            normalize_ask_request(envelope.request)
        else:
            parse_cancel_envelope(json.dumps(block))


def test_the_error_codes_table_names_every_protocol_error_code() -> None:
    text = DOC.read_text(encoding="utf-8")
    for code in ("invalid_request", "invalid_envelope", "unsupported_version", "timeout_error", "no_route"):
        assert f"`{code}`" in text, code
    for outcome in ("answered", "cancelled", "timeout", "dismissed", "unavailable", "error"):
        assert f"| `{outcome}` |" in text, outcome


def test_schema_links_point_at_files_that_exist() -> None:
    text = DOC.read_text(encoding="utf-8")
    links = re.findall(r"\]\((\.\./contract/schemas/[^)]+)\)", text)
    assert links
    for link in links:
        assert (DOC.parent / link).resolve().is_file(), link


def test_the_redis_py_fallback_prints_like_redis_cli() -> None:
    assert _format(None, raw=False) == ["(nil)"]
    assert _format(b"1-0", raw=False) == ['"1-0"']
    assert _format([b"k", b'{"a":"b\\nc"}'], raw=True) == ["k", '{"a":"b\\nc"}']
    assert _format([b"k", b"v"], raw=False) == ['1) "k"', '2) "v"']
