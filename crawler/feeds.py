"""Feed and news-sitemap parsing for the crawl tier.

:func:`parse_feed` reads RSS 0.9x/1.0 (RDF)/2.0 and Atom with ``feedparser``
(which also recovers from wrongly declared charsets and most malformed XML)
and JSON Feed 1.0/1.1 (https://www.jsonfeed.org/version/1.1/) with :mod:`json`,
and returns the entries plus the feed's own scheduling hints (RSS ``<ttl>``,
``sy:updatePeriod``/``sy:updateFrequency``, ``<skipHours>``/``<skipDays>``).
:func:`parse_news_sitemap` reads Google News sitemaps (and plain sitemaps /
sitemap indexes). Both return :class:`FeedEntry` records; neither does I/O.

How publishers' mistakes are read:

- Charset: a feed declared UTF-8 (or not declared, XML's default) whose bytes are UTF-8 apart from
  a few corrupt bytes (:func:`newsflow.core.decoding.mostly_utf8`) is read as UTF-8 with each bad
  byte run replaced by U+FFFD, instead of feedparser re-reading the whole feed in a legacy
  charset (mojibake in every title). Bytes that are not mostly UTF-8 are left to feedparser's
  own fallback.
- Control characters that XML forbids are removed from the bytes before parsing (ASCII-compatible
  encodings only) and from every title and summary after
  (:func:`newsflow.core.decoding.strip_control_chars`).
- Dates: an RFC 822 date whose zone is a name is resolved through
  :func:`newsflow.core.timeutil.feed_zone_date_to_epoch` (``AEDT`` is +11:00); a name with several
  offsets (``IST``) is resolved by the publisher's country (:func:`publisher_country`: the region of
  the feed's declared language, ``en-IN``, else the feed URL's country-code TLD, ``.ie``); a name
  that does not resolve leaves the time unknown (``None``: the fetch time is used downstream),
  never UTC, and is counted in :attr:`ParsedFeed.unresolved_dates`. Other dates are feedparser's.
  JSON Feed dates must carry a UTC offset (RFC 3339).
- Hostile XML: every XML document is first read by defusedxml's expat reader, which refuses
  entity declarations and external references (billion laughs, XXE); a feed that is not
  well-formed then goes to feedparser's loose parser, which drops the DOCTYPE. Sitemaps are
  parsed with ``defusedxml.ElementTree`` with any DTD refused. Document size is bounded by the
  fetcher's ``max_body_bytes``.
"""

from __future__ import annotations

import codecs
import html
import json
import re
import xml.sax
from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit
from xml.etree.ElementTree import ParseError

import defusedxml.ElementTree as SafeET
import defusedxml.sax
import feedparser
from defusedxml import DefusedXmlException

from newsflow.core.decoding import mostly_utf8, strip_control_chars
from newsflow.core.timeutil import (
    feed_zone_date_to_epoch,
    iso_to_epoch_or_none,
    rfc3339_to_epoch,
    struct_time_to_epoch,
)


class FeedParseError(ValueError):
    """The bytes are not a feed (e.g. an HTML page or unrecoverable XML)."""


@dataclass(frozen=True)
class FeedEntry:
    """One item of a feed or sitemap.

    Attributes:
      url: absolute link of the item, ``None`` when the item has none (it is then not crawlable).
      title: item title as an HTML fragment, ``None`` if absent: a title the feed marks as text (Atom
        ``type="text"``, RSS titles feedparser finds no markup in, JSON Feed, sitemap ``news:title``)
        is HTML-escaped, so ``Why <details> is not an accordion`` reaches the reader with its tag name
        and ``Tram stop opens <em>early</em>`` (``type="html"``) as "Tram stop opens early" (RFC 4287
        §3.1.1); extraction reads it as HTML (``RawDocument.title``).
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
      language: the language the feed declares (RSS ``<language>``, Atom ``xml:lang``, JSON Feed
        ``language``), lower case (``"pt-br"``), "" when none; landed with its entries as their
        declared language (:class:`newsflow.schemas.raw.RawDocument` ``content_language`` when the page's
        server sends none).
      unresolved_dates: entries whose every date had a zone name that did not resolve (their time is unknown).
    """

    entries: list[FeedEntry]
    title: str = ""
    version: str = ""
    ttl_s: float | None = None
    update_period_s: float | None = None
    skip_hours: frozenset[int] = field(default_factory=frozenset)
    skip_days: frozenset[str] = field(default_factory=frozenset)
    warning: str = ""
    language: str = ""
    unresolved_dates: int = 0


