"""Article type of a story: live coverage, opinion, analysis, feature, service (evergreen) or news.

Stories of one topic age at different speeds by kind: a live blog is stale within hours, an opinion
piece or a feature within days, a how-to or explainer ("service" journalism) stays useful for weeks.
The nightly decay job learns λ per topic *and* type (:func:`newsflow.core.learning.decay.fit_decay_by_type`)
and ranking looks the pair up first (:func:`newsflow.core.ranking.decay.lambda_for`).

The type comes from signals the pipeline already has, strongest first:

1. the schema.org type the page declares in its JSON-LD (``LiveBlogPosting`` → live,
   ``OpinionNewsArticle``/``ReviewNewsArticle`` → opinion, ``AnalysisNewsArticle`` → analysis,
   ``BackgroundNewsArticle`` → service, ``ReportageNewsArticle``/``NewsArticle`` → no decision), see
   https://schema.org/NewsArticle and its subtypes;
2. the URL path: a segment such as ``/live/``, ``/live-updates/``, ``/opinion/``, ``/commentisfree/``,
   ``/analysis/``, ``/features/``, ``/magazine/``, ``/explainers/``, ``/how-to/`` (:data:`PATH_SEGMENTS`);
3. the headline: ``Live:``/``live updates``/``as it happened``, ``Opinion:``/``Comment:``,
   ``Analysis:``, ``How to``/``What is``/``explained``/``everything you need to know`` (:data:`HEADLINE_PATTERNS`);

else ``news``. All matching is case-insensitive and never raises (any string input gives a type).
"""

from __future__ import annotations

import functools
import re
from urllib.parse import urlsplit

LIVE = "live"
OPINION = "opinion"
ANALYSIS = "analysis"
FEATURE = "feature"
SERVICE = "service"
NEWS = "news"
ARTICLE_TYPES = (LIVE, OPINION, ANALYSIS, FEATURE, SERVICE, NEWS)
"""Every type :func:`article_type` returns."""

SCHEMA_TYPES = {
    "liveblogposting": LIVE,
    "opinionnewsarticle": OPINION,
    "reviewnewsarticle": OPINION,
    "analysisnewsarticle": ANALYSIS,
    "backgroundnewsarticle": SERVICE,
    "askpublicnewsarticle": FEATURE,
}
"""schema.org ``@type`` (lower case, without a ``schema.org/`` prefix) → type; other types decide nothing."""

PATH_SEGMENTS = {
    LIVE: ("live", "liveblog", "live-blog", "live-updates", "live-news", "as-it-happened", "minute-by-minute"),
    OPINION: (
        "opinion",
        "opinions",
        "comment",
        "commentisfree",
        "editorial",
        "editorials",
        "op-ed",
        "oped",
        "columnists",
        "columns",
        "column",
        "letters",
        "blogs-opinion",
    ),
    ANALYSIS: ("analysis", "news-analysis", "analyses", "insight"),
    FEATURE: ("feature", "features", "magazine", "longform", "long-read", "long-reads", "the-big-read", "interactive"),
    SERVICE: ("explainer", "explainers", "explained", "how-to", "howto", "guide", "guides", "faq", "recipes", "recipe"),
}
"""URL path segments (whole segments, lower case) per type."""

HEADLINE_PATTERNS = (
    (
        LIVE,
        re.compile(r"^\s*live\b\s*[:|–-]|\blive updates?\b|\bas it happened\b|\blive blog\b|[-–|:]\s*live\s*$", re.I),
    ),
    (OPINION, re.compile(r"^\s*(opinion|comment|editorial|op-ed|column)\s*[:|–-]", re.I)),
    (ANALYSIS, re.compile(r"^\s*(analysis|news analysis|insight)\s*[:|–-]", re.I)),
    (
        SERVICE,
        re.compile(
            r"^\s*(how to|how do i|what is|what are|explainer\s*[:|–-])|\bexplained\b"
            r"|\beverything you need to know\b|\bwhat you need to know\b|\ba guide to\b",
            re.I,
        ),
    ),
    (FEATURE, re.compile(r"^\s*(feature|the big read|long read|in pictures|photos)\s*[:|–-]", re.I)),
)
"""Headline regular expressions per type, tried in this order."""

_SEGMENT_TYPE = {seg: kind for kind, segs in PATH_SEGMENTS.items() for seg in segs}


def type_from_schema(schema_type) -> str | None:
    """The type for a JSON-LD ``@type`` value (a string or a list of strings), or ``None`` when it
    decides nothing (``NewsArticle``, ``ReportageNewsArticle``, anything else or not a string)."""
    values = schema_type if isinstance(schema_type, list | tuple) else [schema_type]
    for v in values:
        if isinstance(v, str):
            key = v.strip().rsplit("/", 1)[-1].lower()
            if key in SCHEMA_TYPES:
                return SCHEMA_TYPES[key]
    return None


def type_from_url(url) -> str | None:
    """The type named by a segment of ``url``'s path (the first matching segment), or ``None``."""
    if not isinstance(url, str) or not url:
        return None
    try:
        path = urlsplit(url.strip()).path
    except ValueError:
        return None
    for seg in path.lower().split("/"):
        kind = _SEGMENT_TYPE.get(seg)
        if kind is not None:
            return kind
    return None


def type_from_headline(title) -> str | None:
    """The type a headline pattern names (:data:`HEADLINE_PATTERNS`, first match), or ``None``."""
    if not isinstance(title, str) or not title:
        return None
    for kind, pattern in HEADLINE_PATTERNS:
        if pattern.search(title):
            return kind
    return None


def article_type(url=None, title=None, schema_type=None) -> str:
    """The article type (one of :data:`ARTICLE_TYPES`) from the JSON-LD type, URL path and headline.

    Args:
      url: the article's URL (str; anything else is ignored).
      title: its headline (str; anything else is ignored).
      schema_type: the JSON-LD ``@type`` (str or list of str), when the page declared one.

    Returns:
      The first decision of schema type, URL path, headline (module docstring), else ``"news"``.
    """
    return type_from_schema(schema_type) or type_from_url(url) or type_from_headline(title) or NEWS


@functools.lru_cache(maxsize=1 << 16)
def _cached_type(url: str, title: str) -> str:
    return article_type(url, title)


def story_article_type(story) -> str:
    """The type of a story record (anything with ``url`` and ``title``; a stored ``article_type`` in
    :data:`ARTICLE_TYPES` wins): the type of its lead article. Memoised per (url, headline) (65,536
    entries), as feed building asks for every candidate on every request."""
    stored = getattr(story, "article_type", None)
    if isinstance(stored, str) and stored in ARTICLE_TYPES:
        return stored
    url, title = getattr(story, "url", None), getattr(story, "title", None)
    if isinstance(url, str) and isinstance(title, str):
        return _cached_type(url, title)
    return article_type(url, title)
