"""Every Redis key name the bot uses, in one home.

Shared keys (one per deployment):

=====================  ======  ===================================================================
``P:asks``             stream  intake (protocol); group ``bots``; entries XACK+XDEL'd once handled
``P:dead``             stream  dead letters: unreadable envelopes, poison entries (MAXLEN ~ 10000)
``P:due``              zset    member ``"<ask_id> <tag>"``, score = next timer (ms, Redis time)
``P:id:<ask_id>``      string  the ask's slot tag: finds an ask from its id alone (status, resend)
``P:chan:<channel>``   set     ``"<ask_id> <tag>"`` of asks posted there (to dismiss on archive)
``P:rate:<method>``    string  Slack pacing: one token bucket per Web API method (``rate.lua``)
``P:rate:<m>:<chan>``  string  ... and per channel for ``chat.postMessage``; each bucket is one key,
                               in its own slot on Cluster (no braces), gone when the bucket is full
=====================  ======  ===================================================================

The App Home tab (docs/home.md), per person, each key in its own slot (so never written atomically
with an ask: rows are checked against the ask's record when drawn, and ``slack-ask check`` repairs):

========================  ======  ================================================================
``P:home:wait:<user>``    zset    ``"<ask_id> <tag>"`` of pending asks naming the person, by deadline
``P:home:asked:<user>``   zset    ... of pending asks whose ``requester.user`` is the person
``P:home:recent:<user>``  list    ... of the last 10 asks the person answered or voted on, newest first
``P:home:view:<user>``    hash    the last published view's ``hash`` and the page shown
``P:{home}:opened``       zset    people who opened the tab, by when (only they are published to)
``P:{home}:dirty``        zset    people whose tab is to be published again, by when (lease-claimed)
========================  ======  ================================================================

Per-ask keys, all in the hash slot of the ask's ``reply_to`` (protocol section 1), so one Lua
script can change the ask's state and push its result atomically, on Redis Cluster too:

==============================  ======  ===========================================================
``P:{tag}:ask:<ask_id>``        hash    record, state, messages, withdrawn copies, votes, result, reason,
                                        ``log``: the audit trail (JSON entries a line, capped)
``P:{tag}:audit:<ask_id>``      list    audit entries of the version before, or of a gone ask (capped)
``P:{tag}:cancel:<ask_id>``     hash    cancels that arrived before their ask: reply_to -> reason
``P:{tag}:home:<ask_id>``       set     the people whose ``P:home:wait`` holds the ask (kept first)
``reply_to``                    list    the agent's reply list (named by the agent)
==============================  ======  ===========================================================

The ask hash's ``withdrawn`` field lists (``"<channel> <ts>"``) the copies the bot deleted from Slack
itself; each is marked there (``withdraw.lua``, or ``advance.lua`` for a losing escalation copy) before
its ``chat.delete`` is sent, and is never one of the ask's ``msgs`` again, so Slack's event for that
delete dismisses nothing; each is deleted again when the ask's messages are finished.

The Workflow Builder step (bot/workflow.py) is one more agent: its asks reply to
``P:reply:workflow-step``, and its own keys share that list's slot (tag ``T`` = its slot tag):

==============================  ======  ===========================================================
``P:{T}:step:<ask_id>``         hash    one step execution: its id, just-in-time token, envelope, state
``P:{T}:step-due``              zset    member ``<ask_id>``, score = when a sweep looks at it next (ms)
==============================  ======  ===========================================================

Every key has a bounded lifetime: per-ask keys expire ``retention`` after the ask ends (or after
its maximum pending life), ``P:id:*`` likewise; streams are trimmed or drained.
"""

from __future__ import annotations

import functools
import itertools
import string
from dataclasses import dataclass

from redis.crc import key_slot

__all__ = [
    "AUDIT_MAX",
    "DEAD_MAXLEN",
    "GROUP",
    "AskKeys",
    "Keys",
    "due_member",
    "glob_escape",
    "parse_due_member",
    "slot_tag",
]

GROUP = "bots"
AUDIT_MAX = 200
DEAD_MAXLEN = 10_000


def _redis_hash_part(key: str) -> str:
    """The part of ``key`` Redis hashes: the text between the first ``{`` and the next ``}``, if non-empty."""
    start = key.find("{")
    if start != -1:
        end = key.find("}", start + 1)
        if end > start + 1:
            return key[start + 1 : end]
    return key


