"""Per-process memos of the personal-feed request path (``GET /v1/feed``, the For You page).

A personal-feed request reads the reader's edition/blocks and their feed's serving form in one Redis
round trip (:func:`newsflow.storage.feed_page.read_for_request`); everything after that is a pure
function of what it read, the shared breaking set and the query. Two memos skip recomputing it:

* :class:`VerifiedTokens` — a token whose signature and claims checked out once is remembered with its
  ``exp``/``iat``; later requests with the same token only recheck those two against the current time,
  in :func:`newsflow.serving.tokens.verify_token`'s order and with its reasons, so the answer is the same as a
  full check (the secret is fixed for the process' lifetime; rotating it means a restart).
* :class:`ReaderMemo` — per reader, the last decoded serving form (reused while Redis returns the same
  bytes), the profile built from the same hash fields, and the page (its items, body and ETag) for the
  same serving form, fields, edition parameter, limit and breaking-set generation. Every input of the
  page is part of the key, and the bytes are compared in full (``bytes ==`` is a ``memcmp``), so a hit
  is the page a recomputation would give; any change in Redis is seen on the next request.

Both are bounded (oldest entries dropped first) and safe to share between the thread-pool workers:
entries are immutable once published except for a lazily filled body/ETag, which every thread fills
with the same value.
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import weakref
from collections.abc import Callable, Sequence

import redis.asyncio.connection as aconn
import redis.connection as sconn
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from newsflow.serving.tokens import CLOCK_SKEW_SECONDS, TokenError, verify_token


class VerifiedTokens:
    """Remembers tokens that passed :func:`newsflow.serving.tokens.verify_token` (module docstring).

    Args:
      secret: the HMAC key (the one every token is checked with).
      max_entries: tokens remembered; when full the oldest are dropped.
    """

    def __init__(self, secret: bytes, max_entries: int = 50_000):
        self._secret = secret
        self.max_entries = max_entries
        self._ok: dict[str, tuple[str, float, float]] = {}
        self._lock = threading.Lock()

    def verify(self, token: str, now: float) -> str:
        """The token's user id, as :func:`newsflow.serving.tokens.verify_token` ``(token, secret, now)`` answers.

        Raises:
          TokenError: refused (the same ``reason`` a full check gives).
        """
        hit = self._ok.get(token) if isinstance(token, str) else None
        if hit is None:
            user = verify_token(token, self._secret, now)
            payload = token.split(".")[1]  # verified canonical base64url
            claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
            entry = (user, float(claims["exp"]), float(claims["iat"]))
            with self._lock:
                while len(self._ok) >= self.max_entries:
                    del self._ok[next(iter(self._ok))]
                self._ok[token] = entry
            return user
        user, exp, iat = hit
        if exp <= now:
            raise TokenError("expired", "token expired")
        if iat > now + CLOCK_SKEW_SECONDS:
            raise TokenError("not_yet_valid", "token issued in the future")
        return user


class ServedPage:
    """One reader's memo entry (:class:`ReaderMemo`).

    Attributes:
      raw: the serving-form bytes the page was computed from.
      page: their :class:`~newsflow.storage.feed_page.FeedPage`.
      fields: the user-hash fields read with them (``{field bytes: value bytes}``).
      profile: the :class:`~schemas.UserProfile` built from ``fields``.
      query: ``(edition parameter, limit, breaking generation)`` of the page below.
      head: the answer without its stories (``user``, ``edition``, ``generated_at``, ``stale``, ``count``).
      items: each story's compact JSON bytes.
      body / etag: the ``/v1/feed`` body and its strong ETag, filled on first use (``None`` before).
    """

    __slots__ = ("raw", "page", "fields", "profile", "query", "head", "items", "body", "etag")

    def __init__(self, raw, page, fields, profile, query, head, items):
        self.raw, self.page, self.fields, self.profile = raw, page, fields, profile
        self.query, self.head, self.items = query, head, items
        self.body: bytes | None = None
        self.etag: str | None = None

    def body_and_etag(self, make_body: Callable[[], bytes], make_etag: Callable[[bytes], str]) -> tuple[bytes, str]:
        """The memoized body and ETag, computed with ``make_body``/``make_etag`` on first use."""
        body, etag = self.body, self.etag
        if body is None or etag is None:
            body = make_body()
            etag = make_etag(body)
            self.body, self.etag = body, etag
        return body, etag


class ReaderMemo:
    """The last :class:`ServedPage` of each reader, at most ``max_readers`` of them (oldest dropped)."""

    def __init__(self, max_readers: int = 1024):
        self.max_readers = max_readers
        self._entries: dict[str, ServedPage] = {}
        self._lock = threading.Lock()

    def get(self, user: str) -> ServedPage | None:
        """The reader's last entry, or ``None``."""
        return self._entries.get(user)

    def put(self, user: str, entry: ServedPage) -> None:
        """Replaces the reader's entry."""
        if self.max_readers <= 0:
            return
        with self._lock:
            self._entries.pop(user, None)
            while len(self._entries) >= self.max_readers:
                del self._entries[next(iter(self._entries))]
            self._entries[user] = entry


