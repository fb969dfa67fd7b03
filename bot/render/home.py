"""Pure: one person's App Home tab (docs/home.md) from rows already read and checked.

"Waiting for you" (soonest deadline first, paged), "Asked for you" (no buttons), "Recently answered
by you", an empty state and a count in the header. Agent text goes through :mod:`bot.render.mrkdwn`
(``inline``: escaped, one line, cut), so it never makes a mention or a link; the only links are the
bot's own permalinks to the ask's message. Rows carry the message's own buttons
(:func:`bot.render.message.ask_actions`), so a click from the tab is the same act as from the message.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from bot.home import HOME_PAGE_SIZE, AskedRow, HomeData, RecentRow, WaitingRow, soonest_first
from bot.ids import ACTION_HOME_PAGE
from bot.model import AskRecord
from bot.render.message import ask_actions
from bot.render.questions import ask_title
from bot.render.shared import (
    Block,
    actions_block,
    button,
    context_block,
    date_token,
    divider_block,
    header_block,
    inline,
    section_block,
)
from bot.render.tally import tally_text
from bot.slack.blockkit import VIEW_MAX_BLOCKS, validate_view

__all__ = ["ASKED_SHOWN", "HomeMeta", "render_home"]

ASKED_SHOWN = 5
"""Rows of "Asked for you" shown (the rest counted): the page's blocks go to "Waiting for you"."""

_OUTCOMES = {
    "answered": "answered",
    "cancelled": "declined or withdrawn",
    "timeout": "timed out",
    "dismissed": "dismissed",
    "unavailable": "could not be delivered",
    "error": "failed",
}


class HomeMeta:
    """The view's ``private_metadata``: the page shown (Next / Previous carry the page they go to)."""

    @staticmethod
    def encode(page: int) -> str:
        return json.dumps({"p": page}, separators=(",", ":"))

    @staticmethod
    def decode(value: str | None) -> int:
        try:
            page = json.loads(value or "{}").get("p", 0)
        except (ValueError, AttributeError):
            return 0
        return page if type(page) is int and 0 <= page < 10_000 else 0


def _title(rec: AskRecord) -> str:
    """The title, or the first question when the title is the generic one."""
    if rec.form is not None and rec.form.title and rec.form.title.strip():
        return rec.form.title
    if rec.request is not None and rec.request.questions:
        return rec.request.questions[0].question
    return ask_title(rec)


def _left(deadline_ms: int | None, now_ms: int) -> str:
    if deadline_ms is None:
        return "no deadline"
    left = (deadline_ms - now_ms) // 1000
    if left <= 0:
        return "due now"
    if left < 3600:
        words = f"{max(left // 60, 1)} min left"
    elif left < 86_400:
        words = f"{left // 3600} h {left % 3600 // 60} min left"
    else:
        words = f"{left // 86_400} d left"
    token = date_token(deadline_ms)
    return f"{words} (due {token})" if token else words


def _who(rec: AskRecord) -> str:
    requester = rec.requester
    if requester is None:
        return "An agent"
    name = inline(requester.name, 80) if requester.name and requester.name.strip() else "An agent"
    if requester.session and requester.session.strip():
        return f"{name} · session {inline(requester.session, 80)}"
    return name


def _link(links: Mapping[str, str], rec: AskRecord) -> str:
    url = links.get(rec.ask_id)
    # Only the bot's own permalinks (built from the workspace URL and Slack ids): never agent text.
    if url and url.startswith("https://") and not any(c in url for c in "<>| "):
        return f"<{url}|open the message>"
    return ""


def _waiting(row: WaitingRow, user: str, links: Mapping[str, str], now_ms: int) -> list[Block]:
    rec = row.record
    about = [_who(rec), _link(links, rec), _left(rec.deadline_ms, now_ms)]
    blocks: list[Block] = [section_block(f"*{inline(_title(rec), 280)}*")]
    if rec.approval is not None:
        mine = row.voted(user)
        labels = [o.label for o in rec.request.questions[0].options] if rec.request else []
        if mine is not None and 0 <= mine < len(labels):
            about.append(f"you voted *{inline(labels[mine], 60)}* (you may change it)")
        else:
            about.append("you have not voted yet")
        blocks.append(section_block(tally_text(rec, row.votes or [])))
    blocks.append(context_block(" · ".join(a for a in about if a)))
    blocks.append(ask_actions(rec, truncated=True))
    return blocks


