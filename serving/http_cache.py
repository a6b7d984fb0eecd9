"""HTTP caching for the API: JSON bodies, strong ETags, conditional GETs, CDN headers, in-process cache.

Public pages send ``Cache-Control: public, max-age=…, s-maxage=…`` (CDN-cacheable; ``Vary: Authorization``
because a reader's token may turn them into the reader's own page), personal ones
``private, no-store`` with ``Vary: Authorization``; every GET has a strong ``ETag`` (BLAKE2b-96 of the
body) and ``If-None-Match`` answers ``304`` (RFC 9110 §13.1.2: weak comparison, ``*`` matches).
Public responses are also kept in-process for a short time (:class:`LocalCache`), well under the
feeds' 5-minute TTL, so a burst of identical requests costs one Redis read.

Compression: a response of at least :data:`COMPRESS_MIN_BYTES` is sent gzip-encoded (stdlib ``gzip``, level
:data:`GZIP_LEVEL`, no timestamp, so the same body always gives the same bytes) to a request whose
``Accept-Encoding`` accepts gzip (RFC 9110 §12.5.3: ``q=0`` refuses, ``*`` stands for any encoding not named).
A cached response is compressed once per version, on the first request that accepts gzip, and the encoded
copy is kept next to it (:meth:`LocalCache.peek`); it carries its own strong ``ETag`` (the identity tag with
``-gzip`` before the closing quote), ``Content-Encoding: gzip`` and ``Vary: Accept-Encoding``. Brotli is not
offered: no brotli package is a dependency.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import threading
import time
from collections.abc import Callable

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

COMPRESS_MIN_BYTES = 1024
"""Smallest body worth compressing (bytes): below it the headers outweigh the saving."""
GZIP_LEVEL = 6
"""zlib level of gzip answers: zlib's default, most of level 9's saving at a fraction of its CPU."""
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
        hit = cache.peek(key, request.headers.get("accept-encoding", "")) if key is not None else None
        if hit is not None:
            return not_modified_or(hit, request.headers.get("if-none-match", ""))
        return await run_in_threadpool(handler, request)

    endpoint.__name__ = endpoint.__qualname__ = getattr(handler, "__name__", "endpoint")
    return endpoint


def accepts_gzip(accept_encoding: str) -> bool:
    """Whether an ``Accept-Encoding`` header value accepts gzip: ``gzip`` (or ``x-gzip``) with a q-value
    above 0, or ``*`` above 0 when gzip is not named; malformed q-values count as 1."""
    named: float | None = None
    star: float | None = None
    for part in accept_encoding.lower().split(","):
        coding, _, params = part.strip().partition(";")
        q = 1.0
        params = params.strip()
        if params.startswith("q="):
            try:
                q = float(params[2:])
            except ValueError:
                q = 1.0
        coding = coding.strip()
        if coding in ("gzip", "x-gzip"):
            named = q if named is None else max(named, q)
        elif coding == "*":
            star = q
    if named is not None:
        return named > 0
    return star is not None and star > 0


def gzip_tags(etag: str, vary: str) -> tuple[str, str]:
    """The ``ETag`` and ``Vary`` of the gzip representation of an answer carrying ``etag`` and ``vary`` (either
    may be ""): the tag with ``-gzip`` before its closing quote (a strong tag names one representation, RFC 9110
    §8.8.3), and ``Accept-Encoding`` added to ``Vary`` once."""
    if etag.endswith('"'):
        etag = etag[:-1] + '-gzip"'
    if "accept-encoding" not in vary.lower():
        vary = (vary + ", " if vary else "") + "Accept-Encoding"
    return etag, vary


def gzip_variant(response: Response) -> Response | None:
    """The gzip-encoded copy of a ``200`` ``response`` (same headers, ``Content-Encoding: gzip``, the
    ``ETag`` with ``-gzip`` before its closing quote), or ``None`` when it is not worth it: not a ``200``,
    already encoded, or under :data:`COMPRESS_MIN_BYTES`."""
    body = response.body
    if response.status_code != 200 or "content-encoding" in response.headers or len(body) < COMPRESS_MIN_BYTES:
        return None
    headers = {k: v for k, v in response.headers.items() if k.lower() != "content-length"}
    etag, headers["vary"] = gzip_tags(response.headers.get("etag", ""), headers.get("vary", ""))
    if etag:
        headers["etag"] = etag
    headers["content-encoding"] = "gzip"
    return Response(gzip.compress(body, GZIP_LEVEL, mtime=0), status_code=200, headers=headers)


def negotiated(response: Response, accept_encoding: str) -> Response:
    """``response`` compressed for ``accept_encoding`` when it accepts gzip and :func:`gzip_variant`
    makes one, else ``response``: for an answer sent once (a reader's own page); cached answers keep their
    encoded copy (:meth:`LocalCache.peek`)."""
    if not accepts_gzip(accept_encoding):
        return response
    return gzip_variant(response) or response


class _Entry:
    """A cached response, its expiry (the cache's clock) and its encoded copy once made (``None``: not
    yet; ``False``: not worth compressing)."""

    __slots__ = ("expires", "response", "gzip")

    def __init__(self, expires: float, response: Response):
        self.expires, self.response, self.gzip = expires, response, None

    def answer(self, accept_encoding: str) -> Response:
        if not accepts_gzip(accept_encoding):
            return self.response
        if self.gzip is None:  # two threads may both compress once: the same bytes, the last one kept
            self.gzip = gzip_variant(self.response) or False
        return self.gzip or self.response


class LocalCache:
    """In-process cache of public ``200`` responses for ``ttl_seconds`` (0 disables); thread-safe.

    Holds at most ``max_entries`` responses; when full it is emptied (the keys are few: editions,
    topics and limits), which is cheaper than LRU bookkeeping on the request path. Each response is
    compressed at most once while cached (see the module docstring), on the first request accepting gzip.
    """

    def __init__(self, ttl_seconds: float, max_entries: int = 10_000, clock: Callable[[], float] = time.monotonic):
        self.ttl = ttl_seconds
        self.max_entries = max_entries
        self._clock = clock
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()

    def peek(self, key: str, accept_encoding: str = "") -> Response | None:
        """The cached, unexpired response for ``key`` (gzip-encoded when ``accept_encoding`` accepts it) or
        ``None``; never builds (no I/O, so it can be called on the event loop)."""
        if self.ttl <= 0:
            return None
        hit = self._entries.get(key)  # one dict read: atomic under the GIL, no lock needed
        if hit is not None and hit.expires > self._clock():
            return hit.answer(accept_encoding)
        return None

    def get_or_build(self, key: str, build: Callable[[], Response], accept_encoding: str = "") -> Response:
        """The cached response for ``key``, or ``build()`` (cached when it is a ``200``); gzip-encoded when
        ``accept_encoding`` accepts it."""
        if self.ttl <= 0:
            return negotiated(build(), accept_encoding)
        now = self._clock()
        with self._lock:
            hit = self._entries.get(key)
        if hit is not None and hit.expires > now:
            return hit.answer(accept_encoding)
        resp = build()
        if resp.status_code != 200:
            return resp
        entry = _Entry(now + self.ttl, resp)
        with self._lock:
            if len(self._entries) >= self.max_entries:
                self._entries.clear()
            self._entries[key] = entry
        return entry.answer(accept_encoding)


def cached_answer(cache: LocalCache, key: str, build: Callable[[], Response], request: Request) -> Response:
    """``cache.get_or_build(key, build)`` for ``request``: encoded as its ``Accept-Encoding`` accepts, and a
    ``304`` when its ``If-None-Match`` matches that encoding's ``ETag``."""
    resp = cache.get_or_build(key, build, request.headers.get("accept-encoding", ""))
    return not_modified_or(resp, request.headers.get("if-none-match", ""))


COMPRESSIBLE_TYPES = ("application/json", "text/html", "text/css", "application/rss+xml", "application/atom+xml")
"""Media types :class:`CompressResponses` compresses (every other answer passes as it is)."""


class CompressResponses:
    """ASGI middleware: every other answer (not from :class:`LocalCache`, whose copies are compressed once per
    version) compressed per request when the request accepts gzip (level and minimum size as :func:`gzip_variant`).

    It takes a complete ``200`` of a :data:`COMPRESSIBLE_TYPES` type without a ``Content-Encoding`` (one body
    message; streamed and file answers pass through), compresses it, gives it ``Vary: Accept-Encoding`` and the
    gzip ETag (:func:`gzip_tags`), and
    answers ``304`` when the request's ``If-None-Match`` names that tag, so conditional requests work for both
    representations without the endpoints knowing.
    """

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if not accepts_gzip(request_headers.get("accept-encoding", "")):
            await self.app(scope, receive, send)
            return
        held: dict = {}

        async def send_compressed(message) -> None:
            if message["type"] == "http.response.start":
                headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in message.get("headers", [])}
                media = headers.get("content-type", "").partition(";")[0].strip().lower()
                if message["status"] == 200 and "content-encoding" not in headers and media in COMPRESSIBLE_TYPES:
                    held["start"] = message  # decided with the body
                    return
                await send(message)
            elif message["type"] == "http.response.body" and "start" in held:
                start = held.pop("start")
                if message.get("more_body"):  # streamed: not ours to buffer
                    await send(start)
                    await send(message)
                    return
                body = message.get("body", b"")
                if len(body) < COMPRESS_MIN_BYTES:
                    await send(start)
                    await send(message)
                    return
                await self._send_gzip(start, body, request_headers.get("if-none-match", ""), send)
            else:
                await send(message)

        await self.app(scope, receive, send_compressed)

    @staticmethod
    async def _send_gzip(start: dict, body: bytes, if_none_match: str, send) -> None:
        """Sends ``body`` gzip-encoded with ``start``'s headers adjusted (every other header kept as sent, repeated
        ones such as ``Set-Cookie`` included), or a bodiless ``304`` when ``if_none_match`` names its ETag."""
        encoded = gzip.compress(body, GZIP_LEVEL, mtime=0)
        headers, etag, vary = [], "", ""
        for k, v in start.get("headers", []):
            name = k.decode("latin-1").lower()
            if name == "etag":
                etag = v.decode("latin-1")
            elif name == "vary":
                vary = v.decode("latin-1")
            elif name != "content-length":
                headers.append((k, v))
        etag, vary = gzip_tags(etag, vary)
        headers += [(b"vary", vary.encode("latin-1")), (b"content-encoding", b"gzip")]
        if etag:
            headers.append((b"etag", etag.encode("latin-1")))
        if etag and etag_matches(if_none_match, etag):
            kept = [(k, v) for k, v in headers if k.lower() != b"content-type"]
            await send({"type": "http.response.start", "status": 304, "headers": kept})
            await send({"type": "http.response.body", "body": b""})
            return
        headers.append((b"content-length", str(len(encoded)).encode()))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": encoded})
