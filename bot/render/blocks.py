"""Pure Block Kit rendering: an :class:`~bot.model.AskRecord` (or an outcome) in, Slack payloads out.

Every function here is pure (no I/O, no clock: times come in as arguments) and every payload it returns
passes :mod:`bot.slack.blockkit` for *any* ask the contract allows, however long or hostile its text:

- agent text only reaches Slack through :mod:`bot.render.mrkdwn` (escaped, links shown as text,
  ``verbatim: true``); the only ``<…>`` tokens are the bot's own: ``<!date^…>``, mentions asked for by an
  escalation step (``<@U…>``, ``<!subteam^S…>``, ids re-checked here) and the verified responder
  (``<@U…>``) of an ended ask;
- too much content degrades in steps (:data:`_MESSAGE_LEVELS`, :data:`_MODAL_LEVELS`): long texts are cut
  with a marker, descriptions dropped, options summarised; the actions block always stays.

Interactive elements carry the ids of :mod:`bot.ids`. One-click option buttons use the action id
``f"{ACTION_CHOOSE}:{index}"`` (Slack wants action ids unique within a block), so the interactions layer
matches the ``ACTION_CHOOSE`` prefix and reads the option from the button's :class:`~bot.ids.AskRef` value.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, Final, Literal

from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    CheckboxesElement,
    ConfirmObject,
    ContextBlock,
    DividerBlock,
    HeaderBlock,
    InputBlock,
    InputInteractiveElement,
    MarkdownTextObject,
    Option,
    PlainTextInputElement,
    PlainTextObject,
    RadioButtonsElement,
    SectionBlock,
    StaticMultiSelectElement,
    StaticSelectElement,
)
from slack_sdk.models.views import View

from bot.ids import (
    ACTION_CHOOSE,
    ACTION_DECLINE,
    ACTION_OPEN,
    ACTION_OTHER,
    FIELD_ADDITIONAL,
    FIELD_ANSWER,
    FIELD_CUSTOM,
    FIELD_NOTE,
    VIEW_FORM,
    VIEW_OTHER,
    AskRef,
    FormMeta,
    field_block_id,
)
from bot.model import AskRecord
from bot.render.mrkdwn import (
    CUT_MARK,
    cut,
    escape_mrkdwn,
    one_line,
    split_for_sections,
    to_mrkdwn,
)
from bot.slack.blockkit import (
    MESSAGE_MAX_BLOCKS,
    VIEW_MAX_BLOCKS,
    blocks_text_length,
    check_message,
    check_view,
    text_length,
    validate_message,
    validate_view,
    view_size,
)
from contract.question import OTHER_OPTION

__all__ = [
    "ENDED_OUTCOMES",
    "SEE_FORM",
    "Message",
    "RefusalKind",
    "date_token",
    "mention_tokens",
    "render_ask_message",
    "render_ended_message",
    "render_form_modal",
    "render_other_modal",
    "render_refusal",
    "render_reminder",
]

SEE_FORM: Final = "… (see the form for the full text)"
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

RefusalKind = Literal["not_allowed", "ended", "late"]

# Slack's cumulative text limit for a message's blocks is undocumented (about 12,000; rejected at 11,341 in
# slackapi/bolt-js#2867); stay well under it. The full text is always one click away in the form.
_MESSAGE_TEXT_BUDGET: Final = 9_000
# Views may hold 250 kB; leave room for Slack's own accounting of the payload.
_VIEW_BYTE_BUDGET: Final = 200_000
_ONE_CLICK_MAX_OPTIONS: Final = 5
_INPUT_MAX: Final = 3000
_RADIO_MAX: Final = 10

# fullmatch, never match + "$": "$" also matches before a trailing newline.
_USER_ID_RE: Final = re.compile(r"[UW][A-Z0-9]{2,31}")
_GROUP_ID_RE: Final = re.compile(r"S[A-Z0-9]{2,31}")
_KIND_WORDS: Final = {
    "single": "Choose one",
    "multi": "Choose one or more",
    "text": "Answer in your own words",
}
_Element = Callable[..., InputInteractiveElement]
# A choice question's answer element: (up to _RADIO_MAX options, more options).
_CHOICE_ELEMENTS: Final[dict[str, tuple[_Element, _Element]]] = {
    "single": (RadioButtonsElement, StaticSelectElement),
    "multi": (CheckboxesElement, StaticMultiSelectElement),
}
_CATEGORY_WORDS: Final = {
    "implementation": "Implementation",
    "scope-product": "Scope / product",
    "security-permission": "Security / permission",
}
# Slack renders <!date^…> for years 1970-9999; later deadlines are "practically never".
_MAX_DATE_SECONDS: Final = 253_402_300_799


@dataclass(frozen=True, slots=True)
class Message:
    """A chat.postMessage / chat.update payload: ``text`` is the notification fallback."""

    text: str
    blocks: list[dict[str, Any]] = field(default_factory=list)

    def to_payload(self) -> dict[str, Any]:
        return {"text": self.text, "blocks": self.blocks}


# -- small shared pieces --------------------------------------------------------------------------------


def date_token(ms: int) -> str | None:
    """``<!date^…>`` showing ``ms`` in the reader's own time zone (UTC fallback); None past year 9999."""
    seconds = ms // 1000
    if not 0 <= seconds <= _MAX_DATE_SECONDS:
        return None
    fallback = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"<!date^{seconds}^{{date_short_pretty}} at {{time}}|{fallback}>"


