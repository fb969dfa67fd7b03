"""What is wrong with a Redis URL, or with a connection that failed, in words a person can act on.

The commands check the URL before connecting so that a typo (no scheme, a port that is not a
number) is one line naming the setting and exit 2, never a traceback from deep in redis-py; and
they tell "Redis did not answer" (exit 8) from everything else. Messages never contain a password.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

from redis.connection import parse_url
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisClusterException
from redis.exceptions import TimeoutError as RedisTimeoutError

__all__ = ["SCHEMES", "is_unreachable", "unreachable_reason", "url_problem"]

SCHEMES = ("redis://", "rediss://", "unix://", "redis+sentinel://", "redis+cluster://")
"""The URL schemes :func:`bot.storage.connection.connect` understands."""

_TRANSIENT = (RedisConnectionError, RedisTimeoutError, OSError, TimeoutError)


def _port_problem(hostport: str) -> str | None:
    if hostport.startswith("["):
        port = hostport.partition("]")[2].removeprefix(":")
    elif hostport.count(":") == 1:
        port = hostport.partition(":")[2]
    else:
        return None
    if port and not (port.isdigit() and 0 < int(port) < 65536):
        return f"port {port!r}, which is not a port number (1-65535)"
    return None


def _db_problem(text: str, example: str) -> str | None:
    if text and not text.isdigit():
        return f"names database {text!r}, which is not a number (as in {example})"
    return None


def url_problem(url: str) -> str | None:
    """What makes ``url`` unusable as a Redis URL, as a phrase to follow the setting's name
    (``REDIS_URL <problem>``); None when :func:`~bot.storage.connection.connect` can use it."""
    if not url.strip():
        return "is empty (as in redis://localhost:6379/0)"
    if not url.startswith(SCHEMES):
        scheme = url.partition("://")[0] if "://" in url else None
        # Only the scheme is quoted: the rest of a URL without one may be a password.
        got = f"its scheme is {scheme!r}" if scheme is not None and len(scheme) <= 20 else "it has none"
        return (
            f"needs a scheme: {', '.join(SCHEMES[:-1])} or {SCHEMES[-1]} (as in redis://localhost:6379/0); "
            f"{got}"
        )
    parsed = urlparse(url)
    hostport = parsed.netloc.rsplit("@", 1)[-1]
    if url.startswith("redis+sentinel://"):
        for item in hostport.split(","):
            if not item.strip():
                return "names an empty Sentinel host (as in redis+sentinel://s1:26379,s2:26379/mymaster)"
            if problem := _port_problem(item.strip()):
                return f"has a Sentinel host with {problem}"
        db = parse_qs(parsed.query).get("db", [""])[0]
        return _db_problem(db, "redis+sentinel://s1:26379/mymaster?db=0")
    if url.startswith(("redis://", "rediss://", "redis+cluster://")):
        if problem := _port_problem(hostport):
            return f"has {problem}"
        db = parsed.path.strip("/")
        if problem := _db_problem(db, "redis://localhost:6379/0"):
            return problem
        if url.startswith("redis+cluster://") and db not in ("", "0"):
            return f"names database {db}, but a Cluster has only database 0 (drop the /{db})"
    if url.startswith("redis+cluster://"):
        url = "redis://" + url.removeprefix("redis+cluster://")
    try:
        parse_url(url)  # type: ignore[no-untyped-call]
    except ValueError as exc:
        # redis-py's own check of the rest (query parameters such as socket_timeout=abc).
        return f"is not a Redis URL redis-py accepts: {exc}"
    return None


def is_unreachable(exc: BaseException) -> bool:
    """True when ``exc`` says Redis did not answer (refused, timed out, no such host, no Sentinel
    master, no Cluster node reachable), as opposed to a bug or a misconfiguration."""
    if isinstance(exc, _TRANSIENT):
        return True
    # redis-py's Cluster client wraps "no startup node answered" in its own exception class.
    return isinstance(exc, RedisClusterException) and isinstance(exc.__cause__, _TRANSIENT)


def unreachable_reason(exc: BaseException) -> str:
    """``exc`` in one short line: redis-py appends whole client reprs to some messages (a Sentinel
    that knows no master), which say nothing to a person and run to hundreds of characters."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    text = text.split(" : <", 1)[0]
    return text if len(text) <= 300 else text[:299] + "…"
