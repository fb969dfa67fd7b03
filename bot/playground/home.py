"""The App Home tab in the fake Slack: ``views.publish`` (validated as Slack does) and the people's
side of it, opening the tab (``app_home_opened``) and clicking in it (``block_actions`` from a view
of type ``home``).

Slack's rules (docs.slack.dev, views.publish): ``user_id`` and a ``view`` of type ``home`` are
required; a view has at most 100 blocks and 250 kB, ``private_metadata`` at most 3000 characters; a
``hash`` that is not the one of the view now published answers ``hash_conflict``; an unknown user is
``user_not_found``. The view is stored per user (``Workspace.homes``) with a new hash each time.

For tests and the playground (``FakeSlack`` mixes :class:`HomeTabs` in)::

    await fake.open_home("U0ALICE")          # app_home_opened, as Slack sends when she opens the tab
    view = await fake.wait_for(lambda: fake.home("U0ALICE"))
    await fake.click_in_home("U0ALICE", "slack_ask:choose:0", value=...)
    fake.home_publishes("U0ALICE")           # how many views.publish calls took for her
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from typing import TYPE_CHECKING

from bot.playground import payloads
from bot.playground.errors import FakeSlackError
from bot.playground.state import JSON, User, View, Workspace
from bot.slack.blockkit import VIEW_MAX_BLOCKS, VIEW_MAX_BYTES, validate_view

if TYPE_CHECKING:
    from bot.playground.people import BotResponse

__all__ = ["HomeTabs", "views_publish"]


def _problems(view: JSON) -> list[str]:
    problems: list[str] = []
    if view.get("type") != "home":
        problems.append("must be 'home' [json-pointer:/view/type]")
    blocks = view.get("blocks")
    if not isinstance(blocks, list):
        problems.append("missing required field: blocks [json-pointer:/view]")
    elif len(blocks) > VIEW_MAX_BLOCKS:
        problems.append(f"no more than {VIEW_MAX_BLOCKS} items allowed [json-pointer:/view/blocks]")
    return problems + list(validate_view(view))


def views_publish(ws: Workspace, params: JSON) -> JSON:
    """``views.publish``: the user's Home tab becomes ``view``."""
    from bot.playground.webapi import ApiError, _json_field, _text, _with_ids

    user_id = _text(params, "user_id")
    if user_id is None:
        raise ApiError("invalid_arguments", response_metadata={"messages": ["[ERROR] missing user_id"]})
    user = ws.users.get(user_id)
    if user is None or user.deleted or user.is_bot:
        raise ApiError("user_not_found")
    view = _json_field(params, "view", "invalid_arguments")
    if not isinstance(view, dict):
        raise ApiError("invalid_arguments", response_metadata={"messages": ["[ERROR] missing view"]})
    if len(json.dumps(view)) > VIEW_MAX_BYTES:
        raise ApiError("view_too_large")
    problems = _problems(view)
    if problems:
        raise ApiError(
            "invalid_arguments", response_metadata={"messages": [f"[ERROR] {p}" for p in problems]}
        )
    current = ws.homes.get(user_id)
    expected = _text(params, "hash")
    if expected is not None and current is not None and expected != current.hash:
        raise ApiError("hash_conflict")
    view_id = current.id if current is not None else ws.next_id("V")
    full: JSON = {
        "id": view_id,
        "team_id": ws.team_id,
        "type": "home",
        "blocks": _with_ids(list(view.get("blocks") or [])),
        "private_metadata": view.get("private_metadata", ""),
        "callback_id": view.get("callback_id", ""),
        "state": {"values": {}},
        "hash": ws.new_hash(),
        "external_id": view.get("external_id", ""),
        "app_id": ws.bot.app_id,
        "bot_id": ws.bot.bot_id,
        "root_view_id": view_id,
        "previous_view_id": None,
    }
    if current is None:
        ws.homes[user_id] = View(id=view_id, user=user_id, hash=full["hash"], view=full, root_view_id=view_id)
    else:
        current.history.append(current.view)
        del current.history[:-20]  # the playground shows a few; a long run must not grow without end
        current.view, current.hash = full, full["hash"]
    ws.touch()
    return {"ok": True, "view": full}


class HomeTabs:
    """The people's side of the Home tab (a mixin of ``FakeSlack``)."""

    state: Workspace

    if TYPE_CHECKING:  # provided by FakeSlack

        def _human(self, user_id: str) -> User: ...
        def issue_trigger(self, user_id: str) -> str: ...
        async def send_event(self, event: JSON) -> BotResponse | None: ...
        async def _send_interaction(self, payload: JSON, user_id: str) -> BotResponse: ...

    def home(self, user_id: str) -> View | None:
        """The user's Home tab as last published (None: never)."""
        return self.state.homes.get(user_id)

    def home_publishes(self, user_id: str | None = None) -> int:
        """How many ``views.publish`` calls Slack took (for ``user_id``, or for everyone)."""
        return sum(
            1
            for call in self.state.calls
            if call.method == "views.publish"
            and call.ok
            and (user_id is None or call.params.get("user_id") == user_id)
        )

    async def open_home(self, user_id: str) -> BotResponse | None:
        """``user_id`` opens the bot's Home tab: Slack sends ``app_home_opened`` (with the view shown,
        once there is one). Returns the bot's answer (None when no events_url is set)."""
        user = self._human(user_id)
        current = self.state.homes.get(user.id)
        event: JSON = {
            "type": "app_home_opened",
            "user": user.id,
            "channel": self.state.dm_id_for(user.id),
            "tab": "home",
            "event_ts": self.state.next_ts(),
        }
        if current is not None:
            event["view"] = copy.deepcopy(current.view)
        return await self.send_event(event)

    async def click_in_home(
        self,
        user_id: str,
        action_id: str,
        *,
        value: str | None = None,
        block_id: str | None = None,
        view: JSON | None = None,
    ) -> BotResponse:
        """``user_id`` clicks an element of their Home tab (found by ``action_id`` and ``value``).
        ``view``: send this view instead of the published one (a crafted payload, or a stale tab)."""
        user = self._human(user_id)
        shown = copy.deepcopy(view) if view is not None else None
        if shown is None:
            current = self.state.homes.get(user.id)
            if current is None:
                msg = f"{user_id} has no Home tab published yet"
                raise FakeSlackError(msg)
            shown = copy.deepcopy(current.view)
        blocks = list(shown.get("blocks") or [])
        where = f"the Home tab of {user_id}"
        found = payloads.find_element(blocks, action_id, block_id=block_id, value=value, where=where)
        payload = payloads.click_payload(
            self.state,
            user=user,
            found=found,
            blocks=blocks,
            entered={},
            value=value,
            values=None,
            trigger_id=self.issue_trigger(user.id),
            container={"type": "view", "view_id": shown.get("id", "")},
            view=shown,
        )
        return await self._send_interaction(payload, user.id)

    def home_buttons(self, user_id: str) -> Iterable[tuple[str, str]]:
        """``(action_id, value)`` of every button on the user's Home tab."""
        current = self.state.homes.get(user_id)
        for block in (current.view.get("blocks") or []) if current is not None else []:
            for element in block.get("elements") or []:
                if element.get("type") == "button":
                    yield str(element.get("action_id")), str(element.get("value", ""))