class AsyncRoundTrip:
    """Sends a few Redis commands as one round trip from the event loop, without a worker thread.

    ``redis.asyncio`` connections made with the settings of a synchronous ``redis.Redis`` client (plain TCP
    or a Unix socket; host/port/path, db, credentials, timeouts). Commands go out in one write and their
    replies are read in order on one pooled connection, as a non-transactional pipeline does; a connection
    or timeout error is retried as often as the client's ``Retry`` allows (on a fresh connection), and any
    other failure drops the connection (its replies may be half read), so an idle connection never holds
    unread data and needs no check before reuse. Idle connections are kept per event loop (a test client
    may run several loops in turn); a closed loop's are dropped with it.

    Args:
      client: the synchronous client; :attr:`available` is False when its connections cannot be copied
        (TLS, a credential provider, a cluster client, ...), and the caller keeps using it in a thread.
      max_idle: connections kept open per event loop between requests (a burst opens more, closed after use).
    """

    _COPIED = (
        "db",
        "username",
        "password",
        "socket_timeout",
        "socket_connect_timeout",
        "socket_read_size",
        "client_name",
        "encoding",
        "encoding_errors",
        "decode_responses",
        "host",
        "port",
        "path",
    )

    def __init__(self, client, max_idle: int = 64):
        self._spec = None
        pool = getattr(client, "connection_pool", None)
        cls = {
            sconn.Connection: aconn.Connection,
            sconn.UnixDomainSocketConnection: aconn.UnixDomainSocketConnection,
        }.get(getattr(pool, "connection_class", None))
        kwargs = getattr(pool, "connection_kwargs", None) or {}
        if cls is not None and not kwargs.get("credential_provider") and not kwargs.get("redis_connect_func"):
            retry = kwargs.get("retry")
            retries = retry.get_retries() if retry is not None and hasattr(retry, "get_retries") else 0
            copied = {k: kwargs[k] for k in self._COPIED if k in kwargs}
            copied["retry"] = Retry(NoBackoff(), 0)  # :meth:`execute` retries, on a fresh connection
            self._spec = (cls, copied, max(0, int(retries)))
        self.max_idle = max_idle
        self._pools: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    @property
    def available(self) -> bool:
        """Whether :meth:`execute` can be used."""
        return self._spec is not None

    def _idle(self) -> list:
        loop = asyncio.get_running_loop()
        idle = self._pools.get(loop)
        if idle is None:
            idle = self._pools[loop] = []
        return idle

    async def execute(self, commands: Sequence[tuple]) -> list:
        """The replies of ``commands`` (each ``(name, *args)``), in order.

        Raises:
          redis.RedisError: a Redis error (an error reply, or connection/timeout errors past the retries).
        """
        idle = self._idle()
        cls, kwargs, retries = self._spec
        attempt = 0
        while True:
            conn = idle.pop() if idle else cls(**kwargs)
            try:
                if not conn.is_connected:
                    await conn.connect()
                await conn.send_packed_command(conn.pack_commands(commands))
                replies = [await conn.read_response() for _ in commands]
            except (RedisConnectionError, RedisTimeoutError):
                await conn.disconnect()
                if attempt >= retries:
                    raise
                attempt += 1
                continue
            except BaseException:
                await conn.disconnect()  # replies may be half read: never reuse it
                raise
            if len(idle) < self.max_idle:
                idle.append(conn)  # every reply read: ready for the next request
            else:
                await conn.disconnect()  # a burst's extra connection
            return replies
