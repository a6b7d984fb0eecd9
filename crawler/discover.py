"""Feed discovery for ``newsflow sources add``: from a home page, feed or news-sitemap URL to feeds.

Order (the first step that finds something wins; every request goes through the crawler's
:class:`newsflow.crawler.fetch.Fetcher`, so the address-safety guard applies to every hop):

1. **The URL itself.** A response that parses as RSS/Atom/RDF/JSON Feed (:func:`newsflow.crawler.feeds.parse_feed`)
   is a feed; an XML ``<urlset>``/``<sitemapindex>`` is a sitemap. Either is the answer.
2. **Alternate links.** In an HTML page, ``<link rel="alternate">`` with type
   ``application/rss+xml``, ``application/atom+xml``, ``application/rdf+xml``,
   ``application/feed+json`` or ``application/json`` (resolved against ``<base href>`` and the
   final URL). Up to ``max_candidates`` are fetched and kept only if they parse as feeds.
3. **Common feed paths** on the page's origin (:data:`COMMON_FEED_PATHS`: ``/feed``, ``/rss``,
   ``/rss.xml``, ``/feed.xml``, ``/atom.xml``, ``/index.xml``, ``/feeds/posts/default``), in order,
   until one parses as a feed.
4. **robots.txt sitemaps**: the ``Sitemap:`` lines of the origin's robots.txt; a sitemap is kept
   when it is a news sitemap (it uses the ``http://www.google.com/schemas/sitemap-news/0.9``
   namespace, or it is an index and its URL says ``news``), at most ``max_sitemaps``.

Politeness: robots.txt of each origin is fetched first and obeyed (RFC 9309 rules of
:mod:`newsflow.crawler.robots`: a 5xx/unreachable robots.txt disallows everything), one request at a time,
at least ``host_delay_s`` between two requests to one host (raised to the robots.txt
``Crawl-delay``, at most ``max_host_delay_s``), and at most ``max_requests`` requests in all.
The clock and the sleep are injectable.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

from newsflow.crawler.feeds import FeedParseError, parse_feed, parse_news_sitemap
from newsflow.crawler.fetch import Fetcher, FetchResult
from newsflow.crawler.robots import RobotsMatcher, RobotsPolicy

FEED_LINK_TYPES = frozenset(
    {
        "application/rss+xml",
        "application/atom+xml",
        "application/rdf+xml",
        "application/feed+json",
        "application/json",
        "application/x-rss+xml",
    }
)
COMMON_FEED_PATHS = ("/feed", "/rss", "/rss.xml", "/feed.xml", "/atom.xml", "/index.xml", "/feeds/posts/default")
NEWS_SITEMAP_NS = b"http://www.google.com/schemas/sitemap-news/0.9"


@dataclass(frozen=True)
class DiscoveryConfig:
    """Limits of one discovery (times in seconds).

    Attributes:
      max_requests: HTTP requests at most, robots.txt included.
      host_delay_s: minimum gap between two requests to one host.
      max_host_delay_s: cap on a robots.txt ``Crawl-delay``.
      max_candidates: alternate-link feeds fetched at most.
      max_sitemaps: robots.txt sitemaps fetched at most.
      robots_agent: product token matched against robots.txt groups.
    """

    max_requests: int = 16
    host_delay_s: float = 1.0
    max_host_delay_s: float = 10.0
    max_candidates: int = 5
    max_sitemaps: int = 3
    robots_agent: str = "newsflow-crawler"


@dataclass(frozen=True)
class Found:
    """A feed or sitemap that was fetched and parsed: ``url`` (final URL after redirects), ``kind``
    (``"feed"``/``"sitemap"``), ``title``, ``how`` (``given``, ``link``, ``common-path``, ``robots``)
    and ``items`` (entries in the document)."""

    url: str
    kind: str
    title: str
    how: str
    items: int


@dataclass
class Discovery:
    """Result of :meth:`Discoverer.discover`: what was ``found`` (best first) and every request
    ``tried`` as ``(url, outcome)`` (``"200 text/html"``, ``"robots.txt disallows"``, ``"not a feed"``...)."""

    url: str
    found: list[Found] = field(default_factory=list)
    tried: list[tuple[str, str]] = field(default_factory=list)
    #: why a host could not be asked at all, by origin (``"host unreachable: ..."`` or
    #: ``"robots.txt answered 503 ..."``); empty when every host answered.
    blocked: dict[str, str] = field(default_factory=dict)


class _Links(HTMLParser):
    """Collects ``<base href>`` and feed ``<link rel="alternate">`` tags of an HTML page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.base = ""
        self.links: list[tuple[str, str]] = []  # (href, title)

    def handle_starttag(self, tag, attrs):
        a = {k.lower(): (v or "") for k, v in attrs}
        if tag == "base" and a.get("href") and not self.base:
            self.base = a["href"].strip()
        elif tag == "link":
            rels = a.get("rel", "").lower().split()
            ctype = a.get("type", "").split(";")[0].strip().lower()
            if "alternate" in rels and ctype in FEED_LINK_TYPES and a.get("href", "").strip():
                self.links.append((a["href"].strip(), a.get("title", "").strip()))

    handle_startendtag = handle_starttag


