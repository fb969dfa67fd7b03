"""The question contract: a byte-compatible port of pi-question's shapes.

Models here are data only; ``normalize_ask_request`` (contract.normalize) builds them
from untrusted JSON.
Python attribute names are snake_case; the wire (``to_wire``) uses the upstream
camelCase names and key order.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

__all__ = [
    "LIMITS",
    "OTHER_OPTION",
    "AskDelivery",
    "AskRequest",
    "Category",
    "Limits",
    "Option",
    "Question",
    "QuestionAnswer",
    "Status",
    "Surface",
]

Category = Literal["implementation", "scope-product", "security-permission"]
Status = Literal["answered", "cancelled", "timeout", "dismissed", "unavailable"]
Surface = Literal["tui", "dialogs", "host", "none"]

OTHER_OPTION = "Other (type your own)"


class _Wire(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid")

    def to_wire(self) -> dict[str, Any]:
        """JSON-ready dict: camelCase keys, declaration order, unset optional keys omitted."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class Limits(BaseModel):
    """The contract's limits, readable as ``max_questions`` or upstream ``maxQuestions``."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)

    max_questions: int = 8
    min_options: int = 1
    max_options: int = 12
    max_text: int = 4000

    def __getattr__(self, name: str) -> Any:
        # Upstream spells these in camelCase (LIMITS.maxText); accept both.
        snake = "".join("_" + c.lower() if c.isupper() else c for c in name)
        if snake != name and snake in type(self).model_fields:
            return getattr(self, snake)
        raise AttributeError(name)


LIMITS = Limits()


class Option(_Wire):
    """One choice of a question. Do not add an ``Other`` option: custom text is offered separately."""

    label: str
    description: str | None = None


class Question(_Wire):
    """A normalized question. Field order is the upstream key order."""

    id: str
    question: str
    options: list[Option]
    description: str | None = None
    multi: bool | None = None
    recommended: int | None = None
    allow_custom: bool | None = None
    category: Category | None = None

    @property
    def custom_allowed(self) -> bool:
        """Free text is offered unless the agent set ``allowCustom: false``."""
        return self.allow_custom is not False


class AskRequest(_Wire):
    """A normalized request: 1-8 questions with unique ids."""

    questions: list[Question]


class QuestionAnswer(_Wire):
    """One answer, matched to its question by position."""

    id: str
    status: Status
    selected: list[int] = Field(default_factory=list)
    custom_text: str | None = None
    # `defaulted` before `note`: the order upstream's expire.ts writes a timeout default in.
    defaulted: bool | None = None
    note: str | None = None


class AskDelivery(_Wire):
    """Where the ask was shown; ``degraded`` when option descriptions may not have been."""

    surface: Surface
    degraded: bool = False
