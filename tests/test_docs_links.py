"""The README and docs/ point at files that exist, and the README's settings table lists every setting."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import AliasChoices

from bot.config import Settings

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
# [text](target "title"), ![alt](target) and reference definitions "[name]: target".
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?[^)]*\)|^\s*\[[^\]]+\]:\s*<?([^\s>]+)", re.M)
CODE_SPAN = re.compile(r"`([^`\n]+)`")
SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)


def _targets(doc: Path) -> list[str]:
    text = FENCE.sub("", doc.read_text(encoding="utf-8"))
    found = [m.group(1) or m.group(2) for m in LINK.finditer(CODE_SPAN.sub("", text))]
    # A path written as code is a pointer too ("see `../x/y.md`"): one that starts ./ or ../.
    found += [span for span in CODE_SPAN.findall(text) if re.fullmatch(r"\.\.?/[^\s]*", span)]
    return [t for t in found if not SCHEME.match(t) and not t.startswith("#")]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_points_to_a_file_in_the_repository(doc: Path) -> None:
    missing = []
    for target in _targets(doc):
        path = (doc.parent / target.split("#", 1)[0].split("?", 1)[0]).resolve()
        if not path.exists() or not path.is_relative_to(ROOT):
            missing.append(target)
    assert missing == [], f"{doc.relative_to(ROOT)} links to what the repository does not have"


def test_the_link_check_sees_links_written_as_markdown_and_as_code(tmp_path: Path) -> None:
    doc = tmp_path / "page.md"
    doc.write_text(
        'See [a](a.md#x), ![b](img/b.png "B"), `../c.md`, [web](https://x.io) and [here](#top).\n'
        "\n[d]: d.md\n\n```\n[not](a link.md)\n```\n",
        encoding="utf-8",
    )
    assert _targets(doc) == ["a.md#x", "img/b.png", "d.md", "../c.md"]


def _env_names() -> set[str]:
    names: set[str] = set()
    for field in Settings.model_fields.values():
        alias = field.validation_alias
        if isinstance(alias, str):
            names.add(alias)
        elif isinstance(alias, AliasChoices):
            names.update(str(choice) for choice in alias.choices)
    return names


def test_every_setting_appears_in_the_readmes_settings_table() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    table = {m.group(1) for m in re.finditer(r"^\| `([A-Z0-9_]+)` \|", section, re.M)}
    assert len(_env_names()) > 20  # the Settings model was read, not an empty list
    assert sorted(_env_names() - table) == []
