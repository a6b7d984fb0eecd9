"""Article extraction: raw fetched bytes (or feed fields) to title, main text and metadata.

This is the pure, Beam-free core that the pipeline's extract step wraps in a DoFn.
:class:`ArticleExtractor` turns a :class:`schemas.RawDocument` into an
:class:`ExtractedContent` or raises :class:`ExtractionError` whose ``error_type``
becomes the dead-letter reason.

Steps for a fetched page (``raw.body`` is bytes):

1. ``http_status`` outside 200-299 -> ``"http_error"``; body over
   ``max_body_bytes`` -> ``"too_large"`` (checked before anything is parsed; a
   gzip body is inflated with the same cap).
2. :func:`decode_html` turns bytes into ``str`` (BOM, then valid UTF-8, then the
   ``Content-Type`` charset, then ``<meta charset>``, then charset_normalizer
   detection); binary or undecodable bytes -> ``"undecodable"``.
3. The text is parsed with lxml (through trafilatura's loader); a body that is
   not HTML or has no ``<body>`` content (e.g. truncated in ``<head>``) ->
   ``"broken_html"``.
4. trafilatura (Barbaresi, ACL 2021 demo) extracts the main text and metadata.
   Text shorter than ``min_text_chars`` -> ``"not_an_article"``. Dates come from
   htmldate with ``extensive_search=False`` (structured markup and the URL only:
   the extensive search turns a footer "(c) 2024" into 2024-01-01, which would make
   a fresh article look months old) and ``max_date`` one day past fetch_time + ``max_future_s``.

Feed-only documents (``raw.body is None``) are built from the feed title and the
summary with its HTML stripped; no title and no summary -> ``"missing_fields"``.

Time limit: trafilatura cannot be interrupted from another thread and Beam calls
DoFns from worker threads, so ``signal.alarm`` cannot be used. Each
:class:`ArticleExtractor` therefore keeps a small pool of long-lived child
processes (``python -c`` running :func:`_worker_main`, not ``multiprocessing``,
so the parent's ``__main__`` is never re-imported). A document is sent to an idle
child as a length-prefixed pickle over its stdin pipe; the parent waits on the
stdout pipe with ``select`` until ``timeout_s``. On expiry the child is killed
(SIGKILL), a fresh one replaces it on the next call, and the document fails with
``"timeout"``. Idle children are handed out through a queue, so several threads
can call :meth:`ArticleExtractor.extract` at once (up to ``workers`` run in
parallel; others wait for a free child, and waiting does not count against the
limit). A child exits on its own when its stdin closes (parent gone).

Score it on the extraction benchmark with ``newsflow eval extraction`` and time it
with ``python -m benchmarks.extraction --json``.
"""

from __future__ import annotations

import codecs
import html as html_lib
import json
import logging
import os
import pickle
import queue
import re
import select
import struct
import subprocess
import sys
import threading
import time
import weakref
import zlib
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import NamedTuple, Optional

from schemas.raw import RawDocument

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
"""The values :attr:`ExtractionError.error_type` can take."""

