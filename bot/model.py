"""The bot's own typed records: what the store keeps about an ask, and what render draws from.

These are internal (not part of the wire protocol). They are pydantic models so the store can
round-trip them through Redis as JSON and everything else gets typed attributes.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from contract.envelopes import Approval, EscalationStep, Requester, Responders, Route
from contract.question import AskRequest
from contract.rich import RichForm
from contract.timeout import TimeoutPolicy

__all__ = [
    "AskRecord",
    "AskState",
    "PostedMessage",
    "Target",
]

AskState = Literal["accepted", "posted", "ended"]


class _Rec(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Target(_Rec):
    """A resolved place to post: a conversation id (C.../G.../D...), optionally a thread."""

    channel: str
    thread_ts: str | None = None
    user: str | None = None
    """Set when the target was a DM to this user (channel is then the D... id)."""


class PostedMessage(_Rec):
    channel: str
    ts: str
    permalink: str | None = None
    step: int = 0
    """0 for the first post, n for the message posted by escalation step n."""


class AskRecord(_Rec):
    """Everything the bot needs to render, answer, time out and escalate one ask.

    The request is stored normalized: ``request`` for format ``pi-question``, ``form`` for ``rich``.
    Route, responders, timeout and escalation are already merged with the named policy and defaults.
    """

    ask_id: str
    tag: str
    """The hash-slot tag (without braces) shared by every key of this ask."""
    reply_to: str
    format: Literal["pi-question", "rich"] = "pi-question"
    request: AskRequest | None = None
    form: RichForm | None = None
    route: Route | None = None
    """Where the first message goes (policy already applied)."""
    target: Target | None = None
    route_text: str = ""
    """How the route was written, for operators (``#C0123``, ``@U0123``, ``policy:x -> #C0123``)."""
    responders: Responders | None = None
    requester: Requester | None = None
    created_ms: int
    deadline_ms: int | None = None
    on_timeout: TimeoutPolicy = "cancel"
    escalate: list[EscalationStep] = Field(default_factory=list)
    remind_every_ms: int | None = None
    max_reminders: int = 3
    approval: Approval | None = None
    """Several people must agree (protocol section 13); the policy's when the ask names none."""
    thread_answers: bool = True
    """Replies typed in the ask's thread (or its DM) are read as answers (docs/thread-answers.md)."""

    @property
    def question_count(self) -> int:
        if self.request is not None:
            return len(self.request.questions)
        return len(self.form.questions) if self.form is not None else 0
