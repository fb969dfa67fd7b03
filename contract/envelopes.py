"""The wire envelopes of protocol version 1 (spec/protocol.md sections 2, 3 and 8).

``parse_ask_envelope`` and ``parse_cancel_envelope`` turn untrusted JSON text into
models or raise :class:`EnvelopeError` carrying the protocol error code, a message
that names the field and the rule, and whatever ``ask_id`` / ``reply_to`` could
still be read (so the bot can answer on the agent's queue).
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    StrictBool,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from contract.timeout import TimeoutPolicy

__all__ = [
    "APPROVAL_MAX",
    "APPROVAL_MIN",
    "APPROVAL_NOT_RICH",
    "APPROVAL_NO_DEFAULT",
    "ASK_ID_PATTERN",
    "Approval",
    "AskEnvelope",
    "CancelEnvelope",
    "EnvelopeError",
    "EnvelopeErrorCode",
    "EscalationStep",
    "Outcome",
    "Requester",
    "Responders",
    "ResultDelivery",
    "ResultEnvelope",
    "ResultError",
    "ResultResponder",
    "ResultSlack",
    "ResultVote",
    "Route",
    "Via",
    "parse_ask_envelope",
    "parse_cancel_envelope",
]

ASK_ID_PATTERN = r"^[A-Za-z0-9._:~-]{1,128}$"
# Every pattern matches the whole value (protocol section 2): Python code uses fullmatch, since
# ``$`` alone also matches before a trailing newline ("abc\n").
_ASK_ID_RE = re.compile(ASK_ID_PATTERN)
_REPLY_TO_RE = re.compile(r"^\S{1,512}$")
_MENTION_RE = re.compile(r"^[UWS][A-Z0-9]{2,}$")
_SLACK_ID_RE = re.compile(r"^[A-Z][A-Z0-9]{2,}$")
_USER_ID_RE = re.compile(r"^[UW][A-Z0-9]{2,}$")
_EMAIL_RE = re.compile(r"^[^\s@<>|]+@[^\s@<>|]+\.[^\s@<>|]+$")
APPROVAL_MIN = 2
APPROVAL_MAX = 20
_URL_RE = re.compile(r"https?://[^\s<>|]+")
_ONE_USER_RE = re.compile(r"[UW][A-Z0-9]+")

APPROVAL_NOT_RICH = "only a pi-question ask can need approvals (format is rich)"
APPROVAL_NO_DEFAULT = (
    'an approval never defaults, so on_timeout "recommended" is not allowed (use "cancel" or "error")'
)

Outcome = Literal["answered", "cancelled", "timeout", "dismissed", "unavailable", "error"]
EnvelopeErrorCode = Literal["invalid_envelope", "unsupported_version"]
Format = Literal["pi-question", "rich"]
Via = Literal["button", "form", "thread", "home"]
"""Where the human act that ended an ask came from (protocol sections 3 and 14)."""


def _json_integer(value: Any) -> Any:
    # JSON has one number type, so 5.0 is the integer 5; true and "5" are not numbers at all
    # (pydantic's lax mode would take both).
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


JsonInt = Annotated[int, BeforeValidator(_json_integer), Strict()]


def _one_user(value: str | None) -> str | None:
    # One person only: "U1,U2,U3" would make conversations.open start a group DM the agent chose.
    if value is not None and not (_ONE_USER_RE.fullmatch(value) or _EMAIL_RE.fullmatch(value)):
        raise ValueError(f"{value[:60]!r} is not one Slack user id (U...) or one e-mail address")
    return value


class EnvelopeError(ValueError):
    """An envelope the bot cannot take; ``code`` is the protocol error code."""

    def __init__(
        self,
        code: EnvelopeErrorCode,
        message: str,
        *,
        ask_id: str | None = None,
        reply_to: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code: EnvelopeErrorCode = code
        self.message = message
        self.ask_id = ask_id
        self.reply_to = reply_to

    def __str__(self) -> str:
        return self.message


class _In(BaseModel):
    # Unknown fields are ignored for forward compatibility (protocol section 2).
    model_config = ConfigDict(
        extra="ignore", frozen=True, str_strip_whitespace=False, use_attribute_docstrings=True
    )


class Route(_In):
    """Where to ask: exactly one of ``channel``, ``user`` or ``policy``."""

    channel: str | None = Field(default=None, min_length=1, max_length=64)
    thread_ts: str | None = Field(default=None, pattern=r"^\d{1,12}\.\d{1,9}$")
    user: str | None = Field(default=None, min_length=1, max_length=254)
    policy: str | None = Field(default=None, min_length=1, max_length=128)

    _user = field_validator("user")(_one_user)

    @model_validator(mode="after")
    def _exactly_one_target(self) -> Route:
        given = [n for n in ("channel", "user", "policy") if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError(
                f"a route names exactly one of channel, user or policy (got {', '.join(given) or 'none'})"
            )
        if self.thread_ts is not None and self.channel is None:
            raise ValueError("thread_ts is only allowed with channel")
        return self


class Responders(_In):
    """Who may answer: these users and the members of these user groups."""

    users: list[str] = Field(default_factory=list, max_length=500)
    usergroups: list[str] = Field(default_factory=list, max_length=100)

    @field_validator("users", "usergroups")
    @classmethod
    def _slack_ids(cls, value: list[str]) -> list[str]:
        for item in value:
            if not _SLACK_ID_RE.fullmatch(item):
                raise ValueError(f"{item!r} is not a Slack id (like U0123ABCD or S0123ABCD)")
        return value


class Requester(_In):
    """Shown to the human as context."""

    name: str | None = Field(default=None, max_length=200)
    session: str | None = Field(default=None, max_length=200)
    title: str | None = Field(default=None, max_length=500)
    url: str | None = Field(default=None, max_length=2000)
    user: str | None = Field(default=None, min_length=1, max_length=254)
    """The Slack user id (U.../W...) or e-mail of the person the agent acts for (section 13)."""

    @field_validator("user")
    @classmethod
    def _user_or_email(cls, value: str | None) -> str | None:
        if value is not None and not (_USER_ID_RE.fullmatch(value) or _EMAIL_RE.fullmatch(value)):
            raise ValueError("user must be a Slack user id (like U0123ABCD) or an e-mail address")
        return value

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not _URL_RE.fullmatch(value):
            raise ValueError("url must be an http:// or https:// address without spaces, '<', '>' or '|'")
        return value


class EscalationStep(_In):
    """Also post the ask to ``channel`` or ``user`` once ``after_ms`` has passed."""

    after_ms: JsonInt = Field(ge=0)
    """Milliseconds after the ask's creation at which this step runs."""
    channel: str | None = Field(default=None, min_length=1, max_length=64)
    user: str | None = Field(default=None, min_length=1, max_length=254)
    mention: list[str] = Field(default_factory=list, max_length=20)

    _user = field_validator("user")(_one_user)

    @field_validator("mention", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("mention")
    @classmethod
    def _mentionable(cls, value: list[str]) -> list[str]:
        for item in value:
            if not _MENTION_RE.fullmatch(item):
                raise ValueError(f"{item!r} is not a user id (U...) or user-group id (S...)")
        return value

    @model_validator(mode="after")
    def _one_target(self) -> EscalationStep:
        if (self.channel is None) == (self.user is None):
            raise ValueError("an escalation step names exactly one of channel or user")
        return self


class Approval(_In):
    """Several people must agree (protocol section 13)."""

    count: JsonInt = Field(ge=APPROVAL_MIN, le=APPROVAL_MAX)
    """How many distinct eligible people must pick the same option."""
    veto: list[JsonInt] = Field(default_factory=list, max_length=12)
    """Option indexes (0-based) a single vote for which ends the ask at once."""
    exclude_requester: StrictBool = True
    """The person named by ``requester.user`` may not vote."""

    @field_validator("veto")
    @classmethod
    def _distinct_indexes(cls, value: list[int]) -> list[int]:
        if any(i < 0 for i in value):
            raise ValueError("veto lists option indexes, which start at 0")
        if len(set(value)) != len(value):
            raise ValueError("veto lists each option index once")
        return value


class AskEnvelope(_In):
    """The ``ask`` field of an ``XADD P:asks`` entry (protocol section 2)."""

    v: Literal[1]
    """Protocol version."""
    ask_id: str = Field(pattern=ASK_ID_PATTERN)
    """Chosen by the agent; the idempotency key."""
    reply_to: str = Field(pattern=r"^\S{1,512}$")
    """The Redis list the one result is pushed to."""
    format: Format = "pi-question"
    """Which contract ``request`` follows and the result uses."""
    request: dict[str, Any]
    """pi-question: anything normalize_ask_request accepts; rich: a rich form."""
    route: Route | None = None
    """Where to ask; absent: the configured default route."""
    timeout_ms: JsonInt | None = Field(default=None, ge=0)
    """0 or absent: the configured default."""
    on_timeout: TimeoutPolicy | None = None
    """What the deadline does; absent: cancel."""
    responders: Responders | None = None
    requester: Requester | None = None
    escalate: list[EscalationStep] = Field(default_factory=list, max_length=10)
    remind_every_ms: JsonInt | None = Field(default=None, ge=0)
    """Interval of thread reminders while pending (raised to the configured floor)."""
    approval: Approval | None = None
    """Several people must agree; section 13."""
    thread_answers: StrictBool | None = None
    """Section 14: false turns off answers typed in the ask's thread or DM; absent: the policy's, else
    the setting ``SLACK_ASK_THREAD_ANSWERS`` (on by default)."""

    @field_validator("approval")
    @classmethod
    def _approval_rules(cls, value: Approval | None, info: ValidationInfo) -> Approval | None:
        # The rules the envelope alone can decide (format and on_timeout are declared before
        # approval, so they are in info.data); the ones that need the normalized question and the
        # merged policy are contract.approval.approval_problem, run after both.
        if value is not None:
            if info.data.get("format") == "rich":
                raise ValueError(APPROVAL_NOT_RICH)
            if info.data.get("on_timeout") == "recommended":
                raise ValueError(APPROVAL_NO_DEFAULT)
        return value


class CancelEnvelope(_In):
    """The ``cancel`` field of an ``XADD P:asks`` entry (protocol section 8)."""

    v: Literal[1]
    ask_id: str = Field(pattern=ASK_ID_PATTERN)
    reply_to: str = Field(pattern=r"^\S{1,512}$")
    reason: str | None = Field(default=None, max_length=2000)


class _Out(BaseModel):
    # The schema marks defaulted fields required: every result field is always written.
    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        use_attribute_docstrings=True,
        json_schema_serialization_defaults_required=True,
    )


