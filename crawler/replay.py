"""Local replay of the web: the bundled real corpus served on 127.0.0.1 as publisher sites.

One HTTP server answers for every publisher host (virtual hosts by the ``Host``
header); the crawler reaches it with ``resolve={"*": "127.0.0.1:PORT"}`` and
``allow_hosts=("127.0.0.1",)``, so landed documents keep their real URLs.

Per host it serves:

* ``/robots.txt``: ``Allow: /`` for most hosts; about 1 host in 5 asks for
  ``Crawl-delay: 1`` and disallows ``/private/``; about 1 in 29 answers 500
  (crawlers must then treat the host as disallowed for a while).
* ``/feed.xml``: RSS 2.0 with the host's items whose publish time has passed on
  the replay clock (newest 20, ``ETag`` and ``304`` supported). The replay clock
  runs ``speed`` times faster than real time from ``start_fraction`` into the
  corpus's time span, so items appear over time as if being published.
* article pages at their real path: pages from ``pages.jsonl.gz`` are served
  with their original bytes and content type; headline-only items
  (``headlines.jsonl.gz``, no page body in the corpus) answer 404, so the
  crawler lands them feed-only. By hash of the URL, ~3% of pages are slow
  (``slow_s`` seconds), ~3% answer 503 with ``Retry-After: 1`` on the first
  request, ~2% always answer 500.

Pages carry no publish time in the corpus; each gets a deterministic one spread
over the headline time span (by hash of its URL).

Control endpoint (any Host; the server listens on 127.0.0.1 only): ``POST /_replay/publish``
with a JSON object ``{"url", "title", "body", "summary"?, "content_type"?, "published"?}``
publishes a new article at once: it shows in its host's feed from ``published`` (UTC epoch
seconds on the replay clock, default: now on that clock) and its page serves ``body`` (UTF-8
text) without injected failures. Answers ``200 {"url", "published"}``, or ``400`` with the reason.
Benchmarks use it to time a new article from its feed to the API (``benchmarks.crawl_to_display``).
With ``start_at`` (``newsflow replay-web --start-time now --speed 1``) the replay clock is the
wall clock, so the whole corpus is already published and new articles are published "now".
"""

from __future__ import annotations

import email.utils
import gzip
import hashlib
import html
import json
import os
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from newsflow.crawler.httpserver import HttpServer, Request, Response
from newsflow.schemas import RawDocument


def _h(s: str, mod: int) -> int:
    return int(hashlib.sha1(s.encode("utf-8")).hexdigest()[:8], 16) % mod


@dataclass(frozen=True)
class ReplayItem:
    """One item of a replayed site: URL, path key, publish time and (for pages) the page."""

    url: str
    path: str
    published: float
    title: str
    summary: str
    body: bytes | None
    content_type: str
    source_name: str


def load_corpus(corpus_dir: str) -> list[RawDocument]:
    """Reads ``pages.jsonl.gz`` and ``headlines.jsonl.gz`` (whichever exist) from ``corpus_dir``.

    Raises:
      FileNotFoundError: neither file exists.
    """
    docs = []
    found = False
    for name in ("pages.jsonl.gz", "headlines.jsonl.gz"):
        path = os.path.join(corpus_dir, name)
        if not os.path.exists(path):
            continue
        found = True
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    docs.append(RawDocument.from_json_dict(json.loads(line)))
    if not found:
        raise FileNotFoundError(f"no pages.jsonl.gz or headlines.jsonl.gz in {corpus_dir!r}")
    return docs


def _path_of(url: str) -> str:
    p = urlsplit(url)
    return (p.path or "/") + (("?" + p.query) if p.query else "")


