"""normalize_ask_request beyond the golden vectors: the same rules on other inputs."""

from __future__ import annotations

from typing import Any

import pytest

from contract import LIMITS, ContractError, normalize_ask_request, to_json


def _one(question: dict[str, Any]) -> dict[str, Any]:
    """The single normalized question's wire dict."""
    wire: dict[str, Any] = normalize_ask_request({"questions": [question]}).to_wire()["questions"][0]
    return wire


def _error(raw: object) -> str:
    with pytest.raises(ContractError) as caught:
        normalize_ask_request(raw)
    return str(caught.value)


class TestSourceList:
    @pytest.mark.parametrize("raw", [None, True, 0, 1.5, "", "x", [], [{"question": "Q", "options": ["a"]}]])
    def test_anything_but_an_object_is_an_empty_request(self, raw: object) -> None:
        """Non-objects (booleans and top-level arrays included) give `questions must not be empty`."""
        assert _error(raw) == "questions must not be empty"

    @pytest.mark.parametrize("questions", [{}, "x", 3, True])
    def test_non_array_questions_make_the_object_one_question(self, questions: object) -> None:
        """An object whose `questions` is not an array is read as a single question."""
        request = normalize_ask_request({"questions": questions, "prompt": "Top?", "choices": ["x"]})

        assert [q.question for q in request.questions] == ["Top?"]

    def test_tuple_counts_as_an_array(self) -> None:
        """A tuple (a Python-built request) is read like a JSON array."""
        request = normalize_ask_request({"questions": ({"question": "Q", "options": ("a",)},)})

        assert request.questions[0].options[0].label == "a"

    def test_nine_valid_questions_are_too_many(self) -> None:
        """More than 8 questions is refused even when each is valid."""
        questions = [{"question": f"Q{i}", "options": ["a"]} for i in range(9)]

        assert _error({"questions": questions}) == "at most 8 questions per ask"


class TestPrompt:
    @pytest.mark.parametrize(
        "blank", ["", "\t\n\v\f\r ", "\u1680", "\u2000\u200a", "\u2028\u2029", "\u202f\u205f"], ids=repr
    )
    def test_prompts_of_javascript_whitespace_are_missing(self, blank: str) -> None:
        """Any mix of JavaScript whitespace is blank."""
        assert _error({"question": blank, "options": ["a"]}) == "questions[0].question is required"

    @pytest.mark.parametrize("kept", ["\x1c", "\x1d", "\x1e", "\u180e", "\u2060"], ids=repr)
    def test_prompts_python_would_strip_are_kept(self, kept: str) -> None:
        """Characters JavaScript's trim keeps make a non-blank prompt."""
        assert _one({"question": kept, "options": ["a"]})["question"] == kept

    @pytest.mark.parametrize(
        ("fields", "expected"),
        [
            ({"prompt": " ", "header": "H"}, "H"),
            ({"question": None, "prompt": "P", "header": "H"}, "P"),
            ({"question": True, "prompt": 3, "header": "H"}, "H"),
            ({"question": "Q", "prompt": "P", "header": "H"}, "Q"),
        ],
    )
    def test_prompt_aliases_fall_through_in_order(self, fields: dict[str, Any], expected: str) -> None:
        """question, then prompt, then header: the first non-blank string wins."""
        assert _one({**fields, "options": ["a"]})["question"] == expected

    def test_all_prompt_aliases_blank_is_an_error_naming_question(self) -> None:
        """The error names `question` whichever alias was tried."""
        assert _error({"prompt": " ", "header": "", "options": ["a"]}) == "questions[0].question is required"

    def test_prompt_of_exactly_4000_units_is_kept_whole(self) -> None:
        """The limit is inclusive."""
        assert _one({"question": "q" * 4000, "options": ["a"]})["question"] == "q" * 4000

    def test_prompt_is_checked_for_blankness_before_it_is_cut(self) -> None:
        """Upstream tests the whole text, then slices: 4000 spaces before a word leave a blank prompt."""
        prompt = " " * 4000 + "x"

        assert _one({"question": prompt, "options": ["a"]})["question"] == " " * 4000


