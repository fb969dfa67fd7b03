"""A policy's ``approval`` (protocol section 13): loaded from the policy file, applied to asks that name the
policy, overridden by the ask's own, and held to the same rules after the merge."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.asks import Rejection, build_record
from bot.config import Settings, load_policy_file
from bot.errors import ConfigError
from bot.model import AskRecord
from contract.envelopes import parse_ask_envelope

DEPLOY = {"id": "deploy", "question": "Deploy v2?", "options": ["Approve", "Reject"]}


def _settings(tmp_path: Path, text: str) -> Settings:
    path = tmp_path / "policies.toml"
    path.write_text(text)
    return Settings(policy_file=load_policy_file(path))


def _build(settings: Settings, **fields: Any) -> AskRecord | Rejection:
    envelope = {"v": 1, "ask_id": "a1", "reply_to": "r1", "request": DEPLOY, **fields}
    return build_record(
        parse_ask_envelope(json.dumps(envelope)), tag="r1", created_ms=1_000, settings=settings
    )


PROD = '[policies.prod]\nroute = { channel = "C0DEPLOY" }\napproval = { count = 2, veto = [1] }\n'


def test_a_policys_approval_applies_to_asks_that_name_it(tmp_path: Path) -> None:
    built = _build(_settings(tmp_path, PROD), route={"policy": "prod"})
    assert isinstance(built, AskRecord)
    assert built.approval is not None and (built.approval.count, built.approval.veto) == (2, [1])
    assert built.approval.exclude_requester is True


def test_the_asks_own_approval_overrides_the_policys(tmp_path: Path) -> None:
    built = _build(_settings(tmp_path, PROD), route={"policy": "prod"}, approval={"count": 3})
    assert isinstance(built, AskRecord)
    assert built.approval is not None and (built.approval.count, built.approval.veto) == (3, [])


@pytest.mark.parametrize(
    ("policy", "fields", "rule"),
    [
        (
            'approval = { count = 2 }\non_timeout = "recommended"\n',
            {},
            'on_timeout "recommended" is not allowed',
        ),
        ("approval = { count = 2, veto = [4] }\n", {}, "approval.veto: 4 is not an option"),
        (
            "approval = { count = 2 }\n",
            {"request": {"questions": [DEPLOY, {**DEPLOY, "id": "b"}]}},
            "one question",
        ),
    ],
)
def test_a_policys_approval_is_held_to_the_rules_after_the_merge(
    tmp_path: Path, policy: str, fields: dict[str, Any], rule: str
) -> None:
    settings = _settings(tmp_path, '[policies.prod]\nroute = { channel = "C0DEPLOY" }\n' + policy)
    built = _build(settings, route={"policy": "prod"}, **fields)
    assert isinstance(built, Rejection)
    assert built.code == "invalid_envelope" and rule in built.message


def test_a_policy_file_with_a_broken_approval_is_refused_when_loaded(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"approval\.count"):
        _settings(tmp_path, "[policies.prod]\napproval = { count = 1 }\n")
