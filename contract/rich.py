"""The result contract: rich forms (radio, checkbox, text questions) and their result.

``normalize_rich_form`` turns an agent's form into a :class:`RichForm`;
``build_rich_answer`` turns what a human chose into a :class:`RichAnswer`; and
``format_rich_answers`` writes the self-contained model-facing text of spec/contract.md
section 3. No upstream code exists for this contract: the seed and the spec are the authority.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal, TypeGuard

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from contract._js import cut_utf16, is_blank
from contract.errors import ContractError
from contract.normalize import first_text, is_array, optional_text, trimmed_text
from contract.question import LIMITS

__all__ = [
    "CANCELLED_FORM_TEXT",
    "OTHER_ANSWER_LABEL",
    "NormalizedQuestion",
    "OptionNote",
    "QuestionType",
    "RichAnswer",
    "RichForm",
    "RichFormResult",
    "RichOption",
    "build_rich_answer",
    "format_rich_answers",
    "normalize_rich_form",
]

QuestionType = Literal["radio", "checkbox", "text"]

CANCELLED_FORM_TEXT: Final = "The user cancelled the form; no answers were submitted."
OTHER_ANSWER_LABEL: Final = "Other / custom answer"

_QUESTION_TYPES: Final[dict[str, QuestionType]] = {"radio": "radio", "checkbox": "checkbox", "text": "text"}
_NEWLINE_RE = re.compile(r"\r\n|\r|\n")


class _Wire(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        extra="forbid",
        use_attribute_docstrings=True,
    )

    def to_wire(self) -> dict[str, Any]:
        """JSON-ready dict with the seed's camelCase names; unset optional keys omitted."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class RichOption(_Wire):
    """A predefined choice of a radio or checkbox question."""

    label: str
    value: str
    """Stable value; the label when the author gave none."""
    description: str | None = None
    details: str | None = None
    note: str | None = None
    """Presenter-authored note (shown as ``Presenter note``), not the user's."""
    recommended: bool = False


class NormalizedQuestion(_Wire):
    """A question with every default filled in."""

    id: str
    type: QuestionType
    prompt: str
    label: str
    """Short name; ``Q<n>`` when the author gave none."""
    body: str | None = None
    context: str | None = None
    recommendation: str | None = None
    caveats: str | None = None
    options: list[RichOption] = Field(default_factory=list, max_length=LIMITS.max_options)
    """1-12 options for radio and checkbox questions; none for text questions."""
    allow_other: bool = False
    """Whether an ``Other / custom answer`` entry is offered (radio and checkbox)."""
    required: bool = True
    placeholder: str | None = None


class RichForm(_Wire):
    """A normalized rich form: 1-8 questions with unique ids."""

    title: str | None = None
    description: str | None = None
    questions: list[NormalizedQuestion] = Field(min_length=1, max_length=LIMITS.max_questions)


class OptionNote(_Wire):
    """A user's non-empty response note on one predefined option."""

    option_index: int
    """Zero-based index into the question's ``options``."""
    value: str
    label: str
    note: str


class RichAnswer(_Wire):
    """The answer to one question."""

    id: str
    type: QuestionType
    value: str | list[str]
    """A string for radio and text, the selected values (then the custom value) for checkbox."""
    was_custom: bool
    """True for a custom answer, and always for text questions."""
    selected_option_indexes: list[int] | None = None
    """Zero-based indexes into ``options``, in option order."""
    custom_value: str | None = None
    option_notes: list[OptionNote] | None = None


class RichFormResult(_Wire):
    """A completed (or cancelled) form: the questions as shown and one answer per question."""

    title: str | None = None
    description: str | None = None
    questions: list[NormalizedQuestion]
    answers: list[RichAnswer]
    additional_text: str | None = None
    """Notes the user added on the review screen."""
    cancelled: bool = False


# --- normalization ---------------------------------------------------------------------------


def normalize_rich_form(raw: object) -> RichForm:
    """Normalize a rich form: ``{title?, description?, questions: [...]}`` with 1-8 questions.

    Fills the defaults of spec/contract.md section 3 (id ``q<n>``, label ``Q<n>``, type
    ``radio`` with options and ``text`` without, ``allowOther`` true except for text,
    ``required`` true, option value = label) and accepts the aliases ``question`` /
    ``header`` for ``prompt`` and ``details`` for ``body``. Texts are kept when not blank
    and cut to 4000 UTF-16 units; fields of the wrong type are ignored and invalid
    options dropped, as in the question contract. Raises :class:`ContractError`.
    """
    if not isinstance(raw, Mapping):
        raise ContractError("form must be an object")
    entries = raw.get("questions")
    if not is_array(entries) or not entries:
        raise ContractError("questions must not be empty")
    if len(entries) > LIMITS.max_questions:
        raise ContractError(f"at most {LIMITS.max_questions} questions per form")
    seen: set[str] = set()
    questions = [_rich_question(index, entry, seen) for index, entry in enumerate(entries)]
    return RichForm(
        title=optional_text(raw.get("title")),
        description=optional_text(raw.get("description")),
        questions=questions,
    )


