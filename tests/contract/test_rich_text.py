"""format_rich_answers: the model-facing text of a rich form result, line kind by line kind."""

from __future__ import annotations

from typing import Any

import pytest

from contract import (
    CANCELLED_FORM_TEXT,
    ContractError,
    NormalizedQuestion,
    RichAnswer,
    RichFormResult,
    build_rich_answer,
    format_rich_answers,
    normalize_rich_form,
)


def _question(**fields: Any) -> NormalizedQuestion:
    """One normalized question built through the normalizer."""
    return normalize_rich_form({"questions": [{"id": "q", "prompt": "P?", **fields}]}).questions[0]


def _text(question: NormalizedQuestion, answer: RichAnswer | None = None, **result: Any) -> str:
    answers = [answer] if answer is not None else []
    return format_rich_answers(RichFormResult(questions=[question], answers=answers, **result))


TARGET = _question(
    id="target",
    prompt="Where should we deploy?",
    allowOther=False,
    options=[
        {"label": "Production", "value": "prod"},
        {"label": "Staging", "value": "stage", "recommended": True},
    ],
)


def test_seed_example_excerpt() -> None:
    """The seed document's example excerpt comes out exactly."""
    answer = build_rich_answer(TARGET, selected=[1], option_notes={1: "After smoke tests"})

    assert _text(TARGET, answer) == (
        "Question 1 (target)\n"
        "Type: radio\n"
        "Q: Where should we deploy?\n"
        "Presented options:\n"
        "  1. Production\n"
        "     Value: prod\n"
        "     Selected: no\n"
        "     Recommended: no\n"
        "  2. Staging\n"
        "     Value: stage\n"
        "     Selected: yes\n"
        "     Recommended: yes\n"
        "     User note: After smoke tests\n"
        "Selected answer:\n"
        "  - Label: Staging\n"
        "    Value: stage\n"
        "    User note: After smoke tests"
    )


class TestHeaderAndFooter:
    def test_title_and_description_form_a_first_block(self) -> None:
        """`Form:` and `Context:` open the text, a blank line before the first question."""
        text = _text(TARGET, title="Deploy", description="Release 1.2")

        assert text.startswith("Form: Deploy\nContext: Release 1.2\n\nQuestion 1 (target)\n")

    def test_title_alone(self) -> None:
        """Each header line appears only when present."""
        assert _text(TARGET, title="Deploy").startswith("Form: Deploy\n\nQuestion 1")

    def test_description_alone(self) -> None:
        """A description without a title still gets its line."""
        assert _text(TARGET, description="Why").startswith("Context: Why\n\nQuestion 1")

    def test_no_header_starts_with_the_first_question(self) -> None:
        """Without title and description the text starts with the first question."""
        assert _text(TARGET).startswith("Question 1 (target)\n")

    def test_blank_header_values_are_absent(self) -> None:
        """Whitespace-only title and description print nothing."""
        assert _text(TARGET, title=" ", description="\u3000").startswith("Question 1")

    def test_additional_notes_close_the_text(self) -> None:
        """Review-screen notes form the last block, with no trailing newline."""
        text = _text(TARGET, additional_text="Ship on Monday")

        assert text.endswith("  (none)\n\nAdditional notes: Ship on Monday")

    def test_blank_additional_notes_are_absent(self) -> None:
        """Blank additional text prints nothing."""
        assert "Additional notes" not in _text(TARGET, additional_text="  ")

    def test_questions_are_numbered_and_separated_by_blank_lines(self) -> None:
        """Each question is a block numbered from 1."""
        other = _question(id="why", prompt="Why?")
        text = format_rich_answers(RichFormResult(questions=[TARGET, other], answers=[]))

        assert "  (none)\n\nQuestion 2 (why)\nType: text\nQ: Why?\nAnswer: (empty)" in text


