"""``slack-ask ask``: ask a question from the shell and wait for the answer (protocol section 12).

Prints the result's ``text`` (or with ``--json`` the whole result envelope) and exits with a code
per outcome, so shell scripts and agents without a Redis client can branch on it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from typing import Any, TextIO, get_args

from redis.exceptions import RedisClusterException, ResponseError

from bot.cli.redis_args import redis_target
from bot.client import (
    AskClient,
    AskClientError,
    AskRequestError,
    RedisUnavailableError,
    add_connection_args,
)
from bot.durations import format_duration, parse_duration
from bot.storage.diagnose import is_unreachable, unreachable_reason
from contract import ContractError, normalize_ask_request
from contract.envelopes import ResultEnvelope
from contract.timeout import TimeoutPolicy

__all__ = [
    "EXIT_ANSWERED",
    "EXIT_CANCELLED",
    "EXIT_DISMISSED",
    "EXIT_ERROR",
    "EXIT_REDIS",
    "EXIT_TIMEOUT",
    "EXIT_UNAVAILABLE",
    "EXIT_USAGE",
    "OUTCOME_EXIT",
    "add_parser",
    "outcome_line",
    "run",
]

EXIT_ANSWERED = 0
EXIT_USAGE = 2
EXIT_CANCELLED = 3
EXIT_TIMEOUT = 4
EXIT_DISMISSED = 5
EXIT_UNAVAILABLE = 6
EXIT_ERROR = 7
EXIT_REDIS = 8

OUTCOME_EXIT = {
    "answered": EXIT_ANSWERED,
    "cancelled": EXIT_CANCELLED,
    "timeout": EXIT_TIMEOUT,
    "dismissed": EXIT_DISMISSED,
    "unavailable": EXIT_UNAVAILABLE,
    "error": EXIT_ERROR,
}

# Waiting past the deadline by this much leaves the bot time to post the timeout result
# (sweeper tick, a Slack update, one delivery window).
_DEADLINE_MARGIN_S = 120.0
_PROG = "slack-ask ask"


class _UsageError(Exception):
    """A flag combination or input file the command cannot use (exit 2)."""


def _duration(text: str) -> int:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "ask",
        help="ask a question in Slack and wait for the answer",
        description=(
            "Send an ask and wait for its single result. Prints the result text (with --json the whole "
            "result envelope), and on standard error why an ask reached nobody or who ended it. "
            "Exit codes: 0 answered, 2 usage error, 3 cancelled, 4 timeout, "
            "5 dismissed, 6 unavailable, 7 error, 8 Redis unreachable."
        ),
    )
    p.add_argument("question", nargs="?", help="the question (or give the whole request with -f)")
    route = p.add_mutually_exclusive_group()
    route.add_argument("--channel", metavar="ID", help="post in this conversation (C..., G...)")
    route.add_argument("--user", metavar="ID_OR_EMAIL", help="ask this user in a direct message")
    route.add_argument("--policy", metavar="NAME", help="use a named policy from the bot's configuration")
    p.add_argument("--thread", metavar="TS", help="post as a reply in this thread (with --channel)")

    q = p.add_argument_group("question (without -f)")
    q.add_argument("--option", dest="options", action="append", metavar="LABEL", help="a choice (repeat)")
    q.add_argument(
        "--recommended", type=int, metavar="INDEX", help="zero-based index of the recommended option"
    )
    q.add_argument("--multi", action="store_true", default=None, help="allow several options")
    q.add_argument("--no-custom", action="store_true", help="do not offer free text")
    q.add_argument("--category", choices=["implementation", "scope-product", "security-permission"])
    q.add_argument("--description", metavar="TEXT", help="Markdown context shown with the question")
    q.add_argument("--id", dest="question_id", metavar="QID", help="the question's id (default q1)")
    q.add_argument(
        "-f", "--file", metavar="PATH", help="read the whole request as JSON from PATH ('-': stdin)"
    )
    q.add_argument("--format", choices=["pi-question", "rich"], default="pi-question", help="request format")

    a = p.add_argument_group("ask")
    a.add_argument(
        "--timeout",
        type=_duration,
        metavar="DURATION",
        help="deadline, e.g. 90s, 10m, 2h, 1d (omit for the bot's default)",
    )
    a.add_argument("--on-timeout", choices=get_args(TimeoutPolicy), help="what the deadline does")
    a.add_argument("--responder", dest="responders", action="append", metavar="USER_ID", help="may answer")
    a.add_argument("--usergroup", dest="usergroups", action="append", metavar="GROUP_ID", help="may answer")
    a.add_argument("--requester-name", metavar="NAME", help="who is asking, shown to the human")
    a.add_argument(
        "--requester",
        metavar="ID_OR_EMAIL",
        help="the Slack user id or e-mail of the person the agent acts for (may not vote on approvals)",
    )
    a.add_argument(
        "--approvals",
        type=int,
        metavar="N",
        help="N distinct people (2-20) must pick the same option (protocol section 13)",
    )
    a.add_argument(
        "--veto",
        action="append",
        metavar="OPTION",
        help="with --approvals: one vote for this option (a label or 0-based index) ends the ask (repeat)",
    )
    a.add_argument(
        "--requester-may-vote", action="store_true", help="with --approvals: let the --requester vote too"
    )
    a.add_argument(
        "--remind-every", type=_duration, metavar="DURATION", help="thread reminders while pending"
    )
    a.add_argument("--ask-id", metavar="ID", help="the ask's id (default: a new ULID)")
    a.add_argument("--reply-to", metavar="KEY", help="the result list (default P:reply:<ask_id>)")

    o = p.add_argument_group("output and connection")
    o.add_argument("--json", action="store_true", help="print exactly one JSON document")
    wait = o.add_mutually_exclusive_group()
    wait.add_argument(
        "--wait", type=_duration, metavar="DURATION", help="wait at most this long (default: deadline + 2m)"
    )
    wait.add_argument("--no-wait", action="store_true", help="print the ask_id and exit without waiting")
    add_connection_args(o)
    p.set_defaults(func=run)


# ---------------------------------------------------------------- building the ask


def _read_request(path: str) -> Any:
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
    except OSError as exc:
        raise _UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise _UsageError(f"{'standard input' if path == '-' else path} is not JSON: {exc}") from None


def _request_from_flags(args: argparse.Namespace) -> dict[str, Any]:
    if args.question is None:
        raise _UsageError("give a question, or the whole request with -f FILE")
    labels: list[str] = args.options or []
    if args.format == "rich":
        rq: dict[str, Any] = {"prompt": args.question}
        if args.question_id is not None:
            rq["id"] = args.question_id
        if labels:
            rq["type"] = "checkbox" if args.multi else "radio"
            rq["options"] = [
                {"label": label, **({"recommended": True} if i == args.recommended else {})}
                for i, label in enumerate(labels)
            ]
            rq["allowOther"] = not args.no_custom
        if args.description is not None:
            rq["context"] = args.description
        return {"questions": [rq]}
    question: dict[str, Any] = {}
    if args.question_id is not None:
        question["id"] = args.question_id
    question["question"] = args.question
    question["options"] = [{"label": label} for label in labels]
    if args.description is not None:
        question["description"] = args.description
    if args.multi:
        question["multi"] = True
    if args.recommended is not None:
        question["recommended"] = args.recommended
    if args.no_custom:
        question["allowCustom"] = False
    if args.category is not None:
        question["category"] = args.category
    return {"questions": [question]}


def _check_recommended(args: argparse.Namespace) -> None:
    if args.recommended is None:
        return
    count = len(args.options or [])
    if count == 0:
        raise _UsageError("--recommended needs the options it points at: give them with --option")
    if not 0 <= args.recommended < count:
        raise _UsageError(
            f"--recommended {args.recommended} is out of range: give 0 to {count - 1} "
            "(it counts the --option values from 0)"
        )


def _build_request(args: argparse.Namespace) -> Any:
    if args.file is None:
        _check_recommended(args)
        return _request_from_flags(args)
    flags = [
        name
        for name, given in (
            ("QUESTION", args.question is not None),
            ("--option", bool(args.options)),
            ("--recommended", args.recommended is not None),
            ("--multi", bool(args.multi)),
            ("--no-custom", args.no_custom),
            ("--category", args.category is not None),
            ("--description", args.description is not None),
            ("--id", args.question_id is not None),
        )
        if given
    ]
    if flags:
        raise _UsageError(f"-f gives the whole request; drop {', '.join(flags)}")
    return _read_request(args.file)


def _route(args: argparse.Namespace) -> dict[str, str] | None:
    if args.thread is not None and args.channel is None:
        raise _UsageError("--thread needs --channel")
    if args.channel is not None:
        return {"channel": args.channel, **({"thread_ts": args.thread} if args.thread else {})}
    if args.user is not None:
        return {"user": args.user}
    if args.policy is not None:
        return {"policy": args.policy}
    return None


def _wait_bound(args: argparse.Namespace) -> float | None:
    if args.wait is not None:
        return float(args.wait) / 1000
    if args.timeout:
        return float(args.timeout) / 1000 + _DEADLINE_MARGIN_S
    return None


# ---------------------------------------------------------------- output


def _write(stream: TextIO, text: str) -> None:
    try:
        stream.write(text)
    except UnicodeEncodeError:
        # A terminal that cannot show some character (or a lone surrogate) must not lose the answer.
        encoding = stream.encoding or "utf-8"
        stream.write(text.encode(encoding, "backslashreplace").decode(encoding))
    stream.flush()


def _fail(code: int, message: str) -> int:
    _write(sys.stderr, f"{_PROG}: error: {message}\n")
    return code


class _StatusLine:
    """A one-line "waiting" display on a terminal's stderr; silent when stderr is not a terminal."""

    def __init__(self, ask_id: str, deadline_s: float | None) -> None:
        self._ask_id = ask_id
        self._deadline = deadline_s
        self._enabled = sys.stderr.isatty()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> _StatusLine:
        if self._enabled:
            self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            _write(sys.stderr, "\r\x1b[K")

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        while True:
            now = loop.time()
            if self._deadline is None:
                tail = f"waiting for {format_duration(int((now - started) * 1000))}"
            else:
                tail = f"{format_duration(max(0, int((self._deadline - now) * 1000)))} left"
            _write(
                sys.stderr, f"\r\x1b[KWaiting for an answer to {self._ask_id} ({tail}; Ctrl-C stops waiting)"
            )
            await asyncio.sleep(1.0)


