"""Pure rendering: asks and outcomes to Block Kit, and untrusted text to safe Slack text.

Every function here is pure (no I/O, no clock: times come in as arguments) and every payload it returns
passes :mod:`bot.slack.blockkit` for *any* ask the contract allows, however long or hostile its text:

- agent text only reaches Slack through :mod:`bot.render.mrkdwn` (escaped, links shown as text,
  ``verbatim: true``); the only ``<…>`` tokens are the bot's own: ``<!date^…>``, mentions asked for by an
  escalation step (``<@U…>``, ``<!subteam^S…>``, ids re-checked here) and the verified responder
  (``<@U…>``) of an ended ask;
- too much content degrades in steps (:mod:`bot.render.fitting`): long texts are cut with a marker,
  descriptions dropped, options summarised; the actions block always stays.

The modules, by what they draw: :mod:`~bot.render.message` (the ask's message),
:mod:`~bot.render.modal` (the form and "Other…" modals), :mod:`~bot.render.ended` (the ended message and
refusals), :mod:`~bot.render.reminder`, on top of :mod:`~bot.render.questions` (one view of both formats
and the question inputs), :mod:`~bot.render.fitting` (Slack's budgets) and :mod:`~bot.render.shared`.
Interactive elements carry the ids of :mod:`bot.ids`.
"""

from bot.render.ended import RefusalKind, render_ended_message, render_refusal
from bot.render.message import render_ask_message
from bot.render.modal import render_decline_modal, render_form_modal, render_other_modal
from bot.render.mrkdwn import (
    CUT_MARK,
    WORD_JOINER,
    clean,
    cut,
    escape_mrkdwn,
    escape_plain,
    one_line,
    split_for_sections,
    to_mrkdwn,
)
from bot.render.reminder import render_reminder
from bot.render.shared import Message, date_token, mention_tokens

__all__ = [
    "CUT_MARK",
    "WORD_JOINER",
    "Message",
    "RefusalKind",
    "clean",
    "cut",
    "date_token",
    "escape_mrkdwn",
    "escape_plain",
    "mention_tokens",
    "one_line",
    "render_ask_message",
    "render_decline_modal",
    "render_ended_message",
    "render_form_modal",
    "render_other_modal",
    "render_refusal",
    "render_reminder",
    "split_for_sections",
    "to_mrkdwn",
]
