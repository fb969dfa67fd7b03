"""Property: a reply typed in an ask's thread is read either exactly as a click (or the form) on the
same options would answer, or as needing confirmation; never as a different answer applied at once.

The "click" is the real form reader (``read_form``) fed the state Slack sends for those options, so
"exactly as a click" means the same ``QuestionAnswer`` objects the form path resolves with.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.model import AskRecord
from bot.render.replies import render_reading
from bot.slack.blockkit import validate_message
from bot.slack.interactions import FormAnswers, StateValue, read_form
from bot.slack.replies import Pending, Reading, Words, normalize, read_reply
from contract import QuestionAnswer, normalize_ask_request
from contract.question import AskRequest

LABEL = st.text(
    alphabet=st.characters(codec="utf-8", categories=("L", "N", "P", "Zs")), min_size=1, max_size=24
).filter(lambda s: s.strip() != "")
WORDS = Words()


@st.composite
def asks(draw: st.DrawFn) -> AskRequest:
    count = draw(st.integers(1, 3))
    questions: list[dict[str, Any]] = []
    for i in range(count):
        labels = draw(st.lists(LABEL, min_size=1, max_size=6, unique_by=lambda s: s.strip()))
        questions.append(
            {
                "id": f"q{i}",
                "question": f"Question {i}?",
                "options": labels,
                "multi": draw(st.booleans()),
                "allowCustom": draw(st.booleans()),
            }
        )
    return normalize_ask_request({"questions": questions})


def _record(request: AskRequest) -> AskRecord:
    return AskRecord(ask_id="a", tag="t", reply_to="r", created_ms=0, request=request)


def clicked(request: AskRequest, chosen: list[list[int]], notes: list[str | None]) -> list[QuestionAnswer]:
    """What the form gives for ``chosen`` options (and notes) of every question."""
    values: dict[str, dict[str, StateValue]] = {}
    for i, (question, picked) in enumerate(zip(request.questions, chosen, strict=True)):
        options = [{"value": str(p)} for p in picked]
        if question.multi:
            values[f"answer:{i}"] = {
                "answer": StateValue.model_validate({"type": "checkboxes", "selected_options": options})
            }
        else:
            values[f"answer:{i}"] = {
                "answer": StateValue.model_validate({"type": "radio_buttons", "selected_option": options[0]})
            }
        if notes[i] is not None:
            values[f"note:{i}"] = {"note": StateValue(type="plain_text_input", value=notes[i])}
    parsed = read_form(_record(request), values)
    assert isinstance(parsed, FormAnswers)
    return parsed.answers


NOTE = st.none() | st.text(
    alphabet=st.characters(categories=("L", "N", "Zs")), min_size=1, max_size=20
).filter(lambda s: s.strip() != "").map(str.strip)


@st.composite
def replies(draw: st.DrawFn) -> tuple[AskRequest, list[list[int]], list[str | None], str, bool]:
    """An ask, the options a person means, and a reply naming them by number or label."""
    request = draw(asks())
    chosen: list[list[int]] = []
    notes: list[str | None] = []
    lines: list[str] = []
    several = len(request.questions) > 1
    numbers_only = True
    for i, question in enumerate(request.questions):
        count = len(question.options)
        if question.multi:
            picked = sorted(draw(st.sets(st.integers(0, count - 1), min_size=1, max_size=count)))
        else:
            picked = [draw(st.integers(0, count - 1))]
        by_label = draw(st.booleans())
        numbers_only = numbers_only and not by_label
        names = [question.options[p].label if by_label else str(p + 1) for p in picked]
        if by_label:
            names = [draw(st.sampled_from([n, n.upper(), n.lower(), f"“{n}”", f"{n}!"])) for n in names]
        answer = ", ".join(names)
        note = draw(NOTE)
        if note is not None:
            # A note ends up in the answer only when the reply said it: on its own line (one
            # question) or after " - " (one line per question).
            answer = f"{answer} - {note}"
        chosen.append(picked)
        notes.append(note)
        key = draw(st.sampled_from([question.id, str(i + 1)]))
        lines.append(f"{key}: {answer}" if several else answer)
    return request, chosen, notes, "\n".join(lines), numbers_only


def _same_or_not_applied(reading: Reading, expected: list[QuestionAnswer], *, numbers: bool) -> None:
    """Exact and equal to the click, or not applied at once (``confirm``, or ``unreadable``, which
    changes nothing either); option numbers are always understood."""
    if numbers:
        assert reading.kind in ("exact", "confirm"), reading
    if reading.kind == "exact":
        assert list(reading.answers) == expected, (reading, expected)
        assert not reading.declined


@settings(max_examples=400, deadline=None)
@given(replies())
def test_a_reply_naming_options_reads_as_their_click_or_asks_for_confirmation(
    case: tuple[AskRequest, list[list[int]], list[str | None], str, bool],
) -> None:
    request, chosen, notes, text, numbers = case
    reading = read_reply(text, request.questions, words=WORDS)
    expected = clicked(request, chosen, notes)
    _same_or_not_applied(reading, expected, numbers=numbers)


@settings(max_examples=400, deadline=None)
@given(asks(), st.text(max_size=60))
def test_any_text_read_exactly_is_a_valid_click_and_reads_the_same_by_numbers(
    request: AskRequest, text: str
) -> None:
    """Whatever is typed: an exact reading is one the buttons and the form could give (options in
    range, one for a single-choice question, no custom text, no Decline), and typing its option numbers
    reads the same answer."""
    reading = read_reply(text, request.questions, words=WORDS)
    if reading.kind != "exact":
        assert reading.kind in ("confirm", "unreadable")
        return
    assert not reading.declined and len(reading.answers) == len(request.questions)
    for question, answer in zip(request.questions, reading.answers, strict=True):
        assert answer.custom_text is None and answer.selected
        assert all(0 <= s < len(question.options) for s in answer.selected)
        assert question.multi or len(answer.selected) == 1
    expected = clicked(request, [a.selected for a in reading.answers], [a.note for a in reading.answers])
    assert list(reading.answers) == expected
    lines = [
        f"{q.id}: " + " ".join(str(s + 1) for s in a.selected)
        for q, a in zip(request.questions, reading.answers, strict=True)
    ]
    again = read_reply("\n".join(lines), request.questions, words=WORDS) if len(lines) > 1 else None
    if again is not None and again.kind == "exact":
        assert [a.selected for a in again.answers] == [a.selected for a in reading.answers]


def test_keywords_prefixes_and_custom_text_always_need_confirmation() -> None:
    request = normalize_ask_request(
        {"questions": [{"id": "deploy", "question": "Deploy?", "options": ["Yes, deploy", "Not now"]}]}
    )
    for text in ("lgtm", "approve - after the smoke tests", "Not n", "ship it tomorrow", "deny: flaky"):
        reading = read_reply(text, request.questions, words=WORDS)
        assert reading.kind == "confirm", (text, reading)
    assert normalize("  “Yes,  Deploy!” ") == "yes, deploy"


def test_a_label_that_is_also_an_option_with_a_note_needs_confirmation() -> None:
    request = normalize_ask_request({"questions": [{"id": "x", "question": "X?", "options": ["a", "a - b"]}]})
    assert read_reply("a - b", request.questions, words=WORDS).kind == "confirm"
    assert read_reply("2", request.questions, words=WORDS).kind == "exact"


def test_a_list_split_at_commas_needs_confirmation_when_a_comma_can_be_a_label() -> None:
    # Found by the property above: "q2: ,, 2, 0" meant ",", "2" and "0", and was read exactly as "2"
    # and "0" alone (the option "," was the separator). Split at commas, it is a reading to confirm.
    request = normalize_ask_request(
        {
            "questions": [
                {"id": "q1", "question": "?", "options": ["a", "b"], "multi": True},
                {"id": "q2", "question": "?", "options": [",", "2", "0"], "multi": True},
            ]
        }
    )
    reading = read_reply("q1: a, b\nq2: ,, 2, 0", request.questions, words=WORDS)
    assert reading.kind == "confirm", reading
    plain = read_reply("q1: a, b\nq2: 2", request.questions, words=WORDS)  # no comma in q1's labels
    assert plain.kind == "exact" and [a.selected for a in plain.answers] == [[0, 1], [1]]
    assert read_reply("q1: a, , b\nq2: 2", request.questions, words=WORDS).kind == "confirm"


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 8), st.integers(1, 12), st.integers(1, 3000), st.text(min_size=1, max_size=3000))
def test_the_private_reading_fits_slacks_limits_however_long_the_ask(
    count: int, options: int, length: int, custom: str
) -> None:
    """Every question read by prefix (so the reading needs confirming), labels of any length: the
    private message with Confirm / Change still passes Block Kit's checks, or offers the form instead."""
    request = normalize_ask_request(
        {
            "questions": [
                {
                    "id": f"q{i}",
                    "question": "?",
                    "options": [f"opt{j}" + "x" * length for j in range(options)],
                }
                for i in range(count)
            ]
        }
    )
    text = "\n".join(f"q{i}: opt0" + ("x" if options > 1 else "") for i in range(count))
    reading = read_reply(text if count > 1 else custom, request.questions, words=WORDS)
    if reading.kind != "confirm":
        return
    pending = Pending(
        "tag", "ask", "C1", "1.2", answers=reading.answers, declined=reading.declined, reason=reading.reason
    )
    shown = render_reading(request.questions, reading, pending)
    assert validate_message({"text": shown.text, "blocks": shown.blocks}) == []
    assert "<" not in shown.text