def mention_tokens(ids: Sequence[str]) -> list[str]:
    """Slack mention tokens for user ids (``U…``, ``W…``) and user-group ids (``S…``), in order, once each.

    Anything else is dropped: these are the only mentions the bot ever emits (protocol section 5).
    """
    tokens: list[str] = []
    for slack_id in ids:
        if _USER_ID_RE.fullmatch(slack_id):
            token = f"<@{slack_id}>"
        elif _GROUP_ID_RE.fullmatch(slack_id):
            token = f"<!subteam^{slack_id}>"
        else:
            continue
        if token not in tokens:
            tokens.append(token)
    return tokens


def _md(text: str) -> MarkdownTextObject:
    return MarkdownTextObject(text=text, verbatim=True)


def _plain(text: str) -> PlainTextObject:
    return PlainTextObject(text=text, emoji=True)


def _section(text: str) -> Block:
    return SectionBlock(text=_md(text))


def _context(*texts: str) -> Block:
    return ContextBlock(elements=[_md(t) for t in texts if t.strip()][:10])


def _header(title: str) -> Block:
    return HeaderBlock(text=_plain(_plain_line(title, 150, "A question for you")))


# Cached: the renderer tries several detail levels, each escaping the same (possibly huge) labels again.
@lru_cache(maxsize=1024)
def _line(text: str) -> str:
    """Untrusted text as one escaped mrkdwn line."""
    return escape_mrkdwn(one_line(text))


# escape_plain is escape_mrkdwn, so plain_text fields share _line's cache.
_plain_one: Final = _line


def _window(size: int) -> int:
    """``size`` rounded up to a power of two (at least 1024), so detail levels share cached work."""
    return 1 << max(10, (size - 1).bit_length())


def _short(text: str, limit: int, marker: str, escape: Callable[[str], str] = _line) -> str:
    """``escape(text)`` cut to ``limit``; only a prefix is escaped when the text is far longer.

    Option labels may be longer than any limit (the contract does not cut them), and a view holds
    hundreds of them: escaping a bounded prefix keeps rendering fast. Escaping never shrinks text
    except by collapsing whitespace, so four times the limit is plenty.
    """
    window = _window(4 * limit + 64)
    if len(text) <= window:
        return cut(escape(text), limit, marker)
    return cut(escape(text[:window]), limit, marker, force=True)


def _inline(text: str | None, limit: int) -> str:
    """Untrusted text as one mrkdwn line, cut to ``limit``."""
    return _short(text or "", limit, CUT_MARK)


def _plain_line(text: str | None, limit: int, fallback: str) -> str:
    shown = _short(text or "", limit, CUT_MARK, _plain_one)
    return shown if shown.strip() else fallback


def _dicts(blocks: Sequence[Block]) -> list[dict[str, Any]]:
    return [b.to_dict() for b in blocks]


# -- one view of both formats ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Opt:
    label: str
    description: str | None = None
    details: str | None = None
    note: str | None = None
    recommended: bool = False


@dataclass(frozen=True, slots=True)
class _Q:
    """A question of either format, as the renderer sees it (texts raw, untrusted)."""

    label: str
    text: str
    extras: tuple[tuple[str, str], ...]
    """(heading, Markdown) pieces: a pi-question description, or rich body/context/recommendation/caveats."""
    options: tuple[_Opt, ...]
    kind: Literal["single", "multi", "text"]
    custom: bool
    required: bool = True
    category: str | None = None
    placeholder: str | None = None