class TestQuestionLines:
    @pytest.mark.parametrize(
        ("field", "name"),
        [
            ("body", "Details"),
            ("context", "Context"),
            ("recommendation", "Recommendation"),
            ("caveats", "Caveats"),
        ],
    )
    def test_each_authoring_text_has_its_line_after_the_prompt(self, field: str, name: str) -> None:
        """Details, Context, Recommendation and Caveats follow `Q:` when present."""
        text = _text(_question(**{field: "value"}))

        assert "Q: P?\n" + f"{name}: value\n" in text

    def test_authoring_texts_keep_their_order(self) -> None:
        """The four lines come in the order Details, Context, Recommendation, Caveats."""
        text = _text(_question(body="b", context="c", recommendation="r", caveats="k"))

        assert "Q: P?\nDetails: b\nContext: c\nRecommendation: r\nCaveats: k\nAnswer: (empty)" in text

    def test_absent_authoring_texts_print_nothing(self) -> None:
        """A bare text question is four lines."""
        assert _text(_question()) == "Question 1 (q)\nType: text\nQ: P?\nAnswer: (empty)"


class TestOptionLines:
    def test_every_optional_option_line_in_order(self) -> None:
        """Description, Details and Presenter note sit between Value and Selected; User note comes last."""
        question = _question(
            allowOther=False,
            options=[{"label": "A", "value": "a", "description": "desc", "details": "det", "note": "pn"}],
        )
        answer = build_rich_answer(question, selected=[], option_notes={0: "un"})

        assert _text(question, answer).split("Presented options:\n")[1] == (
            "  1. A\n"
            "     Value: a\n"
            "     Description: desc\n"
            "     Details: det\n"
            "     Presenter note: pn\n"
            "     Selected: no\n"
            "     Recommended: no\n"
            "     User note: un\n"
            "Selected answer:\n"
            "  (none)"
        )

    def test_other_entry_is_numbered_after_the_options(self) -> None:
        """With allowOther the custom entry is number n+1 and says whether it was chosen."""
        question = _question(options=["A", "B"])

        assert "  3. Other / custom answer\n     Selected: no\nSelected answer:" in _text(question)

    def test_other_entry_shows_the_custom_value(self) -> None:
        """A custom answer marks the entry selected and shows its value."""
        question = _question(options=["A"])
        answer = build_rich_answer(question, custom="Mine")

        assert "  2. Other / custom answer\n     Selected: yes\n     Custom value: Mine\n" in _text(
            question, answer
        )

    def test_no_other_entry_without_allow_other(self) -> None:
        """allowOther false prints no custom entry."""
        assert "Other / custom answer" not in _text(_question(options=["A"], allowOther=False))


class TestSelectedAnswer:
    def test_nothing_selected_prints_none(self) -> None:
        """An empty selection prints `(none)`."""
        assert _text(TARGET).endswith("Selected answer:\n  (none)")

    def test_checkbox_selection_then_custom(self) -> None:
        """Checkbox picks are listed in option order, then the custom answer."""
        question = _question(
            type="checkbox", options=[{"label": "A", "value": "a"}, {"label": "B", "value": "b"}]
        )
        answer = build_rich_answer(question, selected=[1, 0], custom="C", option_notes={1: "why B"})

        assert _text(question, answer).split("Selected answer:\n")[1] == (
            "  - Label: A\n"
            "    Value: a\n"
            "  - Label: B\n"
            "    Value: b\n"
            "    User note: why B\n"
            "  - Label: Other / custom answer\n"
            "    Value: C"
        )

    def test_radio_custom_answer(self) -> None:
        """A radio custom answer lists only the custom entry."""
        question = _question(options=["A"])
        answer = build_rich_answer(question, custom="Mine")

        assert _text(question, answer).endswith(
            "Selected answer:\n  - Label: Other / custom answer\n    Value: Mine"
        )

    def test_answers_are_matched_to_questions_by_id(self) -> None:
        """An answer for another id does not answer this question."""
        answer = RichAnswer(
            id="other", type="radio", value="prod", was_custom=False, selected_option_indexes=[0]
        )

        assert _text(TARGET, answer).endswith("  (none)")

    def test_out_of_range_indexes_are_ignored(self) -> None:
        """Indexes that point at no option select nothing."""
        answer = RichAnswer(
            id="target", type="radio", value="x", was_custom=False, selected_option_indexes=[5, -1]
        )

        assert _text(TARGET, answer).endswith("  (none)")