# ---------------------------------------------------------------- running


def run(args: argparse.Namespace) -> int:
    """Entry point of ``slack-ask ask``; returns the exit code."""
    try:
        if args.timeout is not None and args.timeout <= 0:
            # 0 would silently mean "the bot's default deadline", which nobody typing 0s expects.
            raise _UsageError("--timeout must be more than 0; leave it out for the bot's default")
        request = _build_request(args)
        route = _route(args)
    except _UsageError as exc:
        return _fail(EXIT_USAGE, str(exc))
    target = redis_target(args.redis, args.prefix)
    if (problem := target.problem()) is not None:
        return _fail(EXIT_USAGE, problem)
    try:
        return asyncio.run(_ask(args, request, route))
    except (RedisClusterException, ResponseError) as exc:
        # The Cluster client's own exception class for "no startup node answered" and for a URL
        # that names no Cluster (a standalone Redis), or a database number out of range: exit 8
        # or exit 2, never a traceback.
        if is_unreachable(exc):
            return _fail(EXIT_REDIS, target.unreachable(exc))
        return _fail(EXIT_USAGE, target.refused(exc) or unreachable_reason(exc))


def _requester(args: argparse.Namespace) -> dict[str, str] | None:
    requester = {"name": args.requester_name, "user": args.requester}
    given = {k: v for k, v in requester.items() if v}
    return given or None


