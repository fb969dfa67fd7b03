"""The Web API methods of the fake Slack, answered from and applied to a `Workspace`.

Each handler takes the request's parameters (query, form and JSON body merged, JSON-string fields such
as `blocks` and `view` already accepted either way) and returns Slack's `{"ok": true, ...}` answer or
raises `ApiError`, which the server turns into `{"ok": false, "error": ...}` with HTTP 200.

Where Slack's documented behaviour and a simpler rule differ, Slack wins (sources: the method pages of
docs.slack.dev as scraped in slack-ruby/slack-api-ref, and ../shared/reference/slack-facts.md):
a private channel the bot is not in does not exist for it (`channel_not_found`); `not_in_channel` is for a
public channel the bot is not in when the app lacks `chat:write.public`; opening a DM with a deactivated
user is `user_disabled`; a used trigger is `exchanged_trigger_id`.
"""

from __future__ import annotations

import copy
import json
import secrets
from collections.abc import Callable
from typing import Any, Literal

from bot.playground import payloads
from bot.playground.home import views_publish
from bot.playground.state import JSON, Channel, Ephemeral, Message, Trigger, User, View, Workspace
from bot.slack.blockkit import (
    MESSAGE_MAX_BLOCKS,
    MESSAGE_TEXT_MAX,
    VIEW_MAX_BLOCKS,
    VIEW_MAX_BYTES,
    validate_message,
    validate_view,
)

__all__ = ["MAX_VIEW_STACK", "ApiError", "WebApi", "block_problems"]

# Slack's limits are bot.slack.blockkit's: past MESSAGE_TEXT_MAX Slack truncates and the fake refuses with
# msg_too_long so tests notice; past VIEW_MAX_BYTES views.* answer `view_too_large`.
MAX_VIEW_STACK = 3  # views.push `push_limit_reached`

Emit = Callable[[JSON, Channel], None]


class ApiError(Exception):
    """A Slack API error: becomes `{"ok": false, "error": <error>, **extra}`."""

    def __init__(self, error: str, **extra: Any) -> None:
        super().__init__(error)
        self.error = error
        self.extra = extra

    def to_response(self) -> JSON:
        return {"ok": False, "error": self.error, **self.extra}


def block_problems(kind: Literal["message", "view"], payload: JSON) -> list[str]:
    """Problems `bot.slack.blockkit.validate_<kind>` finds in `payload`."""
    validate = validate_message if kind == "message" else validate_view
    return list(validate(payload))


def _invalid(error: str, problems: list[str]) -> ApiError:
    # Slack lists validation failures both ways: `errors` and `response_metadata.messages`.
    return ApiError(
        error, errors=problems, response_metadata={"messages": [f"[ERROR] {p}" for p in problems]}
    )


def _text(params: JSON, name: str) -> str | None:
    value = params.get(name)
    if value is None or value == "":
        return None
    return str(value)


def _flag(params: JSON, name: str) -> bool:
    value = params.get(name)
    if isinstance(value, str):
        return value.lower() in {"1", "true", "yes"}
    return bool(value)


def _json_field(params: JSON, name: str, error: str) -> Any:
    value = params.get(name)
    if isinstance(value, str):
        if value == "":
            return None
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise _invalid(error, [f"{name} is not valid JSON: {exc.msg}"]) from exc
    return value


def _with_ids(blocks: list[JSON]) -> list[JSON]:
    """Copy of `blocks` with the block_id/action_id Slack generates where the app gave none."""
    stored = copy.deepcopy(blocks)
    for block in stored:
        block.setdefault("block_id", secrets.token_hex(3))
        elements: list[Any] = []
        if block.get("type") == "actions":
            elements = list(block.get("elements") or [])
        elif block.get("type") == "section":
            elements = [block.get("accessory")]
        elif block.get("type") == "input":
            elements = [block.get("element")]
        for element in elements:
            if isinstance(element, dict) and element.get("type") not in (None, "image"):
                element.setdefault("action_id", secrets.token_hex(3))
    return stored


