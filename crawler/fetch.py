"""HTTP fetching with limits: timeouts, body cap, redirect limit, content-type checks, SSRF guard.

:class:`Fetcher` wraps one ``httpx.AsyncClient`` and never raises for
network or protocol trouble: every outcome is a :class:`FetchResult` whose
``error_kind`` says what went wrong (``timeout``, ``too_large``,
``redirect_loop``, ``too_many_redirects``, ``unsafe_address``,
``dns`` (the host name does not resolve), ``bad_content_type``, ``network``, ``bad_url``, ``unsupported_encoding``,
``bad_encoding``).

Bodies are read raw and their ``Content-Encoding`` undone by
:class:`crawler.inflate.BoundedDecoder`, which inflates in 64 KiB steps and
stops at ``max_body_bytes`` of decoded output (``too_large``), so a
decompression bomb costs at most the cap in memory, not its inflated size.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit, urlunsplit

import httpx

from crawler.config import CrawlerConfig
from crawler.inflate import BodyTooLarge, BoundedDecoder, CorruptEncoding, UnsupportedEncoding
from crawler.safety import AddressPolicy, HostResolutionError, UnsafeAddressError
from newsflow.timeutil import http_date_to_epoch

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


def _mime(content_type: str) -> str:
    return content_type.split(";")[0].strip().lower()


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
        timeout = httpx.Timeout(config.read_timeout_s, connect=config.connect_timeout_s)
        self._client = httpx.AsyncClient(
            timeout=timeout,
            follow_redirects=False,
            trust_env=False,
            limits=httpx.Limits(max_connections=max(10, config.concurrency * 2)),
            headers={"User-Agent": config.user_agent, "Accept-Encoding": "gzip, deflate"},
        )

    async def aclose(self) -> None:
        """Closes the HTTP client."""
        await self._client.aclose()

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

        Returns:
          A :class:`FetchResult`; never raises for network/HTTP problems.
        """
        start = time.monotonic()
        result = FetchResult(url=url, final_url=url, fetch_time=self.clock())
        try:
            async with asyncio.timeout(self.config.total_timeout_s):
                await self._fetch(url, etag, last_modified, accept_types, result, validators_url or url)
        except TimeoutError:
            result.error_kind, result.error, result.body = (
                "timeout",
                (f"no complete response within {self.config.total_timeout_s:.1f}s"),
                None,
            )
        result.elapsed_s = time.monotonic() - start
        return result

    async def _fetch(self, url, etag, last_modified, accept_types, result: FetchResult, validators_url: str) -> None:
        seen = {url}
        current = url
        for _hop in range(self.config.max_redirects + 1):
            parts = urlsplit(current)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                result.error_kind, result.error = "bad_url", f"not an absolute http(s) URL: {current[:200]}"
                return
            host = parts.hostname
            port = parts.port or (443 if parts.scheme == "https" else 80)
            override = self._override(host)
            try:
                await self.policy.check_host(host, port, resolve_as=override[0] if override else None)
            except UnsafeAddressError as e:
                result.error_kind, result.error = "unsafe_address", str(e)
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
                async with self._client.stream("GET", request_url, headers=headers) as resp:
                    result.status = resp.status_code
                    result.headers = {k.lower(): v for k, v in resp.headers.items()}
                    result.fetch_time = self.clock()
                    stream = resp.extensions.get("network_stream")
                    addr = stream.get_extra_info("server_addr") if stream is not None else None
                    if addr:
                        result.server_ip = str(addr[0])
                        if not self.policy.ip_allowed(result.server_ip):
                            result.error_kind = "unsafe_address"
                            result.error = f"connected peer {result.server_ip} is a forbidden address"
                            return
                    if resp.status_code in REDIRECT_STATUSES and "location" in result.headers:
                        nxt = urljoin(current, result.headers["location"].strip())
                        nxt = nxt.split("#")[0]
                        if nxt in seen:
                            result.error_kind, result.error = "redirect_loop", f"redirect loop back to {nxt[:200]}"
                            return
                        seen.add(nxt)
                        current = nxt
                        continue
                    if resp.status_code in (429, 503):
                        result.retry_after_s = parse_retry_after(resp.headers.get("retry-after"), self.clock())
                    if resp.status_code == 304 or not (200 <= resp.status_code < 300):
                        return
                    ctype = _mime(resp.headers.get("content-type", ""))
                    if accept_types and ctype and ctype not in accept_types:
                        result.error_kind, result.error = "bad_content_type", f"content type {ctype!r} not accepted"
                        return
                    declared = resp.headers.get("content-length")
                    if (
                        declared
                        and declared.isdigit()
                        and "content-encoding" not in result.headers
                        and int(declared) > self.config.max_body_bytes
                    ):
                        result.error_kind = "too_large"
                        result.error = f"Content-Length {declared} exceeds {self.config.max_body_bytes}"
                        return
                    # raw (still encoded) bytes, inflated step by step under the cap (crawler.inflate)
                    try:
                        decoder = BoundedDecoder(resp.headers.get("content-encoding", ""), self.config.max_body_bytes)
                        async for chunk in resp.aiter_raw():
                            decoder.feed(chunk)
                    except BodyTooLarge:
                        result.error_kind = "too_large"
                        result.error = f"body exceeds {self.config.max_body_bytes} bytes"
                        return
                    except UnsupportedEncoding as e:
                        result.error_kind, result.error = "unsupported_encoding", str(e)
                        return
                    except CorruptEncoding as e:
                        result.error_kind, result.error = "bad_encoding", str(e)[:300]
                        return
                    result.body = decoder.finish()
                    return
            except httpx.TimeoutException as e:
                result.error_kind, result.error = "timeout", f"{type(e).__name__}: {e}"
                return
            except (httpx.HTTPError, OSError, ValueError) as e:
                result.error_kind, result.error = "network", f"{type(e).__name__}: {e}"[:300]
                return
        result.error_kind = "too_many_redirects"
        result.error = f"more than {self.config.max_redirects} redirects"