class ResultDelivery(_Out):
    surface: Literal["host", "none"]
    degraded: bool = False


class ResultResponder(_Out):
    id: str
    name: str | None = None


class ResultSlack(_Out):
    channel: str
    ts: str
    permalink: str | None = None


class ResultError(_Out):
    code: str
    message: str


class ResultVote(_Out):
    """The final vote of one person on an approval (section 13)."""

    user: ResultResponder
    selected: list[int]
    at: str
    """When this vote was cast (RFC 3339 UTC, Redis time)."""


class ResultEnvelope(_Out):
    """The one result an ask gets. Every field is always present (null when empty)."""

    v: Literal[1] = 1
    ask_id: str | None
    format: Format
    outcome: Outcome
    answers: list[Any]
    text: str
    details: dict[str, Any]
    delivery: ResultDelivery
    responder: ResultResponder | None = None
    votes: list[ResultVote] | None = None
    """Section 13: the final vote of each person in the order cast; null for asks without approval."""
    via: Via | None = None
    """Section 14: where the deciding human act came from; null when no human act ended the ask."""
    slack: ResultSlack | None = None
    error: ResultError | None = None
    created_at: str | None = None
    resolved_at: str | None = None

    def to_wire(self) -> dict[str, Any]:
        """JSON-ready dict with every field present."""
        return self.model_dump(mode="json")