def alternate_feed_links(html: bytes, page_url: str) -> list[tuple[str, str]]:
    """Absolute http(s) URLs and titles of the feed ``<link rel="alternate">`` tags of a page, in page
    order, without repeats (``page_url`` and ``<base href>`` resolve relative links)."""
    parser = _Links()
    try:
        parser.feed(html[:2_000_000].decode("utf-8", "replace"))
        parser.close()
    except Exception:  # noqa: BLE001 - html.parser is lenient; whatever it raises, keep what was read
        pass
    base = urljoin(page_url, parser.base) if parser.base else page_url
    out, seen = [], set()
    for href, title in parser.links:
        url = urljoin(base, href).split("#")[0]
        if urlsplit(url).scheme in ("http", "https") and url not in seen:
            seen.add(url)
            out.append((url, title))
    return out


def classify(res: FetchResult) -> tuple[str, str, int] | None:
    """``("feed"|"sitemap", title, items)`` when a fetched body is a feed or a sitemap, else ``None``."""
    body = res.body or b""
    head = body[:2048].lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if b"<urlset" in head or b"<sitemapindex" in head:
        try:
            entries, children = parse_news_sitemap(body, res.final_url)
        except (FeedParseError, ValueError):
            return None
        return "sitemap", "", len(entries) + len(children)
    try:
        parsed = parse_feed(body, res.final_url, res.headers.get("content-type", ""))
    except (FeedParseError, ValueError):
        return None
    if not parsed.version:
        return None
    return "feed", parsed.title, len(parsed.entries)


