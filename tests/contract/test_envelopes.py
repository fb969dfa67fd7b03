"""The wire envelopes: every field rule of protocol sections 2, 3 and 8."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contract import (
    CancelEnvelope,
    EnvelopeError,
    ResultDelivery,
    ResultEnvelope,
    parse_ask_envelope,
    parse_cancel_envelope,
)

ASK: dict[str, Any] = {
    "v": 1,
    "ask_id": "build-42:deploy.v2~a_b",
    "reply_to": "{agent}:replies",
    "request": {"question": "Ship?", "options": ["yes", "no"]},
}
CANCEL: dict[str, Any] = {"v": 1, "ask_id": "build-42", "reply_to": "replies", "reason": "plans changed"}
MISSING = object()


def _with(base: dict[str, Any], **changes: Any) -> str:
    """``base`` with fields changed (``MISSING`` removes one), as JSON text."""
    envelope = {**base, **changes}
    return json.dumps({key: value for key, value in envelope.items() if value is not MISSING})


def _ask_error(**changes: Any) -> EnvelopeError:
    with pytest.raises(EnvelopeError) as caught:
        parse_ask_envelope(_with(ASK, **changes))
    return caught.value


class TestAskEnvelope:
    def test_minimal_envelope_gets_the_defaults(self) -> None:
        """Only v, ask_id, reply_to and request are required; the rest default."""
        envelope = parse_ask_envelope(_with(ASK))

        assert (envelope.format, envelope.route, envelope.timeout_ms, envelope.on_timeout) == (
            "pi-question",
            None,
            None,
            None,
        )
        assert (envelope.escalate, envelope.responders, envelope.remind_every_ms) == ([], None, None)

    def test_full_envelope_is_read(self) -> None:
        """Every optional field is read into its model."""
        envelope = parse_ask_envelope(
            _with(
                ASK,
                format="rich",
                route={"channel": "C0123", "thread_ts": "1700000000.000100"},
                timeout_ms=60000,
                on_timeout="recommended",
                responders={"users": ["U0123ABCD"], "usergroups": ["S0123ABCD"]},
                requester={"name": "ci", "session": "s", "title": "t", "url": "https://ci.example/1"},
                escalate=[{"after_ms": 1000, "user": "ops@example.com", "mention": "S0123ABCD"}],
                remind_every_ms=120000,
            )
        )

        assert envelope.route is not None
        assert envelope.route.thread_ts == "1700000000.000100"
        assert envelope.escalate[0].mention == ["S0123ABCD"]
        assert envelope.responders is not None
        assert envelope.responders.usergroups == ["S0123ABCD"]

    def test_bytes_are_accepted(self) -> None:
        """The stream field may arrive as bytes."""
        assert parse_ask_envelope(_with(ASK).encode()).ask_id == ASK["ask_id"]

    def test_unknown_fields_are_ignored_at_every_level(self) -> None:
        """Forward compatibility: unknown fields anywhere are dropped, not refused."""
        envelope = parse_ask_envelope(
            _with(ASK, priority="high", route={"channel": "C0123", "color": "red"}, requester={"avatar": "x"})
        )

        assert envelope.ask_id == ASK["ask_id"]
        assert "priority" not in envelope.model_dump()

    @pytest.mark.parametrize("timeout", [0, 5.0])
    def test_integral_numbers_are_integers(self, timeout: float) -> None:
        """JSON has one number type: 5.0 is the integer 5."""
        value = parse_ask_envelope(_with(ASK, timeout_ms=timeout)).timeout_ms

        assert value == timeout
        assert type(value) is int


class TestVersion:
    def test_missing_version_is_an_invalid_envelope(self) -> None:
        """An envelope without v is invalid_envelope, naming v."""
        err = _ask_error(v=MISSING)

        assert (err.code, str(err)) == ("invalid_envelope", "v is required (protocol version 1)")

    @pytest.mark.parametrize("version", [2, 0, "1", True, None, 1.5, [1], {"major": 1}])
    def test_any_other_version_is_unsupported(self, version: object) -> None:
        """Every value but 1 gives unsupported_version, and the ids still come back."""
        err = _ask_error(v=version)

        assert err.code == "unsupported_version"
        assert "this bot speaks version 1" in str(err)
        assert (err.ask_id, err.reply_to) == (ASK["ask_id"], ASK["reply_to"])

    def test_version_one_point_zero_is_version_one(self) -> None:
        """1.0 is the JSON number 1."""
        assert parse_ask_envelope(_with(ASK, v=1.0)).v == 1

    def test_version_is_checked_before_the_other_fields(self) -> None:
        """A v=2 envelope with other errors reports the version."""
        assert _ask_error(v=2, request=None, format="xml").code == "unsupported_version"

    def test_long_versions_are_shortened_in_the_message(self) -> None:
        """An agent's junk in v does not flood the message."""
        message = str(_ask_error(v="x" * 1000))

        assert "x" * 40 not in message
        assert message.endswith("... is not supported; this bot speaks version 1")


