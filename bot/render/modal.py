"""The modals: the form that answers the whole ask, and the small one behind the one-click "Other…" button."""

from __future__ import annotations

from typing import Any

from bot.ids import (
    FIELD_ADDITIONAL,
    FIELD_CUSTOM,
    FIELD_NOTE,
    FIELD_REASON,
    VIEW_DECLINE,
    VIEW_FORM,
    VIEW_OTHER,
    FormMeta,
)
from bot.model import AskRecord
from bot.render.fitting import MODAL_LEVELS, VIEW_BYTE_BUDGET, Cutter, Level, may_fit, option_listing
from bot.render.mrkdwn import cut, to_mrkdwn
from bot.render.questions import (
    CATEGORY_WORDS,
    QuestionView,
    answer_input,
    ask_title,
    needs_listing,
    question_views,
    text_input,
)
from bot.render.shared import Block, context_block, divider_block, header_block, inline, plain, section_block
from bot.slack.blockkit import VIEW_MAX_BLOCKS, check_view, validate_view, view_size
from contract.question import OTHER_OPTION

__all__ = ["render_decline_modal", "render_form_modal", "render_other_modal"]


def render_form_modal(ask: AskRecord, meta: FormMeta) -> dict[str, Any]:
    """The modal that answers the whole ask (callback ``VIEW_FORM``); nothing is pre-selected."""
    questions = question_views(ask)
    title = "Answer the questions" if len(questions) > 1 else "Answer the question"
    view: dict[str, Any] = {}
    for level in MODAL_LEVELS:
        if level is not MODAL_LEVELS[-1] and not may_fit(questions, level, VIEW_MAX_BLOCKS, modal=True):
            continue
        blocks = _form_blocks(ask, questions, level)
        if len(blocks) > VIEW_MAX_BLOCKS and level is not MODAL_LEVELS[-1]:
            continue  # Slack refuses a view of more than 100 blocks
        view = _view(VIEW_FORM, title, meta, blocks)
        if view_size(view) <= VIEW_BYTE_BUDGET and not validate_view(view):
            return view
    check_view(view)  # the last level always fits; reaching here with problems is a bug
    return view


def _view(
    callback_id: str, title: str, meta: FormMeta, blocks: list[Block], *, submit: str = "Submit"
) -> dict[str, Any]:
    return {
        "blocks": blocks,
        "callback_id": callback_id,
        "close": plain("Cancel"),
        "private_metadata": meta.encode(),
        "submit": plain(submit),
        "title": plain(title),
        "type": "modal",
    }


def _form_blocks(ask: AskRecord, questions: list[QuestionView], level: Level) -> list[Block]:
    cutter = Cutter(split=level.split)
    blocks: list[Block] = [header_block(ask_title(ask))]
    if ask.form is not None and ask.form.description:
        blocks += cutter.markdown(ask.form.description, max(level.extras, 200))
    many = len(questions) > 1
    for i, q in enumerate(questions):
        if level.divider and (many or i == 0):
            blocks.append(divider_block())
        head = f"*{inline(q.label, 40)}.* " if many else ""
        blocks += cutter.markdown(q.text, level.text, head)
        if level.extras:
            for heading, text in q.extras:
                prefix = f"*{heading}:* " if heading else ""
                blocks += cutter.markdown(text, level.extras, prefix)
        if q.category in CATEGORY_WORDS:
            blocks.append(context_block(f"Category: *{CATEGORY_WORDS[q.category]}*"))
        if level.listing and q.options and needs_listing(q):
            blocks += cutter.sections(option_listing(q, level, cutter), 3000)
        blocks.append(answer_input(q, i, many=many))
        if q.custom:
            blocks.append(text_input(FIELD_CUSTOM, i, OTHER_OPTION, optional=True))
        if q.kind != "text" and q.note:
            blocks.append(text_input(FIELD_NOTE, i, "Note", optional=True))
    if ask.format == "rich":
        blocks.append(text_input(FIELD_ADDITIONAL, None, "Additional notes", optional=True))
    return blocks


def render_other_modal(ask: AskRecord, question_index: int, meta: FormMeta) -> dict[str, Any]:
    """The small modal behind the one-click "Other…" button (callback ``VIEW_OTHER``)."""
    questions = question_views(ask)
    if not 0 <= question_index < len(questions):
        raise ValueError(f"question index {question_index} is out of range for {len(questions)} question(s)")
    q = questions[question_index]
    blocks: list[Block] = [
        section_block(cut(to_mrkdwn(q.text), 2900) or "(no question text)"),
        text_input(FIELD_CUSTOM, question_index, OTHER_OPTION, optional=False),
        text_input(FIELD_NOTE, question_index, "Note", optional=True),
    ]
    view = _view(VIEW_OTHER, "Your own answer", meta, blocks)
    check_view(view)
    return view


def render_decline_modal(ask: AskRecord, meta: FormMeta) -> dict[str, Any]:
    """The small modal behind Decline (callback ``VIEW_DECLINE``): an optional reason, then Decline.

    The reason goes to the agent in the ``note`` of every answer and shows in the ended message
    (protocol section 9); submitting it empty declines without one."""
    blocks: list[Block] = [
        section_block(cut("*" + inline(ask_title(ask), 150) + "*", 2900)),
        section_block("The agent will be told that you declined. This ends the question for everyone."),
        text_input(FIELD_REASON, None, "Reason (optional)", optional=True),
    ]
    view = _view(VIEW_DECLINE, "Decline to answer?", meta, blocks, submit="Decline")
    check_view(view)
    return view
