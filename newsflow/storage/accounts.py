"""Reader and editor accounts in Redis: passwords, sign-in limits, web sessions, personal API tokens, deletion.

Keys (:mod:`newsflow.storage.keys`; ``b =`` :func:`~newsflow.storage.keys.reader_bucket` ``(user)``, so one
reader's account keys share the slot of the tag ``{r<b>}``)::

    P:{r<b>}:account:<user>            HASH  password (argon2id PHC string), role (reader|editor), created,
                                             disabled (UTC epoch s, only while an editor has disabled it)
    P:{r<b>}:account:<user>:sessions   HASH  SHA-256 hex of a session id -> expiry (UTC epoch s)
    P:{r<b>}:account:<user>:tokens     HASH  personal API token id -> JSON {"name", "created", "expires"}
    P:{r<b>}:account:<user>:failures   ZSET  failed sign-ins of the account name in the last 15 minutes
    P:signin:failures:<address>        ZSET  failed sign-ins from one client address in the last 15 minutes
    P:accounts                         ZSET  every account name, score 0 (lexical order: prefix search, count)
    P:{s<k>}:readers:deleted           HASH  deleted reader -> JSON {time, last_event} (k = its event shard)

Passwords are hashed with argon2id (``argon2-cffi``, RFC 9106 low-memory profile by default: 3 passes over
64 MiB); a hash made with weaker parameters is replaced at the next successful sign-in. A sign-in for an
account that does not exist still verifies against a fixed hash, so the answer time does not tell which
names exist.

Sign-in limit: after :data:`MAX_FAILURES` (5) failed attempts for one account name, or from one client
address, within :data:`FAILURE_WINDOW_SECONDS` (15 min), :meth:`AccountStore.check_password` raises
:class:`TooManyAttempts` (``retry_after`` seconds until the oldest of those failures leaves the window)
without looking at the password. A success clears the account's failures, not the address's.

A web session is a random 256-bit id; the cookie value is ``<base64url(user)>.<id>`` and Redis keeps only
the id's SHA-256 (a copy of the database holds no usable session). A session is never an API token:
:mod:`newsflow.serving.tokens` tokens are signed ``nf1.`` strings, and a personal one carries a token id
(``jti``) that must still be listed in the account's tokens hash.

A disabled account (:meth:`AccountStore.set_disabled`, the editors' readers admin) cannot sign in (its
right password is refused like a wrong one, without counting as a failure), its sessions end, and its
personal API tokens are refused until it is enabled again (they are kept, and work again then).

Deletion (:meth:`AccountStore.delete`): the reader's tombstone is written first (``P:{s<k>}:readers:deleted``:
the deletion time and the last id the reader's event stream had given), then every key of
:meth:`Keys.reader_owned`, the reader's fields of every stored per-reader model version (interest, history,
cluster) and its active-reader entry are removed. Events appended up to that stream id (whatever clock stamped
them: a replayed corpus's clock stands still) are then dropped from the events dataset by
:func:`newsflow.storage.tombstones.purge_deleted_events`, which ``newsflow nightly`` runs after its flush (before
any job reads the events) and ``newsflow retention`` runs over the whole dataset; an account of the same name
registered later starts clean.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import secrets

from newsflow.storage.keys import Keys, event_shard, reader_bucket
from newsflow.storage.tombstones import last_event_id

ROLES = ("reader", "editor")
MAX_FAILURES = 5
FAILURE_WINDOW_SECONDS = 900
SESSION_TTL_SECONDS = 14 * 86400
MAX_SESSIONS = 50
TOKEN_TTL_SECONDS = 90 * 86400
MAX_TOKENS = 20
MIN_PASSWORD = 8
MAX_PASSWORD = 256
# no ":" in account names: an account's keys are ``account:<name>`` and ``account:<name>:<part>``, so a name
# "<other>:tokens" would address another account's tokens hash
USER_RE = re.compile(r"[A-Za-z0-9_.@-]{1,64}\Z")
TOKEN_NAME_RE = re.compile(r"[^\x00-\x1f\x7f]{1,60}\Z")
PER_READER_MODELS = ("interest", "history", "cluster")
_SID_RE = re.compile(r"[A-Za-z0-9_-]{43}\Z")


class AccountError(ValueError):
    """A refused account change; ``reason`` is one of ``bad_name``, ``bad_password``, ``taken``,
    ``no_account``, ``wrong_password``, ``bad_role``, ``bad_token_name``, ``too_many_tokens``."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


