"""What people (and other apps) type in the fake Slack: messages, thread replies, edits, bots' posts.

Each sends the bot the `message` event Slack would: a reply carries `thread_ts` and `parent_user_id`,
an edit is `message_changed` (with `message` and `previous_message`), and another app's post carries
its `bot_id` and `app_id`. Tests "type a reply" with :meth:`Talk.reply`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.playground.errors import FakeSlackError
from bot.playground.state import JSON, Channel, Message, User, Workspace

if TYPE_CHECKING:
    from bot.playground.people import BotResponse

__all__ = ["Talk"]


class Talk:
    """The typing side of `FakeSlack` (which provides the state and the delivery)."""

    state: Workspace

    if TYPE_CHECKING:  # provided by FakeSlack / People

        def _human(self, user_id: str) -> User: ...
        def _channel(self, channel_id: str) -> Channel: ...
        async def _deliver(self, event: JSON, channel: Channel) -> BotResponse | None: ...

    async def say(self, user_id: str, channel: str, text: str, *, thread_ts: str | None = None) -> Message:
        """`user_id` posts a message (a user id as channel: their DM with the bot); the bot gets the event."""
        user = self._human(user_id)
        found = self._channel(self.state.resolve_channel_id(channel))
        if found.is_im and found.user != user_id:
            msg = f"{user_id} cannot post in {found.id}, the bot's DM with {found.user}"
            raise FakeSlackError(msg)
        if not found.is_im and user_id not in found.members:
            msg = f"{user_id} is not a member of {found.id}; members: {found.members}"
            raise FakeSlackError(msg)
        if found.is_archived:
            msg = f"{found.id} is archived; nobody can post in it"
            raise FakeSlackError(msg)
        return await self._post(found, user.id, text, thread_ts=thread_ts)

    async def reply(self, user_id: str, channel: str, thread_ts: str, text: str) -> Message:
        """`user_id` types `text` in the thread under `thread_ts` (as Slack sends it: `thread_ts` and
        `parent_user_id`)."""
        parent = self.state.find_message(self.state.resolve_channel_id(channel), thread_ts)
        if parent is None or parent.deleted:
            msg = f"no message {thread_ts!r} in {channel} to reply under"
            raise FakeSlackError(msg)
        return await self.say(user_id, channel, text, thread_ts=thread_ts)

    async def say_as_bot(
        self, channel: str, text: str, *, thread_ts: str | None = None, bot_id: str = "B0OTHERAPP"
    ) -> Message:
        """Another app (or, with this bot's `bot_id`, the bot itself) posts `text`: the event carries
        its `bot_id` and `app_id`, as Slack's do."""
        found = self._channel(self.state.resolve_channel_id(channel))
        return await self._post(found, "U0OTHERBOT", text, thread_ts=thread_ts, bot_id=bot_id)

    async def edit(self, channel: str, ts: str, text: str) -> None:
        """The author edits message `ts`: Slack sends `message_changed` with the new and old message."""
        found = self._channel(self.state.resolve_channel_id(channel))
        message = self.state.find_message(found.id, ts)
        if message is None or message.deleted:
            msg = f"no message {ts!r} in {found.id} to edit"
            raise FakeSlackError(msg)
        before = message.to_slack()
        at = self.state.next_ts()
        message.replace(text=text, blocks=message.blocks, at=at, via="chat.update")
        self.state.touch()
        event: JSON = {
            "type": "message",
            "subtype": "message_changed",
            "hidden": True,
            "channel": found.id,
            "ts": at,
            "event_ts": at,
            "message": message.to_slack(),
            "previous_message": before,
            "channel_type": found.channel_type,
        }
        await self._deliver(event, found)

    async def _post(
        self, channel: Channel, user: str, text: str, *, thread_ts: str | None, bot_id: str | None = None
    ) -> Message:
        message = Message(
            channel=channel.id,
            ts=self.state.next_ts(),
            text=text,
            user=user,
            team=self.state.team_id,
            thread_ts=thread_ts,
            bot_id=bot_id,
            app_id=("A" + bot_id[1:]) if bot_id else None,
        )
        self.state.messages.setdefault(channel.id, []).append(message)
        self.state.touch()
        event: JSON = {
            **message.to_slack(),
            "channel": channel.id,
            "event_ts": message.ts,
            "channel_type": channel.channel_type,
        }
        if thread_ts is not None:
            parent = self.state.find_message(channel.id, thread_ts)
            if parent is not None:
                event["parent_user_id"] = parent.user
        await self._deliver(event, channel)
        return message
