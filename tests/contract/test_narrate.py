"""narrate and build_details beyond the golden vectors: models as input, and off-contract values."""

from __future__ import annotations

from typing import Any

import pytest

from contract import (
    UNAVAILABLE_WARNING,
    AskDelivery,
    Option,
    Question,
    QuestionAnswer,
    build_details,
    narrate,
    normalize_ask_request,
    to_json,
)

AUTH = {"id": "auth", "question": "Which auth?", "options": [{"label": "JWT"}, {"label": "Session"}]}
FEATURES = {
    "id": "features",
    "question": "Which features?",
    "options": [{"label": "Logging"}, {"label": "Metrics"}, {"label": "Tracing"}],
    "multi": True,
}
DIALOGS = {"surface": "dialogs", "degraded": False}


def _line(question: dict[str, Any], answer: dict[str, Any] | None) -> str:
    """The one answer line narrate writes for ``question``."""
    return narrate([question], [answer] if answer is not None else [], DIALOGS).split("\n")[1]


class TestModelsAndDictsAgree:
    def test_narrate_reads_models_like_their_wire_dicts(self) -> None:
        """Question, QuestionAnswer and AskDelivery models narrate exactly like their wire dicts."""
        request = normalize_ask_request({"questions": [AUTH, FEATURES]})
        answers = [
            QuestionAnswer(id="auth", status="answered", selected=[1], custom_text="with refresh"),
            QuestionAnswer(id="features", status="unavailable"),
        ]
        delivery = AskDelivery(surface="host", degraded=True)

        from_models = narrate(request.questions, answers, delivery)
        from_dicts = narrate(
            [q.to_wire() for q in request.questions], [a.to_wire() for a in answers], delivery.to_wire()
        )

        assert from_models == from_dicts
        assert from_models == (
            'User answers:\nauth: Session + Other: "with refresh"\nfeatures: (unavailable)\n\n'
            f"{UNAVAILABLE_WARNING}\n\n"
            "Note: asked through a reduced host surface; option descriptions may not have been shown."
        )

    def test_build_details_writes_models_as_wire_dicts(self) -> None:
        """Answers and delivery given as models are passed through as their wire dicts."""
        question = Question(id="a", question="A?", options=[Option(label="x")], description="d")
        answer = QuestionAnswer(id="a", status="answered", selected=[0], defaulted=True, note="n")

        details = build_details([question], [answer], AskDelivery(surface="host"))

        assert to_json(details) == (
            '{"results":[{"id":"a","question":"A?","options":["x"],"multi":false,"selectedOptions":["x"],'
            '"description":"d"}],"answers":[{"id":"a","status":"answered","selected":[0],"defaulted":true,'
            '"note":"n"}],"delivery":{"surface":"host","degraded":false},"id":"a","question":"A?",'
            '"options":["x"],"multi":false,"selectedOptions":["x"],"description":"d"}'
        )

    def test_models_and_dicts_can_be_mixed(self) -> None:
        """A list may hold a model and a dict side by side."""
        request = normalize_ask_request({"questions": [AUTH, FEATURES]})
        answers: list[Any] = [QuestionAnswer(id="auth", status="answered", selected=[0]), None]

        assert narrate([request.questions[0], FEATURES], answers, DIALOGS) == (
            "User answers:\nauth: JWT\nfeatures: (cancelled)"
        )


