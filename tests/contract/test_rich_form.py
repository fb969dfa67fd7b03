"""normalize_rich_form and build_rich_answer: the rich form's defaults, aliases, limits and answer rules."""

from __future__ import annotations

from typing import Any

import pytest

from contract import (
    ContractError,
    NormalizedQuestion,
    RichAnswer,
    RichForm,
    build_rich_answer,
    normalize_rich_form,
    to_json,
)


def _form(*questions: Any, **fields: Any) -> RichForm:
    return normalize_rich_form({**fields, "questions": list(questions)})


def _error(raw: object) -> str:
    with pytest.raises(ContractError) as caught:
        normalize_rich_form(raw)
    return str(caught.value)


class TestFormShape:
    @pytest.mark.parametrize("raw", [None, [], "form", 3, True])
    def test_a_form_must_be_an_object(self, raw: object) -> None:
        """Anything but an object is refused."""
        assert _error(raw) == "form must be an object"

    @pytest.mark.parametrize("questions", [None, [], {}, "q", ()])
    def test_questions_must_be_a_non_empty_array(self, questions: object) -> None:
        """A missing, empty or non-array `questions` is refused."""
        assert _error({"questions": questions}) == "questions must not be empty"

    def test_eight_questions_are_the_most(self) -> None:
        """Eight questions pass; nine are refused before any is looked at."""
        assert len(_form(*[{"prompt": "P"}] * 8, title="t").questions) == 8
        assert _error({"questions": [None] * 9}) == "at most 8 questions per form"

    def test_title_and_description_are_kept_untrimmed_and_cut(self) -> None:
        """Form texts follow the 4000-unit limit and keep their spaces."""
        form = _form({"prompt": "P"}, title=" T ", description="d" * 4001)

        assert (form.title, form.description) == (" T ", "d" * 4000)

    @pytest.mark.parametrize("blank", ["", " \u00a0", None, 7])
    def test_blank_or_non_string_title_is_absent(self, blank: object) -> None:
        """Optional texts that are blank or not strings are left out."""
        assert _form({"prompt": "P"}, title=blank).title is None


class TestQuestionDefaults:
    def test_defaults_for_a_question_with_options(self) -> None:
        """id q<n>, label Q<n>, radio, allowOther true, required true, option value = label."""
        form = _form({"prompt": "A"}, {"prompt": "B", "options": ["x", {"label": " y "}]})

        assert form.questions[1].to_wire() == {
            "id": "q2",
            "type": "radio",
            "prompt": "B",
            "label": "Q2",
            "options": [
                {"label": "x", "value": "x", "recommended": False},
                {"label": "y", "value": "y", "recommended": False},
            ],
            "allowOther": True,
            "required": True,
        }

    def test_defaults_for_a_question_without_options(self) -> None:
        """Without options the question is text, with allowOther false and no options."""
        assert _form({"prompt": "Why?"}).questions[0].to_wire() == {
            "id": "q1",
            "type": "text",
            "prompt": "Why?",
            "label": "Q1",
            "options": [],
            "allowOther": False,
            "required": True,
        }

    def test_checkbox_allows_other_by_default(self) -> None:
        """allowOther defaults to true for checkbox questions too."""
        assert _form({"prompt": "P", "type": "checkbox", "options": ["a"]}).questions[0].allow_other is True

    def test_empty_options_array_makes_a_text_question(self) -> None:
        """`options: []` counts as no options."""
        assert _form({"prompt": "P", "options": []}).questions[0].type == "text"

    def test_explicit_values_win_over_defaults(self) -> None:
        """Authored id, label, allowOther and required are kept (ids and labels trimmed)."""
        question = _form(
            {
                "id": " pick ",
                "label": " Pick ",
                "prompt": "P",
                "options": ["a"],
                "allowOther": False,
                "required": False,
            }
        ).questions[0]

        assert (question.id, question.label, question.allow_other, question.required) == (
            "pick",
            "Pick",
            False,
            False,
        )

    @pytest.mark.parametrize("flag", ["false", 0, None])
    def test_non_boolean_flags_fall_back_to_defaults(self, flag: object) -> None:
        """allowOther and required are read only when they are booleans."""
        question = _form({"prompt": "P", "options": ["a"], "allowOther": flag, "required": flag}).questions[0]

        assert (question.allow_other, question.required) == (True, True)

    def test_text_questions_keep_placeholder_and_drop_options(self) -> None:
        """A declared text question ignores any options and keeps its placeholder."""
        question = _form(
            {"prompt": "P", "type": "text", "options": ["a"], "placeholder": "e.g. 42"}
        ).questions[0]

        assert (question.options, question.placeholder) == ([], "e.g. 42")

    def test_authoring_texts_are_kept(self) -> None:
        """body, context, recommendation and caveats are kept as written."""
        question = _form(
            {"prompt": "P", "body": "b\nb", "context": " c ", "recommendation": "r", "caveats": "k"}
        ).questions[0]

        assert (question.body, question.context, question.recommendation, question.caveats) == (
            "b\nb",
            " c ",
            "r",
            "k",
        )


