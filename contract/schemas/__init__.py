"""JSON Schemas of the wire shapes, generated from the models and kept in this directory.

Agents in other languages validate against the committed ``*.json`` files; a test fails
when they drift from the models. Regenerate them with ``python -m contract.schemas``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode

from contract.envelopes import AskEnvelope, CancelEnvelope, ResultEnvelope
from contract.rich import RichForm, RichFormResult

__all__ = [
    "REGENERATE_COMMAND",
    "SCHEMA_DIR",
    "SCHEMA_MODELS",
    "render_schemas",
    "stale_schemas",
    "write_schemas",
]

REGENERATE_COMMAND: Final = "python -m contract.schemas"
SCHEMA_DIR: Final = Path(__file__).resolve().parent

# File name -> (model, mode). Inputs are described as accepted, the result as written.
SCHEMA_MODELS: Final[dict[str, tuple[type[BaseModel], JsonSchemaMode]]] = {
    "ask-envelope.json": (AskEnvelope, "validation"),
    "cancel-envelope.json": (CancelEnvelope, "validation"),
    "result-envelope.json": (ResultEnvelope, "serialization"),
    "rich-form.json": (RichForm, "validation"),
    "rich-form-result.json": (RichFormResult, "validation"),
}


def render_schemas() -> dict[str, str]:
    """The text of every schema file, by file name, as the models define it now."""
    rendered: dict[str, str] = {}
    for name, (model, mode) in SCHEMA_MODELS.items():
        schema = {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$comment": f"Generated from {model.__module__}.{model.__name__} by `{REGENERATE_COMMAND}`.",
            **model.model_json_schema(by_alias=True, mode=mode),
        }
        rendered[name] = json.dumps(schema, indent=2, ensure_ascii=False) + "\n"
    return rendered


def write_schemas(directory: Path = SCHEMA_DIR) -> list[Path]:
    """Write every schema file into ``directory``; returns the paths whose content changed."""
    changed: list[Path] = []
    for name, text in render_schemas().items():
        path = directory / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(path)
    return changed


def stale_schemas(directory: Path = SCHEMA_DIR) -> list[str]:
    """Names of the schema files in ``directory`` that are missing or differ from the models."""
    return [
        name
        for name, text in render_schemas().items()
        if not (directory / name).exists() or (directory / name).read_text(encoding="utf-8") != text
    ]