def _rich_question(index: int, raw: object, seen: set[str]) -> NormalizedQuestion:
    if not isinstance(raw, Mapping):
        raise ContractError(f"questions[{index}] must be an object")
    prompt = first_text(raw, "prompt", "question", "header")
    if prompt is None:
        raise ContractError(f"questions[{index}].prompt is required")

    declared_options = raw.get("options")
    listed = declared_options if is_array(declared_options) else []
    declared = raw.get("type")
    question_type: QuestionType
    if declared is None:
        question_type = "radio" if listed else "text"
    elif isinstance(declared, str) and declared in _QUESTION_TYPES:
        question_type = _QUESTION_TYPES[declared]
    else:
        raise ContractError(f"questions[{index}].type must be radio, checkbox or text")

    options: list[RichOption] = []
    if question_type != "text":
        options = [option for option in map(_rich_option, listed) if option is not None]
        if len(options) < LIMITS.min_options:
            raise ContractError(f"questions[{index}] needs at least {LIMITS.min_options} option")
        if len(options) > LIMITS.max_options:
            raise ContractError(f"questions[{index}] has more than {LIMITS.max_options} options")

    question_id = trimmed_text(raw.get("id")) or f"q{index + 1}"
    if question_id in seen:
        raise ContractError(f'duplicate question id "{question_id}"')
    seen.add(question_id)

    allow_other = raw.get("allowOther")
    required = raw.get("required")
    return NormalizedQuestion(
        id=question_id,
        type=question_type,
        prompt=prompt,
        label=trimmed_text(raw.get("label")) or f"Q{index + 1}",
        body=first_text(raw, "body", "details"),
        context=optional_text(raw.get("context")),
        recommendation=optional_text(raw.get("recommendation")),
        caveats=optional_text(raw.get("caveats")),
        options=options,
        allow_other=allow_other if isinstance(allow_other, bool) else question_type != "text",
        required=required if isinstance(required, bool) else True,
        placeholder=optional_text(raw.get("placeholder")),
    )


def _rich_option(raw: object) -> RichOption | None:
    if isinstance(raw, str):
        label = trimmed_text(raw)
        return RichOption(label=label, value=label) if label is not None else None
    if not isinstance(raw, Mapping):
        return None
    label = trimmed_text(raw.get("label"))
    if label is None:
        return None
    return RichOption(
        label=label,
        value=trimmed_text(raw.get("value")) or label,
        description=optional_text(raw.get("description")),
        details=optional_text(raw.get("details")),
        note=optional_text(raw.get("note")),
        recommended=raw.get("recommended") is True,
    )


# --- answers ---------------------------------------------------------------------------------


def build_rich_answer(
    question: NormalizedQuestion,
    *,
    selected: Iterable[int] = (),
    custom: str | None = None,
    text: str | None = None,
    option_notes: Mapping[int, str] | None = None,
) -> RichAnswer:
    """The answer to ``question`` from what the human chose, by the seed's rules.

    - ``text`` questions: ``value`` is ``text`` (``""`` when none) and ``wasCustom`` is true.
    - ``checkbox``: indexes sorted in option order, ``value`` the selected stable values then
      the custom value.
    - ``radio``: a custom answer makes ``value`` the custom string with no index selected;
      otherwise the first valid selected index.

    Out-of-range indexes are dropped. ``custom`` counts only when not blank and the question
    allows Other. ``option_notes`` keeps the non-blank notes on valid options. Texts are cut
    to 4000 UTF-16 units.
    """
    if question.type == "text":
        answer_text = cut_utf16(text, LIMITS.max_text) if text is not None else ""
        return RichAnswer(id=question.id, type="text", value=answer_text, was_custom=True)

    options = question.options
    chosen = [index for index in selected if 0 <= index < len(options)]
    custom_value = None
    if custom is not None and question.allow_other and not is_blank(custom):
        custom_value = cut_utf16(custom, LIMITS.max_text)
    notes = [
        OptionNote(
            option_index=index,
            value=options[index].value,
            label=options[index].label,
            note=cut_utf16(note, LIMITS.max_text),
        )
        for index, note in sorted((option_notes or {}).items())
        if 0 <= index < len(options) and not is_blank(note)
    ]

    value: str | list[str]
    indexes: list[int]
    if question.type == "checkbox":
        indexes = sorted(set(chosen))
        value = [options[index].value for index in indexes]
        if custom_value is not None:
            value.append(custom_value)
    elif custom_value is not None:
        indexes, value = [], custom_value
    elif chosen:
        indexes, value = [chosen[0]], options[chosen[0]].value
    else:
        indexes, value = [], ""
    return RichAnswer(
        id=question.id,
        type=question.type,
        value=value,
        was_custom=custom_value is not None,
        selected_option_indexes=indexes,
        custom_value=custom_value,
        option_notes=notes or None,
    )


