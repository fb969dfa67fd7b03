"""After the ask: the ended message (no interactive element left), and the refusal for a click that cannot
count.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal

from bot.model import AskRecord
from bot.render.mrkdwn import cut, escape_mrkdwn, one_line
from bot.render.questions import ask_title, question_views
from bot.render.shared import (
    USER_ID_RE,
    Block,
    Message,
    context_block,
    date_token,
    header_block,
    inline,
    section_block,
)
from bot.render.tally import ended_votes_lines
from bot.slack.blockkit import check_message
from contract.envelopes import ResultVote
from contract.question import QuestionAnswer
from contract.rich import RichAnswer, RichFormResult

__all__ = ["ENDED_OUTCOMES", "RefusalKind", "render_ended_message", "render_refusal", "summary_lines"]

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

RefusalKind = Literal[
    "not_allowed",
    "ended",
    "late",
    "requester",
    "no_option",
    "unrecorded",
    "unopened",
    "unconfirmed",
    "confirmed",
    "unsettled",
]


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
    answers: Sequence[QuestionAnswer] = (),
    form: RichFormResult | None = None,
    reason: str | None = None,
    votes: Sequence[ResultVote] | None = None,
) -> Message:
    """The ask's message once it ended: the questions, compactly, and who ended it how and when.

    No interactive element at all (protocol section 10.3). ``outcome`` is one of :data:`ENDED_OUTCOMES`;
    ``responder_id`` is a Slack user id the bot verified; ``reason`` is untrusted text;
    ``votes`` (approvals, protocol section 13) are the final votes, shown as who voted what. What was
    answered is drawn from the typed result: ``answers`` (pi-question) or ``form`` (rich), see
    :func:`summary_lines`.
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
    lines = summary_lines(ask, answers, form)
    if lines:
        blocks.append(section_block(cut("\n".join(f"• {line}" for line in lines), 3000)))
    if votes:
        voted = "\n".join(ended_votes_lines(ask, votes))
        blocks.append(section_block(cut(f"*Votes* ({len(votes)}):\n{voted}", 3000)))
    when = date_token(resolved_ms)
    blocks.append(context_block(f"{words} · {when}" if when else words))
    plain_words = _outcome_words(outcome, "" if who else None, None)
    message = Message(text=cut(escape_mrkdwn(one_line(f"{plain_words}: {title}")), 300), blocks=blocks)
    check_message(message.to_payload())
    return message


def summary_lines(
    ask: AskRecord, answers: Sequence[QuestionAnswer], form: RichFormResult | None
) -> list[str]:
    """What was answered, one escaped mrkdwn line a question: the question's text and the chosen options'
    labels (never ids or values), the answerer's own text and notes. Questions nobody answered (a
    timeout, a decline) have no line: the outcome line says what happened."""
    if form is not None:
        return [] if form.cancelled else _rich_lines(form)
    if ask.request is None:
        return []
    lines: list[str] = []
    # By position, as the contract matches answers to questions.
    for question, answer in zip(ask.request.questions, answers, strict=False):
        if answer.status != "answered":
            continue
        labels = [question.options[i].label for i in answer.selected if 0 <= i < len(question.options)]
        shown = _choices(labels, answer.custom_text)
        if answer.defaulted:
            shown += " (the default)"
        notes = [] if answer.defaulted else [answer.note]
        lines.append(_line(question.question, shown, notes))
    return lines


def _rich_lines(form: RichFormResult) -> list[str]:
    by_id: dict[str, RichAnswer] = {a.id: a for a in form.answers}
    lines: list[str] = []
    for question in form.questions:
        answer = by_id.get(question.id)
        if answer is None:
            continue
        labels: list[str] = []
        if question.type == "text":
            text = answer.value if isinstance(answer.value, str) else ", ".join(answer.value)
            shown = _choices(labels, text)
        else:
            indexes = answer.selected_option_indexes or []
            labels = [question.options[i].label for i in indexes if 0 <= i < len(question.options)]
            shown = _choices(labels, answer.custom_value if answer.was_custom else None)
        # A note belongs to an option; it is named when several were chosen.
        notes = [f"{n.label}: {n.note}" if len(labels) > 1 else n.note for n in answer.option_notes or []]
        lines.append(_line(question.prompt, shown, notes))
    if form.additional_text and form.additional_text.strip():
        lines.append(f"Notes: {inline(form.additional_text, 600)}")
    return lines


def _choices(labels: Sequence[str], own: str | None) -> str:
    """Option labels, then the answerer's own text in quotes; escaped."""
    shown = [inline(label, 150) for label in labels]
    if own and own.strip():
        shown.append(f"“{inline(own, 600)}”")
    return ", ".join(shown) if shown else "(no answer)"


def _line(question: str, shown: str, notes: Sequence[str | None]) -> str:
    said = [inline(note, 300) for note in notes if note and note.strip()]
    return f"{inline(question, 150)} → {shown}" + "".join(f" · note: {note}" for note in said)


_REFUSALS: Final[dict[str, str]] = {
    "not_allowed": "Sorry, this question is for someone else, so your answer was not recorded.",
    "ended": "This question has already ended, so your answer was not recorded.",
    "late": "Too late: the deadline for this question has passed, so your answer was not recorded.",
    "requester": "You asked for this approval, so you cannot vote on it; your vote was not counted.",
    "no_option": "A vote is for one of the options, so this answer was not counted. Please pick an option.",
    # Redis away (bot.engine.acts): what was not recorded never counts later.
    "unrecorded": (
        "The bot could not reach its storage, so your answer was not recorded. Please try again in a moment."
    ),
    "unopened": (
        "The bot could not reach its storage, so the form did not open. Please click again in a moment."
    ),
    "unconfirmed": (
        "The bot's storage did not answer in time, so it cannot tell yet whether your answer was recorded. "
        "It will tell you here as soon as it knows."
    ),
    "confirmed": "Your answer was recorded.",
    "unsettled": (
        "The bot could not find out whether your answer was recorded: its storage has not answered. "
        "The question's message shows what counts."
    ),
}


def render_refusal(kind: RefusalKind) -> str:
    """The private (ephemeral) text for someone whose click cannot count (or could not be confirmed)."""
    return _REFUSALS[kind]
