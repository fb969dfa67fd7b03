"""Pure: Slack interaction payloads in, typed actions and contract answers out.

Payloads are parsed into small pydantic models at the edge (unknown fields ignored, as Slack adds
fields over time); everything after that works on typed values. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot.ids import (
    FIELD_ADDITIONAL,
    FIELD_ANSWER,
    FIELD_CUSTOM,
    FIELD_NOTE,
    FIELD_REASON,
    AskRef,
    FormMeta,
    parse_field_block_id,
)
from bot.model import AskRecord
from contract import QuestionAnswer, RichAnswer, RichFormResult, build_rich_answer
from contract._js import js_trim

__all__ = [
    "BlockAction",
    "FormAnswers",
    "FormErrors",
    "SlackUser",
    "StateValue",
    "ViewSubmission",
    "parse_block_action",
    "parse_view_submission",
    "read_form",
    "read_other_text",
    "read_reason",
]


class _P(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class SlackUser(_P):
    id: str
    username: str | None = None
    name: str | None = None

    @property
    def display(self) -> str:
        return self.username or self.name or self.id


class _Option(_P):
    value: str


class StateValue(_P):
    """One element's state in ``state.values[block_id][action_id]``."""

    type: str
    value: str | None = None
    selected_option: _Option | None = None
    selected_options: list[_Option] | None = None


class _Action(_P):
    action_id: str
    block_id: str | None = None
    value: str | None = None


class _Container(_P):
    type: str
    channel_id: str | None = None
    message_ts: str | None = None
    view_id: str | None = None


class _Channel(_P):
    id: str


class _ActedView(_P):
    type: str = ""
    hash: str | None = None
    private_metadata: str = ""


class _BlockActionBody(_P):
    type: str
    user: SlackUser
    actions: list[_Action] = Field(min_length=1)
    trigger_id: str | None = None
    response_url: str | None = None
    container: _Container | None = None
    channel: _Channel | None = None
    view: _ActedView | None = None


class _State(_P):
    values: dict[str, dict[str, StateValue]] = Field(default_factory=dict)


class _Block(_P):
    type: str = ""
    block_id: str | None = None


class _View(_P):
    id: str
    callback_id: str = ""
    private_metadata: str = ""
    state: _State = Field(default_factory=_State)
    blocks: list[_Block] = Field(default_factory=list)


class _ViewBody(_P):
    type: str
    user: SlackUser
    view: _View


@dataclass(frozen=True, slots=True)
class BlockAction:
    """A click on one of the bot's buttons in a message."""

    user: SlackUser
    action_id: str
    ref: AskRef | None
    channel: str | None
    message_ts: str | None
    trigger_id: str | None
    response_url: str | None = None
    """Where a private answer to this click goes without Redis or a token (30 minutes, 5 uses)."""
    home: bool = False
    """Clicked on the person's Home tab (docs/home.md), not on a message: ``via: home``."""
    view_hash: str | None = None
    """The Home view's hash as the person saw it (``views.publish`` refuses it once stale)."""
    value: str | None = None
    """The element's raw value (the page a Next / Previous button goes to)."""

    @property
    def option(self) -> int | None:
        """The option index of a one-click button (``ACTION_CHOOSE:<i>``)."""
        return self.ref.option if self.ref is not None else None


@dataclass(frozen=True, slots=True)
class ViewSubmission:
    user: SlackUser
    callback_id: str
    view_id: str
    meta: FormMeta | None
    values: dict[str, dict[str, StateValue]]
    inputs: tuple[str, ...] = ()
    """The block_ids of the view's input blocks, in order: where ``response_action: errors`` can speak."""


