"""The one gateway to Slack's Web API: pacing, retries, error mapping, small caches.

* Every call first takes its token (``bot.slack.pacing``): the bot waits for Slack's rate limits
  instead of collecting 429s.
* 429 (any body): waited out as ``Retry-After`` says; never counted against the delivery window,
  but bounded, like every wait, by the ``deadline`` of the lease covering the call (a wait that would
  outlive it raises :class:`SlackBusyError`, nothing sent).
* 5xx, any non-JSON body (an HTML or text/plain page from Slack or a proxy), network errors and
  timeouts: retried with backoff until the delivery window ends, then :class:`SlackUnreachableError`
  (protocol code ``slack_unreachable``). The window counts what Slack took to answer (or fail) and
  the backoff, never time this process spent frozen (SIGSTOP, a VM paused, a stalled loop:
  ``_FreezeWatch``): a pause is not Slack's fault. A call whose lease ran
  out (during a pause, say) raises :class:`SlackBusyError`: the work is handed back, never ended.
* Any other ``ok: false``: :class:`SlackPermanentError` carrying Slack's error name.

Requests go out on the client's aiohttp session with the client's token, base URL and timeout;
the gateway reads status, headers and body itself, so no body shape can escape the retry path.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import Mapping
from typing import Any

import aiohttp
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from bot.errors import SlackAuthError, SlackBusyError, SlackError, SlackPermanentError, SlackUnreachableError
from bot.model import Target
from bot.slack.deadline import Deadline
from bot.slack.deadline import at as _at
from bot.slack.pacing import Pacer, Priority
from bot.tasks import cancel_and_wait

__all__ = ["TRANSIENT_ERRORS", "SlackGateway", "make_client", "permalink_for"]

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
_CACHE_S = 60.0  # user-group membership is cached for at most a minute (protocol section 7)
_MIN_ATTEMPT_S = 0.05  # an attempt with less time than this before its deadline is not started
_DEFAULT_RETRY_AFTER_S = 1.0  # a 429 without a readable Retry-After
_TICK_S = 0.2
FROZEN_S = 0.5
"""A gap this much longer than a tick of :class:`_FreezeWatch` is time the process did not run."""


class _FreezeWatch:
    """Measures, while a call is in progress, the time this process did not run at all: frozen
    (SIGSTOP, a VM or container paused, a laptop lid) or its event loop stalled. A ticker wakes every
    ``_TICK_S``; a tick that comes more than ``FROZEN_S`` late means the process was away that long.
    ``frozen()`` also counts a gap still open (the call may resume before the ticker does)."""

    def __init__(self) -> None:
        self._done = 0.0
        self._last = time.monotonic()
        self._task: asyncio.Task[None] | None = None

    def frozen(self) -> float:
        gap = time.monotonic() - self._last - _TICK_S
        return self._done + (gap if gap > FROZEN_S else 0.0)

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(_TICK_S)
            now = time.monotonic()
            gap = now - self._last - _TICK_S
            if gap > FROZEN_S:
                self._done += gap
            self._last = now

    async def __aenter__(self) -> _FreezeWatch:
        self._task = asyncio.create_task(self._tick())
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._task is not None
        await cancel_and_wait(self._task)


def make_client(token: str, base_url: str, *, timeout: int = 15) -> AsyncWebClient:
    """The client Bolt and ``doctor`` use directly; the gateway only borrows its settings and session.
    One 429 retry for Bolt's own calls; the gateway does its own, bounded, waiting."""
    return AsyncWebClient(
        token=token,
        base_url=base_url,
        timeout=timeout,
        retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=1)],
    )


def permalink_for(workspace_url: str, channel: str, ts: str, *, thread_ts: str | None = None) -> str:
    """Slack's permalink of a message, built as Slack builds it (no ``chat.getPermalink`` call):
    ``https://<team>.slack.com/archives/<channel>/p<ts without its dot>``."""
    link = f"{workspace_url.rstrip('/')}/archives/{channel}/p{ts.replace('.', '')}"
    if thread_ts and thread_ts != ts:
        link += f"?thread_ts={thread_ts}&cid={channel}"
    return link


def _retry_after(headers: Mapping[str, str]) -> float:
    value = headers.get("Retry-After") or headers.get("retry-after")
    try:
        seconds = float(value) if value is not None else _DEFAULT_RETRY_AFTER_S
    except ValueError:
        seconds = _DEFAULT_RETRY_AFTER_S
    return seconds if seconds >= 0 else _DEFAULT_RETRY_AFTER_S