class TooManyAttempts(Exception):
    """Sign-in refused by the limit; ``retry_after`` is whole seconds (>= 1) until an attempt is allowed."""

    def __init__(self, retry_after: int):
        super().__init__(f"too many failed sign-ins; retry after {retry_after} s")
        self.retry_after = retry_after


def _s(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def check_name(user: str) -> str:
    """``user`` when it is 1-64 characters of ``[A-Za-z0-9_.@-]`` (no ``:``: see :data:`USER_RE`).

    Raises:
      AccountError: ``bad_name``.
    """
    if not isinstance(user, str) or not USER_RE.match(user):
        raise AccountError("bad_name", "a reader name is 1 to 64 letters, digits or . _ @ - (no spaces)")
    return user


def check_password_rules(password: str) -> str:
    """``password`` when it has :data:`MIN_PASSWORD`..:data:`MAX_PASSWORD` characters.

    Raises:
      AccountError: ``bad_password``.
    """
    if not isinstance(password, str) or not MIN_PASSWORD <= len(password) <= MAX_PASSWORD:
        raise AccountError("bad_password", f"a password has {MIN_PASSWORD} to {MAX_PASSWORD} characters")
    return password


def default_hasher():
    """argon2id with RFC 9106's low-memory profile (3 passes, 64 MiB, 4 lanes)."""
    from argon2 import PasswordHasher, profiles

    return PasswordHasher.from_parameters(profiles.RFC_9106_LOW_MEMORY)


def _digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode("ascii")).hexdigest()


def split_session(cookie: str) -> tuple[str, str] | None:
    """``(user, session id)`` of a session cookie value, or ``None`` when it is not one."""
    if not isinstance(cookie, str) or len(cookie) > 200 or cookie.count(".") != 1:
        return None
    head, sid = cookie.split(".")
    if not _SID_RE.match(sid):
        return None
    try:
        user = base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)).decode("ascii")
    except (ValueError, UnicodeDecodeError):
        return None
    return (user, sid) if USER_RE.match(user) else None


def token_live(entry: bytes | str | None, now: float) -> bool:
    """Whether a tokens-hash entry (``HGET`` of ``Keys.account_tokens(user)``, ``None`` when absent) is a live
    token at ``now``."""
    return entry is not None and json.loads(entry)["expires"] > now


