"""Operator commands: ``list``, ``status``, ``cancel`` and ``dismiss`` (protocol section 12).

They read the bot's store directly. ``cancel`` goes through the intake stream as the ask's own
reply_to would (the running bot ends it). ``dismiss`` is an operator action, which never travels on
the stream (protocol section 1): it ends the ask through the store (the one result is pushed in the
same atomic step) and has the running bots' sweeper update the Slack messages at once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from typing import Any

from redis.asyncio import Redis

from bot import results
from bot.cli.redis_args import RedisTarget, add_redis_args, run_with_redis
from bot.config import load_settings
from bot.durations import format_duration
from bot.errors import ConfigError, SlackError
from bot.slack.gateway import SlackGateway, make_client
from bot.storage.store import AskStatus, Resolution, Store, iso_ms
from contract.envelopes import ResultResponder, ResultSlack

__all__ = ["add_parser"]

EXIT_NOT_FOUND = 1
_PERMALINK_BUDGET_MS = 5_000
"""How long ``dismiss`` waits for Slack's ``auth.test`` (the workspace URL its permalink is built from)."""


def _common(parser: argparse.ArgumentParser) -> None:
    add_redis_args(parser)
    parser.add_argument("--json", action="store_true", help="print exactly one JSON document")


def add_parser(sub: Any) -> None:
    p = sub.add_parser("list", help="list pending asks")
    _common(p)
    p.set_defaults(func=lambda a: _run(_list, a))
    p = sub.add_parser("status", help="state, audit trail and result of one ask")
    p.add_argument("ask_id")
    _common(p)
    p.set_defaults(func=lambda a: _run(_status, a))
    p = sub.add_parser("cancel", help="withdraw a pending ask (outcome cancelled)")
    p.add_argument("ask_id")
    p.add_argument("--reason", default=None)
    _common(p)
    p.set_defaults(func=lambda a: _run(_cancel, a))
    p = sub.add_parser("dismiss", help="dismiss a pending ask as an operator (outcome dismissed)")
    p.add_argument("ask_id")
    p.add_argument(
        "--by", default=os.environ.get("USER", "operator"), help="who dismisses (a Slack user id or a name)"
    )
    _common(p)
    p.set_defaults(func=lambda a: _run(_dismiss, a))


def _run(command: Any, args: argparse.Namespace) -> int:
    async def go(redis: Redis, target: RedisTarget) -> int:
        code: int = await command(Store(redis, target.prefix), redis, args)
        return code

    return run_with_redis(f"slack-ask {args.command}", args, go)


def _age(created_at: str) -> str:
    from datetime import datetime

    created = datetime.fromisoformat(created_at.replace("Z", "+00:00")).timestamp()
    return format_duration(max(int((time.time() - created) * 1000), 0))


