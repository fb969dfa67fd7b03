"""One view of both ask formats (`QuestionView`), and the question inputs a form modal draws for it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from bot.ids import FIELD_ANSWER, field_block_id
from bot.model import AskRecord
from bot.render.shared import Block, plain, plain_line, plain_one_line
from bot.slack.blockkit import text_length

__all__ = [
    "CATEGORY_WORDS",
    "KIND_WORDS",
    "OptionView",
    "QuestionView",
    "answer_input",
    "ask_title",
    "is_one_click",
    "kind_words",
    "needs_listing",
    "question_views",
    "text_input",
]

_ONE_CLICK_MAX_OPTIONS: Final = 5

_INPUT_MAX: Final = 3000

_RADIO_MAX: Final = 10

KIND_WORDS: Final = {
    "single": "Choose one",
    "multi": "Choose one or more",
    "text": "Answer in your own words",
}

# A choice question's answer element type: (up to _RADIO_MAX options, more options).
_CHOICE_ELEMENTS: Final[dict[str, tuple[str, str]]] = {
    "single": ("radio_buttons", "static_select"),
    "multi": ("checkboxes", "multi_static_select"),
}

CATEGORY_WORDS: Final = {
    "implementation": "Implementation",
    "scope-product": "Scope / product",
    "security-permission": "Security / permission",
}


@dataclass(frozen=True, slots=True)
class OptionView:
    label: str
    description: str | None = None
    details: str | None = None
    note: str | None = None
    recommended: bool = False


@dataclass(frozen=True, slots=True)
class QuestionView:
    """A question of either format, as the renderer sees it (texts raw, untrusted)."""

    label: str
    text: str
    extras: tuple[tuple[str, str], ...]
    """(heading, Markdown) pieces: a pi-question description, or rich body/context/recommendation/caveats."""
    options: tuple[OptionView, ...]
    kind: Literal["single", "multi", "text"]
    custom: bool
    required: bool = True
    note: bool = True
    """A "Note" input under a choice in the full form; never for an approval, whose vote is one of the
    options and nothing else (protocol section 13), nor is ``custom`` then."""
    category: str | None = None
    placeholder: str | None = None


def question_views(ask: AskRecord) -> list[QuestionView]:
    if ask.format == "rich":
        if ask.form is None:
            raise ValueError(f"ask {ask.ask_id!r} has format rich but no form")
        found: list[QuestionView] = []
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
                OptionView(o.label, o.description, o.details, o.note, o.recommended) for o in rq.options
            )
            kind: Literal["single", "multi", "text"] = (
                "text" if rq.type == "text" else "multi" if rq.type == "checkbox" else "single"
            )
            found.append(
                QuestionView(
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
        QuestionView(
            label=f"Q{i + 1}",
            text=q.question,
            extras=(("", q.description),) if q.description and q.description.strip() else (),
            options=tuple(
                OptionView(o.label, o.description, recommended=q.recommended == j)
                for j, o in enumerate(q.options)
            ),
            kind="multi" if q.multi else "single",
            custom=q.custom_allowed and ask.approval is None,
            category=q.category,
            note=ask.approval is None,
        )
        for i, q in enumerate(ask.request.questions)
    ]


def ask_title(ask: AskRecord) -> str:
    if ask.form is not None and ask.form.title and ask.form.title.strip():
        return ask.form.title
    many = ask.question_count > 1
    name = ask.requester.name if ask.requester is not None else None
    if name and name.strip():
        return f"{'Questions' if many else 'Question'} from {name}"
    return "Some questions for you" if many else "A question for you"


def kind_words(q: QuestionView) -> str:
    words = KIND_WORDS[q.kind]
    if q.custom:
        words += ", or write your own answer"
    if not q.required:
        words += " (optional)"
    return words


def is_one_click(ask: AskRecord) -> bool:
    """Protocol section 11: one pi-question, single choice, 1 to 5 options."""
    if ask.format != "pi-question" or ask.request is None or len(ask.request.questions) != 1:
        return False
    q = ask.request.questions[0]
    return q.multi is not True and 1 <= len(q.options) <= _ONE_CLICK_MAX_OPTIONS


def needs_listing(q: QuestionView) -> bool:
    """Options whose full text does not fit in the element (75 units) are listed in full above it."""
    for o in q.options:
        if not _fits(o.label, 75) or o.details or o.note:
            return True
        if o.description and not _fits(_option_description_source(o), 75):
            return True
    return False


def _fits(text: str, limit: int) -> bool:
    """Whether ``text`` shows uncut in a plain_text field of ``limit`` units."""
    return len(text) <= 4 * limit + 64 and text_length(plain_one_line(text)) <= limit


def _option_description_source(o: OptionView) -> str:
    parts = (["(recommended)"] if o.recommended else []) + ([o.description] if o.description else [])
    return " ".join(parts)


def _choice_options(q: QuestionView) -> list[Block]:
    options: list[Block] = []
    for j, o in enumerate(q.options):
        description = plain_line(_option_description_source(o), 75, "")
        # slack_sdk's Option wrote text, value, then description: kept so, byte for byte.
        option: Block = {"text": plain(plain_line(o.label, 75, f"Option {j + 1}")), "value": str(j)}
        if description.strip():
            option["description"] = plain(description)
        options.append(option)
    return options


def _text_element(action_id: str, placeholder: str | None = None) -> Block:
    element: Block = {"action_id": action_id, "max_length": _INPUT_MAX, "multiline": True}
    if placeholder:
        element["placeholder"] = plain(placeholder)
    element["type"] = "plain_text_input"
    return element


def _input_block(
    block_id: str, label: str, element: Block, *, optional: bool, hint: str | None = None
) -> Block:
    block: Block = {"block_id": block_id, "element": element}
    if hint:
        block["hint"] = plain(hint)
    block.update(label=plain(label), optional=optional, type="input")
    return block


def answer_input(q: QuestionView, index: int, *, many: bool) -> Block:
    element: Block
    if q.kind == "text":
        element = _text_element(FIELD_ANSWER, plain_line(q.placeholder, 150, "") if q.placeholder else None)
        label = "Your answer"
    elif not q.options:
        raise ValueError(f"question {index} is a choice with no options")
    else:
        options = _choice_options(q)
        label = KIND_WORDS[q.kind]
        listed, select = _CHOICE_ELEMENTS[q.kind]
        if len(options) <= _RADIO_MAX:
            element = {"action_id": FIELD_ANSWER, "options": options, "type": listed}
        else:
            element = {
                "action_id": FIELD_ANSWER,
                "options": options,
                "placeholder": plain(label),
                "type": select,
            }
    if many:
        label = f"{plain_line(q.label, 40, f'Q{index + 1}')} · {label}"
    # Slack cannot say "a choice or custom text": with custom text allowed the choice is optional and the
    # interactions layer checks "at least one" itself (answering with response_action errors).
    optional = not q.required or (q.custom and q.kind != "text")
    hint = "Choose an option, or type your own answer below." if q.custom and q.required else None
    return _input_block(field_block_id(FIELD_ANSWER, index), label, element, optional=optional, hint=hint)


def text_input(field_name: str, index: int | None, label: str, *, optional: bool) -> Block:
    return _input_block(
        field_block_id(field_name, index), label, _text_element(field_name), optional=optional
    )