def _questions(ask: AskRecord) -> list[_Q]:
    if ask.format == "rich":
        if ask.form is None:
            raise ValueError(f"ask {ask.ask_id!r} has format rich but no form")
        found: list[_Q] = []
        for i, rq in enumerate(ask.form.questions):
            extras = tuple(
                (heading, text)
                for heading, text in (
                    ("", rq.body),
                    ("Context", rq.context),
                    ("Recommendation", rq.recommendation),
                    ("Caveats", rq.caveats),
                )
                if text and text.strip()
            )
            options = tuple(
                _Opt(o.label, o.description, o.details, o.note, o.recommended) for o in rq.options
            )
            kind: Literal["single", "multi", "text"] = (
                "text" if rq.type == "text" else "multi" if rq.type == "checkbox" else "single"
            )
            found.append(
                _Q(
                    label=rq.label or f"Q{i + 1}",
                    text=rq.prompt,
                    extras=extras,
                    options=options,
                    kind=kind,
                    custom=rq.allow_other and kind != "text",
                    required=rq.required,
                    placeholder=rq.placeholder,
                )
            )
        return found
    if ask.request is None:
        raise ValueError(f"ask {ask.ask_id!r} has format pi-question but no request")
    return [
        _Q(
            label=f"Q{i + 1}",
            text=q.question,
            extras=(("", q.description),) if q.description and q.description.strip() else (),
            options=tuple(
                _Opt(o.label, o.description, recommended=q.recommended == j) for j, o in enumerate(q.options)
            ),
            kind="multi" if q.multi else "single",
            custom=q.custom_allowed,
            category=q.category,
        )
        for i, q in enumerate(ask.request.questions)
    ]


def _title(ask: AskRecord) -> str:
    if ask.form is not None and ask.form.title and ask.form.title.strip():
        return ask.form.title
    many = ask.question_count > 1
    name = ask.requester.name if ask.requester is not None else None
    if name and name.strip():
        return f"{'Questions' if many else 'Question'} from {name}"
    return "Some questions for you" if many else "A question for you"


def _kind_words(q: _Q) -> str:
    words = _KIND_WORDS[q.kind]
    if q.custom:
        words += ", or write your own answer"
    if not q.required:
        words += " (optional)"
    return words


def _is_one_click(ask: AskRecord) -> bool:
    """Protocol section 11: one pi-question, single choice, 1 to 5 options."""
    if ask.format != "pi-question" or ask.request is None or len(ask.request.questions) != 1:
        return False
    q = ask.request.questions[0]
    return q.multi is not True and 1 <= len(q.options) <= _ONE_CLICK_MAX_OPTIONS


class _Cutter:
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
        shown = _short(text, limit, CUT_MARK)
        if shown.endswith(CUT_MARK):
            self.truncated = True
        return shown

    def markdown(self, source: str, limit: int, head: str = "") -> list[Block]:
        """Untrusted Markdown (after a bot-made ``head``) as sections, like :meth:`sections`.

        When cutting, only a prefix of a much longer source is converted (Markdown parsing is the
        renderer's slowest step); the marker is then always added.
        """
        window = _window(2 * limit + 200)
        if self.split or len(source) <= window:
            return self.sections(head + to_mrkdwn(source), limit)
        if limit <= 0:
            return []
        self.truncated = True
        return [_section(cut(head + to_mrkdwn(source[:window]), min(limit, 3000), SEE_FORM, force=True))]

    def sections(self, text: str, limit: int) -> list[Block]:
        """``text`` as one section cut to ``limit``, or (when splitting) as many full 3000-unit sections."""
        if not text.strip() or limit <= 0:
            return []
        if self.split:
            return [_section(piece) for piece in split_for_sections(text, 3000)]
        return [_section(self.cut(text, min(limit, 3000)))]


# -- the ask message ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Level:
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


_MESSAGE_LEVELS: Final = (
    _Level(split=True, text=3000, extras=3000, option_label=600, option_description=600, listing=True),
    _Level(split=False, text=2000, extras=1500, option_label=300, option_description=300, listing=True),
    _Level(split=False, text=1000, extras=600, option_label=150, option_description=120, listing=True),
    _Level(split=False, text=500, extras=250, option_label=80, option_description=0, listing=True),
    _Level(split=False, text=300, extras=0, option_label=60, option_description=0, listing=False),
    _Level(split=False, text=160, extras=0, option_label=30, option_description=0, listing=False),
)


