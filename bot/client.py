"""The agent side of the wire protocol (spec/protocol.md sections 1, 2, 3, 8 and 10).

An agent pushes an ask envelope onto ``P:asks`` and pops exactly one result from its ``reply_to``
list. :class:`AskClient` does both over ``redis.asyncio``, validating every envelope with the
contract first, so a bad request fails in the caller with the contract's exact message instead of
coming back later as an ``invalid_request`` result. :class:`SyncAskClient` and :func:`ask_sync`
wrap it for scripts.

Exceptions::

    AskClientError
     ├── AskRequestError        the envelope or request is invalid (``code``, ``message``: the contract's)
     ├── RedisUnavailableError  Redis cannot be reached (or refused the credentials)
     └── MalformedResultError   the reply list held something that is not a result envelope
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import threading
import time
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Literal, Self, TypeAlias, TypedDict, Unpack, cast

import redis.asyncio as aioredis
import redis.exceptions as redis_errors
from pydantic import BaseModel, ValidationError

from bot.blpop import Slices
from bot.storage.connection import connect, redacted
from contract import ContractError, compact_json, normalize_ask_request, normalize_rich_form
from contract.approval import approval_problem
from contract.envelopes import (
    Approval,
    AskEnvelope,
    EnvelopeError,
    EscalationStep,
    Requester,
    Responders,
    ResultEnvelope,
    Route,
    parse_ask_envelope,
    parse_cancel_envelope,
)
from contract.timeout import TimeoutPolicy as OnTimeout

__all__ = [
    "DEFAULT_PREFIX",
    "DEFAULT_REDIS_URL",
    "AskClient",
    "AskClientError",
    "AskOptions",
    "AskRequestError",
    "Format",
    "MalformedResultError",
    "OnTimeout",
    "RedisUnavailableError",
    "SyncAskClient",
    "add_connection_args",
    "ask_sync",
    "decode_result",
    "new_ask_id",
    "resolve_connection",
]

DEFAULT_REDIS_URL = "redis://localhost:6379/0"
DEFAULT_PREFIX = "slack-ask"

Format: TypeAlias = Literal["pi-question", "rich"]
RequestLike: TypeAlias = Mapping[str, Any] | BaseModel
RouteLike: TypeAlias = Route | Mapping[str, Any]
RespondersLike: TypeAlias = Responders | Mapping[str, Any]
RequesterLike: TypeAlias = Requester | Mapping[str, Any]
ApprovalLike: TypeAlias = Approval | Mapping[str, Any]
EscalationLike: TypeAlias = EscalationStep | Mapping[str, Any]

# One BLPOP blocks at most this long, so a dropped connection is noticed and retried quickly.
_BLOCK_SLICE_S = 5.0
_BACKOFF_FIRST_S = 0.1
_BACKOFF_MAX_S = 2.0
_RESULT_FIELDS = frozenset(ResultEnvelope.model_fields)


class AskOptions(TypedDict, total=False):
    """The keyword options of an ask (protocol section 2); unset ones are left out of the envelope."""

    format: Format
    route: RouteLike | None
    timeout_ms: int | None
    on_timeout: OnTimeout | None
    responders: RespondersLike | None
    escalate: Sequence[EscalationLike] | None
    requester: RequesterLike | None
    remind_every_ms: int | None
    approval: ApprovalLike | None
    """Several people must agree: ``{"count", "veto", "exclude_requester"}`` (protocol section 13)."""
    ask_id: str | None
    reply_to: str | None


def resolve_connection(redis: str | None, prefix: str | None) -> tuple[str, str]:
    """The Redis URL and key prefix to use: the given ones, else ``REDIS_URL`` and ``SLACK_ASK_PREFIX``
    from the environment, else the defaults."""
    return (
        redis or os.environ.get("REDIS_URL") or DEFAULT_REDIS_URL,
        prefix or os.environ.get("SLACK_ASK_PREFIX") or DEFAULT_PREFIX,
    )


def add_connection_args(parser: argparse._ActionsContainer) -> None:
    """The ``--redis`` and ``--prefix`` options (read back with :func:`resolve_connection`)."""
    parser.add_argument(
        "--redis", metavar="URL", help=f"Redis URL (env REDIS_URL, default {DEFAULT_REDIS_URL})"
    )
    parser.add_argument("--prefix", help=f"key prefix (env SLACK_ASK_PREFIX, default {DEFAULT_PREFIX})")


class AskClientError(Exception):
    """Base of every error the client raises on purpose."""


class AskRequestError(AskClientError, ValueError):
    """The ask cannot be sent: ``message`` is the contract's exact message, ``code`` the protocol code.

    ``code`` is ``invalid_request`` when the request failed normalization, else ``invalid_envelope``
    or ``unsupported_version`` (the code the bot would have answered with).
    """

    def __init__(self, message: str, *, code: str = "invalid_request") -> None:
        super().__init__(message)
        self.message = message
        self.code = code

    def __str__(self) -> str:
        return self.message


class RedisUnavailableError(AskClientError):
    """Redis did not answer (refused, timed out, dropped) or refused the credentials."""


class MalformedResultError(AskClientError):
    """An element of the reply list is not a result envelope; ``raw`` keeps it for inspection."""

    def __init__(self, message: str, *, raw: bytes | str) -> None:
        super().__init__(message)
        self.raw = raw


# ---------------------------------------------------------------- ids


_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_ulid_lock = threading.Lock()
_ulid_last = (0, 0)


def new_ask_id() -> str:
    """A ULID: 26 characters, sortable by creation time, unique, and monotonic within this process."""
    global _ulid_last
    with _ulid_lock:
        now_ms = time.time_ns() // 1_000_000
        last_ms, last_rand = _ulid_last
        if now_ms <= last_ms:
            # Same millisecond (or the clock stepped back): keep order by counting up from the last id.
            now_ms, rand = last_ms, (last_rand + 1) & ((1 << 80) - 1)
        else:
            rand = secrets.randbits(80)
        _ulid_last = (now_ms, rand)
    value = (now_ms << 80) | rand
    return "".join(_CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))


def _plain(value: Any) -> Any:
    """A model or mapping as a JSON-ready dict; any other value unchanged."""
    if isinstance(value, BaseModel):
        to_wire = getattr(value, "to_wire", None)
        if callable(to_wire):
            return to_wire()
        return value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, Mapping):
        return dict(value)
    return value


def _normalize_request(fmt: str, request: object) -> None:
    """Run the contract's normalizer the bot will run; raise :class:`AskRequestError` with its message."""
    normalize = normalize_rich_form if fmt == "rich" else normalize_ask_request
    try:
        normalize(request)
    except ContractError as exc:
        raise AskRequestError(str(exc), code="invalid_request") from None


