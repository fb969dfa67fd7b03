"""``slack-ask serve``: run one bot replica (Socket Mode, or HTTP with ``--http``)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from typing import Any

from bot.config import load_settings
from bot.errors import ConfigError
from bot.storage.connection import redacted

__all__ = ["add_parser"]

log = logging.getLogger("slack_ask")


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("serve", help="run the bot (Socket Mode, or HTTP with --http)")
    parser.add_argument(
        "--http", action="store_true", help="serve Slack's requests over HTTP (POST /slack/events)"
    )
    parser.add_argument("--host", default="0.0.0.0", help="HTTP bind address (default 0.0.0.0)")
    parser.add_argument("--port", type=int, default=3000, help="HTTP port (default 3000)")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings = load_settings()
        if not args.http and settings.slack_app_token is None:
            raise ConfigError(
                "setting SLACK_APP_TOKEN is required for Socket Mode (an app-level token, xapp-...); "
                "or run with --http and set SLACK_SIGNING_SECRET"
            )
        return asyncio.run(_serve(settings, http=args.http, host=args.host, port=args.port))
    except ConfigError as exc:
        print(f"slack-ask: {exc}", file=sys.stderr)
        return 2


async def _serve(settings: Any, *, http: bool, host: str, port: int) -> int:
    from redis.exceptions import ConnectionError as RedisConnectionError

    from bot.runtime import BotRuntime

    runtime = BotRuntime(settings)
    try:
        await runtime.start()
    except (RedisConnectionError, OSError) as exc:
        print(
            f"slack-ask: cannot reach Redis at {redacted(settings.redis_url.get_secret_value())}: {exc}",
            file=sys.stderr,
        )
        await runtime.aclose()
        return 8
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    handler = None
    if http:
        bound = await runtime.serve_http(host, port)
        log.info("serving Slack requests at http://%s:%d/slack/events", host, bound)
    else:
        from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

        assert settings.slack_app_token is not None
        handler = AsyncSocketModeHandler(
            runtime.bolt_app(socket_mode=True), settings.slack_app_token.get_secret_value()
        )
        await handler.connect_async()  # type: ignore[no-untyped-call]
        log.info("connected to Slack in Socket Mode")
    log.info("consumer %s reading %s:asks", runtime.engine.consumer, settings.prefix)
    await stop.wait()
    log.info("shutting down")
    if handler is not None:
        await handler.close_async()  # type: ignore[no-untyped-call]
    await runtime.aclose()
    return 0
