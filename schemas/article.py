"""Article: one extracted, enriched, fingerprinted news article."""

from collections.abc import Sequence
from typing import NamedTuple, Optional

import pyarrow as pa

from newsflow.schemas._arrow import UTC_TS


class Article(NamedTuple):
    """An article after extraction and enrichment.

    Attributes:
      article_id: 32 hex chars, the first 128 bits of SHA-256 of the canonical URL
        (see ``newsflow.core.urls.article_id``); stable across runs and machines.
      url: URL as fetched.
      canonical_url: normalized URL the id is derived from.
      source_domain: publisher host, lower case.
      source_name: publisher display name ("" when unknown).
      title: headline ("" when none could be found).
      text: main text; for feed-only articles the feed summary.
      authors: author names, in page order.
      site_name: site name from page metadata ("" when unknown).
      publish_time: UTC epoch seconds, ``None`` when unknown.
      fetch_time: UTC epoch seconds.
      event_time: the document's event time, the timestamp of its message: the feed/sitemap entry date
        clamped to ``fetch_time``, else ``fetch_time`` (``newsflow.core.articles.event_time``).
      language: ISO 639 code from fastText lid.176, ``"und"`` when unsure.
      language_confidence: fastText probability of ``language``, in [0, 1].
      simhash: 64-bit SimHash as 16 lower-case hex chars (see ``newsflow.core.simhash``).
      word_count: number of ``\\w+`` tokens in ``text``.
      feed_only: True when built from feed fields only (no page body).
      source_authority: authority of the source in [0, 1] (sources table).
      cluster_id: near-duplicate group id, ``None`` before assignment.
      declared_language: the language the publisher declares, lower case (``"en-us"``): the
        page's ``<html lang>``, else the ``Content-Language`` header (feed-only documents: the
        feed's); "" when none. Evidence for ``language`` (``newsflow.core.language``).
      paywalled: True when the page declares the article not free to read (schema.org
        ``isAccessibleForFree: false``): ``text`` is then only the free part; False when the page
        declares it free or declares nothing; ``None`` for feed-only articles (no page seen).
      image_url / icon_url: the page's lead image and publisher icon (absolute URLs; ``newsflow.core.images``),
        "" when none.
      image_thumb / icon_thumb: their stored thumbnails (names in the thumbnail store, served at
        ``/img/<name>``), "" when the crawler stored none (thumbnails off, a replayed corpus, a failed fetch).
      aliases: ids of the other URLs of this article (32 hex each, sorted): versions of a re-slugged
        permalink stored under ``article_id`` (rule 5 of "Article identity" in ``newsflow.core.urls``);
        each resolves to ``article_id`` in Redis (``newsflow.storage.aliases.resolve_article_id``). Set
        by the Parquet sink; empty for an article with one URL.
    """

    article_id: str
    url: str
    canonical_url: str
    source_domain: str
    source_name: str
    title: str
    text: str
    authors: Sequence[str]
    site_name: str
    publish_time: Optional[float]
    fetch_time: float
    event_time: float
    language: str = "und"
    language_confidence: float = 0.0
    simhash: str = ""
    word_count: int = 0
    feed_only: bool = False
    source_authority: float = 0.0
    cluster_id: Optional[str] = None
    declared_language: str = ""
    paywalled: Optional[bool] = None
    image_url: str = ""
    icon_url: str = ""
    image_thumb: str = ""
    icon_thumb: str = ""
    aliases: Sequence[str] = ()


ARTICLE_SCHEMA = pa.schema(
    [
        pa.field("article_id", pa.string(), nullable=False),
        pa.field("url", pa.string()),
        pa.field("canonical_url", pa.string()),
        pa.field("source_domain", pa.string()),
        pa.field("source_name", pa.string()),
        pa.field("title", pa.string()),
        pa.field("text", pa.string()),
        pa.field("authors", pa.list_(pa.string())),
        pa.field("site_name", pa.string()),
        pa.field("publish_time", UTC_TS),
        pa.field("fetch_time", UTC_TS),
        pa.field("event_time", UTC_TS),
        pa.field("language", pa.string()),
        pa.field("language_confidence", pa.float32()),
        pa.field("simhash", pa.string()),
        pa.field("word_count", pa.int32()),
        pa.field("feed_only", pa.bool_()),
        pa.field("source_authority", pa.float32()),
        pa.field("cluster_id", pa.string()),
        pa.field("declared_language", pa.string()),
        pa.field("paywalled", pa.bool_()),
        pa.field("image_url", pa.string()),
        pa.field("icon_url", pa.string()),
        pa.field("image_thumb", pa.string()),
        pa.field("icon_thumb", pa.string()),
        pa.field("aliases", pa.list_(pa.string())),
    ]
)


class ArticleRecord(NamedTuple):
    """Serving view of an article, as read from ``nf:article:{article_id}`` (a story's member list).

    Attributes:
      article_id: stable article id (32 hex chars).
      title: headline.
      url: article URL.
      source_domain: publisher host, lower case.
      source_name: publisher display name ("" when unknown).
      event_time: the article's event time (feed/sitemap entry date clamped to the fetch, else the fetch
        time; ``newsflow.core.articles.event_time``), UTC epoch seconds.
      cluster_id: near-duplicate group id (``"solo:<article_id>"`` when it has none).
      story_id: story it belongs to ("" before assignment).
      authority: article authority in [0, 1].
      language: ISO 639 code ("" when unknown).
      paywalled: the page declares its text not free (JSON-LD ``isAccessibleForFree: false``); the
        text is the free part.
      image / icon: stored thumbnail names of its lead image and publisher icon ("" when none).
    """

    article_id: str
    title: str
    url: str
    source_domain: str
    source_name: str
    event_time: float
    cluster_id: str
    story_id: str
    authority: float
    language: str
    paywalled: bool = False
    image: str = ""
    icon: str = ""


ARTICLE_RECORD_SCHEMA = pa.schema(
    [
        pa.field("article_id", pa.string(), nullable=False),
        pa.field("title", pa.string()),
        pa.field("url", pa.string()),
        pa.field("source_domain", pa.string()),
        pa.field("source_name", pa.string()),
        pa.field("event_time", UTC_TS),
        pa.field("cluster_id", pa.string()),
        pa.field("story_id", pa.string()),
        pa.field("authority", pa.float32()),
        pa.field("language", pa.string()),
        pa.field("paywalled", pa.bool_()),
        pa.field("image", pa.string()),
        pa.field("icon", pa.string()),
    ]
)
