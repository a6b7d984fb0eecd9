"""Article extraction: raw fetched bytes (or feed fields) to title, main text and metadata.

This is the pure, Beam-free core that the pipeline's extract step wraps in a DoFn.
:func:`extract_content` turns a :class:`schemas.RawDocument` into an
:class:`ExtractedContent` or raises :class:`ExtractionError` whose ``error_type``
becomes the dead-letter reason. It has no time limit: the pipeline's extract step
(``ExtractArticles``) runs it on pages in a separate process
under ``ExtractionConfig.timeout_s`` and dead-letters a page past the limit as ``"timeout"``.

Steps for a fetched page (``raw.body`` is bytes):

1. ``http_status`` outside 200-299 -> ``"http_error"``; body over
   ``max_body_bytes`` -> ``"too_large"`` (checked before anything is parsed; a
   gzip body is inflated with the same cap).
2. :func:`newsflow.core.decoding.decode_html` turns bytes into ``str`` (BOM, then valid
   UTF-8, then the ``Content-Type`` charset, then ``<meta charset>``, then
   charset_normalizer detection); binary or undecodable bytes -> ``"undecodable"``.
3. The text is parsed with lxml (through trafilatura's loader); a body that is
   not HTML or has no ``<body>`` content (e.g. truncated in ``<head>``) ->
   ``"broken_html"``.
4. The tree is pre-cleaned (:func:`newsflow.core.page_cleaning.clean_tree`: consent walls,
   sidebars, subscription offers and the locked part of a schema.org paywall go; an article
   marked up as ``<aside>`` is kept), then trafilatura (Barbaresi, ACL 2021 demo) extracts
   the main text and metadata; a headline repeated at the top of the text, with any short
   kicker above it ("Members"), is page header, not article (:func:`drop_header_matter`).
   Text shorter than ``min_text_chars`` (Latin-letter equivalents, so the
   threshold holds across scripts) -> ``"not_an_article"``. Dates come from
   htmldate with ``extensive_search=False`` (structured markup and the URL only:
   the extensive search turns a footer "(c) 2024" into 2024-01-01, which would make
   a fresh article look months old) and ``max_date`` one day past fetch_time + ``max_future_s``.
   The lead image and publisher icon URLs come from the uncleaned tree (:func:`newsflow.core.images.page_images`).

Feed-only documents (``raw.body is None``) are built from the feed title and the
summary with its HTML stripped; no title and no summary -> ``"missing_fields"``.

Every text field returned (title, text, authors, site name) has the characters XML 1.0
forbids removed (:func:`newsflow.core.decoding.strip_control_chars`: C0 controls other than tab,
LF and CR, lone surrogates, U+FFFE/U+FFFF), whether they came as raw bytes or as character
references. Publish time: a date in the page's markup (``article:published_time``, JSON-LD,
``<time>``) wins; a date found only in the URL (``/2024/10/14/``) is a fallback
(htmldate's ``deferred_url_extractor``), and being day-only it loses to the feed's exact time.

Score it on the extraction benchmark with ``newsflow eval extraction`` and time it
with ``python -m benchmarks.extraction --json``.
"""

from __future__ import annotations

import html as html_lib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from newsflow.core.decoding import DecodeError, decode_html, inflate_gzip, strip_control_chars
from newsflow.core.images import page_images
from newsflow.core.page_cleaning import clean_tree
from newsflow.core.scripts import latin_equivalent_length, nfc
from newsflow.core.timeutil import page_date_to_epoch, utc_date
from newsflow.schemas.raw import RawDocument

ERROR_TYPES = frozenset(
    {
        "http_error",
        "too_large",
        "undecodable",
        "broken_html",
        "not_an_article",
        "timeout",
        "missing_fields",
    }
)
"""The values :attr:`ExtractionError.error_type` can take (``"timeout"`` is the reason the pipeline's extract
step gives a page past ``ExtractionConfig.timeout_s``; :func:`extract_content` never raises it)."""


