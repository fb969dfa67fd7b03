"""The committed JSON Schemas match the models they are generated from."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from contract.schemas import (
    REGENERATE_COMMAND,
    SCHEMA_DIR,
    SCHEMA_MODELS,
    render_schemas,
    stale_schemas,
    write_schemas,
)


@pytest.mark.parametrize("name", sorted(SCHEMA_MODELS))
def test_committed_schema_matches_its_model(name: str) -> None:
    """Each committed schema file is what the model generates now."""
    path = SCHEMA_DIR / name

    assert path.exists(), f"{path} is missing; run `{REGENERATE_COMMAND}`"
    model = SCHEMA_MODELS[name][0].__name__

    assert path.read_text(encoding="utf-8") == render_schemas()[name], (
        f"{path} has drifted from {model}; run `{REGENERATE_COMMAND}` and commit the result"
    )


def test_no_stray_schema_files() -> None:
    """Every JSON file in the schema folder belongs to a model, so none is left behind after a rename."""
    assert sorted(p.name for p in SCHEMA_DIR.glob("*.json")) == sorted(SCHEMA_MODELS)


def test_schemas_are_draft_2020_12_documents_with_camel_case_rich_fields() -> None:
    """Schemas declare their dialect, and rich forms use the seed's camelCase names."""
    schemas = {name: json.loads(text) for name, text in render_schemas().items()}

    assert {s["$schema"] for s in schemas.values()} == {"https://json-schema.org/draft/2020-12/schema"}
    assert "additionalText" in schemas["rich-form-result.json"]["properties"]
    assert schemas["result-envelope.json"]["required"] == list(schemas["result-envelope.json"]["properties"])


def test_drift_is_detected_and_rewritten(tmp_path: Path) -> None:
    """stale_schemas names changed or missing files, and write_schemas repairs them."""
    write_schemas(tmp_path)
    (tmp_path / "ask-envelope.json").write_text("{}\n", encoding="utf-8")
    (tmp_path / "rich-form.json").unlink()

    assert stale_schemas(tmp_path) == ["ask-envelope.json", "rich-form.json"]
    assert sorted(p.name for p in write_schemas(tmp_path)) == ["ask-envelope.json", "rich-form.json"]
    assert stale_schemas(tmp_path) == []


def test_check_command_passes_on_the_committed_files() -> None:
    """`python -m contract.schemas --check` exits 0 when nothing drifted."""
    run = subprocess.run(
        [sys.executable, "-m", "contract.schemas", "--check"], capture_output=True, text=True, check=False
    )

    assert (run.returncode, run.stderr) == (0, "")
