"""The Workflow Builder step without I/O: manifest.yml declares what bot/workflow.py reads and writes,
in the shape Slack's manifest takes; inputs become the envelope the intake accepts, or a clear
refusal; each way an ask ends becomes the step's outputs or its error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.config import Settings
from bot.playground.functions import parameters_problems
from bot.results import parse_result
from bot.workflow import CALLBACK_ID, INPUTS, OUTPUTS, StepRefusal, step_completion, step_envelope
from contract.envelopes import parse_ask_envelope
from tests.fakebot import make_result

MANIFEST = yaml.safe_load((Path(__file__).resolve().parent.parent / "manifest.yml").read_text())
# The parameter types a manifest may name (Slack's app manifest schema, functions' parameters).
SLACK_TYPES = {
    "integer",
    "number",
    "boolean",
    "string",
    "object",
    "array",
    "slack#/types/user_id",
    "slack#/types/channel_id",
    "slack#/types/usergroup_id",
    "slack#/types/timestamp",
    "slack#/types/date",
}
SETTINGS = Settings(slack_bot_token="xoxb-test")
REPLY_TO = "slack-ask:reply:workflow-step"


def _params(kind: str) -> dict[str, Any]:
    params: dict[str, Any] = MANIFEST["functions"][CALLBACK_ID][kind]
    return params


def test_the_manifest_declares_the_step_as_slack_takes_it() -> None:
    step = MANIFEST["functions"][CALLBACK_ID]
    assert set(step) == {"title", "description", "input_parameters", "output_parameters"}
    assert step["title"] == "Ask a question"
    for kind in ("input_parameters", "output_parameters"):
        for name, param in _params(kind).items():
            assert param["name"] == name and param["title"] and isinstance(param["is_required"], bool)
            assert param["type"] in SLACK_TYPES, (name, param["type"])
            if param["type"] == "array":
                assert param["items"]["type"] in SLACK_TYPES
    settings = MANIFEST["settings"]
    assert settings["org_deploy_enabled"] is True and settings["function_runtime"] == "remote"
    assert "function_executed" in settings["event_subscriptions"]["bot_events"]


def test_the_manifest_names_what_the_bot_reads_and_writes() -> None:
    assert tuple(_params("input_parameters")) == INPUTS
    assert tuple(_params("output_parameters")) == OUTPUTS


def _envelope(inputs: dict[str, Any]) -> dict[str, Any] | StepRefusal:
    return step_envelope(inputs, execution_id="Fx0TEST", reply_to=REPLY_TO, settings=SETTINGS)


def test_inputs_become_an_ask_the_intake_accepts() -> None:
    env = _envelope(
        {
            "question": "Ship?",
            "options": ["Ship", "Wait"],
            "user": "U0BOB",
            "answerers": ["U0BOB", "U0ALICE"],
            "timeout_minutes": 90,
            "approvals": 2,
            "requester": "U0CAROL",
        }
    )
    assert isinstance(env, dict)
    parsed = parse_ask_envelope(json.dumps(env))
    assert parsed.ask_id == "wf.Fx0TEST" and parsed.reply_to == REPLY_TO
    assert parsed.route is not None and parsed.route.user == "U0BOB"
    assert parsed.responders is not None and parsed.responders.users == ["U0BOB", "U0ALICE"]
    assert parsed.timeout_ms == 90 * 60_000
    assert parsed.approval is not None and parsed.approval.count == 2
    assert parsed.requester is not None and parsed.requester.user == "U0CAROL"


@pytest.mark.parametrize(
    ("inputs", "says"),
    [
        ({"options": ["a"], "channel": "C0X"}, "question: the question to ask is required"),
        ({"question": "Q", "options": [], "channel": "C0X"}, "give at least 1 option"),
        ({"question": "Q", "options": ["x"] * 13, "channel": "C0X"}, "at most 12 options"),
        ({"question": "Q", "options": ["a"]}, "say where to ask"),
        ({"question": "Q", "options": ["a"], "channel": "C0X", "timeout_minutes": 0}, "timeout_minutes"),
        ({"question": "Q", "options": ["a"], "channel": "C0X", "approvals": 21}, "approvals: from 2 to 20"),
        ({"question": "Q", "options": ["a", "a"], "channel": "C0X", "approvals": 2}, ""),
    ],
)
def test_inputs_the_step_cannot_ask_with_are_refused_clearly(inputs: dict[str, Any], says: str) -> None:
    env = _envelope(inputs)
    if not says:  # accepted: the contract allows repeated labels
        assert isinstance(env, dict)
        return
    assert isinstance(env, StepRefusal) and says in env.message, env


@pytest.mark.parametrize(
    ("outcome", "extra", "expected"),
    [
        (
            "answered",
            {},
            {"outcome": "answered", "choice": "Yes", "choice_index": 0, "answered_by": "U0HUMAN"},
        ),
        ("timeout", {}, {"outcome": "timeout"}),
        ("dismissed", {}, {"outcome": "dismissed"}),
        ("cancelled", {}, {"outcome": "cancelled"}),
        (
            "cancelled",
            {"responder": {"id": "U0BOB", "name": "Bob"}},
            {"outcome": "declined", "answered_by": "U0BOB"},
        ),
    ],
)
def test_each_ending_gives_outputs_of_the_declared_types(
    outcome: str, extra: dict[str, Any], expected: dict[str, Any]
) -> None:
    env = {"ask_id": "wf.Fx1", "request": {"question": "Go?", "options": ["Yes", "No"]}}
    result = parse_result(json.dumps(make_result(env, outcome, **extra)))
    completion = step_completion(result)
    assert completion.error is None and completion.outputs == {**expected, "ask_id": "wf.Fx1"}
    assert parameters_problems(_params("output_parameters"), completion.outputs, "outputs") == []


@pytest.mark.parametrize("outcome", ["unavailable", "error"])
def test_an_ask_that_could_not_be_asked_fails_the_step_with_the_reason(outcome: str) -> None:
    env = {"ask_id": "wf.Fx1", "request": {"question": "Go?", "options": ["Yes", "No"]}}
    completion = step_completion(parse_result(json.dumps(make_result(env, outcome))))
    assert completion.outputs is None and completion.error is not None
    assert completion.error.startswith("slack-ask could not ask: ")