async def _list(store: Store, _: Redis, args: argparse.Namespace) -> int:
    pending = await store.list_pending()
    if args.json:
        print(json.dumps([s.model_dump(exclude={"audit", "result"}) for s in pending]))
        return 0
    if not pending:
        print("No pending asks.")
        return 0
    rows = [("ASK ID", "STATE", "AGE", "ROUTE", "DEADLINE", "STEP")]
    rows += [
        (s.ask_id, s.state, _age(s.created_at), s.route, s.deadline or "-", str(s.step)) for s in pending
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    return 0


def _print_status(status: AskStatus) -> None:
    print(f"ask:      {status.ask_id}")
    print(f"state:    {status.state}" + (f" ({status.outcome})" if status.outcome else ""))
    print(f"created:  {status.created_at}  ({_age(status.created_at)} ago)")
    print(f"deadline: {status.deadline or 'none'}")
    print(f"route:    {status.route}")
    print("audit:")
    for entry in status.audit or []:
        who = f" by {entry.by}" if entry.by else ""
        if entry.replica and entry.replica != entry.by:
            who += f" on {entry.replica}"
        if entry.lease:
            who += f" (lease {entry.lease})"
        detail = f": {entry.detail}" if entry.detail else ""
        print(f"  {entry.at}  {entry.event}{who}{detail}")
    if status.result is not None:
        print("result text:")
        for line in status.result.text.splitlines():
            print(f"  {line}")


async def _status(store: Store, _: Redis, args: argparse.Namespace) -> int:
    status = await store.get_status(args.ask_id)
    if status is None:
        print(f"slack-ask: no ask {args.ask_id!r} (never seen, or its retention has ended)", file=sys.stderr)
        return EXIT_NOT_FOUND
    if args.json:
        print(json.dumps(status.model_dump(exclude={"step"})))
    else:
        _print_status(status)
    return 0


async def _send_and_wait(
    store: Store, redis: Redis, args: argparse.Namespace, field: str, body: dict[str, Any]
) -> int:
    status = await store.get_status(args.ask_id)
    if status is None:
        print(f"slack-ask: no ask {args.ask_id!r} (never seen, or its retention has ended)", file=sys.stderr)
        return EXIT_NOT_FOUND
    if status.state == "ended":
        print(
            f"slack-ask: ask {args.ask_id} already ended ({status.outcome}); nothing changed", file=sys.stderr
        )
        return 0 if not args.json else _dump(status)
    await redis.xadd(store.keys.asks, {field: json.dumps(body)})
    # The running bot ends it; wait briefly so the operator sees the outcome.
    for _ in range(50):
        await asyncio.sleep(0.1)
        status = await store.get_status(args.ask_id)
        if status is not None and status.state == "ended":
            break
    assert status is not None
    if args.json:
        return _dump(status)
    print(
        f"{args.ask_id}: {status.state}"
        + (f" ({status.outcome})" if status.outcome else " (no bot has taken it yet)")
    )
    return 0


def _dump(status: AskStatus) -> int:
    print(json.dumps(status.model_dump(exclude={"step"})))
    return 0


async def _cancel(store: Store, redis: Redis, args: argparse.Namespace) -> int:
    loaded = await store.find(args.ask_id)
    reply_to = loaded.record.reply_to if loaded else ""
    body = {"v": 1, "ask_id": args.ask_id, "reply_to": reply_to or "-", "reason": args.reason}
    return await _send_and_wait(store, redis, args, "cancel", body)


async def _permalink(channel: str, ts: str) -> str | None:
    """The message's permalink as the bot's gateway builds it: from the workspace URL ``auth.test``
    gives for ``SLACK_BOT_TOKEN`` (at ``SLACK_API_URL``). None, with a line on stderr, when no token is
    set or Slack does not tell within a few seconds: the result then carries no permalink."""
    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"slack-ask dismiss: no permalink in the result ({exc})", file=sys.stderr)
        return None
    if settings.slack_bot_token is None:
        print("slack-ask dismiss: no permalink in the result (SLACK_BOT_TOKEN is not set)", file=sys.stderr)
        return None
    client = make_client(settings.slack_bot_token.get_secret_value(), settings.slack_api_url, timeout=5)
    gateway = SlackGateway(client, delivery_window_ms=_PERMALINK_BUDGET_MS)
    try:
        await gateway.check_tokens(budget_s=_PERMALINK_BUDGET_MS / 1000)
    except (SlackError, ConfigError) as exc:  # SlackAuthError: the token was refused
        print(f"slack-ask dismiss: no permalink in the result (auth.test: {exc})", file=sys.stderr)
        return None
    return await gateway.permalink(channel, ts)


async def _dismiss(store: Store, _: Redis, args: argparse.Namespace) -> int:
    loaded = await store.find(args.ask_id)
    if loaded is None:
        print(f"slack-ask: no ask {args.ask_id!r} (never seen, or its retention has ended)", file=sys.stderr)
        return EXIT_NOT_FOUND
    if loaded.state != "ended":
        rec = loaded.record
        by = str(args.by)[:80]
        where = loaded.messages[-1] if loaded.messages else None
        slack = None
        if where is not None:
            permalink = where.permalink or await _permalink(where.channel, where.ts)
            slack = ResultSlack(channel=where.channel, ts=where.ts, permalink=permalink)
        ending = results.ended_without_answer(rec, "dismissed")
        prefix = results.result_prefix(
            ask_id=rec.ask_id,
            format=rec.format,
            ending=ending,
            responder=ResultResponder(id=by, name=by),
            slack=slack,
            created_at=iso_ms(rec.created_ms),
        )
        # The actor the ended message shows is "operator <name>": a name, never a Slack mention,
        # whatever the operator typed.
        verdict = await store.resolve(
            Resolution(rec, "dismissed", prefix, f"operator {by}", "dismissed", f"dismissed by operator {by}")
        )
        if verdict.verdict == "won":
            await store.schedule(rec.ask_id, rec.tag, 0)  # a running bot's sweeper finishes the messages now
    status = await store.get_status(args.ask_id)
    assert status is not None
    if args.json:
        return _dump(status)
    print(f"{args.ask_id}: {status.state}" + (f" ({status.outcome})" if status.outcome else ""))
    return 0
