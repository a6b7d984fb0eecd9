"""The newsflow HTTP API (Starlette ASGI app).

Endpoints (all JSON; schema at ``GET /openapi.json``):

* ``GET /v1/top?edition=&limit=&cursor=`` — the edition's precomputed feed (``global`` by default), a page
  at a time: ``next_cursor`` of an answer is the ``cursor`` of the next page (:mod:`newsflow.serving.paging`);
  on ``/v1/top``, ``/v1/topics/{topic}`` and ``/v1/trending`` an optional bearer token of a reader who
  blocks topics or outlets removes those stories (answered ``private``);
* ``GET /v1/topics/{topic}?limit=&cursor=`` — a topic's precomputed feed, paged the same way;
* ``GET /v1/trending?limit=`` — latest trending stories/entities/topics and the breaking set (one page: a
  ``cursor`` is a 400);
* ``GET /v1/stories/{story_id}`` — full coverage: every source, independent reports
  (near-duplicate groups) apart from their syndicated copies;
* ``GET /v1/feed?edition=&limit=&cursor=`` — the reader's personal feed, paged like the feeds; the reader comes from a
  signed bearer token (:mod:`newsflow.serving.tokens`), never from a parameter;
* ``POST /v1/events`` — impression/click/dwell events (validated, appended to a Redis stream);
* ``GET/PUT /v1/me/preferences`` — the reader's followed and blocked topics and outlets, preferred lead
  outlets, removed interests and muted words (:mod:`newsflow.serving.preferences`; bearer token);
* ``GET /v1/me/saved``, ``PUT/DELETE /v1/me/saved/{story_id}``, ``GET /v1/me/read``,
  ``PUT/DELETE /v1/me/read/{story_id}`` — saved stories and read marks (:mod:`newsflow.serving.me`);
  a ``click`` event marks its story read too. With a bearer token, ``/v1/top``, ``/v1/topics/{t}``,
  ``/v1/trending`` and ``/v1/stories/{id}`` answer as the reader sees them
  (:mod:`newsflow.serving.reader_view`: blocks, muted words, ``read``/``saved`` marks, ``?hide_read=1``,
  the preferred lead), and ``/v1/feed`` never repeats a read story unless it changed;
* ``GET /v1/search?q=`` — full-text search, results grouped by story (:mod:`newsflow.serving.search`), and
  RSS/Atom feeds of top stories, topics, outlets and searches under ``/feeds/`` (:mod:`newsflow.serving.feeds_out`);
* ``GET /metrics`` — Prometheus text format: request latency by route template and status class, Redis
  errors (:mod:`newsflow.serving.metrics`);
* the reader web UI (HTML, :mod:`newsflow.serving.web`): ``/``, ``/stories/{id}``, ``/topics``, ``/trending``,
  ``/sources/{outlet}``, ``/for-you``, preferences, and the account pages (register, sign in, ``/account``,
  the editors' ``/admin``: :mod:`newsflow.serving.accounts_web`);
* ``/v1/admin/sources`` — the sources registry for editors' tokens (:mod:`newsflow.serving.admin`).

Who a request acts for: the API reads only ``Authorization: Bearer`` tokens (:meth:`Api._user`: a reader's
personal token, looked up in the account's token list, or an operator token signed with the secret); the
pages read only the session cookie (:meth:`newsflow.serving.web.Web.session`). Neither accepts the other.
Forwarded headers are believed only from ``ServingConfig.trusted_proxies`` (uvicorn's
``ProxyHeadersMiddleware``), and no redirect takes its host from the request: a trailing-slash address is
redirected to the relative path without it.

This module holds the routes, parameter validation and the app factory; the personal feed is
:mod:`newsflow.serving.personal`, caching headers and ETags are :mod:`newsflow.serving.http_cache`, degraded
mode (snapshots, the Redis circuit breaker) is :mod:`newsflow.serving.resilience`, and page assembly is
:mod:`newsflow.serving.pages`.

Redis clients: the synchronous client given to :func:`create_app`, and ONE ``redis.asyncio`` client for
the same server, opened in the app's lifespan (:func:`newsflow.runtime.redis_conn.connect_async`, URL from
:func:`newsflow.serving.resilience.async_url`) and closed at shutdown. Both reconnect by themselves when
Redis answers again at the same address.

Concurrency: handlers that touch Redis through the synchronous client are plain functions, which Starlette
runs in its thread pool, so a slow Redis never blocks the event loop; ``POST /v1/events`` reads its body on
the loop and appends to Redis in the thread pool. ``GET /v1/feed`` and ``/healthz`` await the asyncio client
on the loop (no worker thread); only a breaking-set refresh or a personal feed that must be read or built
another way goes to the thread pool. Without the asyncio client (the lifespan did not run, or the
synchronous client has no URL, e.g. a Redis Cluster client) they use the thread pool.

Health: ``GET /healthz`` answers 200 ``{"redis": true}`` while Redis answers ``PING``, else 503
``{"redis": false}``; the process keeps serving (degraded) meanwhile and recovers by itself.

Caching: public pages send ``Cache-Control: public, max-age=…, s-maxage=…`` (CDN-cacheable),
personal ones ``private, no-store``; every GET has a strong ``ETag`` and answers ``If-None-Match``
with ``304``. Public feeds are also cached in-process for ``local_cache_seconds`` (1 s), well
under the feeds' 5-minute TTL, and a reader's ``/v1/feed`` answer for ``personal_cache_seconds`` (1 s;
requests for an answer being made wait for it, :class:`newsflow.serving.personal.RecentPages`).

Degradation: when Redis is unreachable or a feed is missing, public feeds (and the personal
feed) are served from the last good copy the process saw (every edition feed is snapshotted
at startup, and each feed again whenever a newer one is read), kept in memory and in
``snapshot_dir`` (so it survives restarts), with ``X-Newsflow-Stale: 1`` and
``X-Newsflow-Stale-Reason``; with no snapshot either, the answer is an empty list (200,
stale). Unknown readers get the cold-start feed; nothing answers 500 for a missing user
or an empty feed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Match, Route
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from newsflow.core.ranking.feeds import GLOBAL_EDITION, FeedConfig
from newsflow.core.ranking.front_page import TRENDING_LOOKBACK_S, entity_chips, trending_stories
from newsflow.runtime.redis_conn import connect_async
from newsflow.serving.admin import AdminActions, admin_mount
from newsflow.serving.feeds_out import feed_routes
from newsflow.serving.http_body import BodyTooLarge, read_capped
from newsflow.serving.http_cache import (
    STALE_REASON_HEADER,
    CompressResponses,
    LocalCache,
    cache_headers,
    cache_hit_on_loop,
    cached_answer,
    conditional_body,
    conditional_json,
    json_bytes,
    strong_etag,
)
from newsflow.serving.me import mark_read_now, me_routes, personal_coverage
from newsflow.serving.metrics import MetricsMiddleware, metrics_route
from newsflow.serving.openapi import openapi_schema
from newsflow.serving.pages import UnknownTopic, coverage_page, feed_page, topic_feed_state, trending_page
from newsflow.serving.paging import BadCursor, Cursor, decode_cursor
from newsflow.serving.personal import PersonalFeeds
from newsflow.serving.pictures import picture_routes
from newsflow.serving.preferences import echo, merge_preferences, normalize_topic, reader_preferences
from newsflow.serving.reader_view import ReaderView, hide_read_param
from newsflow.serving.resilience import (
    REDIS_ERRORS,
    RedisBreaker,
    SnapshotStore,
    async_url,
    feed_with_fallback,
    serving_client,
)
from newsflow.serving.search import Searcher, search_routes
from newsflow.serving.tokens import TokenError, token_claims
from newsflow.serving.web import PageError, web_routes
from newsflow.storage.accounts import AccountStore, token_live
from newsflow.storage.events import (
    MAX_EVENTS_PER_REQUEST,
    MAX_PENDING_EVENTS,
    EventBacklogFull,
    append_events,
    is_valid_story_id,
    validate_event,
)
from newsflow.storage.feed_page import (
    drop_user_feed,
    page_body,
)
from newsflow.storage.keys import Keys
from newsflow.storage.ranking import EXTRA_PREFERENCE_FIELDS, RankingStore, extras_from_values, user_from_hash
from newsflow.storage.reader_state import ReaderStateStore

__all__ = ["ApiError", "ServingConfig", "create_app", "serving_client"]

log = logging.getLogger("newsflow.serving")

# \Z, not $: "$" also matches before a final newline (edition=en%0A would pass)
EDITION_RE = re.compile(r"(global|[a-z]{2,3}(-[a-z0-9]{2,8})?)\Z")
LIMIT_RE = re.compile(r"[0-9]{1,3}\Z")  # ASCII digits only: str.isdigit() accepts "²"
MAX_LIMIT = 100
MAX_BODY_BYTES = 64 * 1024


@dataclass(frozen=True)
class ServingConfig:
    """API settings.

    Attributes:
      token_secret: HMAC key for reader tokens (≥ 32 bytes).
      snapshot_dir: directory for last-good feed snapshots.
      max_age: browser cache seconds for public pages.
      s_maxage: shared (CDN) cache seconds for public pages.
      stale_s_maxage: CDN seconds for a stale (degraded) answer.
      local_cache_seconds: in-process cache of public pages (0 disables).
      default_limit: stories per page when ``limit`` is absent.
      redis_backoff_seconds: after a Redis error, requests skip Redis (answer from
        snapshots at once) for this long instead of each waiting on a dead server.
      feed: feed-building knobs for personal feeds built on request.
      clock: returns the current UTC epoch seconds (tokens; injectable for tests).
      ranking_clock: the serving clock: the time personal feeds are scored and breaking stories are
        read at, and the time ``POST /v1/events`` stamps events with (their received time, and their
        event time when the client sends none; a client ``time`` is checked against it), so the
        nightly jobs see events on the same clock the stories were ranked on. ``None`` means
        ``clock``. ``newsflow serve --now latest`` (the default after ``newsflow demo``) sets it to
        the replayed corpus' time, advancing with the wall clock, so a historical corpus does not
        decay to zero and ``newsflow nightly --date <replay day>`` finds the readers' events.
      keys: the Redis key layout (:class:`newsflow.storage.keys.Keys`) the API reads and writes.
      personal_cache_seconds: how long a reader's ``/v1/feed`` answer (body and ETag, per edition and limit) is
        kept in-process (:class:`newsflow.serving.personal.RecentPages`; 0 disables): a reader asking again
        meanwhile gets it without a Redis round trip; a preference change through this process is seen at
        once, any other change at most this long later.
      max_pending_events: unflushed events the stream may hold before ``POST /v1/events`` answers 503
        ``backlog_full`` (:data:`newsflow.storage.events.MAX_PENDING_EVENTS`).
      trusted_proxies: addresses of reverse proxies whose ``X-Forwarded-Proto`` / ``X-Forwarded-For`` are
        believed (uvicorn's ``ProxyHeadersMiddleware``; ``NEWSFLOW_TRUSTED_PROXIES``): behind one, the scheme
        it reports decides whether cookies are ``Secure`` and the address it reports is the one the sign-in
        limit counts. Empty: no forwarded header is believed.
      password_hasher: the ``argon2.PasswordHasher`` of accounts (``None``:
        :func:`newsflow.storage.accounts.default_hasher`).
      admin_token: the optional shared bearer token of the admin API (``NEWSFLOW_ADMIN_TOKEN``); ``None`` reads
        the setting; editors' personal tokens are accepted either way.
      discover_feeds: the admin's "add by home page": ``url -> {"found", "tried", "blocked"}``, the crawl tier's
        polite feed discovery, injected by ``newsflow serve`` (serving does not import the crawler); ``None``:
        the admin answers 503 ``not_configured`` to it (:class:`newsflow.serving.admin.AdminActions`).
      host_check: ``url -> (problem, warning)``, the crawl tier's registration-time address check run on every
        feed the admin registers (``newsflow.crawler.safety.RegistrationHostCheck``); ``None`` resolves nothing.
      search_index: the full-text search index file (:mod:`newsflow.serving.search`); ``None``: search answers
        503 ``search_unavailable``.
      thumbnail_dir: the thumbnail store ``/img/<name>`` answers from (local directory or ``gs://``;
        :mod:`newsflow.serving.pictures`); ``None``: no pictures (every ``/img/`` name is a 404).
    """

    token_secret: bytes
    snapshot_dir: str
    max_age: int = 30
    s_maxage: int = 60
    stale_s_maxage: int = 10
    local_cache_seconds: float = 1.0
    default_limit: int = 20
    redis_backoff_seconds: float = 2.0
    feed: FeedConfig = field(default_factory=FeedConfig)
    clock: Callable[[], float] = time.time
    ranking_clock: Callable[[], float] | None = None
    keys: Keys = Keys()
    personal_cache_seconds: float = 1.0
    max_pending_events: int = MAX_PENDING_EVENTS
    trusted_proxies: tuple[str, ...] = ()
    password_hasher: object | None = None
    admin_token: str | None = None
    discover_feeds: Callable[[str], dict] | None = None
    host_check: Callable[[str], tuple[str | None, str | None]] | None = None
    search_index: str | None = None
    thumbnail_dir: str | None = None


MIN_MENU_EDITION_STORIES = 5
"""Stories an edition's pool needs before the web's edition menu offers it (:meth:`Api.menu_editions`)."""


class ApiError(Exception):
    """A 4xx/5xx answer with a machine-readable code."""

    def __init__(self, status: int, code: str, message: str, headers: dict | None = None):
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers or {}


def _refused(reason: str) -> ApiError:
    """401 ``invalid_token`` for a bearer token refused for ``reason``."""
    return ApiError(
        401,
        "invalid_token",
        f"token refused: {reason}",
        {"WWW-Authenticate": f'Bearer realm="newsflow", error="invalid_token", error_description="{reason}"'},
    )


class Api:
    """Request handlers over one Redis client; see the module docstring."""

    def __init__(self, client, config: ServingConfig):
        self.store = RankingStore(client, config.keys)
        self.accounts = AccountStore(client, config.keys, config.password_hasher)
        self.config = config
        self.snapshots = SnapshotStore(config.snapshot_dir)
        self.cache = LocalCache(config.local_cache_seconds)
        self.breaker = RedisBreaker(config.redis_backoff_seconds)
        self._ranking_now = config.ranking_clock or config.clock
        self.personal = PersonalFeeds(
            self.store,
            config.feed,
            self.breaker,
            self.snapshots,
            self._ranking_now,
            config.local_cache_seconds,
            config.personal_cache_seconds,
        )
        self.reader_state = ReaderStateStore(client, config.keys)
        self.search = Searcher(config.search_index)
        self.redis_url = async_url(client)  # the asyncio client's server (None: thread pool only)
        self.aredis = None  # the redis.asyncio client while the app's lifespan runs
        self._private_headers = cache_headers("private", config.max_age, config.s_maxage, config.stale_s_maxage)
        self._names_lock = threading.Lock()
        self._names: dict[str, tuple[float, list[str]]] = {}
        self._names_known: dict[str, bool] = {}  # whether the names came from Redis or a snapshot

    # -- circuit breaker: one failed call makes the next ones fail fast for a while ------
    def _guard(self) -> None:
        self.breaker.guard()

    def _mark_down(self) -> None:
        self.breaker.mark_down()

    # -- helpers ------------------------------------------------------------------------
    def feed_names(self, kind: str) -> list[str]:
        """Edition or topic names that have a precomputed feed or a snapshot of one, sorted (a SCAN, cached for
        30 s)."""
        with self._names_lock:
            hit = self._names.get(kind)
        if hit and hit[0] > time.monotonic():
            return hit[1]
        names: set[str] = set()
        try:
            self._guard()
            keys = self.store.keys
            for key in self.store.client.scan_iter(match=keys.feed_pattern(kind), count=500):
                name = keys.feed_name_of(kind, key)
                if name:
                    names.add(name)
            known = True
        except REDIS_ERRORS:
            self._mark_down()
            known = False
        # a feed with a last good copy exists too (served stale while its key is missing or Redis is down)
        names |= {n.split(":", 1)[1] for n in self.snapshots.names() if n.startswith(kind + ":")}
        known = known or bool(names)
        out = sorted(names)
        with self._names_lock:
            self._names[kind] = (time.monotonic() + 30.0, out)
            self._names_known[kind] = known
        return out

    def editions(self) -> list[str]:
        """The editions a reader can ask for: ``global`` and every language with a precomputed feed."""
        return sorted(set(self.feed_names("edition")) | {GLOBAL_EDITION})

    def menu_editions(self, current: str) -> list[str]:
        """The editions the web's menu offers: ``global``, ``current`` and each edition whose candidate pool holds
        at least :data:`MIN_MENU_EDITION_STORIES` stories (a language seen in one or two stories, often a
        misdetected headline, stays reachable by URL but is not offered). Pool sizes are read with one pipelined
        ``ZCARD`` per edition and kept with the names (30 s); with Redis down, every edition is offered."""
        names = self.editions()
        with self._names_lock:
            hit = self._names.get("menu")
        if hit is None or hit[0] <= time.monotonic() or hit[2] != names:
            try:
                self._guard()
                pipe = self.store.client.pipeline(transaction=False)
                for n in names:
                    pipe.zcard(self.store.keys.pool("edition", n))
                sizes = dict(zip(names, pipe.execute(), strict=True))
                big = [n for n in names if n == GLOBAL_EDITION or int(sizes[n]) >= MIN_MENU_EDITION_STORIES]
            except REDIS_ERRORS:
                self._mark_down()
                big = names
            hit = (time.monotonic() + 30.0, big, names)
            with self._names_lock:
                self._names["menu"] = hit
        return [n for n in names if n in hit[1] or n == current]

    @staticmethod
    def _cursor(request: Request) -> Cursor | None:
        """The ``cursor`` parameter (:mod:`newsflow.serving.paging`).

        Raises:
          ApiError: 400 ``bad_cursor`` when it is not a cursor this server issued.
        """
        try:
            return decode_cursor(request.query_params.get("cursor"))
        except BadCursor as e:
            raise ApiError(400, "bad_cursor", str(e)) from None

    def _limit(self, request: Request) -> int:
        raw = request.query_params.get("limit")
        if raw is None:
            return self.config.default_limit
        if not LIMIT_RE.match(raw) or not 1 <= int(raw) <= MAX_LIMIT:
            raise ApiError(400, "bad_parameter", f"limit must be an integer in [1, {MAX_LIMIT}], got {raw!r}")
        return int(raw)

    def _edition(self, request: Request, default: str = GLOBAL_EDITION) -> str:
        """The ``edition`` parameter, lower case (``default`` when absent).

        Raises:
          ApiError: 400 when it is not ``global`` or a language code, or names no edition (an edition
            exists when the ranker has built its feed, :meth:`editions`; the message lists them). With no
            edition known at all (Redis down and nothing snapshotted) any well-formed code passes (and is
            served the global snapshot, marked stale).
        """
        raw = request.query_params.get("edition")
        if raw is None or raw == "":
            return default
        ed = raw.lower() if raw.isascii() else ""  # ASCII first: "\u212ao" would lower-case to "ko"
        if not EDITION_RE.match(ed):
            raise ApiError(
                400,
                "bad_parameter",
                f"edition must be 'global' or a language code like 'en' or 'en-us', got {echo(raw)}",
            )
        valid = self.editions()
        if ed not in valid and self._names_known.get("edition", True):
            raise ApiError(400, "unknown_edition", f"no edition {ed!r}; editions: {', '.join(valid)}")
        return ed

    def _respond(
        self, request: Request, payload: dict, cache: str, stale_reason: str = "", conditional: bool = True
    ) -> Response:
        """JSON answer with caching headers; ``304`` when ``conditional`` and ``If-None-Match`` matches."""
        headers = cache_headers(
            cache, self.config.max_age, self.config.s_maxage, self.config.stale_s_maxage, stale_reason
        )
        return conditional_json(request.headers.get("if-none-match", "") if conditional else "", payload, headers)

    def _user(self, request: Request) -> str:
        """The reader a JSON API request acts for: the subject of its bearer token (:meth:`_claims`). The one
        way the API identifies a reader (:meth:`_user_async` is the same on the event loop); web pages use
        :meth:`newsflow.serving.web.Web.session`.

        Raises:
          ApiError: 401 without a valid token, 503 when a personal token cannot be looked up.
        """
        return self._claims(request)[0]

    async def _user_async(self, request: Request) -> str:
        """:meth:`_user` for handlers on the event loop: a personal token is looked up through the asyncio
        Redis client (else in the thread pool), so a slow Redis never blocks the loop."""
        user, jti = self._signed(request)
        if jti is None:
            return user
        if self.aredis is None:
            return await run_in_threadpool(self._user, request)
        try:
            self._guard()
            pipe = self.aredis.pipeline(transaction=False)  # one slot: the account's keys share its tag
            pipe.hget(self.store.keys.account_tokens(user), jti)
            pipe.hexists(self.store.keys.account(user), "disabled")
            entry, disabled = await pipe.execute()
        except REDIS_ERRORS as e:
            raise self._lookup_down(e) from None
        if not token_live(entry, self.config.clock()) or disabled:
            raise _refused("revoked")
        return user

    def _claims(self, request: Request) -> tuple[str, str | None]:
        """``(reader, token id)`` of the request's bearer token (:meth:`_signed`); a personal token (with a token
        id) must still be listed in the account (:meth:`newsflow.storage.accounts.AccountStore.token_listed`):
        revoked, expired or of a deleted account, it is a 401."""
        user, jti = self._signed(request)
        if jti is not None:
            try:
                self._guard()
                listed = self.accounts.token_listed(user, jti, self.config.clock())
            except REDIS_ERRORS as e:
                raise self._lookup_down(e) from None
            if not listed:
                raise _refused("revoked")
        return user, jti

    def _lookup_down(self, e: Exception) -> ApiError:
        self._mark_down()
        return ApiError(503, "unavailable", f"token list unavailable: {type(e).__name__}", {"Retry-After": "5"})

    def _signed(self, request: Request) -> tuple[str, str | None]:
        """``(reader, token id or None)`` of the request's ``Authorization: Bearer`` token, its signature and
        times checked (:func:`newsflow.serving.tokens.token_claims`), not yet looked up. A session cookie is
        never read here.

        Raises:
          ApiError: 401 (missing, malformed, more than one header, bad signature, expired).
        """
        # one pass over the raw headers (ASGI names are lower-case bytes), on every personal request
        found = [v for k, v in request.scope["headers"] if k == b"authorization"]
        if len(found) > 1:  # a singleton field (RFC 9110 5.3): which one?
            raise ApiError(
                401,
                "invalid_token",
                "token refused: malformed (more than one Authorization header)",
                {"WWW-Authenticate": 'Bearer realm="newsflow", error="invalid_request"'},
            )
        auth = found[0].decode("latin-1") if found else ""
        if not auth.lower().startswith("bearer "):
            raise ApiError(
                401,
                "missing_token",
                "send Authorization: Bearer <token>",
                {"WWW-Authenticate": 'Bearer realm="newsflow"'},
            )
        try:
            return token_claims(auth[7:].strip(), self.config.token_secret, self.config.clock())
        except TokenError as e:
            raise _refused(e.reason) from None

    def editor_token(self, request: Request) -> str | None:
        """The editor whose personal token the request carries, else ``None`` (the admin API's check; blocking
        Redis calls: run it in the thread pool). Operator tokens without a token id never are."""
        try:
            user, jti = self._claims(request)
        except ApiError:
            return None
        return user if jti is not None and self.accounts.role(user) == "editor" else None

    def reader_view(self, user: str, hide_read: bool = False) -> ReaderView:
        """The reader's :class:`~newsflow.serving.reader_view.ReaderView`: profile and preferences, read marks and
        saved stories in one round trip (a non-transactional pipeline: the keys may live in two slots). Redis
        errors propagate."""
        h, reads, saved = self.reader_state.view_state(user)
        extras = extras_from_values([h.get(f.encode()) for f in EXTRA_PREFERENCE_FIELDS])
        return ReaderView.of(user_from_hash(user, h), extras, reads, saved, hide_read)

    def _reader_view_of(self, request: Request) -> ReaderView | None:
        """The :meth:`reader_view` of the bearer-token reader of a public endpoint when their page differs from
        the public one (something blocked, muted, read or saved, or ``?hide_read=1``), else ``None`` (no token,
        or nothing personal: the shared CDN-cacheable page). An invalid token is a 401; with Redis down the
        reader's state cannot be read and the public page is served."""
        if not request.headers.get("authorization"):
            return None
        user = self._user(request)
        try:
            self._guard()
            view = self.reader_view(user, hide_read_param(request.query_params))
        except REDIS_ERRORS:
            self._mark_down()
            return None
        return view if (view.personal or view.hide_read) else None

    def _for_reader(self, request: Request, response: Response, view: ReaderView) -> Response:
        """A public JSON page (a ``200`` built unconditionally) as the reader sees it: blocked and muted stories
        removed, read ones marked ``read`` (removed with ``?hide_read=1``), saved ones ``saved`` (``stories``,
        ``breaking``), blocked and muted trending ``topics`` and muted ``entities`` removed; answered
        ``private``."""
        payload = json.loads(response.body)
        for name in ("stories", "breaking"):
            if isinstance(payload.get(name), list):
                payload[name] = view.stories(payload[name])
        if isinstance(payload.get("topics"), list):
            payload["topics"] = view.topics(payload["topics"])
        if isinstance(payload.get("entities"), list):
            payload["entities"] = view.entities(payload["entities"])
        if "count" in payload:
            payload["count"] = len(payload["stories"])
        return self._respond(request, payload, "private", response.headers.get(STALE_REASON_HEADER.lower(), ""))

    def public_endpoint(self, key_of: Callable[[Request], str], handler: Callable[[Request], Response]):
        """:func:`~newsflow.serving.http_cache.cache_hit_on_loop` for a public JSON ``GET``: a request without a
        bearer token whose page ``key_of(request)`` is in the in-process cache is answered on the event
        loop; any other runs ``handler`` (which caches under ``key_of(request)``) in the worker pool."""
        return cache_hit_on_loop(
            self.cache, lambda request: None if request.headers.get("authorization") else key_of(request), handler
        )

    def _top_key(self, request: Request) -> str:  # ?hide_read= only matters with a token (never cached)
        return f"top|{self._edition(request)}|{self._limit(request)}|{self._cursor_key(request)}"

    def _topic_key(self, request: Request) -> str:
        return f"topic|{self._topic_param(request)}|{self._limit(request)}|{self._cursor_key(request)}"

    def _cursor_key(self, request: Request) -> str:
        """The validated cursor as a cache-key part (``""`` for the first page)."""
        cursor = self._cursor(request)
        return "" if cursor is None else f"{cursor.offset}:{cursor.last_id}"

    def _trending_key(self, request: Request) -> str:
        return f"trending|{self._limit(request)}"

    def _cached(self, request: Request, key: str, build: Callable[[], Response]) -> Response:
        """In-process cache of public ``200`` responses (:class:`~newsflow.serving.http_cache.LocalCache`),
        compressed once per version (:func:`~newsflow.serving.http_cache.cached_answer`)."""
        return cached_answer(self.cache, key, build, request)

    def _feed_with_fallback(self, name: str, key: str, fallback: str) -> tuple[dict | None, str]:
        return feed_with_fallback(self.store.read_feed_raw, self.breaker, self.snapshots, name, key, fallback)

    # -- handlers -----------------------------------------------------------------------
    def top(self, request: Request) -> Response:
        edition, limit, cursor = self._edition(request), self._limit(request), self._cursor(request)

        def build(conditional: bool = True, view: ReaderView | None = None) -> Response:
            name = f"edition:{edition}"
            doc, stale = self._feed_with_fallback(
                name, self.store.keys.feed("edition", edition), f"edition:{GLOBAL_EDITION}"
            )
            page = feed_page("edition", edition, doc, limit, stale, cursor, view.stories if view else None)
            return self._respond(request, page, "public", stale, conditional)

        view = self._reader_view_of(request)
        if view is not None:  # the reader's rules filter the feed before it is paged
            return self._for_reader(request, build(False, view), view)
        return self._cached(request, self._top_key(request), build)

    @staticmethod
    def _topic_param(request: Request) -> str:
        """The ``{topic}`` path parameter as the web's topic pages read it
        (:func:`newsflow.serving.preferences.normalize_topic`: stripped, lower case).

        Raises:
          ApiError: 400 when it is not a topic label.
        """
        try:
            return normalize_topic(request.path_params["topic"])
        except ValueError as e:
            raise ApiError(400, "bad_parameter", str(e)) from None

    def topic_feed(
        self, topic: str, limit: int, cursor: Cursor | None = None, view: ReaderView | None = None
    ) -> tuple[dict, str]:
        """A topic's feed page and its stale reason (:func:`newsflow.serving.pages.topic_feed_state`), shared by
        ``/v1/topics/{topic}`` and the web's topic page; with a reader's ``view`` its rules filter the feed
        before it is paged.

        Raises:
          UnknownTopic: the topic is unknown (a 404).
        """
        doc, stale = self._feed_with_fallback(f"topic:{topic}", self.store.keys.feed("topic", topic), "")
        state = topic_feed_state(topic, doc, stale)
        if state == "unknown":
            raise UnknownTopic(topic)
        stale = "" if state == "empty" else stale
        return feed_page("topic", topic, doc, limit, stale, cursor, view.stories if view else None), stale

    def topic(self, request: Request) -> Response:
        topic = self._topic_param(request)
        limit, cursor = self._limit(request), self._cursor(request)

        def build(conditional: bool = True, view: ReaderView | None = None) -> Response:
            try:
                page, stale = self.topic_feed(topic, limit, cursor, view)
            except UnknownTopic as e:
                raise ApiError(404, "not_found", str(e)) from None
            return self._respond(request, page, "public", stale, conditional)

        view = self._reader_view_of(request)
        if view is not None:
            return self._for_reader(request, build(False, view), view)
        return self._cached(request, self._topic_key(request), build)

    def trending_parts(self, now: float, limit: int) -> tuple[float | None, list, list, list]:
        """``(latest window end, [(StoryRecord, new articles)], entity chips, [(topic, new articles)])`` at
        ``now``: :func:`newsflow.core.ranking.front_page.trending_stories` over the windows of the last
        ``TRENDING_LOOKBACK_S``, newest first, read until ``limit`` stories are listed; the chips of the
        latest entity window (:func:`~newsflow.core.ranking.front_page.entity_chips`). Redis errors propagate."""
        ends = self.store.recent_windows("story", now, now - TRENDING_LOOKBACK_S)
        windows: list[list[tuple[str, int]]] = []
        recs: dict = {}
        stories: list = []
        for end in ends:
            rows = self.store.window_rows("story", end, 4 * limit)
            windows.append(rows)
            missing = [sid for sid, _ in rows if sid not in recs]
            while missing:
                got = [r for r in self.store.get_stories(missing) if r is not None]
                recs.update({r.story_id: r for r in got})
                missing = [r.merged_into for r in got if r.merged_into and r.merged_into not in recs]
            stories = trending_stories(windows, recs, k=limit)
            if len(stories) >= limit:
                break
        _, entity_rows = self.store.latest_trending("entity", 10 * limit, now)
        _, topic_rows = self.store.latest_trending("topic", limit, now)
        return (ends[0] if ends else None), stories, entity_chips(entity_rows, limit), topic_rows

    def trending(self, request: Request) -> Response:
        limit = self._limit(request)
        if "cursor" in request.query_params:  # one list of the moment, not a feed: no later page to point at
            raise ApiError(400, "bad_parameter", "/v1/trending is one page (limit= sets its size); it takes no cursor")

        def build(conditional: bool = True) -> Response:
            now = self._ranking_now()
            try:
                self._guard()
                end, stories, chips, topic_rows = self.trending_parts(now, limit)
                breaking, _ = self._breaking_items(now)
                recs = {s.story_id: s for s in self.store.get_stories(list(breaking)) if s is not None}
            except REDIS_ERRORS as e:
                self._mark_down()
                log.warning("redis unavailable for trending: %s", e)
                doc = self.snapshots.get("trending") or {
                    "window_end": None,
                    "stories": [],
                    "entities": [],
                    "topics": [],
                    "breaking": [],
                }
                return self._respond(request, dict(doc, stale=True), "public", "redis-unavailable", conditional)
            doc = trending_page(end, stories, chips, topic_rows, breaking, recs)
            self.snapshots.put("trending", dict(doc, generated_at=end))
            return self._respond(request, dict(doc, stale=False), "public", "", conditional)

        view = self._reader_view_of(request)
        if view is not None:
            return self._for_reader(request, build(False), view)
        return self._cached(request, self._trending_key(request), build)

    def story(self, request: Request) -> Response:
        sid = request.path_params["story_id"]
        if not is_valid_story_id(sid):
            raise ApiError(400, "bad_parameter", f"story id must be 1-128 chars of [A-Za-z0-9_.:-], got {sid!r}")
        try:
            self._guard()
            rec = self.store.get_story(sid)
            if rec is None:
                raise ApiError(404, "not_found", f"no story {sid!r}")
            if rec.merged_into:
                return Response(
                    status_code=301,
                    headers={
                        "Location": f"/v1/stories/{rec.merged_into}",
                        "Cache-Control": f"public, max-age={self.config.max_age}, s-maxage={self.config.s_maxage}",
                    },
                )
            articles = self.store.story_articles(sid)
            view = self._reader_view_of(request)
        except REDIS_ERRORS as e:
            self._mark_down()
            raise ApiError(
                503, "unavailable", f"story store unavailable: {type(e).__name__}", {"Retry-After": "5"}
            ) from None
        if view is None:
            return self._respond(request, coverage_page(rec.summary(), rec.entities, articles), "public")
        return self._respond(request, personal_coverage(rec, articles, view), "private")

    async def feed(self, request: Request) -> Response:
        user = await self._user_async(request)
        edition_param = self._edition(request, default="")
        limit, cursor = self._limit(request), self._cursor(request)
        hide_read = hide_read_param(request.query_params)
        query = (edition_param, limit, hide_read, cursor)

        async def make() -> tuple:
            """``(body, ETag)`` of a fresh page (kept), or ``(payload, stale reason)`` of a degraded one."""
            if self.aredis is not None:  # no worker thread unless the feed must be read or built otherwise
                head, items, stale = await self.personal.parts_async(
                    self.aredis, user, edition_param, limit, hide_read, cursor
                )
            else:
                head, items, stale = await run_in_threadpool(
                    self.personal.parts, user, edition_param, limit, hide_read, cursor
                )
            if items is None:
                return head, stale
            raw = page_body(user, head["edition"], head["generated_at"], items, head["next_cursor"])
            etag = strong_etag(raw)
            self.personal.pages.put(user, query, raw, etag)
            return raw, etag

        first, second = await self.personal.pages.get_or_make(user, query, make)
        if isinstance(first, dict):
            return self._respond(request, first, "private", second)
        return conditional_body(request.headers.get("if-none-match", ""), first, self._private_headers, second)

    def personal_feed(
        self, user: str, edition_param: str, limit: int, hide_read: bool = False, cursor: Cursor | None = None
    ) -> tuple[dict, str]:
        """A reader's feed page (the For You page; ``/v1/feed`` sends the same page without parsing its
        stories), the first or the one ``cursor`` names, and its stale reason ("" when fresh).

        The precomputed feed (or one built now when missing or of another edition), re-ranked on
        request: newer breaking stories injected, blocks and the per-outlet cap applied
        (:meth:`~newsflow.serving.personal.PersonalFeeds.parts`, the rules of
        :func:`~newsflow.core.ranking.rerank.rerank`).
        With Redis down, the edition's snapshot.
        """
        head, items, stale = self.personal.parts(user, edition_param, limit, hide_read, cursor)
        if items is None:
            return head, stale
        return dict(head, stories=[json.loads(b) for b in items]), stale

    def _breaking_items(self, now: float) -> tuple[dict, dict]:
        """Live breaking set ``{story_id: since}`` and their feed items, shared by all readers and cached
        in-process for ``local_cache_seconds`` (:meth:`newsflow.serving.personal.PersonalFeeds.breaking_set`)."""
        brk = self.personal.breaking_set(now)
        return brk.since, brk.items

    def get_preferences(self, request: Request) -> Response:
        user = self._user(request)
        try:
            self._guard()
            prefs = self.preferences_of(user)
        except REDIS_ERRORS as e:
            self._mark_down()
            raise ApiError(
                503, "unavailable", f"profile store unavailable: {type(e).__name__}", {"Retry-After": "5"}
            ) from None
        return self._respond(request, dict(prefs, user=user), "private")

    def preferences_of(self, user: str) -> dict:
        """The reader's preference document (:func:`newsflow.serving.preferences.reader_preferences`); Redis errors
        propagate."""
        return reader_preferences(self.store.user_profile(user), self.store.preference_extras(user))

    async def _json_body(self, request: Request):
        """The request's JSON body: 415 without a JSON content type, 413 past :data:`MAX_BODY_BYTES` (read
        with a cap), 400 when it does not parse (also integers past Python's 4,300-digit limit, nesting
        past the recursion limit)."""
        if "application/json" not in request.headers.get("content-type", ""):
            raise ApiError(415, "unsupported_media_type", "send Content-Type: application/json")
        try:
            body = await read_capped(request, MAX_BODY_BYTES)
        except BodyTooLarge:
            raise ApiError(413, "too_large", f"body larger than {MAX_BODY_BYTES} bytes") from None
        try:
            return json.loads(body)
        except (ValueError, RecursionError) as e:
            raise ApiError(400, "invalid_json", f"body is not JSON: {e}") from None

    async def put_preferences(self, request: Request) -> Response:
        user = await self._user_async(request)
        data = await self._json_body(request)

        def save() -> dict:
            prefs = merge_preferences(self.preferences_of(user), data)
            self.store.write_preferences(user, prefs)
            drop_user_feed(self.store.client, user, self.store.keys)  # rebuilt with the new prefs
            self.personal.pages.forget(user)
            return prefs

        try:
            self._guard()
            prefs = await run_in_threadpool(save)
        except ValueError as e:
            raise ApiError(400, "bad_body", str(e)) from None
        except REDIS_ERRORS as e:
            self._mark_down()
            raise ApiError(
                503, "unavailable", f"profile store unavailable: {type(e).__name__}", {"Retry-After": "5"}
            ) from None
        return Response(
            json_bytes(dict(prefs, user=user)),
            status_code=200,
            media_type="application/json",
            headers={"Cache-Control": "no-store"},
        )

    async def events(self, request: Request) -> Response:
        user = await self._user_async(request)
        data = await self._json_body(request)
        raw_events = data.get("events") if isinstance(data, dict) else None
        if not isinstance(raw_events, list) or not 1 <= len(raw_events) <= MAX_EVENTS_PER_REQUEST:
            raise ApiError(400, "bad_body", f'body must be {{"events": [1..{MAX_EVENTS_PER_REQUEST} events]}}')
        now = self._ranking_now()  # the serving clock: the replay clock when serving a replay
        events, errors = [], []
        for i, raw in enumerate(raw_events):
            try:
                events.append(validate_event(raw, user, now))
            except ValueError as e:
                errors.append({"index": i, "error": str(e)})
        if errors:
            raise ApiError(400, "invalid_events", json.dumps(errors))

        def append() -> list:
            ids = append_events(self.store.client, events, self.store.keys, self.config.max_pending_events)
            clicked = sorted({e.story_id for e in events if e.type == "click"})
            if clicked:  # a click marks the story read (the read-state store)
                mark_read_now(self, user, clicked, now)
                self.personal.pages.forget(user)
            return ids

        try:
            self._guard()
            ids = await run_in_threadpool(append)
        except EventBacklogFull as e:
            log.error("events refused: %s", e)
            raise ApiError(503, "backlog_full", f"event log full: {e}", {"Retry-After": "60"}) from None
        except REDIS_ERRORS as e:
            self._mark_down()
            raise ApiError(
                503, "unavailable", f"event log unavailable: {type(e).__name__}", {"Retry-After": "5"}
            ) from None
        return Response(
            json_bytes({"accepted": len(ids), "ids": ids}),
            status_code=202,
            media_type="application/json",
            headers={"Cache-Control": "no-store"},
        )

    def openapi(self, request: Request) -> Response:
        return self._respond(request, openapi_schema(), "public")

    def warm_snapshots(self) -> int:
        """Snapshots every edition feed present in Redis (at startup), so a restart followed by
        a Redis outage still has the last good feeds. Returns how many were stored; a Redis
        error is logged, not raised."""
        n = 0
        try:
            for key in self.store.client.scan_iter(match=self.store.keys.feed_pattern("edition"), count=500):
                name = key.decode() if isinstance(key, bytes) else str(key)
                edition = self.store.keys.feed_name_of("edition", name)
                raw = None if edition is None else self.store.read_feed_raw(name)
                if raw is not None:
                    try:
                        self.snapshots.put("edition:" + edition, json.loads(raw))
                        n += 1
                    except ValueError:
                        log.error("corrupt feed JSON at %s", name)
        except REDIS_ERRORS as e:
            log.warning("could not warm snapshots: %s", e)
        return n

    async def health(self, request: Request) -> Response:
        """200 ``{"redis": true}`` when Redis answers ``PING``, else 503 ``{"redis": false}`` (module docstring)."""
        try:  # no guard: health checks probe for recovery
            if self.aredis is not None:
                ok = bool(await self.aredis.ping())
            else:
                ok = bool(await run_in_threadpool(self.store.client.ping))
        except REDIS_ERRORS:
            ok = False
        return Response(
            json_bytes({"redis": ok}),
            status_code=200 if ok else 503,
            media_type="application/json",
            headers={"Cache-Control": "no-store"},
        )