class TestSummaries:
    @pytest.mark.parametrize(
        ("selected", "expected"),
        [
            ([2.0], "Tracing"),
            ([True], "(cancelled)"),
            (["1"], "Metrics"),
            (["01", "1.0", " 1", None, {}], "(cancelled)"),
            ([[1]], "Metrics"),
            ([float("nan"), float("inf"), 3, -0.0], "Logging"),
        ],
        ids=repr,
    )
    def test_indexes_resolve_as_in_javascript(self, selected: list[Any], expected: str) -> None:
        """Indexes resolve as options[String(i)]: 2.0, "1" and [1] do; true, "01" and NaN do not."""
        question = {**FEATURES, "multi": False}

        assert _line(question, {"status": "answered", "selected": selected}) == f"features: {expected}"

    @pytest.mark.parametrize(
        ("status", "expected"), [(None, "(null)"), (3, "(3)"), ("Answered", "(Answered)"), ("", "()")]
    )
    def test_non_answered_statuses_print_as_javascript_strings(self, status: object, expected: str) -> None:
        """Any status but the exact string `answered` prints as String(status) in parentheses."""
        assert _line(AUTH, {"status": status, "selected": [0]}) == f"auth: {expected}"

    def test_missing_status_prints_undefined(self) -> None:
        """An answer without a status reads as `(undefined)`, as the template literal writes it."""
        assert _line(AUTH, {"selected": [0]}) == "auth: (undefined)"

    @pytest.mark.parametrize("defaulted", [1, "yes", [], {}])
    def test_truthy_defaulted_values_mark_a_default(self, defaulted: object) -> None:
        """`defaulted` is tested for truthiness, so 1, strings and even empty containers count."""
        line = _line(AUTH, {"status": "answered", "selected": [1], "defaulted": defaulted})

        assert line == "auth: (timeout; default applied, no human answered: Session)"

    @pytest.mark.parametrize("defaulted", [0, "", None])
    def test_falsy_defaulted_values_do_not(self, defaulted: object) -> None:
        """0, "" and null do not mark a default."""
        assert _line(AUTH, {"status": "answered", "selected": [1], "defaulted": defaulted}) == "auth: Session"

    def test_defaulted_ignores_custom_text(self) -> None:
        """A defaulted answer names only the applied labels."""
        line = _line(AUTH, {"status": "answered", "selected": [0], "defaulted": True, "customText": "x"})

        assert line == "auth: (timeout; default applied, no human answered: JWT)"

    def test_defaulted_labels_are_sanitized(self) -> None:
        """Labels of a defaulted answer go through the one-line rule too."""
        question = {"id": "x", "question": "X?", "options": [{"label": " a\nb "}]}

        assert _line(question, {"status": "answered", "selected": [0], "defaulted": True}) == (
            "x: (timeout; default applied, no human answered: a b)"
        )

    def test_custom_text_of_only_controls_is_cancelled(self) -> None:
        """Custom text that is empty after sanitizing counts as none."""
        assert _line(AUTH, {"status": "answered", "selected": [], "customText": "\x00\x07\x7f"}) == (
            "auth: (cancelled)"
        )

    def test_ids_are_sanitized(self) -> None:
        """The printed id is one line without control characters."""
        question = {**AUTH, "id": " a\tb\x00c\r\n"}

        assert _line(question, {"status": "answered", "selected": [0]}) == "a bc: JWT"

    def test_multi_is_tested_for_truthiness(self) -> None:
        """`multi: 1` prints brackets; `multi: 0` does not."""
        answer = {"status": "answered", "selected": [0, 1]}

        assert _line({**AUTH, "multi": 1}, answer) == "auth: [JWT, Session]"
        assert _line({**AUTH, "multi": 0}, answer) == "auth: JWT"

    def test_single_choice_label_blank_after_sanitizing_plus_custom(self) -> None:
        """A blank first label still counts as a label, so the custom text is an `Other`."""
        question = {"id": "x", "question": "X?", "options": [{"label": "\t"}]}

        assert (
            _line(question, {"status": "answered", "selected": [0], "customText": "c"}) == 'x:  + Other: "c"'
        )

    def test_missing_selected_counts_as_no_selection(self) -> None:
        """An answer without `selected` is read as an empty selection rather than failing."""
        assert _line(AUTH, {"status": "answered"}) == "auth: (cancelled)"

    def test_descriptions_and_notes_are_never_narrated(self) -> None:
        """Neither the question description nor the answer note reach the text."""
        question = {**AUTH, "description": "SECRET-DESC"}
        text = narrate([question], [{"status": "answered", "selected": [0], "note": "SECRET-NOTE"}], DIALOGS)

        assert "SECRET" not in text