_PERIOD_S = {"hourly": 3600.0, "daily": 86400.0, "weekly": 604800.0, "monthly": 2592000.0, "yearly": 31536000.0}
_SKIP_HOURS_RE = re.compile(rb"<skipHours>(.*?)</skipHours>", re.S | re.I)
_SKIP_DAYS_RE = re.compile(rb"<skipDays>(.*?)</skipDays>", re.S | re.I)
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


# country-code TLDs that are not the country's ISO 3166 code
_TLD_COUNTRY = {"uk": "GB"}


def publisher_country(url: str, language: str = "") -> str | None:
    """ISO 3166 alpha-2 code of a feed's country: the region subtag of its declared language
    (``"en-in"`` -> ``"IN"``), else its host's country-code TLD (``.ie`` -> ``"IE"``, ``.co.il`` ->
    ``"IL"``, ``.uk`` -> ``"GB"``); ``None`` for generic TLDs (``.com``) and no evidence."""
    parts = (language or "").replace("_", "-").split("-")
    if len(parts) >= 2 and len(parts[1]) == 2 and parts[1].isalpha():
        return parts[1].upper()
    host = (urlsplit(url).hostname or "").rstrip(".") if url else ""
    tld = host.rsplit(".", 1)[-1] if "." in host else ""
    if len(tld) == 2 and tld.isalpha():
        return _TLD_COUNTRY.get(tld, tld.upper())
    return None


def _time_of(entry, country: str | None = None) -> tuple[float | None, bool]:
    """Publish (else update, else creation) time of a feedparser entry, UTC epoch seconds or ``None``,
    and whether a zone name went unresolved.

    A date whose zone is a name is resolved by :func:`feed_zone_date_to_epoch` with ``country``
    (unresolvable: that date is unknown, the next one is tried); other dates are feedparser's ``*_parsed``.
    """
    unresolved = False
    for key in ("published", "updated", "created"):
        text = entry.get(key)
        if isinstance(text, str) and text.strip():
            epoch, zone_named = feed_zone_date_to_epoch(text, country)
            if zone_named:
                if epoch is not None:
                    return epoch, False
                unresolved = True
                continue
        t = entry.get(key + "_parsed")
        if t:
            return struct_time_to_epoch(t), False
    return None, unresolved


