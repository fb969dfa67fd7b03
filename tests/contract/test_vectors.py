"""The golden vectors of the upstream pi-question contract, one test per case.

``vectors/`` holds copies of ``../shared/vectors/`` (taken by running the upstream
TypeScript on Node.js), so a fresh clone runs them without the shared folder. The compare
rules are those of ``vectors/README.md``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contract import ContractError, build_details, narrate, normalize_ask_request, to_json

VECTORS = Path(__file__).parent / "vectors"


def _cases(file_name: str) -> list[Any]:
    cases = json.loads((VECTORS / file_name).read_text(encoding="ascii"))
    return [pytest.param(case, id=case["name"]) for case in cases]


@pytest.mark.parametrize("case", _cases("normalize_ask_request.json"))
def test_normalize_ask_request_matches_upstream(case: dict[str, Any]) -> None:
    """normalize_ask_request gives upstream's JSON, byte for byte, for the request or the error."""
    try:
        got = to_json({"ok": True, "request": normalize_ask_request(case["input"]).to_wire()})
    except ContractError as err:
        got = to_json({"ok": False, "error": str(err)})

    assert got == case["output_json"]


@pytest.mark.parametrize("case", _cases("narrate.json"))
def test_narrate_matches_upstream(case: dict[str, Any]) -> None:
    """narrate gives upstream's text exactly."""
    assert narrate(**case["input"]) == case["output"]


@pytest.mark.parametrize("case", _cases("build_details.json"))
def test_build_details_matches_upstream(case: dict[str, Any]) -> None:
    """build_details gives upstream's JSON, byte for byte (key order included)."""
    assert to_json(build_details(**case["input"])) == case["output_json"]


@pytest.mark.parametrize(
    ("file_name", "count"),
    [("normalize_ask_request.json", 70), ("narrate.json", 53), ("build_details.json", 18)],
)
def test_vector_files_are_complete_copies(file_name: str, count: int) -> None:
    """Every upstream case is present, so a truncated copy cannot pass silently."""
    cases = json.loads((VECTORS / file_name).read_text(encoding="ascii"))

    assert len(cases) == count
    assert len({case["name"] for case in cases}) == count
