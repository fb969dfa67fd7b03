"""apply_timeout_policy: the on_timeout semantics of spec/protocol.md section 6."""

from __future__ import annotations

from typing import Any

import pytest

from contract import (
    TIMEOUT_DEFAULT_NOTE,
    ContractError,
    apply_timeout_policy,
    narrate,
    normalize_ask_request,
    to_json,
)

REQUEST = normalize_ask_request(
    {
        "questions": [
            {"id": "plain", "question": "A?", "options": ["a", "b"], "recommended": 1},
            {
                "id": "impl",
                "question": "B?",
                "options": ["a"],
                "recommended": 0,
                "category": "implementation",
            },
            {
                "id": "scope",
                "question": "C?",
                "options": ["a"],
                "recommended": 0,
                "category": "scope-product",
            },
            {
                "id": "perm",
                "question": "D?",
                "options": ["a"],
                "recommended": 0,
                "category": "security-permission",
            },
            {"id": "none", "question": "E?", "options": ["a"]},
        ]
    }
)
TIMEOUT = {"status": "timeout", "selected": []}


def _wire(policy: Any) -> list[dict[str, Any]]:
    return [answer.to_wire() for answer in apply_timeout_policy(REQUEST, policy)]


@pytest.mark.parametrize("policy", ["cancel", "error"])
def test_cancel_and_error_time_out_every_question(policy: Any) -> None:
    """Both policies give every question `status: timeout` with nothing selected."""
    assert _wire(policy) == [{"id": q.id, **TIMEOUT} for q in REQUEST.questions]


def test_recommended_defaults_only_unguarded_questions_with_a_recommendation() -> None:
    """Scope and permission questions and questions without `recommended` still time out."""
    default = {"status": "answered", "defaulted": True, "note": TIMEOUT_DEFAULT_NOTE}

    assert _wire("recommended") == [
        {"id": "plain", "selected": [1], **default},
        {"id": "impl", "selected": [0], **default},
        {"id": "scope", **TIMEOUT},
        {"id": "perm", **TIMEOUT},
        {"id": "none", **TIMEOUT},
    ]


def test_default_answer_is_written_in_upstream_key_order() -> None:
    """The default serializes as expire.ts writes it: id, status, selected, defaulted, note."""
    answer = apply_timeout_policy(REQUEST.questions[:1], "recommended")[0]

    assert to_json(answer) == (
        '{"id":"plain","status":"answered","selected":[1],"defaulted":true,'
        '"note":"Default chosen after the timeout; no human answered."}'
    )


def test_default_note_is_the_upstream_text() -> None:
    """The note says that no human answered, word for word."""
    assert TIMEOUT_DEFAULT_NOTE == "Default chosen after the timeout; no human answered."


def test_defaulted_answers_narrate_as_defaults() -> None:
    """The narration of policy answers tells the model no human answered."""
    text = narrate(REQUEST.questions, apply_timeout_policy(REQUEST, "recommended"), {"surface": "host"})

    assert text.split("\n")[1:] == [
        "plain: (timeout; default applied, no human answered: b)",
        "impl: (timeout; default applied, no human answered: a)",
        "scope: (timeout)",
        "perm: (timeout)",
        "none: (timeout)",
    ]


def test_a_list_of_questions_works_like_the_request() -> None:
    """The questions may be given as the request or as its list."""
    assert apply_timeout_policy(REQUEST.questions, "recommended") == apply_timeout_policy(
        REQUEST, "recommended"
    )


def test_unknown_policy_is_refused() -> None:
    """Only the three protocol policies are accepted."""
    with pytest.raises(ContractError, match="on_timeout must be cancel, recommended or error"):
        apply_timeout_policy(REQUEST, "ignore")  # type: ignore[arg-type]
