"""The local Slack stand-in: a stateful fake of Slack served on loopback (also the tests' Slack)."""

from bot.playground.errors import FakeSlackError
from bot.playground.fakeslack import BotResponse, FakeSlack, Fault
from bot.playground.state import (
    BotIdentity,
    Call,
    Channel,
    Edit,
    Ephemeral,
    Interaction,
    Message,
    ResponsePost,
    SentEvent,
    User,
    Usergroup,
    View,
    Workspace,
)

__all__ = [
    "BotIdentity",
    "BotResponse",
    "Call",
    "Channel",
    "Edit",
    "Ephemeral",
    "FakeSlack",
    "FakeSlackError",
    "Fault",
    "Interaction",
    "Message",
    "ResponsePost",
    "SentEvent",
    "User",
    "Usergroup",
    "View",
    "Workspace",
]