_XML_DECL_RE = re.compile(rb"""^\s*<\?xml[^>]*?encoding\s*=\s*["']([A-Za-z0-9._:\-]+)["']""")
_CHARSET_PARAM_RE = re.compile(r"""charset\s*=\s*["']?\s*([A-Za-z0-9._:\-]+)""", re.I)
_C0_BYTES_RE = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]")
_WIDE_BOMS = (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


def _codec(label: str) -> str:
    try:
        return codecs.lookup(label.strip()).name
    except LookupError:
        return "unknown"


def _clean_bytes(body: bytes, content_type: str) -> bytes:
    """The feed bytes with a mostly-UTF-8 body repaired and XML-illegal C0 bytes removed (module doc).

    Only for ASCII-compatible documents: a body with a UTF-16/32 byte-order mark, NUL bytes in
    its first 4 bytes, or a declared charset that uses C0 bytes (ISO-2022, UTF-7, HZ) is returned as is.
    """
    if body.startswith(_WIDE_BOMS) or b"\x00" in body[:4]:
        return body
    m = _CHARSET_PARAM_RE.search(content_type or "")
    declared = _codec(m.group(1)) if m else None
    if declared is None:
        m = _XML_DECL_RE.match(body[:512])
        declared = _codec(m.group(1).decode("ascii")) if m else None
    if declared is not None and declared.startswith(("iso2022", "utf_7", "hz", "utf_16", "utf_32", "unknown")):
        return body
    if declared in (None, "utf-8"):
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            text = mostly_utf8(body)
            if text is not None:
                body = text.encode("utf-8")
    return _C0_BYTES_RE.sub(b"", body)


def _refuse_hostile_xml(body: bytes, what: str) -> None:
    """Reads ``body`` with defusedxml's expat reader (no tree is built) to refuse entity tricks.

    Raises:
      FeedParseError: the document declares entities or references external ones.
    """
    try:
        defusedxml.sax.parseString(body, xml.sax.handler.ContentHandler(), forbid_entities=True, forbid_external=False)
    except DefusedXmlException as e:
        raise FeedParseError(f"{what} refused: it declares entities or external references ({e!r})"[:300]) from None
    except (xml.sax.SAXException, ValueError, UnicodeError, LookupError):
        pass  # not well-formed XML or an unknown declared encoding: feedparser's loose parser decides


def _title(entry) -> str | None:
    """A feedparser entry's title as an HTML fragment (:class:`FeedEntry`): escaped when feedparser reads
    it as text (``title_detail.type`` ``text/plain``), as given when HTML or XHTML."""
    title = _clean(entry.get("title"))
    kind = (entry.get("title_detail") or {}).get("type", "text/html")
    return _escape_text(title) if kind == "text/plain" else title


def _escape_text(value: str | None) -> str | None:
    """Plain text as an HTML fragment (``&``, ``<``, ``>`` escaped)."""
    return html.escape(value, quote=False) if value else value


def _clean(value) -> str | None:
    """A feed text field with XML-illegal characters removed; ``None`` for missing or empty."""
    if not isinstance(value, str):
        return None
    return strip_control_chars(value) or None


def _looks_like_json(body: bytes) -> bool:
    return body.lstrip(b" \t\r\n\xef\xbb\xbf")[:1] == b"{"


def _json_date(value) -> float | None:
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        return rfc3339_to_epoch(value)
    except ValueError:
        return None


def parse_json_feed(body: bytes, url: str = "") -> ParsedFeed:
    """Parses a JSON Feed 1.0 or 1.1 document (https://www.jsonfeed.org/version/1.1/).

    Mapping: ``id`` -> guid (a number becomes its text; missing: the link), ``url`` (else
    ``external_url``) -> url, resolved against ``url``; ``title``; ``summary`` (else
    ``content_text``, else ``content_html``); ``date_published`` (else ``date_modified``), RFC 3339
    with a UTC offset, else ``None``. Items that are not objects are skipped.

    Args:
      body: the document bytes (UTF-8, as the format requires; a BOM is allowed).
      url: the feed URL.

    Returns:
      A :class:`ParsedFeed` with ``version`` ``"json1"`` or ``"json11"``.

    Raises:
      FeedParseError: not JSON, not an object, no ``https://jsonfeed.org/version/`` version, or no
        ``items`` list.
    """
    try:
        doc = json.loads(body.decode("utf-8-sig", errors="replace"))
    except (ValueError, RecursionError) as e:
        raise FeedParseError(f"not a JSON feed: {type(e).__name__}: {e}"[:300]) from None
    if not isinstance(doc, dict):
        raise FeedParseError("not a JSON feed: the document is not an object")
    version = doc.get("version")
    if not isinstance(version, str) or not version.startswith("https://jsonfeed.org/version/"):
        raise FeedParseError(f"not a JSON feed: version {str(version)[:80]!r}")
    items = doc.get("items")
    if not isinstance(items, list):
        raise FeedParseError("not a JSON feed: no items list")
    entries = []
    for item in items:
        if not isinstance(item, dict):
            continue
        link = item.get("url") if isinstance(item.get("url"), str) else item.get("external_url")
        link = link.strip() if isinstance(link, str) and link.strip() else None
        if link and url:
            link = urljoin(url, link)
        guid = item.get("id")
        guid = str(guid) if isinstance(guid, (str, int)) and not isinstance(guid, bool) and str(guid) else link
        summary = next(
            (item[k] for k in ("summary", "content_text", "content_html") if isinstance(item.get(k), str) and item[k]),
            None,
        )
        published = _json_date(item.get("date_published"))
        if published is None:
            published = _json_date(item.get("date_modified"))
        entries.append(
            FeedEntry(
                url=link,
                title=_escape_text(_clean(item.get("title"))),
                summary=_clean(summary),
                published_time=published,
                guid=_clean(guid),
            )
        )
    tag = version.rsplit("/", 1)[-1].replace(".", "")
    return ParsedFeed(
        entries, _clean(doc.get("title")) or "", f"json{tag}", language=_language_tag(doc.get("language"))
    )


def parse_feed(body: bytes, url: str = "", content_type: str = "") -> ParsedFeed:
    """Parses an RSS/Atom feed.

    JSON Feed documents (the body starts with ``{``) go to :func:`parse_json_feed`.

    Args:
      body: the feed bytes as fetched (any declared or undeclared charset).
      url: the feed URL; relative item links are resolved against it.
      content_type: the HTTP ``Content-Type`` (its charset is a hint feedparser may override).

    Returns:
      A :class:`ParsedFeed`; entries without a link have ``url=None``.

    Raises:
      FeedParseError: the document is not a recognisable feed, declares XML entities, or feedparser
        itself failed on it (e.g. a surrogate character reference ``&#xD800;``).
    """
    if _looks_like_json(body):
        return parse_json_feed(body, url)
    body = _clean_bytes(body, content_type)
    _refuse_hostile_xml(body, "feed")
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
    f = d.feed
    country = publisher_country(url, _language_tag(f.get("language")))
    unresolved = 0
    for e in d.entries:
        link = e.get("link") or None
        if link:
            link = urljoin(url, link.strip()) if url else link.strip()
        published, zone_unresolved = _time_of(e, country)
        unresolved += zone_unresolved
        entries.append(
            FeedEntry(
                url=link,
                title=_title(e),
                summary=_clean(e.get("summary")),
                published_time=published,
                guid=_clean(e.get("id")) or link,
            )
        )
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
        _clean(f.get("title")) or "",
        d.version or "",
        ttl_s,
        update_s,
        frozenset(skip_hours),
        frozenset(skip_days),
        warning,
        _language_tag(f.get("language")),
        unresolved,
    )