class ExtractionError(Exception):
    """A document that cannot become an article, with a machine-readable reason.

    Attributes:
      error_type: one of :data:`ERROR_TYPES`, used as the dead-letter ``error_type``.
      message: human-readable detail (also ``str(error)``).
    """

    def __init__(self, error_type: str, message: str):
        if error_type not in ERROR_TYPES:
            raise ValueError(f"unknown extraction error_type {error_type!r}; expected one of {sorted(ERROR_TYPES)}")
        super().__init__(f"{error_type}: {message}")
        self.error_type = error_type
        self.message = message

    def __reduce__(self):
        return (ExtractionError, (self.error_type, self.message))


class ExtractedContent(NamedTuple):
    """What extraction gives back for one document.

    Attributes:
      title: headline ("" when none was found).
      text: main text, paragraphs separated by ``"\\n"``; for feed-only documents the
        summary with HTML stripped (may be "" when only a title exists).
      authors: author names in page order, de-duplicated.
      site_name: site name from page metadata, else the feed's source name, else "".
      publish_time: UTC epoch seconds, ``None`` when unknown or more than
        ``max_future_s`` after ``fetch_time``.
      html_language: declared language, lower case (``"en-us"``), from ``<html lang>``
        or else the first ``Content-Language`` value; "" when neither is present.
      canonical_url: the page's own ``<link rel="canonical">`` href, else its ``og:url``, as
        written (may be relative); "" when it declares none or for feed-only documents. Whether
        it becomes the article's URL is :func:`newsflow.core.urls.choose_canonical`'s decision.
      paywalled: True when the page declares the article not free (schema.org JSON-LD
        ``isAccessibleForFree: false``; ``text`` is then the free part only), False for other
        pages, ``None`` for feed-only documents (see :mod:`newsflow.core.page_cleaning`).
      image_url / icon_url: the page's lead image and publisher icon, absolute and checked
        (:func:`newsflow.core.images.page_images`); "" when none, and for feed-only documents.
    """

    title: str
    text: str
    authors: tuple[str, ...]
    site_name: str
    publish_time: float | None
    html_language: str
    canonical_url: str = ""
    paywalled: bool | None = None
    image_url: str = ""
    icon_url: str = ""


@dataclass(frozen=True)
class ExtractionConfig:
    """Settings of :func:`extract_content` and of the pipeline's extract step.

    The trafilatura defaults below were chosen on the 138 shared pages of the
    scrapinghub article-extraction-benchmark (``newsflow eval extraction``):
    ``favor_precision=True, include_comments=False`` scored F1 0.958 against 0.956
    with ``favor_recall`` instead and 0.945 for trafilatura's own defaults
    (``include_tables=False``: 0.949, ``deduplicate=True``: 0.954, ``fast``: 0.934).

    Attributes:
      timeout_s: wall-clock limit per page in seconds (parse + extraction in the
        extract step's separate process; :func:`extract_content` itself has no limit). Must be > 0.
      max_body_bytes: pages with a larger body (or a gzip body inflating past it)
        fail with ``"too_large"`` before any parsing.
      min_text_chars: extracted text shorter than this (in Latin-letter
        equivalents after stripping: a Han/Kana character counts 3, a Hangul
        syllable 2, see :func:`newsflow.core.scripts.latin_equivalent_length`) is
        ``"not_an_article"``, so a 187-character Chinese brief passes. 200 sits between the longest leftover
        text of a news homepage in the shared data (cnn.com front page: 180 chars)
        and the shortest real article (a 235-char Nikkei article in Japanese;
        the shortest English gold body is 419 chars).
      favor_precision: trafilatura option; prefer less boilerplate over more text.
      favor_recall: trafilatura option; the opposite (do not set both).
      include_comments: trafilatura option; reader comments are not article text.
      include_tables: trafilatura option; keep text inside ``<table>``.
      deduplicate: trafilatura option; drop repeated text segments.
      max_future_s: a publish time more than this many seconds after ``fetch_time``
        is discarded (``None``); default one day.
    """

    timeout_s: float = 5.0
    max_body_bytes: int = 5_000_000
    min_text_chars: int = 200
    favor_precision: bool = True
    favor_recall: bool = False
    include_comments: bool = False
    include_tables: bool = True
    deduplicate: bool = False
    max_future_s: float = 86_400.0

    def __post_init__(self):
        if not (self.timeout_s > 0):
            raise ValueError(f"timeout_s must be > 0 seconds, got {self.timeout_s!r}")
        if self.max_body_bytes <= 0:
            raise ValueError(f"max_body_bytes must be > 0, got {self.max_body_bytes!r}")
        if self.min_text_chars < 0:
            raise ValueError(f"min_text_chars must be >= 0, got {self.min_text_chars!r}")
        if self.favor_precision and self.favor_recall:
            raise ValueError("favor_precision and favor_recall cannot both be True")
        if self.max_future_s < 0:
            raise ValueError(f"max_future_s must be >= 0 seconds, got {self.max_future_s!r}")