_LOG = logging.getLogger(__name__)


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
    """

    title: str
    text: str
    authors: tuple[str, ...]
    site_name: str
    publish_time: Optional[float]
    html_language: str


@dataclass(frozen=True)
class ExtractionConfig:
    """Settings of :class:`ArticleExtractor`.

    The trafilatura defaults below were chosen on the 138 shared pages of the
    scrapinghub article-extraction-benchmark (``newsflow eval extraction``):
    ``favor_precision=True, include_comments=False`` scored F1 0.958 against 0.956
    with ``favor_recall`` instead and 0.945 for trafilatura's own defaults
    (``include_tables=False``: 0.949, ``deduplicate=True``: 0.954, ``fast``: 0.934).

    Attributes:
      timeout_s: wall-clock limit per page in seconds (parse + extraction in the
        child process). Must be > 0.
      max_body_bytes: pages with a larger body (or a gzip body inflating past it)
        fail with ``"too_large"`` before any parsing.
      min_text_chars: extracted text shorter than this (in characters, after
        stripping) is ``"not_an_article"``. 200 sits between the longest leftover
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
      workers: number of child processes per extractor (parallel extractions).
      isolate: run extraction in child processes with the time limit (True), or
        inline in the calling thread without any limit (False; for tests of the
        logic and to measure the isolation overhead).
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
    workers: int = 1
    isolate: bool = True

    def __post_init__(self):
        if not (self.timeout_s > 0):
            raise ValueError(f"timeout_s must be > 0 seconds, got {self.timeout_s!r}")
        if self.max_body_bytes <= 0:
            raise ValueError(f"max_body_bytes must be > 0, got {self.max_body_bytes!r}")
        if self.min_text_chars < 0:
            raise ValueError(f"min_text_chars must be >= 0, got {self.min_text_chars!r}")
        if self.favor_precision and self.favor_recall:
            raise ValueError("favor_precision and favor_recall cannot both be True")
        if self.workers < 1:
            raise ValueError(f"workers must be >= 1, got {self.workers!r}")
        if self.max_future_s < 0:
            raise ValueError(f"max_future_s must be >= 0 seconds, got {self.max_future_s!r}")


# --------------------------------------------------------------------------- decoding

_CHARSET_RE = re.compile(rb"""charset\s*=\s*["']?\s*([A-Za-z0-9._:\-]+)""", re.I)
_META_RE = re.compile(rb"<meta\b[^>]*>", re.I)
_HEADER_CHARSET_RE = re.compile(r"""charset\s*=\s*["']?\s*([A-Za-z0-9._:\-]+)""", re.I)
# WHATWG Encoding Standard: these labels mean windows-1252 in HTML.
_WINDOWS_1252_LABELS = frozenset({"latin1", "latin-1", "iso-8859-1", "iso8859-1", "iso_8859-1", "l1", "ascii",
                                  "us-ascii", "cp819", "ibm819", "iso-ir-100", "x-cp1252", "windows-1252"})
_SEVEN_BIT_ENCODINGS = frozenset({"iso2022_jp", "iso2022_jp_2", "iso2022_kr", "utf_7", "hz"})
_BINARY_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "PNG image"),
    (b"GIF87a", "GIF image"),
    (b"GIF89a", "GIF image"),
    (b"\xff\xd8\xff", "JPEG image"),
    (b"%PDF-", "PDF document"),
    (b"PK\x03\x04", "ZIP archive"),
    (b"RIFF", "RIFF media"),
    (b"\x00\x00\x01\x00", "ICO image"),
)
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")


def _normalize_charset(label: str) -> Optional[str]:
    """Python codec name for a charset label, or None when Python does not know it."""
    label = label.strip().strip("\"'").lower()
    if not label:
        return None
    if label in _WINDOWS_1252_LABELS:
        return "cp1252"
    try:
        return codecs.lookup(label).name
    except LookupError:
        return None


def _meta_charsets(head: bytes) -> list[str]:
    """Charsets declared by ``<meta charset>`` / ``<meta http-equiv content>`` in ``head``."""
    out = []
    for tag in _META_RE.findall(head):
        m = _CHARSET_RE.search(tag)
        if m:
            name = _normalize_charset(m.group(1).decode("ascii", "ignore"))
            if name and name not in out:
                out.append(name)
    return out


def _mostly_utf8(body: bytes) -> Optional[str]:
    """Decodes ``body`` as UTF-8 when it clearly is UTF-8 with a few stray bytes.

    A page in a single-byte charset has almost no valid multi-byte UTF-8
    sequences, so >= 10 valid non-ASCII characters per invalid byte run means the
    page is UTF-8 with some corrupt bytes (common when templates mix encodings).
    """
    text = body.decode("utf-8", errors="replace")
    bad = text.count("\ufffd")
    if bad == 0:
        return text
    good = sum(1 for ch in text if ord(ch) > 0x7F) - bad
    return text if good >= 10 * bad else None