class TestAliases:
    @pytest.mark.parametrize(
        ("fields", "expected"),
        [
            ({"question": "Q"}, "Q"),
            ({"header": "H"}, "H"),
            ({"prompt": " ", "question": "Q", "header": "H"}, "Q"),
            ({"prompt": 1, "question": None, "header": "H"}, "H"),
            ({"prompt": "P", "question": "Q"}, "P"),
        ],
    )
    def test_prompt_aliases_fall_through_in_order(self, fields: dict[str, Any], expected: str) -> None:
        """prompt, then question, then header: the first non-blank string wins."""
        assert _form(fields).questions[0].prompt == expected

    @pytest.mark.parametrize(
        ("fields", "expected"),
        [
            ({"details": "D"}, "D"),
            ({"body": "B", "details": "D"}, "B"),
            ({"body": "\t", "details": "D"}, "D"),
        ],
    )
    def test_details_is_an_alias_of_body(self, fields: dict[str, Any], expected: str) -> None:
        """`details` fills `body` when `body` is missing or blank."""
        assert _form({"prompt": "P", **fields}).questions[0].body == expected


class TestErrors:
    def test_missing_prompt_names_the_question(self) -> None:
        """A question without any prompt alias is refused by index."""
        assert (
            _error({"questions": [{"prompt": "ok"}, {"body": "no prompt"}]})
            == "questions[1].prompt is required"
        )

    @pytest.mark.parametrize("entry", [None, "P?", ["P"], 1])
    def test_entries_must_be_objects(self, entry: object) -> None:
        """Non-object entries are refused by index."""
        assert _error({"questions": [{"prompt": "ok"}, entry]}) == "questions[1] must be an object"

    @pytest.mark.parametrize("kind", ["dropdown", "Radio", "", 1, True, ["radio"]])
    def test_unknown_types_are_refused(self, kind: object) -> None:
        """Only radio, checkbox and text are types."""
        assert _error({"questions": [{"prompt": "P", "type": kind, "options": ["a"]}]}) == (
            "questions[0].type must be radio, checkbox or text"
        )

    @pytest.mark.parametrize("kind", ["radio", "checkbox"])
    def test_choice_questions_need_an_option(self, kind: str) -> None:
        """Radio and checkbox questions need at least one valid option."""
        questions = [{"prompt": "P"}, {"prompt": "P"}, {"prompt": "P", "type": kind, "options": ["", None]}]

        assert _error({"questions": questions}) == "questions[2] needs at least 1 option"

    def test_choice_questions_take_at_most_twelve_options(self) -> None:
        """Thirteen valid options are refused; twelve plus an invalid one pass."""
        assert _error({"questions": [{"prompt": "P", "options": [str(i) for i in range(13)]}]}) == (
            "questions[0] has more than 12 options"
        )
        assert len(_form({"prompt": "P", "options": [*map(str, range(12)), " "]}).questions[0].options) == 12

    def test_duplicate_ids_are_refused(self) -> None:
        """An id repeated after trimming is refused."""
        assert _error({"questions": [{"id": "x", "prompt": "A"}, {"id": " x", "prompt": "B"}]}) == (
            'duplicate question id "x"'
        )

    def test_default_ids_can_collide(self) -> None:
        """A default id collides with an explicit one, as in the question contract."""
        assert (
            _error({"questions": [{"prompt": "A"}, {"id": "q1", "prompt": "B"}]})
            == 'duplicate question id "q1"'
        )


class TestOptions:
    def test_option_fields_are_kept(self) -> None:
        """value, description, details, presenter note and recommended are kept."""
        option = {
            "label": "L",
            "value": " v ",
            "description": "d",
            "details": "x",
            "note": "n",
            "recommended": True,
        }

        assert _form({"prompt": "P", "options": [option]}).questions[0].options[0].to_wire() == {
            "label": "L",
            "value": "v",
            "description": "d",
            "details": "x",
            "note": "n",
            "recommended": True,
        }

    @pytest.mark.parametrize("value", ["", "  ", None, 3])
    def test_blank_or_non_string_value_falls_back_to_the_label(self, value: object) -> None:
        """Only a non-blank string is an authored value."""
        assert (
            _form({"prompt": "P", "options": [{"label": "L", "value": value}]}).questions[0].options[0].value
            == "L"
        )

    @pytest.mark.parametrize("recommended", ["true", 1, None])
    def test_recommended_must_be_true(self, recommended: object) -> None:
        """Only the boolean true marks an option recommended."""
        option = {"label": "L", "recommended": recommended}

        assert _form({"prompt": "P", "options": [option]}).questions[0].options[0].recommended is False

    def test_option_texts_follow_the_limit(self) -> None:
        """Option descriptions are cut to 4000 units; labels are cut then trimmed."""
        option = {"label": "l" * 3999 + " x", "description": "d" * 3999 + "😀"}
        normalized = _form({"prompt": "P", "options": [option]}).questions[0].options[0]

        assert (normalized.label, normalized.description) == ("l" * 3999, "d" * 3999 + "\ud83d")