def _describe(err: ValidationError) -> str:
    first = err.errors(include_url=False)[0]
    loc = ".".join(str(p) for p in first["loc"]) or "envelope"
    msg = str(first["msg"])
    msg = msg.removeprefix("Value error, ")
    if first["type"] == "missing":
        return f"{loc} is required"
    if first["type"] == "string_pattern_mismatch" and loc == "ask_id":
        return "ask_id must be 1-128 characters of A-Z a-z 0-9 . _ : ~ -"
    if first["type"] == "string_pattern_mismatch" and loc == "reply_to":
        return "reply_to must be 1-512 characters with no whitespace"
    return f"{loc}: {msg}"


def _load(text: str | bytes, kind: str) -> dict[str, Any]:
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise EnvelopeError("invalid_envelope", f"the {kind} field is not valid JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise EnvelopeError("invalid_envelope", f"the {kind} field must be a JSON object")
    return raw


def _readable(raw: dict[str, Any]) -> tuple[str | None, str | None]:
    ask_id = raw.get("ask_id")
    reply_to = raw.get("reply_to")
    return (
        ask_id if isinstance(ask_id, str) and _ASK_ID_RE.fullmatch(ask_id) else None,
        reply_to if isinstance(reply_to, str) and _REPLY_TO_RE.fullmatch(reply_to) else None,
    )


def _check_version(raw: dict[str, Any], ask_id: str | None, reply_to: str | None) -> None:
    if "v" not in raw:
        raise EnvelopeError(
            "invalid_envelope", "v is required (protocol version 1)", ask_id=ask_id, reply_to=reply_to
        )
    version = _json_integer(raw["v"])
    if type(version) is not int or version != 1:
        shown = json.dumps(version)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."  # an agent's junk stays out of logs
        raise EnvelopeError(
            "unsupported_version",
            f"protocol version {shown} is not supported; this bot speaks version 1",
            ask_id=ask_id,
            reply_to=reply_to,
        )
    raw["v"] = version  # 1.0 is the JSON number 1


def parse_ask_envelope(text: str | bytes) -> AskEnvelope:
    """Parse the ``ask`` field of a stream entry, or raise :class:`EnvelopeError`."""
    raw = _load(text, "ask")
    ask_id, reply_to = _readable(raw)
    _check_version(raw, ask_id, reply_to)
    try:
        return AskEnvelope.model_validate(raw)
    except ValidationError as exc:
        raise EnvelopeError("invalid_envelope", _describe(exc), ask_id=ask_id, reply_to=reply_to) from None


def parse_cancel_envelope(text: str | bytes) -> CancelEnvelope:
    """Parse the ``cancel`` field of a stream entry, or raise :class:`EnvelopeError`."""
    raw = _load(text, "cancel")
    ask_id, reply_to = _readable(raw)
    _check_version(raw, ask_id, reply_to)
    try:
        return CancelEnvelope.model_validate(raw)
    except ValidationError as exc:
        raise EnvelopeError("invalid_envelope", _describe(exc), ask_id=ask_id, reply_to=reply_to) from None