def _approval(args: argparse.Namespace, request: Any) -> dict[str, Any] | None:
    """``--approvals``/``--veto``/``--requester-may-vote`` as the envelope's ``approval``."""
    if args.approvals is None:
        if args.veto or args.requester_may_vote:
            raise AskRequestError(
                "--veto and --requester-may-vote need --approvals N", code="invalid_envelope"
            )
        return None
    approval: dict[str, Any] = {"count": args.approvals}
    if args.veto:
        approval["veto"] = [_option_index(request, value) for value in args.veto]
    if args.requester_may_vote:
        approval["exclude_requester"] = False
    return approval


def _option_index(request: Any, value: str) -> int:
    """A ``--veto`` value: a 0-based option index, or the label of an option of the one question."""
    if value.isdigit():
        return int(value)
    try:
        questions = normalize_ask_request(request).questions
    except ContractError as exc:
        raise AskRequestError(str(exc)) from None
    labels = [o.label for o in questions[0].options] if len(questions) == 1 else []
    if value not in labels:
        known = ", ".join(repr(label) for label in labels) or "none"
        raise AskRequestError(f"--veto {value!r} is not an option of the question (options: {known})")
    return labels.index(value)


async def _ask(args: argparse.Namespace, request: Any, route: dict[str, str] | None) -> int:
    target = redis_target(args.redis, args.prefix)
    try:
        client = AskClient(target.url, prefix=target.prefix)
    except ValueError as exc:
        return _fail(EXIT_USAGE, f"{target.setting}: {exc}")
    async with client:
        responders: dict[str, list[str]] | None = None
        if args.responders or args.usergroups:
            responders = {"users": args.responders or [], "usergroups": args.usergroups or []}
        try:
            approval = _approval(args, request)
            ask_id = await client.submit(
                request,
                format=args.format,
                route=route,
                timeout_ms=args.timeout,
                on_timeout=args.on_timeout,
                responders=responders,
                requester=_requester(args),
                remind_every_ms=args.remind_every,
                approval=approval,
                ask_id=args.ask_id,
                reply_to=args.reply_to,
            )
        except AskRequestError as exc:
            return _fail(EXIT_USAGE, exc.message)
        except RedisUnavailableError as exc:
            return _fail(EXIT_REDIS, str(exc))
        reply_to = client.reply_list(ask_id)
        if args.no_wait:
            _print_pending(args, ask_id, reply_to)
            return EXIT_ANSWERED
        bound = _wait_bound(args)
        loop = asyncio.get_running_loop()
        if args.wait is not None:
            shown_deadline: float | None = loop.time() + args.wait / 1000
        else:
            shown_deadline = loop.time() + args.timeout / 1000 if args.timeout else None
        try:
            async with _StatusLine(ask_id, shown_deadline):
                result = await client.wait(ask_id, bound)
        except RedisUnavailableError as exc:
            return _fail(EXIT_REDIS, f"{exc}; the ask {ask_id} may still be answered")
        except AskClientError as exc:
            return _fail(EXIT_ERROR, str(exc))
        except asyncio.CancelledError:
            # Ctrl-C stops the waiting, not the ask: say where its result will be.
            _write(
                sys.stderr,
                f"\n{_PROG}: stopped waiting; the ask {ask_id} stays pending (result on {reply_to})\n",
            )
            raise
    if result is None:
        _print_pending(args, ask_id, reply_to)
        _write(
            sys.stderr,
            f"{_PROG}: no result within {format_duration(int((bound or 0) * 1000))}; the ask {ask_id} is "
            f"still pending: its result will be on {reply_to} (see `slack-ask status {ask_id}`)\n",
        )
        return EXIT_TIMEOUT
    _print_result(args, result)
    return OUTCOME_EXIT.get(result.outcome, EXIT_ERROR)