def _body_kind(data: Any, content_type: str) -> str:
    if isinstance(data, dict):
        return str(data.get("error") or "")
    return f"({content_type or 'no'} body)" if data == "" else f"({content_type or 'non-JSON'} body)"


class SlackGateway:
    def __init__(
        self,
        client: AsyncWebClient,
        *,
        delivery_window_ms: int = 60_000,
        pacer: Pacer | None = None,
    ) -> None:
        self.client = client
        self.delivery_window_s = delivery_window_ms / 1000
        self.pacer = pacer or Pacer(None)
        self.workspace_url: str | None = None
        """``https://<team>.slack.com/``, from ``auth.test`` at start: permalinks need no call."""
        self.identity: Mapping[str, Any] | None = None
        """The whole ``auth.test`` answer (Bolt's authorization reuses it)."""
        self._groups: dict[str, tuple[float, frozenset[str]]] = {}
        self._names: dict[str, tuple[float, str]] = {}
        self._bot_user_id: str | None = None

    # -- the one way out --------------------------------------------------------------------

    async def _send(
        self, method: str, params: Mapping[str, Any], *, limit_s: float, token: str | None
    ) -> tuple[int, Mapping[str, str], Any, str]:
        """One HTTP attempt: status, headers, body (a dict when it is a JSON object, else its text)."""
        session = self.client.session
        own = session is None or session.closed
        if own:
            session = aiohttp.ClientSession()
        assert session is not None
        headers = {
            "Authorization": f"Bearer {token or self.client.token}",
            "Content-Type": "application/json;charset=utf-8",
        }
        try:
            async with session.post(
                f"{self.client.base_url}{method}",
                data=json.dumps(params),
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=limit_s),
            ) as response:
                raw = await response.read()
                text = raw.decode("utf-8", errors="replace")
                try:
                    data: Any = json.loads(text) if text else ""
                except ValueError:
                    data = text[:200]
                return response.status, response.headers, data, response.content_type
        finally:
            if own:
                await session.close()

    async def call(
        self,
        method: str,
        *,
        where: str | None = None,
        priority: Priority = "now",
        deadline: Deadline = None,
        retry: bool = True,
        channel_token: bool = False,
        token: str | None = None,
        **params: Any,
    ) -> Mapping[str, Any]:
        """Call ``method``; retry transient failures inside the delivery window.

        ``deadline`` (``time.monotonic()``, or a :class:`MovingDeadline` that renewals move on): the
        end of the lease covering this call; no wait and no attempt outlives it
        (:class:`SlackBusyError`). ``retry=False``: one attempt, for paths with
        a budget of their own (a form's ack). ``channel_token``: the post's channel token is already
        taken (``take_post_token``)."""
        async with _FreezeWatch() as watch:
            return await self._call(
                method,
                watch,
                where=where,
                priority=priority,
                deadline=deadline,
                retry=retry,
                channel_token=channel_token,
                token=token,
                params=params,
            )

    async def _call(
        self,
        method: str,
        watch: _FreezeWatch,
        *,
        where: str | None,
        priority: Priority,
        deadline: Deadline,
        retry: bool,
        channel_token: bool,
        token: str | None,
        params: Mapping[str, Any],
    ) -> Mapping[str, Any]:
        counted = 0.0  # Slack's time only: attempts and backoffs, never tokens, Retry-After or a pause
        channel = str(params.get("channel") or "") or None
        attempt = 0
        while True:
            attempt += 1
            if method == "chat.postMessage" and channel and not channel_token:
                await self.pacer.take_channel(channel, priority=priority, deadline=_at(deadline))
            channel_token = False  # a retry takes a fresh channel token
            await self.pacer.take(method, priority=priority, deadline=_at(deadline))
            timeout = float(self.client.timeout)
            end = _at(deadline)
            if end is not None:
                left = end - time.monotonic()
                if left < _MIN_ATTEMPT_S:
                    raise self._busy(method, where, "no time left in its lease")
                if isinstance(deadline, float | int):
                    timeout = min(timeout, left)
            retry_after: float | None = None
            sent, frozen = time.monotonic(), watch.frozen()
            try:
                if deadline is None or isinstance(deadline, float | int):
                    status, headers, data, content_type = await self._send(
                        method, params, limit_s=timeout, token=token
                    )
                else:
                    # A renewed lease: the answer is waited for while the lease is renewed.
                    async with deadline.bound():
                        status, headers, data, content_type = await self._send(
                            method, params, limit_s=timeout, token=token
                        )
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                reason = f"{type(exc).__name__}: {exc}".rstrip(": ")
            else:
                if status == 200 and isinstance(data, dict) and data.get("ok") is True:
                    return data
                error = str(data.get("error") or "") if isinstance(data, dict) else ""
                if status == 429 or error == "ratelimited":
                    retry_after = _retry_after(headers)
                    reason = f"HTTP {status} ratelimited, Retry-After {retry_after:g} s"
                elif isinstance(data, dict) and error and status < 500 and error not in TRANSIENT_ERRORS:
                    raise SlackPermanentError(error, method=method, where=where)
                else:
                    reason = f"HTTP {status} {_body_kind(data, content_type)}".strip()
            now = time.monotonic()
            end = _at(deadline)
            if end is not None and now >= end:
                # The lease covering the call ran out under it (a pause, or a call that outlived it):
                # the work is another replica's to take over now, not Slack's failure to report.
                raise self._busy(method, where, f"its lease ran out (last: {reason})")
            if retry_after is not None:
                # Under a renewed lease the wait renews it too, up to what a lease of twice the
                # delivery window allowed before renewals; longer, the work is handed back.
                longest = deadline - now if isinstance(deadline, float | int) else 2 * self.delivery_window_s
                if not retry or (end is not None and retry_after >= longest):
                    raise self._busy(method, where, reason)
                log.info("slack %s rate limited; waiting %.2fs as Slack asks", method, retry_after)
                await self._pause(deadline, retry_after, method, where, reason)
                continue
            counted += now - sent - (watch.frozen() - frozen)
            if not retry or counted >= self.delivery_window_s:
                raise SlackUnreachableError(
                    f"Slack did not answer {method}{' ' + where if where else ''} within "
                    f"{self.delivery_window_s:g} s (last: {reason})",
                    method=method,
                    where=where,
                )
            delay = min(2.0 ** min(attempt, 5) * 0.25, 8.0) * (0.5 + random.random() / 2)
            delay = min(delay, max(self.delivery_window_s - counted, _MIN_ATTEMPT_S))
            if isinstance(deadline, float | int) and now + delay + _MIN_ATTEMPT_S >= deadline:
                raise self._busy(method, where, reason)
            log.warning("slack %s failed (%s); retrying in %.2fs", method, reason, delay)
            slept, frozen = time.monotonic(), watch.frozen()
            await self._pause(deadline, delay, method, where, reason)
            counted += time.monotonic() - slept - (watch.frozen() - frozen)

    async def _pause(
        self, deadline: Deadline, seconds: float, method: str, where: str | None, reason: str
    ) -> None:
        """Sleep between attempts; under a renewed lease only while it is renewed."""
        if deadline is None or isinstance(deadline, float | int):
            await asyncio.sleep(seconds)
            return
        try:
            async with deadline.bound():
                await asyncio.sleep(seconds)
        except TimeoutError:
            raise self._busy(method, where, f"its lease ran out (last: {reason})") from None

    @staticmethod
    def _busy(method: str, where: str | None, reason: str) -> SlackBusyError:
        place = f" {where}" if where else ""
        return SlackBusyError(
            f"Slack could not take {method}{place} before its lease ends (last: {reason})",
            method=method,
            where=where,
        )

    async def take_post_token(self, channel: str, *, priority: Priority = "post") -> None:
        """Take a post's channel token now, or raise :class:`bot.errors.Deferred` when the channel is
        busy (intake then handles other entries and comes back). Pass ``channel_token=True`` after."""
        await self.pacer.take_channel(channel, priority=priority, defer=True)

    # -- start ---------------------------------------------------------------------------

    async def check_tokens(self, *, app_token: str | None = None, budget_s: float | None = None) -> None:
        """At start: the bot token with ``auth.test`` (which also gives the workspace URL permalinks
        are built from) and, in Socket Mode, the app token with ``apps.connections.open``. A token
        Slack refuses raises :class:`SlackAuthError`; Slack not answering within ``budget_s`` raises
        SlackUnreachableError or SlackBusyError."""
        deadline = None if budget_s is None else time.monotonic() + budget_s
        try:
            data = await self.call("auth.test", deadline=deadline)
        except SlackPermanentError as exc:
            raise SlackAuthError("SLACK_BOT_TOKEN", exc.code) from None
        self._identity(data)
        if app_token is not None:
            try:
                # The URL handed out is single-use and short-lived; Bolt's handler opens its own.
                await self.call("apps.connections.open", token=app_token, deadline=deadline)
            except SlackPermanentError as exc:
                raise SlackAuthError("SLACK_APP_TOKEN", exc.code) from None

    def _identity(self, data: Mapping[str, Any]) -> None:
        self.identity = data
        self._bot_user_id = str(data.get("user_id") or "") or None
        url = str(data.get("url") or "")
        self.workspace_url = url if url.startswith(("https://", "http://")) else None

    async def permalink(self, channel: str, ts: str, *, thread_ts: str | None = None) -> str | None:
        """The message's permalink, without a Slack call; None before ``check_tokens`` learnt the URL.
        (Async for its callers' sake: an ask's ending never waits on Slack for it.)"""
        if self.workspace_url is None:
            return None
        return permalink_for(self.workspace_url, channel, ts, thread_ts=thread_ts)

    # -- conversations -------------------------------------------------------------------

    async def resolve_user(self, user: str, *, priority: Priority = "post", deadline: Deadline = None) -> str:
        """A user id from ``U...``/``W...`` or an email address."""
        if "@" in user:
            data = await self.call(
                "users.lookupByEmail", email=user, where=f"for {user}", priority=priority, deadline=deadline
            )
            return str(data["user"]["id"])
        return user

    async def open_dm(self, user: str, *, priority: Priority = "post", deadline: Deadline = None) -> str:
        user_id = await self.resolve_user(user, priority=priority, deadline=deadline)
        data = await self.call(
            "conversations.open", users=user_id, where=f"with {user_id}", priority=priority, deadline=deadline
        )
        return str(data["channel"]["id"])

    async def target_for(
        self,
        *,
        channel: str | None,
        user: str | None,
        thread_ts: str | None = None,
        priority: Priority = "post",
        deadline: Deadline = None,
    ) -> Target:
        if channel is not None:
            return Target(channel=channel, thread_ts=thread_ts)
        assert user is not None
        user_id = await self.resolve_user(user, priority=priority, deadline=deadline)
        return Target(channel=await self.open_dm(user_id, priority=priority, deadline=deadline), user=user_id)

    # -- messages ------------------------------------------------------------------------

    async def post(
        self,
        target: Target,
        *,
        text: str,
        blocks: list[dict[str, Any]],
        priority: Priority = "post",
        deadline: Deadline = None,
        channel_token: bool = False,
    ) -> str:
        params: dict[str, Any] = {
            "channel": target.channel,
            "text": text,
            "blocks": blocks,
            "unfurl_links": False,
            "unfurl_media": False,
        }
        if target.thread_ts:
            params["thread_ts"] = target.thread_ts
        data = await self.call(
            "chat.postMessage",
            where=f"to {target.channel}",
            priority=priority,
            deadline=deadline,
            channel_token=channel_token,
            **params,
        )
        return str(data["ts"])

    async def reply(
        self,
        channel: str,
        thread_ts: str,
        *,
        text: str,
        blocks: list[dict[str, Any]] | None = None,
        priority: Priority = "remind",
        deadline: Deadline = None,
    ) -> str:
        params: dict[str, Any] = {
            "channel": channel,
            "thread_ts": thread_ts,
            "text": text,
            "unfurl_links": False,
        }
        if blocks:
            params["blocks"] = blocks
        data = await self.call(
            "chat.postMessage",
            where=f"in a thread of {channel}",
            priority=priority,
            deadline=deadline,
            **params,
        )
        return str(data["ts"])

    async def update(
        self,
        channel: str,
        ts: str,
        *,
        text: str,
        blocks: list[dict[str, Any]],
        priority: Priority = "now",
        deadline: Deadline = None,
    ) -> None:
        await self.call(
            "chat.update",
            where=f"for {channel}/{ts}",
            priority=priority,
            deadline=deadline,
            channel=channel,
            ts=ts,
            text=text,
            blocks=blocks,
        )

    async def delete(
        self, channel: str, ts: str, *, priority: Priority = "clear", deadline: Deadline = None
    ) -> None:
        await self.call(
            "chat.delete",
            where=f"for {channel}/{ts}",
            priority=priority,
            deadline=deadline,
            channel=channel,
            ts=ts,
        )

    async def ephemeral(
        self,
        channel: str,
        user: str,
        text: str,
        *,
        blocks: list[dict[str, Any]] | None = None,
        thread_ts: str | None = None,
    ) -> None:
        params: dict[str, Any] = {"channel": channel, "user": user, "text": text}
        if blocks:
            params["blocks"] = blocks
        if thread_ts:
            params["thread_ts"] = thread_ts
        await self.call("chat.postEphemeral", where=f"to {user} in {channel}", **params)

    async def respond(self, response_url: str, text: str, *, limit_s: float = 5.0) -> None:
        """A private message to the person who clicked, through the click's ``response_url``: no token
        and no pacing (Slack allows 5 uses in 30 minutes), so nothing of it needs Redis. One attempt;
        :class:`SlackUnreachableError` or :class:`SlackPermanentError` when it did not land."""
        session = self.client.session
        own = session is None or session.closed
        if own:
            session = aiohttp.ClientSession()
        assert session is not None
        body = {"response_type": "ephemeral", "replace_original": False, "text": text}
        try:
            async with session.post(
                response_url, json=body, timeout=aiohttp.ClientTimeout(total=limit_s)
            ) as response:
                raw = await response.read()
                status = response.status
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise SlackUnreachableError(
                f"the response_url did not answer ({type(exc).__name__})", method="response_url"
            ) from None
        finally:
            if own:
                await session.close()
        if status != 200:
            raise SlackPermanentError(
                raw.decode("utf-8", errors="replace")[:100] or str(status), method="response_url"
            )

    # -- modals --------------------------------------------------------------------------

    async def open_view(self, trigger_id: str, view: dict[str, Any]) -> None:
        await self.call("views.open", trigger_id=trigger_id, view=view)

    # -- people --------------------------------------------------------------------------

    def cached_members(self, group: str) -> frozenset[str] | None:
        """A user group's members when read less than a minute ago, else None (no Slack call)."""
        cached = self._groups.get(group)
        if cached is not None and time.monotonic() - cached[0] < _CACHE_S:
            return cached[1]
        return None

    async def usergroup_members(self, group: str, *, budget_s: float | None = None) -> frozenset[str]:
        """A user group's members (cached for a minute). ``budget_s``: one attempt within that time,
        for a path that must answer Slack quickly (a form's ack)."""
        cached = self.cached_members(group)
        if cached is not None:
            return cached
        now = time.monotonic()
        data = await self.call(
            "usergroups.users.list",
            usergroup=group,
            where=f"for {group}",
            retry=budget_s is None,
            deadline=None if budget_s is None else now + budget_s,
        )
        members = frozenset(str(u) for u in data.get("users") or [])
        self._groups[group] = (now, members)
        return members

    async def user_name(self, user: str) -> str:
        """A person's Slack name for results and the bot's replies (``users.info``, cached for a
        minute); the id itself when Slack cannot tell."""
        cached = self._names.get(user)
        now = time.monotonic()
        if cached is not None and now - cached[0] < _CACHE_S:
            return cached[1]
        try:
            data = await self.call("users.info", user=user, where=f"for {user}", retry=False)
        except SlackError:
            return user
        found = data.get("user") or {}
        name = str(found.get("name") or found.get("real_name") or user)
        self._names[user] = (now, name)
        return name

    async def is_own_message(self, *, bot_id: str | None, app_id: str | None) -> bool:
        """Whether a message Slack told of was posted by this bot: its ``bot_id`` (or ``app_id``) is
        the one ``auth.test`` gave (asked again when it has not answered yet). False when Slack cannot
        tell: a message is taken for the bot's own only when it is known to be."""
        if self.identity is None:
            await self.bot_user_id()  # auth.test, should it not have answered at start
        own = self.identity or {}
        own_bot, own_app = own.get("bot_id"), own.get("app_id")
        return bool((bot_id and bot_id == own_bot) or (app_id and app_id == own_app))

    async def bot_user_id(self) -> str | None:
        if self._bot_user_id is None:
            try:
                data = await self.call("auth.test")
            except (SlackPermanentError, SlackUnreachableError, SlackBusyError):
                return None
            self._identity(data)
        return self._bot_user_id