RADIO = NormalizedQuestion.model_validate(
    {
        "id": "target",
        "type": "radio",
        "prompt": "Where?",
        "label": "Q1",
        "options": [{"label": "Production", "value": "prod"}, {"label": "Staging", "value": "stage"}],
        "allowOther": True,
    }
)
CHECKBOX = RADIO.model_copy(update={"id": "features", "type": "checkbox"})
TEXT = NormalizedQuestion(id="why", type="text", prompt="Why?", label="Q2")


class TestBuildRichAnswer:
    def test_radio_selection(self) -> None:
        """A radio pick gives the option's stable value and its index."""
        answer = build_rich_answer(RADIO, selected=[1], custom=None, text=None, option_notes={})

        assert answer.to_wire() == {
            "id": "target",
            "type": "radio",
            "value": "stage",
            "wasCustom": False,
            "selectedOptionIndexes": [1],
        }

    def test_radio_custom_answer_has_no_index(self) -> None:
        """A radio custom answer: value is the custom string and no predefined index is selected."""
        answer = build_rich_answer(RADIO, selected=[0], custom="Canary", text=None, option_notes={})

        assert (answer.value, answer.was_custom, answer.custom_value, answer.selected_option_indexes) == (
            "Canary",
            True,
            "Canary",
            [],
        )

    def test_radio_nothing_selected(self) -> None:
        """No pick and no custom text gives an empty value."""
        answer = build_rich_answer(RADIO, selected=[], custom="  ", text=None, option_notes={})

        assert (answer.value, answer.was_custom, answer.selected_option_indexes) == ("", False, [])

    def test_checkbox_indexes_are_sorted_and_custom_comes_last(self) -> None:
        """Checkbox indexes follow option order; value lists the stable values, then the custom value."""
        answer = build_rich_answer(CHECKBOX, selected=[1, 0, 1], custom="Dev", text=None, option_notes={})

        assert answer.to_wire() == {
            "id": "features",
            "type": "checkbox",
            "value": ["prod", "stage", "Dev"],
            "wasCustom": True,
            "selectedOptionIndexes": [0, 1],
            "customValue": "Dev",
        }

    def test_invalid_indexes_are_dropped(self) -> None:
        """Indexes outside the options are ignored."""
        answer = build_rich_answer(CHECKBOX, selected=[-1, 5, 1], custom=None, text=None, option_notes={})

        assert (answer.value, answer.selected_option_indexes) == (["stage"], [1])

    def test_custom_text_is_ignored_when_other_is_not_allowed(self) -> None:
        """A question without allowOther takes no custom answer."""
        closed = RADIO.model_copy(update={"allow_other": False})

        answer = build_rich_answer(closed, selected=[0], custom="sneaky", text=None, option_notes={})

        assert (answer.value, answer.was_custom, answer.custom_value) == ("prod", False, None)

    def test_option_notes_keep_non_blank_notes_on_valid_options(self) -> None:
        """Each note repeats index, value and label; blank notes and bad indexes are dropped."""
        notes = {1: "After smoke tests", 0: " ", 7: "nowhere"}

        answer = build_rich_answer(RADIO, selected=[1], custom=None, text=None, option_notes=notes)

        assert [note.to_wire() for note in answer.option_notes or []] == [
            {"optionIndex": 1, "value": "stage", "label": "Staging", "note": "After smoke tests"}
        ]

    def test_no_notes_leaves_option_notes_out(self) -> None:
        """optionNotes is absent rather than empty."""
        assert "optionNotes" not in build_rich_answer(RADIO, selected=[0]).to_wire()

    def test_text_answers_are_custom_with_the_text_as_value(self) -> None:
        """Text answers set wasCustom true and carry no indexes."""
        answer = build_rich_answer(TEXT, selected=[], custom=None, text="Because", option_notes={})

        assert answer.to_wire() == {"id": "why", "type": "text", "value": "Because", "wasCustom": True}

    def test_missing_text_is_an_empty_value(self) -> None:
        """An unanswered text question still gets an answer, with an empty value."""
        assert build_rich_answer(TEXT, selected=[], custom=None, text=None, option_notes={}).value == ""

    def test_long_texts_are_cut_to_the_limit(self) -> None:
        """Custom values, notes and text answers are cut to 4000 UTF-16 units."""
        long = "x" * 4001

        radio = build_rich_answer(RADIO, selected=[0], custom=long, option_notes={0: long})
        text = build_rich_answer(TEXT, text=long)

        assert radio.custom_value == text.value == "x" * 4000
        assert radio.option_notes is not None
        assert radio.option_notes[0].note == "x" * 4000

    def test_answers_round_trip_through_json(self) -> None:
        """The wire form validates back to the same answer."""
        answer = build_rich_answer(CHECKBOX, selected=[0], custom="c", option_notes={0: "n"})

        assert RichAnswer.model_validate(answer.to_wire()) == answer
        assert to_json(answer).startswith('{"id":"features","type":"checkbox","value":["prod","c"]')