def _print_pending(args: argparse.Namespace, ask_id: str, reply_to: str) -> None:
    if args.json:
        doc = {"ask_id": ask_id, "reply_to": reply_to, "status": "pending"}
        _write(sys.stdout, json.dumps(doc, ensure_ascii=False) + "\n")
    else:
        _write(sys.stdout, ask_id + "\n")


def _print_result(args: argparse.Namespace, result: ResultEnvelope) -> None:
    if args.json:
        _write(sys.stdout, json.dumps(result.to_wire(), ensure_ascii=False) + "\n")
        return
    _write(sys.stdout, result.text + "\n")
    # On stderr: standard output stays exactly the result's text (protocol section 12), for scripts.
    if (line := outcome_line(result)) is not None:
        _write(sys.stderr, f"{_PROG}: {line}\n")


def _printable(text: str) -> str:
    # Names and messages come from Slack and Redis: no terminal control sequences from them.
    return "".join(c if c.isprintable() else "?" for c in text)


def outcome_line(result: ResultEnvelope) -> str | None:
    """What the result's text leaves out: why an ask reached nobody, and who ended it (a person's
    Decline has a responder; the requester's cancel has none)."""
    who = None
    if result.responder is not None:
        name, user = _printable(result.responder.name or ""), _printable(result.responder.id or "")
        who = f"{name} ({user})" if name and user and name != user else (name or user)
    if result.outcome == "unavailable":
        if result.error is None:
            return "Not delivered: no person could be reached."
        return f"Not delivered: {_printable(result.error.message)} ({_printable(result.error.code)})."
    if result.outcome == "cancelled":
        if who:
            return f"Declined in Slack by {who}."
        return "Withdrawn by the requester (a cancel), not declined by a person."
    if result.outcome == "dismissed" and who:
        return f"Dismissed by {who}."
    return None
