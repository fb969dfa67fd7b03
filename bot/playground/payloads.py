"""What Slack sends an app, built from the fake's state: interaction payloads, event envelopes, signatures.

Pure functions, no I/O. Shapes follow Slack's interaction payload reference and bolt-python's own test
fixtures (tests/scenario_tests_async/test_block_actions.py, test_view_submission.py); the signature is
the v0 HMAC that `slack_sdk.signature.SignatureVerifier` checks.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import time
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.playground.errors import FakeSlackError
from bot.playground.state import JSON, Channel, User, Workspace

__all__ = [
    "VERIFICATION_TOKEN",
    "Element",
    "action_for",
    "answer_state",
    "archive_event",
    "block_actions_payload",
    "click",
    "describe_elements",
    "event_envelope",
    "find_element",
    "find_option",
    "form_body",
    "initial_state",
    "iter_elements",
    "message_deleted_event",
    "message_removed_event",
    "sign",
    "signed_headers",
    "state_values",
    "view_closed_payload",
    "view_submission_payload",
]

# The legacy verification token rides in every payload; Bolt ignores it but real payloads carry it.
VERIFICATION_TOKEN = "fake-verification-token"

# Element type -> the key its value has in `state.values` (and in the action, for selects and inputs).
STATE_KEYS: dict[str, str] = {
    "radio_buttons": "selected_option",
    "static_select": "selected_option",
    "external_select": "selected_option",
    "checkboxes": "selected_options",
    "multi_static_select": "selected_options",
    "multi_external_select": "selected_options",
    "plain_text_input": "value",
    "number_input": "value",
    "email_text_input": "value",
    "url_text_input": "value",
    "rich_text_input": "rich_text_value",
    "datepicker": "selected_date",
    "timepicker": "selected_time",
    "datetimepicker": "selected_date_time",
    "users_select": "selected_user",
    "multi_users_select": "selected_users",
    "conversations_select": "selected_conversation",
    "multi_conversations_select": "selected_conversations",
    "channels_select": "selected_channel",
    "multi_channels_select": "selected_channels",
}

# State key -> the element field that pre-fills it.
INITIAL_KEYS: dict[str, str] = {
    "selected_option": "initial_option",
    "selected_options": "initial_options",
    "value": "initial_value",
    "rich_text_value": "initial_value",
    "selected_date": "initial_date",
    "selected_time": "initial_time",
    "selected_date_time": "initial_date_time",
    "selected_user": "initial_user",
    "selected_users": "initial_users",
    "selected_conversation": "initial_conversation",
    "selected_conversations": "initial_conversations",
    "selected_channel": "initial_channel",
    "selected_channels": "initial_channels",
}

LIST_KEYS = frozenset(
    {"selected_options", "selected_users", "selected_conversations", "selected_channels"},
)

# Interactive but stateless: the value only travels in the action itself.
STATELESS = frozenset({"button", "overflow", "workflow_button"})


# signing


def sign(secret: str, timestamp: str, body: str) -> str:
    """Slack's request signature: `v0=` + hex HMAC-SHA256 of `v0:{timestamp}:{body}`."""
    basestring = f"v0:{timestamp}:{body}".encode()
    return "v0=" + hmac.new(secret.encode(), basestring, hashlib.sha256).hexdigest()


def signed_headers(
    secret: str,
    body: str,
    *,
    timestamp: int | None = None,
    content_type: str | None = None,
) -> dict[str, str]:
    """Headers Slack puts on a request to the app: content type, timestamp and signature."""
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    if content_type is None:
        content_type = (
            "application/json" if body.lstrip().startswith("{") else "application/x-www-form-urlencoded"
        )
    return {
        "Content-Type": content_type,
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": sign(secret, stamp, body),
    }


def form_body(payload: JSON) -> str:
    """An interaction payload the way Slack posts it: `payload=<url-encoded JSON>`."""
    return urllib.parse.urlencode({"payload": json.dumps(payload, separators=(",", ":"))})


# finding rendered elements


@dataclass(frozen=True)
class Element:
    """An interactive element as rendered, with the block that holds it."""

    block: JSON
    element: JSON

    @property
    def block_id(self) -> str:
        return str(self.block.get("block_id", ""))

    @property
    def action_id(self) -> str:
        return str(self.element.get("action_id", ""))

    @property
    def type(self) -> str:
        return str(self.element.get("type", ""))

    @property
    def state_key(self) -> str | None:
        return STATE_KEYS.get(self.type)

    @property
    def dispatches(self) -> bool:
        """Whether changing it sends a block_actions payload (input blocks only with dispatch_action)."""
        return self.block.get("type") != "input" or bool(self.block.get("dispatch_action"))

    def describe(self) -> str:
        label = f"{self.action_id} ({self.type}"
        if "value" in self.element:
            label += f", value={self.element['value']!r}"
        options = options_of(self.element)
        if options:
            label += ", options=" + "/".join(repr(o.get("value")) for o in options)
        return label + f", block {self.block_id!r})"