class TestUnreadableText:
    @pytest.mark.parametrize("text", ["", "{", "not json", "{'v': 1}", "[" * 100_000])
    def test_text_that_is_not_json_is_an_invalid_envelope(self, text: str) -> None:
        """Bad JSON (deep nesting included) gives invalid_envelope with no ids."""
        with pytest.raises(EnvelopeError) as caught:
            parse_ask_envelope(text)

        assert (caught.value.code, caught.value.ask_id, caught.value.reply_to) == (
            "invalid_envelope",
            None,
            None,
        )
        assert "not valid JSON" in str(caught.value)

    @pytest.mark.parametrize("text", ["[]", '"ask"', "1", "null"])
    def test_json_that_is_not_an_object_is_an_invalid_envelope(self, text: str) -> None:
        """The field must hold a JSON object."""
        with pytest.raises(EnvelopeError, match="must be a JSON object") as caught:
            parse_ask_envelope(text)

        assert caught.value.code == "invalid_envelope"

    def test_invalid_utf8_is_an_invalid_envelope(self) -> None:
        """Bytes that are not text give invalid_envelope."""
        with pytest.raises(EnvelopeError) as caught:
            parse_ask_envelope(b'{"v": 1, "ask_id": "\xff"}')

        assert caught.value.code == "invalid_envelope"


class TestReadableIds:
    @pytest.mark.parametrize("ask_id", [MISSING, "", "has space", "x" * 129, "é", 42, None])
    def test_unreadable_ask_id_still_returns_reply_to(self, ask_id: object) -> None:
        """With a bad ask_id the error still carries reply_to, so the agent gets its result."""
        err = _ask_error(ask_id=ask_id)

        assert (err.code, err.ask_id, err.reply_to) == ("invalid_envelope", None, ASK["reply_to"])
        assert "ask_id" in str(err)

    @pytest.mark.parametrize("reply_to", [MISSING, "", "has space", "tab\there", "x" * 513, 7])
    def test_unreadable_reply_to_is_reported(self, reply_to: object) -> None:
        """A bad reply_to is named; no reply_to comes back (the bot dead-letters it)."""
        err = _ask_error(reply_to=reply_to)

        assert (err.code, err.ask_id, err.reply_to) == ("invalid_envelope", ASK["ask_id"], None)
        assert "reply_to" in str(err)

    def test_ids_at_their_length_limits_are_accepted(self) -> None:
        """128-character ask ids and 512-character reply lists are fine."""
        envelope = parse_ask_envelope(_with(ASK, ask_id="a" * 128, reply_to="r" * 512))

        assert (len(envelope.ask_id), len(envelope.reply_to)) == (128, 512)

    def test_errors_elsewhere_return_both_ids(self) -> None:
        """Any later field error still carries both readable ids."""
        err = _ask_error(format="xml")

        assert (err.ask_id, err.reply_to) == (ASK["ask_id"], ASK["reply_to"])


FIELD_RULES = [
    pytest.param({"format": "xml"}, "format", id="format-unknown"),
    pytest.param({"request": MISSING}, "request", id="request-missing"),
    pytest.param({"request": ["q"]}, "request", id="request-array"),
    pytest.param({"request": "Ship?"}, "request", id="request-string"),
    pytest.param({"route": "C0123"}, "route", id="route-string"),
    pytest.param({"route": {}}, "route", id="route-no-target"),
    pytest.param({"route": {"channel": "C1", "user": "U1"}}, "route", id="route-two-targets"),
    pytest.param({"route": {"user": "U1", "thread_ts": "1.2"}}, "route", id="route-thread-without-channel"),
    pytest.param(
        {"route": {"channel": "C1", "thread_ts": "yesterday"}}, "route.thread_ts", id="route-bad-ts"
    ),
    pytest.param({"route": {"channel": "C" * 65}}, "route.channel", id="route-channel-too-long"),
    pytest.param({"route": {"policy": ""}}, "route.policy", id="route-policy-empty"),
    pytest.param({"timeout_ms": -1}, "timeout_ms", id="timeout-negative"),
    pytest.param({"timeout_ms": "60000"}, "timeout_ms", id="timeout-string"),
    pytest.param({"timeout_ms": True}, "timeout_ms", id="timeout-bool"),
    pytest.param({"timeout_ms": 1.5}, "timeout_ms", id="timeout-fraction"),
    pytest.param({"on_timeout": "retry"}, "on_timeout", id="on-timeout-unknown"),
    pytest.param({"responders": ["U0123ABCD"]}, "responders", id="responders-array"),
    pytest.param({"responders": {"users": ["bob"]}}, "responders.users", id="responders-bad-user"),
    pytest.param(
        {"responders": {"usergroups": "S0123"}}, "responders.usergroups", id="responders-groups-string"
    ),
    pytest.param({"requester": "me"}, "requester", id="requester-string"),
    pytest.param({"requester": {"url": "ftp://x"}}, "requester.url", id="requester-url-scheme"),
    pytest.param({"requester": {"url": "https://x/<!here>"}}, "requester.url", id="requester-url-brackets"),
    pytest.param({"requester": {"name": "n" * 201}}, "requester.name", id="requester-name-too-long"),
    pytest.param({"escalate": {}}, "escalate", id="escalate-object"),
    pytest.param({"escalate": [{"after_ms": 1}]}, "escalate.0", id="escalate-no-target"),
    pytest.param(
        {"escalate": [{"after_ms": 1, "channel": "C1", "user": "U1"}]}, "escalate.0", id="escalate-both"
    ),
    pytest.param({"escalate": [{"channel": "C1"}]}, "escalate.0.after_ms", id="escalate-no-after"),
    pytest.param(
        {"escalate": [{"after_ms": -1, "channel": "C1"}]}, "escalate.0.after_ms", id="escalate-negative"
    ),
    pytest.param(
        {"escalate": [{"after_ms": 1, "channel": "C1", "mention": ["@here"]}]},
        "escalate.0.mention",
        id="escalate-broadcast-mention",
    ),
    pytest.param({"escalate": [{"after_ms": 1, "channel": "C1"}] * 11}, "escalate", id="escalate-too-many"),
    pytest.param({"remind_every_ms": -5}, "remind_every_ms", id="remind-negative"),
    pytest.param({"remind_every_ms": False}, "remind_every_ms", id="remind-bool"),
]