_BLOCK_TAGS = frozenset(
    {
        "p",
        "div",
        "br",
        "li",
        "ul",
        "ol",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "blockquote",
        "tr",
        "table",
        "section",
        "article",
        "pre",
        "hr",
        "dd",
        "dt",
        "figure",
        "figcaption",
    }
)
_WS_RE = re.compile(r"[ \t\r\f\v\u00a0]+")


MAX_HEADER_LINES = 3  # lines before the repeated headline that may be header matter
MAX_KICKER_WORDS = 6


def _same_words(a: str, b: str) -> bool:
    return _WS_RE.sub(" ", a).strip().casefold() == _WS_RE.sub(" ", b).strip().casefold()


def drop_header_matter(text: str, title: str) -> str:
    """``text`` without the page header trafilatura keeps inside an ``<article>``: when one of its first
    :data:`MAX_HEADER_LINES` + 1 lines repeats the headline (same words, case and spacing aside) and every
    line before it is a kicker or label of at most :data:`MAX_KICKER_WORDS` words ("Members", "Analysis"),
    those lines and the headline go; the text from the next line on is the article. Otherwise ``text``
    is returned unchanged.

    Args:
      text: extracted main text, lines separated by ``"\n"``.
      title: the article's headline.
    """
    if not title.strip():
        return text
    lines = text.split("\n")
    for i, line in enumerate(lines[: MAX_HEADER_LINES + 1]):
        if _same_words(line, title):
            rest = "\n".join(lines[i + 1 :]).strip()
            return rest if rest else text
        if len(line.split()) > MAX_KICKER_WORDS:
            break
    return text


def html_fragment_to_text(fragment: str) -> str:
    """Plain text of an HTML fragment (a feed summary), block elements on their own lines.

    Args:
      fragment: HTML or plain text, ``str``.

    Returns:
      Text with tags, scripts and styles removed, entities decoded, runs of spaces
      collapsed and one ``"\\n"`` between blocks; "" for an empty fragment.
    """
    if not fragment or not fragment.strip():
        return ""
    if "<" not in fragment:
        text = html_lib.unescape(fragment)
    else:
        import lxml.html  # lxml is a trafilatura dependency

        try:
            root = lxml.html.fragment_fromstring(fragment, create_parent="div")
        except Exception:  # lxml raises several types (ParserError, ValueError) on junk
            text = html_lib.unescape(re.sub(r"<[^>]*>", " ", fragment))
        else:
            for bad in root.xpath(".//script|.//style|.//noscript"):
                bad.drop_tree()
            parts: list[str] = []

            def walk(el):
                tag = el.tag if isinstance(el.tag, str) else ""
                block = tag.lower() in _BLOCK_TAGS
                if block:
                    parts.append("\n")
                if el.text and tag:
                    parts.append(el.text)
                for child in el:
                    walk(child)
                if block:
                    parts.append("\n")
                if el.tail:
                    parts.append(el.tail)

            walk(root)
            text = "".join(parts)
    text = strip_control_chars(text)
    lines = (_WS_RE.sub(" ", line).strip() for line in text.split("\n"))
    return "\n".join(line for line in lines if line)


def declared_canonical_url(tree) -> str:
    """The canonical URL a parsed HTML page declares for itself, as written; "" when none.

    ``<link rel="canonical" href>`` (``rel`` is a case-insensitive token list) wins over
    ``<meta property="og:url" content>`` (or ``name="og:url"``); the first of each kind counts.

    Args:
      tree: an lxml HTML element tree (e.g. from ``trafilatura.utils.load_html`` or ``lxml.html``).
    """
    return declared_canonical_in(tree.iter("link", "meta"))