def _asked(row: AskedRow, links: Mapping[str, str], now_ms: int) -> list[Block]:
    rec = row.record
    who: list[str] = []
    if rec.responders is not None and (rec.responders.users or rec.responders.usergroups):
        count = len(rec.responders.users) + len(rec.responders.usergroups)
        who.append(f"asked of {count} {'person or group' if count == 1 else 'people or groups'}")
    if rec.approval is not None:
        tally = {v.selected[0] for v in row.votes or [] if v.selected}
        who.append(f"{len(row.votes or [])} vote(s) so far on {len(tally)} option(s)")
    about = [_who(rec), *who, _link(links, rec), _left(rec.deadline_ms, now_ms)]
    return [section_block(f"*{inline(_title(rec), 280)}*"), context_block(" · ".join(a for a in about if a))]


def _recent(rows: Sequence[RecentRow], user: str) -> str:
    lines: list[str] = []
    for row in rows:
        if row.outcome is None:
            outcome = "still open"
        else:
            outcome = _OUTCOMES.get(row.outcome, row.outcome)
            if row.by == user and row.outcome in ("answered", "cancelled"):
                outcome += " by you"
        lines.append(f"• {inline(_title(row.record), 120)}: {outcome}")
    return "\n".join(lines)


def _pager(page: int, pages: int) -> Block:
    buttons: list[Block] = []
    if page > 0:
        buttons.append(button("Previous", f"{ACTION_HOME_PAGE}:prev", str(page - 1)))
    if page + 1 < pages:
        buttons.append(button("Next", f"{ACTION_HOME_PAGE}:next", str(page + 1)))
    return actions_block(buttons)


def render_home(
    data: HomeData, *, page: int, now_ms: int, links: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The ``views.publish`` view of ``data`` at ``page`` (clamped to the pages there are)."""
    links = links or {}
    waiting = soonest_first(data.waiting)
    pages = max(1, -(-len(waiting) // HOME_PAGE_SIZE))
    page = min(max(page, 0), pages - 1)
    count = len(waiting)
    blocks: list[Block] = [
        header_block(f"Waiting for you: {count}" if count else "Nothing is waiting for you"),
    ]
    if data.notice:
        blocks.append(context_block(f":information_source: {inline(data.notice, 500)}"))
    if not waiting and not data.asked and not data.recent:
        blocks.append(
            section_block(
                "This tab lists the questions agents ask *you*: asks sent to you directly, asks "
                "that name you or one of your user groups as who may answer, and escalations to "
                "you. Answer them here or in their message; asks an agent sends *for* you, and "
                "the ones you answered lately, show here too."
            )
        )
    if waiting:
        shown = waiting[page * HOME_PAGE_SIZE : (page + 1) * HOME_PAGE_SIZE]
        first = page * HOME_PAGE_SIZE + 1
        where = f" ({first}-{first + len(shown) - 1} of {count})" if pages > 1 else ""
        blocks.append(section_block(f"*Waiting for you*{where}, soonest deadline first"))
        for waiting_row in shown:
            blocks.append(divider_block())
            blocks.extend(_waiting(waiting_row, data.user, links, now_ms))
        if pages > 1:
            blocks.append(_pager(page, pages))
    if data.asked:
        asked = sorted(data.asked, key=lambda r: (r.record.deadline_ms is None, r.record.deadline_ms or 0))
        blocks.append(divider_block())
        blocks.append(section_block(f"*Asked for you*: {len(asked)} pending"))
        for row in asked[:ASKED_SHOWN]:
            blocks.extend(_asked(row, links, now_ms))
        if len(asked) > ASKED_SHOWN:
            blocks.append(context_block(f"and {len(asked) - ASKED_SHOWN} more"))
    if data.recent:
        blocks.append(divider_block())
        blocks.append(section_block("*Recently answered by you*"))
        blocks.append(section_block(_recent(data.recent, data.user)))
    view: dict[str, Any] = {
        "type": "home",
        "blocks": blocks[:VIEW_MAX_BLOCKS],
        "private_metadata": HomeMeta.encode(page),
    }
    problems = validate_view(view)
    if problems:  # never expected: the budget above keeps well inside Slack's limits
        raise ValueError("invalid Home view:\n- " + "\n- ".join(problems))
    return view
