"""What the HTTP edge hands Bolt of a signed body (bot.slack.edge.bolt_body): the body read once, the way
Bolt reads it, so Bolt's request holds the same payload it would have parsed itself."""

from __future__ import annotations

import json
from urllib.parse import parse_qsl, quote, quote_plus, urlencode

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from slack_bolt.request.async_request import AsyncBoltRequest

from bot.slack.edge import Refused, _form_field, bolt_body
from tests.test_render_mrkdwn import HOSTILE

FORM = "application/x-www-form-urlencoded"
CLICK = {
    "type": "block_actions",
    "user": {"id": "U0ALICE"},
    "actions": [{"action_id": "slack_ask:choose:0", "value": "a+b %41 & = ?"}],
    "message": {"text": " ".join(HOSTILE)},
}


def _bolt_parsed(body: str, content_type: str) -> object:
    """The body as Bolt parses the raw text itself (the reading the edge must agree with)."""
    return AsyncBoltRequest(body=body, headers={"content-type": content_type}).body


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        ("payload=" + quote_plus(json.dumps(CLICK)), FORM),
        ("payload=" + quote_plus("  \n" + json.dumps(CLICK)), FORM),  # JSON may start with blanks
        (urlencode({"token": "x", "payload": json.dumps(CLICK), "other": "1"}), FORM),
        (json.dumps({"type": "event_callback", "event": {"type": "message"}}), "application/json"),
        (json.dumps({"type": "url_verification", "challenge": "c"}), FORM),  # JSON by its first "{"
        ("ssl_check=1&token=x", FORM),  # a form without a payload is handed on as sent
        ("", FORM),
    ],
)
def test_bolt_gets_what_it_would_have_parsed_itself(body: str, content_type: str) -> None:
    handed = bolt_body(body.encode(), content_type)
    assert isinstance(handed, str)
    assert _bolt_parsed(handed, content_type) == _bolt_parsed(body, content_type)


def test_a_click_is_handed_on_as_its_payload_s_json() -> None:
    body = "payload=" + quote_plus(json.dumps(CLICK))
    handed = bolt_body(body.encode(), FORM)
    assert isinstance(handed, str) and json.loads(handed) == CLICK  # decoded once, here


@pytest.mark.parametrize(
    ("body", "content_type", "reason"),
    [
        (b"\xff\xfe", FORM, "body is not UTF-8"),
        (b"[1, 2]", "application/json", "a JSON body must be an object"),
        (b"{{{{{", FORM, "body is not valid JSON or form data"),
        (b"payload=%7Bbroken", FORM, "body is not valid JSON or form data"),
        (b"payload=%5B1%5D", FORM, "payload must be a JSON object"),
        (b"payload=" + b"%5B" * 100_000, FORM, "body is not valid JSON or form data"),
    ],
)
def test_a_signed_body_that_is_not_slack_s_is_refused_with_400(
    body: bytes, content_type: str, reason: str
) -> None:
    assert bolt_body(body, content_type) == Refused(400, reason)


_FORM_TEXT = st.lists(
    st.sampled_from([*'ab+=&;%\n\r\t {}"\\é✓\x00', "%2", "%G1", "%41", "%e9", "%C3", "%A9", "%3D", "%3d"]),
    max_size=40,
).map("".join)


@settings(max_examples=3000, deadline=None)
@given(_FORM_TEXT, _FORM_TEXT)
def test_a_form_s_payload_is_read_as_parse_qsl_reads_it(value: str, before: str) -> None:
    """The edge's own form reading (a C fast path for the percent-decoding) agrees with the standard
    library's on any body, escaped or raw, well-formed or not."""
    for body in (
        f"{before}&payload={value}",
        "payload=" + quote_plus(value),
        "payload=" + quote(value),
        "payload=" + quote_plus(value).lower(),
        f"payload={value}&payload=" + quote_plus(before),
    ):
        expected = dict(parse_qsl(body, keep_blank_values=True)).get("payload")
        assert _form_field(body, "payload") == expected, body
