"""HTTP fetching with limits: timeouts, body cap, redirect limit, content-type checks, SSRF guard.

:class:`Fetcher` wraps one ``aiohttp.ClientSession`` (keep-alive connection pool, created in
the running event loop on the first fetch) and never raises for network or protocol trouble:
every outcome is a :class:`FetchResult` whose ``error_kind`` says what went wrong (``timeout``, ``too_large``,
``redirect_loop``, ``too_many_redirects``, ``unsafe_address``,
``dns`` (the host name does not resolve), ``bad_content_type``, ``network``, ``bad_url``, ``unsupported_encoding``,
``bad_encoding``).

Bodies are read raw and their ``Content-Encoding`` undone by
:class:`newsflow.crawler.inflate.BoundedDecoder`, which inflates in 64 KiB steps and
stops at ``max_body_bytes`` of decoded output (``too_large``), so a
decompression bomb costs at most the cap in memory, not its inflated size.
A fetch with ``prefix_limit`` (robots.txt: :data:`newsflow.crawler.robots.ROBOTS_MAX_BYTES`)
is never ``too_large``: it keeps the first ``prefix_limit`` decoded bytes, stops
reading, and sets :attr:`FetchResult.truncated` when the body went on.

Address checks (:class:`newsflow.crawler.safety.AddressPolicy`) run for every hop; a host's verdict and
resolved addresses are cached for ``CrawlerConfig.dns_cache_s`` seconds (``getaddrinfo`` does
not expose the records' TTL, so this is a fixed cap; refusals are not cached), and the peer
address of the connection actually used is checked on every response.

Why aiohttp and not httpx: on the local replay web (``benchmarks.crawl``) the same requests
run about 3x faster through aiohttp than through ``httpx.AsyncClient`` (anyio/httpcore
overhead per request), which was the crawler's largest per-request cost.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit, urlunsplit

import aiohttp
import aiohttp.abc
import aiohttp.resolver
import yarl

from newsflow.core.timeutil import http_date_to_epoch
from newsflow.crawler.config import CrawlerConfig
from newsflow.crawler.inflate import BodyTooLarge, BoundedDecoder, CorruptEncoding, UnsupportedEncoding
from newsflow.crawler.safety import AddressPolicy, HostResolutionError, UnsafeAddressError

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
FEED_TYPES = (
    "application/rss+xml",
    "application/atom+xml",
    "application/rdf+xml",
    "application/xml",
    "text/xml",
    "text/plain",
    "application/x-rss+xml",
    "text/html",
    "application/feed+json",
    "application/json",
)
PAGE_TYPES = ("text/html", "application/xhtml+xml")


@dataclass
class FetchResult:
    """Outcome of one fetch (after following redirects).

    Attributes:
      url: URL requested.
      final_url: URL of the last response (after redirects).
      status: HTTP status of the last response; 0 when no response was received.
      headers: response headers, lower-case names.
      body: body bytes with transfer and content codings undone (gunzipped), ``None`` on error or for 304.
      error_kind: "" on success, else a short reason (see module doc).
      error: human-readable detail.
      retry_after_s: ``Retry-After`` in seconds for 429/503, else ``None``.
      fetch_time: UTC epoch seconds when the response started.
      elapsed_s: wall time of the whole fetch.
      server_ip: peer address actually connected to ("" when unknown).
      truncated: True when a fetch with ``prefix_limit`` kept only the body's first
        ``prefix_limit`` decoded bytes (the body went on past them).
      refused_url: with ``error_kind`` ``unsafe_address``, the URL whose address the guard refused (``url``
        itself, or a redirect target).
    """

    url: str
    final_url: str = ""
    status: int = 0
    headers: dict = field(default_factory=dict)
    body: bytes | None = None
    error_kind: str = ""
    error: str = ""
    retry_after_s: float | None = None
    fetch_time: float = 0.0
    elapsed_s: float = 0.0
    server_ip: str = ""
    truncated: bool = False
    refused_url: str = ""

    @property
    def ok(self) -> bool:
        """True for a 2xx response whose body was read."""
        return not self.error_kind and 200 <= self.status < 300 and self.body is not None


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or HTTP-date); ``None`` if invalid."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    when = http_date_to_epoch(value)
    if when is None:
        return None
    return max(0.0, when - now)


class _PeerResponse(aiohttp.ClientResponse):
    """A response that remembers the peer address of its connection (``peer``: ``(ip, port, ...)``).

    aiohttp releases the connection as soon as a small body has arrived, so ``resp.connection``
    may already be gone when the headers are handed over; the address is read when the response starts.
    """

    peer = None

    async def start(self, connection):  # noqa: D102 - aiohttp's hook
        transport = connection.transport
        self.peer = transport.get_extra_info("peername") if transport is not None else None
        return await super().start(connection)


def _lower_headers(headers) -> dict:
    """Response headers as ``{lower-case name: value}``; repeated fields joined with ", " (RFC 9110 5.3)."""
    out: dict[str, str] = {}
    for k, v in headers.items():
        k = k.lower()
        out[k] = f"{out[k]}, {v}" if k in out else v
    return out


def _mime(content_type: str) -> str:
    return content_type.split(";")[0].strip().lower()


class ForbiddenResolution(OSError):
    """:class:`SafeResolver` found only forbidden addresses for a host (no connection was opened)."""


def _forbidden_resolution(exc: BaseException) -> ForbiddenResolution | None:
    """The :class:`ForbiddenResolution` behind an aiohttp connection error, if any (aiohttp wraps the
    resolver's exception; it is the error itself, its ``os_error`` or somewhere in its cause chain)."""
    seen = 0
    while exc is not None and seen < 5:
        if isinstance(exc, ForbiddenResolution):
            return exc
        inner = getattr(exc, "os_error", None)
        if isinstance(inner, ForbiddenResolution):
            return inner
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


class SafeResolver(aiohttp.abc.AbstractResolver):
    """aiohttp's resolver keeping only the addresses :meth:`AddressPolicy.ip_allowed` allows.

    :meth:`Fetcher._check_host` resolves a host before each request, but the connector resolves it
    again to connect; a rebinding DNS answer (public the first time, 10.0.0.1 or 169.254.169.254 the
    second) would otherwise open one connection to a forbidden address before the peer check refuses
    the response. With this resolver that connection is never opened. IP literals (and ``--resolve``
    overrides, which put one in the request URL) do not go through a resolver; the peer check covers them.
    """

    def __init__(self, policy: AddressPolicy, inner: aiohttp.abc.AbstractResolver | None = None):
        self._policy = policy
        self._inner = inner or aiohttp.resolver.DefaultResolver()

    async def resolve(self, host: str, port: int = 0, family: int = socket.AF_INET) -> list:
        """The inner resolver's answers for ``host`` whose address is allowed.

        Raises:
          ForbiddenResolution: every address of ``host`` is forbidden (the fetch reports
            ``unsafe_address``).
        """
        infos = await self._inner.resolve(host, port, family)
        allowed = [i for i in infos if self._policy.ip_allowed(i["host"])]
        if not allowed:
            forbidden = ", ".join(sorted({i["host"] for i in infos}))[:200]
            raise ForbiddenResolution(f"{host} resolves only to forbidden addresses ({forbidden})")
        return allowed

    async def close(self) -> None:
        """Closes the inner resolver."""
        await self._inner.close()


class Fetcher:
    """Fetches URLs politely-agnostically (politeness is the frontier's job) but safely.

    Args:
      config: limits and user agent.
      policy: address policy; defaults to one built from ``config.allow_hosts``.
      clock: returns UTC epoch seconds (injected in tests).
    """

    def __init__(self, config: CrawlerConfig, policy: AddressPolicy | None = None, clock=time.time):
        self.config = config
        self.policy = policy or AddressPolicy(config.allow_hosts)
        self.clock = clock
        self._session: aiohttp.ClientSession | None = None
        self._checked: dict[tuple, float] = {}  # (host, port, resolve_as) -> verdict expiry (monotonic s)

    def _client(self) -> aiohttp.ClientSession:
        """The session, created on first use inside the running event loop (aiohttp requires one)."""
        if self._session is None:
            connector = aiohttp.TCPConnector(
                limit=max(10, self.config.concurrency * 2),
                ttl_dns_cache=max(1, int(self.config.dns_cache_s)),
                resolver=SafeResolver(self.policy),
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(
                    total=None, connect=self.config.connect_timeout_s, sock_read=self.config.read_timeout_s
                ),
                headers={"User-Agent": self.config.user_agent, "Accept-Encoding": "gzip, deflate"},
                auto_decompress=False,  # raw bytes: newsflow.crawler.inflate bounds the inflated size
                trust_env=False,
                cookie_jar=aiohttp.DummyCookieJar(),  # no state carried between requests
                max_line_size=65536,
                max_field_size=65536,
                max_headers=512,
                response_class=_PeerResponse,
            )
        return self._session

    async def aclose(self) -> None:
        """Closes the HTTP session (and its connections)."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _check_host(self, host: str, port: int, resolve_as: str | None) -> None:
        """:meth:`AddressPolicy.check_host`, with an allowed verdict cached for ``dns_cache_s`` seconds."""
        key = (host.lower(), port, resolve_as)
        now = time.monotonic()
        if self._checked.get(key, 0.0) > now:
            return
        await self.policy.check_host(host, port, resolve_as=resolve_as)
        if len(self._checked) > 10_000:
            self._checked.clear()
        self._checked[key] = now + self.config.dns_cache_s

    def _override(self, host: str) -> tuple[str, int] | None:
        r = self.config.resolve.get(host.lower()) or self.config.resolve.get("*")
        if not r:
            return None
        ip, _, port = r.rpartition(":")
        return ip, int(port)

    async def fetch(
        self,
        url: str,
        etag: str = "",
        last_modified: str = "",
        accept_types: Sequence[str] | None = None,
        validators_url: str = "",
        prefix_limit: int | None = None,
    ) -> FetchResult:
        """GETs ``url``, following up to ``max_redirects`` redirects, each target checked for safety.

        Args:
          url: absolute http(s) URL.
          etag: previous ``ETag`` (sent as ``If-None-Match``).
          last_modified: previous ``Last-Modified`` (sent as ``If-Modified-Since``).
          accept_types: MIME types accepted for a 2xx body; others give ``bad_content_type``.
            A response without ``Content-Type`` is accepted.
          validators_url: URL whose response gave ``etag``/``last_modified`` (the previous
            ``final_url``); they are sent to the hop that requests it, so a redirected feed
            still gets conditional requests. Empty: sent to ``url`` (the first hop).
          prefix_limit: keep at most this many decoded body bytes instead of refusing a body over
            ``max_body_bytes`` (which it replaces for this request): a longer body, whatever its
            ``Content-Length``, gives its first ``prefix_limit`` bytes with ``truncated`` set, and
            the rest is not read. ``None``: bodies over ``max_body_bytes`` are ``too_large``.

        Returns:
          A :class:`FetchResult`; never raises for network/HTTP problems.

        Raises:
          ValueError: ``prefix_limit`` is not positive (a caller's mistake, not the server's).
        """
        if prefix_limit is not None and prefix_limit <= 0:
            raise ValueError(f"prefix_limit must be > 0, got {prefix_limit}")
        start = time.monotonic()
        result = FetchResult(url=url, final_url=url, fetch_time=self.clock())
        try:
            async with asyncio.timeout(self.config.total_timeout_s):
                await self._fetch(url, etag, last_modified, accept_types, result, validators_url or url, prefix_limit)
        except TimeoutError:
            result.error_kind, result.error, result.body, result.truncated = (
                "timeout",
                (f"no complete response within {self.config.total_timeout_s:.1f}s"),
                None,
                False,
            )
        result.elapsed_s = time.monotonic() - start
        return result

    async def _fetch(
        self,
        url,
        etag,
        last_modified,
        accept_types,
        result: FetchResult,
        validators_url: str,
        prefix_limit: int | None = None,
    ) -> None:
        cap = self.config.max_body_bytes if prefix_limit is None else prefix_limit
        seen = {url}
        current = url
        for _hop in range(self.config.max_redirects + 1):
            try:
                parts = urlsplit(current)
                port = parts.port  # ValueError for a port out of 0-65535 or not a number
            except ValueError as e:
                result.error_kind, result.error = "bad_url", f"unparseable URL {current[:200]!r}: {e}"
                return
            if parts.scheme not in ("http", "https") or not parts.hostname:
                result.error_kind, result.error = "bad_url", f"not an absolute http(s) URL: {current[:200]}"
                return
            host = parts.hostname
            port = port or (443 if parts.scheme == "https" else 80)
            override = self._override(host)
            try:
                await self._check_host(host, port, override[0] if override else None)
            except UnsafeAddressError as e:
                result.error_kind, result.error, result.refused_url = "unsafe_address", str(e), current
                return
            except HostResolutionError as e:
                result.error_kind, result.error = "dns", str(e)
                return
            headers = {}
            if current == validators_url and etag:
                headers["If-None-Match"] = etag
            if current == validators_url and last_modified:
                headers["If-Modified-Since"] = last_modified
            request_url = current
            if override:
                headers["Host"] = parts.netloc
                request_url = urlunsplit(("http", f"{override[0]}:{override[1]}", parts.path or "/", parts.query, ""))
            result.final_url = current
            try:
                async with self._client().get(
                    yarl.URL(request_url, encoded=True), headers=headers, allow_redirects=False
                ) as resp:
                    result.status = resp.status
                    result.headers = _lower_headers(resp.headers)
                    result.fetch_time = self.clock()
                    addr = resp.peer
                    if addr:
                        result.server_ip = str(addr[0])
                        if not self.policy.ip_allowed(result.server_ip):
                            result.error_kind, result.refused_url = "unsafe_address", current
                            result.error = f"connected peer {result.server_ip} is a forbidden address"
                            return
                    if resp.status in REDIRECT_STATUSES and "location" in result.headers:
                        nxt = urljoin(current, result.headers["location"].strip())
                        nxt = nxt.split("#")[0]
                        if nxt in seen:
                            result.error_kind, result.error = "redirect_loop", f"redirect loop back to {nxt[:200]}"
                            return
                        seen.add(nxt)
                        current = nxt
                        continue
                    if resp.status in (429, 503):
                        result.retry_after_s = parse_retry_after(result.headers.get("retry-after"), self.clock())
                    if resp.status == 304 or not (200 <= resp.status < 300):
                        return
                    ctype = _mime(result.headers.get("content-type", ""))
                    if accept_types and ctype and ctype not in accept_types:
                        result.error_kind, result.error = "bad_content_type", f"content type {ctype!r} not accepted"
                        return
                    declared = result.headers.get("content-length")
                    if (
                        prefix_limit is None  # a prefix fetch reads what it keeps, whatever the length
                        and declared
                        and declared.isdigit()
                        and "content-encoding" not in result.headers
                        and int(declared) > cap
                    ):
                        result.error_kind = "too_large"
                        result.error = f"Content-Length {declared} exceeds {cap}"
                        return
                    # raw (still encoded) bytes, inflated step by step under the cap (newsflow.crawler.inflate)
                    try:
                        decoder = BoundedDecoder(
                            result.headers.get("content-encoding", ""), cap, keep_prefix=prefix_limit is not None
                        )
                        async for chunk in resp.content.iter_any():
                            decoder.feed(chunk)
                            if decoder.truncated:
                                break  # the prefix is complete; the rest is not read
                    except BodyTooLarge:
                        result.error_kind = "too_large"
                        result.error = f"body exceeds {cap} bytes"
                        return
                    except UnsupportedEncoding as e:
                        result.error_kind, result.error = "unsupported_encoding", str(e)
                        return
                    except CorruptEncoding as e:
                        result.error_kind, result.error = "bad_encoding", str(e)[:300]
                        return
                    if prefix_limit is not None and not decoder.complete:
                        # a compressed robots.txt whose stream stopped early is not a (shorter) file: its
                        # last rule may be cut into a shorter one (RFC 9309 2.3.1.4 picks the longest match)
                        result.error_kind = "bad_encoding"
                        result.error = f"{result.headers.get('content-encoding', '')} stream ended before its end"
                        return
                    result.body = decoder.finish()
                    result.truncated = decoder.truncated
                    return
            except TimeoutError as e:  # aiohttp's connect and socket-read timeouts
                result.error_kind, result.error = "timeout", f"{type(e).__name__}: {e}"
                return
            except (aiohttp.ClientError, OSError, ValueError) as e:
                refused = _forbidden_resolution(e)
                if refused is not None:  # the connector's own lookup gave only forbidden addresses
                    result.error_kind, result.error = "unsafe_address", str(refused)[:300]
                    result.refused_url = current
                    return
                result.error_kind, result.error = "network", f"{type(e).__name__}: {e}"[:300]
                return
        result.error_kind = "too_many_redirects"
        result.error = f"more than {self.config.max_redirects} redirects"
