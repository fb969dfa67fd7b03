"""Fitting to Slack's budgets: detail levels, the cutter that cuts or splits texts for a level, and a quick
estimate of whether a level can fit at all.

Too much content degrades in steps (:data:`MESSAGE_LEVELS`, :data:`MODAL_LEVELS`): long texts are cut
with a marker, descriptions dropped, options summarised.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from bot.render.mrkdwn import CUT_MARK, cut, split_for_sections, to_mrkdwn
from bot.render.questions import QuestionView
from bot.render.shared import Block, cache_window, section_block, short_text

__all__ = [
    "MESSAGE_LEVELS",
    "MESSAGE_TEXT_BUDGET",
    "MODAL_LEVELS",
    "SEE_FORM",
    "VIEW_BYTE_BUDGET",
    "Cutter",
    "Level",
    "may_fit",
    "option_listing",
]

SEE_FORM: Final = "… (see the form for the full text)"

# Slack's cumulative text limit for a message's blocks is undocumented (about 12,000; rejected at 11,341 in
# slackapi/bolt-js#2867); stay well under it. The full text is always one click away in the form.
MESSAGE_TEXT_BUDGET: Final = 9_000

# Views may hold 250 kB; leave room for Slack's own accounting of the payload.
VIEW_BYTE_BUDGET: Final = 200_000


class Cutter:
    """Cuts or splits texts for one rendering level, and remembers whether anything was cut."""

    def __init__(self, *, split: bool) -> None:
        self.split = split
        self.truncated = False

    def cut(self, text: str, limit: int, marker: str = SEE_FORM) -> str:
        shown = cut(text, limit, marker)
        if shown != text:
            self.truncated = True
        return shown

    def short(self, text: str, limit: int) -> str:
        """Untrusted text as one escaped line cut to ``limit`` (a listing entry)."""
        shown = short_text(text, limit, CUT_MARK)
        if shown.endswith(CUT_MARK):
            self.truncated = True
        return shown

    def markdown(self, source: str, limit: int, head: str = "") -> list[Block]:
        """Untrusted Markdown (after a bot-made ``head``) as sections, like :meth:`sections`.

        When cutting, only a prefix of a much longer source is converted (Markdown parsing is the
        renderer's slowest step); the marker is then always added.
        """
        window = cache_window(2 * limit + 200)
        if self.split or len(source) <= window:
            return self.sections(head + to_mrkdwn(source), limit)
        if limit <= 0:
            return []
        self.truncated = True
        return [section_block(cut(head + to_mrkdwn(source[:window]), min(limit, 3000), SEE_FORM, force=True))]

    def sections(self, text: str, limit: int) -> list[Block]:
        """``text`` as one section cut to ``limit``, or (when splitting) as many full 3000-unit sections."""
        if not text.strip() or limit <= 0:
            return []
        if self.split:
            return [section_block(piece) for piece in split_for_sections(text, 3000)]
        return [section_block(self.cut(text, min(limit, 3000)))]


@dataclass(frozen=True, slots=True)
class Level:
    split: bool
    """Show long texts whole, over several sections (the other limits then apply to listings only)."""
    text: int
    """Max units of a question's text."""
    extras: int
    """Max units of each description piece (pi-question description, rich body/context/...); 0 drops them."""
    option_label: int
    option_description: int
    """0 drops option descriptions from listings."""
    listing: bool
    """List options one per line (False: one compact line in the context)."""
    divider: bool = False


MESSAGE_LEVELS: Final = (
    Level(split=True, text=3000, extras=3000, option_label=600, option_description=600, listing=True),
    Level(split=False, text=2000, extras=1500, option_label=300, option_description=300, listing=True),
    Level(split=False, text=1000, extras=600, option_label=150, option_description=120, listing=True),
    Level(split=False, text=500, extras=250, option_label=80, option_description=0, listing=True),
    Level(split=False, text=300, extras=0, option_label=60, option_description=0, listing=False),
    Level(split=False, text=160, extras=0, option_label=30, option_description=0, listing=False),
)


def may_fit(questions: list[QuestionView], level: Level, max_blocks: int, *, modal: bool = False) -> bool:
    """A quick estimate from raw lengths: False when ``level`` clearly cannot fit, so it is not rendered.

    Only a shortcut (rendering and converting Markdown is what costs); the rendered payload is measured
    for real afterwards. The estimate errs towards trying a level.
    """

    def size(text: str | None, limit: int) -> int:
        return min(len(text or ""), limit)

    def pieces(text: str | None, limit: int) -> int:
        if not text or limit <= 0:
            return 0
        return -(-len(text) // 3000) if level.split else 1

    blocks, chars = 4, 0
    for q in questions:
        blocks += 2 + pieces(q.text, level.text) + (3 if modal else 0)
        chars += size(q.text, level.text if not level.split else 10**9)
        for _, text in q.extras:
            blocks += pieces(text, level.extras)
            chars += size(text, level.extras if not level.split else 10**9) if level.extras else 0
        if level.listing and q.options:
            listed = sum(
                size(o.label, level.option_label)
                + sum(size(t, level.option_description) for t in (o.description, o.details, o.note))
                for o in q.options
            )
            blocks += -(-listed // 3000) if level.split else 1
            chars += listed
    if modal:
        return blocks <= max_blocks
    return blocks <= max_blocks and chars <= MESSAGE_TEXT_BUDGET * 5 // 4


def option_listing(q: QuestionView, level: Level, cutter: Cutter) -> str:
    lines: list[str] = []
    for o in q.options:
        label = cutter.short(o.label, level.option_label)
        line = f"• {label}" + ("  ⭐ _recommended_" if o.recommended else "")
        if level.option_description:
            for text in (o.description, o.details, o.note):
                if text and text.strip():
                    line += "\n      " + cutter.short(text, level.option_description)
        lines.append(line)
    return "\n".join(lines)


MODAL_LEVELS: Final = (
    Level(
        split=True,
        text=3000,
        extras=3000,
        option_label=3000,
        option_description=1000,
        listing=True,
        divider=True,
    ),
    Level(
        split=False,
        text=3000,
        extras=3000,
        option_label=600,
        option_description=300,
        listing=True,
        divider=True,
    ),
    Level(split=False, text=1500, extras=1000, option_label=200, option_description=150, listing=True),
    Level(split=False, text=700, extras=300, option_label=100, option_description=0, listing=True),
    Level(split=False, text=300, extras=0, option_label=75, option_description=0, listing=False),
)