# --- model-facing text -----------------------------------------------------------------------


def format_rich_answers(result: RichFormResult | Mapping[str, Any]) -> str:
    """The self-contained model-facing text of a form result (spec/contract.md section 3).

    Accepts a :class:`RichFormResult`, its wire dict, or the minimal ``{"cancelled": true}``.
    A cancelled form is the single line :data:`CANCELLED_FORM_TEXT`. Blocks are separated by
    one blank line; a multiline value continues two spaces deeper than its field. Answers
    are matched to questions by id. No trailing newline.
    """
    if isinstance(result, Mapping):
        if result.get("cancelled") is True:
            return CANCELLED_FORM_TEXT
        try:
            result = RichFormResult.model_validate(result)
        except ValidationError as exc:
            raise ContractError(
                f"not a rich form result: {exc.errors(include_url=False)[0]['msg']}"
            ) from None
    if result.cancelled:
        return CANCELLED_FORM_TEXT

    blocks: list[list[str]] = []
    header: list[str] = []
    if _present(result.title):
        header += _field(0, "Form", result.title)
    if _present(result.description):
        header += _field(0, "Context", result.description)
    if header:
        blocks.append(header)
    answers: dict[str, RichAnswer] = {}
    for answer in result.answers:
        answers.setdefault(answer.id, answer)
    for number, question in enumerate(result.questions, start=1):
        blocks.append(_question_block(number, question, answers.get(question.id)))
    if _present(result.additional_text):
        blocks.append(_field(0, "Additional notes", result.additional_text))
    return "\n\n".join("\n".join(block) for block in blocks)


def _present(text: str | None) -> TypeGuard[str]:
    return text is not None and not is_blank(text)


def _emit(indent: int, text: str) -> list[str]:
    """``text`` at ``indent``, further lines two spaces deeper and never blank (blank lines end blocks)."""
    first, *rest = _NEWLINE_RE.split(text)
    pad = " " * indent
    return [pad + first] + [f"{pad}  {line}" for line in rest]


def _field(indent: int, name: str, value: str) -> list[str]:
    return _emit(indent, f"{name}: {value}")


def _optional(indent: int, name: str, value: str | None) -> list[str]:
    return _field(indent, name, value) if _present(value) else []


def _yes_no(flag: bool) -> str:
    return "yes" if flag else "no"


def _question_block(number: int, question: NormalizedQuestion, answer: RichAnswer | None) -> list[str]:
    lines = _emit(0, f"Question {number} ({question.id})")
    lines += _field(0, "Type", question.type)
    lines += _field(0, "Q", question.prompt)
    lines += _optional(0, "Details", question.body)
    lines += _optional(0, "Context", question.context)
    lines += _optional(0, "Recommendation", question.recommendation)
    lines += _optional(0, "Caveats", question.caveats)
    if question.type == "text":
        value = answer.value if answer is not None else ""
        text = value if isinstance(value, str) else ", ".join(value)
        return lines + _field(0, "Answer", text if _present(text) else "(empty)")

    options = question.options
    chosen = [i for i in (answer.selected_option_indexes or []) if 0 <= i < len(options)] if answer else []
    custom = answer.custom_value if answer is not None and _present(answer.custom_value) else None
    user_notes = (
        {n.option_index: n.note for n in (answer.option_notes or []) if _present(n.note)} if answer else {}
    )

    lines.append("Presented options:")
    for index, option in enumerate(options):
        lines += _emit(2, f"{index + 1}. {option.label}")
        lines += _field(5, "Value", option.value)
        lines += _optional(5, "Description", option.description)
        lines += _optional(5, "Details", option.details)
        lines += _optional(5, "Presenter note", option.note)
        lines += _field(5, "Selected", _yes_no(index in chosen))
        lines += _field(5, "Recommended", _yes_no(option.recommended))
        lines += _optional(5, "User note", user_notes.get(index))
    if question.allow_other:
        lines.append(f"  {len(options) + 1}. {OTHER_ANSWER_LABEL}")
        lines += _field(5, "Selected", _yes_no(custom is not None))
        lines += _optional(5, "Custom value", custom)

    lines.append("Selected answer:")
    for index in chosen:
        lines += _emit(2, f"- Label: {options[index].label}")
        lines += _field(4, "Value", options[index].value)
        lines += _optional(4, "User note", user_notes.get(index))
    if custom is not None:
        lines.append(f"  - Label: {OTHER_ANSWER_LABEL}")
        lines += _field(4, "Value", custom)
    if not chosen and custom is None:
        lines.append("  (none)")
    return lines
