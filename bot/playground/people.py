"""The people of the fake Slack: what they do, turned into the signed payloads Slack would send the app.

A mixin of `FakeSlack`: clicks, typing, modal submissions and closes, messages, deletions and archives.
It finds what the bot really rendered in the fake's state, changes that state as Slack's client would,
builds the interaction payload or event (`payloads`), signs it and POSTs it to the bot's `events_url`.
Nothing here answers the Web API (that is `server.py`).
"""

from __future__ import annotations

import asyncio
import copy
import json
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import aiohttp

from bot.playground import payloads
from bot.playground.errors import FakeSlackError
from bot.playground.state import (
    JSON,
    Channel,
    Interaction,
    Message,
    ResponseUrl,
    SentEvent,
    Trigger,
    User,
    View,
    Workspace,
    draft_key,
)
from bot.playground.webapi import MAX_VIEW_STACK, ApiError, WebApi

__all__ = ["BotResponse", "People"]


@dataclass(frozen=True)
class BotResponse:
    """The bot's HTTP answer to something the fake sent it. `status` 0: no answer (see `error`)."""

    status: int
    body: Any  # parsed JSON when the body is JSON, else the text, None when empty
    text: str = ""
    headers: Mapping[str, str] | None = None
    error: str | None = None

    @property
    def json(self) -> JSON:
        """The body as a JSON object (empty when it is not one), e.g. `{"response_action": "errors", ...}`."""
        return self.body if isinstance(self.body, dict) else {}


def _parse_body(text: str) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


