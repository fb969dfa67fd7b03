"""The fake Slack's custom workflow steps (Slack's "custom steps for Bolt apps").

A step is declared in the app manifest (``functions:`` with typed ``input_parameters`` and
``output_parameters``); the fake reads the repository's ``manifest.yml`` for them. ``run_step`` on
`FakeSlack` starts an execution: it checks the inputs against the declared types (the fake never sends
what Slack would not), issues a just-in-time token (``xwfp-...``, alive until the step completes or
`token_ttl` seconds pass) and sends the bot a signed ``function_executed`` event. The bot ends it with
``functions.completeSuccess`` (outputs checked against the declared types: ``parameter_validation_failed``
otherwise) or ``functions.completeError``; a second completion is refused with
``execution_not_in_running_state``, an unknown id with ``function_execution_not_found``.

Either the execution's live token or the bot token may complete it (the fake records which did).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bot.playground.errors import FakeSlackError
from bot.playground.state import JSON

__all__ = ["MANIFEST", "Execution", "Functions", "value_problems"]

MANIFEST = Path(__file__).resolve().parents[2] / "manifest.yml"
"""The app manifest of the repository the fake runs from (its steps' declarations)."""

TOKEN_TTL_S = 15 * 60  # Slack: a just-in-time token lives 15 minutes, or until the step completes

_ID_PATTERNS = {
    "slack#/types/user_id": re.compile(r"^[UW][A-Z0-9]{2,}$"),
    "slack#/types/channel_id": re.compile(r"^[CGD][A-Z0-9]{2,}$"),
    "slack#/types/usergroup_id": re.compile(r"^S[A-Z0-9]{2,}$"),
}


@dataclass
class Completion:
    """One ``functions.complete*`` call for an execution, as the fake answered it."""

    method: str
    token: str  # "jit" (the execution's own token), "bot", or "other"
    error: str | None  # None: accepted
    outputs: JSON | None = None


@dataclass
class Execution:
    """One run of a step, from ``function_executed`` to its completion."""

    id: str
    callback_id: str
    inputs: JSON
    token: str
    issued_at: float
    state: str = "running"
    """``running``, ``completed`` (completeSuccess) or ``failed`` (completeError)."""
    outputs: JSON | None = None
    error: str | None = None
    calls: list[Completion] = field(default_factory=list)

    @property
    def accepted(self) -> list[Completion]:
        """The completion calls the fake took (exactly one for a step that ended)."""
        return [c for c in self.calls if c.error is None]


def value_problems(declared: Mapping[str, Any], value: Any, where: str) -> list[str]:
    """What is wrong with ``value`` for a parameter declared as ``declared`` (its ``type``, and
    ``items`` for arrays); an empty list when it fits."""
    kind = str(declared.get("type") or "")
    if kind == "string":
        ok = isinstance(value, str)
    elif kind == "integer":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind == "number":
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif kind == "boolean":
        ok = isinstance(value, bool)
    elif kind == "object":
        ok = isinstance(value, dict)
    elif kind == "array":
        if not isinstance(value, list):
            return [f"{where}: expected an array, got {type(value).__name__}"]
        items = declared.get("items") or {}
        return [p for i, item in enumerate(value) for p in value_problems(items, item, f"{where}[{i}]")]
    elif kind in _ID_PATTERNS:
        ok = isinstance(value, str) and _ID_PATTERNS[kind].fullmatch(value) is not None
    elif kind == "slack#/types/timestamp":
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    else:
        return [f"{where}: the fake does not know type {kind!r}"]
    return [] if ok else [f"{where}: {value!r} is not a {kind}"]


def parameters_problems(declared: Mapping[str, Any], values: Mapping[str, Any], what: str) -> list[str]:
    """``values`` against a manifest's parameter declarations: unknown names, missing required ones,
    wrong types."""
    problems = [f"{what}.{name}: not declared" for name in values if name not in declared]
    for name, decl in declared.items():
        if name not in values:
            if decl.get("is_required"):
                problems.append(f"{what}.{name}: required")
            continue
        problems.extend(value_problems(decl, values[name], f"{what}.{name}"))
    return problems


def _parameter_list(declared: Mapping[str, Any]) -> list[JSON]:
    """Parameters as ``function_executed`` lists them."""
    return [
        {
            "type": str(d.get("type")),
            "name": name,
            "title": str(d.get("title") or name),
            "description": str(d.get("description") or ""),
            "is_required": bool(d.get("is_required")),
        }
        for name, d in declared.items()
    ]


class Functions:
    """The workspace's step executions, and the two methods that end them."""

    def __init__(self, now: Callable[[], float], *, manifest: Path = MANIFEST) -> None:
        self.now = now
        self.token_ttl = float(TOKEN_TTL_S)
        self.executions: dict[str, Execution] = {}
        self.definitions: dict[str, JSON] = {}
        if manifest.is_file():
            data = yaml.safe_load(manifest.read_text(encoding="utf-8")) or {}
            self.definitions = dict(data.get("functions") or {})

    def start(self, callback_id: str, inputs: JSON) -> Execution:
        definition = self.definitions.get(callback_id)
        if definition is None:
            known = ", ".join(self.definitions) or "none"
            raise FakeSlackError(f"the manifest declares no step {callback_id!r} (declared: {known})")
        problems = parameters_problems(definition.get("input_parameters") or {}, inputs, "inputs")
        if problems:
            raise FakeSlackError("Slack would not run the step with these inputs: " + "; ".join(problems))
        execution = Execution(
            id="Fx" + secrets.token_hex(5).upper(),
            callback_id=callback_id,
            inputs=dict(inputs),
            token="xwfp-" + secrets.token_hex(12),
            issued_at=self.now(),
        )
        self.executions[execution.id] = execution
        return execution

    def event(self, execution: Execution, *, app_id: str) -> JSON:
        """The ``function_executed`` event of ``execution`` (its envelope is the Events API's)."""
        definition = self.definitions[execution.callback_id]
        created = int(execution.issued_at)
        return {
            "type": "function_executed",
            "function": {
                "id": "Fn" + secrets.token_hex(5).upper(),
                "callback_id": execution.callback_id,
                "title": str(definition.get("title") or ""),
                "description": str(definition.get("description") or ""),
                "type": "app",
                "input_parameters": _parameter_list(definition.get("input_parameters") or {}),
                "output_parameters": _parameter_list(definition.get("output_parameters") or {}),
                "app_id": app_id,
                "date_created": created,
                "date_updated": created,
                "date_deleted": 0,
            },
            "inputs": execution.inputs,
            "function_execution_id": execution.id,
            "workflow_execution_id": "Wx" + secrets.token_hex(5).upper(),
            "event_ts": f"{execution.issued_at:.6f}",
            "bot_access_token": execution.token,
        }

    def token_state(self, token: str) -> str | None:
        """``live``, ``expired`` or ``revoked`` for a just-in-time token; None for any other token."""
        for execution in self.executions.values():
            if execution.token == token:
                if execution.state != "running":
                    return "revoked"
                if self.now() - execution.issued_at > self.token_ttl:
                    return "expired"
                return "live"
        return None

    def call(self, method: str, params: JSON, *, token: str, bot_token: str) -> JSON:
        """``functions.completeSuccess`` / ``functions.completeError`` with an authorized token."""
        execution = self.executions.get(str(params.get("function_execution_id") or ""))
        if execution is None:
            return {"ok": False, "error": "function_execution_not_found"}
        kind = "jit" if token == execution.token else "bot" if token == bot_token else "other"
        answer = self._complete(execution, method, params, kind)
        error = None if answer.get("ok") else str(answer.get("error"))
        outputs = params.get("outputs") if isinstance(params.get("outputs"), dict) else None
        execution.calls.append(Completion(method=method, token=kind, error=error, outputs=outputs))
        return answer

    def _complete(self, execution: Execution, method: str, params: JSON, kind: str) -> JSON:
        if kind == "other":
            return {"ok": False, "error": "access_denied"}
        if execution.state != "running":
            return {"ok": False, "error": "execution_not_in_running_state"}
        if method == "functions.completeError":
            error = params.get("error")
            if not isinstance(error, str) or not error:
                return {"ok": False, "error": "invalid_arguments"}
            execution.state, execution.error = "failed", error
            return {"ok": True}
        outputs = params.get("outputs")
        if not isinstance(outputs, dict):
            return {"ok": False, "error": "invalid_arguments"}
        declared = self.definitions[execution.callback_id].get("output_parameters") or {}
        problems = parameters_problems(declared, outputs, "outputs")
        if problems:
            return {"ok": False, "error": "parameter_validation_failed", "errors": problems}
        execution.state, execution.outputs = "completed", dict(outputs)
        return {"ok": True}
