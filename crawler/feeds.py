"""Feed and news-sitemap parsing for the crawl tier.

:func:`parse_feed` reads RSS 0.9x/1.0 (RDF)/2.0 and Atom with ``feedparser``
(which also recovers from wrongly declared charsets and most malformed XML)
and returns the entries plus the feed's own scheduling hints (RSS ``<ttl>``,
``sy:updatePeriod``/``sy:updateFrequency``, ``<skipHours>``/``<skipDays>``).
:func:`parse_news_sitemap` reads Google News sitemaps (and plain sitemaps /
sitemap indexes). Both return :class:`FeedEntry` records; neither does I/O.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from urllib.parse import urljoin

import feedparser

from newsflow.timeutil import iso_to_epoch_or_none, struct_time_to_epoch


class FeedParseError(ValueError):
    """The bytes are not a feed (e.g. an HTML page or unrecoverable XML)."""


@dataclass(frozen=True)
class FeedEntry:
    """One item of a feed or sitemap.

    Attributes:
      url: absolute link of the item, ``None`` when the item has none (it is then not crawlable).
      title: item title, ``None`` if absent.
      summary: item description/summary, ``None`` if absent.
      published_time: publish (or else update) time, UTC epoch seconds, ``None`` if absent.
      guid: item id (``<guid>``/``<id>``), else the link.
    """

    url: str | None
    title: str | None = None
    summary: str | None = None
    published_time: float | None = None
    guid: str | None = None


@dataclass(frozen=True)
class ParsedFeed:
    """A parsed feed.

    Attributes:
      entries: the items in document order.
      title: feed title ("" if absent).
      version: feedparser's format name, e.g. ``"rss20"``, ``"atom10"``, ``"rss10"``, ``"sitemap"``.
      ttl_s: RSS ``<ttl>`` in seconds, ``None`` if absent.
      update_period_s: ``sy:updatePeriod`` / ``sy:updateFrequency`` in seconds, ``None`` if absent.
      skip_hours: UTC hours (0-23) in which the publisher asks not to be polled.
      skip_days: weekday names (``"Monday"`` ...) in which it asks not to be polled.
      warning: non-fatal parse problem (e.g. a charset override), "" when none.
    """

    entries: list[FeedEntry]
    title: str = ""
    version: str = ""
    ttl_s: float | None = None
    update_period_s: float | None = None
    skip_hours: frozenset[int] = field(default_factory=frozenset)
    skip_days: frozenset[str] = field(default_factory=frozenset)
    warning: str = ""


_PERIOD_S = {"hourly": 3600.0, "daily": 86400.0, "weekly": 604800.0, "monthly": 2592000.0, "yearly": 31536000.0}
_SKIP_HOURS_RE = re.compile(rb"<skipHours>(.*?)</skipHours>", re.S | re.I)
_SKIP_DAYS_RE = re.compile(rb"<skipDays>(.*?)</skipDays>", re.S | re.I)
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def _time_of(entry) -> float | None:
    for key in ("published_parsed", "updated_parsed", "created_parsed"):
        t = entry[key] if key in entry else None
        if t:
            return struct_time_to_epoch(t)
    return None


def parse_feed(body: bytes, url: str = "", content_type: str = "") -> ParsedFeed:
    """Parses an RSS/Atom feed.

    Args:
      body: the feed bytes as fetched (any declared or undeclared charset).
      url: the feed URL; relative item links are resolved against it.
      content_type: the HTTP ``Content-Type`` (its charset is a hint feedparser may override).

    Returns:
      A :class:`ParsedFeed`; entries without a link have ``url=None``.

    Raises:
      FeedParseError: the document is not a recognisable feed, or feedparser itself failed on it
        (e.g. a surrogate character reference ``&#xD800;``).
    """
    headers = {"content-type": content_type} if content_type else {}
    try:
        d = feedparser.parse(body, response_headers=headers) if headers else feedparser.parse(body)
    except (UnicodeError, ValueError, RecursionError) as e:
        # feedparser's loose parser raises on hostile input, e.g. UnicodeEncodeError for a
        # surrogate character reference such as &#xD800;
        raise FeedParseError(f"not a feed: the parser failed with {type(e).__name__}: {e}"[:300]) from None
    if not d.version and not d.entries:
        exc = d.get("bozo_exception")
        raise FeedParseError(f"not a feed: {exc or 'unrecognised document'}")
    warning = ""
    if d.bozo:
        warning = f"{type(d.bozo_exception).__name__}: {d.bozo_exception}"[:300]
    entries = []
    for e in d.entries:
        link = e.get("link") or None
        if link:
            link = urljoin(url, link.strip()) if url else link.strip()
        entries.append(
            FeedEntry(
                url=link,
                title=e.get("title") or None,
                summary=e.get("summary") or None,
                published_time=_time_of(e),
                guid=e.get("id") or link,
            )
        )
    f = d.feed
    ttl_s = None
    try:
        if f.get("ttl"):
            ttl_s = float(f["ttl"]) * 60.0
    except ValueError:
        ttl_s = None
    update_s = None
    period = (f.get("sy_updateperiod") or "").strip().lower()
    if period in _PERIOD_S:
        try:
            freq = max(1.0, float(f.get("sy_updatefrequency") or 1))
        except ValueError:
            freq = 1.0
        update_s = _PERIOD_S[period] / freq
    skip_hours: set[int] = set()
    m = _SKIP_HOURS_RE.search(body[:200000])
    if m:
        for h in re.findall(rb"<hour>\s*(\d{1,2})\s*</hour>", m.group(1)):
            if 0 <= int(h) <= 24:
                skip_hours.add(int(h) % 24)
    skip_days: set[str] = set()
    m = _SKIP_DAYS_RE.search(body[:200000])
    if m:
        for day in re.findall(rb"<day>\s*([A-Za-z]+)\s*</day>", m.group(1)):
            name = day.decode("ascii").capitalize()
            if name in _DAYS:
                skip_days.add(name)
    return ParsedFeed(
        entries,
        f.get("title") or "",
        d.version or "",
        ttl_s,
        update_s,
        frozenset(skip_hours),
        frozenset(skip_days),
        warning,
    )


_SM = "{http://www.sitemaps.org/schemas/sitemap/0.9}"
_NEWS = "{http://www.google.com/schemas/sitemap-news/0.9}"


def parse_news_sitemap(body: bytes, url: str = "") -> tuple[list[FeedEntry], list[str]]:
    """Parses a (news) sitemap or a sitemap index.

    Args:
      body: sitemap XML bytes.
      url: the sitemap URL (relative ``<loc>`` values are resolved against it).

    Returns:
      ``(entries, child_sitemaps)``: the ``<url>`` items (title and publication date
      from the ``news:`` extension when present) and, for a sitemap index, the
      ``<sitemap><loc>`` URLs.

    Raises:
      FeedParseError: the XML is malformed or is not a sitemap.
    """
    if b"<!DOCTYPE" in body[:2048].upper() or b"<!ENTITY" in body[:4096].upper():
        raise FeedParseError("sitemap with a DTD refused (entity expansion)")
    try:
        root = ET.fromstring(body)
    except ET.ParseError as e:
        raise FeedParseError(f"malformed sitemap XML: {e}") from None
    tag = root.tag.split("}")[-1]
    if tag == "sitemapindex":
        return [], [
            urljoin(url, (s.findtext(f"{_SM}loc") or "").strip())
            for s in root.iter(f"{_SM}sitemap")
            if (s.findtext(f"{_SM}loc") or "").strip()
        ]
    if tag != "urlset":
        raise FeedParseError(f"not a sitemap: root element <{tag}>")
    entries = []
    for u in root.iter(f"{_SM}url"):
        loc = (u.findtext(f"{_SM}loc") or "").strip()
        if not loc:
            continue
        news = u.find(f"{_NEWS}news")
        title = published = None
        if news is not None:
            title = (news.findtext(f"{_NEWS}title") or "").strip() or None
            published = iso_to_epoch_or_none(news.findtext(f"{_NEWS}publication_date") or "")
        if published is None:
            published = iso_to_epoch_or_none(u.findtext(f"{_SM}lastmod") or "")
        full = urljoin(url, loc)
        entries.append(FeedEntry(url=full, title=title, published_time=published, guid=full))
    return entries, []