def iter_elements(blocks: Sequence[JSON]) -> Iterator[Element]:
    """Every interactive element in `blocks`, in rendering order."""
    for block in blocks:
        kind = block.get("type")
        candidates: list[Any] = []
        if kind == "actions":
            candidates = list(block.get("elements") or [])
        elif kind == "section":
            candidates = [block.get("accessory")]
        elif kind == "input":
            candidates = [block.get("element")]
        for element in candidates:
            if isinstance(element, dict) and "action_id" in element and element.get("type") != "image":
                yield Element(block=block, element=element)


def describe_elements(blocks: Sequence[JSON]) -> str:
    described = [e.describe() for e in iter_elements(blocks)]
    return "; ".join(described) if described else "no interactive elements"


def options_of(element: Mapping[str, Any]) -> list[JSON]:
    options = list(element.get("options") or [])
    for group in element.get("option_groups") or []:
        options.extend(group.get("options") or [])
    return options


def _option_label(option: Mapping[str, Any]) -> str:
    text = option.get("text")
    return str(text.get("text", "")) if isinstance(text, dict) else ""


def find_option(element: Mapping[str, Any], wanted: str | Mapping[str, Any]) -> JSON:
    """The option of `element` whose value (else visible text) is `wanted`, copied as Slack echoes it."""
    key = str(wanted.get("value")) if isinstance(wanted, Mapping) else wanted
    options = options_of(element)
    for option in options:
        if option.get("value") == key:
            return copy.deepcopy(option)
    for option in options:
        if _option_label(option) == key:
            return copy.deepcopy(option)
    available = ", ".join(repr(o.get("value")) for o in options) or "none"
    msg = f"element {element.get('action_id')!r} has no option {key!r}; its option values: {available}"
    raise FakeSlackError(msg)


def find_element(
    blocks: Sequence[JSON],
    action_id: str,
    *,
    block_id: str | None = None,
    value: str | None = None,
    where: str = "the message",
) -> Element:
    """The one rendered element a human would click. Raise `FakeSlackError` naming what is there instead."""
    matches: list[Element] = []
    for found in iter_elements(blocks):
        if found.action_id != action_id or (block_id is not None and found.block_id != block_id):
            continue
        if value is not None:
            if found.type == "button" and found.element.get("value") != value:
                continue
            if found.type != "button" and options_of(found.element):
                values = {o.get("value") for o in options_of(found.element)}
                labels = {_option_label(o) for o in options_of(found.element)}
                if value not in values and value not in labels:
                    continue
        matches.append(found)
    wanted = f"action_id {action_id!r}" + (f" with value {value!r}" if value is not None else "")
    if block_id is not None:
        wanted += f" in block {block_id!r}"
    if not matches:
        msg = f"no element with {wanted} in {where}; rendered: {describe_elements(blocks)}"
        raise FakeSlackError(msg)
    if len(matches) > 1:
        msg = (
            f"{len(matches)} elements match {wanted} in {where}; pass block_id or value to pick one: "
            + "; ".join(m.describe() for m in matches)
        )
        raise FakeSlackError(msg)
    return matches[0]


# state


def initial_state(element: Mapping[str, Any]) -> JSON:
    """The `state.values` entry of an untouched element (its initial value, else empty)."""
    kind = str(element.get("type", ""))
    key = STATE_KEYS[kind]
    initial = element.get(INITIAL_KEYS[key])
    if initial is None:
        initial = [] if key in LIST_KEYS else None
    return {"type": kind, key: copy.deepcopy(initial)}


def state_values(
    blocks: Sequence[JSON], entered: Mapping[str, Mapping[str, JSON]]
) -> dict[str, dict[str, JSON]]:
    """`state.values` of a surface: every stateful element's initial value, overlaid by what was entered.

    Entries for elements no longer rendered are dropped; a kept block_id+action_id keeps its value,
    which is why Slack advises a new block_id when a message is updated.
    """
    values: dict[str, dict[str, JSON]] = {}
    for found in iter_elements(blocks):
        if found.state_key is None:
            continue
        current = entered.get(found.block_id, {}).get(found.action_id)
        if current is not None and current.get("type") == found.type:
            entry = copy.deepcopy(dict(current))
        else:
            entry = initial_state(found.element)
        values.setdefault(found.block_id, {})[found.action_id] = entry
    return values


