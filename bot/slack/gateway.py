"""The one gateway to Slack's Web API: retries, error mapping, small caches.

* 429: waited out by slack_sdk's rate-limit retry handler (``Retry-After``); never a failure.
* 5xx and network errors: retried with backoff until the delivery window ends, then
  :class:`SlackUnreachableError` (protocol code ``slack_unreachable``).
* Any other ``ok: false``: :class:`SlackPermanentError` carrying Slack's error name.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Mapping
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from bot.errors import SlackPermanentError, SlackUnreachableError
from bot.model import Target

__all__ = ["TRANSIENT_ERRORS", "SlackGateway", "make_client"]

log = logging.getLogger(__name__)

# Slack error names that mean "try again later", not "this will never work".
TRANSIENT_ERRORS = frozenset(
    {
        "ratelimited",
        "internal_error",
        "fatal_error",
        "service_unavailable",
        "request_timeout",
        "team_added_to_org",
    }
)
_RATE_LIMIT_RETRIES = 100  # 429s are waited out, not counted against the delivery window
_CACHE_S = 60.0  # user-group membership is cached for at most a minute (protocol section 7)


def make_client(token: str, base_url: str, *, timeout: int = 15) -> AsyncWebClient:
    return AsyncWebClient(
        token=token,
        base_url=base_url,
        timeout=timeout,
        retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=_RATE_LIMIT_RETRIES)],
    )


class SlackGateway:
    def __init__(self, client: AsyncWebClient, *, delivery_window_ms: int = 60_000) -> None:
        self.client = client
        self.delivery_window_s = delivery_window_ms / 1000
        self._groups: dict[str, tuple[float, frozenset[str]]] = {}
        self._names: dict[str, tuple[float, str]] = {}
        self._bot_user_id: str | None = None

    async def call(self, method: str, *, where: str | None = None, **params: Any) -> Mapping[str, Any]:
        """Call ``method``; retry transient failures inside the delivery window."""
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await self.client.api_call(method, json=params)
                return response.data if isinstance(response.data, dict) else {}
            except SlackApiError as exc:
                error = str(exc.response.get("error") or "") if exc.response is not None else ""
                status = exc.response.status_code if exc.response is not None else 0
                if error and error not in TRANSIENT_ERRORS and status < 500:
                    raise SlackPermanentError(error, method=method, where=where) from None
                reason = f"HTTP {status} {error}".strip()
            except (aiohttp.ClientError, TimeoutError, ConnectionError, ValueError) as exc:
                # ValueError: a non-JSON body (an HTML error page from a proxy) is a transient failure too.
                reason = f"{type(exc).__name__}: {exc}"
            elapsed = time.monotonic() - started
            if elapsed >= self.delivery_window_s:
                raise SlackUnreachableError(
                    f"Slack did not answer {method}{' for ' + where if where else ''} within "
                    f"{self.delivery_window_s:g} s (last: {reason})",
                    method=method,
                    where=where,
                )
            delay = min(2.0 ** min(attempt, 5) * 0.25, 8.0) * (0.5 + random.random() / 2)
            delay = min(delay, max(self.delivery_window_s - elapsed, 0.05))
            log.warning("slack %s failed (%s); retrying in %.2fs", method, reason, delay)
            await asyncio.sleep(delay)

    # -- conversations -------------------------------------------------------------------

    async def resolve_user(self, user: str) -> str:
        """A user id from ``U...``/``W...`` or an email address."""
        if "@" in user:
            data = await self.call("users.lookupByEmail", email=user, where=f"for {user}")
            return str(data["user"]["id"])
        return user

    async def open_dm(self, user: str) -> str:
        user_id = await self.resolve_user(user)
        data = await self.call("conversations.open", users=user_id, where=f"with {user_id}")
        return str(data["channel"]["id"])

    async def target_for(
        self, *, channel: str | None, user: str | None, thread_ts: str | None = None
    ) -> Target:
        if channel is not None:
            return Target(channel=channel, thread_ts=thread_ts)
        assert user is not None
        user_id = await self.resolve_user(user)
        return Target(channel=await self.open_dm(user_id), user=user_id)

    # -- messages ------------------------------------------------------------------------

    async def post(self, target: Target, *, text: str, blocks: list[dict[str, Any]]) -> str:
        params: dict[str, Any] = {
            "channel": target.channel,
            "text": text,
            "blocks": blocks,
            "unfurl_links": False,
            "unfurl_media": False,
        }
        if target.thread_ts:
            params["thread_ts"] = target.thread_ts
        data = await self.call("chat.postMessage", where=f"to {target.channel}", **params)
        return str(data["ts"])

    async def reply(
        self, channel: str, thread_ts: str, *, text: str, blocks: list[dict[str, Any]] | None = None
    ) -> str:
        params: dict[str, Any] = {
            "channel": channel,
            "thread_ts": thread_ts,
            "text": text,
            "unfurl_links": False,
        }
        if blocks:
            params["blocks"] = blocks
        data = await self.call("chat.postMessage", where=f"in a thread of {channel}", **params)
        return str(data["ts"])

    async def update(self, channel: str, ts: str, *, text: str, blocks: list[dict[str, Any]]) -> None:
        await self.call(
            "chat.update", where=f"for {channel}/{ts}", channel=channel, ts=ts, text=text, blocks=blocks
        )

    async def ephemeral(self, channel: str, user: str, text: str) -> None:
        await self.call(
            "chat.postEphemeral", where=f"to {user} in {channel}", channel=channel, user=user, text=text
        )

    async def permalink(self, channel: str, ts: str) -> str | None:
        try:
            data = await self.call("chat.getPermalink", channel=channel, message_ts=ts)
        except (SlackPermanentError, SlackUnreachableError):
            return None
        link = data.get("permalink")
        return str(link) if link else None

    # -- modals --------------------------------------------------------------------------

    async def open_view(self, trigger_id: str, view: dict[str, Any]) -> None:
        await self.call("views.open", trigger_id=trigger_id, view=view)

    # -- people --------------------------------------------------------------------------

    async def usergroup_members(self, group: str) -> frozenset[str]:
        cached = self._groups.get(group)
        now = time.monotonic()
        if cached is not None and now - cached[0] < _CACHE_S:
            return cached[1]
        data = await self.call("usergroups.users.list", usergroup=group, where=f"for {group}")
        members = frozenset(str(u) for u in data.get("users") or [])
        self._groups[group] = (now, members)
        return members

    async def bot_user_id(self) -> str | None:
        if self._bot_user_id is None:
            try:
                data = await self.call("auth.test")
            except (SlackPermanentError, SlackUnreachableError):
                return None
            self._bot_user_id = str(data.get("user_id") or "") or None
        return self._bot_user_id