class TestDescription:
    def test_description_of_4001_units_is_cut_to_4000(self) -> None:
        """A question description is cut to 4000 UTF-16 units, not trimmed."""
        description = " d" + "x" * 3999

        assert _one({"question": "Q", "description": description, "options": ["a"]})["description"] == (
            " d" + "x" * 3998
        )

    def test_context_is_cut_too(self) -> None:
        """The `context` alias follows the same limit."""
        assert len(_one({"question": "Q", "context": "c" * 5000, "options": ["a"]})["description"]) == 4000

    def test_description_emoji_at_the_limit_leaves_a_lone_surrogate(self) -> None:
        """The cut counts UTF-16 units, so an emoji across it leaves its high surrogate."""
        wire = _one({"question": "Q", "description": "d" * 3999 + "😀", "options": ["a"]})

        assert wire["description"] == "d" * 3999 + "\ud83d"

    def test_option_description_of_4001_units_is_cut(self) -> None:
        """Option descriptions follow the limit and keep their spaces."""
        option = {"label": "a", "description": "  " + "o" * 3999}

        assert _one({"question": "Q", "options": [option]})["options"][0]["description"] == "  " + "o" * 3998

    def test_option_description_exactly_4000_is_kept(self) -> None:
        """The option description limit is inclusive too."""
        option = {"label": "a", "description": "o" * 4000}

        assert _one({"question": "Q", "options": [option]})["options"][0]["description"] == "o" * 4000

    @pytest.mark.parametrize("description", ["", " \u3000 ", None, 5, ["d"]])
    def test_blank_or_non_string_option_description_is_left_out(self, description: object) -> None:
        """Only a non-blank string description is kept."""
        option = {"label": "a", "description": description}

        assert _one({"question": "Q", "options": [option]})["options"] == [{"label": "a"}]

    def test_non_string_description_falls_back_to_context(self) -> None:
        """`description` that is not a string gives way to `context`."""
        assert (
            _one({"question": "Q", "description": 1, "context": "c", "options": ["a"]})["description"] == "c"
        )


class TestOptions:
    def test_string_options_are_not_cut(self) -> None:
        """A string option is trimmed but keeps all of its 5000 units."""
        assert (
            _one({"question": "Q", "options": ["  " + "s" * 5000 + " "]})["options"][0]["label"] == "s" * 5000
        )

    def test_object_option_labels_are_cut_then_trimmed(self) -> None:
        """An object option's label is cut to 4000 and then trimmed."""
        label = "l" * 3998 + "  tail"

        assert _one({"question": "Q", "options": [{"label": label}]})["options"][0]["label"] == "l" * 3998

    def test_object_label_of_only_whitespace_before_the_cut_is_dropped(self) -> None:
        """4000 spaces and then a word: nothing is left after the cut and trim, so the option goes."""
        assert _error({"question": "Q", "options": [{"label": " " * 4000 + "x"}]}) == (
            "questions[0] needs at least 1 option"
        )

    @pytest.mark.parametrize(
        "invalid", [None, 1, 2.5, True, ["a"], {}, {"label": 1}, {"label": "  "}, " \ufeff "]
    )
    def test_invalid_options_are_dropped_silently(self, invalid: object) -> None:
        """Options that are not a non-blank string or an object with a label are dropped."""
        assert _one({"question": "Q", "options": [invalid, "ok"]})["options"] == [{"label": "ok"}]

    def test_choices_empty_array_with_options_not_array(self) -> None:
        """`options` that is not an array gives way to `choices`, even an empty one."""
        assert _error({"question": "Q", "options": {"a": 1}, "choices": []}) == (
            "questions[0] needs at least 1 option"
        )

    def test_neither_options_nor_choices_arrays(self) -> None:
        """With no array at all there are no options."""
        assert _error({"question": "Q", "options": None, "choices": "a,b"}) == (
            "questions[0] needs at least 1 option"
        )

    def test_thirteen_options_via_choices(self) -> None:
        """The 12-option limit applies to the `choices` alias too."""
        assert _error({"question": "Q", "choices": [str(i) for i in range(13)]}) == (
            "questions[0] has more than 12 options"
        )

    def test_option_order_and_duplicates_are_kept(self) -> None:
        """Normalization does not sort or de-duplicate options."""
        labels = [o["label"] for o in _one({"question": "Q", "options": ["b", "a", "b"]})["options"]]

        assert labels == ["b", "a", "b"]


class TestRecommended:
    @pytest.mark.parametrize(
        ("fields", "expected"),
        [
            ({"recommended": True}, None),
            ({"recommended": True, "recommendedIndex": 1}, 1),
            ({"recommended": False, "recommendedIndex": 0}, 0),
            ({"recommendedIndex": True}, None),
            ({"recommended": "1", "recommendedIndex": 0}, 0),
            ({"recommended": "1"}, None),
            ({"recommended": None, "recommendedIndex": 1.0}, 1),
            ({"recommended": 1.0}, 1),
            ({"recommended": -0.0}, 0),
            ({"recommended": 1.5, "recommendedIndex": 1}, None),
            ({"recommended": float("nan"), "recommendedIndex": 1}, None),
            ({"recommended": 2}, None),
            ({"recommended": 10**30}, None),
        ],
        ids=repr,
    )
    def test_recommended_follows_typeof_number(self, fields: dict[str, Any], expected: int | None) -> None:
        """A boolean is not a number; any number, valid or not, stops the fall-back to the alias."""
        assert _one({"question": "Q", "options": ["a", "b"], **fields}).get("recommended") == expected

    def test_integer_valued_float_is_written_as_an_integer(self) -> None:
        """1.0 is kept as the integer 1, so the JSON says 1."""
        request = normalize_ask_request({"question": "Q", "options": ["a", "b"], "recommended": 1.0})

        assert request.questions[0].recommended == 1
        assert type(request.questions[0].recommended) is int
        assert '"recommended":1}' in to_json(request.to_wire())