def _result_json(raw: bytes | str) -> dict[str, Any]:
    """The JSON object of one reply-list element."""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedResultError(f"the reply list held text that is not JSON ({exc})", raw=raw) from None
    if not isinstance(data, dict):
        raise MalformedResultError("the reply list held JSON that is not an object", raw=raw)
    return data


def _result_from_dict(data: Mapping[str, Any], *, raw: bytes | str | None = None) -> ResultEnvelope:
    """A parsed result object as a :class:`ResultEnvelope`. Unknown fields (a newer bot) are ignored."""
    try:
        return ResultEnvelope.model_validate({k: v for k, v in data.items() if k in _RESULT_FIELDS})
    except ValidationError as exc:
        raise MalformedResultError(
            f"the reply list held an invalid result envelope: {exc}",
            raw=compact_json(data) if raw is None else raw,
        ) from None


def decode_result(raw: bytes | str) -> ResultEnvelope:
    """Parse one reply-list element. Unknown fields (a newer bot) are ignored."""
    return _result_from_dict(_result_json(raw), raw=raw)


def _checked_ask(envelope: Mapping[str, Any]) -> tuple[str, AskEnvelope]:
    """An ask envelope's JSON text and parsed form, checked as the bot checks it (envelope, then
    request: protocol section 2 order); raises :class:`AskRequestError` on the first failure."""
    text = compact_json(envelope)
    try:
        parsed = parse_ask_envelope(text)
    except EnvelopeError as exc:
        raise AskRequestError(exc.message, code=exc.code) from None
    _normalize_request(parsed.format, envelope["request"])
    if parsed.approval is not None and parsed.format == "pi-question":
        # The section-13 rules that need the normalized question (a named policy's on_timeout is
        # checked by the bot, which knows the policy).
        problem = approval_problem(
            parsed.approval,
            format=parsed.format,
            request=normalize_ask_request(envelope["request"]),
            on_timeout=parsed.on_timeout,
        )
        if problem is not None:
            raise AskRequestError(problem, code="invalid_envelope")
    return text, parsed


