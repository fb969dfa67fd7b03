"""Turns ``REDIS_URL`` into an asyncio Redis client (standalone, TLS, unix, Sentinel, Cluster).

Every connection gets a socket timeout, a connect timeout and TCP keepalive: a half-open connection
(a Redis host that vanished, a failover that dropped the route) must end in an error the loops
retry, never in a read that waits forever. The socket timeout is longer than the longest blocking
read the bot makes (intake's ``XREADGROUP BLOCK``, 2 s by default), so a healthy idle block never
times out.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlparse

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from bot.errors import ConfigError

__all__ = ["SENTINEL_PORT", "SOCKET_TIMEOUT_S", "connect", "redacted", "sentinel_hosts"]

SOCKET_TIMEOUT_S = 10.0
"""Default read timeout of the bot's connections: well above intake's 2 s ``BLOCK``."""

SENTINEL_PORT = 26379
"""Sentinel's standard port, used for a ``redis+sentinel://`` host without one."""


def redacted(url: str) -> str:
    """The URL without its password, for log lines and error messages."""
    parsed = urlparse(url)
    if parsed.password is None:
        return url
    netloc = parsed.netloc.replace(f":{parsed.password}@", ":***@")
    return parsed._replace(netloc=netloc).geturl()


def sentinel_hosts(netloc: str) -> list[tuple[str, int]]:
    """``host[:port][,host[:port]...]`` (credentials stripped) as (host, port) pairs; port 26379 when absent.

    IPv6 addresses go in brackets (``[::1]:26379``), as in any URL."""
    hosts: list[tuple[str, int]] = []
    for item in netloc.rsplit("@", 1)[-1].split(","):
        item = item.strip()
        if not item:
            raise ConfigError(f"REDIS_URL names an empty Sentinel host in {netloc!r}")
        if item.startswith("["):
            host, _, rest = item[1:].partition("]")
            port_text = rest.removeprefix(":")
        elif item.count(":") == 1:
            host, _, port_text = item.partition(":")
        else:
            host, port_text = item, ""
        if not port_text:
            hosts.append((host, SENTINEL_PORT))
            continue
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ConfigError(f"REDIS_URL: Sentinel port {port_text!r} of {host!r} is not a port number")
        hosts.append((host, int(port_text)))
    return hosts


def _resilience(kwargs: dict[str, Any]) -> None:
    kwargs.setdefault("socket_timeout", SOCKET_TIMEOUT_S)
    kwargs.setdefault("socket_connect_timeout", 5)
    kwargs.setdefault("socket_keepalive", True)
    # A dropped connection (restart, failover, a READONLY demoted master) is retried on a fresh one.
    # Safe for the bot's commands: every state change is a compare-and-set script or idempotent.
    # Timeouts are not retried here: intake must see them, because a blocking read that timed out
    # may have been served (its entries are pending to this consumer); it reads them back at once.
    kwargs.setdefault("retry", Retry(ExponentialBackoff(cap=1.0, base=0.05), 3, (RedisConnectionError,)))
    kwargs.setdefault("retry_on_error", [RedisConnectionError])


class _SentinelMaster(Redis):
    """The master found through Sentinel; closing it closes its pool and the Sentinel clients too
    (redis-py leaves both open when the client was built around a given pool)."""

    sentinel_manager: Sentinel | None = None

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        await super().aclose(
            close_connection_pool=True if close_connection_pool is None else close_connection_pool
        )
        if self.sentinel_manager is not None:
            for client in self.sentinel_manager.sentinels:
                await client.aclose()


def connect(url: str, **kwargs: Any) -> Redis:
    """``redis://``, ``rediss://``, ``unix://`` as usual; ``redis+cluster://host:port`` for Cluster;
    ``redis+sentinel://host[:port][,host[:port]]/service_name[?db=0]`` for Sentinel (port 26379 by
    default). Keyword arguments override the connection defaults (timeouts, keepalive, retries)."""
    _resilience(kwargs)
    if url.startswith("redis+cluster://"):
        # Cluster clients follow MOVED/ASK themselves and refresh the slot map after a failover.
        cluster: Any = RedisCluster.from_url("redis://" + url.removeprefix("redis+cluster://"), **kwargs)
        return cluster  # type: ignore[no-any-return]
    kwargs.setdefault("health_check_interval", 30)
    if url.startswith("redis+sentinel://"):
        parsed = urlparse(url)
        hosts = sentinel_hosts(parsed.netloc)
        service = parsed.path.strip("/") or "mymaster"
        db = int(parse_qs(parsed.query).get("db", ["0"])[0])
        sentinel_kwargs = {
            "socket_timeout": min(float(kwargs["socket_timeout"] or SOCKET_TIMEOUT_S), 5.0),
            "socket_connect_timeout": kwargs["socket_connect_timeout"],
            "socket_keepalive": True,
        }
        sentinel = Sentinel(  # type: ignore[no-untyped-call,unused-ignore]  # typed from redis-py 8.2 on
            hosts, sentinel_kwargs=sentinel_kwargs, password=parsed.password
        )
        # The master's connections ask Sentinel again after a failover (READONLY, dropped link).
        master: _SentinelMaster = sentinel.master_for(service, redis_class=_SentinelMaster, db=db, **kwargs)
        master.sentinel_manager = sentinel
        return master
    # A blocking pool: under a burst (intake, sweeper and clicks at once) callers wait for a free
    # connection instead of failing with "Too many connections".
    kwargs.setdefault("max_connections", 64)
    kwargs.setdefault("timeout", 20)
    return Redis.from_pool(BlockingConnectionPool.from_url(url, **kwargs))