def parse_block_action(body: Mapping[str, Any]) -> BlockAction | None:
    """The first action of a ``block_actions`` payload, or None when the payload is not one of ours."""
    try:
        parsed = _BlockActionBody.model_validate(body)
    except ValidationError:
        return None
    action = parsed.actions[0]
    container = parsed.container
    channel = (container.channel_id if container else None) or (parsed.channel.id if parsed.channel else None)
    home = container is not None and container.type == "view" and parsed.view is not None
    home = home and parsed.view is not None and parsed.view.type == "home"
    return BlockAction(
        user=parsed.user,
        action_id=action.action_id,
        ref=AskRef.decode(action.value) if action.value else None,
        channel=channel,
        message_ts=container.message_ts if container else None,
        trigger_id=parsed.trigger_id,
        response_url=parsed.response_url,
        home=home,
        view_hash=parsed.view.hash if home and parsed.view is not None else None,
        value=action.value,
    )


def parse_view_submission(body: Mapping[str, Any]) -> ViewSubmission | None:
    try:
        parsed = _ViewBody.model_validate(body)
    except ValidationError:
        return None
    view = parsed.view
    return ViewSubmission(
        user=parsed.user,
        callback_id=view.callback_id,
        view_id=view.id,
        meta=FormMeta.decode(view.private_metadata) if view.private_metadata else None,
        values=view.state.values,
        inputs=tuple(b.block_id for b in view.blocks if b.type == "input" and b.block_id),
    )


@dataclass(frozen=True, slots=True)
class FormAnswers:
    """A valid submission: pi-question answers, or a rich form result."""

    answers: list[QuestionAnswer] = field(default_factory=list)
    rich: RichFormResult | None = None


@dataclass(frozen=True, slots=True)
class FormErrors:
    """Errors to show next to fields (``response_action: errors``): block_id -> message."""

    errors: dict[str, str]


@dataclass(slots=True)
class _Fields:
    choice: list[int] | None = None
    custom: str | None = None
    note: str | None = None
    text: str | None = None
    bad_choice: bool = False


def _blank(text: str | None) -> bool:
    return text is None or js_trim(text) == ""


def _collect(values: Mapping[str, Mapping[str, StateValue]], count: int) -> tuple[list[_Fields], str | None]:
    fields = [_Fields() for _ in range(count)]
    additional: str | None = None
    for block_id, actions in values.items():
        parsed = parse_field_block_id(block_id)
        if parsed is None:
            continue
        name, index = parsed
        for value in actions.values():
            if name == FIELD_ADDITIONAL:
                additional = value.value
                continue
            if index is None or not 0 <= index < count:
                continue
            slot = fields[index]
            if name == FIELD_ANSWER:
                if value.type == "plain_text_input":
                    slot.text = value.value
                    continue
                options = (
                    value.selected_options
                    if value.selected_options is not None
                    else ([value.selected_option] if value.selected_option is not None else [])
                )
                picked: list[int] = []
                for option in options:
                    if not option.value.isdigit():
                        slot.bad_choice = True
                        continue
                    picked.append(int(option.value))
                slot.choice = picked
            elif name == FIELD_CUSTOM:
                slot.custom = value.value
            elif name == FIELD_NOTE:
                slot.note = value.value
    return fields, additional


def read_form(ask: AskRecord, values: Mapping[str, Mapping[str, StateValue]]) -> FormAnswers | FormErrors:
    """Turn a submitted form modal into answers, or field errors to show beside the inputs."""
    if ask.request is not None:
        return _read_pi(ask, values)
    return _read_rich(ask, values)


def _read_pi(ask: AskRecord, values: Mapping[str, Mapping[str, StateValue]]) -> FormAnswers | FormErrors:
    assert ask.request is not None
    questions = ask.request.questions
    fields, _ = _collect(values, len(questions))
    errors: dict[str, str] = {}
    answers: list[QuestionAnswer] = []
    for i, (question, got) in enumerate(zip(questions, fields, strict=True)):
        choice = got.choice or []
        if got.bad_choice or any(not 0 <= c < len(question.options) for c in choice):
            errors[f"{FIELD_ANSWER}:{i}"] = "That option is not part of this question. Pick again."
            continue
        if not question.multi and len(choice) > 1:
            errors[f"{FIELD_ANSWER}:{i}"] = "Pick one option."
            continue
        custom = got.custom if question.custom_allowed and not _blank(got.custom) else None
        if not choice and custom is None:
            block = f"{FIELD_ANSWER}:{i}"
            errors[block] = (
                "Pick an option or type your own answer below."
                if question.custom_allowed
                else "Pick an option."
            )
            continue
        answers.append(
            QuestionAnswer(
                id=question.id,
                status="answered",
                selected=choice,
                custom_text=custom,
                note=None if _blank(got.note) else got.note,
            )
        )
    return FormErrors(errors) if errors else FormAnswers(answers=answers)