_LANGUAGE_TAG_RE = re.compile(r"[a-z]{2,3}(?:-[a-z0-9]{1,8})*")


def _language_tag(value) -> str:
    """A declared language tag, lower case with ``-`` (``"en_US"`` -> ``"en-us"``), "" unless it is one."""
    if not isinstance(value, str):
        return ""
    tag = value.strip().lower().replace("_", "-")
    return tag if _LANGUAGE_TAG_RE.fullmatch(tag) else ""


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
      FeedParseError: the XML is malformed, declares an unknown encoding, has a DTD (refused by
        defusedxml: entity expansion, external entities) or is not a sitemap.
    """
    try:
        root = SafeET.fromstring(body, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    except DefusedXmlException as e:
        raise FeedParseError(f"sitemap with a DTD refused (entity expansion): {e!r}"[:300]) from None
    except ParseError as e:
        raise FeedParseError(f"malformed sitemap XML: {e}") from None
    except LookupError as e:  # an XML declaration naming an encoding Python does not know
        raise FeedParseError(f"sitemap XML declares an unknown encoding: {e}"[:300]) from None
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
            title = _escape_text((news.findtext(f"{_NEWS}title") or "").strip() or None)
            published = iso_to_epoch_or_none(news.findtext(f"{_NEWS}publication_date") or "")
        if published is None:
            published = iso_to_epoch_or_none(u.findtext(f"{_SM}lastmod") or "")
        full = urljoin(url, loc)
        entries.append(FeedEntry(url=full, title=title, published_time=published, guid=full))
    return entries, []