class TestBlocks:
    @pytest.mark.parametrize("degraded", [1, "yes", [0]])
    def test_degraded_is_tested_for_truthiness(self, degraded: object) -> None:
        """Any truthy `degraded` adds the note."""
        text = narrate([], [], {"surface": "tui", "degraded": degraded})

        assert text.endswith(
            "Note: asked through a reduced tui surface; option descriptions may not have been shown."
        )

    def test_unavailable_warning_before_degraded_note(self) -> None:
        """The warning comes first, each block after one blank line, no trailing newline."""
        text = narrate(
            [AUTH], [{"status": "unavailable", "selected": []}], {"surface": "none", "degraded": True}
        )

        assert text.split("\n\n")[1:] == [
            UNAVAILABLE_WARNING,
            "Note: asked through a reduced none surface; option descriptions may not have been shown.",
        ]
        assert not text.endswith("\n")

    def test_null_answers_are_missing_answers(self) -> None:
        """`answers[i] ?? cancelled`: a null answer is cancelled and never warns."""
        assert narrate([AUTH, FEATURES], [None, None], DIALOGS) == (
            "User answers:\nauth: (cancelled)\nfeatures: (cancelled)"
        )


class TestDetails:
    def test_results_follow_question_order_and_position(self) -> None:
        """Each result takes the answer at its position; ids are not compared."""
        details = build_details(
            [AUTH, FEATURES], [{"id": "zzz", "status": "answered", "selected": [2]}], DIALOGS
        )

        assert [r["selectedOptions"] for r in details["results"]] == [[], []]
        assert "id" not in {k for k in details if k != "results"} - {"answers", "delivery"}

    def test_two_questions_are_not_mirrored(self) -> None:
        """Only exactly one question mirrors the compat fields to the top level."""
        details = build_details([AUTH, FEATURES], [], DIALOGS)

        assert list(details) == ["results", "answers", "delivery"]

    def test_answers_are_passed_through_unchanged(self) -> None:
        """Extra answers and unknown fields stay exactly as given."""
        answers: list[dict[str, Any]] = [
            {"id": "auth", "status": "weird", "selected": [0], "extra": {"x": [1.5]}},
            {"ghost": True},
        ]

        details = build_details([AUTH], answers, DIALOGS)

        assert details["answers"] == answers
        assert details["answers"][0] is answers[0]

    def test_custom_input_is_kept_raw_for_any_truthy_value(self) -> None:
        """customInput is the raw customText whenever it is truthy, sanitizing nothing."""
        details = build_details(
            [AUTH], [{"status": "dismissed", "selected": [], "customText": " a\nb "}], DIALOGS
        )

        assert details["customInput"] == " a\nb "

    @pytest.mark.parametrize(("multi", "expected"), [(None, False), (True, True), ("yes", "yes")])
    def test_multi_defaults_to_false_only_when_nullish(self, multi: object, expected: object) -> None:
        """`q.multi ?? false`: null becomes false, anything else passes through."""
        details = build_details([{**AUTH, "multi": multi}], [], DIALOGS)

        assert details["multi"] == expected

    def test_options_without_labels_are_null_and_never_selected(self) -> None:
        """A label-less option maps to null in `options` and is dropped from `selectedOptions`."""
        question = {
            "id": "x",
            "question": "X?",
            "options": [{"description": "no label"}, {"label": "b"}, "c"],
        }

        details = build_details([question], [{"status": "answered", "selected": [0, 1, 2]}], DIALOGS)

        assert to_json(details["results"][0]) == (
            '{"id":"x","question":"X?","options":[null,"b",null],"multi":false,"selectedOptions":["b"]}'
        )