class AccountStore:
    """Accounts over one redis-py client (module docstring).

    Args:
      client: ``redis.Redis`` or ``RedisCluster`` client.
      keys: the key layout.
      hasher: an ``argon2.PasswordHasher`` (default :func:`default_hasher`).
    """

    def __init__(self, client, keys: Keys = Keys(), hasher=None):
        self.client = client
        self.keys = keys
        self.hasher = hasher or default_hasher()
        self._dummy_hash: str | None = None  # made at the first sign-in for a name without an account

    @property
    def _dummy(self) -> str:
        if self._dummy_hash is None:
            self._dummy_hash = self.hasher.hash(secrets.token_hex(16))
        return self._dummy_hash

    # -- accounts -----------------------------------------------------------------------------
    def create(self, user: str, password: str, now: float, role: str = "reader") -> None:
        """Registers ``user`` with ``password`` and ``role``.

        Raises:
          AccountError: bad name, password or role, or the name is taken.
        """
        check_name(user)
        check_password_rules(password)
        if role not in ROLES:
            raise AccountError("bad_role", f"role must be one of {', '.join(ROLES)}, got {role!r}")
        key = self.keys.account(user)
        if not self.client.hsetnx(key, "password", self.hasher.hash(password)):
            raise AccountError("taken", f"the name {user} is taken")
        self.client.hset(key, mapping={"role": role, "created": repr(float(now))})
        self.client.zadd(self.keys.accounts_index, {user: 0})

    def role(self, user: str) -> str | None:
        """The account's role, or ``None`` when there is no such account."""
        if not USER_RE.match(user or ""):
            return None
        pipe = self.client.pipeline(transaction=False)
        pipe.hexists(self.keys.account(user), "password")
        pipe.hget(self.keys.account(user), "role")
        exists, role = pipe.execute()
        return (_s(role) if role else "reader") if exists else None

    def set_role(self, user: str, role: str) -> None:
        """Makes ``user`` a ``reader`` or an ``editor``.

        Raises:
          AccountError: no such account, or a bad role.
        """
        if role not in ROLES:
            raise AccountError("bad_role", f"role must be one of {', '.join(ROLES)}, got {role!r}")
        if self.role(user) is None:
            raise AccountError("no_account", f"there is no account {user!r}")
        self.client.hset(self.keys.account(user), "role", role)

    def _failures(self, key: str, now: float) -> tuple[int, float | None]:
        pipe = self.client.pipeline(transaction=False)
        since = f"({now - FAILURE_WINDOW_SECONDS!r}"  # exclusive: a failure counts for exactly the window
        pipe.zcount(key, since, "+inf")
        pipe.zrangebyscore(key, since, "+inf", start=0, num=1, withscores=True)
        count, oldest = pipe.execute()
        return int(count), (float(oldest[0][1]) if oldest else None)

    def _limit_keys(self, user: str | None, address: str) -> list[str]:
        account = [self.keys.account_failures(user)] if user is not None else []
        return account + [self.keys.address_failures(address)]

    def _check_limit(self, user: str | None, address: str, now: float) -> None:
        waits = []
        for key in self._limit_keys(user, address):
            count, oldest = self._failures(key, now)
            if count >= MAX_FAILURES and oldest is not None:
                waits.append(oldest + FAILURE_WINDOW_SECONDS - now)
        if waits:
            raise TooManyAttempts(max(1, math.ceil(max(waits))))

    def _record_failure(self, user: str | None, address: str, now: float) -> None:
        pipe = self.client.pipeline(transaction=False)
        for key in self._limit_keys(user, address):
            pipe.zadd(key, {secrets.token_hex(8): now})
            pipe.zremrangebyscore(key, "-inf", now - FAILURE_WINDOW_SECONDS)
            pipe.expire(key, FAILURE_WINDOW_SECONDS)
        pipe.execute()

    def check_password(self, user: str, password: str, address: str, now: float) -> bool:
        """Whether ``password`` is ``user``'s; a wrong one (or no such account) counts as a failure of the
        account name and of ``address`` (a name no account can have, of ``address`` only).

        Raises:
          TooManyAttempts: the name or the address reached the limit (module docstring); the password was
            not looked at.
        """
        from argon2.exceptions import InvalidHashError, VerificationError

        name = user if isinstance(user, str) and USER_RE.match(user) else None
        self._check_limit(name, address, now)
        if name is None or not isinstance(password, str) or len(password) > MAX_PASSWORD:
            self._record_failure(name, address, now)
            return False
        stored, disabled = self.client.hmget(self.keys.account(name), "password", "disabled")
        try:
            ok = self.hasher.verify(_s(stored) if stored else self._dummy, password) and stored is not None
        except (VerificationError, InvalidHashError):
            ok = False
        if ok and disabled is not None:
            return False
        if not ok:
            self._record_failure(name, address, now)
            return False
        self.client.delete(self.keys.account_failures(name))
        if self.hasher.check_needs_rehash(_s(stored)):
            self.client.hset(self.keys.account(name), "password", self.hasher.hash(password))
        return True

    def change_password(self, user: str, old: str, new: str, address: str, now: float) -> None:
        """Replaces ``user``'s password after checking ``old`` (a failure counts toward the limit) and ends
        every session of the account.

        Raises:
          AccountError: ``wrong_password`` or ``bad_password``.
          TooManyAttempts: the limit was reached.
        """
        check_password_rules(new)
        if not self.check_password(user, old, address, now):
            raise AccountError("wrong_password", "the current password is not right")
        self.client.hset(self.keys.account(user), "password", self.hasher.hash(new))
        self.end_all_sessions(user)

    # -- web sessions ----------------------------------------------------------------------------
    def new_session(self, user: str, now: float, ttl: int = SESSION_TTL_SECONDS, replaces: str | None = None) -> str:
        """Starts a web session of ``user`` (a fresh id on every sign-in; ``replaces``, the cookie of a
        previous session in the same browser, ends; past :data:`MAX_SESSIONS` live ones, the oldest ends) and
        returns the cookie value."""
        sid = secrets.token_urlsafe(32)
        key = self.keys.account_sessions(user)
        live = sorted((float(exp), f) for f, exp in self.client.hgetall(key).items())
        # expired ones, and the oldest past MAX_SESSIONS - 1 (a new one is added)
        drop = [f for exp, f in live if exp <= now]
        kept = [f for exp, f in live if exp > now]
        drop += kept[: max(0, len(kept) - (MAX_SESSIONS - 1))]
        pipe = self.client.pipeline(transaction=True)
        if drop:
            pipe.hdel(key, *drop)
        pipe.hset(key, _digest(sid), repr(float(now + ttl)))
        pipe.expire(key, int(ttl))
        pipe.execute()
        if replaces:
            self.end_session(replaces)
        head = base64.urlsafe_b64encode(user.encode("ascii")).rstrip(b"=").decode("ascii")
        return f"{head}.{sid}"

    def session_user(self, cookie: str | None, now: float) -> str | None:
        """The user of a live session cookie, else ``None``."""
        parts = split_session(cookie) if cookie else None
        if parts is None:
            return None
        user, sid = parts
        exp = self.client.hget(self.keys.account_sessions(user), _digest(sid))
        return user if exp is not None and float(exp) > now else None

    def end_session(self, cookie: str | None) -> None:
        """Ends one session (nothing when the cookie is not a session)."""
        parts = split_session(cookie) if cookie else None
        if parts is not None:
            self.client.hdel(self.keys.account_sessions(parts[0]), _digest(parts[1]))

    def end_all_sessions(self, user: str) -> None:
        """Ends every session of ``user`` (sign out everywhere)."""
        self.client.delete(self.keys.account_sessions(user))

    # -- personal API tokens ------------------------------------------------------------------------
    def add_token(self, user: str, name: str, now: float, ttl: int = TOKEN_TTL_SECONDS) -> tuple[str, float]:
        """Lists a new personal token of ``user``; returns ``(token id, expiry)`` for the caller to sign.

        Raises:
          AccountError: ``bad_token_name`` or ``too_many_tokens`` (:data:`MAX_TOKENS` live ones).
        """
        name = (name or "").strip()
        if not TOKEN_NAME_RE.match(name):
            raise AccountError("bad_token_name", "a token name is 1 to 60 printable characters")
        if len(self.tokens(user, now)) >= MAX_TOKENS:
            raise AccountError("too_many_tokens", f"at most {MAX_TOKENS} tokens; revoke one first")
        jti = secrets.token_hex(8)
        doc = {"name": name, "created": float(now), "expires": float(now + ttl)}
        self.client.hset(self.keys.account_tokens(user), jti, json.dumps(doc, separators=(",", ":")))
        return jti, float(now + ttl)

    def tokens(self, user: str, now: float) -> list[dict]:
        """Live tokens of ``user``: ``[{"id", "name", "created", "expires"}]``, newest first (expired ones are
        removed)."""
        key = self.keys.account_tokens(user)
        out, expired = [], []
        for jti, raw in self.client.hgetall(key).items():
            doc = json.loads(raw)
            if doc["expires"] <= now:
                expired.append(jti)
            else:
                out.append(dict(doc, id=_s(jti)))
        if expired:
            self.client.hdel(key, *expired)
        return sorted(out, key=lambda d: (-d["created"], d["id"]))

    def revoke_token(self, user: str, token_id: str) -> bool:
        """Revokes one of ``user``'s tokens; ``False`` when it was not listed."""
        return bool(self.client.hdel(self.keys.account_tokens(user), str(token_id)))

    def token_listed(self, user: str, token_id: str, now: float) -> bool:
        """Whether ``token_id`` is a live personal token of ``user`` and the account is not disabled."""
        pipe = self.client.pipeline(transaction=False)  # one slot: the account's keys share its tag
        pipe.hget(self.keys.account_tokens(user), str(token_id))
        pipe.hexists(self.keys.account(user), "disabled")
        entry, disabled = pipe.execute()
        return token_live(entry, now) and not disabled

    # -- the editors' readers admin ---------------------------------------------------------------------
    def set_disabled(self, user: str, disabled: bool, now: float) -> bool:
        """Disables (ending every session) or enables ``user``; returns whether anything changed.

        Raises:
          AccountError: ``no_account``.
        """
        if self.role(user) is None:
            raise AccountError("no_account", f"there is no account {user!r}")
        key = self.keys.account(user)
        if not disabled:
            return bool(self.client.hdel(key, "disabled"))
        changed = bool(self.client.hsetnx(key, "disabled", repr(float(now))))
        self.end_all_sessions(user)
        return changed

    def _ensure_indexed(self) -> None:
        """Adds the accounts made before the name index existed to it, once (a ``SCAN`` of the account keys; an
        account hash is the one with a ``password`` field)."""
        if getattr(self, "_indexed", False) or self.client.exists(self.keys.accounts_indexed):
            self._indexed = True
            return
        head = self.keys.account_pattern()[: -len("{r*}:account:*")]
        found = []
        for key in self.client.scan_iter(match=self.keys.account_pattern(), count=1000):
            key = _s(key)
            tag_end = key.find("}:account:", len(head))
            name = key[tag_end + len("}:account:") :] if tag_end >= 0 else ""
            if USER_RE.match(name) and key == self.keys.account(name):
                found.append(name)
        pipe = self.client.pipeline(transaction=False)
        for name in found:
            pipe.hexists(self.keys.account(name), "password")
        names = [n for n, ok in zip(found, pipe.execute() if found else [], strict=True) if ok]
        if names:
            self.client.zadd(self.keys.accounts_index, dict.fromkeys(names, 0))
        self.client.set(self.keys.accounts_indexed, "1")
        self._indexed = True

    def count(self) -> int:
        """Number of accounts (readers and editors)."""
        self._ensure_indexed()
        return int(self.client.zcard(self.keys.accounts_index))

    def search(self, prefix: str = "", offset: int = 0, limit: int = 50) -> list[dict]:
        """Accounts whose name starts with ``prefix`` (exact case), in name order, ``limit`` from ``offset``:
        ``[{"name", "role", "created" (epoch s), "disabled" (epoch s or None)}]``."""
        self._ensure_indexed()
        lo, hi = (f"[{prefix}", f"[{prefix}\xff") if prefix else ("-", "+")
        names = [_s(n) for n in self.client.zrangebylex(self.keys.accounts_index, lo, hi, start=offset, num=limit)]
        pipe = self.client.pipeline(transaction=False)
        for n in names:
            pipe.hmget(self.keys.account(n), "role", "created", "disabled")
        out = []
        for n, (role, created, disabled) in zip(names, pipe.execute() if names else [], strict=True):
            out.append(
                {
                    "name": n,
                    "role": _s(role) if role else "reader",
                    "created": float(created) if created else None,
                    "disabled": float(disabled) if disabled else None,
                }
            )
        return out

    # -- deletion --------------------------------------------------------------------------------------
    def delete(self, user: str, now: float) -> int:
        """Deletes ``user``'s account and reader data (module docstring); returns the keys and fields removed."""
        shard = event_shard(user)
        stone = json.dumps({"time": float(now), "last_event": last_event_id(self.client, self.keys, shard)})
        self.client.hset(self.keys.deleted_readers(shard), user, stone)  # first: events are excluded
        model_fields = []
        for field in self.client.hkeys(self.keys.model_manifest):
            name, _, version = _s(field).partition(":")
            if name in PER_READER_MODELS:
                model_fields.append(self.keys.model_bucket(name, version, reader_bucket(user)))
        pipe = self.client.pipeline(transaction=False)
        for key in model_fields:
            pipe.hdel(key, user)
        pipe.zrem(self.keys.active_users(shard), user)
        pipe.zrem(self.keys.accounts_index, user)
        owned = self.keys.reader_owned(user)
        for key in owned[1:]:
            pipe.delete(key)
        pipe.delete(owned[0])  # the account itself last: a crash before leaves a reader who can still retry
        return sum(int(n) for n in pipe.execute())
