"""HTTP caching for the API: JSON bodies, strong ETags, conditional GETs, CDN headers, in-process cache.

Public pages send ``Cache-Control: public, max-age=…, s-maxage=…`` (CDN-cacheable; ``Vary: Authorization``
because a reader's token may turn them into the reader's own page), personal ones
``private, no-store`` with ``Vary: Authorization``; every GET has a strong ``ETag`` (BLAKE2b-96 of the
body) and ``If-None-Match`` answers ``304`` (RFC 9110 §13.1.2: weak comparison, ``*`` matches).
Public responses are also kept in-process for a short time (:class:`LocalCache`), well under the
feeds' 5-minute TTL, so a burst of identical requests costs one Redis read.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

STALE_HEADER = "X-Newsflow-Stale"
STALE_REASON_HEADER = "X-Newsflow-Stale-Reason"


def json_bytes(obj) -> bytes:
    """Compact UTF-8 JSON (no spaces, non-ASCII kept), the body of every API answer."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def strong_etag(body: bytes) -> str:
    """A strong entity tag: the quoted 24-hex-digit BLAKE2b-96 digest of ``body``."""
    return '"' + hashlib.blake2b(body, digest_size=12).hexdigest() + '"'


def etag_matches(header: str, etag: str) -> bool:
    """Whether an ``If-None-Match`` header value matches ``etag`` (weak comparison, ``*`` matches any)."""
    if not header or not etag:
        return False
    for tag in header.split(","):
        tag = tag.strip()
        if tag == "*" or tag == etag or (tag.startswith("W/") and tag[2:] == etag):
            return True
    return False


def cache_headers(cache: str, max_age: int, s_maxage: int, stale_s_maxage: int, stale_reason: str = "") -> dict:
    """Caching headers of a 200 answer.

    Args:
      cache: ``"public"`` (CDN-cacheable) or ``"private"`` (a reader's own page, never stored).
      max_age / s_maxage: browser and shared-cache lifetimes, seconds.
      stale_s_maxage: shared-cache lifetime of a degraded (stale) answer, seconds.
      stale_reason: non-empty when the answer comes from a snapshot (adds the stale headers).
    """
    # a public answer varies on Authorization too: a request with a reader's token may get that reader's
    # private page instead (their blocks applied), and RFC 9111 3.5 lets a shared cache answer requests
    # carrying Authorization from a response marked public / s-maxage
    headers = {"Vary": "Authorization, Accept-Encoding"}
    if cache == "public":
        s_max = stale_s_maxage if stale_reason else s_maxage
        headers["Cache-Control"] = f"public, max-age={min(max_age, s_max)}, s-maxage={s_max}"
    else:
        headers["Cache-Control"] = "private, no-store"
    if stale_reason:
        headers[STALE_HEADER] = "1"
        headers[STALE_REASON_HEADER] = stale_reason
    return headers


def conditional_json(if_none_match: str, payload, headers: dict) -> Response:
    """A JSON ``200`` with ``ETag`` and ``headers``, or a bodiless ``304`` when ``If-None-Match`` matches."""
    body = json_bytes(payload)
    etag = strong_etag(body)
    headers = dict(headers, ETag=etag)
    if etag_matches(if_none_match, etag):
        return Response(status_code=304, headers=headers)
    return Response(body, status_code=200, headers=headers, media_type="application/json")


def conditional_body(if_none_match: str, body: bytes, headers: dict, etag: str | None = None) -> Response:
    """A JSON ``200`` of ready ``body`` bytes with ``ETag`` and ``headers``, or a bodiless ``304`` when
    ``If-None-Match`` matches (:func:`conditional_json` for an already encoded body).

    Args:
      if_none_match: the request's ``If-None-Match`` header ("" when absent).
      body: the compact JSON bytes.
      headers: caching headers (not modified).
      etag: :func:`strong_etag` of ``body`` when the caller already has it (computed here when ``None``).
    """
    if etag is None:
        etag = strong_etag(body)
    headers = dict(headers, ETag=etag)
    if etag_matches(if_none_match, etag):
        return Response(status_code=304, headers=headers)
    return Response(body, status_code=200, headers=headers, media_type="application/json")


def not_modified_or(response: Response, if_none_match: str) -> Response:
    """``response`` itself, or a ``304`` with its headers when it is a ``200`` and ``If-None-Match``
    matches its ETag."""
    if response.status_code == 200 and etag_matches(if_none_match, response.headers.get("etag", "")):
        headers = {k: v for k, v in response.headers.items() if k.lower() not in ("content-length", "content-type")}
        return Response(status_code=304, headers=headers)
    return response


def cache_hit_on_loop(
    cache: LocalCache, key_of: Callable[[Request], str | None], handler: Callable[[Request], Response]
):
    """An async endpoint for a cacheable ``GET`` whose blocking ``handler`` fills ``cache``.

    When ``key_of(request)`` (the key ``handler`` caches the request's answer under; ``None``: not
    answered from the cache, e.g. a signed-in reader) is in ``cache``, the request is answered on the
    event loop (``200``, or ``304`` by :func:`not_modified_or`); any other request runs ``handler`` in
    the worker thread pool, as a plain sync route would. The thread hop was most of a cache hit's
    latency under concurrent load (``benchmarks.serving``: ``cached_feed``, ``home_page``).
    ``key_of`` may raise what ``handler`` raises for a bad parameter.
    """

    async def endpoint(request: Request) -> Response:
        key = key_of(request)
        hit = cache.peek(key) if key is not None else None
        if hit is not None:
            return not_modified_or(hit, request.headers.get("if-none-match", ""))
        return await run_in_threadpool(handler, request)

    endpoint.__name__ = endpoint.__qualname__ = getattr(handler, "__name__", "endpoint")
    return endpoint


class LocalCache:
    """In-process cache of public ``200`` responses for ``ttl_seconds`` (0 disables); thread-safe.

    Holds at most ``max_entries`` responses; when full it is emptied (the keys are few: editions,
    topics and limits), which is cheaper than LRU bookkeeping on the request path.
    """

    def __init__(self, ttl_seconds: float, max_entries: int = 10_000, clock: Callable[[], float] = time.monotonic):
        self.ttl = ttl_seconds
        self.max_entries = max_entries
        self._clock = clock
        self._entries: dict[str, tuple[float, Response]] = {}
        self._lock = threading.Lock()

    def peek(self, key: str) -> Response | None:
        """The cached, unexpired response for ``key`` or ``None``; never builds (no I/O, so it can be
        called on the event loop)."""
        if self.ttl <= 0:
            return None
        hit = self._entries.get(key)  # one dict read: atomic under the GIL, no lock needed
        if hit is not None and hit[0] > self._clock():
            return hit[1]
        return None

    def get_or_build(self, key: str, build: Callable[[], Response]) -> Response:
        """The cached response for ``key``, or ``build()`` (cached when it is a ``200``)."""
        if self.ttl <= 0:
            return build()
        now = self._clock()
        with self._lock:
            hit = self._entries.get(key)
        if hit is not None and hit[0] > now:
            return hit[1]
        resp = build()
        if resp.status_code == 200:
            with self._lock:
                if len(self._entries) >= self.max_entries:
                    self._entries.clear()
                self._entries[key] = (now + self.ttl, resp)
        return resp
