"""Server-assisted client-side caching of the personal-feed reads (Redis ``CLIENT TRACKING``, BCAST mode).

A personal-feed request reads two keys of its reader, the profile hash and the feed's serving form
(:func:`newsflow.storage.feed_page.read_commands`). :class:`ReaderTracking` keeps what the last read returned
and answers the next request from it without a Redis round trip, for as long as Redis has not said that one
of the two keys changed. Redis says so itself: one connection per serving process asks for invalidation
messages of every key under the two key prefixes (``CLIENT TRACKING ON REDIRECT <own id> BCAST PREFIX ...``,
then ``SUBSCRIBE __redis__:invalidate``; Redis >= 6.0, RESP2; https://redis.io/docs/latest/develop/reference/client-side-caching/).

Correctness (every change in Redis is seen by the next request):

* Before a kept read is used, the tracking socket is read without waiting (:meth:`ReaderTracking.lookup`
  drains it), so every invalidation Redis has written is applied first. Redis queues the BCAST invalidations of
  a write in the same event-loop turn as the writer's reply and, when the tracking connection has nothing else
  pending, writes it before the writer (``beforeSleep`` queues it last and writes pending clients newest
  first), so the invalidation is in this process's socket buffer before the writer can act on its
  acknowledgement (one host; over a network it is one hop ahead of anything the acknowledgement causes).
* When the tracking connection has a backlog (a bulk write of many readers' keys: Redis writes at most 64 KB
  per turn to a client, and a write acknowledged meanwhile can get its answer before its invalidation leaves
  Redis), no read is used: every invalidation received makes the connection *unsynced* and sends a ``PING``
  on it; the ``PONG`` comes back behind everything Redis had queued for it, and only when it arrives with
  nothing received after it are reads used again (its argument carries 128 random bits, so no key name can
  imitate the PONG's bytes at the end of a cut message). A write whose invalidation is queued behind newer data
  means that data reached this process first (Redis writes a client with pending output in every turn, or
  its socket buffer is full and the next drain reads it), so the connection is unsynced again before the
  read could be used. What remains is the microseconds within one Redis turn between its writes to the
  writer and to the tracking connection (when the writer's reply goes first), shorter than any request the
  writer's acknowledgement can cause.
* Liveness: a read is used only within ``fresh_seconds`` of the last ``PONG`` (a heartbeat ``PING`` goes
  out at half that age). A hung server, a half-open TCP connection or a server replaced while hung stops
  all reads within that time; requests make their round trips (which time out and retry as before).
* A read that an invalidation overtakes is not kept: :meth:`~ReaderTracking.begin` marks the reader's read
  in flight, an invalidation of the reader while it is in flight spoils it, and :meth:`~ReaderTracking.end`
  keeps the result only when it was not spoiled and the tracking connection is the one it began under.
* A key that expires is invalidated only when Redis deletes it (lazily or by its expiry cycle), so a read is
  kept no longer than the profile's and the serving form's TTLs, read in the same round trip (``PTTL``).
* A ``null`` invalidation (``FLUSHALL``/``FLUSHDB``), a closed or broken connection, or anything unexpected on it
  forgets every cached read; until a new connection is set up (in the background, every ``retry_seconds``),
  each request makes its round trip as before. Nothing is cached for a reader without a serving form. A
  server that answers the set-up with an error (older than Redis 6, ``CLIENT`` denied) turns tracking off
  for the process (:class:`TrackingRefused`, logged once).

All methods run on the event loop the tracking connection was set up from (the serving app's); from any
other loop :meth:`~ReaderTracking.lookup` finds nothing and :meth:`~ReaderTracking.begin` gives no ticket.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import socket
import time
from collections.abc import Sequence

import hiredis

from newsflow.storage.keys import Keys

log = logging.getLogger("newsflow.serving")

INVALIDATE_CHANNEL = b"__redis__:invalidate"


class TrackingRefused(ValueError):
    """Redis answered the tracking set-up with an error (no ``CLIENT TRACKING`` before Redis 6, a command
    renamed or denied by ACL, failed ``AUTH``): tracking stays off for the process."""


class ReaderTracking:
    """Readers' last ``(profile fields, serving form)`` reads, valid until Redis invalidates them (module doc).

    Args:
      client: the synchronous ``redis.Redis`` client whose server is tracked; its connection settings
        (TCP host/port or Unix socket path, username/password, connect timeout) are copied. TLS or a
        credential provider: :attr:`available` is False (every request keeps its round trip).
      keys: the key layout (the two tracked prefixes: ``keys.user("")`` and ``keys.feed_page("")``).
      max_readers: reads kept (oldest dropped first); 0 disables tracking.
      retry_seconds: wait before setting the tracking connection up again after it failed or closed.
      fresh_seconds: kept reads are used only this long after the last ``PONG`` on the tracking connection
        (module doc, "Liveness").
      client_name: ``CLIENT SETNAME`` of the tracking connection (seen in ``CLIENT LIST``).
    """

    def __init__(
        self,
        client,
        keys: Keys = Keys(),
        max_readers: int = 1024,
        retry_seconds: float = 5.0,
        client_name: str = "newsflow-serving-tracking",
        fresh_seconds: float = 0.5,
    ):
        pool = getattr(client, "connection_pool", None)
        kw = dict(getattr(pool, "connection_kwargs", None) or {})
        cls = getattr(getattr(pool, "connection_class", None), "__name__", "")
        self._address = None
        if cls == "UnixDomainSocketConnection" and kw.get("path"):
            self._address = (socket.AF_UNIX, kw["path"])
        elif cls == "Connection" and not kw.get("credential_provider"):
            self._address = (socket.AF_INET, (kw.get("host", "localhost"), int(kw.get("port", 6379))))
        self._auth = [a for a in (kw.get("username"), kw.get("password")) if a]
        self._timeout = kw.get("socket_connect_timeout") or kw.get("socket_timeout") or 2.0
        self._prefixes = (keys.user(""), keys.feed_page(""))
        self.max_readers = max_readers
        self.retry_seconds = retry_seconds
        self.client_name = client_name
        self.fresh_seconds = fresh_seconds
        self._synced = False  # every invalidation queued before the last PONG applied, none received since
        self._pings = 0  # PINGs sent (the first part of their argument)
        self._awaited: bytes | None = None  # the argument of the PING whose PONG is awaited
        self._last_pong = float("-inf")  # time.monotonic() of the last PONG
        self._pong_last: bytes | None = None  # the encoding of that PONG while nothing came after it
        self._tail = b""  # the last 128 bytes received (a PONG is at most ~75)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sock: socket.socket | None = None
        self._reader = hiredis.Reader()
        self._generation = 0  # bumped at every new connection: tickets of an older one are void
        self._connecting = False
        self._retry_at = 0.0
        self._reads: dict[str, tuple[tuple[dict, bytes], float]] = {}  # user -> (read, monotonic deadline)
        self._in_flight: dict[str, int] = {}
        self._spoiled: set[str] = set()
        self.invalidations = 0  # invalidation messages applied (for tests and metrics)
        self.hits = 0  # requests answered from a kept read
        self.refused = ""  # why the server refused tracking (then :attr:`available` is False)
        self.connections = 0  # tracking connections set up

    @property
    def available(self) -> bool:
        """Whether tracking can be used with this client (see Args)."""
        return self._address is not None and self.max_readers > 0 and not self.refused

    # -- the request path ---------------------------------------------------------------
    def lookup(self, user: str) -> tuple[dict, bytes] | None:
        """The reader's last read ``(fields, raw)`` when no invalidation of either key has arrived since, else
        ``None`` (also while the connection is down or being set up; the first call sets it up)."""
        if not self._ready():
            return None
        self.drain()
        if not self._synced or self._sock is None:
            return None
        now = time.monotonic()
        age = now - self._last_pong
        if age > self.fresh_seconds / 2 and self._awaited is None:
            try:
                self._ping(now)  # heartbeat
            except OSError as e:
                self._broken(e)
                return None
        if age > self.fresh_seconds or self._sock is None:
            return None
        kept = self._reads.get(user)
        if kept is None:
            return None
        read, until = kept
        if now >= until:  # a TTL has run out (module doc)
            del self._reads[user]
            return None
        self.hits += 1
        return read

    def begin(self, user: str) -> int | None:
        """Marks a read of ``user``'s keys in flight; the ticket for :meth:`end`, or ``None`` (not tracking)."""
        if not self._ready():
            return None
        self.drain()
        if self._sock is None:
            return None
        self._in_flight[user] = self._in_flight.get(user, 0) + 1
        return self._generation

    def end(
        self,
        user: str,
        ticket: int | None,
        read: tuple[dict, bytes | None] | None,
        ttls_ms: Sequence[int] = (),
        sent: float = 0.0,
    ) -> None:
        """Ends a read begun with :meth:`begin`: keeps ``read`` (``(fields, raw)``; ``None`` when the read
        failed) unless an invalidation of the reader arrived meanwhile, the connection changed or ``raw`` is
        ``None``.

        Args:
          ttls_ms: the ``PTTL`` of the profile and of the serving form, read in the same round trip
            (milliseconds; negative: no expiry or no key). Redis sends the invalidation of an expired key only
            when it deletes it, which can be later, so the read is kept until ``sent + min(ttls_ms) / 1000``
            at most.
          sent: ``time.monotonic()`` when the round trip was sent (before Redis read the TTL).
        """
        if ticket is None:
            return
        self.drain()
        left = self._in_flight.get(user, 1) - 1
        spoiled = user in self._spoiled
        if left <= 0:
            self._in_flight.pop(user, None)
            self._spoiled.discard(user)
        else:
            self._in_flight[user] = left
        if read is None or read[1] is None or spoiled or ticket != self._generation or self._sock is None:
            return
        until = sent + min((t / 1000.0 for t in ttls_ms if t is not None and t >= 0), default=float("inf"))
        reads = self._reads
        reads.pop(user, None)
        while len(reads) >= self.max_readers:
            del reads[next(iter(reads))]
        reads[user] = (read, until)

    def drain(self, max_bytes: int | None = None) -> None:
        """Applies every invalidation waiting on the tracking socket (never blocks; at most ``max_bytes`` read,
        for tests). Receiving anything leaves the connection unsynced unless the bytes end exactly with the
        ``PONG`` of the awaited ``PING`` (a message cut by the read counts as received); then a ``PING`` is
        sent if none is awaited."""
        sock = self._sock
        if sock is None:
            return
        try:
            got = 0
            while max_bytes is None or got < max_bytes:
                try:
                    data = sock.recv(65536 if max_bytes is None else min(65536, max_bytes - got))
                except (BlockingIOError, InterruptedError):
                    break
                if not data:
                    raise ConnectionError("redis closed the tracking connection")
                got += len(data)
                self._tail = (self._tail + data)[-128:]
                self._reader.feed(data)
                while (msg := self._reader.gets()) is not False:
                    self._apply(msg)
            if got:
                self._synced = self._pong_last is not None and self._tail.endswith(self._pong_last)
                if not self._synced and self._awaited is None:
                    self._ping(time.monotonic())
        except (OSError, hiredis.ProtocolError, ValueError) as e:
            self._broken(e)

    def _ping(self, now: float) -> None:
        """Sends a ``PING`` on the tracking connection (its ``PONG`` comes back behind everything queued before).

        Its argument is a sequence number and 128 random bits: the bytes of its ``PONG`` cannot be written into a
        key name by anyone who does not see this connection's traffic (a key whose invalidation ended with them,
        cut at a socket-buffer boundary, would otherwise pass for the ``PONG``).
        """
        self._pings += 1
        nonce = f"{self._pings}-{secrets.token_hex(16)}".encode()
        command = hiredis.pack_command((b"PING", nonce))
        if self._sock.send(command) != len(command):  # a few bytes into an empty send buffer
            raise ConnectionError("tracking connection: PING not sent whole")
        self._awaited = nonce

    def _apply(self, msg) -> None:
        """Applies one message: the awaited ``PONG`` (remembered as the last message, with its encoding) or an
        invalidation; anything else raises ValueError (the connection is dropped)."""
        if isinstance(msg, list) and len(msg) == 2 and msg[0] == b"pong":
            if self._awaited is not None and msg[1] == self._awaited:
                self._awaited, self._last_pong = None, time.monotonic()
                self._pong_last = hiredis.pack_command((b"pong", msg[1]))  # the reply: an array of two bulk strings
            return
        if not (isinstance(msg, list) and len(msg) == 3 and msg[0] == b"message" and msg[1] == INVALIDATE_CHANNEL):
            raise ValueError(f"unexpected message on the tracking connection: {msg!r:.200}")
        self.invalidations += 1
        self._pong_last = None  # there may be more behind it: no read is used until a PONG says otherwise
        keys = msg[2]
        if keys is None:  # FLUSHALL/FLUSHDB: everything
            self._reads.clear()
            self._spoiled.update(self._in_flight)
            return
        for key in keys:
            k = key.decode("utf-8", "surrogateescape")
            for prefix in self._prefixes:
                if k.startswith(prefix):
                    user = k[len(prefix) :]
                    self._reads.pop(user, None)
                    if user in self._in_flight:
                        self._spoiled.add(user)

    # -- the connection -----------------------------------------------------------------
    def _ready(self) -> bool:
        """Whether the connection is up on the running loop; starts setting it up when it is not."""
        if not self.available:
            return False
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        if loop is not self._loop:
            if self._loop is not None and not self._loop.is_closed():
                return False  # another loop owns the connection
            self._close()
            self._loop, self._connecting, self._retry_at = loop, False, 0.0
        if self._sock is not None:
            return True
        if not self._connecting and time.monotonic() >= self._retry_at:
            self._connecting = True
            loop.create_task(self._connect())
        return False

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            sock = await asyncio.to_thread(self._open)
        except TrackingRefused as e:
            log.warning("client-side caching of readers off: the Redis server refused it (%s)", e)
            self.refused = str(e)
            return
        except (OSError, hiredis.ProtocolError, ValueError) as e:
            log.warning("client-side caching of readers off for %.0f s: %s", self.retry_seconds, e)
            self._retry_at = time.monotonic() + self.retry_seconds
            return
        finally:
            self._connecting = False
        if loop is not self._loop or loop.is_closed():
            sock.close()
            return
        sock.setblocking(False)
        self._sock, self._reader = sock, hiredis.Reader()
        self._generation += 1
        self._synced, self._awaited, self._last_pong = True, None, time.monotonic()  # PONG of the set-up
        self._pong_last, self._tail = None, b""
        self.connections += 1
        self._reads.clear()
        loop.add_reader(sock.fileno(), self.drain)

    def _open(self) -> socket.socket:
        """A blocking connection with tracking on and subscribed to the invalidation channel (in a thread)."""
        family, address = self._address
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.settimeout(self._timeout)
            sock.connect(address)
            reader = hiredis.Reader()

            def call(*args):
                sock.sendall(hiredis.pack_command(args))
                while (reply := reader.gets()) is False:
                    data = sock.recv(65536)
                    if not data:
                        raise ConnectionError("redis closed the connection during setup")
                    reader.feed(data)
                if isinstance(reply, hiredis.ReplyError):
                    raise TrackingRefused(f"{args[0]} {args[1] if len(args) > 1 else ''}: {reply}")
                return reply

            if self._auth:
                call("AUTH", *self._auth)
            call("CLIENT", "SETNAME", self.client_name)
            own = call("CLIENT", "ID")
            prefixes = [a for p in self._prefixes for a in ("PREFIX", p)]
            call("CLIENT", "TRACKING", "ON", "REDIRECT", own, "BCAST", *prefixes)
            reply = call("SUBSCRIBE", INVALIDATE_CHANNEL)
            if not (isinstance(reply, list) and reply[:2] == [b"subscribe", INVALIDATE_CHANNEL]):
                raise ValueError(f"unexpected SUBSCRIBE reply {reply!r:.200}")
            reply = call("PING", "0")  # everything up to now is delivered: nothing is kept yet anyway
            if reply != [b"pong", b"0"]:
                raise ValueError(f"unexpected PING reply {reply!r:.200}")
            return sock
        except BaseException:
            sock.close()
            raise

    def _broken(self, e: BaseException) -> None:
        log.warning("tracking connection lost (%s): readers' reads forgotten, round trips until it is back", e)
        self._close()
        self._retry_at = time.monotonic() + self.retry_seconds

    def _close(self) -> None:
        """Closes the tracking connection and forgets every read (reads in flight are void)."""
        sock, self._sock = self._sock, None
        self._synced, self._awaited = False, None
        self._reads.clear()
        self._spoiled.update(self._in_flight)
        if sock is None:
            return
        if self._loop is not None and not self._loop.is_closed():
            try:
                self._loop.remove_reader(sock.fileno())
            except (ValueError, OSError, RuntimeError):
                pass
        sock.close()

    def close(self) -> None:
        """Closes the tracking connection (app shutdown)."""
        self._close()