class People:
    """The humans' side of `FakeSlack` (which sets these attributes up)."""

    state: Workspace
    api: WebApi
    signing_secret: str
    events_url: str | None
    ack_timeout: float
    _session: aiohttp.ClientSession | None
    _deliveries: set[asyncio.Task[BotResponse | None]]

    if TYPE_CHECKING:  # provided by FakeSlack

        @property
        def base_url(self) -> str: ...
        def now(self) -> float: ...
        def messages(self, channel: str, *, include_deleted: bool = False) -> list[Message]: ...
        def _channel(self, channel_id: str) -> Channel: ...

    # conversations

    async def archive_channel(self, channel_id: str, *, by: str | None = None) -> BotResponse | None:
        """Archive a conversation as a person would, and tell the bot (`channel_archive`/`group_archive`).

        Returns the bot's answer, or None when the bot gets no event (not in the channel, no events_url).
        """
        channel = self._channel(channel_id)
        channel.is_archived = True
        self.state.touch()
        actor = by or next((m for m in channel.members if m in self.state.users), self.state.bot.user_id)
        event = payloads.archive_event(channel, user=actor, event_ts=self.state.next_ts())
        return await self._deliver(event, channel)

    async def delete_message(self, channel: str, ts: str) -> BotResponse | None:
        """Delete a message as a person (say an admin) would, and tell the bot what Slack tells it.

        Without thread replies: `message_deleted`. With replies (a reminded ask has some) the message
        becomes a tombstone and the event is `message_changed` whose `message.subtype` is `tombstone`.
        In a group DM the event's `channel_type` is `mpim`. Returns the bot's answer, or None when the
        bot gets no event (not in the conversation, no events_url).

        Note: `message_deleted`'s `previous_message.user` is the bot for the bot's own messages, so Bolt's
        default IgnoringSelfEvents middleware drops it; the bot needs `ignoring_self_events_enabled=False`
        to see it. (A tombstone's `message.user` is `USLACKBOT`, so that one passes either way.)
        """
        channel_obj = self._channel(self.state.resolve_channel_id(channel))
        message = self.state.find_message(channel_obj.id, ts)
        if message is not None and message.tombstone:
            msg = f"message {ts!r} in {channel_obj.id} is already deleted (a tombstone now)"
            raise FakeSlackError(msg)
        if message is None or message.deleted:
            there = [m.ts for m in self.messages(channel_obj.id)]
            msg = f"no message {ts!r} in {channel_obj.id}; messages there: {there}"
            raise FakeSlackError(msg)
        before, tombstone = self.state.delete_message(message)
        event_ts = self.state.next_ts()
        event = payloads.message_removed_event(before, tombstone, channel_obj, event_ts=event_ts)
        return await self._deliver(event, channel_obj)

    def deletion_event(self, message: Message) -> str | None:
        """The event deleting `message` would send the bot (`message_deleted`, or `message_changed` for a
        thread's parent, which becomes a tombstone), or None when the bot would hear nothing."""
        channel = self.state.channels.get(message.channel)
        if channel is None or not self._bot_hears(channel) or message.deleted or message.tombstone:
            return None
        return "message_changed" if self.state.thread_replies(message) else "message_deleted"

    # acting on what the bot rendered

    async def click(
        self,
        user_id: str,
        channel: str,
        ts: str,
        action_id: str,
        *,
        value: str | None = None,
        values: Iterable[str] | None = None,
        block_id: str | None = None,
    ) -> BotResponse:
        """`user_id` acts on an element of message `ts` in `channel` (a user id: the bot's DM with them).

        The element is found among what the bot really rendered, by `action_id` (and `block_id`): for
        buttons `value` picks the button with that value; for selects, radio buttons and overflow menus
        it is the option to pick (by value or visible text); for checkboxes and multi-selects `values` is
        the new selection and a lone `value` toggles one option. Ephemeral messages the user sees count.
        """
        user = self._human(user_id)
        found_channel = self._channel(self.state.resolve_channel_id(channel))
        self._check_can_see(user, found_channel)
        message = self.state.find_message(found_channel.id, ts)
        ephemeral = None
        if message is not None and not message.deleted:
            blocks = message.blocks
        else:
            message = None
            ephemeral = self.state.find_ephemeral(found_channel.id, ts, user_id)
            if ephemeral is None or ephemeral.deleted:
                there = [m.ts for m in self.messages(found_channel.id)]
                msg = f"no message {ts!r} visible to {user_id} in {found_channel.id}; messages there: {there}"
                raise FakeSlackError(msg)
            blocks = ephemeral.blocks
        where = f"message {found_channel.id}/{ts}"
        found = payloads.find_element(blocks, action_id, block_id=block_id, value=value, where=where)
        if not found.dispatches:
            msg = f"{found.describe()} is an input without dispatch_action: Slack sends nothing; use enter()"
            raise FakeSlackError(msg)
        draft = self.state.drafts.setdefault(draft_key(user_id, found_channel.id, ts), {})
        payload = payloads.click_payload(
            self.state,
            user=user,
            found=found,
            blocks=blocks,
            entered=draft,
            value=value,
            values=values,
            trigger_id=self.issue_trigger(user_id),
            container={
                "type": "message",
                "message_ts": ts,
                "channel_id": found_channel.id,
                "is_ephemeral": ephemeral is not None,
            },
            response_url=self._issue_response_url(
                user_id, found_channel.id, ts, is_ephemeral=ephemeral is not None
            ),
            channel=found_channel,
            message=message.to_slack() if message is not None else None,
        )
        return await self._send_interaction(payload, user_id)

    def enter(
        self,
        user_id: str,
        channel: str,
        ts: str,
        action_id: str,
        value: Any,
        *,
        block_id: str | None = None,
    ) -> None:
        """Type (or pick, in an input block without dispatch_action) `value` without sending anything.

        Slack keeps it client-side; it reaches the bot in `state.values` of the user's next click.
        Pressing Enter in a dispatch_action text input is `click(..., value=text)`.
        """
        user = self._human(user_id)
        found_channel = self._channel(self.state.resolve_channel_id(channel))
        self._check_can_see(user, found_channel)
        message = self.state.find_message(found_channel.id, ts)
        if message is None or message.deleted:
            msg = f"no message {ts!r} in {found_channel.id}"
            raise FakeSlackError(msg)
        found = payloads.find_element(
            message.blocks, action_id, block_id=block_id, where=f"message {found_channel.id}/{ts}"
        )
        typed = found.block.get("type") == "input" and (not found.dispatches or found.state_key == "value")
        if not typed:
            msg = f"changing {found.describe()} sends it to the app at once: use click()"
            raise FakeSlackError(msg)
        draft = self.state.drafts.setdefault(draft_key(user_id, found_channel.id, ts), {})
        draft.setdefault(found.block_id, {})[found.action_id] = payloads.answer_state(found, value)
        self.state.touch()

    async def click_in_view(
        self,
        user_id: str,
        view_id: str,
        action_id: str,
        *,
        value: str | None = None,
        values: Iterable[str] | None = None,
        block_id: str | None = None,
    ) -> BotResponse:
        """Like `click`, on an element of the user's top modal (block_actions with a view container)."""
        user = self._human(user_id)
        view = self._top_view(user_id, view_id)
        blocks = view.view.get("blocks") or []
        found = payloads.find_element(
            blocks, action_id, block_id=block_id, value=value, where=f"view {view_id}"
        )
        if not found.dispatches:
            msg = f"{found.describe()} is an input without dispatch_action: fill it through submit_view"
            raise FakeSlackError(msg)
        entered = view.view.setdefault("state", {}).setdefault("values", {})
        action = payloads.click(
            found, blocks, entered, value=value, values=values, action_ts=self.state.next_ts()
        )
        view.view["state"]["values"] = payloads.state_values(blocks, entered)
        payload = payloads.block_actions_payload(
            self.state,
            user=user,
            actions=[action],
            state=copy.deepcopy(view.view["state"]["values"]),
            trigger_id=self.issue_trigger(user_id),
            container={"type": "view", "view_id": view.id},
            view=copy.deepcopy(view.view),
        )
        return await self._send_interaction(payload, user_id)

    async def submit_view(
        self,
        user_id: str,
        view_id: str,
        values: Mapping[str, Mapping[str, JSON]] | None = None,
    ) -> BotResponse:
        """Press Submit on the user's top modal with `values` as `state.values[block_id][action_id]`.

        Values not given keep what is already entered (or the initial values). Like Slack's client, the
        fake refuses to submit with a required input empty or a text outside min/max length. The bot's
        answer is applied: `errors` is kept on the view, `update`/`push`/`clear` change the stack, and a
        plain ack closes the view.
        """
        user = self._human(user_id)
        view = self._top_view(user_id, view_id)
        blocks = view.view.get("blocks") or []
        entered: dict[str, dict[str, JSON]] = copy.deepcopy(view.view.get("state", {}).get("values", {}))
        rendered = {(e.block_id, e.action_id): e for e in payloads.iter_elements(blocks)}
        for block_id, by_action in (values or {}).items():
            for action_id, entry in by_action.items():
                element = rendered.get((block_id, action_id))
                if element is None or element.type != entry.get("type"):
                    msg = (
                        f"view {view_id} has no {entry.get('type')} {action_id!r} in block {block_id!r}; "
                        f"rendered: {payloads.describe_elements(blocks)}"
                    )
                    raise FakeSlackError(msg)
                entered.setdefault(block_id, {})[action_id] = dict(entry)
        state = payloads.state_values(blocks, entered)
        self._check_submittable(user_id, view, state)
        view.view.setdefault("state", {})["values"] = state
        payload = payloads.view_submission_payload(
            self.state,
            user=user,
            view=copy.deepcopy(view.view),
            trigger_id=self.issue_trigger(user_id),
        )
        response = await self._send_interaction(payload, user_id)
        self._apply_submission(view, response)
        return response

    async def fill_and_submit(self, user_id: str, view_id: str, answers: Mapping[str, Any]) -> BotResponse:
        """Submit the user's top modal with `answers` keyed by block_id (or action_id).

        Each answer is put into that block's element the way a person would: an option value or its
        visible text for radio buttons and selects, a list of them for checkboxes and multi-selects,
        text for text inputs.
        """
        view = self._top_view(user_id, view_id)
        elements = list(payloads.iter_elements(view.view.get("blocks") or []))
        values: dict[str, dict[str, JSON]] = {}
        for key, answer in answers.items():
            matches = [e for e in elements if e.block_id == key] or [
                e for e in elements if e.action_id == key
            ]
            if len(matches) != 1:
                msg = (
                    f"{len(matches)} elements of view {view_id} have block_id or action_id {key!r}; "
                    f"rendered: {payloads.describe_elements(view.view.get('blocks') or [])}"
                )
                raise FakeSlackError(msg)
            found = matches[0]
            values.setdefault(found.block_id, {})[found.action_id] = payloads.answer_state(found, answer)
        return await self.submit_view(user_id, view_id, values)

    async def close_view(self, user_id: str, view_id: str, *, clear: bool = False) -> BotResponse | None:
        """Press Close (`clear`: close the whole stack). The bot hears of it only with `notify_on_close`."""
        user = self._human(user_id)
        view = self._top_view(user_id, view_id)
        stack = self.state.view_stacks.get(user_id, [])
        closing = list(stack) if clear else [view.id]
        for closed in closing:
            self.state.views[closed].is_open = False
            stack.remove(closed)
        self.state.touch()
        if not view.view.get("notify_on_close"):
            return None
        payload = payloads.view_closed_payload(
            self.state, user=user, view=copy.deepcopy(view.view), is_cleared=clear
        )
        return await self._send_interaction(payload, user_id)

    def issue_trigger(self, user_id: str) -> str:
        """A fresh trigger_id for `user_id`, as one rides in every interaction payload."""
        trigger_id = f"{int(self.now())}.{secrets.randbelow(10**12)}.{secrets.token_hex(16)}"
        self.state.triggers[trigger_id] = Trigger(id=trigger_id, user=user_id, issued_at=self.now())
        return trigger_id

    # raw requests to the bot (signature tests)

    def signed_request(
        self, body: str, *, timestamp: int | None = None, content_type: str | None = None
    ) -> dict[str, str]:
        """Headers signing `body` as Slack would (content type guessed from the body unless given)."""
        return payloads.signed_headers(
            self.signing_secret, body, timestamp=timestamp, content_type=content_type
        )

    async def post_raw(self, body: str, headers: Mapping[str, str]) -> BotResponse:
        """POST `body` with exactly `headers` to the bot's events_url (e.g. a bad or stale signature)."""
        return await self._post_to_bot(body, headers)

    async def send_event(self, event: JSON) -> BotResponse | None:
        """Send any Events API `event` to the bot in a signed event_callback envelope.

        Returns the bot's answer; None (and the event recorded undelivered) when events_url is not set.
        """
        event_id = "Ev" + self.state.next_id("")
        envelope = payloads.event_envelope(self.state, event, event_id=event_id, event_time=int(self.now()))
        if self.events_url is None:
            self.state.events.append(
                SentEvent(event_id=event_id, envelope=envelope, at=self.now(), delivered=False)
            )
            self.state.touch()
            return None
        response = await self._post_to_bot(json.dumps(envelope))
        self.state.events.append(
            SentEvent(
                event_id=event_id,
                envelope=envelope,
                at=self.now(),
                delivered=response.status == 200,
                status=response.status,
            )
        )
        self.state.touch()
        return response

    # internals: people and surfaces

    def _human(self, user_id: str) -> User:
        user = self.state.users.get(user_id)
        if user is None or user.deleted or user.is_bot:
            msg = f"{user_id!r} is not an active person in the workspace; users: {sorted(self.state.users)}"
            raise FakeSlackError(msg)
        return user

    def _check_can_see(self, user: User, channel: Channel) -> None:
        if channel.is_private and user.id not in channel.members:
            msg = (
                f"{user.id} is not a member of private conversation {channel.id}, so cannot see its messages"
            )
            raise FakeSlackError(msg)

    def _top_view(self, user_id: str, view_id: str) -> View:
        stack = self.state.view_stacks.get(user_id, [])
        if not stack or stack[-1] != view_id:
            msg = f"view {view_id!r} is not the modal {user_id} has in front; their open views: {stack}"
            raise FakeSlackError(msg)
        return self.state.views[view_id]

    def _check_submittable(self, user_id: str, view: View, state: Mapping[str, Mapping[str, JSON]]) -> None:
        """Slack's client-side checks before a modal may be submitted."""
        for found in payloads.iter_elements(view.view.get("blocks") or []):
            if found.block.get("type") != "input" or found.state_key is None:
                continue
            entry = state.get(found.block_id, {}).get(found.action_id, {})
            current = entry.get(found.state_key)
            if current in (None, "", []):
                if not found.block.get("optional"):
                    msg = f"input block {found.block_id!r} is required: Slack won't let {user_id} submit it"
                    raise FakeSlackError(msg)
                continue
            if isinstance(current, str):
                low, high = found.element.get("min_length"), found.element.get("max_length")
                if (isinstance(low, int) and len(current) < low) or (
                    isinstance(high, int) and len(current) > high
                ):
                    msg = f"text in block {found.block_id!r} is outside its length limits ({low}..{high})"
                    raise FakeSlackError(msg)

    def _apply_submission(self, view: View, response: BotResponse) -> None:
        """Do what the bot's answer to a view_submission asks of the modal stack."""
        if response.status != 200:
            return  # Slack keeps the modal open and shows the person an error
        body = response.json
        action = body.get("response_action")
        stack = self.state.view_stacks.setdefault(view.user, [])
        if action == "errors":
            errors = body.get("errors")
            view.errors = dict(errors) if isinstance(errors, dict) else {}
        elif action in ("update", "push"):
            try:
                new_view = self.api.view_param({"view": body.get("view")})
                if action == "update":
                    self.api.replace_view(view, new_view)
                elif len(stack) >= MAX_VIEW_STACK:
                    raise ApiError("push_limit_reached")
                else:
                    self.api.open_view(view.user, new_view, push=True)
            except ApiError as exc:
                view.errors = {"response_action": exc.error}
        elif action == "clear":
            for closed in stack:
                self.state.views[closed].is_open = False
            stack.clear()
        else:
            view.is_open = False
            if view.id in stack:
                stack.remove(view.id)
        self.state.touch()

    def _issue_response_url(self, user_id: str, channel: str, ts: str, *, is_ephemeral: bool) -> str:
        token = secrets.token_urlsafe(16)
        self.state.response_urls[token] = ResponseUrl(
            token=token,
            user=user_id,
            channel=channel,
            message_ts=ts,
            is_ephemeral=is_ephemeral,
            issued_at=self.now(),
        )
        return f"{self.base_url}response/{token}"

    # internals: talking to the bot

    def _bot_hears(self, channel: Channel) -> bool:
        """Events about a conversation reach the app only when its bot is in it."""
        return channel.is_im or channel.bot_is_member

    async def _deliver(self, event: JSON, channel: Channel) -> BotResponse | None:
        if not self._bot_hears(channel):
            return None
        return await self.send_event(event)

    def _emit(self, event: JSON, channel: Channel) -> None:
        """Deliver an event caused by a Web API call after answering it, as Slack does."""
        if not self._bot_hears(channel) or self.events_url is None:
            return
        task = asyncio.get_running_loop().create_task(self.send_event(event))
        self._deliveries.add(task)
        task.add_done_callback(self._deliveries.discard)

    async def _send_interaction(self, payload: JSON, user_id: str) -> BotResponse:
        response = await self._post_to_bot(payloads.form_body(payload))
        self.state.interactions.append(
            Interaction(
                type=str(payload["type"]),
                user=user_id,
                payload=payload,
                at=self.now(),
                status=response.status,
                body=response.body,
            )
        )
        self.state.touch()
        return response

    async def _post_to_bot(self, body: str, headers: Mapping[str, str] | None = None) -> BotResponse:
        if self.events_url is None:
            msg = "events_url is not set: start the bot, then set fake.events_url to its /slack/events URL"
            raise FakeSlackError(msg)
        if self._session is None:
            msg = "FakeSlack is not started: await fake.start() first"
            raise FakeSlackError(msg)
        sent_headers = dict(headers) if headers is not None else self.signed_request(body)
        try:
            async with self._session.post(
                self.events_url,
                data=body.encode(),
                headers=sent_headers,
                timeout=aiohttp.ClientTimeout(total=self.ack_timeout),
            ) as reply:
                text = await reply.text()
                return BotResponse(
                    status=reply.status, body=_parse_body(text), text=text, headers=dict(reply.headers)
                )
        except TimeoutError:
            error = f"the bot did not answer within {self.ack_timeout}s (Slack gives up after 3 s)"
        except aiohttp.ClientError as exc:
            error = f"could not reach the bot at {self.events_url}: {exc!r}"
        return BotResponse(status=0, body=None, error=error)