class ReplayWeb:
    """The replayed sites.

    Args:
      docs: RawDocuments (pages with ``body``, feed-only headlines without).
      speed: replay-clock seconds per real second.
      start_fraction: where in the corpus time span the replay clock starts (0..1).
      slow_s: delay of the slow pages.
      clock: monotonic seconds source.
    """

    def __init__(
        self,
        docs: list[RawDocument],
        speed: float = 60.0,
        start_fraction: float = 0.1,
        slow_s: float = 2.0,
        clock=time.monotonic,
        inject_failures: bool = True,
        start_at: float | None = None,
    ):
        times = [d.published_time for d in docs if d.published_time]
        lo, hi = (min(times), max(times)) if times else (0.0, 86400.0)
        self.span = (lo, hi)
        self.sites: dict[str, dict[str, ReplayItem]] = {}
        for d in docs:
            host = (urlsplit(d.url).hostname or "").lower()
            if not host:
                continue
            pub = d.published_time or (lo + (hi - lo) * _h(d.url, 10_000) / 10_000)
            title = d.title or ""
            if not title and d.body:
                import re

                m = re.search(rb"<title[^>]*>(.*?)</title>", d.body[:200_000], re.S | re.I)
                title = html.unescape(m.group(1).decode("utf-8", "replace").strip()) if m else ""
            item = ReplayItem(
                d.url,
                _path_of(d.url),
                pub,
                title or d.url,
                d.summary or "",
                d.body,
                d.content_type or "text/html",
                d.source_name or host,
            )
            self.sites.setdefault(host, {})[item.path] = item
        self._sorted = {h: sorted(v.values(), key=lambda i: i.published) for h, v in self.sites.items()}
        self.speed = speed
        self.clock = clock
        self.t0 = clock()
        self.start = lo + (hi - lo) * start_fraction if start_at is None else start_at
        self._published: set[str] = set()  # URLs added through the control endpoint (never fail)
        self.slow_s = slow_s
        self.inject_failures = inject_failures
        self._hits: dict[str, int] = {}
        self._lock = threading.Lock()

    def replay_now(self) -> float:
        """Current time on the replay clock (UTC epoch seconds in the corpus's span)."""
        return self.start + (self.clock() - self.t0) * self.speed

    def add_item(self, item: ReplayItem) -> None:
        """Publishes an extra item (benchmarks: a newly published article)."""
        host = (urlsplit(item.url).hostname or "").lower()
        with self._lock:
            self.sites.setdefault(host, {})[item.path] = item
            self._sorted[host] = sorted(self.sites[host].values(), key=lambda i: i.published)

    def publish_json(self, body: bytes) -> Response:
        """``POST /_replay/publish`` (module doc): adds the article; 400 on a malformed request."""
        try:
            d = json.loads(body.decode("utf-8"))
            url, title, text = str(d["url"]), str(d["title"]), str(d["body"])
            host = (urlsplit(url).hostname or "").lower()
            if not host or not url.startswith(("http://", "https://")):
                raise ValueError(f"not an absolute http(s) URL: {url!r}")
            published = float(d["published"]) if d.get("published") is not None else self.replay_now()
        except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as e:
            return Response(
                400, {"Content-Type": "application/json"}, json.dumps({"error": f"{type(e).__name__}: {e}"}).encode()
            )
        item = ReplayItem(
            url,
            _path_of(url),
            published,
            title,
            str(d.get("summary") or ""),
            text.encode("utf-8"),
            str(d.get("content_type") or "text/html; charset=utf-8"),
            str(d.get("source_name") or self._source_name(host)),
        )
        with self._lock:
            self._published.add(url)
        self.add_item(item)
        return Response(
            200, {"Content-Type": "application/json"}, json.dumps({"url": url, "published": published}).encode()
        )

    def _source_name(self, host: str) -> str:
        items = self._sorted.get(host) or []
        return items[0].source_name if items else host

    def feed_urls(self) -> list[str]:
        """``http://HOST/feed.xml`` for every replayed host, sorted."""
        return [f"http://{h}/feed.xml" for h in sorted(self.sites)]

    def visible(self, host: str, now: float | None = None) -> list[ReplayItem]:
        """Items of ``host`` already published on the replay clock, newest first (at most 20)."""
        now = self.replay_now() if now is None else now
        items = [i for i in self._sorted.get(host, []) if i.published <= now]
        return items[::-1][:20]

    def robots_txt(self, host: str) -> Response:
        """The host's robots.txt response."""
        if self.inject_failures and _h("robots:" + host, 29) == 0:
            return Response(500, {"Content-Type": "text/plain"}, b"internal error")
        if _h("delay:" + host, 5) == 0:
            body = "User-agent: *\nCrawl-delay: 1\nDisallow: /private/\n"
        else:
            body = "User-agent: *\nAllow: /\n"
        return Response(200, {"Content-Type": "text/plain"}, body.encode())

    def feed(self, host: str, req: Request) -> Response:
        """The host's RSS feed at the current replay time."""
        items = self.visible(host)
        etag = '"' + hashlib.sha1("|".join(i.url for i in items).encode()).hexdigest()[:16] + '"'
        if req.headers.get("if-none-match") == etag:
            return Response(304, {"ETag": etag}, b"")
        parts = [
            f'<?xml version="1.0" encoding="utf-8"?>\n<rss version="2.0"><channel>'
            f"<title>{html.escape(items[0].source_name if items else host)}</title>"
            f"<link>http://{host}/</link><ttl>5</ttl>"
        ]
        for i in items:
            parts.append(
                f"<item><title>{html.escape(i.title)}</title><link>{html.escape(i.url)}</link>"
                f"<guid>{html.escape(i.url)}</guid>"
                f"<pubDate>{email.utils.formatdate(i.published, usegmt=True)}</pubDate>"
                + (f"<description>{html.escape(i.summary)}</description>" if i.summary else "")
                + "</item>"
            )
        parts.append("</channel></rss>")
        return Response(
            200, {"Content-Type": "application/rss+xml; charset=utf-8", "ETag": etag}, "".join(parts).encode("utf-8")
        )

    def __call__(self, req: Request) -> Response:
        host = req.host.split(":")[0]
        if req.path == "/_replay/publish" and req.method == "POST":
            return self.publish_json(req.body)
        if req.path == "/_replay/feeds":
            return Response(200, {"Content-Type": "text/plain"}, ("\n".join(self.feed_urls()) + "\n").encode())
        if host not in self.sites:
            return Response(404, {"Content-Type": "text/plain"}, b"unknown site")
        if req.path == "/robots.txt":
            return self.robots_txt(host)
        if req.path == "/feed.xml":
            return self.feed(host, req)
        item = self.sites[host].get(req.path)
        if item is None or item.published > self.replay_now() or item.body is None:
            return Response(404, {"Content-Type": "text/plain"}, b"not found")
        if self.inject_failures and item.url not in self._published:
            bucket = _h("fail:" + item.url, 100)
            if bucket < 2:
                return Response(500, {"Content-Type": "text/plain"}, b"server error")
            if bucket < 5:
                with self._lock:
                    self._hits[item.url] = n = self._hits.get(item.url, 0) + 1
                if n == 1:
                    return Response(503, {"Content-Type": "text/plain", "Retry-After": "1"}, b"busy")
            elif bucket < 8:
                half = len(item.body) // 2
                return Response(
                    200,
                    {"Content-Type": item.content_type},
                    [(self.slow_s / 2, item.body[:half]), (self.slow_s / 2, item.body[half:])],
                )
        return Response(200, {"Content-Type": item.content_type}, item.body)


def serve(web: ReplayWeb, port: int = 0) -> HttpServer:
    """Starts an :class:`HttpServer` for ``web`` on 127.0.0.1 (``port`` 0 = any free port)."""
    return HttpServer(web, port=port).start()