def _looks_binary(text: str) -> bool:
    """True when more than 0.5% of the characters are C0 control characters."""
    sample = text[:100_000]
    if not sample:
        return False
    return len(_CONTROL_RE.findall(sample)) > 0.005 * len(sample)


def decode_html(body: bytes, content_type: str = "") -> tuple[str, str]:
    """Decodes an HTML response body to text, avoiding mojibake from wrong declarations.

    Order: byte-order mark; valid UTF-8 (a non-ASCII byte sequence that is valid
    UTF-8 is almost never meant as anything else, so this overrides a wrong
    ``latin-1`` declaration; 7-bit encodings such as ISO-2022-JP are honoured when
    declared); the ``Content-Type`` charset; ``<meta charset>`` / ``http-equiv``
    in the first 4 KiB; UTF-8 with a few stray bytes; charset_normalizer
    detection. Declared charsets are decoded strictly, so a wrong declaration
    that does not fit the bytes (latin-1 bytes declared UTF-8) falls through to
    the next step. Labels ``latin1``/``iso-8859-1``/``ascii`` mean windows-1252,
    as in the WHATWG Encoding Standard.

    Args:
      body: raw response bytes (not compressed).
      content_type: the ``Content-Type`` header value, may be "".

    Returns:
      ``(text, encoding)``: the decoded ``str`` and the Python codec name used.

    Raises:
      ExtractionError: ``"undecodable"`` for binary content (images, PDFs, NUL
        bytes, >0.5% control characters) or bytes no encoding fits.
    """
    head = body[:4096]
    for magic, what in _BINARY_MAGIC:
        if head.startswith(magic):
            raise ExtractionError("undecodable", f"body is a {what}, not text")
    for bom, enc in _BOMS:
        if head.startswith(bom):
            try:
                return body[len(bom):].decode(enc), enc
            except UnicodeDecodeError as e:
                raise ExtractionError("undecodable", f"body starts with a {enc} BOM but does not decode: {e}") from None
    declared: list[str] = []
    m = _HEADER_CHARSET_RE.search(content_type or "")
    if m:
        name = _normalize_charset(m.group(1))
        if name:
            declared.append(name)
    for name in _meta_charsets(head):
        if name not in declared:
            declared.append(name)
    wide = [d for d in declared if d.startswith(("utf-16", "utf-32", "utf_16", "utf_32"))]
    if b"\x00" in head and not wide:
        raise ExtractionError("undecodable", "body contains NUL bytes and declares no UTF-16/32 charset (binary data)")

    def _accept(text: str, enc: str) -> tuple[str, str]:
        if _looks_binary(text):
            raise ExtractionError("undecodable", f"decoded text ({enc}) is mostly control characters (binary data)")
        return text, enc

    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None:
        if text.isascii():
            for enc in declared:
                if enc in _SEVEN_BIT_ENCODINGS:
                    try:
                        return _accept(body.decode(enc), enc)
                    except UnicodeDecodeError:
                        pass
        return _accept(text, "utf-8")
    for enc in declared:
        if enc == "utf-8":
            continue
        try:
            return _accept(body.decode(enc), enc)
        except (UnicodeDecodeError, LookupError):
            continue
    text = _mostly_utf8(body)
    if text is not None:
        return _accept(text, "utf-8")
    from charset_normalizer import from_bytes  # imported lazily: only needed for undeclared non-UTF-8 pages

    matches = from_bytes(body[:200_000])
    best = matches.best()
    if best is not None and best.encoding:
        enc = best.encoding
        # Detection confuses the single-byte Latin code pages (French cp1252 text comes
        # back as cp1257 with "ą" for "à"). windows-1252 is by far the most used legacy
        # web encoding, so it wins whenever the detector finds it (nearly) as clean.
        if enc != "cp1252" and not best.multi_byte_usage:
            cp1252 = [m for m in matches if m.encoding == "cp1252"]
            if "cp1252" in best.could_be_from_charset or (cp1252 and cp1252[0].chaos <= best.chaos + 0.05):
                enc = "cp1252"
        try:
            return _accept(body.decode(enc), enc)
        except (UnicodeDecodeError, LookupError):
            text = body.decode(enc, errors="replace")
            if text.count("\ufffd") <= 0.001 * len(text):
                return _accept(text, enc)
    raise ExtractionError(
        "undecodable",
        f"bytes fit neither UTF-8, the declared charset(s) {declared or 'none'}, nor a detected encoding",
    )


