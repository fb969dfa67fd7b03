"""The fake workspace's state: plain dataclasses that serialise to JSON.

Nothing here does I/O. `Workspace` is the whole world the fake Slack serves; the Web API handlers
(`webapi.py`) and the human side (`fakeslack.py`) both change it, tests read it, and the playground page
renders `Workspace.snapshot()`. Every record is a dataclass of JSON-friendly values so `snapshot()` is a
plain `dataclasses.asdict` walk.
"""

from __future__ import annotations

import copy
import dataclasses
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "JSON",
    "BotIdentity",
    "Call",
    "Channel",
    "Edit",
    "Ephemeral",
    "Interaction",
    "Message",
    "ResponsePost",
    "ResponseUrl",
    "SentEvent",
    "Trigger",
    "User",
    "Usergroup",
    "View",
    "Workspace",
    "draft_key",
]

JSON = dict[str, Any]

EphemeralVia = Literal["api", "response_url"]


@dataclass
class User:
    """A member of the workspace (a person, a bot, or a deactivated account)."""

    id: str
    name: str
    real_name: str = ""
    email: str | None = None
    deleted: bool = False
    is_bot: bool = False
    tz: str = "Europe/London"
    tz_label: str = "Greenwich Mean Time"
    tz_offset: int = 0
    bot_id: str | None = None

    def to_slack(self, team_id: str) -> JSON:
        """The `user` object of `users.info` / `users.lookupByEmail`."""
        profile: JSON = {
            "real_name": self.real_name,
            "real_name_normalized": self.real_name,
            "display_name": self.name,
            "display_name_normalized": self.name,
            "team": team_id,
        }
        if self.email is not None:
            profile["email"] = self.email
        if self.bot_id is not None:
            profile["bot_id"] = self.bot_id
        return {
            "id": self.id,
            "team_id": team_id,
            "name": self.name,
            "deleted": self.deleted,
            "real_name": self.real_name,
            "tz": self.tz,
            "tz_label": self.tz_label,
            "tz_offset": self.tz_offset,
            "profile": profile,
            "is_admin": False,
            "is_owner": False,
            "is_primary_owner": False,
            "is_restricted": False,
            "is_ultra_restricted": False,
            "is_bot": self.is_bot,
            "is_app_user": False,
            "updated": 0,
        }


@dataclass
class Channel:
    """A conversation: public or private channel, the bot's DM with one user (`is_im`), or a group DM
    (`is_mpim`, always private)."""

    id: str
    name: str
    is_private: bool = False
    is_archived: bool = False
    is_im: bool = False
    is_mpim: bool = False
    members: list[str] = field(default_factory=list)
    bot_is_member: bool = True
    user: str | None = None  # the person at the other end of a DM
    created: int = 0

    def to_slack(self, bot_user_id: str) -> JSON:
        """The `channel` object of `conversations.info`."""
        if self.is_im:
            return {
                "id": self.id,
                "created": self.created,
                "is_im": True,
                "is_org_shared": False,
                "user": self.user,
                "is_user_deleted": False,
                "priority": 0,
            }
        return {
            "id": self.id,
            "name": self.name,
            "name_normalized": self.name,
            "is_channel": not self.is_mpim,
            "is_group": self.id.startswith("G") and not self.is_mpim,
            "is_im": False,
            "is_mpim": self.is_mpim,
            "is_private": self.is_private,
            "is_archived": self.is_archived,
            "is_general": False,
            "is_shared": False,
            "is_org_shared": False,
            "is_member": self.bot_is_member,
            "created": self.created,
            "creator": "",
            "num_members": len(self.member_ids(bot_user_id)),
        }

    def member_ids(self, bot_user_id: str) -> list[str]:
        """Members as `conversations.members` lists them (the bot included when it is in)."""
        ids = list(self.members)
        if self.bot_is_member and bot_user_id not in ids:
            ids.append(bot_user_id)
        return ids

    @property
    def channel_type(self) -> str:
        """The `channel_type` Events API message events carry."""
        if self.is_im:
            return "im"
        if self.is_mpim:
            return "mpim"
        return "group" if self.is_private else "channel"


@dataclass
class Usergroup:
    """A user group (`S…`), as `usergroups.users.list` expands it."""

    id: str
    handle: str
    name: str = ""
    users: list[str] = field(default_factory=list)


