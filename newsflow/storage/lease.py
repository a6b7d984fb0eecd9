"""A renewed, fenced lease on one Redis key: one owner at a time for a job that may die anywhere.

The lease key holds the owner's random token (the fencing token) with a ``PX`` expiry of ``ttl``
seconds (at most :data:`MAX_TTL_SECONDS`). :meth:`Lease.acquire` is ``SET NX PX``; while the owner
runs, a daemon thread renews the expiry every ``ttl / 3`` seconds with a compare-and-``PEXPIRE``
script (only while the key still holds the owner's token), so a live owner keeps the lease however
long its work takes, and a dead one (``kill -9``, OOM, preemption) loses it at most ``ttl`` seconds
after its last renewal: the next run then takes it. Writes are fenced by :meth:`Lease.check`, one
script that renews the lease only if it still holds the owner's token and raises :class:`LeaseLost`
otherwise; the owner calls it immediately before each write step, and a failed renewal in the
thread makes every later :meth:`Lease.check` fail too, so an owner that lost its lease (a paused
process whose lease expired and was taken) stops before writing. :meth:`Lease.release` deletes the
key only if it still holds the token.

Every script touches the one lease key, so it works on a Redis Cluster unchanged.
"""

from __future__ import annotations

import logging
import secrets
import threading

MAX_TTL_SECONDS = 60.0
"""Longest lease: a dead owner blocks the next run at most this long."""

log = logging.getLogger(__name__)

_RENEW_SCRIPT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""
_RELEASE_SCRIPT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class LeaseLost(RuntimeError):
    """The lease key no longer holds this owner's token (it expired, and maybe another run took it)."""


class Lease:
    """One owner's lease on ``key``.

    Args:
      client: ``redis.Redis``-compatible client.
      key: the lease key.
      ttl: seconds the lease lives without a renewal, in (0, :data:`MAX_TTL_SECONDS`].

    Raises:
      ValueError: ``ttl`` out of range (shows the value).
    """

    def __init__(self, client, key: str, ttl: float = MAX_TTL_SECONDS):
        if not 0 < ttl <= MAX_TTL_SECONDS:
            raise ValueError(f"lease ttl must be in (0, {MAX_TTL_SECONDS:g}] seconds, got {ttl!r}")
        self.client, self.key, self.ttl = client, key, ttl
        self.token = secrets.token_hex(16)
        self._stop = threading.Event()
        self._lost = False
        self._thread: threading.Thread | None = None

    @property
    def _ttl_ms(self) -> int:
        return max(1, int(self.ttl * 1000))

    def acquire(self) -> bool:
        """Takes the lease (``SET NX PX``) and starts renewing it; ``False`` when another owner holds it."""
        if not self.client.set(self.key, self.token, nx=True, px=self._ttl_ms):
            return False
        self._thread = threading.Thread(target=self._renew_loop, name=f"lease {self.key}", daemon=True)
        self._thread.start()
        return True

    def _renew(self) -> bool:
        return bool(self.client.eval(_RENEW_SCRIPT, 1, self.key, self.token, self._ttl_ms))

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.ttl / 3.0):
            try:
                if not self._renew():
                    self._lost = True
                    log.error("lease %s lost: its key no longer holds this owner's token", self.key)
                    return
            except Exception:  # noqa: BLE001 - a transient Redis error: the next tick (or check) tries again
                log.warning("lease %s: renewal failed, retrying", self.key, exc_info=True)

    def check(self) -> None:
        """Fences a write: renews the lease if it still holds this owner's token.

        Raises:
          LeaseLost: the key holds another token or none, or a renewal already found it lost.
        """
        if self._lost or not self._renew():
            self._lost = True
            raise LeaseLost(f"lease {self.key} is no longer held by this run (expired or taken by another run)")

    def release(self) -> bool:
        """Stops renewing and deletes the key if it still holds this owner's token; returns whether it did."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return bool(self.client.eval(_RELEASE_SCRIPT, 1, self.key, self.token))