def render_ask_message(
    ask: AskRecord,
    *,
    now_ms: int,
    step: int = 0,
    mentions: Sequence[str] = (),
    elsewhere: Sequence[str] = (),
) -> Message:
    """The message that carries an ask: header, context, each question, then the buttons.

    ``mentions`` are the Slack ids an escalation step asked to mention (the only mentions the bot emits);
    ``elsewhere`` names the other places the ask was posted ("Also asked in …").
    """
    questions = _questions(ask)
    tokens = mention_tokens(mentions)
    title = _title(ask)
    fallback = _fallback_text(tokens, title, questions)
    payload: dict[str, Any] = {}
    blocks: list[dict[str, Any]] = []
    for level in _MESSAGE_LEVELS:
        if level is not _MESSAGE_LEVELS[-1] and not _may_fit(questions, level, MESSAGE_MAX_BLOCKS):
            continue
        blocks = _ask_blocks(
            ask, questions, level, now_ms=now_ms, step=step, tokens=tokens, elsewhere=elsewhere
        )
        payload = {"text": fallback, "blocks": blocks}
        fits = len(blocks) <= MESSAGE_MAX_BLOCKS and blocks_text_length(blocks) <= _MESSAGE_TEXT_BUDGET
        if fits and not validate_message(payload):
            return Message(text=fallback, blocks=blocks)
    check_message(payload)  # the last level always fits; reaching here with problems is a bug
    return Message(text=fallback, blocks=blocks)


def _may_fit(questions: list[_Q], level: _Level, max_blocks: int, *, modal: bool = False) -> bool:
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
    return blocks <= max_blocks and chars <= _MESSAGE_TEXT_BUDGET * 5 // 4


def _fallback_text(tokens: list[str], title: str, questions: list[_Q]) -> str:
    first = questions[0].text if questions else ""
    text = cut(escape_mrkdwn(one_line(f"{title}: {first}")), 300)
    return " ".join([*tokens, text])


def _ask_blocks(
    ask: AskRecord,
    questions: list[_Q],
    level: _Level,
    *,
    now_ms: int,
    step: int,
    tokens: list[str],
    elsewhere: Sequence[str],
) -> list[dict[str, Any]]:
    cutter = _Cutter(split=level.split)
    blocks: list[Block] = [_header(_title(ask))]
    if tokens:
        blocks.append(_section(" ".join(tokens) + " your answer is requested here."))
    blocks.append(_context(*_about(ask, now_ms=now_ms, step=step, elsewhere=elsewhere)))
    if ask.form is not None and ask.form.description:
        blocks += cutter.markdown(ask.form.description, max(level.extras, 200))
    many = len(questions) > 1
    for q in questions:
        if level.divider and many:
            blocks.append(DividerBlock())
        head = f"*{_inline(q.label, 40)}.* " if many else ""
        blocks += cutter.markdown(q.text, level.text, head)
        if level.extras:
            for heading, text in q.extras:
                prefix = f"*{heading}:* " if heading else ""
                blocks += cutter.markdown(text, level.extras, prefix)
        meta = [_kind_words(q)]
        if q.category in _CATEGORY_WORDS:
            meta.insert(0, f"Category: *{_CATEGORY_WORDS[q.category]}*")
        if q.options and level.listing:
            blocks += cutter.sections(_option_listing(q, level, cutter), 3000)
            blocks.append(_context(" · ".join(meta)))
        elif q.options:
            compact = " · ".join(
                _inline(o.label, level.option_label) + (" ⭐" if o.recommended else "") for o in q.options
            )
            blocks.append(_context(" · ".join(meta), cutter.cut("Options: " + compact, 2000)))
        else:
            blocks.append(_context(" · ".join(meta)))
    blocks.append(_actions(ask, truncated=cutter.truncated))
    return _dicts(blocks)