@dataclass
class Edit:
    """One earlier version of a message, kept when the message is replaced."""

    text: str
    blocks: list[JSON]
    replaced_at: str  # the ts at which this version stopped being current
    via: str  # "chat.update" or "response_url"


@dataclass
class Message:
    """A message in a conversation (channel, private channel or DM)."""

    channel: str
    ts: str
    text: str
    user: str
    team: str
    blocks: list[JSON] = field(default_factory=list)
    bot_id: str | None = None
    app_id: str | None = None
    thread_ts: str | None = None
    metadata: JSON | None = None
    edits: list[Edit] = field(default_factory=list)
    deleted: bool = False
    tombstone: bool = False
    """Deleted while it had thread replies: Slack keeps "This message was deleted." in its place."""

    @property
    def edited(self) -> bool:
        return bool(self.edits)

    def replace(self, *, text: str, blocks: list[JSON], at: str, via: str) -> None:
        """Make `text`/`blocks` current, keeping the old version in `edits`."""
        self.edits.append(Edit(text=self.text, blocks=self.blocks, replaced_at=at, via=via))
        self.text = text
        self.blocks = blocks

    def to_slack(self) -> JSON:
        """The message object as Slack returns it (`chat.postMessage`, interaction payloads)."""
        if self.tombstone:
            return {
                "type": "message",
                "subtype": "tombstone",
                "text": self.text,
                "user": self.user,
                "hidden": True,
                "ts": self.ts,
                "thread_ts": self.ts,
                "parent_user_id": self.user,
            }
        message: JSON = {
            "type": "message",
            "text": self.text,
            "user": self.user,
            "ts": self.ts,
            "team": self.team,
        }
        if self.bot_id is not None:
            message["bot_id"] = self.bot_id
            message["app_id"] = self.app_id
        if self.blocks:
            message["blocks"] = copy.deepcopy(self.blocks)
        if self.thread_ts is not None:
            message["thread_ts"] = self.thread_ts
        if self.metadata is not None:
            message["metadata"] = copy.deepcopy(self.metadata)
        if self.edits:
            message["edited"] = {"user": self.user, "ts": self.edits[-1].replaced_at}
        return message


@dataclass
class Ephemeral:
    """A message only `user` sees; from `chat.postEphemeral` ("api") or a `response_url` post."""

    channel: str
    user: str
    ts: str
    text: str
    blocks: list[JSON] = field(default_factory=list)
    via: EphemeralVia = "api"
    thread_ts: str | None = None
    edits: list[Edit] = field(default_factory=list)
    deleted: bool = False

    def replace(self, *, text: str, blocks: list[JSON], at: str, via: str) -> None:
        self.edits.append(Edit(text=self.text, blocks=self.blocks, replaced_at=at, via=via))
        self.text = text
        self.blocks = blocks


@dataclass
class View:
    """A modal opened for one user. `view` is the full view object Slack returns (id, hash, state...)."""

    id: str
    user: str
    hash: str
    view: JSON
    root_view_id: str
    previous_view_id: str | None = None
    is_open: bool = True
    errors: dict[str, str] | None = None  # the last `response_action: errors` the bot answered
    history: list[JSON] = field(default_factory=list)  # earlier contents, oldest first

    @property
    def callback_id(self) -> str:
        return str(self.view.get("callback_id", ""))


@dataclass
class Call:
    """One Web API request the fake received, with what it answered (status 0: connection aborted)."""

    method: str
    params: JSON
    at: float
    status: int = 200
    response: JSON | None = None

    @property
    def ok(self) -> bool:
        return self.response is not None and self.response.get("ok") is True

    @property
    def error(self) -> str | None:
        if self.response is None:
            return None
        error = self.response.get("error")
        return error if isinstance(error, str) else None


@dataclass
class Trigger:
    """A `trigger_id` handed to the bot in an interaction payload: single use, short-lived."""

    id: str
    user: str
    issued_at: float
    used: bool = False


@dataclass
class ResponseUrl:
    """A `response_url` handed to the bot, pointing back at the fake."""

    token: str
    user: str
    channel: str | None
    message_ts: str | None
    is_ephemeral: bool
    issued_at: float
    uses: int = 0