def declared_canonical_in(elements: Iterable) -> str:
    """:func:`declared_canonical_url`'s rule over ``<link>``/``<meta>`` elements in document order.

    Stops consuming ``elements`` at the first canonical link (an incremental parser feeding them
    stops reading there: the crawler's streamed reader does); "" when none.
    """
    og = ""
    for el in elements:
        if el.tag == "link":
            rel = (el.get("rel") or "").lower().split()
            href = (el.get("href") or "").strip()
            if "canonical" in rel and href:
                return strip_control_chars(href)
        elif not og and (el.get("property") or el.get("name") or "").strip().lower() == "og:url":
            og = (el.get("content") or "").strip()
    return strip_control_chars(og)


def page_canonical_url(body: bytes, content_type: str = "") -> str:
    """:func:`declared_canonical_url` of an HTML body as fetched (bytes); "" when it declares none or does not parse.

    The crawler calls this on pages it lands so that it applies the same identity rule as the
    pipeline (which reads the same declaration from its parsed tree). Never raises.
    """
    import lxml.html  # lxml is a trafilatura dependency

    try:
        text, _enc = decode_html(body, content_type)
        if not text.strip():
            return ""
        return declared_canonical_url(lxml.html.document_fromstring(text))
    except Exception:  # noqa: BLE001 - undecodable or unparsable page: it declares nothing we can read
        return ""


def _language_tag(value: str | None) -> str:
    if not value:
        return ""
    first = value.split(",")[0].split(";")[0].strip().lower().replace("_", "-")
    return first if re.fullmatch(r"[a-z]{1,8}(-[a-z0-9]{1,8})*", first) else ""


def _split_authors(value: str | None) -> tuple[str, ...]:
    if not value:
        return ()
    out: list[str] = []
    for name in strip_control_chars(value).split(";"):
        name = _WS_RE.sub(" ", name).strip()
        if name and name not in out:
            out.append(name)
    return tuple(out)


def _choose_publish_time(
    page_date: str | None, feed_time: float | None, fetch_time: float, max_future_s: float
) -> float | None:
    """Page date with a time of day, else the feed time, else a date-only page date (midnight UTC).

    A feed's ``published_time`` is exact to the second while many pages only
    give a day, and the freshness decay works in hours, so a day-only page date
    does not override the feed. Anything more than ``max_future_s`` after
    ``fetch_time`` is dropped.
    """
    limit = fetch_time + max_future_s
    page_ts, page_has_time = page_date_to_epoch(page_date or "")
    if page_ts is not None and page_ts > limit:
        page_ts = None
    if feed_time is not None and (feed_time != feed_time or feed_time > limit):  # NaN or future
        feed_time = None
    if page_ts is not None and page_has_time:
        return page_ts
    if feed_time is not None:
        return float(feed_time)
    return page_ts


def check_fetch(raw: RawDocument, config: ExtractionConfig) -> None:
    """Cheap checks done before any decoding or parsing (the extract step runs them before a page goes to
    its extraction process).

    Raises:
      ExtractionError: ``"http_error"`` for a status outside 200-299 (0, a push or
        feed-only document, passes), ``"too_large"`` for a body over ``max_body_bytes``.
    """
    if raw.http_status and not 200 <= raw.http_status <= 299:
        raise ExtractionError("http_error", f"HTTP status {raw.http_status} for {raw.url}")
    if raw.body is not None and len(raw.body) > config.max_body_bytes:
        raise ExtractionError(
            "too_large", f"body is {len(raw.body)} bytes, over max_body_bytes={config.max_body_bytes}"
        )


def _extract_feed_only(raw: RawDocument, config: ExtractionConfig) -> ExtractedContent:
    title = html_fragment_to_text(nfc(raw.title)).replace("\n", " ").strip()
    text = html_fragment_to_text(nfc(raw.summary))
    if not title and not text:
        raise ExtractionError("missing_fields", f"feed-only document without title and summary: {raw.url}")
    return ExtractedContent(
        title=title,
        text=text,
        authors=(),
        site_name=strip_control_chars(nfc(raw.source_name)),
        publish_time=_choose_publish_time(None, raw.published_time, raw.fetch_time, config.max_future_s),
        html_language=_language_tag(raw.content_language),
    )