class Discoverer:
    """Finds the feeds of a URL politely (module docstring).

    Args:
      fetcher: the crawler's fetcher (safety guard, limits, user agent).
      config: limits.
      clock: monotonic seconds (for politeness gaps).
      sleep: ``async sleep(seconds)``.
    """

    def __init__(
        self,
        fetcher: Fetcher,
        config: DiscoveryConfig = DiscoveryConfig(),
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ):
        self.fetcher = fetcher
        self.config = config
        self.clock = clock
        self.sleep = sleep
        self._last: dict[str, float] = {}
        self._delay: dict[str, float] = {}
        self._robots: dict[str, RobotsPolicy] = {}
        self._requests = 0

    async def _get(self, url: str, result: Discovery) -> FetchResult | None:
        """One polite GET (robots.txt first); ``None`` when refused or over budget (noted in ``tried``)."""
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}".lower()
        if origin not in self._robots:
            robots_url = origin + "/robots.txt"
            res = await self._raw(robots_url, origin, result)
            if res is None:
                return None
            policy = RobotsPolicy.from_fetch(
                origin, res.status, res.body or b"", time.time(), retry_after_s=res.retry_after_s
            )
            self._robots[origin] = policy
            if policy.disallow_all:
                # RFC 9309 2.3.1.4: an unreachable host or a 5xx/429 robots.txt means "disallow all"
                # for now; say which, instead of labelling every later URL "robots.txt disallows"
                if res.error_kind:
                    why = f"host unreachable ({res.error_kind}: {res.error})"[:300]
                else:
                    why = f"robots.txt answered {res.status}, host disallowed for now (RFC 9309 2.3.1.4)"
                result.blocked[origin] = why
            delay = policy.crawl_delay(self.config.robots_agent)
            if delay:
                self._delay[origin] = min(self.config.max_host_delay_s, max(self.config.host_delay_s, delay))
        if origin in result.blocked:
            result.tried.append((url, f"skipped: {result.blocked[origin]}"))
            return None
        if not self._robots[origin].allowed(url, self.config.robots_agent):
            result.tried.append((url, "robots.txt disallows"))
            return None
        return await self._raw(url, origin, result)

    async def _raw(self, url: str, origin: str, result: Discovery) -> FetchResult | None:
        if self._requests >= self.config.max_requests:
            result.tried.append((url, f"skipped: request budget of {self.config.max_requests} spent"))
            return None
        gap = self._delay.get(origin, self.config.host_delay_s)
        last = self._last.get(origin)
        if last is not None:
            wait = last + gap - self.clock()
            if wait > 0:
                await self.sleep(wait)
        self._requests += 1
        res = await self.fetcher.fetch(url)
        self._last[origin] = self.clock()
        if res.error_kind:
            result.tried.append((url, f"{res.error_kind}: {res.error}"[:300]))
        else:
            ctype = res.headers.get("content-type", "").split(";")[0].strip()
            result.tried.append((url, f"{res.status} {ctype}".strip()))
        return res

    def robots_sitemaps(self, origin: str) -> list[str]:
        """The ``Sitemap:`` URLs of an origin's robots.txt fetched so far (``[]`` if none)."""
        policy = self._robots.get(origin)
        if policy is None or not policy.body:
            return []
        return RobotsMatcher(policy.body).sitemaps

    async def discover(self, url: str) -> Discovery:
        """Runs the discovery steps of the module docstring for ``url``.

        Returns:
          A :class:`Discovery`; ``found`` is empty when nothing was found (see ``tried``).
        """
        result = Discovery(url)
        res = await self._get(url, result)
        page_url = url
        if res is not None and res.ok:
            page_url = res.final_url
            kind = classify(res)
            if kind is not None:
                result.found.append(Found(res.final_url, kind[0], kind[1], "given", kind[2]))
                return result
            for link, title in alternate_feed_links(res.body or b"", page_url)[: self.config.max_candidates]:
                got = await self._get(link, result)
                if got is not None and got.ok and (k := classify(got)) is not None and k[0] == "feed":
                    result.found.append(Found(got.final_url, "feed", k[1] or title, "link", k[2]))
                elif got is not None and got.ok:
                    result.tried[-1] = (link, result.tried[-1][1] + " (not a feed)")
            if result.found:
                return result
        parts = urlsplit(page_url)
        origin = f"{parts.scheme}://{parts.netloc}".lower()
        for path in COMMON_FEED_PATHS:
            if origin in result.blocked:
                break  # nothing on this host can be fetched now; one "skipped" line said why
            candidate = origin + path
            if candidate == url:
                continue
            got = await self._get(candidate, result)
            if got is not None and got.ok and (k := classify(got)) is not None and k[0] == "feed":
                result.found.append(Found(got.final_url, "feed", k[1], "common-path", k[2]))
                return result
            if self._requests >= self.config.max_requests:
                break
        for sm in self.robots_sitemaps(origin)[: self.config.max_sitemaps]:
            got = await self._get(sm, result)
            if got is None or not got.ok or (k := classify(got)) is None or k[0] != "sitemap":
                continue
            body = got.body or b""
            is_index = b"<sitemapindex" in body[:4096].lower()
            if NEWS_SITEMAP_NS in body or (is_index and "news" in sm.lower()):
                result.found.append(Found(got.final_url, "sitemap", "", "robots", k[2]))
            else:
                result.tried[-1] = (sm, result.tried[-1][1] + " (a sitemap, not a news sitemap)")
        return result