def _about(ask: AskRecord, *, now_ms: int, step: int, elsewhere: Sequence[str]) -> list[str]:
    parts: list[str] = []
    req = ask.requester
    if req is not None:
        who = []
        if req.name and req.name.strip():
            who.append(f"From *{_inline(req.name, 200)}*")
        if req.session and req.session.strip():
            who.append("session `" + _inline(req.session.replace("`", "ˋ"), 200) + "`")
        if req.title and req.title.strip():
            who.append("“" + _inline(req.title, 500) + "”")
        if req.url and req.url.strip():
            who.append(_inline(req.url, 300))
        if who:
            parts.append(" · ".join(who))
    deadline = date_token(ask.deadline_ms) if ask.deadline_ms is not None else None
    if ask.deadline_ms is not None and ask.deadline_ms <= now_ms:
        parts.append("The deadline has passed")
    else:
        parts.append(f"Answer by {deadline}" if deadline else "No deadline")
    if step > 0:
        parts.append("Escalated here")
    places = [_inline(place, 200) for place in elsewhere if place and place.strip()]
    if places:
        parts.append(cut("Also asked in " + ", ".join(places), 600))
    return parts


def _option_listing(q: _Q, level: _Level, cutter: _Cutter) -> str:
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


def _actions(ask: AskRecord, *, truncated: bool) -> Block:
    ref = AskRef(tag=ask.tag, ask_id=ask.ask_id).encode()
    buttons: list[ButtonElement] = []
    if _is_one_click(ask):
        assert ask.request is not None  # _is_one_click checked it
        q = ask.request.questions[0]
        for i, o in enumerate(q.options):
            buttons.append(
                ButtonElement(
                    text=_plain(_plain_line(o.label, 75, f"Option {i + 1}")),
                    action_id=f"{ACTION_CHOOSE}:{i}",
                    value=AskRef(tag=ask.tag, ask_id=ask.ask_id, option=i).encode(),
                    style="primary" if q.recommended == i else None,
                )
            )
        if q.custom_allowed:
            buttons.append(ButtonElement(text=_plain("Other…"), action_id=ACTION_OTHER, value=ref))
        if truncated:
            # Some text was cut in the message: the form shows all of it (and answers too).
            buttons.append(ButtonElement(text=_plain("Read all / answer…"), action_id=ACTION_OPEN, value=ref))
    else:
        buttons.append(
            ButtonElement(text=_plain("Answer…"), action_id=ACTION_OPEN, value=ref, style="primary")
        )
    buttons.append(
        ButtonElement(
            text=_plain("Decline"),
            action_id=ACTION_DECLINE,
            value=ref,
            style="danger",
            confirm=ConfirmObject(
                title=_plain("Decline to answer?"),
                text=_plain("The agent will be told that you declined. This ends the question for everyone."),
                confirm=_plain("Decline"),
                deny=_plain("Go back"),
                style="danger",
            ),
        )
    )
    return ActionsBlock(elements=buttons)


# -- the form modal -------------------------------------------------------------------------------------

_MODAL_LEVELS: Final = (
    _Level(
        split=True,
        text=3000,
        extras=3000,
        option_label=3000,
        option_description=1000,
        listing=True,
        divider=True,
    ),
    _Level(
        split=False,
        text=3000,
        extras=3000,
        option_label=600,
        option_description=300,
        listing=True,
        divider=True,
    ),
    _Level(split=False, text=1500, extras=1000, option_label=200, option_description=150, listing=True),
    _Level(split=False, text=700, extras=300, option_label=100, option_description=0, listing=True),
    _Level(split=False, text=300, extras=0, option_label=75, option_description=0, listing=False),
)


def render_form_modal(ask: AskRecord, meta: FormMeta) -> dict[str, Any]:
    """The modal that answers the whole ask (callback ``VIEW_FORM``); nothing is pre-selected."""
    questions = _questions(ask)
    title = "Answer the questions" if len(questions) > 1 else "Answer the question"
    view: dict[str, Any] = {}
    for level in _MODAL_LEVELS:
        if level is not _MODAL_LEVELS[-1] and not _may_fit(questions, level, VIEW_MAX_BLOCKS, modal=True):
            continue
        blocks = _form_blocks(ask, questions, level)
        if len(blocks) > VIEW_MAX_BLOCKS and level is not _MODAL_LEVELS[-1]:
            continue  # slack_sdk's View refuses to serialise more than 100 blocks
        view = _view(VIEW_FORM, title, meta, blocks)
        if view_size(view) <= _VIEW_BYTE_BUDGET and not validate_view(view):
            return view
    check_view(view)  # the last level always fits; reaching here with problems is a bug
    return view


def _view(callback_id: str, title: str, meta: FormMeta, blocks: list[Block]) -> dict[str, Any]:
    view: dict[str, Any] = View(
        type="modal",
        callback_id=callback_id,
        private_metadata=meta.encode(),
        title=_plain(title),
        submit=_plain("Submit"),
        close=_plain("Cancel"),
        blocks=blocks,
    ).to_dict()
    return view