def _redis_down(exc: BaseException, where: str) -> RedisUnavailableError:
    return RedisUnavailableError(f"Redis at {where} is unavailable: {exc}")


_TRANSIENT = (redis_errors.ConnectionError, redis_errors.TimeoutError, TimeoutError, OSError)
_FATAL = (redis_errors.AuthenticationError, redis_errors.AuthorizationError)


# ---------------------------------------------------------------- async client


class AskClient:
    """Submit asks, wait for their single result, cancel, and recover results.

    ``redis`` is a URL (the client opens and closes its own connection pool; ``redis://``,
    ``rediss://``, ``unix://``, ``redis+sentinel://``, ``redis+cluster://`` as for the bot) or a
    ``redis.asyncio.Redis`` the caller owns (left open). Use as ``async with AskClient(url) as c:``.
    """

    def __init__(self, redis: str | aioredis.Redis, *, prefix: str = DEFAULT_PREFIX) -> None:
        self.prefix = prefix
        if isinstance(redis, str):
            self._where = redacted(redis)
            # The socket timeout must outlast one BLPOP slice, or every idle slice would look like a failure.
            self._redis: aioredis.Redis = connect(redis, socket_timeout=_BLOCK_SLICE_S + 10)
            self._owned = True
            self._slice = _BLOCK_SLICE_S
        else:
            pool = getattr(redis, "connection_pool", None)  # a RedisCluster has none
            kwargs: dict[str, Any] = pool.connection_kwargs if pool is not None else {}
            self._where = f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}"
            self._redis = redis
            self._owned = False
            timeout = kwargs.get("socket_timeout")
            self._slice = (
                min(_BLOCK_SLICE_S, max(0.05, float(timeout) / 2))
                if isinstance(timeout, int | float)
                else _BLOCK_SLICE_S
            )
        # reply_to of asks sent through this client, and results popped for another ask on a shared list.
        self._reply_to: dict[str, str] = {}
        self._stash: dict[str, ResultEnvelope] = {}
        self._slices = Slices(self._redis)  # BLPOPs that outlive a cancelled wait()

    @property
    def redis(self) -> aioredis.Redis:
        return self._redis

    @property
    def asks_key(self) -> str:
        return f"{self.prefix}:asks"

    def reply_key(self, ask_id: str) -> str:
        """The default ``reply_to`` of an ask: a list of its own."""
        return f"{self.prefix}:reply:{ask_id}"

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool when the client opened it; a caller's Redis stays open. A BLPOP
        still running for a cancelled wait() ends here (what it would pop stays on the list)."""
        await self._slices.aclose()
        if self._owned:
            await self._redis.aclose()

    # ------------------------------------------------------------ building

    def reply_list(self, ask_id: str) -> str:
        """The list an ask's result arrives on: the ``reply_to`` it was submitted with through this
        client, else the default."""
        return self._reply_to.get(ask_id) or self.reply_key(ask_id)

    def _envelope(
        self,
        request: RequestLike,
        *,
        format: Format = "pi-question",
        route: RouteLike | None = None,
        timeout_ms: int | None = None,
        on_timeout: OnTimeout | None = None,
        responders: RespondersLike | None = None,
        escalate: Sequence[EscalationLike] | None = None,
        requester: RequesterLike | None = None,
        remind_every_ms: int | None = None,
        approval: ApprovalLike | None = None,
        ask_id: str | None = None,
        reply_to: str | None = None,
    ) -> tuple[dict[str, Any], str]:
        """The checked ask envelope (see :meth:`build_envelope`) and its JSON text."""
        ask_id = new_ask_id() if ask_id is None else ask_id
        envelope: dict[str, Any] = {
            "v": 1,
            "ask_id": ask_id,
            "reply_to": self.reply_key(ask_id) if reply_to is None else reply_to,
            "format": format,
            "request": _plain(request),
        }
        optional: dict[str, Any] = {
            "route": route,
            "timeout_ms": timeout_ms,
            "on_timeout": on_timeout,
            "responders": responders,
            "requester": requester,
            "remind_every_ms": remind_every_ms,
            "approval": approval,
        }
        for name, value in optional.items():
            if value is not None:
                envelope[name] = _plain(value)
        if escalate is not None:
            envelope["escalate"] = [_plain(step) for step in escalate]
        text, _ = _checked_ask(envelope)
        return envelope, text

    def build_envelope(self, request: RequestLike, **options: Unpack[AskOptions]) -> dict[str, Any]:
        """The ask envelope as JSON-ready dict, validated exactly as the bot will validate it.

        Raises :class:`AskRequestError` with the bot's message: envelope checks first, then the
        request normalizer (protocol section 2 order).
        """
        return self._envelope(request, **options)[0]

    @staticmethod
    def validate_envelope(envelope: Mapping[str, Any]) -> AskEnvelope:
        """Check an ask envelope as the bot does; raise :class:`AskRequestError` on the first failure."""
        return _checked_ask(envelope)[1]

    # ------------------------------------------------------------ protocol

    async def submit(self, request: RequestLike, **options: Unpack[AskOptions]) -> str:
        """Validate and send an ask; return its ``ask_id``. Nothing is sent when validation fails."""
        envelope, text = self._envelope(request, **options)
        await self._xadd("ask", text)
        self._reply_to[envelope["ask_id"]] = envelope["reply_to"]
        return str(envelope["ask_id"])

    # The bound is the call's documented contract (None on timeout), not a cancellation scope.
    async def wait(
        self,
        ask_id: str,
        timeout: float | None = None,  # noqa: ASYNC109
        *,
        reply_to: str | None = None,
    ) -> ResultEnvelope | None:
        """Pop the ask's result from its reply list; None when ``timeout`` seconds pass first.

        ``timeout=None`` waits for ever. Blocks in short BLPOP slices and retries with backoff on
        connection errors, so a Redis restart or failover does not end the wait. The list is the
        one the ask was submitted with through this client, else ``reply_to``, else the default.

        A wait that is cancelled leaves its BLPOP slice running to its end (at most a few seconds):
        Redis may already have popped the result for it, and closing its connection would lose
        that result (the Pi extension's grace period, in Python). What it pops goes to the next
        ``wait()`` on the same list: cancel the ask, then wait for its result.
        """
        if ask_id in self._stash:
            return self._stash.pop(ask_id)
        key = reply_to or self.reply_list(ask_id)
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + max(0.0, timeout)
        backoff = _BACKOFF_FIRST_S
        while True:
            remaining = None if deadline is None else deadline - loop.time()
            last_look = remaining is not None and remaining <= 0
            try:
                raw = self._slices.late(key)  # popped by the slice of a wait that was cancelled
                if raw is None and last_look:
                    # A slice left by a cancelled wait may still pop a result: the next wait takes it.
                    raw = cast("bytes | str | None", await self._redis.lpop(key))
                elif raw is None:
                    block = self._slice if remaining is None else min(self._slice, remaining)
                    # BLPOP 0 would block for ever: never round a short remainder down to it.
                    raw = await self._slices.pop(key, max(block, 0.01))
            except _FATAL as exc:
                raise _redis_down(exc, self._where) from exc
            except _TRANSIENT as exc:
                if last_look:
                    raise _redis_down(exc, self._where) from exc
                pause = backoff if remaining is None else min(backoff, max(remaining, 0.0))
                await asyncio.sleep(pause)
                backoff = min(backoff * 2, _BACKOFF_MAX_S)
                continue
            backoff = _BACKOFF_FIRST_S
            if raw is not None:
                result = decode_result(raw)
                if result.ask_id is None or result.ask_id == ask_id:
                    self._reply_to.pop(ask_id, None)
                    return result
                # A shared reply list: keep another ask's result for its own wait().
                self._stash[result.ask_id] = result
                continue
            if last_look:
                return None

    async def ask(
        self, request: RequestLike, *, wait: bool | float = True, **options: Unpack[AskOptions]
    ) -> ResultEnvelope | str:
        """Submit, then wait. Returns the result, or the ``ask_id`` when not waiting or no result came.

        ``wait=True`` waits for ever; a number waits at most that many seconds; ``False`` only submits.
        """
        ask_id = await self.submit(request, **options)
        if wait is False:
            return ask_id
        result = await self.wait(ask_id, None if wait is True else float(wait))
        return ask_id if result is None else result

    async def cancel(self, ask_id: str, reason: str | None = None, reply_to: str | None = None) -> None:
        """Withdraw an ask (protocol section 8). Its single ``cancelled`` result still arrives on its list."""
        envelope: dict[str, Any] = {
            "v": 1,
            "ask_id": ask_id,
            "reply_to": reply_to or self.reply_list(ask_id),
        }
        if reason is not None:
            envelope["reason"] = reason
        text = compact_json(envelope)
        try:
            parse_cancel_envelope(text)
        except EnvelopeError as exc:
            raise AskRequestError(exc.message, code=exc.code) from None
        await self._xadd("cancel", text)

    async def result(self, ask_id: str) -> ResultEnvelope | None:
        """The stored result of an ended ask (kept for the retention period); None if pending or unknown.

        Reads the bot's store without consuming anything from the reply list.
        """
        # Lazy: the store is the bot's module; agents that never call this do not load it.
        from bot.storage.store import Store

        try:
            loaded = await Store(self._redis, prefix=self.prefix).find(ask_id)
        except _TRANSIENT as exc:
            raise _redis_down(exc, self._where) from exc
        if loaded is None or loaded.result is None:
            return None
        return loaded.result.envelope

    async def recover(self, ask_id: str, envelope: AskEnvelope | Mapping[str, Any]) -> None:
        """Re-send an ask's original envelope: if the ask ended, the bot pushes its stored result again
        onto the ``reply_to`` it was first sent with (protocol section 10, point 1); if it is pending,
        the duplicate is ignored. Wait for the result with :meth:`wait` as usual.
        """
        data: dict[str, Any] = _plain(envelope)
        if data.get("ask_id") != ask_id:
            raise AskRequestError(
                f"the envelope is for ask_id {data.get('ask_id')!r}, not {ask_id!r}", code="invalid_envelope"
            )
        text, _ = _checked_ask(data)
        await self._xadd("ask", text)
        self._reply_to[ask_id] = str(data["reply_to"])

    async def _xadd(self, field: str, text: str) -> None:
        try:
            await self._redis.xadd(self.asks_key, {field: text})
        except _TRANSIENT as exc:
            raise _redis_down(exc, self._where) from exc


# ---------------------------------------------------------------- sync wrapper


class SyncAskClient:
    """:class:`AskClient` for synchronous scripts: runs it in an event loop of its own.

    Do not use from inside a running event loop (use :class:`AskClient` there).
    """

    def __init__(self, redis: str = DEFAULT_REDIS_URL, *, prefix: str = DEFAULT_PREFIX) -> None:
        self._runner = asyncio.Runner()
        self._client = AskClient(redis, prefix=prefix)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        try:
            self._runner.run(self._client.aclose())
        finally:
            self._runner.close()

    @property
    def client(self) -> AskClient:
        return self._client

    def submit(self, request: RequestLike, **options: Unpack[AskOptions]) -> str:
        return self._runner.run(self._client.submit(request, **options))

    def wait(
        self, ask_id: str, timeout: float | None = None, *, reply_to: str | None = None
    ) -> ResultEnvelope | None:
        return self._runner.run(self._client.wait(ask_id, timeout, reply_to=reply_to))

    def ask(
        self, request: RequestLike, *, wait: bool | float = True, **options: Unpack[AskOptions]
    ) -> ResultEnvelope | str:
        return self._runner.run(self._client.ask(request, wait=wait, **options))

    def cancel(self, ask_id: str, reason: str | None = None, reply_to: str | None = None) -> None:
        self._runner.run(self._client.cancel(ask_id, reason, reply_to))

    def result(self, ask_id: str) -> ResultEnvelope | None:
        return self._runner.run(self._client.result(ask_id))

    def recover(self, ask_id: str, envelope: AskEnvelope | Mapping[str, Any]) -> None:
        self._runner.run(self._client.recover(ask_id, envelope))


def ask_sync(
    request: RequestLike,
    *,
    redis: str | None = None,
    prefix: str | None = None,
    wait: bool | float = True,
    **options: Unpack[AskOptions],
) -> ResultEnvelope | str:
    """One ask from a script: submit, wait (``wait=`` as in :meth:`AskClient.ask`), close.

    ``redis`` and ``prefix`` default to ``REDIS_URL`` and ``SLACK_ASK_PREFIX`` from the environment.
    """
    url, prefix = resolve_connection(redis, prefix)
    with SyncAskClient(url, prefix=prefix) as client:
        return client.ask(request, wait=wait, **options)
