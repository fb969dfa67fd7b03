"""``slack-ask serve``: run one bot replica (Socket Mode, or HTTP with ``--http``).

``--health-port N`` serves ``GET /healthz`` and ``GET /metrics`` on a port of their own, in either
mode (HTTP mode also serves them beside ``/slack/events``); ``--log-format json`` (or
``SLACK_ASK_LOG_FORMAT=json``) writes one JSON object per log line (see ``bot.logs``).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from typing import Any

from bot.config import Settings, load_settings
from bot.errors import ConfigError, SlackAuthError
from bot.gc_tuning import tune_for_serving
from bot.logs import configure_logging
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
    parser.add_argument(
        "--health-port",
        type=_port,
        default=None,
        metavar="N",
        help="also serve GET /healthz and GET /metrics on port N (Socket Mode's only HTTP port)",
    )
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    parser.add_argument(
        "--log-format",
        choices=["text", "json"],
        default=None,
        help="text for people, json for machines: one object per line (default: SLACK_ASK_LOG_FORMAT, text)",
    )
    parser.set_defaults(func=run)


def _port(value: str) -> int:
    port = int(value)
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a TCP port (0-65535)")
    return port


def _secrets(settings: Settings) -> list[str]:
    values = [settings.slack_bot_token, settings.slack_app_token, settings.slack_signing_secret]
    found = [v.get_secret_value() for v in values if v is not None]
    return [*found, settings.redis_url.get_secret_value()]


def run(args: argparse.Namespace) -> int:
    # Until the settings are read (their errors are one plain line on stderr), text lines.
    configure_logging(args.log_level, args.log_format or "text")
    try:
        settings = load_settings()
        configure_logging(args.log_level, args.log_format or settings.log_format, secrets=_secrets(settings))
        if not args.http and settings.slack_app_token is None:
            raise ConfigError(
                "setting SLACK_APP_TOKEN is required for Socket Mode (an app-level token, xapp-...); "
                "or run with --http and set SLACK_SIGNING_SECRET"
            )
        return asyncio.run(
            _serve(settings, http=args.http, host=args.host, port=args.port, health_port=args.health_port)
        )
    except ConfigError as exc:
        print(f"slack-ask: {exc}", file=sys.stderr)
        return 2


async def _serve(settings: Settings, *, http: bool, host: str, port: int, health_port: int | None) -> int:
    from redis.exceptions import ConnectionError as RedisConnectionError

    from bot.runtime import BotRuntime

    runtime = BotRuntime(settings)
    try:
        # The tokens are checked with Slack before any ask is read (protocol section 11): a refused
        # one ends the process here, with one line naming the setting and Slack's error.
        app_token = settings.slack_app_token if not http else None
        await runtime.start(app_token=app_token.get_secret_value() if app_token is not None else None)
    except SlackAuthError as exc:
        print(f"slack-ask: {exc}", file=sys.stderr)
        await runtime.aclose()
        return 2
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
    try:
        if health_port is not None:
            bound_health = await runtime.serve_health(host, health_port)
            log.info("serving /healthz and /metrics at http://%s:%d/", host, bound_health)
        if http:
            bound = await runtime.serve_http(host, port)
            log.info("serving Slack requests at http://%s:%d/slack/events", host, bound)
    except OSError as exc:
        print(f"slack-ask: cannot listen on {host}: {exc.strerror or exc}", file=sys.stderr)
        await runtime.aclose()
        return 2
    if not http:
        from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

        assert settings.slack_app_token is not None
        handler = AsyncSocketModeHandler(
            runtime.bolt_app(socket_mode=True), settings.slack_app_token.get_secret_value()
        )
        await handler.connect_async()  # type: ignore[no-untyped-call]
        log.info("connected to Slack in Socket Mode")
    log.info("consumer %s reading %s:asks", runtime.engine.consumer, settings.prefix)
    collector = tune_for_serving()
    log.info(
        "garbage collector: %d start-up objects frozen, young generation every %d allocations",
        collector.frozen,
        collector.thresholds[0],
    )
    await stop.wait()
    log.info("shutting down")
    if handler is not None:
        await handler.close_async()  # type: ignore[no-untyped-call]
    await runtime.aclose()
    return 0
