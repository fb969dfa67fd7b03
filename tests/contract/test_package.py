"""The package surface: a sorted, complete ``__all__`` and no I/O imports."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys

import pytest

import contract

SPEC_NAMES = {
    "LIMITS", "OTHER_OPTION", "ContractError",
    "Question", "Option", "AskRequest", "QuestionAnswer", "AskDelivery",
    "normalize_ask_request", "narrate", "build_details", "apply_timeout_policy", "to_json",
    "RichForm", "NormalizedQuestion", "RichAnswer", "RichFormResult",
    "normalize_rich_form", "format_rich_answers",
    "AskEnvelope", "CancelEnvelope", "ResultEnvelope",
    "EnvelopeError", "parse_ask_envelope", "parse_cancel_envelope", "build_rich_answer",
}  # fmt: skip
PUBLIC_MODULES = ["approval", "envelopes", "errors", "narrate", "normalize", "question", "rich", "timeout"]
FORBIDDEN = ["slack_bolt", "slack_sdk", "redis", "bot", "aiohttp", "fakeredis"]


def _isort_key(name: str) -> tuple[int, list[int | str]]:
    """Ruff's RUF022 order: CONSTANTS, then Classes, then the rest, each in natural order."""
    group = 0 if name.isupper() else 1 if name[0].isupper() else 2
    return group, [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def test_all_is_sorted() -> None:
    """`__all__` is in isort order, the order ruff keeps."""
    assert contract.__all__ == sorted(contract.__all__, key=_isort_key)


def test_all_has_the_spec_names() -> None:
    """Every name of spec/contract.md section 1 (and the extras the bot uses) is exported."""
    assert set(contract.__all__) >= SPEC_NAMES


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_all_re_exports_every_public_module_name(module: str) -> None:
    """Each public module's `__all__` is re-exported from the package."""
    names = importlib.import_module(f"contract.{module}").__all__

    assert set(names) <= set(contract.__all__)


def test_every_exported_name_exists() -> None:
    """Nothing in `__all__` is a dangling name."""
    assert [name for name in contract.__all__ if not hasattr(contract, name)] == []


def test_import_loads_no_io_package() -> None:
    """`import contract` in a fresh interpreter loads none of Slack, Redis, aiohttp or the bot."""
    code = "import sys, json, contract; print(json.dumps(sorted(sys.modules)))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = {name.split(".")[0] for name in json.loads(run.stdout)}

    assert loaded.isdisjoint(FORBIDDEN), sorted(loaded & set(FORBIDDEN))
