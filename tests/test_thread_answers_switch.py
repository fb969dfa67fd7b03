"""The switch for answers typed in a thread: the envelope's ``thread_answers`` wins, then the policy's,
then ``SLACK_ASK_THREAD_ANSWERS`` (on by default); and the ask message's hint follows it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.asks import build_record
from bot.config import Settings, load_policy_file
from bot.model import AskRecord
from bot.render import render_ask_message
from bot.render.replies import THREAD_HINT
from contract.envelopes import parse_ask_envelope

DEPLOY = {"id": "deploy", "question": "Deploy v2?", "options": ["Yes", "No"]}
POLICY = '[policies.quiet]\nroute = { channel = "C0DEPLOY" }\nthread_answers = false\n'


def _build(settings: Settings, **fields: Any) -> AskRecord:
    envelope = {
        "v": 1,
        "ask_id": "a1",
        "reply_to": "r1",
        "request": DEPLOY,
        "route": {"channel": "C1"},
        **fields,
    }
    built = build_record(
        parse_ask_envelope(json.dumps(envelope)), tag="r1", created_ms=1_000, settings=settings
    )
    assert isinstance(built, AskRecord)
    return built


@pytest.mark.parametrize(
    ("setting", "policy", "envelope", "on"),
    [
        (True, False, None, True),
        (False, False, None, False),
        (True, True, None, False),
        (True, True, True, True),
        (False, False, True, True),
        (True, False, False, False),
    ],
)
def test_the_envelope_then_the_policy_then_the_setting_decide(
    tmp_path: Path, setting: bool, policy: bool, envelope: bool | None, on: bool
) -> None:
    path = tmp_path / "policies.toml"
    path.write_text(POLICY)
    settings = Settings(policy_file=load_policy_file(path), thread_answers=setting)
    fields: dict[str, Any] = {"route": {"policy": "quiet"}} if policy else {}
    if envelope is not None:
        fields["thread_answers"] = envelope
    record = _build(settings, **fields)
    assert record.thread_answers is on
    shown = json.dumps(render_ask_message(record, now_ms=0).blocks)
    assert (THREAD_HINT in shown) is on


def test_the_setting_reads_its_environment_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_ASK_THREAD_ANSWERS", "false")
    monkeypatch.setenv("SLACK_ASK_APPROVE_WORDS", "ship it, go ahead")
    settings = Settings()
    assert settings.thread_answers is False and settings.approve_words == "ship it, go ahead"


def test_a_non_boolean_switch_is_an_invalid_envelope() -> None:
    from contract.envelopes import EnvelopeError

    with pytest.raises(EnvelopeError):
        parse_ask_envelope(
            json.dumps({"v": 1, "ask_id": "a", "reply_to": "r", "request": DEPLOY, "thread_answers": "no"})
        )