class WebApi:
    """Slack's Web API methods over one `Workspace`."""

    def __init__(self, ws: Workspace, *, emit: Emit, permalink_base: Callable[[], str]) -> None:
        self.ws = ws
        self.emit = emit  # hands an Events API event to the server for delivery to the bot
        self.permalink_base = permalink_base
        self.trigger_ttl = 3.0  # seconds a trigger_id stays usable (Slack: 3 s)
        self.chat_write_public = True  # the app may post in public channels it has not joined
        self.methods: dict[str, Callable[[JSON], JSON]] = {
            "api.test": self.api_test,
            "auth.test": self.auth_test,
            "chat.postMessage": self.chat_post_message,
            "chat.update": self.chat_update,
            "chat.delete": self.chat_delete,
            "chat.postEphemeral": self.chat_post_ephemeral,
            "chat.getPermalink": self.chat_get_permalink,
            "conversations.open": self.conversations_open,
            "conversations.info": self.conversations_info,
            "conversations.join": self.conversations_join,
            "conversations.members": self.conversations_members,
            "users.info": self.users_info,
            "users.lookupByEmail": self.users_lookup_by_email,
            "usergroups.users.list": self.usergroups_users_list,
            "views.open": self.views_open,
            "views.update": self.views_update,
            "views.push": self.views_push,
            "views.publish": lambda params: views_publish(self.ws, params),
        }

    def call(self, method: str, params: JSON) -> JSON:
        handler = self.methods.get(method)
        if handler is None:
            raise ApiError("unknown_method", req_method=method)
        return handler(params)

    # conversations as the bot sees them

    def visible_channel(self, channel_id: str | None) -> Channel:
        channel = self.ws.channels.get(channel_id or "")
        # A private channel is invisible to an app that is not in it: Slack says it does not exist.
        if channel is None or (channel.is_private and not channel.bot_is_member):
            raise ApiError("channel_not_found")
        return channel

    def dm_user(self, user_id: str) -> User:
        user = self.ws.users.get(user_id)
        if user is None:
            raise ApiError("user_not_found")
        if user.is_bot:
            raise ApiError("cannot_dm_bot")
        if user.deleted:
            raise ApiError("user_disabled")
        return user

    def postable_channel(self, channel_param: str | None) -> Channel:
        if channel_param and channel_param[:1] in {"U", "W"}:
            if channel_param not in self.ws.users:
                raise ApiError("channel_not_found")
            return self.ws.open_dm(self.dm_user(channel_param).id)
        channel = self.visible_channel(channel_param)
        if channel.is_archived:
            raise ApiError("is_archived")
        if not channel.is_private and not channel.bot_is_member and not self.chat_write_public:
            raise ApiError("not_in_channel")
        return channel

    def content(self, params: JSON) -> tuple[str, list[JSON]]:
        """Validated `text` and `blocks` of a message."""
        text = str(params.get("text") or "")
        raw = _json_field(params, "blocks", "invalid_blocks_format")
        if raw is None:
            blocks: list[JSON] = []
        elif isinstance(raw, list) and all(isinstance(b, dict) for b in raw):
            blocks = raw
        else:
            raise _invalid("invalid_blocks_format", ["blocks must be a JSON array of objects"])
        if not text and not blocks and not params.get("attachments"):
            raise ApiError("no_text")
        if len(text) > MESSAGE_TEXT_MAX:
            raise ApiError("msg_too_long")
        if blocks:
            problems = [
                f"missing required field: type [json-pointer:/blocks/{i}]"
                for i, b in enumerate(blocks)
                if not b.get("type")
            ]
            if len(blocks) > MESSAGE_MAX_BLOCKS:
                problems.append(f"no more than {MESSAGE_MAX_BLOCKS} items allowed [json-pointer:/blocks]")
            problems += block_problems("message", {"text": text, "blocks": blocks})
            if problems:
                raise _invalid("invalid_blocks", problems)
        return text, _with_ids(blocks)

    def metadata(self, params: JSON) -> JSON | None:
        """The message metadata given; `{}` means "remove it" (chat.update), absent means "keep it"."""
        metadata = _json_field(params, "metadata", "invalid_metadata_format")
        if metadata is None:
            return None
        if metadata == {}:
            return {}
        if not isinstance(metadata, dict) or "event_type" not in metadata:
            raise ApiError("invalid_metadata_format")
        return metadata

    def own_message(self, channel: Channel, ts: str | None, *, refused: str) -> Message:
        message = self.ws.find_message(channel.id, ts or "")
        if message is None or message.deleted:
            raise ApiError("message_not_found")
        if message.user != self.ws.bot.user_id:
            raise ApiError(refused)
        return message

    # methods

    def api_test(self, params: JSON) -> JSON:
        return {"ok": True, "args": {k: v for k, v in params.items() if k != "token"}}

    def auth_test(self, params: JSON) -> JSON:
        ws = self.ws
        return {
            "ok": True,
            "url": f"https://{ws.team_domain}.slack.com/",
            "team": ws.team_name,
            "user": ws.bot.name,
            "team_id": ws.team_id,
            "user_id": ws.bot.user_id,
            "bot_id": ws.bot.bot_id,
            "is_enterprise_install": False,
        }

    def chat_post_message(self, params: JSON) -> JSON:
        channel = self.postable_channel(_text(params, "channel"))
        text, blocks = self.content(params)
        metadata = self.metadata(params)
        ws = self.ws
        message = ws.post_as_bot(
            channel.id,
            text=text,
            blocks=blocks,
            thread_ts=_text(params, "thread_ts"),
            metadata=metadata or None,
        )
        # Slack sends an app its own messages too (message.channels, message.groups, message.im).
        event = {**message.to_slack(), "channel": channel.id, "event_ts": message.ts}
        event["channel_type"] = channel.channel_type
        self.emit(event, channel)
        return {"ok": True, "channel": channel.id, "ts": message.ts, "message": message.to_slack()}

    def chat_update(self, params: JSON) -> JSON:
        channel = self.visible_channel(_text(params, "channel"))
        message = self.own_message(channel, _text(params, "ts"), refused="cant_update_message")
        if channel.is_archived:
            raise ApiError("is_inactive")
        text, blocks = self.content(params)
        metadata = self.metadata(params)
        message.replace(text=text, blocks=blocks, at=self.ws.next_ts(), via="chat.update")
        if metadata is not None:
            message.metadata = metadata or None
        self.ws.touch()
        return {
            "ok": True,
            "channel": channel.id,
            "ts": message.ts,
            "text": text,
            "message": message.to_slack(),
        }

    def chat_delete(self, params: JSON) -> JSON:
        channel = self.visible_channel(_text(params, "channel"))
        message = self.own_message(channel, _text(params, "ts"), refused="cant_delete_message")
        before, tombstone = self.ws.delete_message(message)
        self.emit(
            payloads.message_removed_event(before, tombstone, channel, event_ts=self.ws.next_ts()), channel
        )
        return {"ok": True, "channel": channel.id, "ts": message.ts}

    def chat_post_ephemeral(self, params: JSON) -> JSON:
        channel = self.postable_channel(_text(params, "channel"))
        user_id = _text(params, "user") or ""
        user = self.ws.users.get(user_id)
        if user is None:
            raise ApiError("user_not_found")
        if user.deleted or user_id not in channel.members:
            raise ApiError("user_not_in_channel")
        text, blocks = self.content(params)
        ephemeral = Ephemeral(
            channel=channel.id,
            user=user_id,
            ts=self.ws.next_ts(),
            text=text,
            blocks=blocks,
            via="api",
            thread_ts=_text(params, "thread_ts"),
        )
        self.ws.ephemerals.append(ephemeral)
        self.ws.touch()
        return {"ok": True, "message_ts": ephemeral.ts}

    def chat_get_permalink(self, params: JSON) -> JSON:
        channel = self.visible_channel(_text(params, "channel"))
        message = self.ws.find_message(channel.id, _text(params, "message_ts") or "")
        if message is None or message.deleted:
            raise ApiError("message_not_found")
        link = f"{self.permalink_base()}{channel.id}/p{message.ts.replace('.', '')}"
        if message.thread_ts is not None and message.thread_ts != message.ts:
            link += f"?thread_ts={message.thread_ts}&cid={channel.id}"
        return {"ok": True, "channel": channel.id, "permalink": link}

    def conversations_open(self, params: JSON) -> JSON:
        resume = _text(params, "channel")
        if resume is not None:
            channel = self.visible_channel(resume)
            if not channel.is_im:
                raise ApiError("method_not_supported_for_channel_type")
            return {"ok": True, "no_op": True, "already_open": True, "channel": {"id": channel.id}}
        users = [u.strip() for u in (_text(params, "users") or "").split(",") if u.strip()]
        if not users:
            raise ApiError("users_list_not_supplied")
        if len(users) > 1:
            # Group DMs are real Slack, but nothing in slack-ask opens one; say so rather than fake it.
            raise ApiError(
                "invalid_arguments", response_metadata={"messages": ["the fake opens 1:1 DMs only"]}
            )
        user = self.dm_user(users[0])
        already = self.ws.dm_id_for(user.id) in self.ws.channels
        channel = self.ws.open_dm(user.id)
        answer: JSON = {"ok": True}
        if already:
            answer.update(no_op=True, already_open=True)
        if _flag(params, "return_im"):
            answer["channel"] = channel.to_slack(self.ws.bot.user_id)
        else:
            answer["channel"] = {"id": channel.id}
        return answer

    def conversations_info(self, params: JSON) -> JSON:
        channel = self.visible_channel(_text(params, "channel"))
        return {"ok": True, "channel": channel.to_slack(self.ws.bot.user_id)}

    def conversations_join(self, params: JSON) -> JSON:
        """Join a public channel (then Slack sends the app its message and archive events)."""
        channel = self.visible_channel(_text(params, "channel"))
        if channel.is_im or channel.is_mpim or channel.is_private:
            raise ApiError("method_not_supported_for_channel_type")
        if channel.is_archived:
            raise ApiError("is_archived")
        answer: JSON = {"ok": True}
        if channel.bot_is_member:
            answer.update(
                warning="already_in_channel", response_metadata={"warnings": ["already_in_channel"]}
            )
        else:
            channel.bot_is_member = True
            self.ws.touch()
        answer["channel"] = channel.to_slack(self.ws.bot.user_id)
        return answer

    def conversations_members(self, params: JSON) -> JSON:
        channel = self.visible_channel(_text(params, "channel"))
        return {
            "ok": True,
            "members": channel.member_ids(self.ws.bot.user_id),
            "response_metadata": {"next_cursor": ""},
        }

    def users_info(self, params: JSON) -> JSON:
        user = self.ws.users.get(_text(params, "user") or "")
        if user is None:
            raise ApiError("user_not_found")
        return {"ok": True, "user": user.to_slack(self.ws.team_id)}

    def users_lookup_by_email(self, params: JSON) -> JSON:
        email = (_text(params, "email") or "").lower()
        for user in self.ws.users.values():
            if user.email is not None and user.email.lower() == email and not user.deleted:
                return {"ok": True, "user": user.to_slack(self.ws.team_id)}
        raise ApiError("users_not_found")

    def usergroups_users_list(self, params: JSON) -> JSON:
        group = self.ws.usergroups.get(_text(params, "usergroup") or "")
        if group is None:
            raise ApiError("no_such_subteam")
        return {"ok": True, "users": list(group.users)}

    # views

    def take_trigger(self, params: JSON) -> Trigger:
        trigger_id = _text(params, "trigger_id") or _text(params, "interactivity_pointer")
        trigger = self.ws.triggers.get(trigger_id or "")
        if trigger is None:
            raise ApiError("invalid_trigger_id")
        if trigger.used:
            raise ApiError("exchanged_trigger_id")
        if self.ws.now() - trigger.issued_at > self.trigger_ttl:
            raise ApiError("expired_trigger_id")
        trigger.used = True
        return trigger

    def view_param(self, params: JSON) -> JSON:
        view = _json_field(params, "view", "invalid_arguments")
        if not isinstance(view, dict):
            raise _invalid("invalid_arguments", ["missing required field: view"])
        if len(json.dumps(view)) > VIEW_MAX_BYTES:
            raise ApiError("view_too_large")
        problems: list[str] = []
        if view.get("type") != "modal":
            problems.append("must be 'modal' [json-pointer:/view/type]")
        if not isinstance(view.get("title"), dict):
            problems.append("missing required field: title [json-pointer:/view]")
        blocks = view.get("blocks")
        if not isinstance(blocks, list):
            problems.append("missing required field: blocks [json-pointer:/view]")
        elif len(blocks) > VIEW_MAX_BLOCKS:
            problems.append(f"no more than {VIEW_MAX_BLOCKS} items allowed [json-pointer:/view/blocks]")
        problems += block_problems("view", view)
        if problems:
            raise ApiError(
                "invalid_arguments", response_metadata={"messages": [f"[ERROR] {p}" for p in problems]}
            )
        return view

    def full_view(
        self, view: JSON, *, view_id: str, root_view_id: str, previous_view_id: str | None, values: Any
    ) -> JSON:
        """The view object as Slack returns and stores it."""
        ws = self.ws
        blocks = _with_ids(list(view.get("blocks") or []))
        return {
            "id": view_id,
            "team_id": ws.team_id,
            "type": view.get("type", "modal"),
            "blocks": blocks,
            "private_metadata": view.get("private_metadata", ""),
            "callback_id": view.get("callback_id", ""),
            "state": {"values": payloads.state_values(blocks, values)},
            "hash": ws.new_hash(),
            "title": view.get("title"),
            "clear_on_close": bool(view.get("clear_on_close", False)),
            "notify_on_close": bool(view.get("notify_on_close", False)),
            "close": view.get("close"),
            "submit": view.get("submit"),
            "previous_view_id": previous_view_id,
            "root_view_id": root_view_id,
            "app_id": ws.bot.app_id,
            "external_id": view.get("external_id", ""),
            "app_installed_team_id": ws.team_id,
            "bot_id": ws.bot.bot_id,
        }

    def open_view(self, user: str, view: JSON, *, push: bool) -> View:
        """Put `view` on top of `user`'s modal stack (`push`), or make it the only one."""
        ws = self.ws
        stack = ws.view_stacks.setdefault(user, [])
        if not push:
            for old in stack:
                ws.views[old].is_open = False
            stack.clear()
        view_id = ws.next_id("V")
        previous = stack[-1] if stack else None
        root = stack[0] if stack else view_id
        full = self.full_view(view, view_id=view_id, root_view_id=root, previous_view_id=previous, values={})
        opened = View(
            id=view_id,
            user=user,
            hash=full["hash"],
            view=full,
            root_view_id=root,
            previous_view_id=previous,
        )
        ws.views[view_id] = opened
        stack.append(view_id)
        ws.touch()
        return opened

    def replace_view(self, target: View, view: JSON) -> None:
        """New contents for an open view: same id, new hash, entered values kept where ids still match."""
        full = self.full_view(
            view,
            view_id=target.id,
            root_view_id=target.root_view_id,
            previous_view_id=target.previous_view_id,
            values=target.view.get("state", {}).get("values", {}),
        )
        target.history.append(target.view)
        target.view = full
        target.hash = full["hash"]
        target.errors = None
        self.ws.touch()

    def views_open(self, params: JSON) -> JSON:
        trigger = self.take_trigger(params)
        view = self.view_param(params)
        return {"ok": True, "view": self.open_view(trigger.user, view, push=False).view}

    def views_push(self, params: JSON) -> JSON:
        trigger = self.take_trigger(params)
        view = self.view_param(params)
        if len(self.ws.view_stacks.get(trigger.user, [])) >= MAX_VIEW_STACK:
            raise ApiError("push_limit_reached")
        return {"ok": True, "view": self.open_view(trigger.user, view, push=True).view}

    def views_update(self, params: JSON) -> JSON:
        view_id = _text(params, "view_id")
        external_id = _text(params, "external_id")
        target = None
        for candidate in self.ws.views.values():
            if candidate.is_open and (
                candidate.id == view_id
                or (external_id is not None and candidate.view.get("external_id") == external_id)
            ):
                target = candidate
        if target is None:
            raise ApiError("not_found")
        expected = _text(params, "hash")
        if expected is not None and expected != target.hash:
            raise ApiError("hash_conflict")
        self.replace_view(target, self.view_param(params))
        return {"ok": True, "view": target.view}
