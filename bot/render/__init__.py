"""Pure rendering: asks and outcomes to Block Kit, and untrusted text to safe Slack text."""

from bot.render.blocks import (
    Message,
    RefusalKind,
    date_token,
    mention_tokens,
    render_ask_message,
    render_ended_message,
    render_form_modal,
    render_other_modal,
    render_refusal,
    render_reminder,
)
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
    "render_ended_message",
    "render_form_modal",
    "render_other_modal",
    "render_refusal",
    "render_reminder",
    "split_for_sections",
    "to_mrkdwn",
]