class TestTextAnswers:
    def test_text_answer(self) -> None:
        """A text question prints its answer on the `Answer:` line."""
        question = _question()

        assert _text(question, build_rich_answer(question, text="Because")).endswith("\nAnswer: Because")

    @pytest.mark.parametrize("text", [None, "", " \n\t"])
    def test_blank_optional_text_is_marked_empty(self, text: str | None) -> None:
        """An unanswered or blank text answer prints `(empty)`."""
        question = _question(required=False)

        assert _text(question, build_rich_answer(question, text=text)).endswith("\nAnswer: (empty)")

    def test_text_questions_print_no_option_sections(self) -> None:
        """No `Presented options:` or `Selected answer:` for text questions."""
        text = _text(_question())

        assert "Presented options" not in text
        assert "Selected answer" not in text


class TestMultilineValues:
    def test_top_level_field_continues_two_spaces_in(self) -> None:
        """A field at column 0 continues at two spaces; blank inner lines keep their indentation."""
        text = _text(_question(prompt="Line one\nLine two\r\n\r\nLine four"))

        assert "\nQ: Line one\n  Line two\n  \n  Line four\n" in text

    def test_option_field_continues_two_spaces_deeper(self) -> None:
        """A field at column 5 continues at column 7."""
        question = _question(allowOther=False, options=[{"label": "A", "description": "d1\nd2"}])

        assert "     Description: d1\n       d2\n" in _text(question)

    def test_option_label_continues_two_spaces_deeper(self) -> None:
        """An option label line at column 2 continues at column 4."""
        question = _question(allowOther=False, options=[{"label": "A\nsecond"}])

        assert "  1. A\n    second\n     Value: A\n" in _text(question)

    def test_selected_answer_values_continue_two_spaces_deeper(self) -> None:
        """Selected-answer fields at column 4 continue at column 6."""
        question = _question(type="checkbox", options=["A"])
        answer = build_rich_answer(question, custom="c1\nc2", selected=[0], option_notes={0: "n1\nn2"})
        text = _text(question, answer)

        assert "     Custom value: c1\n       c2\n" in text
        assert "     User note: n1\n       n2\n" in text
        assert "    User note: n1\n      n2\n" in text
        assert text.endswith("    Value: c1\n      c2")

    def test_text_answer_and_notes_continue_two_spaces_in(self) -> None:
        """Answer and Additional notes lines continue at two spaces."""
        question = _question()
        answer = build_rich_answer(question, text="a\nb")

        assert _text(question, answer, additional_text="x\ny").endswith(
            "Answer: a\n  b\n\nAdditional notes: x\n  y"
        )

    def test_no_line_inside_a_block_is_blank(self) -> None:
        """Blank lines only separate blocks, so a multiline value never ends a block early."""
        question = _question(body="a\n\n\nb")
        text = _text(question, build_rich_answer(question, text="\n\nx"), title="T")

        assert len(text.split("\n\n")) == 2


class TestCancelled:
    def test_cancelled_result_is_one_line(self) -> None:
        """A cancelled form prints only the cancellation line, whatever it holds."""
        answer = build_rich_answer(TARGET, selected=[0])
        result = RichFormResult(title="T", questions=[TARGET], answers=[answer], cancelled=True)

        assert format_rich_answers(result) == "The user cancelled the form; no answers were submitted."
        assert CANCELLED_FORM_TEXT == "The user cancelled the form; no answers were submitted."

    def test_minimal_cancelled_shape(self) -> None:
        """The minimal error shape `{"cancelled": true}` is a cancelled form too."""
        assert format_rich_answers({"cancelled": True}) == CANCELLED_FORM_TEXT

    def test_wire_dicts_are_accepted(self) -> None:
        """A result's wire dict formats like the model."""
        result = RichFormResult(
            questions=[TARGET], answers=[build_rich_answer(TARGET, selected=[0])], title="T"
        )

        assert format_rich_answers(result.to_wire()) == format_rich_answers(result)

    def test_malformed_dicts_raise_contract_error(self) -> None:
        """A dict that is not a result is refused with ContractError, not a pydantic error."""
        with pytest.raises(ContractError, match="not a rich form result"):
            format_rich_answers({"questions": "nope"})