@pytest.mark.parametrize(("changes", "field"), FIELD_RULES)
def test_every_field_rule_is_an_invalid_envelope_naming_the_field(
    changes: dict[str, Any], field: str
) -> None:
    """A broken field gives invalid_envelope whose message starts with the field's path."""
    err = _ask_error(**changes)

    assert err.code == "invalid_envelope"
    assert str(err).startswith(f"{field}:") or str(err) == f"{field} is required"


class TestCancelEnvelope:
    def test_cancel_is_read(self) -> None:
        """A cancel carries ask_id, reply_to and an optional reason."""
        assert parse_cancel_envelope(_with(CANCEL)) == CancelEnvelope(
            v=1, ask_id="build-42", reply_to="replies", reason="plans changed"
        )

    def test_reason_is_optional(self) -> None:
        """Without a reason the cancel is still valid."""
        assert parse_cancel_envelope(_with(CANCEL, reason=MISSING)).reason is None

    @pytest.mark.parametrize(
        ("changes", "field"),
        [
            ({"reason": 5}, "reason"),
            ({"reason": "r" * 2001}, "reason"),
            ({"ask_id": MISSING}, "ask_id"),
            ({"reply_to": "a b"}, "reply_to"),
        ],
    )
    def test_cancel_field_rules(self, changes: dict[str, Any], field: str) -> None:
        """Each cancel field rule gives invalid_envelope naming the field."""
        with pytest.raises(EnvelopeError) as caught:
            parse_cancel_envelope(_with(CANCEL, **changes))

        assert caught.value.code == "invalid_envelope"
        assert str(caught.value).startswith(field)

    def test_cancel_versions_follow_the_ask_rules(self) -> None:
        """Missing v is invalid_envelope; v=2 is unsupported_version with the readable ids."""
        with pytest.raises(EnvelopeError) as missing:
            parse_cancel_envelope(_with(CANCEL, v=MISSING))
        with pytest.raises(EnvelopeError) as newer:
            parse_cancel_envelope(_with(CANCEL, v=2, ask_id="bad id"))

        assert missing.value.code == "invalid_envelope"
        assert (newer.value.code, newer.value.ask_id, newer.value.reply_to) == (
            "unsupported_version",
            None,
            "replies",
        )

    def test_unknown_cancel_fields_are_ignored(self) -> None:
        """Forward compatibility holds for cancels too."""
        assert parse_cancel_envelope(_with(CANCEL, urgent=True)).ask_id == "build-42"


ERROR_RESULT = ResultEnvelope(
    ask_id=None,
    format="pi-question",
    outcome="error",
    answers=[],
    text="Error: questions must not be empty",
    details={},
    delivery=ResultDelivery(surface="none"),
)


class TestResultEnvelope:
    def test_every_field_is_always_written(self) -> None:
        """The wire form has every protocol field, null when empty."""
        assert ERROR_RESULT.to_wire() == {
            "v": 1,
            "ask_id": None,
            "format": "pi-question",
            "outcome": "error",
            "answers": [],
            "text": "Error: questions must not be empty",
            "details": {},
            "delivery": {"surface": "none", "degraded": False},
            "responder": None,
            "votes": None,
            "via": None,
            "slack": None,
            "error": None,
            "created_at": None,
            "resolved_at": None,
        }

    def test_results_reject_unknown_fields(self) -> None:
        """The bot writes results; a typo in a field name is a bug, so it is refused."""
        with pytest.raises(ValueError, match="bogus"):
            ResultEnvelope.model_validate({**ERROR_RESULT.to_wire(), "bogus": 1})

    def test_wire_form_validates_back(self) -> None:
        """A result read back from its wire form is the same result."""
        assert ResultEnvelope.model_validate(ERROR_RESULT.to_wire()) == ERROR_RESULT