def _inflate_gzip(body: bytes, limit: int) -> bytes:
    """Inflates a gzip body, refusing output over ``limit`` bytes (decompression bombs)."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = d.decompress(body, limit + 1)
    except zlib.error as e:
        raise ExtractionError("undecodable", f"body has a gzip header but does not inflate: {e}") from None
    if len(out) > limit:
        raise ExtractionError("too_large", f"gzip body inflates past max_body_bytes={limit}")
    return out


# --------------------------------------------------------------------------- helpers

_BLOCK_TAGS = frozenset({"p", "div", "br", "li", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote",
                         "tr", "table", "section", "article", "pre", "hr", "dd", "dt", "figure", "figcaption"})
_WS_RE = re.compile(r"[ \t\r\f\v\u00a0]+")


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
    lines = (_WS_RE.sub(" ", line).strip() for line in text.split("\n"))
    return "\n".join(line for line in lines if line)


def _parse_time(value: str) -> tuple[Optional[float], bool]:
    """Parses an htmldate/ISO string to (UTC epoch seconds, has_time_of_day)."""
    if not value:
        return None, False
    value = value.strip()
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        for fmt in ("%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%d"):
            try:
                dt = datetime.strptime(value, fmt)
                break
            except ValueError:
                continue
        else:
            return None, False
    has_time = dt.tzinfo is not None or (len(value) > 10 and (dt.hour, dt.minute, dt.second) != (0, 0, 0))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp(), has_time


def _language_tag(value: Optional[str]) -> str:
    if not value:
        return ""
    first = value.split(",")[0].split(";")[0].strip().lower().replace("_", "-")
    return first if re.fullmatch(r"[a-z]{1,8}(-[a-z0-9]{1,8})*", first) else ""


def _split_authors(value: Optional[str]) -> tuple[str, ...]:
    if not value:
        return ()
    out: list[str] = []
    for name in value.split(";"):
        name = _WS_RE.sub(" ", name).strip()
        if name and name not in out:
            out.append(name)
    return tuple(out)


def _choose_publish_time(page_date: Optional[str], feed_time: Optional[float], fetch_time: float,
                         max_future_s: float) -> Optional[float]:
    """Page date with a time of day, else the feed time, else a date-only page date (midnight UTC).

    A feed's ``published_time`` is exact to the second while many pages only
    give a day, and the freshness decay works in hours, so a day-only page date
    does not override the feed. Anything more than ``max_future_s`` after
    ``fetch_time`` is dropped.
    """
    limit = fetch_time + max_future_s
    page_ts, page_has_time = _parse_time(page_date or "")
    if page_ts is not None and page_ts > limit:
        page_ts = None
    if feed_time is not None and (feed_time != feed_time or feed_time > limit):  # NaN or future
        feed_time = None
    if page_ts is not None and page_has_time:
        return page_ts
    if feed_time is not None:
        return float(feed_time)
    return page_ts


# --------------------------------------------------------------------------- extraction proper


def _check_fetch(raw: RawDocument, config: ExtractionConfig) -> None:
    """Cheap checks done before any decoding or parsing."""
    if raw.http_status and not 200 <= raw.http_status <= 299:
        raise ExtractionError("http_error", f"HTTP status {raw.http_status} for {raw.url}")
    if raw.body is not None and len(raw.body) > config.max_body_bytes:
        raise ExtractionError(
            "too_large", f"body is {len(raw.body)} bytes, over max_body_bytes={config.max_body_bytes}"
        )


def _extract_feed_only(raw: RawDocument, config: ExtractionConfig) -> ExtractedContent:
    title = html_fragment_to_text(raw.title or "").replace("\n", " ").strip()
    text = html_fragment_to_text(raw.summary or "")
    if not title and not text:
        raise ExtractionError("missing_fields", f"feed-only document without title and summary: {raw.url}")
    return ExtractedContent(
        title=title,
        text=text,
        authors=(),
        site_name=raw.source_name or "",
        publish_time=_choose_publish_time(None, raw.published_time, raw.fetch_time, config.max_future_s),
        html_language=_language_tag(raw.content_language),
    )


def _extract_page(raw: RawDocument, config: ExtractionConfig) -> ExtractedContent:
    """Decoding, parsing and trafilatura extraction of a page body (no time limit)."""
    import trafilatura
    from trafilatura.utils import load_html

    body = raw.body
    if body[:2] == b"\x1f\x8b":
        body = _inflate_gzip(body, config.max_body_bytes)
    text, _encoding = decode_html(body, raw.content_type)
    if not text.strip():
        raise ExtractionError("broken_html", "body is empty")
    tree = load_html(text)
    if tree is None:
        raise ExtractionError("broken_html", "body does not parse as an HTML document (no <html> and no structure)")
    body_el = tree.find(".//body")
    if body_el is None or (len(body_el) == 0 and not (body_el.text or "").strip()):
        raise ExtractionError("broken_html", "HTML has no <body> content (truncated or empty document)")
    html_language = _language_tag(tree.get("lang") or tree.get("{http://www.w3.org/XML/1998/namespace}lang"))
    if not html_language:
        html_language = _language_tag(raw.content_language)
    # htmldate compares against midnight of max_date, so allow one more day here; the
    # exact limit (fetch_time + max_future_s) is applied by _choose_publish_time.
    max_date = datetime.fromtimestamp(raw.fetch_time + config.max_future_s + 86_400, tz=timezone.utc).strftime(
        "%Y-%m-%d")
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
        },
    )
    body_text = ((doc.text if doc is not None else "") or "").strip()
    if len(body_text) < config.min_text_chars:
        raise ExtractionError(
            "not_an_article",
            f"main text has {len(body_text)} chars, under min_text_chars={config.min_text_chars}",
        )
    title = _WS_RE.sub(" ", (doc.title or "")).strip() or html_fragment_to_text(raw.title or "").replace("\n", " ")
    return ExtractedContent(
        title=title,
        text=body_text,
        authors=_split_authors(doc.author),
        site_name=(doc.sitename or "").strip() or (raw.source_name or ""),
        publish_time=_choose_publish_time(doc.date, raw.published_time, raw.fetch_time, config.max_future_s),
        html_language=html_language,
    )


def extract_content(raw: RawDocument, config: ExtractionConfig = ExtractionConfig()) -> ExtractedContent:
    """Extracts one document in the calling thread, without a time limit.

    :class:`ArticleExtractor` is the production entry point (it adds the time
    limit); this function is the logic it runs in its child processes.

    Args:
      raw: the landed document.
      config: extraction settings (``timeout_s``, ``workers`` and ``isolate`` are ignored).

    Returns:
      The :class:`ExtractedContent`.

    Raises:
      ExtractionError: any reason in :data:`ERROR_TYPES` except ``"timeout"``.
    """
    _check_fetch(raw, config)
    if raw.body is None:
        return _extract_feed_only(raw, config)
    try:
        return _extract_page(raw, config)
    except ExtractionError:
        raise
    except (RecursionError, MemoryError) as e:
        raise ExtractionError("broken_html", f"page too deeply nested or too big to parse: {type(e).__name__}") from None
    except Exception as e:  # lxml/trafilatura raise assorted types on malformed markup
        raise ExtractionError("broken_html", f"parser failed: {type(e).__name__}: {e}"[:500]) from None


# --------------------------------------------------------------------------- child processes

_HEADER = struct.Struct(">Q")


def _write_frame(stream, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)))
    stream.write(data)
    stream.flush()


def _read_frame_blocking(stream):
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (n,) = _HEADER.unpack(header)
    data = stream.read(n)
    if len(data) < n:
        return None
    return pickle.loads(data)


def _worker_main() -> None:
    """Loop of an extraction child process: read (raw, config) frames, answer each.

    Answers are ``("ok", tuple(ExtractedContent))`` or ``("err", error_type, message)``.
    The protocol uses a private copy of stdout; fd 1 is pointed at stderr so stray
    prints from libraries cannot corrupt it. Exits when stdin is closed.
    """
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    proto_in = os.fdopen(os.dup(0), "rb")
    proto_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    for name in ("trafilatura", "htmldate", "courlan", "charset_normalizer"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    import trafilatura  # noqa: F401  (warm import before announcing readiness)

    _write_frame(proto_out, ("ready", os.getpid()))
    while True:
        msg = _read_frame_blocking(proto_in)
        if msg is None:
            return
        raw_fields, config_dict = msg
        try:
            result = extract_content(RawDocument(*raw_fields), ExtractionConfig(**config_dict))
            answer = ("ok", tuple(result))
        except ExtractionError as e:
            answer = ("err", e.error_type, e.message)
        except Exception as e:  # never let the child die on one document
            answer = ("err", "broken_html", f"extraction failed: {type(e).__name__}: {e}"[:500])
        _write_frame(proto_out, answer)


class _Worker:
    """One child process and its pipes."""

    def __init__(self, startup_timeout_s: float):
        code = (
            "import sys, json; sys.path[:0] = json.loads(sys.argv[1]); "
            "from newsflow.extraction import _worker_main; _worker_main()"
        )
        paths = [p for p in sys.path if p] + [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code, json.dumps(paths)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,
            close_fds=True,
        )
        self.fd = self.proc.stdout.fileno()
        try:
            hello = self.read(time.monotonic() + startup_timeout_s)
        except TimeoutError:
            self.kill()
            raise RuntimeError(f"extraction child process did not start within {startup_timeout_s} s") from None
        if not (isinstance(hello, tuple) and hello and hello[0] == "ready"):
            self.kill()
            raise RuntimeError(f"extraction child process failed to start (got {hello!r})")

    def read(self, deadline: float):
        """Reads one frame before ``deadline`` (monotonic seconds); None on EOF; raises TimeoutError."""
        header = self._read_exact(_HEADER.size, deadline)
        if header is None:
            return None
        (n,) = _HEADER.unpack(header)
        data = self._read_exact(n, deadline)
        return None if data is None else pickle.loads(data)

    def _read_exact(self, n: int, deadline: float) -> Optional[bytes]:
        chunks = []
        while n > 0:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            ready, _, _ = select.select([self.fd], [], [], remaining)
            if not ready:
                raise TimeoutError
            chunk = os.read(self.fd, min(n, 1 << 20))
            if not chunk:
                return None
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def send(self, obj) -> None:
        _write_frame(self.proc.stdin, obj)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        try:
            self.proc.kill()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL not honoured
            _LOG.error("extraction child %s did not exit after SIGKILL", self.proc.pid)
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass

    def close(self) -> None:
        """Closes stdin (the child exits on EOF), then kills it if it lingers."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
        self.kill()


