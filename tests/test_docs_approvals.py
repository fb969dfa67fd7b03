"""docs/approvals.md's worked example is what the bot accepts and writes."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from bot.asks import build_record
from bot.config import Settings
from bot.model import AskRecord
from contract import build_details, narrate, normalize_ask_request
from contract.envelopes import ResultEnvelope, parse_ask_envelope

DOC = Path(__file__).resolve().parents[1] / "docs" / "approvals.md"


def _json_blocks() -> list[dict[str, Any]]:
    text = DOC.read_text(encoding="utf-8")
    return [
        json.loads(body) for body in re.findall(r"^```json\n(.*?)^```", text, re.M | re.S) if "{" in body[:2]
    ]


def test_the_worked_example_is_an_ask_the_bot_takes_and_the_result_it_writes() -> None:
    envelope, result = [b for b in _json_blocks() if "v" in b]
    parsed = parse_ask_envelope(json.dumps(envelope))
    record = build_record(parsed, tag="t", created_ms=0, settings=Settings())
    assert isinstance(record, AskRecord) and record.approval is not None
    checked = ResultEnvelope.model_validate(result)
    questions = normalize_ask_request(envelope["request"]).questions
    delivery = {"surface": "host", "degraded": False}
    assert checked.text == narrate(questions, result["answers"], delivery)
    assert checked.details == build_details(questions, result["answers"], delivery)
    assert checked.votes is not None and len(checked.votes) == record.approval.count
    assert checked.responder is not None and checked.responder.id == checked.votes[-1].user.id