def answer_state(found: Element, answer: Any) -> JSON:
    """The `state.values` entry for `answer` put into `found`.

    Options are picked by value (or visible text); text inputs take the text; lists for multi-selects.
    """
    key = found.state_key
    if key is None:
        msg = f"{found.describe()} holds no value; click it instead"
        raise FakeSlackError(msg)
    if key == "selected_option":
        picked: Any = None if answer is None else find_option(found.element, answer)
    elif key == "selected_options":
        answers = [answer] if isinstance(answer, (str, Mapping)) else list(answer or [])
        picked = [find_option(found.element, a) for a in answers]
    elif key in LIST_KEYS:
        picked = [answer] if isinstance(answer, str) else list(answer or [])
    elif key == "value":
        picked = None if answer is None else str(answer)
    else:
        picked = answer
    return {"type": found.type, key: picked}


def click(
    found: Element,
    blocks: Sequence[JSON],
    entered: dict[str, dict[str, JSON]],
    *,
    value: str | None,
    values: Iterable[str] | None,
    action_ts: str,
) -> JSON:
    """The `actions[0]` entry one click on `found` sends; the element's new state goes into `entered`
    (what the user has entered in `blocks` so far: a message's draft, a modal's state)."""
    current = state_values(blocks, entered).get(found.block_id, {}).get(found.action_id)
    action, new_state = action_for(
        found,
        value=value,
        values=None if values is None else list(values),
        current=current,
        action_ts=action_ts,
    )
    if new_state is not None:
        entered.setdefault(found.block_id, {})[found.action_id] = new_state
    return action


def action_for(
    found: Element,
    *,
    value: str | None,
    values: Sequence[str] | None,
    current: Mapping[str, Any] | None,
    action_ts: str,
) -> tuple[JSON, JSON | None]:
    """The `actions[0]` entry of a block_actions payload, and the element's new state (None if stateless).

    `value` picks a button (by its value) or an option; for checkboxes and multi-selects `values` is the
    whole new selection, while a lone `value` toggles that option as a click on a checkbox does.
    """
    element = found.element
    action: JSON = {"action_id": found.action_id, "block_id": found.block_id, "type": found.type}
    new_state: JSON | None = None
    if found.type in ("button", "workflow_button"):
        action["text"] = copy.deepcopy(element.get("text"))
        if "value" in element:
            action["value"] = element["value"]
        if "style" in element:
            action["style"] = element["style"]
    elif found.type == "overflow":
        if value is None:
            msg = f"choose an option of {found.describe()} with value="
            raise FakeSlackError(msg)
        action["selected_option"] = find_option(element, value)
    elif found.state_key == "selected_options":
        if values is not None:
            new_state = answer_state(found, list(values))
        elif value is not None:
            selected = list((current or {}).get("selected_options") or [])
            option = find_option(element, value)
            kept = [o for o in selected if o.get("value") != option.get("value")]
            new_state = {
                "type": found.type,
                "selected_options": kept if len(kept) < len(selected) else [*kept, option],
            }
        else:
            msg = f"choose options of {found.describe()} with value= (toggle one) or values= (the whole set)"
            raise FakeSlackError(msg)
        action["selected_options"] = copy.deepcopy(new_state["selected_options"])
    elif found.state_key is not None:
        chosen: Any = list(values) if values is not None else value
        if chosen is None:
            msg = f"give the value to enter into {found.describe()} with value="
            raise FakeSlackError(msg)
        new_state = answer_state(found, chosen)
        action[found.state_key] = copy.deepcopy(new_state[found.state_key])
    else:
        msg = f"the fake cannot act on {found.describe()} yet"
        raise FakeSlackError(msg)
    if "placeholder" in element and found.type.endswith("select"):
        action["placeholder"] = copy.deepcopy(element["placeholder"])
    action["action_ts"] = action_ts
    return action, new_state


# payloads


def user_ref(user: User, team_id: str) -> JSON:
    return {"id": user.id, "username": user.name, "name": user.name, "team_id": team_id}


def team_ref(ws: Workspace) -> JSON:
    return {"id": ws.team_id, "domain": ws.team_domain}


def channel_ref(channel: Channel) -> JSON:
    return {"id": channel.id, "name": "directmessage" if channel.is_im else channel.name}


def click_payload(
    ws: Workspace,
    *,
    user: User,
    found: Element,
    blocks: Sequence[JSON],
    entered: dict[str, dict[str, JSON]],
    value: str | None,
    values: Iterable[str] | None,
    trigger_id: str,
    container: JSON,
    response_url: str | None = None,
    channel: Channel | None = None,
    message: JSON | None = None,
    view: JSON | None = None,
) -> JSON:
    """The `block_actions` payload of one click on `found` in `blocks` (a message or a view), its new
    state put into `entered` first, as Slack sends it with the surface's state after the click."""
    action = click(found, blocks, entered, value=value, values=values, action_ts=ws.next_ts())
    return block_actions_payload(
        ws,
        user=user,
        actions=[action],
        state=state_values(blocks, entered),
        trigger_id=trigger_id,
        container=container,
        response_url=response_url,
        channel=channel,
        message=message,
        view=view,
    )