def _extract_page(raw: RawDocument, config: ExtractionConfig) -> ExtractedContent:
    """Decoding, parsing and trafilatura extraction of a page body (no time limit)."""
    import trafilatura
    from trafilatura.utils import load_html

    body = raw.body
    try:
        if body[:2] == b"\x1f\x8b":
            body = inflate_gzip(body, config.max_body_bytes)
        text, _encoding = decode_html(body, raw.content_type)
    except DecodeError as e:
        raise ExtractionError(e.error_type, e.message) from None
    if not text.strip():
        raise ExtractionError("broken_html", "body is empty")
    text = nfc(text)  # one spelling of every character for all that is extracted from the page
    tree = load_html(text)
    if tree is None:
        raise ExtractionError("broken_html", "body does not parse as an HTML document (no <html> and no structure)")
    body_el = tree.find(".//body")
    if body_el is None or (len(body_el) == 0 and not (body_el.text or "").strip()):
        raise ExtractionError("broken_html", "HTML has no <body> content (truncated or empty document)")
    pictures = page_images(tree, raw.url)  # before cleaning, which may drop the figure's surroundings
    html_language = _language_tag(tree.get("lang") or tree.get("{http://www.w3.org/XML/1998/namespace}lang"))
    if not html_language:
        html_language = _language_tag(raw.content_language)
    # Consent walls, sidebars, offers and locked paywall parts go before trafilatura sees the page.
    cleaned = clean_tree(tree)
    # htmldate compares against midnight of max_date, so allow one more day here; the
    # exact limit (fetch_time + max_future_s) is applied by _choose_publish_time.
    max_date = utc_date(raw.fetch_time + config.max_future_s + 86_400)
    doc = trafilatura.bare_extraction(
        tree,
        url=raw.url,
        with_metadata=True,
        favor_precision=config.favor_precision,
        favor_recall=config.favor_recall,
        include_comments=config.include_comments,
        include_tables=config.include_tables,
        deduplicate=config.deduplicate,
        date_extraction_params={
            "original_date": True,
            "extensive_search": False,
            "max_date": max_date,
            "outputformat": "%Y-%m-%dT%H:%M:%S%z",
            "deferred_url_extractor": True,
        },
    )
    body_text = strip_control_chars((doc.text if doc is not None else "") or "").strip()
    length = latin_equivalent_length(body_text)
    if length < config.min_text_chars:
        raise ExtractionError(
            "not_an_article",
            f"main text has {len(body_text)} chars ({length} Latin-letter equivalents), "
            f"under min_text_chars={config.min_text_chars}",
        )
    title = _WS_RE.sub(" ", strip_control_chars(doc.title or "")).strip() or html_fragment_to_text(
        raw.title or ""
    ).replace("\n", " ")
    body_text = drop_header_matter(body_text, title)
    return ExtractedContent(
        title=title,
        text=body_text,
        authors=_split_authors(doc.author),
        site_name=strip_control_chars((doc.sitename or "").strip() or (raw.source_name or "")),
        publish_time=_choose_publish_time(doc.date, raw.published_time, raw.fetch_time, config.max_future_s),
        html_language=html_language,
        canonical_url=declared_canonical_url(tree),
        paywalled=cleaned.paywalled,
        image_url=pictures.image_url,
        icon_url=pictures.icon_url,
    )


def extract_content(raw: RawDocument, config: ExtractionConfig = ExtractionConfig()) -> ExtractedContent:
    """Extracts one document in the calling thread, without a time limit.

    The pipeline's extract step (``ExtractArticles``) calls it, on pages
    in a separate process under ``config.timeout_s``.

    Args:
      raw: the landed document.
      config: extraction settings (``timeout_s`` is ignored).

    Returns:
      The :class:`ExtractedContent`.

    Raises:
      ExtractionError: any reason in :data:`ERROR_TYPES` except ``"timeout"``.
    """
    check_fetch(raw, config)
    if raw.body is None:
        return _extract_feed_only(raw, config)
    try:
        return _extract_page(raw, config)
    except ExtractionError:
        raise
    except (RecursionError, MemoryError) as e:
        raise ExtractionError(
            "broken_html", f"page too deeply nested or too big to parse: {type(e).__name__}"
        ) from None
    except Exception as e:  # lxml/trafilatura raise assorted types on malformed markup
        raise ExtractionError("broken_html", f"parser failed: {type(e).__name__}: {e}"[:500]) from None