def _close_workers(workers: list) -> None:
    for w in list(workers):
        w.close()
    workers.clear()


class ArticleExtractor:
    """Extracts articles from raw documents with a per-document wall-clock limit.

    Thread-safe: up to ``config.workers`` documents are extracted in parallel,
    each in its own child process (see the module docstring for the mechanism).
    Children start lazily on first use; :meth:`close` (or leaving a ``with``
    block, or garbage collection of the extractor) stops them.

    Args:
      config: :class:`ExtractionConfig`.

    Not picklable (it owns processes and pipes): in Beam, build it in
    ``DoFn.setup()`` and close it in ``teardown()``; the children also exit on
    their own when the worker process goes away.

    Example::

        with ArticleExtractor(ExtractionConfig(timeout_s=5.0)) as ex:
            content = ex.extract(raw_document)
    """

    #: Seconds allowed for a child process to start (python + trafilatura import).
    STARTUP_TIMEOUT_S = 60.0

    def __init__(self, config: ExtractionConfig = ExtractionConfig()):
        self.config = config
        self._config_dict = asdict(config)
        self._lock = threading.Lock()
        self._idle: queue.SimpleQueue = queue.SimpleQueue()
        self._all: list[_Worker] = []
        self._started = 0
        self._closed = False
        self._finalizer = weakref.finalize(self, _close_workers, self._all)
        self.timeouts = 0
        self.restarts = 0

    def __enter__(self) -> "ArticleExtractor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stops all child processes. Calling :meth:`extract` afterwards raises RuntimeError."""
        with self._lock:
            self._closed = True
        self._finalizer()

    def _acquire(self) -> _Worker:
        """An idle child, starting one when fewer than ``workers`` are running."""
        while True:
            with self._lock:
                if self._closed:
                    raise RuntimeError("ArticleExtractor is closed")
                start_new = self._started < self.config.workers
                if start_new:
                    self._started += 1
            if start_new:
                try:
                    worker = _Worker(self.STARTUP_TIMEOUT_S)
                except BaseException:
                    with self._lock:
                        self._started -= 1
                    raise
                with self._lock:
                    self._all.append(worker)
                return worker
            try:
                return self._idle.get(timeout=0.05)
            except queue.Empty:
                continue  # a killed child may have freed a slot

    def _replace(self, worker: _Worker) -> None:
        """Kills ``worker``; its slot is refilled by the next :meth:`_acquire`."""
        worker.kill()
        with self._lock:
            if worker in self._all:
                self._all.remove(worker)
            self._started -= 1
            self.restarts += 1

    def extract(self, raw: RawDocument) -> ExtractedContent:
        """Extracts title, main text and metadata from one raw document.

        Args:
          raw: the landed :class:`schemas.RawDocument` (page body or feed-only).

        Returns:
          :class:`ExtractedContent`.

        Raises:
          ExtractionError: with ``error_type`` in :data:`ERROR_TYPES`; ``"timeout"``
            when parsing and extraction took longer than ``config.timeout_s``.
          RuntimeError: the extractor was closed, or a child process could not start.
        """
        _check_fetch(raw, self.config)
        if raw.body is None or not self.config.isolate:
            return extract_content(raw, self.config)
        worker = self._acquire()
        try:
            try:
                worker.send((tuple(raw), self._config_dict))
                answer = worker.read(time.monotonic() + self.config.timeout_s)
            except TimeoutError:
                self._replace(worker)
                worker = None
                with self._lock:
                    self.timeouts += 1
                raise ExtractionError(
                    "timeout", f"extraction took longer than timeout_s={self.config.timeout_s} s: {raw.url}"
                ) from None
            except (BrokenPipeError, OSError) as e:
                code = worker.proc.poll()
                self._replace(worker)
                worker = None
                raise ExtractionError(
                    "broken_html", f"extraction child process died (exit code {code}): {type(e).__name__}"
                ) from None
            if answer is None:
                code = worker.proc.wait()
                self._replace(worker)
                worker = None
                raise ExtractionError("broken_html", f"extraction child process died on this page (exit code {code})")
        finally:
            if worker is not None:
                if worker.alive():
                    self._idle.put(worker)
                else:
                    self._replace(worker)
        if answer[0] == "ok":
            title, text, authors, site_name, publish_time, html_language = answer[1]
            return ExtractedContent(title, text, tuple(authors), site_name, publish_time, html_language)
        raise ExtractionError(answer[1], answer[2])
