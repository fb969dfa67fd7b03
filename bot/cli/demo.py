"""``slack-ask demo``: the local playground, with no Slack workspace and no Redis needed.

Starts a Redis (``REDIS_URL`` when set, else an embedded one), the fake Slack with its web page, and the real
bot against them; prints the page's address, posts sample asks and runs until Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import shlex
import shutil
import signal
import sys
from pathlib import Path

__all__ = ["add_parser", "run"]

# With the user's own Redis, stay clear of a real deployment's keys: its bots would take the page's asks.
_SHARED_REDIS_PREFIX = "slack-ask-playground"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="the local playground: a Slack stand-in in your browser with the real bot behind it",
        description=(
            "Run the playground: a web page that stands in for Slack, the real bot answering it, and a "
            "Redis (REDIS_URL when set, else an embedded one). Prints the page's address; Ctrl-C stops it."
        ),
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to serve the page on (default 127.0.0.1)"
    )
    parser.add_argument(
        "--port", type=int, default=None, help="port of the page (default 8080, or any free one when taken)"
    )
    parser.add_argument(
        "--prefix",
        default=None,
        help=f"Redis key prefix (default: slack-ask with the embedded Redis, {_SHARED_REDIS_PREFIX} "
        "with REDIS_URL)",
    )
    parser.add_argument("--no-sample", action="store_true", help="do not post the sample asks")
    parser.add_argument(
        "--rate-limits",
        action="store_true",
        help="make the fake Slack enforce Slack's rate limits (HTTP 429 over a method's tier or a "
        "channel's one post a second; docs/slack-limits.md)",
    )
    parser.add_argument(
        "--speedup",
        type=_speedup,
        default=1.0,
        help="with --rate-limits: run Slack's limits this many times faster (default 1: Slack's own pace)",
    )
    parser.set_defaults(func=run)


def _speedup(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        msg = f"must be a positive number, not {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return asyncio.run(_serve(args))
    except KeyboardInterrupt:  # a second Ctrl-C during shutdown
        return 130


def _print(text: str) -> None:
    print(text, flush=True)


async def _serve(args: argparse.Namespace) -> int:
    from bot.errors import ConfigError
    from bot.playground.demo import Playground, PortInUseError
    from bot.storage.connection import redacted

    redis_url = os.environ.get("REDIS_URL") or None
    prefix = args.prefix or (
        _SHARED_REDIS_PREFIX if redis_url else os.environ.get("SLACK_ASK_PREFIX", "slack-ask")
    )
    playground = Playground(
        redis_url=redis_url,
        prefix=prefix,
        host=args.host,
        port=args.port,
        rate_limits=args.rate_limits,
        speedup=args.speedup,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):  # Windows: Ctrl-C raises KeyboardInterrupt instead
            loop.add_signal_handler(signum, stop.set)
    try:
        if redis_url is None:
            _print("Starting an embedded Redis (no REDIS_URL set)...")
        try:
            await playground.start()
        except PortInUseError as exc:
            print(f"slack-ask demo: {exc.strerror}", file=sys.stderr)
            return 2
        except ConfigError as exc:
            print(f"slack-ask demo: {exc}", file=sys.stderr)
            return 2
        if playground.embedded is not None:
            _print(f"Redis: {playground.redis_kind} on {playground.redis_url} (stopped when the demo stops)")
        else:
            _print(f"Redis: REDIS_URL ({redacted(playground.redis_url)}), key prefix {prefix!r}")
        if playground.port_note:
            _print(f"Note: {playground.port_note}")
        _print(f"Bot: the real slack-ask bot, at http://127.0.0.1:{playground.runtime.port}/slack/events")
        _print(f"Playground: {playground.url}")
        if args.rate_limits:
            pace = "Slack's pace" if args.speedup == 1 else f"{args.speedup:g} times Slack's pace"
            _print(f"Rate limits: enforced by the fake Slack, at {pace}")
            _print(f"  calls and 429s per method: {playground.url}_fake/limits")
        channel = playground.default_channel
        if not args.no_sample:
            await playground.send_samples()
            found = playground.fake.state.channels.get(channel)
            where = f"#{found.name}" if found is not None else channel
            _print(f"Posted two sample asks in {where}; open the page to answer them.")
        _print(
            "Ask from another shell:\n"
            f"  REDIS_URL={redacted(playground.redis_url)} SLACK_ASK_PREFIX={prefix} "
            f'{_command()} ask --channel {channel} "Ship it?" --option Yes --option No'
        )
        _print("Press Ctrl-C to stop.")
        await stop.wait()
        _print("Stopping...")
        # A terminal's Ctrl-C reaches the embedded redis-server too, so Redis may vanish while the bot
        # stops; its "Redis unavailable, retrying" warnings would only be noise at this point.
        logging.getLogger("bot").setLevel(logging.ERROR)
    finally:
        await playground.stop()
    return 0


def _command() -> str:
    """How to run ``slack-ask`` from another shell, as pasted: the venv's script when it is not on PATH."""
    script = Path(sys.executable).with_name("slack-ask")
    found = shutil.which("slack-ask")
    if found is not None and Path(found).resolve() == script.resolve():
        return "slack-ask"
    return shlex.quote(str(script)) if script.exists() else f"{shlex.quote(sys.executable)} -m bot.cli"
