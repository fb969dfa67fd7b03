"""The Block Kit of a corpus of asks is exactly what is committed in tests/render_corpus/.

Moving render code around must not change a byte. After a deliberate change to what the bot draws,
regenerate with ``python -m tests.render_corpus --update`` and review the diff.
"""

from __future__ import annotations

import pytest

from tests.render_corpus import CASES, HERE, snapshot_path, snapshot_text


@pytest.mark.parametrize("name", sorted(CASES))
def test_rendered_block_kit_matches_the_committed_snapshot(name: str) -> None:
    path = snapshot_path(name)
    assert path.exists(), f"no snapshot for {name}: run python -m tests.render_corpus --update"
    assert snapshot_text(name) == path.read_text(encoding="utf-8"), (
        f"{name} renders differently from {path.name}; if intended: python -m tests.render_corpus --update"
    )


def test_every_snapshot_belongs_to_a_case() -> None:
    assert sorted(p.stem for p in HERE.glob("*.json") if p.stem not in CASES) == []