@functools.cache
def _tag_for_slot() -> dict[int, str]:
    # A short brace-free string for every slot, for reply_to names whose own braces would not
    # survive being wrapped in {...}. Built once, on first need (about 0.2 s).
    table: dict[int, str] = {}
    alphabet = string.ascii_lowercase + string.digits
    for length in itertools.count(1):
        for chars in itertools.product(alphabet, repeat=length):
            candidate = "s" + "".join(chars)
            table.setdefault(key_slot(candidate.encode()), candidate)
            if len(table) == 16384:
                return table
    raise AssertionError("unreachable")  # pragma: no cover


def slot_tag(reply_to: str) -> str:
    """A hash tag (without braces) that puts ``P:{tag}:...`` in the same slot as ``reply_to``."""
    part = _redis_hash_part(reply_to)
    if "{" not in part and "}" not in part:
        return part
    return _tag_for_slot()[key_slot(reply_to.encode())]


def glob_escape(text: str) -> str:
    """``text`` matched literally by a SCAN ``MATCH`` pattern (a prefix or an ask id may hold ``*``)."""
    return "".join(f"\\{c}" if c in "*?[]\\" else c for c in text)


def due_member(ask_id: str, tag: str) -> str:
    return f"{ask_id} {tag}"


def parse_due_member(member: str) -> tuple[str, str]:
    ask_id, _, tag = member.partition(" ")
    return ask_id, tag


@dataclass(frozen=True, slots=True)
class AskKeys:
    ask: str
    audit: str
    cancel: str
    home: str


@dataclass(frozen=True, slots=True)
class Keys:
    prefix: str

    @property
    def asks(self) -> str:
        return f"{self.prefix}:asks"

    @property
    def dead(self) -> str:
        return f"{self.prefix}:dead"

    @property
    def due(self) -> str:
        return f"{self.prefix}:due"

    def channel(self, channel: str) -> str:
        return f"{self.prefix}:chan:{channel}"

    def index(self, ask_id: str) -> str:
        return f"{self.prefix}:id:{ask_id}"

    @property
    def replies(self) -> str:
        """The namespace under ``P:`` the bot keeps for agents' reply lists and never uses itself."""
        return f"{self.prefix}:reply:"

    def reply_to_problem(self, reply_to: str) -> str | None:
        """Why ``reply_to`` may not be used (protocol section 1), or None: no key of the bot's own."""
        if reply_to.startswith(f"{self.prefix}:") and not reply_to.startswith(self.replies):
            return (
                f"reply_to must not name a key under {self.prefix}: (the bot's own keys) "
                f"unless it starts with {self.replies}"
            )
        return None

    @property
    def step_replies(self) -> str:
        """The reply list of the Workflow Builder step's asks (an agent's list, drained by the bot)."""
        return f"{self.replies}workflow-step"

    def step(self, ask_id: str) -> str:
        """The record of one step execution (in the slot of :attr:`step_replies`)."""
        return f"{self.prefix}:{{{slot_tag(self.step_replies)}}}:step:{ask_id}"

    @property
    def step_due(self) -> str:
        """When each pending step execution is looked at next (in the slot of :attr:`step_replies`)."""
        return f"{self.prefix}:{{{slot_tag(self.step_replies)}}}:step-due"

    def rate(self, method: str, channel: str | None = None) -> str:
        """The token bucket of ``method`` (workspace-wide), or of ``method`` in one ``channel``."""
        # Braces would pull the key into another key's slot; Slack ids and method names have none.
        name = f"{method}:{channel}" if channel else method
        return f"{self.prefix}:rate:{name.replace('{', '(').replace('}', ')')}"

    def for_ask(self, tag: str, ask_id: str) -> AskKeys:
        base = f"{self.prefix}:{{{tag}}}"
        return AskKeys(
            ask=f"{base}:ask:{ask_id}",
            audit=f"{base}:audit:{ask_id}",
            cancel=f"{base}:cancel:{ask_id}",
            home=f"{base}:home:{ask_id}",
        )

    # -- the App Home tab (bot/storage/home_index.py) --------------------------------------

    def _person(self, kind: str, user: str) -> str:
        # Braces would pull the key into another key's slot; an e-mail requester could hold some.
        return f"{self.prefix}:home:{kind}:{user.replace('{', '(').replace('}', ')')}"

    def home_waiting(self, user: str) -> str:
        return self._person("wait", user)

    def home_asked(self, user: str) -> str:
        return self._person("asked", user)

    def home_recent(self, user: str) -> str:
        return self._person("recent", user)

    def home_view(self, user: str) -> str:
        return self._person("view", user)

    @property
    def home_opened(self) -> str:
        return f"{self.prefix}:{{home}}:opened"

    @property
    def home_dirty(self) -> str:
        return f"{self.prefix}:{{home}}:dirty"
