"""Building :class:`schemas.Article` records from raw documents and extracted content (pure logic)."""

from __future__ import annotations

import math
import re

from newsflow.core.urls import article_id, canonicalize_url, choose_canonical
from newsflow.schemas import Article, RawDocument

_WORD_RE = re.compile(r"\w+")
# C0/C1 controls and bidirectional overrides/isolates: never meaningful in a headline, and the
# bidi ones can make a displayed title read differently from what it is.
_TITLE_JUNK_RE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
MAX_TITLE_CHARS = 1000


def clean_title(title: str) -> str:
    """Title with control and bidi-override characters replaced by spaces, whitespace collapsed,
    cut to :data:`MAX_TITLE_CHARS` characters."""
    return " ".join(_TITLE_JUNK_RE.sub(" ", title or "").split())[:MAX_TITLE_CHARS]


def event_time(published_time: float | None, fetch_time: float) -> float:
    """The event time of a crawled document, UTC epoch seconds: the earliest time the crawler knows.

    That is its feed or sitemap entry date (``RawDocument.published_time``) clamped to the fetch time
    (an entry dated after its own fetch is wrong: time zones, scheduled posts), else the fetch time.
    The crawler sends it with each message (:func:`event_time_ms`: Pub/Sub attribute ``event_time``,
    Kafka record timestamp) and the streaming job reads it as the element timestamp on every runner;
    a publish time found later by extraction is stored (``Article.publish_time``) and does not change it.
    """
    if published_time is None:
        return float(fetch_time)
    return float(min(published_time, fetch_time))


def event_time_ms(raw: RawDocument) -> int:
    """:func:`event_time` of a document in whole milliseconds, rounded down (so the message's
    timestamp is never later than the article's ``event_time``)."""
    return math.floor(event_time(raw.published_time, raw.fetch_time) * 1000)


def build_article(raw: RawDocument, content, *, source_authority: float, source_name: str = "") -> Article:
    """Combines a RawDocument and its extracted content into an Article (no language/SimHash yet).

    Args:
      raw: the landed document.
      content: ``newsflow.core.extraction.ExtractedContent`` (title, text, authors, site_name, publish_time).
      source_authority: authority of ``raw.source_domain`` in [0, 1].
      source_name: display name from the sources table ("" if unknown); the document's own
        ``source_name`` or the page's site name are preferred when present.

    Its ``event_time`` is the document's (:func:`event_time`: feed/sitemap date clamped to the fetch
    time, else the fetch time), the timestamp its message carries; ``publish_time`` is what
    extraction found (page metadata weighed against the feed date), stored as is.

    The article's URL and id follow the identity rules of :mod:`newsflow.core.urls`: a same-site
    canonical the page declares (``content.canonical_url``) replaces the fetched URL
    (:func:`newsflow.core.urls.choose_canonical`), and the id is :func:`newsflow.core.urls.article_id` of it.
    Its pictures: the URLs extraction found, the thumbnail names the crawler landed with the document.

    Raises:
      ValueError: the URL cannot be canonicalized (not http(s), no host).
    """
    url = choose_canonical(raw.url, getattr(content, "canonical_url", ""))
    canonical = canonicalize_url(url)
    publish = content.publish_time  # extraction already weighed the feed's published_time
    text = content.text or ""
    return Article(
        article_id=article_id(url),
        url=url,
        canonical_url=canonical,
        source_domain=raw.source_domain,
        source_name=raw.source_name or content.site_name or source_name or "",
        title=clean_title(content.title),
        text=text,
        authors=list(content.authors),
        site_name=content.site_name or "",
        publish_time=publish,
        fetch_time=float(raw.fetch_time),
        event_time=event_time(raw.published_time, raw.fetch_time),
        word_count=len(_WORD_RE.findall(text)),
        feed_only=raw.is_feed_only,
        source_authority=float(source_authority),
        image_url=getattr(content, "image_url", "") or "",
        icon_url=getattr(content, "icon_url", "") or "",
        image_thumb=raw.image_thumb or "",
        icon_thumb=raw.icon_thumb or "",
    )


def fingerprint_text(article: Article) -> str:
    """The text a SimHash is computed over: title and main text (feed summary for feed-only)."""
    return f"{article.title}\n{article.text}" if article.text else article.title