def block_actions_payload(
    ws: Workspace,
    *,
    user: User,
    actions: list[JSON],
    state: dict[str, dict[str, JSON]],
    trigger_id: str,
    container: JSON,
    response_url: str | None = None,
    channel: Channel | None = None,
    message: JSON | None = None,
    view: JSON | None = None,
) -> JSON:
    """A `block_actions` payload from a message (pass channel and message, not for ephemerals) or a view."""
    payload: JSON = {
        "type": "block_actions",
        "user": user_ref(user, ws.team_id),
        "api_app_id": ws.bot.app_id,
        "token": VERIFICATION_TOKEN,
        "container": container,
        "trigger_id": trigger_id,
        "team": team_ref(ws),
        "enterprise": None,
        "is_enterprise_install": False,
    }
    if channel is not None:
        payload["channel"] = channel_ref(channel)
    if message is not None:
        payload["message"] = message
    if view is not None:
        payload["view"] = view
    payload["state"] = {"values": state}
    if response_url is not None:
        payload["response_url"] = response_url
    payload["actions"] = actions
    return payload


def view_submission_payload(ws: Workspace, *, user: User, view: JSON, trigger_id: str) -> JSON:
    return {
        "type": "view_submission",
        "team": team_ref(ws),
        "user": user_ref(user, ws.team_id),
        "api_app_id": ws.bot.app_id,
        "token": VERIFICATION_TOKEN,
        "trigger_id": trigger_id,
        "view": view,
        "response_urls": [],
        "is_enterprise_install": False,
        "enterprise": None,
    }


def view_closed_payload(ws: Workspace, *, user: User, view: JSON, is_cleared: bool) -> JSON:
    return {
        "type": "view_closed",
        "team": team_ref(ws),
        "user": user_ref(user, ws.team_id),
        "api_app_id": ws.bot.app_id,
        "token": VERIFICATION_TOKEN,
        "view": view,
        "is_cleared": is_cleared,
        "is_enterprise_install": False,
        "enterprise": None,
    }


def event_envelope(ws: Workspace, event: JSON, *, event_id: str, event_time: int) -> JSON:
    """The Events API `event_callback` envelope around `event`, authorised for the bot."""
    return {
        "token": VERIFICATION_TOKEN,
        "team_id": ws.team_id,
        "context_team_id": ws.team_id,
        "context_enterprise_id": None,
        "api_app_id": ws.bot.app_id,
        "event": event,
        "type": "event_callback",
        "event_id": event_id,
        "event_time": event_time,
        "authorizations": [
            {
                "enterprise_id": None,
                "team_id": ws.team_id,
                "user_id": ws.bot.user_id,
                "is_bot": True,
                "is_enterprise_install": False,
            }
        ],
        "is_ext_shared_channel": False,
        "event_context": f"4-fake-{event_id}",
    }


def message_deleted_event(message: JSON, channel: Channel, *, event_ts: str) -> JSON:
    """The `message` event with subtype `message_deleted`; `message` is the message as it was."""
    return {
        "type": "message",
        "subtype": "message_deleted",
        "hidden": True,
        "channel": channel.id,
        "ts": event_ts,
        "deleted_ts": message["ts"],
        "event_ts": event_ts,
        "previous_message": message,
        "channel_type": channel.channel_type,
    }


def message_removed_event(message: JSON, tombstone: JSON | None, channel: Channel, *, event_ts: str) -> JSON:
    """What Slack sends when `message` is deleted: `message_deleted`, or for a thread's parent (a
    `tombstone` stays in its place) `message_changed` with the tombstone as `message`."""
    if tombstone is None:
        return message_deleted_event(message, channel, event_ts=event_ts)
    return {
        "type": "message",
        "subtype": "message_changed",
        "hidden": True,
        "channel": channel.id,
        "ts": event_ts,
        "event_ts": event_ts,
        "message": tombstone,
        "previous_message": message,
        "channel_type": channel.channel_type,
    }


def archive_event(channel: Channel, *, user: str, event_ts: str) -> JSON:
    """`channel_archive` for a public channel; Slack names it `group_archive` for a private one."""
    return {
        "type": "group_archive" if channel.is_private else "channel_archive",
        "channel": channel.id,
        "user": user,
        "is_moved": 0,
        "event_ts": event_ts,
    }
