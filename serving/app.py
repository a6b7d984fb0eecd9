"""The newsflow HTTP API (Starlette ASGI app).

Endpoints (all JSON; schema at ``GET /openapi.json``):

* ``GET /v1/top?edition=&limit=`` — the edition's precomputed feed (``global`` by default);
* ``GET /v1/topics/{topic}?limit=`` — a topic's precomputed feed;
* ``GET /v1/trending?limit=`` — latest trending stories/entities/topics and the breaking set;
* ``GET /v1/stories/{story_id}`` — full coverage: every source, independent reports
  (near-duplicate groups) apart from their syndicated copies;
* ``GET /v1/feed?edition=&limit=`` — the reader's personal feed; the reader comes from a
  signed bearer token (:mod:`serving.tokens`), never from a parameter;
* ``POST /v1/events`` — impression/click/dwell events (validated, appended to a Redis stream).

Caching: public pages send ``Cache-Control: public, max-age=…, s-maxage=…`` (CDN-cacheable),
personal ones ``private, no-store``; every GET has a strong ``ETag`` (BLAKE2b of the body)
and answers ``If-None-Match`` with ``304``. Public feeds are also cached in-process for
``local_cache_seconds`` (1 s), which is well under the feeds' 5-minute TTL.

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
import hashlib
import json
import logging
import os
import re
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

import redis
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from newsflow.ranking.decay import LAMBDA_BREAKING, decay_score
from newsflow.ranking.events import (
    MAX_EVENTS_PER_REQUEST,
    append_events,
    is_valid_story_id,
    validate_event,
)
from newsflow.ranking.feeds import FeedConfig, build_user_feed
from newsflow.ranking.rerank import rerank
from newsflow.ranking.store import (
    FEED_TTL_SECONDS,
    GLOBAL_EDITION,
    RankingStore,
    feed_key,
)
from serving.openapi import openapi_schema
from serving.tokens import TokenError, verify_token

log = logging.getLogger("newsflow.serving")

# \Z, not $: "$" also matches before a final newline (edition=en%0A would pass)
EDITION_RE = re.compile(r"(global|[a-z]{2,3}(-[a-z0-9]{2,8})?)\Z")
TOPIC_RE = re.compile(r"[a-z0-9][a-z0-9 _&.'-]{0,63}\Z")
LIMIT_RE = re.compile(r"[0-9]{1,3}\Z")  # ASCII digits only: str.isdigit() accepts "²"
MAX_LIMIT = 100
MAX_BODY_BYTES = 64 * 1024
STALE_HEADER = "X-Newsflow-Stale"
STALE_REASON_HEADER = "X-Newsflow-Stale-Reason"
REDIS_ERRORS = (redis.RedisError, OSError)


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
      clock: returns the current UTC epoch seconds (tokens, events; injectable for tests).
      ranking_clock: the time personal feeds are scored and breaking stories are read at;
        ``None`` means ``clock``. ``newsflow serve --now latest`` sets it to the replayed
        corpus' time so a historical corpus does not decay to zero.
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
    ranking_clock: Optional[Callable[[], float]] = None


class ApiError(Exception):
    """A 4xx/5xx answer with a machine-readable code."""

    def __init__(self, status: int, code: str, message: str, headers: Optional[dict] = None):
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers or {}


def _dumps(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _etag(body: bytes) -> str:
    return '"' + hashlib.blake2b(body, digest_size=12).hexdigest() + '"'


def _etag_matches(header: str, etag: str) -> bool:
    if not header:
        return False
    for tag in header.split(","):
        tag = tag.strip()
        if tag == "*" or tag == etag or (tag.startswith("W/") and tag[2:] == etag):
            return True
    return False


class SnapshotStore:
    """Last good copy of each public feed, in memory and as files (atomic replace)."""

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
                f.write(_dumps(doc))
            os.replace(tmp, self._path(name))
        except OSError as e:  # a full disk must not break serving
            log.warning("snapshot write failed for %s: %s", name, e)

    def get(self, name: str) -> Optional[dict]:
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


class Api:
    """Request handlers over one Redis client; see the module docstring."""

    def __init__(self, client, config: ServingConfig):
        self.store = RankingStore(client)
        self.config = config
        self.snapshots = SnapshotStore(config.snapshot_dir)
        self._cache: dict[str, tuple[float, Response]] = {}
        self._redis_down_until = 0.0
        self._breaking_cache: tuple[float, dict, dict] = (0.0, {}, {})
        self._ranking_now = config.ranking_clock or config.clock

    # -- circuit breaker: one failed call makes the next ones fail fast for a while ------
    def _guard(self) -> None:
        if time.monotonic() < self._redis_down_until:
            raise redis.ConnectionError("redis marked unavailable (backing off)")

    def _mark_down(self) -> None:
        self._redis_down_until = time.monotonic() + self.config.redis_backoff_seconds

    # -- helpers ------------------------------------------------------------------------
    def _limit(self, request: Request) -> int:
        raw = request.query_params.get("limit")
        if raw is None:
            return self.config.default_limit
        if not LIMIT_RE.match(raw) or not 1 <= int(raw) <= MAX_LIMIT:
            raise ApiError(400, "bad_parameter", f"limit must be an integer in [1, {MAX_LIMIT}], got {raw!r}")
        return int(raw)

    @staticmethod
    def _edition(request: Request, default: str = GLOBAL_EDITION) -> str:
        raw = request.query_params.get("edition")
        if raw is None or raw == "":
            return default
        ed = raw.lower()
        if not EDITION_RE.match(ed):
            raise ApiError(400, "bad_parameter",
                           f"edition must be 'global' or a language code like 'en' or 'en-us', got {raw!r}")
        return ed

    def _respond(self, request: Request, payload: dict, cache: str, stale_reason: str = "") -> Response:
        body = _dumps(payload)
        etag = _etag(body)
        headers = {"ETag": etag, "Vary": "Accept-Encoding"}
        if cache == "public":
            s_max = self.config.stale_s_maxage if stale_reason else self.config.s_maxage
            max_age = min(self.config.max_age, s_max)
            headers["Cache-Control"] = f"public, max-age={max_age}, s-maxage={s_max}"
        else:
            headers["Cache-Control"] = "private, no-store"
            headers["Vary"] = "Authorization, Accept-Encoding"
        if stale_reason:
            headers[STALE_HEADER] = "1"
            headers[STALE_REASON_HEADER] = stale_reason
        if _etag_matches(request.headers.get("if-none-match", ""), etag):
            return Response(status_code=304, headers=headers)
        return Response(body, status_code=200, headers=headers, media_type="application/json")

    def _user(self, request: Request) -> str:
        auth = request.headers.get("authorization", "")
        if not auth.lower().startswith("bearer "):
            raise ApiError(401, "missing_token", "send Authorization: Bearer <token>",
                           {"WWW-Authenticate": 'Bearer realm="newsflow"'})
        try:
            return verify_token(auth[7:].strip(), self.config.token_secret, self.config.clock())
        except TokenError as e:
            raise ApiError(401, "invalid_token", f"token refused: {e.reason}",
                           {"WWW-Authenticate": f'Bearer realm="newsflow", error="invalid_token", '
                                                f'error_description="{e.reason}"'}) from None

    def _cached(self, request: Request, key: str, build: Callable[[], Response]) -> Response:
        """In-process cache of public responses for ``local_cache_seconds`` (200s only)."""
        ttl = self.config.local_cache_seconds
        now = time.monotonic()
        hit = self._cache.get(key) if ttl > 0 else None
        if hit is None or hit[0] <= now:
            resp = build()
            if ttl > 0 and resp.status_code == 200:
                if len(self._cache) > 10000:
                    self._cache.clear()
                self._cache[key] = (now + ttl, resp)
            hit = (0.0, resp)
        resp = hit[1]
        if _etag_matches(request.headers.get("if-none-match", ""), resp.headers.get("etag", "")):
            headers = {k: v for k, v in resp.headers.items() if k.lower() not in ("content-length", "content-type")}
            return Response(status_code=304, headers=headers)
        return resp

    def _feed_with_fallback(self, name: str, key: str, fallback: str) -> tuple[Optional[dict], str]:
        """Reads a feed; on a Redis error or a missing feed returns a snapshot and the reason."""
        try:
            self._guard()
            raw = self.store.read_feed_raw(key)
        except REDIS_ERRORS as e:
            self._mark_down()
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
                    self.snapshots.put(name, doc)
                    return doc, ""
            else:
                reason = "feed-missing"
        doc = self.snapshots.get(name)
        if doc is None and fallback and fallback != name:
            doc = self.snapshots.get(fallback)
        return doc, reason

    @staticmethod
    def _page(kind: str, name: str, doc: Optional[dict], limit: int, stale: str) -> dict:
        stories = (doc or {}).get("stories", [])[:limit]
        return {
            kind: name,
            "generated_at": (doc or {}).get("generated_at"),
            "stale": bool(stale),
            "count": len(stories),
            "stories": stories,
        }

    # -- handlers -----------------------------------------------------------------------
    async def top(self, request: Request) -> Response:
        edition, limit = self._edition(request), self._limit(request)

        def build() -> Response:
            name = f"edition:{edition}"
            doc, stale = self._feed_with_fallback(name, feed_key("edition", edition), f"edition:{GLOBAL_EDITION}")
            return self._respond(request, self._page("edition", edition, doc, limit, stale), "public", stale)

        return self._cached(request, f"top|{edition}|{limit}", build)

    async def topic(self, request: Request) -> Response:
        raw = request.path_params["topic"]
        topic = raw.lower()
        if not TOPIC_RE.match(topic):
            raise ApiError(400, "bad_parameter", f"topic must be 1-64 chars of [a-z0-9 _&.'-], got {raw!r}")
        limit = self._limit(request)

        def build() -> Response:
            name = f"topic:{topic}"
            doc, stale = self._feed_with_fallback(name, feed_key("topic", topic), "")
            return self._respond(request, self._page("topic", topic, doc, limit, stale), "public", stale)

        return self._cached(request, f"topic|{topic}|{limit}", build)

    async def trending(self, request: Request) -> Response:
        limit = self._limit(request)

        def build() -> Response:
            now = self._ranking_now()
            try:
                self._guard()
                end, story_rows = self.store.latest_trending("story", limit, now)
                _, entity_rows = self.store.latest_trending("entity", limit, now)
                _, topic_rows = self.store.latest_trending("topic", limit, now)
                breaking = self.store.breaking(now)
                ids = [sid for sid, _ in story_rows] + [b for b in breaking if b not in dict(story_rows)]
                recs = {s.story_id: s for s in self.store.get_stories(ids) if s is not None}
            except REDIS_ERRORS as e:
                self._mark_down()
                log.warning("redis unavailable for trending: %s", e)
                doc = self.snapshots.get("trending") or {
                    "window_end": None, "stories": [], "entities": [], "topics": [], "breaking": []}
                return self._respond(request, dict(doc, stale=True), "public", "redis-unavailable")
            doc = {
                "window_end": end,
                "stories": [dict(recs[sid].summary(), new_articles=c) for sid, c in story_rows if sid in recs],
                "entities": [{"entity": k, "new_articles": c} for k, c in entity_rows],
                "topics": [{"topic": k, "new_articles": c} for k, c in topic_rows],
                "breaking": [dict(recs[sid].summary(), breaking_since=since)
                             for sid, since in sorted(breaking.items(), key=lambda kv: -kv[1]) if sid in recs],
            }
            self.snapshots.put("trending", dict(doc, generated_at=end))
            return self._respond(request, dict(doc, stale=False), "public")

        return self._cached(request, f"trending|{limit}", build)

    async def story(self, request: Request) -> Response:
        sid = request.path_params["story_id"]
        if not is_valid_story_id(sid):
            raise ApiError(400, "bad_parameter", f"story id must be 1-128 chars of [A-Za-z0-9_.:-], got {sid!r}")
        try:
            self._guard()
            rec = self.store.get_story(sid)
            if rec is None:
                raise ApiError(404, "not_found", f"no story {sid!r}")
            if rec.merged_into:
                return Response(status_code=301, headers={
                    "Location": f"/v1/stories/{rec.merged_into}",
                    "Cache-Control": f"public, max-age={self.config.max_age}, s-maxage={self.config.s_maxage}"})
            articles = self.store.story_articles(sid)
        except REDIS_ERRORS as e:
            self._mark_down()
            raise ApiError(503, "unavailable", f"story store unavailable: {type(e).__name__}",
                           {"Retry-After": "5"}) from None
        groups: dict[str, list] = {}
        for a in articles:
            groups.setdefault(a.cluster_id, []).append(a)
        reports = []
        for cid, members in groups.items():
            # the report is the copy with the highest authority, ties: earliest, then id
            members.sort(key=lambda a: (-a.authority, a.event_time, a.article_id))
            head, copies = members[0], members[1:]
            reports.append({
                "cluster_id": cid,
                "article": _article_json(head),
                "syndicated_copies": [_article_json(c) for c in sorted(copies, key=lambda a: (a.event_time, a.article_id))],
            })
        reports.sort(key=lambda r: (r["article"]["event_time"], r["article"]["article_id"]))
        sources: dict[str, int] = {}
        for a in articles:
            sources[a.source_domain] = sources.get(a.source_domain, 0) + 1
        payload = dict(
            rec.summary(),
            entities=rec.entities,
            coverage={"articles": len(articles), "independent_reports": len(reports),
                      "syndicated_copies": len(articles) - len(reports), "sources": len(sources)},
            sources=[{"domain": d, "articles": n} for d, n in sorted(sources.items(), key=lambda kv: (-kv[1], kv[0]))],
            reports=reports,
        )
        return self._respond(request, payload, "public")

    async def feed(self, request: Request) -> Response:
        user = self._user(request)
        edition_param = self._edition(request, default="")
        limit = self._limit(request)
        now = self._ranking_now()
        try:
            self._guard()
            profile = self.store.user_profile(user)
            edition = edition_param or profile.edition or GLOBAL_EDITION
            raw = self.store.read_feed_raw(feed_key("user", user))
            doc = json.loads(raw) if raw is not None else None
            if doc is None or (edition_param and doc.get("edition") not in (None, edition)):
                doc = build_user_feed(self.store, profile, now, edition, self.config.feed)
                self.store.write_feeds({feed_key("user", user): doc}, FEED_TTL_SECONDS)
            generated_at = float(doc.get("generated_at") or 0.0)
            breaking, items_by_id = self._breaking_items(now)
            inject = [(since, items_by_id[sid]) for sid, since in breaking.items()
                      if since > generated_at and sid in items_by_id]
        except REDIS_ERRORS as e:
            self._mark_down()
            log.warning("redis unavailable for feed of %s: %s", user, e)
            edition = edition_param or GLOBAL_EDITION
            snap = self.snapshots.get(f"edition:{edition}") or self.snapshots.get(f"edition:{GLOBAL_EDITION}")
            page = self._page("edition", edition, snap, limit, "redis-unavailable")
            page["user"] = user
            return self._respond(request, page, "private", "redis-unavailable")
        items = rerank(doc.get("stories", []), generated_at, inject, profile, k=limit,
                       source_cap=self.config.feed.source_cap)
        payload = {"user": user, "edition": edition, "generated_at": generated_at, "stale": False,
                   "count": len(items), "stories": items}
        return self._respond(request, payload, "private")

    def _breaking_items(self, now: float) -> tuple[dict, dict]:
        """Live breaking set ``{story_id: since}`` and their feed items, shared by all readers
        and cached in-process for ``local_cache_seconds`` (the set changes every few minutes)."""
        expires, breaking, items = self._breaking_cache
        if time.monotonic() < expires:
            return breaking, items
        breaking = self.store.breaking(now)
        items = {}
        if breaking:
            for rec in self.store.get_stories(list(breaking)):
                if rec is None or rec.merged_into:
                    continue
                items[rec.story_id] = dict(rec.summary(), breaking=True, relevance=None,
                                           score=decay_score(rec.authority, rec.earliest_time, now, LAMBDA_BREAKING))
        self._breaking_cache = (time.monotonic() + self.config.local_cache_seconds, breaking, items)
        return breaking, items

    async def events(self, request: Request) -> Response:
        user = self._user(request)
        if "application/json" not in request.headers.get("content-type", ""):
            raise ApiError(415, "unsupported_media_type", "send Content-Type: application/json")
        body = await request.body()
        if len(body) > MAX_BODY_BYTES:
            raise ApiError(413, "too_large", f"body larger than {MAX_BODY_BYTES} bytes")
        try:
            data = json.loads(body)
        except (ValueError, RecursionError) as e:  # also integers past Python's 4,300-digit limit
            raise ApiError(400, "invalid_json", f"body is not JSON: {e}") from None
        raw_events = data.get("events") if isinstance(data, dict) else None
        if not isinstance(raw_events, list) or not 1 <= len(raw_events) <= MAX_EVENTS_PER_REQUEST:
            raise ApiError(400, "bad_body", f'body must be {{"events": [1..{MAX_EVENTS_PER_REQUEST} events]}}')
        now = self.config.clock()
        events, errors = [], []
        for i, raw in enumerate(raw_events):
            try:
                events.append(validate_event(raw, user, now))
            except ValueError as e:
                errors.append({"index": i, "error": str(e)})
        if errors:
            raise ApiError(400, "invalid_events", json.dumps(errors))
        try:
            self._guard()
            ids = append_events(self.store.client, events)
        except REDIS_ERRORS as e:
            self._mark_down()
            raise ApiError(503, "unavailable", f"event log unavailable: {type(e).__name__}",
                           {"Retry-After": "5"}) from None
        return Response(_dumps({"accepted": len(ids), "ids": ids}), status_code=202,
                        media_type="application/json", headers={"Cache-Control": "no-store"})

    async def openapi(self, request: Request) -> Response:
        return self._respond(request, openapi_schema(), "public")

    def warm_snapshots(self) -> int:
        """Snapshots every edition feed present in Redis (at startup), so a restart followed by
        a Redis outage still has the last good feeds. Returns how many were stored; a Redis
        error is logged, not raised."""
        n = 0
        try:
            for key in self.store.client.scan_iter(match="nf:feed:edition:*", count=500):
                name = key.decode() if isinstance(key, bytes) else str(key)
                raw = self.store.read_feed_raw(name)
                if raw is not None:
                    try:
                        self.snapshots.put("edition:" + name.rsplit(":", 1)[1], json.loads(raw))
                        n += 1
                    except ValueError:
                        log.error("corrupt feed JSON at %s", name)
        except REDIS_ERRORS as e:
            log.warning("could not warm snapshots: %s", e)
        return n

    async def health(self, request: Request) -> Response:
        try:
            ok = bool(self.store.client.ping())  # no guard: health checks probe for recovery
        except REDIS_ERRORS:
            ok = False
        return Response(_dumps({"redis": ok}), status_code=200, media_type="application/json",
                        headers={"Cache-Control": "no-store"})


def _article_json(a) -> dict:
    return {"article_id": a.article_id, "title": a.title, "url": a.url, "source_domain": a.source_domain,
            "source_name": a.source_name, "event_time": a.event_time, "language": a.language}


def _error_body(status: int, code: str, message: str) -> bytes:
    if code == "invalid_events":
        return _dumps({"error": {"code": code, "message": "some events are invalid",
                                 "details": json.loads(message)}})
    return _dumps({"error": {"code": code, "message": message}})


def serving_client(url: str) -> "redis.Redis":
    """A Redis client tuned for the request path: 0.5 s timeouts and a single retry.

    (redis-py's default of 10 retries with backoff would hold each request ~4 s against a
    dead server.) ``url`` is ``redis://``, ``rediss://`` or ``unix://``.
    """
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    return redis.Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5,
                                retry=Retry(NoBackoff(), 1))


def create_app(client, config: ServingConfig) -> Starlette:
    """Builds the ASGI app.

    Args:
      client: ``redis.Redis`` client (``decode_responses=False``); use
        :func:`serving_client` (short timeouts, one retry) so an unreachable server degrades
        quickly.
      config: :class:`ServingConfig`.

    Returns:
      A Starlette application.
    """
    api = Api(client, config)

    async def api_error(request: Request, exc: ApiError) -> Response:
        headers = dict(exc.headers, **{"Cache-Control": "no-store"})
        return Response(_error_body(exc.status, exc.code, exc.message), status_code=exc.status,
                        media_type="application/json", headers=headers)

    async def http_error(request: Request, exc: HTTPException) -> Response:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return Response(_error_body(exc.status_code, code, str(exc.detail)), status_code=exc.status_code,
                        media_type="application/json", headers=dict(exc.headers or {}, **{"Cache-Control": "no-store"}))

    routes = [
        Route("/v1/top", api.top, methods=["GET"]),
        Route("/v1/topics/{topic}", api.topic, methods=["GET"]),
        Route("/v1/trending", api.trending, methods=["GET"]),
        Route("/v1/stories/{story_id}", api.story, methods=["GET"]),
        Route("/v1/feed", api.feed, methods=["GET"]),
        Route("/v1/events", api.events, methods=["POST"]),
        Route("/openapi.json", api.openapi, methods=["GET"]),
        Route("/healthz", api.health, methods=["GET"]),
    ]
    @contextlib.asynccontextmanager
    async def lifespan(app):
        api.warm_snapshots()
        yield

    app = Starlette(routes=routes, exception_handlers={ApiError: api_error, HTTPException: http_error},
                    lifespan=lifespan)
    app.state.api = api
    return app
