"""The reminder: a thread reply nudging for an answer, with the deadline."""

from __future__ import annotations

from collections.abc import Sequence

from bot.model import AskRecord
from bot.render.mrkdwn import cut, escape_mrkdwn, one_line
from bot.render.questions import ask_title
from bot.render.shared import Message, context_block, date_token, mention_tokens, section_block
from bot.slack.blockkit import check_message

__all__ = ["render_reminder"]


def _in_about(ms: int) -> str:
    minutes = max(1, round(ms / 60_000))
    if minutes < 90:
        return f"{minutes} minute{'s' if minutes != 1 else ''}"
    hours = round(minutes / 60)
    if hours < 36:
        return f"{hours} hours"
    return f"{round(hours / 24)} days"


def render_reminder(ask: AskRecord, *, number: int, now_ms: int, mentions: Sequence[str] = ()) -> Message:
    """A thread reply nudging for an answer, with the deadline (and the step's mentions, if any)."""
    tokens = mention_tokens(mentions)
    token = date_token(ask.deadline_ms) if ask.deadline_ms is not None else None
    if ask.deadline_ms is not None and ask.deadline_ms <= now_ms:
        deadline = "The deadline has passed."
    elif ask.deadline_ms is None or token is None:
        deadline = "There is no deadline."
    else:
        deadline = f"Deadline: {token} (in about {_in_about(ask.deadline_ms - now_ms)})."
    lead = " ".join(tokens) + " " if tokens else ""
    text = (
        f"{lead}:hourglass_flowing_sand: Still waiting for an answer (reminder {max(1, number)}). {deadline}"
    )
    title = cut(escape_mrkdwn(one_line(ask_title(ask))), 200)
    message = Message(
        text=f"{lead}Still waiting for an answer: {title}",
        blocks=[
            section_block(text),
            context_block(f"Use the buttons on the message above to answer: {title}"),
        ],
    )
    check_message(message.to_payload())
    return message
