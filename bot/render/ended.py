"""After the ask: the ended message (no interactive element left), and the refusal for a click that cannot
count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

from slack_sdk.models.blocks import Block

from bot.model import AskRecord
from bot.render.mrkdwn import cut, escape_mrkdwn, one_line
from bot.render.questions import ask_title, question_views
from bot.render.shared import (
    USER_ID_RE,
    Message,
    context_block,
    date_token,
    dicts,
    header_block,
    inline,
    section_block,
)
from bot.render.tally import ended_votes_lines
from bot.slack.blockkit import check_message

__all__ = ["ENDED_OUTCOMES", "RefusalKind", "render_ended_message", "render_refusal"]

ENDED_OUTCOMES: Final = (
    "answered",
    "declined",
    "cancelled",
    "withdrawn",
    "timeout",
    "defaulted",
    "dismissed",
    "unavailable",
    "error",
)
"""Outcomes :func:`render_ended_message` puts into words; any other word shows as ``Ended (<word>)``."""

RefusalKind = Literal["not_allowed", "ended", "late", "requester", "no_option"]


def _outcome_words(outcome: str, who: str | None, reason: str | None) -> str:
    """``who`` is None when nobody acted; "" when someone did but is not to be named (fallback text)."""
    by = f" by {who}" if who else ""
    acted = who is not None
    because = f": {inline(reason, 500)}" if reason and reason.strip() else ""
    if outcome == "answered":
        # Humans always answer as someone; an answer with no responder is the timeout policy's default.
        return f"Answered{by}" if acted else "Timed out — default applied"
    if outcome == "defaulted":
        return "Timed out — default applied"
    if outcome == "declined" or (outcome == "cancelled" and acted):
        return f"Declined{by}{because}"
    if outcome in ("withdrawn", "cancelled"):
        return f"Withdrawn by the requester{because}"
    if outcome == "timeout":
        return "Timed out — nobody answered"
    if outcome == "dismissed":
        return f"Dismissed{by}{because}"
    if outcome == "unavailable":
        return f"Could not be delivered{because}"
    if outcome == "error":
        # After posting, the only error outcome is on_timeout "error" (protocol section 6).
        return f"Timed out — no default allowed{because}"
    return f"Ended ({inline(outcome, 40)}){because}"


def _responder(responder_id: str | None) -> str | None:
    """A verified Slack user id becomes a mention; anything else (an operator's name) is shown as text."""
    if not responder_id or not responder_id.strip():
        return None
    if USER_ID_RE.fullmatch(responder_id):
        return f"<@{responder_id}>"
    return inline(responder_id, 80)


def render_ended_message(
    ask: AskRecord,
    *,
    outcome: str,
    responder_id: str | None,
    resolved_ms: int,
    summary: Sequence[str],
    reason: str | None = None,
    votes: Sequence[Mapping[str, Any]] | None = None,
) -> Message:
    """The ask's message once it ended: the questions, compactly, and who ended it how and when.

    No interactive element at all (protocol section 10.3). ``outcome`` is one of :data:`ENDED_OUTCOMES`;
    ``responder_id`` is a Slack user id the bot verified; ``summary`` and ``reason`` are untrusted text;
    ``votes`` (approvals, protocol section 13) are the final votes, shown as who voted what.
    """
    questions = question_views(ask)
    who = _responder(responder_id)
    words = _outcome_words(outcome, who, reason)
    title = ask_title(ask)
    blocks: list[Block] = [header_block(title)]
    many = len(questions) > 1
    per_question = 1200 if len(questions) <= 2 else 300
    for q in questions:
        head = f"*{inline(q.label, 40)}.* " if many else ""
        text = cut(head + escape_mrkdwn(one_line(q.text)), per_question)
        if text.strip():
            blocks.append(section_block(text))
    lines = [inline(line, 400) for line in summary if line and line.strip()]
    if lines:
        blocks.append(section_block(cut("\n".join(f"• {line}" for line in lines), 3000)))
    if votes:
        voted = "\n".join(ended_votes_lines(ask, votes))
        blocks.append(section_block(cut(f"*Votes* ({len(votes)}):\n{voted}", 3000)))
    when = date_token(resolved_ms)
    blocks.append(context_block(f"{words} · {when}" if when else words))
    plain_words = _outcome_words(outcome, "" if who else None, None)
    message = Message(text=cut(escape_mrkdwn(one_line(f"{plain_words}: {title}")), 300), blocks=dicts(blocks))
    check_message(message.to_payload())
    return message


_REFUSALS: Final[dict[str, str]] = {
    "not_allowed": "Sorry, this question is for someone else, so your answer was not recorded.",
    "ended": "This question has already ended, so your answer was not recorded.",
    "late": "Too late: the deadline for this question has passed, so your answer was not recorded.",
    "requester": "You asked for this approval, so you cannot vote on it; your vote was not counted.",
    "no_option": "A vote is for one of the options, so this answer was not counted. Please pick an option.",
}


def render_refusal(kind: RefusalKind) -> str:
    """The private (ephemeral) text for someone whose click cannot count."""
    return _REFUSALS[kind]
