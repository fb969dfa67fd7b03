"""The renderers build Block Kit as plain JSON (issue 22: slack_sdk's model objects cost more than
the rest of rendering), and the faster text counting agrees with Slack's UTF-16 count."""

from __future__ import annotations

import ast
from pathlib import Path
from types import MappingProxyType

import pytest

from bot.slack.blockkit import blocks_text_length, text_length

RENDER = Path(__file__).resolve().parent.parent / "bot" / "render"


@pytest.mark.parametrize("path", sorted(RENDER.glob("*.py")), ids=lambda p: p.name)
def test_no_renderer_uses_slack_sdk_models(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported = [
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    ]
    assert [m for m in imported if m and m.startswith("slack_sdk")] == []


@pytest.mark.parametrize(
    "text", ["", "plain ascii", "café", "emoji 😀 two units", "\U0001f600" * 3, "a\u200bb"]
)
def test_text_length_is_utf16_units(text: str) -> None:
    assert text_length(text) == len(text.encode("utf-16-le", "surrogatepass")) // 2


def test_blocks_text_length_reads_any_mapping() -> None:
    text = MappingProxyType({"type": "mrkdwn", "text": "😀ab"})
    blocks = [{"type": "section", "text": text}, MappingProxyType({"type": "context", "elements": [text]})]
    assert blocks_text_length(blocks) == 8