def _form_blocks(ask: AskRecord, questions: list[_Q], level: _Level) -> list[Block]:
    cutter = _Cutter(split=level.split)
    blocks: list[Block] = [_header(_title(ask))]
    if ask.form is not None and ask.form.description:
        blocks += cutter.markdown(ask.form.description, max(level.extras, 200))
    many = len(questions) > 1
    for i, q in enumerate(questions):
        if level.divider and (many or i == 0):
            blocks.append(DividerBlock())
        head = f"*{_inline(q.label, 40)}.* " if many else ""
        blocks += cutter.markdown(q.text, level.text, head)
        if level.extras:
            for heading, text in q.extras:
                prefix = f"*{heading}:* " if heading else ""
                blocks += cutter.markdown(text, level.extras, prefix)
        if q.category in _CATEGORY_WORDS:
            blocks.append(_context(f"Category: *{_CATEGORY_WORDS[q.category]}*"))
        if level.listing and q.options and _needs_listing(q):
            blocks += cutter.sections(_option_listing(q, level, cutter), 3000)
        blocks.append(_answer_input(q, i, many=many))
        if q.custom:
            blocks.append(_text_input(FIELD_CUSTOM, i, OTHER_OPTION, optional=True))
        if q.kind != "text":
            blocks.append(_text_input(FIELD_NOTE, i, "Note", optional=True))
    if ask.format == "rich":
        blocks.append(_text_input(FIELD_ADDITIONAL, None, "Additional notes", optional=True))
    return blocks


def _needs_listing(q: _Q) -> bool:
    """Options whose full text does not fit in the element (75 units) are listed in full above it."""
    for o in q.options:
        if not _fits(o.label, 75) or o.details or o.note:
            return True
        if o.description and not _fits(_option_description_source(o), 75):
            return True
    return False


def _fits(text: str, limit: int) -> bool:
    """Whether ``text`` shows uncut in a plain_text field of ``limit`` units."""
    return len(text) <= 4 * limit + 64 and text_length(_plain_one(text)) <= limit


def _option_description_source(o: _Opt) -> str:
    parts = (["(recommended)"] if o.recommended else []) + ([o.description] if o.description else [])
    return " ".join(parts)


def _choice_options(q: _Q) -> list[Option]:
    options: list[Option] = []
    for j, o in enumerate(q.options):
        description = _plain_line(_option_description_source(o), 75, "")
        options.append(
            Option(
                value=str(j),
                text=_plain(_plain_line(o.label, 75, f"Option {j + 1}")),
                description=_plain(description) if description.strip() else None,
            )
        )
    return options


def _answer_input(q: _Q, index: int, *, many: bool) -> Block:
    element: InputInteractiveElement
    if q.kind == "text":
        element = PlainTextInputElement(
            action_id=FIELD_ANSWER,
            multiline=True,
            max_length=_INPUT_MAX,
            placeholder=_plain(_plain_line(q.placeholder, 150, "")) if q.placeholder else None,
        )
        label = "Your answer"
    elif not q.options:
        raise ValueError(f"question {index} is a choice with no options")
    else:
        options = _choice_options(q)
        label = _KIND_WORDS[q.kind]
        listed, select = _CHOICE_ELEMENTS[q.kind]
        if len(options) <= _RADIO_MAX:
            element = listed(action_id=FIELD_ANSWER, options=options)
        else:
            element = select(action_id=FIELD_ANSWER, options=options, placeholder=_plain(label))
    if many:
        label = f"{_plain_line(q.label, 40, f'Q{index + 1}')} · {label}"
    # Slack cannot say "a choice or custom text": with custom text allowed the choice is optional and the
    # interactions layer checks "at least one" itself (answering with response_action errors).
    optional = not q.required or (q.custom and q.kind != "text")
    hint = "Choose an option, or type your own answer below." if q.custom and q.required else None
    return InputBlock(
        block_id=field_block_id(FIELD_ANSWER, index),
        label=_plain(label),
        element=element,
        optional=optional,
        hint=_plain(hint) if hint else None,
    )


def _text_input(field_name: str, index: int | None, label: str, *, optional: bool) -> Block:
    return InputBlock(
        block_id=field_block_id(field_name, index),
        label=_plain(label),
        element=PlainTextInputElement(action_id=field_name, multiline=True, max_length=_INPUT_MAX),
        optional=optional,
    )


