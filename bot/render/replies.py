"""Pure: what the bot says about a reply typed in an ask's thread (docs/thread-answers.md).

Everything a person typed is echoed through :mod:`bot.render.mrkdwn` (escaped, defanged, ``verbatim``),
so a reply can never make the bot post a mention, a broadcast or a link.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.ids import ACTION_REPLY_CHANGE, ACTION_REPLY_CONFIRM
from bot.render.mrkdwn import cut
from bot.render.shared import Message, actions_block, button, context_block, inline, section_block
from bot.slack.replies import Pending, Reading
from contract import QuestionAnswer
from contract.question import Question

__all__ = ["THREAD_HINT", "render_reading", "render_recorded", "render_unreadable"]

THREAD_HINT = "You can also reply in this thread: an option's number or its name"
"""The small context line on an ask message while thread answers are on."""
_VALUE_MAX = 2000


def _answer_text(question: Question, answer: QuestionAnswer) -> str:
    chosen = [
        inline(question.options[i].label, 200) for i in answer.selected if 0 <= i < len(question.options)
    ]
    if answer.custom_text is not None:
        chosen.append("“" + inline(answer.custom_text, 500) + "”")
    text = ", ".join(chosen) or "(nothing)"
    if answer.note:
        text += " — note: " + inline(answer.note, 500)
    return text


def _summary(
    questions: Sequence[Question], answers: Sequence[QuestionAnswer], *, declined: bool, reason: str | None
) -> str:
    if declined:
        return "Declined" + (": " + inline(reason, 500) if reason else "")
    if len(questions) == 1 and answers:
        return _answer_text(questions[0], answers[0])
    return "; ".join(
        f"{inline(q.id, 60)}: {_answer_text(q, a)}" for q, a in zip(questions, answers, strict=False)
    )


def render_recorded(
    questions: Sequence[Question],
    answers: Sequence[QuestionAnswer],
    *,
    declined: bool,
    reason: str | None,
    by: str,
    vote: bool = False,
) -> str:
    """The short thread reply once a typed answer counted: ``Recorded: ... (by Name)``."""
    head = "Vote recorded" if vote else "Recorded"
    summary = _summary(questions, answers, declined=declined, reason=reason)
    return f"{head}: {cut(summary, 3500)} (by {inline(by, 80)})"


def render_reading(questions: Sequence[Question], reading: Reading, pending: Pending) -> Message:
    """The private reply for a reading that needs confirmation: the bot's reading, why, and Confirm /
    Change. A reading too long to ride in a button is not offered: the form is."""
    # Within a section's 3000 characters (Slack's limit), however many questions and labels.
    summary = cut(
        _summary(questions, reading.answers, declined=reading.declined, reason=reading.reason), 2800
    )
    why = cut("; ".join(inline(g, 300) for g in reading.guesses), 1500)
    value = pending.encode()
    if len(value) > _VALUE_MAX:
        text = "Your reply is too long to confirm here: please use the ask's Answer… button."
        return Message(text=text, blocks=[section_block(text)])
    text = f"I read your reply as: {summary}. Nothing is recorded until you confirm."
    blocks = [
        section_block(f"I read your reply as: *{summary}*"),
        context_block(why, "Nothing is recorded until you press Confirm."),
    ]
    buttons = actions_block(
        [
            button("Confirm", ACTION_REPLY_CONFIRM, value, "primary"),
            button("Change…", ACTION_REPLY_CHANGE, value),
        ]
    )
    return Message(text=text, blocks=[*blocks, buttons])


def render_unreadable(reading: Reading) -> str:
    """The private reply for a reply the bot could not read: what was wrong, and what it understands."""
    problems = " ".join(inline(p, 600) for p in reading.problems)
    return "I could not read your reply as an answer, so nothing was recorded. " + cut(problems, 3000)
