"""The message that carries an ask: header, context, each question, then the buttons.

One-click option buttons use the action id ``f"{ACTION_CHOOSE}:{index}"`` (Slack wants action ids unique
within a block), so the interactions layer matches the ``ACTION_CHOOSE`` prefix and reads the option from
the button's :class:`~bot.ids.AskRef` value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.ids import ACTION_CHOOSE, ACTION_DECLINE, ACTION_OPEN, ACTION_OTHER, AskRef
from bot.model import AskRecord
from bot.render.fitting import MESSAGE_LEVELS, MESSAGE_TEXT_BUDGET, Cutter, Level, may_fit, option_listing
from bot.render.mrkdwn import cut, escape_mrkdwn, one_line
from bot.render.questions import (
    CATEGORY_WORDS,
    QuestionView,
    ask_title,
    is_one_click,
    kind_words,
    question_views,
)
from bot.render.replies import THREAD_HINT
from bot.render.shared import (
    Block,
    Message,
    actions_block,
    button,
    context_block,
    date_token,
    divider_block,
    header_block,
    inline,
    mention_tokens,
    plain_line,
    section_block,
)
from bot.render.tally import approval_about, tally_text
from bot.slack.blockkit import MESSAGE_MAX_BLOCKS, blocks_text_length, check_message, validate_message
from contract.envelopes import ResultVote

__all__ = ["ask_actions", "render_ask_message"]


def render_ask_message(
    ask: AskRecord,
    *,
    now_ms: int,
    step: int = 0,
    mentions: Sequence[str] = (),
    elsewhere: Sequence[str] = (),
    votes: Sequence[ResultVote] = (),
) -> Message:
    """The message that carries an ask: header, context, each question, then the buttons.

    ``mentions`` are the Slack ids an escalation step asked to mention (the only mentions the bot emits);
    ``elsewhere`` names the other places the ask was posted ("Also asked in …"); ``votes`` are an
    approval's votes so far, as a result lists them (the tally, protocol section 13).
    """
    questions = question_views(ask)
    tokens = mention_tokens(mentions)
    title = ask_title(ask)
    fallback = _fallback_text(tokens, title, questions)
    payload: dict[str, Any] = {}
    blocks: list[dict[str, Any]] = []
    for level in MESSAGE_LEVELS:
        if level is not MESSAGE_LEVELS[-1] and not may_fit(questions, level, MESSAGE_MAX_BLOCKS):
            continue
        blocks = _ask_blocks(
            ask, questions, level, now_ms=now_ms, step=step, tokens=tokens, elsewhere=elsewhere, votes=votes
        )
        payload = {"text": fallback, "blocks": blocks}
        fits = len(blocks) <= MESSAGE_MAX_BLOCKS and blocks_text_length(blocks) <= MESSAGE_TEXT_BUDGET
        if fits and not validate_message(payload):
            return Message(text=fallback, blocks=blocks)
    check_message(payload)  # the last level always fits; reaching here with problems is a bug
    return Message(text=fallback, blocks=blocks)


def _fallback_text(tokens: list[str], title: str, questions: list[QuestionView]) -> str:
    first = questions[0].text if questions else ""
    text = cut(escape_mrkdwn(one_line(f"{title}: {first}")), 300)
    return " ".join([*tokens, text])


def _ask_blocks(
    ask: AskRecord,
    questions: list[QuestionView],
    level: Level,
    *,
    now_ms: int,
    step: int,
    tokens: list[str],
    elsewhere: Sequence[str],
    votes: Sequence[ResultVote],
) -> list[dict[str, Any]]:
    cutter = Cutter(split=level.split)
    blocks: list[Block] = [header_block(ask_title(ask))]
    if tokens:
        blocks.append(section_block(" ".join(tokens) + " your answer is requested here."))
    blocks.append(context_block(*_about(ask, now_ms=now_ms, step=step, elsewhere=elsewhere)))
    if ask.form is not None and ask.form.description:
        blocks += cutter.markdown(ask.form.description, max(level.extras, 200))
    many = len(questions) > 1
    for q in questions:
        if level.divider and many:
            blocks.append(divider_block())
        head = f"*{inline(q.label, 40)}.* " if many else ""
        blocks += cutter.markdown(q.text, level.text, head)
        if level.extras:
            for heading, text in q.extras:
                prefix = f"*{heading}:* " if heading else ""
                blocks += cutter.markdown(text, level.extras, prefix)
        # An approval's question is answered by votes on its options, never by free text.
        meta = [kind_words(q) if ask.approval is None else "Vote for one option"]
        if q.category in CATEGORY_WORDS:
            meta.insert(0, f"Category: *{CATEGORY_WORDS[q.category]}*")
        if q.options and level.listing:
            blocks += cutter.sections(option_listing(q, level, cutter), 3000)
            blocks.append(context_block(" · ".join(meta)))
        elif q.options:
            compact = " · ".join(
                inline(o.label, level.option_label) + (" ⭐" if o.recommended else "") for o in q.options
            )
            blocks.append(context_block(" · ".join(meta), cutter.cut("Options: " + compact, 2000)))
        else:
            blocks.append(context_block(" · ".join(meta)))
    if ask.approval is not None:
        blocks.append(section_block(tally_text(ask, votes)))
    blocks.append(ask_actions(ask, truncated=cutter.truncated))
    return blocks


def _about(ask: AskRecord, *, now_ms: int, step: int, elsewhere: Sequence[str]) -> list[str]:
    parts: list[str] = []
    req = ask.requester
    if req is not None:
        who = []
        if req.name and req.name.strip():
            who.append(f"From *{inline(req.name, 200)}*")
        if req.session and req.session.strip():
            who.append("session `" + inline(req.session.replace("`", "ˋ"), 200) + "`")
        if req.title and req.title.strip():
            who.append("“" + inline(req.title, 500) + "”")
        if req.url and req.url.strip():
            who.append(inline(req.url, 300))
        if who:
            parts.append(" · ".join(who))
    deadline = date_token(ask.deadline_ms) if ask.deadline_ms is not None else None
    if ask.deadline_ms is not None and ask.deadline_ms <= now_ms:
        parts.append("The deadline has passed")
    else:
        parts.append(f"Answer by {deadline}" if deadline else "No deadline")
    needs = approval_about(ask)
    if needs:
        parts.append(needs)
    if step > 0:
        parts.append("Escalated here")
    places = [inline(place, 200) for place in elsewhere if place and place.strip()]
    if places:
        parts.append(cut("Also asked in " + ", ".join(places), 600))
    if ask.thread_answers and ask.request is not None:
        parts.append(THREAD_HINT)
    return parts


def ask_actions(ask: AskRecord, *, truncated: bool) -> Block:
    """The ask's buttons, the same on its message and on its row of a person's Home tab."""
    ref = AskRef(tag=ask.tag, ask_id=ask.ask_id).encode()
    buttons: list[Block] = []
    if ask.approval is not None and ask.request is not None:
        # A vote is one click on an option, whatever the number of options (at most 12, within the
        # 25 elements of an actions block); no "Other…": a vote is for one of the options. The buttons
        # stay until the ask ends, so people can change their vote.
        for i, o in enumerate(ask.request.questions[0].options):
            buttons.append(
                button(
                    plain_line(o.label, 75, f"Option {i + 1}"),
                    f"{ACTION_CHOOSE}:{i}",
                    AskRef(tag=ask.tag, ask_id=ask.ask_id, option=i).encode(),
                    "danger" if i in ask.approval.veto else None,
                )
            )
        if truncated:
            buttons.append(button("Read all…", ACTION_OPEN, ref))
    elif is_one_click(ask):
        assert ask.request is not None  # is_one_click checked it
        q = ask.request.questions[0]
        for i, o in enumerate(q.options):
            buttons.append(
                button(
                    plain_line(o.label, 75, f"Option {i + 1}"),
                    f"{ACTION_CHOOSE}:{i}",
                    AskRef(tag=ask.tag, ask_id=ask.ask_id, option=i).encode(),
                    "primary" if q.recommended == i else None,
                )
            )
        if q.custom_allowed:
            buttons.append(button("Other…", ACTION_OTHER, ref))
        if truncated:
            # Some text was cut in the message: the form shows all of it (and answers too).
            buttons.append(button("Read all / answer…", ACTION_OPEN, ref))
    else:
        buttons.append(button("Answer…", ACTION_OPEN, ref, "primary"))
    # Decline opens a small modal (an optional reason, then the Decline button): the same two clicks
    # as the confirmation it replaces, so Decline stays one click away for people who give no reason.
    buttons.append(button("Decline…", ACTION_DECLINE, ref, "danger"))
    return actions_block(buttons)
