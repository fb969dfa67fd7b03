"""``slack-ask doctor``: check a real workspace and Redis before the first ask.

One line per check, ``ok``, ``FAIL`` or ``warn``, saying what was checked and, when it is not ok,
what to do. Exit code 0 when nothing failed (warnings allowed), 1 when a check failed, 2 for a
malformed setting. It reads the same settings as ``serve`` and changes nothing anywhere:

* the bot token (``auth.test``) and the app-level token (``apps.connections.open``; opens no socket),
* the bot token's scopes (Slack's ``x-oauth-scopes`` header) against those ``manifest.yml`` asks for,
* the default channel (``SLACK_ASK_DEFAULT_CHANNEL`` or the policy file's default route): it
  exists, is not archived and the bot is in it (``conversations.info``),
* Redis answers and will not evict keys (``CONFIG GET maxmemory-policy``; a managed Redis that
  disables CONFIG gets a warning, since the answer is unknown), with a hint when its
  ``hash-max-listpack-value`` keeps each ask in the larger encoding (docs/operations.md).
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from redis.exceptions import RedisClusterException, RedisError
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.config import Settings, load_settings
from bot.errors import ConfigError
from bot.slack.gateway import make_client
from bot.slack.scopes import BOT_SCOPES, THREAD_ANSWER_SCOPES
from bot.storage.base import COMPACT_HASH_VALUE_BYTES
from bot.storage.connection import connect, redacted
from bot.storage.diagnose import unreachable_reason
from bot.storage.store import Store

__all__ = ["Check", "add_parser", "run_checks"]

EXIT_FAILED = 1
EXIT_CONFIG = 2

Verdict = Literal["ok", "FAIL", "warn"]


@dataclass(frozen=True)
class Check:
    verdict: Verdict
    what: str
    detail: str

    def line(self) -> str:
        return f"{self.verdict:<4} {self.what}: {self.detail}"


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "doctor", help="check the tokens, scopes, default channel and Redis before the first ask"
    )
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per Slack or Redis call")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"FAIL settings: {exc}")
        return EXIT_CONFIG
    checks = asyncio.run(run_checks(settings, limit_s=args.timeout))
    for check in checks:
        print(check.line())
    return EXIT_FAILED if any(c.verdict == "FAIL" for c in checks) else 0


async def run_checks(settings: Settings, *, limit_s: float = 10.0) -> list[Check]:
    checks: list[Check] = []
    bot = await _bot_token(settings, limit_s)
    checks += bot.checks
    checks.append(await _app_token(settings, limit_s))
    if bot.client is not None:
        checks.append(await _default_channel(settings, bot.client, bot.name, limit_s))
    else:
        checks.append(Check("warn", "default channel", "not checked: it needs a bot token Slack accepts"))
    checks.append(await _redis(settings, limit_s))
    return checks


@dataclass
class _BotResult:
    checks: list[Check]
    client: AsyncWebClient | None = None
    name: str = "the bot"


def _slack_error(exc: SlackApiError) -> str:
    return str(exc.response.get("error") or "an error") if exc.response is not None else "an error"


def _header(headers: Mapping[str, Any] | None, name: str) -> str | None:
    for key, value in (headers or {}).items():
        if key.lower() == name:
            return str(value[0] if isinstance(value, list) else value)
    return None


async def _bot_token(settings: Settings, limit_s: float) -> _BotResult:
    what = "bot token (SLACK_BOT_TOKEN)"
    if settings.slack_bot_token is None:
        return _BotResult(
            [
                Check(
                    "FAIL", what, "not set: copy the Bot User OAuth Token (xoxb-...) from OAuth & Permissions"
                )
            ]
        )
    client = make_client(
        settings.slack_bot_token.get_secret_value(), settings.slack_api_url, timeout=int(limit_s)
    )
    try:
        response = await client.auth_test()
    except SlackApiError as exc:
        return _BotResult(
            [
                Check(
                    "FAIL",
                    what,
                    f"Slack refused it ({_slack_error(exc)}): copy the Bot User OAuth Token (xoxb-...) "
                    "from OAuth & Permissions, after installing the app",
                )
            ]
        )
    except (OSError, TimeoutError) as exc:
        return _BotResult(
            [
                Check(
                    "FAIL",
                    what,
                    f"cannot reach Slack at {settings.slack_api_url}: {type(exc).__name__}: {exc}",
                )
            ]
        )
    data = response.data if isinstance(response.data, dict) else {}
    name = f"@{data.get('user', 'the bot')}"
    checks = [
        Check("ok", what, f"{name} ({data.get('user_id')}) in {data.get('team')} ({data.get('team_id')})")
    ]
    granted_header = _header(response.headers, "x-oauth-scopes")
    if granted_header is None:
        checks.append(
            Check("warn", "scopes", "unknown: Slack did not say which scopes the token has (x-oauth-scopes)")
        )
    else:
        granted = {s.strip() for s in granted_header.split(",") if s.strip()}
        missing = [s for s in BOT_SCOPES if s not in granted]
        unheard = [s for s in THREAD_ANSWER_SCOPES if s in missing]
        if missing:
            checks.append(
                Check(
                    "FAIL",
                    "scopes",
                    f"the bot token lacks {', '.join(missing)}: add them under OAuth & Permissions "
                    "(or update the app from manifest.yml), reinstall the app and use the new token"
                    + (
                        f"; without {', '.join(unheard)} answers typed in threads and DMs there are not heard"
                        if unheard
                        else ""
                    ),
                )
            )
        else:
            checks.append(Check("ok", "scopes", f"all {len(BOT_SCOPES)} that manifest.yml asks for"))
    return _BotResult(checks, client, name)


async def _app_token(settings: Settings, limit_s: float) -> Check:
    what = "app token (SLACK_APP_TOKEN)"
    if settings.slack_app_token is None:
        if settings.slack_signing_secret is not None:
            return Check("ok", what, "not set; SLACK_SIGNING_SECRET is, for HTTP mode (serve --http)")
        return Check(
            "FAIL",
            what,
            "not set: Socket Mode needs an app-level token with connections:write (Basic Information -> "
            "App-Level Tokens); or set SLACK_SIGNING_SECRET and run serve --http",
        )
    client = AsyncWebClient(
        token=settings.slack_app_token.get_secret_value(),
        base_url=settings.slack_api_url,
        timeout=int(limit_s),
    )
    try:
        await client.apps_connections_open(app_token=settings.slack_app_token.get_secret_value())
    except SlackApiError as exc:
        return Check(
            "FAIL",
            what,
            f"Slack refused it ({_slack_error(exc)}): create an app-level token with connections:write "
            "(Basic Information -> App-Level Tokens) and enable Socket Mode",
        )
    except (OSError, TimeoutError) as exc:
        return Check("FAIL", what, f"cannot reach Slack at {settings.slack_api_url}: {type(exc).__name__}")
    return Check("ok", what, "Socket Mode connections open")


async def _default_channel(settings: Settings, client: AsyncWebClient, bot: str, limit_s: float) -> Check:
    route = settings.default_route
    where = "SLACK_ASK_DEFAULT_CHANNEL" if settings.policy_file.defaults.route is None else "SLACK_ASK_CONFIG"
    what = f"default channel ({where})"
    if route is None:
        return Check("warn", "default channel", "none set: every ask must name its route")
    if route.channel is None:
        return Check("ok", what, f"routes to {route.user or route.policy}, not a channel")
    channel = route.channel
    try:
        response = await client.conversations_info(channel=channel)
    except SlackApiError as exc:
        error = _slack_error(exc)
        if error == "channel_not_found":
            return Check(
                "FAIL",
                what,
                f"{channel} not found: use a channel id (C...), and invite {bot} first if it is private",
            )
        return Check("FAIL", what, f"conversations.info for {channel} failed ({error})")
    except (OSError, TimeoutError) as exc:
        return Check("FAIL", what, f"cannot reach Slack: {type(exc).__name__}")
    info = response.data.get("channel", {}) if isinstance(response.data, dict) else {}
    name = f"#{info.get('name', channel)} ({channel})"
    if info.get("is_archived"):
        return Check("FAIL", what, f"{name} is archived: choose another channel")
    if not info.get("is_member"):
        return Check("FAIL", what, f"{bot} is not in {name}: invite it there with /invite {bot}")
    return Check("ok", what, f"{name}, {bot} is a member")


async def _redis(settings: Settings, limit_s: float) -> Check:
    url = settings.redis_url.get_secret_value()
    what = f"Redis ({redacted(url)})"
    redis = connect(url, socket_timeout=limit_s, socket_connect_timeout=limit_s)
    try:
        await asyncio.wait_for(redis.ping(), timeout=limit_s)
        store = Store(redis, settings.prefix)
        policy = await store.eviction_policy()
        limit = await store.compact_value_limit()
    except (RedisError, RedisClusterException, OSError, TimeoutError) as exc:
        reason = f"{type(exc).__name__}: {unreachable_reason(exc)}"
        return Check("FAIL", what, f"cannot reach it ({reason}): check REDIS_URL")
    finally:
        await redis.aclose()
    if policy is None:
        return Check(
            "warn",
            what,
            "maxmemory-policy unknown (CONFIG is disabled): make sure it is noeviction, "
            "or in-flight asks may be evicted",
        )
    if policy != "noeviction":
        return Check(
            "FAIL",
            what,
            f"maxmemory-policy is {policy}: set it to noeviction (CONFIG SET maxmemory-policy noeviction, "
            "or the provider's parameter group), or in-flight asks may be evicted",
        )
    if limit is not None and limit < COMPACT_HASH_VALUE_BYTES:
        return Check(
            "ok",
            what,
            f"answers, maxmemory-policy noeviction; hash-max-listpack-value is {limit}: "
            f"{COMPACT_HASH_VALUE_BYTES} keeps about a third less memory per ask (docs/operations.md)",
        )
    return Check("ok", what, "answers, maxmemory-policy noeviction")