class TestFlags:
    @pytest.mark.parametrize(
        ("fields", "expected"),
        [
            ({"multiple": True}, True),
            ({"multi": 1, "multiple": True}, True),
            ({"multi": "true"}, None),
            ({"multi": None, "multiple": False}, False),
            ({"multi": 0, "multiple": 1}, None),
            ({"multi": True, "multiple": False}, True),
        ],
        ids=repr,
    )
    def test_multi_and_its_alias(self, fields: dict[str, Any], expected: bool | None) -> None:
        """`multiple` is read only when `multi` is not a boolean, and kept only when it is one."""
        assert _one({"question": "Q", "options": ["a"], **fields}).get("multi") == expected

    @pytest.mark.parametrize(("value", "expected"), [(True, True), (False, False), (1, None), (None, None)])
    def test_allow_custom_is_kept_only_when_boolean(self, value: object, expected: bool | None) -> None:
        """`allowCustom: 1` is not a boolean and is dropped."""
        assert _one({"question": "Q", "options": ["a"], "allowCustom": value}).get("allowCustom") == expected

    @pytest.mark.parametrize("category", ["implementation", "scope-product", "security-permission"])
    def test_each_category_is_kept(self, category: str) -> None:
        """The three categories are kept exactly."""
        assert _one({"question": "Q", "options": ["a"], "category": category})["category"] == category

    @pytest.mark.parametrize(
        "category", ["implementation ", "SECURITY-PERMISSION", ["implementation"], {}, 1]
    )
    def test_anything_else_as_category_is_dropped(self, category: object) -> None:
        """Padded, differently cased or non-string categories are dropped (unhashable ones too)."""
        assert "category" not in _one({"question": "Q", "options": ["a"], "category": category})


class TestIds:
    def test_id_is_trimmed_with_javascript_whitespace(self) -> None:
        """An id padded with NBSP and BOM is trimmed."""
        assert _one({"id": "\u00a0\ufeffauth\u3000", "question": "Q", "options": ["a"]})["id"] == "auth"

    def test_default_id_collides_with_a_later_explicit_id(self) -> None:
        """A default id taken first makes a later explicit `q1` a duplicate."""
        questions = [{"question": "A", "options": ["a"]}, {"id": "q1", "question": "B", "options": ["b"]}]

        assert _error({"questions": questions}) == 'duplicate question id "q1"'

    def test_duplicate_error_comes_at_the_entry_that_repeats(self) -> None:
        """The duplicate check runs per entry, so it wins over a later entry's error."""
        questions = [
            {"id": "x", "question": "A", "options": ["a"]},
            {"id": "x", "question": "B", "options": ["b"]},
        ]

        assert _error({"questions": [*questions, None]}) == 'duplicate question id "x"'

    def test_entry_errors_come_before_its_duplicate_check(self) -> None:
        """Options are counted before the id is compared."""
        questions = [{"id": "x", "question": "A", "options": ["a"]}, {"id": "x", "question": "B"}]

        assert _error({"questions": questions}) == "questions[1] needs at least 1 option"

    def test_duplicate_message_quotes_the_id_without_escaping(self) -> None:
        """The id appears as is between double quotes."""
        questions = [
            {"id": 'a"b', "question": "A", "options": ["a"]},
            {"id": 'a"b', "question": "B", "options": ["b"]},
        ]

        assert _error({"questions": questions}) == 'duplicate question id "a"b"'


class TestOutput:
    def test_limits_are_readable_under_both_spellings(self) -> None:
        """LIMITS answers to snake_case and upstream camelCase names."""
        snake = (LIMITS.max_questions, LIMITS.min_options, LIMITS.max_options, LIMITS.max_text)
        camel = (LIMITS.maxQuestions, LIMITS.minOptions, LIMITS.maxOptions, LIMITS.maxText)

        assert snake == camel == (8, 1, 12, 4000)

    def test_models_expose_snake_case_attributes(self) -> None:
        """The normalized models read in Python names; the wire uses camelCase."""
        request = normalize_ask_request({"question": "Q", "options": ["a"], "allowCustom": False})
        question = request.questions[0]

        assert question.allow_custom is False
        assert question.custom_allowed is False
        assert question.to_wire()["allowCustom"] is False

    def test_input_is_not_modified(self) -> None:
        """Normalization reads its input and never changes it."""
        raw: dict[str, Any] = {"questions": [{"prompt": " P ", "choices": [" a "], "recommendedIndex": 0}]}
        before = to_json(raw)

        normalize_ask_request(raw)

        assert to_json(raw) == before

    def test_the_wire_form_normalizes_to_itself(self) -> None:
        """Normalizing a normalized request's wire form gives the same request."""
        raw = {"header": "  H  ", "context": " c ", "choices": [" a ", {"label": "b ", "description": " d "}]}
        request = normalize_ask_request(raw)

        assert normalize_ask_request(request.to_wire()) == request