@dataclass
class ResponsePost:
    """One POST the bot made to a `response_url`, and what the fake did with it."""

    token: str
    body: JSON
    at: float
    status: int
    outcome: str  # e.g. "ephemeral", "in_channel", "replaced", "deleted", "expired_url"


@dataclass
class Interaction:
    """One interaction payload the fake (as a human) sent the bot, and the bot's HTTP answer."""

    type: str
    user: str
    payload: JSON
    at: float
    status: int
    body: Any = None


@dataclass
class SentEvent:
    """One Events API envelope the fake sent (or could not send) to the bot."""

    event_id: str
    envelope: JSON
    at: float
    delivered: bool
    status: int = 0


@dataclass(frozen=True)
class BotIdentity:
    """Who the bot token belongs to, as `auth.test` reports it."""

    user_id: str = "U0ASKBOT"
    bot_id: str = "B0ASKBOT"
    app_id: str = "A0ASKBOT"
    name: str = "slack-ask"


class Workspace:
    """Everything the fake Slack knows. Mutated only on the event loop, so no locking."""

    def __init__(
        self,
        *,
        team_id: str = "T0FAKE",
        team_domain: str = "fake-workspace",
        team_name: str = "Fake Workspace",
        bot: BotIdentity | None = None,
        now: Callable[[], float],
    ) -> None:
        self.team_id = team_id
        self.team_domain = team_domain
        self.team_name = team_name
        self.bot = bot or BotIdentity()
        self.now = now
        self.users: dict[str, User] = {}
        self.channels: dict[str, Channel] = {}
        self.usergroups: dict[str, Usergroup] = {}
        self.messages: dict[str, list[Message]] = {}
        self.ephemerals: list[Ephemeral] = []
        self.views: dict[str, View] = {}
        self.view_stacks: dict[str, list[str]] = {}
        self.homes: dict[str, View] = {}  # each user's App Home tab, as views.publish last set it
        # What each user has picked or typed in a message but not sent yet, by draft_key().
        self.drafts: dict[str, dict[str, dict[str, JSON]]] = {}
        self.triggers: dict[str, Trigger] = {}
        self.response_urls: dict[str, ResponseUrl] = {}
        self.responses: list[ResponsePost] = []
        self.calls: list[Call] = []
        self.interactions: list[Interaction] = []
        self.events: list[SentEvent] = []
        self.version = 0  # bumped on every change, so waiters and the page can tell
        self._last_micros = 0
        self._counter = 0
        self.users[self.bot.user_id] = User(
            id=self.bot.user_id,
            name=self.bot.name,
            real_name=self.bot.name,
            is_bot=True,
            bot_id=self.bot.bot_id,
        )

    def post_as_bot(
        self,
        channel: str,
        *,
        text: str,
        blocks: list[JSON],
        thread_ts: str | None,
        metadata: JSON | None = None,
    ) -> Message:
        """Append a bot message to ``channel`` (chat.postMessage, or an in-channel response_url post)."""
        message = Message(
            channel=channel,
            ts=self.next_ts(),
            text=text,
            user=self.bot.user_id,
            team=self.team_id,
            blocks=blocks,
            bot_id=self.bot.bot_id,
            app_id=self.bot.app_id,
            thread_ts=thread_ts,
            metadata=metadata,
        )
        self.messages.setdefault(channel, []).append(message)
        self.touch()
        return message

    def thread_replies(self, message: Message) -> list[Message]:
        """The live replies in the thread under `message` (none unless it is a thread's parent)."""
        return [
            m
            for m in self.messages.get(message.channel, [])
            if m.thread_ts == message.ts and m.ts != message.ts and not m.deleted
        ]

    def delete_message(self, message: Message) -> tuple[JSON, JSON | None]:
        """Delete `message` as Slack does; returns it as it was, and the tombstone left in its place.

        Without thread replies it is gone (`message_deleted`). With replies Slack keeps a placeholder,
        "This message was deleted.", with the same ts and the thread (`message_changed` whose message
        has subtype `tombstone`); the tombstone is None when nothing stays. Shapes: slack-edge/slack-edge#10,
        slackapi/java-slack-sdk#1384.
        """
        before = message.to_slack()
        replies = self.thread_replies(message)
        if not replies:
            message.deleted = True
            self.touch()
            return before, None
        users = list(dict.fromkeys(reply.user for reply in replies))
        thread: JSON = {
            "thread_ts": message.ts,
            "reply_count": len(replies),
            "reply_users_count": len(users),
            "latest_reply": replies[-1].ts,
            "reply_users": users,
            "is_locked": False,
            "subscribed": False,
        }
        before.update(thread)
        message.text, message.blocks, message.metadata = "This message was deleted.", [], None
        message.user, message.bot_id, message.app_id = "USLACKBOT", None, None
        message.thread_ts, message.tombstone = message.ts, True
        self.touch()
        return before, {**message.to_slack(), **thread}

    # ids and clocks

    def next_ts(self) -> str:
        """A unique, increasing Slack timestamp "<seconds>.<6 digits>"."""
        micros = max(int(self.now() * 1_000_000), self._last_micros + 1)
        self._last_micros = micros
        return f"{micros // 1_000_000}.{micros % 1_000_000:06d}"

    def next_id(self, prefix: str) -> str:
        """A fresh Slack-looking id such as `V0000000003`."""
        self._counter += 1
        return f"{prefix}{self._counter:010d}"

    def new_hash(self) -> str:
        return f"{int(self.now())}.{secrets.token_hex(4)}"

    def touch(self) -> None:
        self.version += 1

    # lookups

    def dm_id_for(self, user_id: str) -> str:
        """The stable id of the bot's DM with `user_id` (U0ALICE -> D0ALICE)."""
        return "D" + user_id[1:]

    def open_dm(self, user_id: str) -> Channel:
        dm_id = self.dm_id_for(user_id)
        channel = self.channels.get(dm_id)
        if channel is None:
            channel = Channel(
                id=dm_id,
                name=user_id,
                is_private=True,
                is_im=True,
                members=[user_id],
                user=user_id,
                created=int(self.now()),
            )
            self.channels[dm_id] = channel
            self.touch()
        return channel

    def resolve_channel_id(self, channel_or_user: str) -> str:
        """Channel ids as given; a user id means the DM with that user."""
        if channel_or_user[:1] in {"U", "W"} and channel_or_user in self.users:
            return self.dm_id_for(channel_or_user)
        return channel_or_user

    def find_message(self, channel: str, ts: str) -> Message | None:
        for message in self.messages.get(channel, []):
            if message.ts == ts:
                return message
        return None

    def find_ephemeral(self, channel: str, ts: str, user: str | None = None) -> Ephemeral | None:
        for ephemeral in self.ephemerals:
            if ephemeral.channel == channel and ephemeral.ts == ts and user in (None, ephemeral.user):
                return ephemeral
        return None

    def iter_messages(self) -> Iterator[Message]:
        for messages in self.messages.values():
            yield from messages

    def open_views(self, user: str) -> list[View]:
        """The user's modal stack, bottom first."""
        return [self.views[view_id] for view_id in self.view_stacks.get(user, [])]

    # JSON

    def snapshot(self) -> JSON:
        """The whole state as plain JSON (the playground page renders this)."""

        def dump(value: Any) -> Any:
            return dataclasses.asdict(value)

        return {
            "version": self.version,
            "team": {"id": self.team_id, "domain": self.team_domain, "name": self.team_name},
            "bot": dump(self.bot),
            "users": [dump(user) for user in self.users.values()],
            "channels": [dump(channel) for channel in self.channels.values()],
            "usergroups": [dump(group) for group in self.usergroups.values()],
            "messages": {channel: [dump(m) for m in messages] for channel, messages in self.messages.items()},
            "ephemerals": [dump(e) for e in self.ephemerals],
            "views": [dump(v) for v in self.views.values()],
            "view_stacks": {user: list(stack) for user, stack in self.view_stacks.items()},
            "homes": {user: dump(home) for user, home in self.homes.items()},
            "drafts": copy.deepcopy(self.drafts),
            "calls": [dump(c) for c in self.calls],
            "interactions": [dump(i) for i in self.interactions],
            "events": [dump(e) for e in self.events],
            "responses": [dump(r) for r in self.responses],
        }


def draft_key(user: str, channel: str, ts: str) -> str:
    """Key of `Workspace.drafts` for what `user` has entered in message `channel`/`ts`."""
    return f"{user}|{channel}|{ts}"
