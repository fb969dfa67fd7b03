"""What an ask's answers are when its deadline passes (spec/protocol.md section 6).

The semantics are pi-question's ``kernel/expire.ts``: a recommended option may stand in for
the human, but never for decisions about product scope or permissions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal, TypeAlias

from contract.errors import ContractError
from contract.question import AskRequest, Category, Question, QuestionAnswer

__all__ = [
    "TIMEOUT_DEFAULT_NOTE",
    "TIMEOUT_ERROR_MESSAGE",
    "TimeoutPolicy",
    "apply_timeout_policy",
]

TimeoutPolicy: TypeAlias = Literal["cancel", "recommended", "error"]

TIMEOUT_DEFAULT_NOTE: Final = "Default chosen after the timeout; no human answered."
TIMEOUT_ERROR_MESSAGE: Final = "the question timed out and no default is allowed."
"""The ``timeout_error`` message; the result's text is ``Error: <message>``."""

# A default may never decide these for a human.
_NEVER_DEFAULTED: Final[frozenset[Category]] = frozenset({"scope-product", "security-permission"})


def apply_timeout_policy(
    questions: AskRequest | Sequence[Question],
    policy: TimeoutPolicy,
) -> list[QuestionAnswer]:
    """The answers of an ask whose deadline passed, one per question in question order.

    ``cancel`` and ``error`` give every question ``status: "timeout"`` (for ``error`` the
    caller reports the ``timeout_error`` outcome around these answers). ``recommended``
    answers a question with its recommended option, marked ``defaulted``, unless it has
    none or its category is ``scope-product`` or ``security-permission``.
    """
    if policy not in ("cancel", "recommended", "error"):
        raise ContractError(f"on_timeout must be cancel, recommended or error, not {policy!r}")
    listed = questions.questions if isinstance(questions, AskRequest) else questions
    return [_expire(question, use_default=policy == "recommended") for question in listed]


def _expire(question: Question, *, use_default: bool) -> QuestionAnswer:
    if use_default and question.recommended is not None and question.category not in _NEVER_DEFAULTED:
        return QuestionAnswer(
            id=question.id,
            status="answered",
            selected=[question.recommended],
            defaulted=True,
            note=TIMEOUT_DEFAULT_NOTE,
        )
    return QuestionAnswer(id=question.id, status="timeout", selected=[])