def _error_body(status: int, code: str, message: str) -> bytes:
    if code == "invalid_events":
        return json_bytes(
            {"error": {"code": code, "message": "some events are invalid", "details": json.loads(message)}}
        )
    return json_bytes({"error": {"code": code, "message": message}})


def create_app(client, config: ServingConfig) -> Starlette:
    """Builds the ASGI app.

    Args:
      client: ``redis.Redis`` client (``decode_responses=False``); use
        :func:`serving_client` (short timeouts, one retry) so an unreachable server degrades
        quickly. The app's lifespan opens a ``redis.asyncio`` client for the same server (module docstring).
      config: :class:`ServingConfig`.

    Returns:
      A Starlette application.
    """
    api = Api(client, config)
    api.admin = AdminActions(client, config.keys, config.clock, config.discover_feeds, config.host_check)

    routes_web, web = web_routes(api)

    def _is_api(request: Request) -> bool:
        path = request.url.path
        return path.startswith("/v1/") or path in ("/openapi.json", "/healthz")

    async def page_error(request: Request, exc: PageError) -> Response:
        return web.error_page(request, exc)

    async def api_error(request: Request, exc: ApiError) -> Response:
        if not _is_api(request):
            return web.error_page(request, PageError(exc.status, "Something is wrong with that address", exc.message))
        headers = dict(exc.headers, **{"Cache-Control": "no-store"})
        return Response(
            _error_body(exc.status, exc.code, exc.message),
            status_code=exc.status,
            media_type="application/json",
            headers=headers,
        )

    def _without_slash(request: Request) -> str | None:
        """A ``GET``/``HEAD`` to ``/path/`` whose ``/path`` is a route: that path (and query), relative."""
        path = request.url.path
        if request.method not in ("GET", "HEAD") or len(path) < 2 or not path.endswith("/"):
            return None
        scope = {"type": "http", "path": path.rstrip("/"), "method": request.method}
        if any(r.matches(scope)[0] == Match.FULL for r in app.routes):
            return path.rstrip("/") + (f"?{request.url.query}" if request.url.query else "")
        return None

    async def http_error(request: Request, exc: HTTPException) -> Response:
        if exc.status_code == 404 and (target := _without_slash(request)) is not None:
            # the router's own slash redirect builds an absolute URL from the Host header; this one is relative
            return RedirectResponse(target, status_code=308)
        if not _is_api(request):
            title = {404: "Page not found", 405: "Not allowed"}.get(exc.status_code, "Error")
            page = web.error_page(request, PageError(exc.status_code, title, str(exc.detail)))
            page.headers.update(exc.headers or {})  # a 405's Allow (RFC 9110 15.5.6)
            return page
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return Response(
            _error_body(exc.status_code, code, str(exc.detail)),
            status_code=exc.status_code,
            media_type="application/json",
            headers=dict(exc.headers or {}, **{"Cache-Control": "no-store"}),
        )

    routes = [
        Route("/v1/top", api.public_endpoint(api._top_key, api.top), methods=["GET"]),
        Route("/v1/topics/{topic}", api.public_endpoint(api._topic_key, api.topic), methods=["GET"]),
        Route("/v1/trending", api.public_endpoint(api._trending_key, api.trending), methods=["GET"]),
        Route("/v1/stories/{story_id}", api.story, methods=["GET"]),
        Route("/v1/feed", api.feed, methods=["GET"]),
        Route("/v1/me/preferences", api.get_preferences, methods=["GET"]),
        Route("/v1/me/preferences", api.put_preferences, methods=["PUT"]),
        *me_routes(api),  # /v1/me/saved, /v1/me/read (serving/me.py)
        *search_routes(api, web),  # /v1/search, /search (serving/search.py)
        *feed_routes(api, web),  # /feeds/...rss|atom (serving/feeds_out.py)
        *picture_routes(config.thumbnail_dir),  # /img/<name> (serving/pictures.py)
        Route("/v1/events", api.events, methods=["POST"]),
        Route("/openapi.json", api.openapi, methods=["GET"]),
        Route("/healthz", api.health, methods=["GET"]),
        metrics_route(),  # Prometheus text format (serving/metrics.py)
        admin_mount(api.admin, config.admin_token, api.editor_token),  # /v1/admin/... (admin.py)
        *routes_web,
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app):
        api.warm_snapshots()
        if api.redis_url:
            # the request path's timeouts (as serving_client's), and no health-check PING: a fresh connection
            # sends one first, with its own retries, which multiplies the wait on a hung server; a broken
            # connection is replaced by the retry anyway
            api.aredis = connect_async(
                api.redis_url, socket_timeout=0.5, socket_connect_timeout=0.5, health_check_interval=0
            )
        try:
            yield
        finally:
            aredis, api.aredis = api.aredis, None
            if aredis is not None:
                await aredis.aclose()

    middleware = [Middleware(MetricsMiddleware), Middleware(CompressResponses)]
    if config.trusted_proxies:  # outermost: every later step sees the client's scheme and address
        middleware.insert(0, Middleware(ProxyHeadersMiddleware, trusted_hosts=list(config.trusted_proxies)))
    app = Starlette(
        routes=routes,
        exception_handlers={ApiError: api_error, HTTPException: http_error, PageError: page_error},
        lifespan=lifespan,
        middleware=middleware,
    )
    app.router.redirect_slashes = False  # see _without_slash
    app.state.api = api
    return app