def _read_rich(ask: AskRecord, values: Mapping[str, Mapping[str, StateValue]]) -> FormAnswers | FormErrors:
    assert ask.form is not None
    form = ask.form
    fields, additional = _collect(values, len(form.questions))
    errors: dict[str, str] = {}
    answers: list[RichAnswer] = []
    stray_notes: list[str] = []
    for i, (question, got) in enumerate(zip(form.questions, fields, strict=True)):
        block = f"{FIELD_ANSWER}:{i}"
        if question.type == "text":
            if question.required and _blank(got.text):
                errors[block] = "This question needs an answer."
                continue
            answers.append(
                build_rich_answer(question, selected=[], custom=None, text=got.text or "", option_notes={})
            )
            continue
        choice = got.choice or []
        if got.bad_choice or any(not 0 <= c < len(question.options) for c in choice):
            errors[block] = "That option is not part of this question. Pick again."
            continue
        if question.type == "radio" and len(choice) > 1:
            errors[block] = "Pick one option."
            continue
        custom = got.custom if question.allow_other and not _blank(got.custom) else None
        if question.type == "radio" and choice and custom is not None:
            errors[f"{FIELD_CUSTOM}:{i}"] = "Pick an option or type your own answer, not both."
            continue
        if question.required and not choice and custom is None:
            errors[block] = (
                "Pick an option or type your own answer below." if question.allow_other else "Pick an option."
            )
            continue
        notes: dict[int, str] = {}
        if not _blank(got.note):
            assert got.note is not None
            if choice:
                # One note field per question: it belongs to the first chosen option (see docs/forms.md).
                notes[min(choice)] = got.note
            else:
                stray_notes.append(f"{question.label} note: {got.note}")
        answers.append(
            build_rich_answer(question, selected=choice, custom=custom, text=None, option_notes=notes)
        )
    if errors:
        return FormErrors(errors)
    notes_given = [additional] if additional is not None and not _blank(additional) else []
    extra = "\n".join([*notes_given, *stray_notes]) or None
    result = RichFormResult(
        title=form.title,
        description=form.description,
        questions=form.questions,
        answers=answers,
        additional_text=extra,
        cancelled=False,
    )
    return FormAnswers(rich=result)


def read_other_text(
    ask: AskRecord, question: int, values: Mapping[str, Mapping[str, StateValue]]
) -> QuestionAnswer | FormErrors:
    """The one-question "Other..." modal: custom text (required) and an optional note."""
    assert ask.request is not None
    fields, _ = _collect(values, len(ask.request.questions))
    if not 0 <= question < len(fields):
        return FormErrors({f"{FIELD_CUSTOM}:0": "This form no longer matches its question."})
    got = fields[question]
    if _blank(got.custom):
        return FormErrors({f"{FIELD_CUSTOM}:{question}": "Type your answer, or close this window."})
    return QuestionAnswer(
        id=ask.request.questions[question].id,
        status="answered",
        selected=[],
        custom_text=got.custom,
        note=None if _blank(got.note) else got.note,
    )


def read_reason(values: Mapping[str, Mapping[str, StateValue]]) -> str | None:
    """The Decline modal's optional reason, as typed (None when left empty or blank)."""
    for action in values.get(FIELD_REASON, {}).values():
        if not _blank(action.value):
            return action.value
    return None
