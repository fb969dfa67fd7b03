"""Properties over generated input: normalizers fail only with ContractError; formatters never fail."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contract import (
    AskRequest,
    ContractError,
    QuestionAnswer,
    RichForm,
    RichFormResult,
    build_details,
    build_rich_answer,
    format_rich_answers,
    narrate,
    normalize_ask_request,
    normalize_rich_form,
    to_json,
)

# Modest example counts keep the whole suite fast; the strategies aim at the interesting corners.
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TRICKY_CHARS = st.sampled_from(
    list(' \t\n\r\v\f\x00\x1f\x7f\x85\xa0\u2028\u3000\ufeff\u200baZ😀\ud83d"\\,[]')
)
TEXT = st.one_of(st.text(max_size=12), st.text(TRICKY_CHARS, max_size=12))
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=14),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    TEXT,
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(TEXT, children, max_size=4),
    max_leaves=20,
)
KEYS = [
    "id", "question", "prompt", "header", "description", "context", "options", "choices",
    "recommended", "recommendedIndex", "multi", "multiple", "allowCustom", "category",
    "type", "label", "body", "details", "caveats", "recommendation", "allowOther", "required", "placeholder",
]  # fmt: skip
OPTION = st.one_of(
    TEXT,
    st.fixed_dictionaries(
        {},
        optional={
            "label": TEXT,
            "description": SCALARS,
            "value": SCALARS,
            "note": SCALARS,
            "details": SCALARS,
            "recommended": SCALARS,
        },
    ),
    SCALARS,
)
FIELD_VALUES = st.one_of(
    SCALARS,
    st.sampled_from(["radio", "checkbox", "text", "implementation", "scope-product", "security-permission"]),
    st.lists(OPTION, max_size=14),
)
QUESTION_LIKE = st.dictionaries(st.sampled_from(KEYS), FIELD_VALUES, max_size=10)
REQUEST_LIKE = st.one_of(
    JSON_VALUES,
    QUESTION_LIKE,
    st.fixed_dictionaries({"questions": st.lists(st.one_of(QUESTION_LIKE, SCALARS), max_size=9)}),
    st.fixed_dictionaries(
        {"questions": st.lists(QUESTION_LIKE, min_size=1, max_size=9)},
        optional={"title": TEXT, "description": SCALARS},
    ),
)
VALID_QUESTION = st.fixed_dictionaries(
    {
        "question": st.text(min_size=1, max_size=8).filter(str.strip),
        # One sure option keeps most examples valid, so the formatters downstream really run.
        "options": st.lists(OPTION, max_size=11).map(lambda rest: ["A", *rest]),
    },
    optional={
        k: FIELD_VALUES for k in ("id", "description", "recommended", "multi", "allowCustom", "category")
    },
)
VALID_FORM_QUESTION = st.fixed_dictionaries(
    {"prompt": st.text(min_size=1, max_size=8).filter(str.strip)},
    optional={k: FIELD_VALUES for k in ("id", "type", "options", "label", "body", "allowOther", "required")},
)


def _normalized_request(raw: Any) -> AskRequest | None:
    try:
        return normalize_ask_request(raw)
    except ContractError:
        return None


@FAST
@given(REQUEST_LIKE)
def test_normalize_ask_request_raises_only_contract_errors(raw: Any) -> None:
    """Any JSON value either normalizes or raises ContractError, never anything else."""
    _normalized_request(raw)


@FAST
@given(REQUEST_LIKE)
def test_normalize_rich_form_raises_only_contract_errors(raw: Any) -> None:
    """Any JSON value either normalizes as a rich form or raises ContractError."""
    with contextlib.suppress(ContractError):
        normalize_rich_form(raw)


@FAST
@given(st.lists(VALID_QUESTION, min_size=1, max_size=3))
def test_normalized_requests_are_stable_and_serializable(questions: list[Any]) -> None:
    """A normalized request normalizes to itself again and its JSON is valid UTF-8 JSON."""
    request = _normalized_request({"questions": questions})
    if request is None:
        return

    assert normalize_ask_request(request.to_wire()) == request
    assert json.loads(to_json(request)) == request.to_wire()
    to_json(request).encode("utf-8")  # lone surrogates are escaped, so the text always encodes


ANSWERS = st.lists(
    st.builds(
        QuestionAnswer,
        id=TEXT,
        status=st.sampled_from(["answered", "cancelled", "timeout", "dismissed", "unavailable"]),
        selected=st.lists(st.integers(min_value=-2, max_value=14), max_size=4),
        custom_text=st.none() | TEXT,
        note=st.none() | TEXT,
        defaulted=st.none() | st.booleans(),
    ),
    max_size=10,
)
DELIVERY = st.fixed_dictionaries(
    {"surface": st.sampled_from(["tui", "dialogs", "host", "none"]), "degraded": st.booleans()}
)


@FAST
@given(st.lists(VALID_QUESTION, min_size=1, max_size=3), ANSWERS, DELIVERY)
def test_narrate_and_build_details_never_raise(questions: list[Any], answers: Any, delivery: Any) -> None:
    """For any normalized request and well-typed answers, narration and details are produced."""
    request = _normalized_request({"questions": questions})
    if request is None:
        return

    text = narrate(request.questions, answers, delivery)
    details = build_details(request.questions, answers, delivery)

    assert text.startswith("User answers:")
    assert len(text.split("\n\n")[0].split("\n")) == 1 + len(request.questions)
    assert json.loads(to_json(details))["results"] == json.loads(to_json(details["results"]))


RICH_PICKS = st.tuples(
    st.lists(st.integers(min_value=-1, max_value=13), max_size=4),
    st.none() | TEXT,
    st.none() | TEXT,
    st.dictionaries(st.integers(min_value=-1, max_value=13), TEXT, max_size=3),
)


@FAST
@given(
    st.lists(VALID_FORM_QUESTION, min_size=1, max_size=3),
    st.lists(RICH_PICKS, min_size=3, max_size=3),
    st.none() | TEXT,
    st.booleans(),
)
def test_format_rich_answers_never_raises(
    questions: list[Any], picks: list[Any], additional: str | None, cancelled: bool
) -> None:
    """For any normalized form and any choices, the result text is produced and has no trailing newline."""
    try:
        form: RichForm = normalize_rich_form({"questions": questions, "title": "T"})
    except ContractError:
        return
    answers = [
        build_rich_answer(q, selected=s, custom=c, text=t, option_notes=n)
        for q, (s, c, t, n) in zip(form.questions, picks, strict=False)
    ]
    result = RichFormResult(
        title=form.title,
        questions=form.questions,
        answers=answers,
        additional_text=additional,
        cancelled=cancelled,
    )

    text = format_rich_answers(result)

    assert not text.endswith("\n")
    assert format_rich_answers(result.to_wire()) == text
    if not cancelled:
        assert text.count("\nType: ") == len(form.questions)
