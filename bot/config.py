"""Settings from the environment (protocol section 11) and the optional policy file.

Secrets are ``SecretStr`` so they never show up in a repr, a log line or an error message.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.durations import parse_duration
from bot.errors import ConfigError
from bot.storage.diagnose import url_problem
from contract.envelopes import Approval, EscalationStep, Responders, Route
from contract.timeout import TimeoutPolicy

__all__ = [
    "Defaults",
    "Policy",
    "PolicyFile",
    "Settings",
    "describe_validation_error",
    "load_policy_file",
    "load_settings",
]

DAY_MS = 86_400_000
MAX_TIMEOUT_CAP_MS = 366 * DAY_MS
"""No setting may allow a deadline further off than a year: every time stays printable and exact."""


def _ms(value: Any) -> Any:
    """Accept ``"10m"``-style durations wherever milliseconds are expected."""
    if isinstance(value, str):
        return parse_duration(value)
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Policy(_Strict):
    """A named policy: every field optional; an ask's own fields override the policy's."""

    route: Route | None = None
    responders: Responders | None = None
    timeout_ms: int | None = Field(default=None, ge=0, le=MAX_TIMEOUT_CAP_MS)
    on_timeout: TimeoutPolicy | None = None
    escalate: list[EscalationStep] | None = None
    remind_every_ms: int | None = Field(default=None, ge=0)
    max_reminders: int | None = Field(default=None, ge=0, le=100)
    approval: Approval | None = None
    """Several people must agree (protocol section 13); an ask's own ``approval`` overrides it."""
    thread_answers: bool | None = None
    """Answers typed in the ask's thread or DM (docs/thread-answers.md); an ask's own switch overrides it."""

    @field_validator("timeout_ms", "remind_every_ms", mode="before")
    @classmethod
    def _durations(cls, value: Any) -> Any:
        return _ms(value)

    @field_validator("escalate", mode="before")
    @classmethod
    def _step_durations(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [
                {**step, "after_ms": _ms(step.get("after_ms", step.get("after")))}
                if isinstance(step, dict) and ("after" in step or isinstance(step.get("after_ms"), str))
                else step
                for step in value
            ]
        return value


class Defaults(_Strict):
    """Defaults for asks that leave a field out, and bounds on what agents may ask for."""

    route: Route | None = None
    timeout_ms: int | None = Field(default=None, ge=0, le=MAX_TIMEOUT_CAP_MS)
    max_timeout_ms: int | None = Field(default=None, ge=0, le=MAX_TIMEOUT_CAP_MS)
    on_timeout: TimeoutPolicy = "cancel"
    retention_ms: int = Field(default=7 * DAY_MS, ge=60_000)
    max_reminders: int = Field(default=3, ge=0, le=100)

    @field_validator("timeout_ms", "max_timeout_ms", "retention_ms", mode="before")
    @classmethod
    def _durations(cls, value: Any) -> Any:
        return _ms(value)


class PolicyFile(_Strict):
    defaults: Defaults = Field(default_factory=Defaults)
    policies: dict[str, Policy] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _default_route_is_not_a_policy_loop(self) -> PolicyFile:
        for name, policy in self.policies.items():
            if policy.route is not None and policy.route.policy is not None:
                raise ValueError(f"policies.{name}.route: a policy's route cannot name another policy")
        return self


class Settings(BaseSettings):
    """Process settings. Environment names follow spec/protocol.md section 11."""

    model_config = SettingsConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    slack_bot_token: SecretStr | None = Field(default=None, validation_alias="SLACK_BOT_TOKEN")
    slack_app_token: SecretStr | None = Field(default=None, validation_alias="SLACK_APP_TOKEN")
    slack_signing_secret: SecretStr | None = Field(default=None, validation_alias="SLACK_SIGNING_SECRET")
    slack_api_url: str = Field(default="https://slack.com/api/", validation_alias="SLACK_API_URL")
    redis_url: SecretStr = Field(
        default=SecretStr("redis://localhost:6379/0"), validation_alias=AliasChoices("REDIS_URL")
    )
    prefix: str = Field(default="slack-ask", validation_alias="SLACK_ASK_PREFIX", pattern=r"^[^\s{}]{1,64}$")
    config_path: Path | None = Field(default=None, validation_alias="SLACK_ASK_CONFIG")
    default_channel: str | None = Field(default=None, validation_alias="SLACK_ASK_DEFAULT_CHANNEL")
    min_remind_ms: int = Field(default=60_000, ge=0, validation_alias="SLACK_ASK_MIN_REMIND_MS")
    open_security_asks: bool = Field(default=False, validation_alias="SLACK_ASK_OPEN_SECURITY_ASKS")
    delivery_window_ms: int = Field(default=60_000, ge=0, validation_alias="SLACK_ASK_DELIVERY_WINDOW_MS")
    # Intake leases are short and renewed while a delivery is in flight (bot.engine.leases), so a dead
    # replica's ask is taken over within seconds; reclaim looks for abandoned entries at that pace.
    intake_lease_ms: int = Field(default=6_000, ge=300, validation_alias="SLACK_ASK_INTAKE_LEASE_MS")
    reclaim_idle_ms: int = Field(default=4_000, ge=100, validation_alias="SLACK_ASK_RECLAIM_IDLE_MS")
    sweep_interval_ms: int = Field(default=200, ge=10, validation_alias="SLACK_ASK_SWEEP_INTERVAL_MS")
    idle_poll_max_ms: int = Field(default=1_000, ge=10, validation_alias="SLACK_ASK_IDLE_POLL_MAX_MS")
    """The longest pause of the timer, workflow-step and Home-tab loops after rounds that found no work
    (bot.loops.IdlePause): how late a timer may fire after an idle spell. At most the sweep interval
    turns the growing pause off."""
    timer_lease_ms: int = Field(default=30_000, ge=100, validation_alias="SLACK_ASK_TIMER_LEASE_MS")
    max_deliveries: int = Field(default=5, ge=1, validation_alias="SLACK_ASK_MAX_DELIVERIES")
    consumer_name: str | None = Field(default=None, validation_alias="SLACK_ASK_CONSUMER")
    mcp_wait_s: float = Field(default=25.0, ge=0, validation_alias="SLACK_ASK_MCP_WAIT_S")
    log_format: Literal["text", "json"] = Field(default="text", validation_alias="SLACK_ASK_LOG_FORMAT")
    # The bot's own pacing of Slack calls (bot.slack.pacing), as a multiple of Slack's published rates:
    # 1 paces at them; more for a workspace with raised limits (or the fake's sped-up ones); 0: off.
    pace_scale: float = Field(default=1.0, ge=0, validation_alias="SLACK_ASK_PACE_SCALE")
    # Every ask has a deadline (protocol section 2), so nothing lives past its keys' lifetimes.
    default_timeout_ms: int = Field(
        default=7 * DAY_MS, ge=1_000, le=MAX_TIMEOUT_CAP_MS, validation_alias="SLACK_ASK_DEFAULT_TIMEOUT_MS"
    )
    max_timeout_ms: int = Field(
        default=30 * DAY_MS, ge=1_000, le=MAX_TIMEOUT_CAP_MS, validation_alias="SLACK_ASK_MAX_TIMEOUT_MS"
    )
    # Sentinel/replicated Redis: how many replicas must hold the bot's writes before it acts on them
    # (WAIT; docs/operations.md "Failover"). 0: do not wait (standalone Redis, or Cluster).
    redis_min_replicas: int = Field(default=0, ge=0, le=16, validation_alias="SLACK_ASK_REDIS_MIN_REPLICAS")
    redis_wait_ms: int = Field(default=1_000, ge=10, le=60_000, validation_alias="SLACK_ASK_REDIS_WAIT_MS")
    loop_failing_ms: int = Field(default=60_000, ge=100, validation_alias="SLACK_ASK_LOOP_FAILING_MS")
    """``/healthz`` answers 503 once a loop has failed without a success for this long."""
    # Answers typed in an ask's thread or DM (docs/thread-answers.md): on unless turned off here, by a
    # policy or by the ask; the keyword lists are comma-separated.
    thread_answers: bool = Field(default=True, validation_alias="SLACK_ASK_THREAD_ANSWERS")
    approve_words: str = Field(
        default="approve,approved,lgtm,yes", validation_alias="SLACK_ASK_APPROVE_WORDS"
    )
    decline_words: str = Field(
        default="decline,declined,deny,denied,reject,rejected", validation_alias="SLACK_ASK_DECLINE_WORDS"
    )
    policy_file: PolicyFile = Field(default_factory=PolicyFile, exclude=True)

    @model_validator(mode="after")
    def _default_within_max(self) -> Settings:
        if self.default_timeout_ms > self.max_timeout_ms:
            raise ValueError(
                f"SLACK_ASK_DEFAULT_TIMEOUT_MS ({self.default_timeout_ms}) is larger than "
                f"SLACK_ASK_MAX_TIMEOUT_MS ({self.max_timeout_ms})"
            )
        return self

    @field_validator("slack_api_url")
    @classmethod
    def _trailing_slash(cls, value: str) -> str:
        # SLACK_API_URL works with or without its trailing slash (protocol section 11).
        if not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL, like https://slack.com/api/")
        return value if value.endswith("/") else value + "/"

    @field_validator("redis_url")
    @classmethod
    def _redis_scheme(cls, value: SecretStr) -> SecretStr:
        # The whole URL, not just its scheme: a port that is not a number must stop serve here with
        # one line, not as a traceback from redis-py when the first connection is made.
        if (problem := url_problem(value.get_secret_value())) is not None:
            raise ValueError(problem)
        return value

    @property
    def intake_lease(self) -> int:
        """The intake lease in ms: ``intake_lease_ms``, at most twice the delivery window (the lease
        a delivery had before renewals; a short window, as in tests, keeps its short lease)."""
        return min(self.intake_lease_ms, max(self.delivery_window_ms * 2, 1_000))

    @property
    def defaults(self) -> Defaults:
        return self.policy_file.defaults

    @property
    def default_route(self) -> Route | None:
        if self.policy_file.defaults.route is not None:
            return self.policy_file.defaults.route
        if self.default_channel:
            return Route(channel=self.default_channel)
        return None


def describe_validation_error(err: ValidationError, *, where: str) -> str:
    """One line naming the setting (or file field) and what is wrong with it."""
    first = err.errors(include_url=False)[0]
    loc = ".".join(str(p) for p in first["loc"]) or "(top level)"
    msg = str(first["msg"]).removeprefix("Value error, ")
    more = len(err.errors()) - 1
    tail = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    return f"{where}: {loc}: {msg}{tail}"


def load_policy_file(path: Path) -> PolicyFile:
    """Read a TOML or YAML policy file; errors name the file, the policy and the field."""
    try:
        raw_text = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"SLACK_ASK_CONFIG: cannot read {path}: {exc.strerror}") from None
    try:
        if path.suffix.lower() == ".toml":
            data: Any = tomllib.loads(raw_text.decode("utf-8"))
        else:
            data = yaml.safe_load(raw_text) or {}
    except (tomllib.TOMLDecodeError, yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"{path}: not valid {'TOML' if path.suffix == '.toml' else 'YAML'}: {exc}"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a table/mapping with 'defaults' and 'policies'")
    try:
        return PolicyFile.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc, where=str(path))) from None


def load_settings(**overrides: Any) -> Settings:
    """Settings from the environment (plus overrides), with the policy file loaded and checked."""
    try:
        settings = Settings(**overrides)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        field = str(first["loc"][0]) if first["loc"] else ""
        env = _ENV_NAMES.get(field, field)
        msg = str(first["msg"]).removeprefix("Value error, ")
        raise ConfigError(f"setting {env}: {msg}") from None
    if settings.config_path is not None:
        settings = settings.model_copy(update={"policy_file": load_policy_file(settings.config_path)})
    return settings


_ENV_NAMES = {
    name: str(field.validation_alias) if isinstance(field.validation_alias, str) else name.upper()
    for name, field in Settings.model_fields.items()
}
_ENV_NAMES["redis_url"] = "REDIS_URL"
