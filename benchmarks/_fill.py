"""Fill a Redis with pending asks written exactly the way the bot writes them, fast.

One template ask goes through a real bot replica (XADD, intake, the post at the fake Slack, the
records its scripts write); the replica stops, and every key the ask left, and every member it added
to a shared key (the timers' sorted set, a channel's set...), is read back. Copies of those bytes,
with the ask id, its reply list and the message ts replaced by same-length unique ones, are then
streamed to Redis as one long pipeline of plain writes on a raw socket (HSET, RPUSH, SET PX, ZADD,
SADD, PEXPIRE with the template's TTL). So whatever the version's storage format (the benchmark
runs against older checkouts too), the copies are what that version writes: nothing is assumed about
field names, key layout or scripts.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from redis.asyncio import Redis

TEMPLATE_ID = "bench-fill-999999999"


def fill_id(i: int) -> str:
    return f"bench-fill-{i:09d}"


def _fill_ts(i: int) -> str:
    return f"{1_500_000_000 + i // 1_000_000}.{i % 1_000_000:06d}"


def _resp(*args: bytes) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


@dataclass
class Template:
    """One ask's writes as RESP, with tokens to replace: ``commands`` writes per copy."""

    ts: str
    resp: bytes = b""
    commands: int = 0
    own_keys: dict[str, str] = field(default_factory=dict)  # key -> type
    shared: dict[str, int] = field(default_factory=dict)  # shared key -> members added by the ask
    skipped: list[str] = field(default_factory=list)

    @property
    def tokens(self) -> list[bytes]:
        return [TEMPLATE_ID.encode(), self.ts.encode(), self.ts.replace(".", "").encode()]

    def copy(self, i: int) -> bytes:
        ts = _fill_ts(i)
        out = self.resp.replace(self.tokens[0], fill_id(i).encode())
        out = out.replace(self.tokens[1], ts.encode())
        return out.replace(self.tokens[2], ts.replace(".", "").encode())

    def describe(self) -> str:
        own = ", ".join(f"{t} {k.replace(TEMPLATE_ID, '<id>')}" for k, t in sorted(self.own_keys.items()))
        shared = ", ".join(f"{k} (+{n})" for k, n in sorted(self.shared.items()))
        skipped = f"; not copied: {', '.join(self.skipped)}" if self.skipped else ""
        return f"{self.commands} writes an ask: keys {own}; members of {shared or 'nothing shared'}{skipped}"


async def capture(client: Redis, ts: str) -> Template:
    """Read back what the template ask left in Redis (the replica that wrote it stopped)."""
    redis: Any = client  # replies are bytes (no decode_responses); redis-py types them loosely
    if len(ts) != len(_fill_ts(0)):
        raise RuntimeError(f"message ts {ts!r} has an unexpected length; the fill cannot copy it")
    t = Template(ts)
    tokens = t.tokens
    parts: list[bytes] = []

    def has(value: bytes) -> bool:
        return any(tok in value for tok in tokens)

    keys = [k async for k in redis.scan_iter(count=1000)]
    for key in sorted(keys):
        kind = (await redis.type(key)).decode()
        name = key.decode()
        ttl = int(await redis.pttl(key))
        expire = [_resp(b"PEXPIRE", key, str(ttl).encode())] if ttl > 0 else []
        if has(key):
            t.own_keys[name] = kind
            if kind == "string":
                value = await redis.get(key)
                args = [b"SET", key, value] + ([b"PX", str(ttl).encode()] if ttl > 0 else [])
                parts.append(_resp(*args))
                continue
            if kind == "hash":
                items = await redis.hgetall(key)
                parts.append(_resp(b"HSET", key, *[x for kv in items.items() for x in kv]))
            elif kind == "list":
                parts.append(_resp(b"RPUSH", key, *await redis.lrange(key, 0, -1)))
            elif kind == "set":
                parts.append(_resp(b"SADD", key, *await redis.smembers(key)))
            elif kind == "zset":
                pairs = await redis.zrange(key, 0, -1, withscores=True)
                parts.append(_resp(b"ZADD", key, *[x for m, s in pairs for x in (repr(s).encode(), m)]))
            else:
                t.skipped.append(f"{kind} {name}")
                continue
            parts.extend(expire)
            continue
        # A shared key: copy only what the template ask added to it.
        added = 0
        if kind == "zset":
            for member, score in await redis.zrange(key, 0, -1, withscores=True):
                if has(member):
                    parts.append(_resp(b"ZADD", key, repr(score).encode(), member))
                    added += 1
        elif kind == "set":
            for member in await redis.smembers(key):
                if has(member):
                    parts.append(_resp(b"SADD", key, member))
                    added += 1
        elif kind == "hash":
            for f, v in (await redis.hgetall(key)).items():
                if has(f):
                    parts.append(_resp(b"HSET", key, f, v))
                    added += 1
                elif has(v):
                    t.skipped.append(f"hash {name} field {f.decode()} (its value names the ask)")
        elif kind == "list":
            for item in await redis.lrange(key, 0, -1):
                if has(item):
                    parts.append(_resp(b"RPUSH", key, item))
                    added += 1
        elif kind == "string" and has(await redis.get(key) or b""):
            t.skipped.append(f"string {name} (its value names the ask)")
        if added:
            t.shared[name] = added
    t.resp = b"".join(parts)
    t.commands = len(parts)
    return t


def fill(url: str, template: Template, start: int, stop: int, chunk: int = 2_000) -> float:
    """Write copies ``start..stop-1`` of the template in one pipeline; returns the seconds it took.
    Every reply to these writes is one line (an integer or +OK), so replies are counted by lines."""
    parsed = urlparse(url)
    sock = socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or 6379))
    expected = template.commands * (stop - start)
    error: list[bytes] = []
    began = time.perf_counter()

    def write() -> None:
        for first in range(start, stop, chunk):
            sock.sendall(b"".join(template.copy(i) for i in range(first, min(stop, first + chunk))))

    writer = threading.Thread(target=write, name="fill-writer", daemon=True)
    writer.start()
    seen = 0
    rest = b""
    while seen < expected:
        data = sock.recv(1 << 20)
        if not data:
            raise RuntimeError("Redis closed the connection during the fill")
        data = rest + data
        cut = data.rfind(b"\r\n") + 2
        done, rest = data[:cut], data[cut:]
        seen += done.count(b"\r\n")
        if not error and (done.startswith(b"-") or b"\r\n-" in done):
            at = done.find(b"-") if done.startswith(b"-") else done.find(b"\r\n-") + 2
            error.append(done[at : done.find(b"\r\n", at)])
    writer.join()
    sock.close()
    if error:
        raise RuntimeError(f"Redis refused a fill write: {error[0].decode(errors='replace')}")
    return time.perf_counter() - began