# -- the "Other…" modal ---------------------------------------------------------------------------------


def render_other_modal(ask: AskRecord, question_index: int, meta: FormMeta) -> dict[str, Any]:
    """The small modal behind the one-click "Other…" button (callback ``VIEW_OTHER``)."""
    questions = _questions(ask)
    if not 0 <= question_index < len(questions):
        raise ValueError(f"question index {question_index} is out of range for {len(questions)} question(s)")
    q = questions[question_index]
    blocks: list[Block] = [
        _section(cut(to_mrkdwn(q.text), 2900) or "(no question text)"),
        _text_input(FIELD_CUSTOM, question_index, OTHER_OPTION, optional=False),
        _text_input(FIELD_NOTE, question_index, "Note", optional=True),
    ]
    view = _view(VIEW_OTHER, "Your own answer", meta, blocks)
    check_view(view)
    return view


# -- after the ask --------------------------------------------------------------------------------------


def _outcome_words(outcome: str, who: str | None, reason: str | None) -> str:
    """``who`` is None when nobody acted; "" when someone did but is not to be named (fallback text)."""
    by = f" by {who}" if who else ""
    acted = who is not None
    because = f": {_inline(reason, 500)}" if reason and reason.strip() else ""
    if outcome == "answered":
        # Humans always answer as someone; an answer with no responder is the timeout policy's default.
        return f"Answered{by}" if acted else "Timed out — default applied"
    if outcome == "defaulted":
        return "Timed out — default applied"
    if outcome == "declined" or (outcome == "cancelled" and acted):
        return f"Declined{by}"
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
    return f"Ended ({_inline(outcome, 40)}){because}"


def _responder(responder_id: str | None) -> str | None:
    """A verified Slack user id becomes a mention; anything else (an operator's name) is shown as text."""
    if not responder_id or not responder_id.strip():
        return None
    if _USER_ID_RE.fullmatch(responder_id):
        return f"<@{responder_id}>"
    return _inline(responder_id, 80)


def render_ended_message(
    ask: AskRecord,
    *,
    outcome: str,
    responder_id: str | None,
    resolved_ms: int,
    summary: Sequence[str],
    reason: str | None = None,
) -> Message:
    """The ask's message once it ended: the questions, compactly, and who ended it how and when.

    No interactive element at all (protocol section 10.3). ``outcome`` is one of :data:`ENDED_OUTCOMES`;
    ``responder_id`` is a Slack user id the bot verified; ``summary`` and ``reason`` are untrusted text.
    """
    questions = _questions(ask)
    who = _responder(responder_id)
    words = _outcome_words(outcome, who, reason)
    title = _title(ask)
    blocks: list[Block] = [_header(title)]
    many = len(questions) > 1
    per_question = 1200 if len(questions) <= 2 else 300
    for q in questions:
        head = f"*{_inline(q.label, 40)}.* " if many else ""
        text = cut(head + escape_mrkdwn(one_line(q.text)), per_question)
        if text.strip():
            blocks.append(_section(text))
    lines = [_inline(line, 400) for line in summary if line and line.strip()]
    if lines:
        blocks.append(_section(cut("\n".join(f"• {line}" for line in lines), 3000)))
    when = date_token(resolved_ms)
    blocks.append(_context(f"{words} · {when}" if when else words))
    plain_words = _outcome_words(outcome, "" if who else None, None)
    message = Message(
        text=cut(escape_mrkdwn(one_line(f"{plain_words}: {title}")), 300), blocks=_dicts(blocks)
    )
    check_message(message.to_payload())
    return message


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
    title = cut(escape_mrkdwn(one_line(_title(ask))), 200)
    message = Message(
        text=f"{lead}Still waiting for an answer: {title}",
        blocks=_dicts([_section(text), _context(f"Use the buttons on the message above to answer: {title}")]),
    )
    check_message(message.to_payload())
    return message


_REFUSALS: Final[dict[str, str]] = {
    "not_allowed": "Sorry, this question is for someone else, so your answer was not recorded.",
    "ended": "This question has already ended, so your answer was not recorded.",
    "late": "Too late: the deadline for this question has passed, so your answer was not recorded.",
}


def render_refusal(kind: RefusalKind) -> str:
    """The private (ephemeral) text for someone whose click cannot count."""
    return _REFUSALS[kind]
