"""Bolt wiring: listeners parse payloads at the edge and hand typed actions to the engine.

Every listener acks first (Slack's 3-second limit), except view submissions, whose ack carries
validation errors (and "not recorded" when Redis does not answer within its bound); their slow part
(Redis + Slack) runs after the ack. What Redis failing does to a person's act is bot.engine.acts.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from slack_bolt.async_app import AsyncAck, AsyncApp
from slack_bolt.middleware.authorization.async_single_team_authorization import AsyncSingleTeamAuthorization
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot.engine import Engine
from bot.engine.workflow import WorkflowSteps
from bot.ids import (
    ACTION_CHOOSE,
    ACTION_DECLINE,
    ACTION_HOME_PAGE,
    ACTION_NOOP,
    ACTION_OPEN,
    ACTION_OTHER,
    ACTION_REPLY_CHANGE,
    ACTION_REPLY_CONFIRM,
    VIEW_DECLINE,
    VIEW_FORM,
    VIEW_OTHER,
    AskRef,
)
from bot.loops import log_failure
from bot.slack.interactions import parse_block_action, parse_view_submission
from bot.workflow import CALLBACK_ID

__all__ = ["build_app", "find_ask_ref", "prime_authorization"]

log = logging.getLogger(__name__)

ACK_WAIT_S = 3.0
"""How long a request's answer waits for its listener's ack: Slack's own limit, after which it has
given up on the answer (as Bolt's ``ack_timeout``)."""

_Listener = TypeVar("_Listener", bound=Callable[..., Awaitable[None]])

_OUR_ACTIONS = re.compile(
    rf"^(?:{re.escape(ACTION_CHOOSE)}(?::\d+)?|{re.escape(ACTION_DECLINE)}|{re.escape(ACTION_OPEN)}"
    rf"|{re.escape(ACTION_OTHER)}|{re.escape(ACTION_REPLY_CONFIRM)}|{re.escape(ACTION_REPLY_CHANGE)}"
    rf"|{re.escape(ACTION_HOME_PAGE)}:(?:next|prev))$|^{re.escape(ACTION_NOOP)}"
)
"""The action ids the bot's buttons carry (any other is not the bot's: Bolt answers it 404)."""
_OUR_VIEWS = re.compile(rf"^(?:{re.escape(VIEW_FORM)}|{re.escape(VIEW_OTHER)}|{re.escape(VIEW_DECLINE)})$")


def _answered_at_ack(running: set[asyncio.Task[Any]], listener: _Listener) -> _Listener:
    """The listener, run in a task of its own, ``running`` while it runs (a clean stop waits for it),
    that Bolt's answer to Slack does not wait for beyond the listener's ``ack()``.

    Bolt answers when a listener returns (``process_before_response=True``): this wrapper returns as
    soon as the listener has acked (or ended, or, with no ``ack`` to call, at once: Bolt acks events
    itself), and the listener's slow part goes on after the answer. Bolt's own way to answer early
    (``process_before_response=False``) checks for the ack every 10 ms, so each click's answer waited
    for that timer, after its result was already on the agent's list (docs/performance.md). A failure
    before the ack reaches Bolt (an HTTP 500 and the error handler); one after it is one log line."""

    @functools.wraps(listener)  # Bolt picks the arguments to pass from the unwrapped signature
    async def wrapper(*args: Any, **kwargs: Any) -> None:
        answered: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        ack = kwargs.get("ack")
        if ack is None:  # an event: Bolt acks it once this returns
            answered.set_result(None)
        else:

            async def ack_and_answer(*a: Any, **kw: Any) -> Any:
                try:
                    return await ack(*a, **kw)
                finally:
                    if not answered.done():
                        answered.set_result(None)

            kwargs["ack"] = ack_and_answer

        async def run() -> None:
            try:
                await listener(*args, **kwargs)
            except Exception as exc:
                if answered.done():
                    log_failure(log, "a Slack request's listener", exc)
                else:
                    answered.set_exception(exc)
            finally:
                if not answered.done():
                    answered.set_result(None)

        task = asyncio.create_task(run())
        running.add(task)
        task.add_done_callback(running.discard)
        done, _ = await asyncio.wait({answered}, timeout=ACK_WAIT_S)
        if not done:
            answered.cancel()  # a failure from now on is logged, not handed to Bolt
            log.warning("a Slack request's listener did not ack within %.0f s", ACK_WAIT_S)
            return
        answered.result()  # a failure before the ack: Bolt answers 500

    return wrapper  # type: ignore[return-value]


def find_ask_ref(blocks: Any) -> AskRef | None:
    """The ask a message carried, read back from its buttons' values (for deleted-message events)."""
    if not isinstance(blocks, list):
        return None
    for block in blocks:
        if not isinstance(block, dict):
            continue
        elements = list(block.get("elements") or [])
        if isinstance(block.get("accessory"), dict):
            elements.append(block["accessory"])
        for element in elements:
            if isinstance(element, dict) and str(element.get("action_id", "")).startswith("slack_ask:"):
                ref = AskRef.decode(str(element.get("value") or ""))
                if ref is not None:
                    return ref
    return None


def build_app(
    engine: Engine,
    *,
    client: AsyncWebClient,
    signing_secret: str | None,
    socket_mode: bool,
    verified_at_edge: bool = False,
    running: set[asyncio.Task[Any]] | None = None,
    steps: WorkflowSteps | None = None,
) -> AsyncApp:
    """The Bolt app; ``running`` (if given) holds the tasks of listeners at work, for a clean stop;
    ``steps`` (if given) runs the Workflow Builder step (docs/workflow-step.md); ``verified_at_edge``:
    HTTP requests reach it only through ``bot.slack.edge``, which checked their signature already."""
    app = AsyncApp(
        client=client,
        # Socket Mode payloads arrive over an authenticated WebSocket; HTTP requests are always verified:
        # by the edge on the raw bytes (bot.slack.edge), else by Bolt.
        signing_secret=signing_secret,
        request_verification_enabled=not socket_mode and not verified_at_edge,
        # Answered when a listener returns; each one returns at its ack (_answered_at_ack).
        process_before_response=True,
        raise_error_for_unhandled_request=False,
        # message_deleted of the bot's own ask message is an event about the bot itself; Bolt drops
        # those by default, and the bot must see it to dismiss the ask.
        ignoring_self_events_enabled=False,
    )

    tasks = running if running is not None else set()  # a task nobody holds may be collected

    def track(listener: _Listener) -> _Listener:
        return _answered_at_ack(tasks, listener)

    # One listener per kind of request, clicks and messages first: Bolt tries its listeners in order
    # and builds every tried listener's keyword arguments to ask its matcher, so each listener more
    # was a cost to every request that came before it matched (docs/performance.md).
    @app.action(_OUR_ACTIONS)
    @track
    async def clicked(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        action = parse_block_action(body)
        if action is None:
            return
        action_id = action.action_id
        if action_id == ACTION_DECLINE:
            await engine.on_decline(action)
        elif action_id == ACTION_OPEN:
            await engine.on_open(action)
        elif action_id == ACTION_OTHER:
            await engine.on_open(action, other=True)
        elif action_id in (ACTION_REPLY_CONFIRM, ACTION_REPLY_CHANGE):
            # Confirm / Change on the private reading of an answer typed in a thread (bot.engine.replies).
            value = (body.get("actions") or [{}])[0].get("value")
            if action_id == ACTION_REPLY_CONFIRM:
                await engine.on_reply_confirm(action, value)
            else:
                await engine.on_reply_change(action, value)
        elif action_id.startswith(ACTION_HOME_PAGE):
            if action.home:
                await engine.on_home_page(action)
        elif action_id.startswith(ACTION_CHOOSE):
            await engine.on_choose(action)
        # ACTION_NOOP (a link button, a static label): the ack was all it needed.

    @app.event("message")
    @track
    async def message_events(event: dict[str, Any]) -> None:
        subtype, changed = event.get("subtype"), event.get("message")
        if subtype == "message_deleted":
            gone = event.get("deleted_ts")
        elif (
            subtype == "message_changed"
            and isinstance(changed, dict)
            and changed.get("subtype") == "tombstone"
        ):
            # A deleted message with thread replies (every reminded ask has some) is not removed: Slack
            # leaves a tombstone in its place and sends message_changed, not message_deleted.
            gone = changed.get("ts")
        else:
            ref = find_ask_ref(event.get("blocks"))
            bot_id, app_id = event.get("bot_id"), event.get("app_id")
            if subtype is None and not (bot_id or app_id):
                # A person's message: maybe an answer typed in an ask's thread or DM. Edits
                # (message_changed), broadcasts and every other subtype are never answers.
                await engine.on_reply(event)
                return
            if subtype is None and ref is not None and (bot_id or app_id):
                # A bot's message carrying an ask, in a channel or a thread (a thread-routed ask): if it
                # is this bot's own, recorded when the replica that posted it died first.
                await engine.learn_message(
                    str(event.get("channel") or ""),
                    str(event.get("ts") or ""),
                    ref,
                    bot_id=str(bot_id) if bot_id else None,
                    app_id=str(app_id) if app_id else None,
                )
            return
        previous = event.get("previous_message")
        previous = previous if isinstance(previous, dict) else {}  # Slack has sent [] here
        ref = find_ask_ref(previous.get("blocks"))
        channel, ts = str(event.get("channel") or ""), str(gone or previous.get("ts") or "")
        await engine.dismiss_message(channel, ts, ref, detail=f"message {channel}/{ts} was deleted")

    @app.event("app_home_opened")
    @track
    async def home_opened(event: dict[str, Any]) -> None:
        # The Messages tab opens the same event (tab "messages"): only the Home tab is drawn.
        user = event.get("user")
        if event.get("tab", "home") == "home" and isinstance(user, str) and user:
            await engine.on_home_opened(user)

    @track
    async def submitted(ack: AsyncAck, body: dict[str, Any]) -> None:
        sub = parse_view_submission(body)
        if sub is None:
            await ack()
            return
        response, then = await engine.on_submit(sub)
        if response is not None:
            await ack(**response)
        else:
            await ack()
        if then is not None:
            await then()

    app.view(_OUR_VIEWS)(submitted)

    @track
    async def archived(event: dict[str, Any]) -> None:
        channel = str(event.get("channel") or "")
        await engine.dismiss_channel(channel, detail=f"conversation {channel} was archived")

    app.event(re.compile(r"^(channel|group)_archive$"))(archived)

    if steps is not None:
        # Acked once the execution is recorded in Redis: Slack sends an event it got no ack for again.
        @app.function(CALLBACK_ID, auto_acknowledge=False)
        @track
        async def ask_step(ack: AsyncAck, event: dict[str, Any]) -> None:
            await steps.on_executed(event, ack)

    prime_authorization(app, client, engine.slack.identity)

    @app.error
    async def listener_failed(error: Exception) -> None:
        # Bolt's default handler logs a traceback; a listener failing (Redis failing over, say) is
        # one line, never logged as a crash (guarantee 10.5). Slack retries what was not acked.
        log_failure(log, "a Slack request's listener", error)

    return app


def prime_authorization(app: AsyncApp, client: AsyncWebClient, auth_test: Mapping[str, Any] | None) -> None:
    """Hand Bolt the ``auth.test`` answer the bot got at start. Bolt's single-workspace authorization
    otherwise calls ``auth.test`` on every request until one has answered, so a burst of first clicks
    (100 people at once after a restart) is a burst of ``auth.test`` calls, and Slack's 429s turn some of
    them into "authorization failed" answers."""
    if not auth_test:
        return
    answer = AsyncSlackResponse(
        client=client,
        http_verb="POST",
        api_url=f"{client.base_url}auth.test",
        req_args={},
        data=dict(auth_test),
        headers={},
        status_code=200,
    )
    for middleware in app._async_middleware_list:  # Bolt offers no public way in
        if isinstance(middleware, AsyncSingleTeamAuthorization) and middleware.auth_test_result is None:
            middleware.auth_test_result = answer
