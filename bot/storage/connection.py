"""Turns ``REDIS_URL`` into an asyncio Redis client (standalone, TLS, unix, Sentinel, Cluster)."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlparse

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.sentinel import Sentinel

__all__ = ["connect", "redacted"]


def redacted(url: str) -> str:
    """The URL without its password, for log lines and error messages."""
    parsed = urlparse(url)
    if parsed.password is None:
        return url
    netloc = parsed.netloc.replace(f":{parsed.password}@", ":***@")
    return parsed._replace(netloc=netloc).geturl()


def connect(url: str, **kwargs: Any) -> Redis:
    """``redis://``, ``rediss://``, ``unix://`` as usual; ``redis+cluster://host:port`` for Cluster;
    ``redis+sentinel://host:port[,host:port]/service_name[?db=0]`` for Sentinel."""
    kwargs.setdefault("health_check_interval", 30)
    if url.startswith("redis+cluster://"):
        kwargs.pop("health_check_interval")
        cluster: Any = RedisCluster.from_url("redis://" + url.removeprefix("redis+cluster://"), **kwargs)
        return cluster  # type: ignore[no-any-return]
    if url.startswith("redis+sentinel://"):
        parsed = urlparse(url)
        hosts = [
            (h.rsplit(":", 1)[0], int(h.rsplit(":", 1)[1])) for h in parsed.netloc.split("@")[-1].split(",")
        ]
        service = parsed.path.strip("/") or "mymaster"
        db = int(parse_qs(parsed.query).get("db", ["0"])[0])
        sentinel = Sentinel(hosts, password=parsed.password)  # type: ignore[no-untyped-call]
        master: Redis = sentinel.master_for(service, db=db, **kwargs)
        return master
    # A blocking pool: under a burst (intake, sweeper and clicks at once) callers wait for a free
    # connection instead of failing with "Too many connections".
    kwargs.setdefault("max_connections", 64)
    kwargs.setdefault("timeout", 20)
    return Redis.from_pool(BlockingConnectionPool.from_url(url, **kwargs))
