"""Content transforms: parse landing records, extract, detect language, fingerprint.

Each public composite takes one frozen config and returns a ``TaggedOutput``-style
dict ``{"main": ..., "dead_letter": ...}``; every failure becomes a
:class:`schemas.DeadLetter` with the step, the reason and the raw payload.
"""

from __future__ import annotations

import logging
import multiprocessing
import time
from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field

import apache_beam as beam
from apache_beam import pvalue
from apache_beam.metrics import Metrics
from apache_beam.utils import shared

from newsflow.core.articles import build_article, event_time_ms, fingerprint_text
from newsflow.core.extraction import ExtractedContent, ExtractionConfig, ExtractionError, check_fetch, extract_content
from newsflow.core.language import LanguageIdentifier, OutletLanguages
from newsflow.core.simhash import simhash, to_hex
from newsflow.core.sources import DEFAULT_SOURCES_PATH, UNKNOWN_AUTHORITY, SourceTable
from newsflow.core.urls import check_document_url
from newsflow.schemas import Article, DeadLetter, RawDocument, RecordError
from newsflow.schemas.raw import loads_record
from newsflow.transforms.deadletter import DEAD_LETTER_TAG, METRICS_NAMESPACE, dead_letter, raw_payload

_MAX_LINE_BYTES = 64 * 1024 * 1024


class _ParseFn(beam.DoFn):
    """Parses one landing record (JSON bytes) into a validated RawDocument; bad records are dead-lettered.

    A UTF-8 byte-order mark at the start of a line is ignored; blank lines are not records (counted
    as ``blank_lines``). Validation: ``RawDocument.from_json_dict`` (types, ranges, Unicode) and
    ``newsflow.core.urls.check_document_url`` (URL shape and safety, source domain matches the URL).
    Metrics: counters ``parsed``, ``blank_lines``, ``dead_lettered_parse``; distribution ``event_time_ms`` of
    the parsed documents (:func:`newsflow.core.articles.event_time_ms`; its max is the newest event time).
    """

    def __init__(self):
        self.parsed = Metrics.counter(METRICS_NAMESPACE, "parsed")
        self.blank = Metrics.counter(METRICS_NAMESPACE, "blank_lines")
        self.dead = Metrics.counter(METRICS_NAMESPACE, "dead_lettered_parse")
        self.event_ms = Metrics.distribution(METRICS_NAMESPACE, "event_time_ms")  # max: the newest event time

    def process(self, element):
        payload = element if isinstance(element, bytes) else str(element).encode("utf-8", "surrogatepass")
        if not payload.strip():
            self.blank.inc()
            return
        url = ""
        try:
            if len(payload) > _MAX_LINE_BYTES:
                raise RecordError("too_large", f"landing record of {len(payload)} bytes exceeds {_MAX_LINE_BYTES}")
            try:
                text = payload.decode("utf-8")
            except UnicodeDecodeError as e:
                raise RecordError("undecodable", f"landing record is not UTF-8: {e}") from None
            try:
                record = loads_record(text.lstrip("\ufeff"))
            except (ValueError, RecursionError) as e:
                raise RecordError("invalid_json", f"landing record is not JSON: {str(e)[:300]}") from None
            if isinstance(record, dict) and isinstance(record.get("url"), str):
                url = record["url"][:2048]
            raw = RawDocument.from_json_dict(record)
            check_document_url(raw.url, raw.source_domain)
        except RecordError as e:
            self.dead.inc()
            yield pvalue.TaggedOutput(DEAD_LETTER_TAG, dead_letter("parse", e.error_type, str(e), payload, url))
            return
        except Exception as e:  # noqa: BLE001 - a record that breaks validation in an unforeseen way is
            # dead-lettered with its error (deterministic for the record, so a retry cannot help); it never
            # stops the job or takes the good records of its bundle down with it
            self.dead.inc()
            yield pvalue.TaggedOutput(
                DEAD_LETTER_TAG,
                dead_letter("parse", "invalid_record", f"{type(e).__name__}: {str(e)[:300]}", payload, url),
            )
            return
        self.parsed.inc()
        self.event_ms.update(event_time_ms(raw))
        yield raw


class ParseRawDocuments(beam.PTransform):
    """bytes (one landing-file line or message) -> RawDocument, plus dead letters."""

    def expand(self, pcoll):
        out = pcoll | "Parse" >> beam.ParDo(_ParseFn()).with_outputs(DEAD_LETTER_TAG, main="main")
        return {"main": out.main, DEAD_LETTER_TAG: out[DEAD_LETTER_TAG]}


# Beam runs ExtractPages in a process pool (``with_exception_handling(use_subprocess=True)``) built on
# ProcessPoolExecutor's default start method. A worker of the multi-process DirectRunner, Dataflow or Flink is a
# multi-threaded gRPC program, and a child *forked* from it can die before running a line (CPython documents fork
# from a threaded process as unsafe; Python 3.14 makes forkserver the default for that reason): the bundle then
# fails with BrokenProcessPool. A forkserver child is forked from a clean single-threaded server process instead.
# Set only where the process has not chosen a start method itself.
if (
    multiprocessing.get_start_method(allow_none=True) is None
    and "forkserver" in multiprocessing.get_all_start_methods()
):
    multiprocessing.set_start_method("forkserver")


@dataclass(frozen=True)
class ContentConfig:
    """Configuration of the content steps.

    Attributes:
      extraction: per-document extraction limits and options (``timeout_s``: the time limit of a page).
      sources_path: the sources authority CSV (``None``: the table shipped with newsflow, resolved on the
        worker, so a remote worker reads its installed copy, not this machine's path).
      language_threshold: fastText confidence below which the language is "und" (None: library default).
      registry_redis_url / key_prefix / use_registry: where the sources registry lives
        (:mod:`newsflow.storage.source_registry`; ``None``: not read, as in unit tests). When it holds
        outlet records (``newsflow sources ...`` seeded it), their authority (edited, or recomputed by
        ``newsflow sources authority``) is layered over the CSV table, so a source added or re-rated
        there is used by the job; with no records the CSV table alone is used.
      page_extractor: the function that extracts a page (a document with a body) in the extraction
        process, :func:`newsflow.core.extraction.extract_content` (a module-level function, so it pickles
        by name; tests pass one that hangs or crashes on chosen pages).
    """

    extraction: ExtractionConfig = field(default_factory=ExtractionConfig)
    sources_path: str | None = None
    language_threshold: float | None = None
    registry_redis_url: str | None = None
    key_prefix: str = "nf"
    use_registry: bool = True
    page_extractor: Callable[[RawDocument, ExtractionConfig], ExtractedContent] = extract_content


def _source_table(config: ContentConfig, path: str):
    """The CSV sources table, with the registry's outlet records over it when there are any."""
    table = SourceTable.load(path)
    if not config.use_registry or not config.registry_redis_url:
        return table
    from newsflow.runtime.redis_conn import connect
    from newsflow.storage.keys import Keys
    from newsflow.storage.source_registry import SourceRegistry

    client = connect(config.registry_redis_url)
    keys = Keys(config.key_prefix)
    if not client.exists(keys.source_outlets):
        return table
    return SourceRegistry(client, keys).source_table(base=table)


def _language_identifier(config: ContentConfig) -> LanguageIdentifier:
    kwargs = {} if config.language_threshold is None else {"threshold": config.language_threshold}
    return LanguageIdentifier(**kwargs)


#: Output tag of :class:`_RouteFn` for documents with a page body (parsed in the extraction process).
PAGES_TAG = "pages"
#: Output tag of Beam's exception handling for pages whose extraction timed out, crashed or raised
#: something other than ``ExtractionError`` (elements ``(raw, (exception type, repr, traceback lines))``).
FAILED_TAG = "failed"


class _RouteFn(beam.DoFn):
    """RawDocument -> ``(raw, ExtractedContent, seconds)`` for a feed-only document (extracted here: no HTML
    to parse), the RawDocument itself under :data:`PAGES_TAG` for a page, or a dead letter.

    The cheap checks (:func:`newsflow.core.extraction.check_fetch`: HTTP status, body size) run here, so a
    page that fails them never crosses to the extraction process.
    """

    def __init__(self, config: ContentConfig):
        self._config = config

    def setup(self):
        # the extraction process is forked from this one: with trafilatura imported here it starts warm
        import trafilatura  # noqa: F401

    def process(self, raw: RawDocument):
        started = time.perf_counter()
        try:
            check_fetch(raw, self._config.extraction)
            if raw.body is not None:
                yield pvalue.TaggedOutput(PAGES_TAG, raw)
                return
            content = extract_content(raw, self._config.extraction)
        except ExtractionError as e:
            yield pvalue.TaggedOutput(DEAD_LETTER_TAG, _extract_dead_letter(raw, e.error_type, str(e)))
            return
        yield raw, content, time.perf_counter() - started


class _ExtractPageFn(beam.DoFn):
    """RawDocument with a page body -> ``(raw, ExtractedContent, seconds)``, or a dead letter when the page is
    not an article (:class:`newsflow.core.extraction.ExtractionError`).

    Runs in the process of Beam's ``with_exception_handling(use_subprocess=True, timeout=...)`` (see
    :class:`ExtractArticles`), so it must not count metrics (they would stay in that process): the seconds
    travel with the output and are counted by :class:`_BuildArticleFn`.
    """

    def __init__(self, config: ContentConfig):
        self._config = config

    def setup(self):
        for name in ("trafilatura", "htmldate", "courlan", "charset_normalizer"):
            logging.getLogger(name).setLevel(logging.CRITICAL)

    def process(self, raw: RawDocument):
        started = time.perf_counter()
        try:
            content = self._config.page_extractor(raw, self._config.extraction)
        except ExtractionError as e:
            yield pvalue.TaggedOutput(DEAD_LETTER_TAG, _extract_dead_letter(raw, e.error_type, str(e)))
            return
        yield raw, content, time.perf_counter() - started


def _extract_dead_letter(raw: RawDocument, error_type: str, error: str) -> DeadLetter:
    return dead_letter("extract", error_type, error, raw_payload(raw), raw.url)


def failed_page_dead_letter(failed, timeout_s: float) -> DeadLetter:
    """The dead letter of a page that Beam's exception handling gave up on.

    Args:
      failed: an element of the :data:`FAILED_TAG` output, ``(raw, (exception type, repr, traceback lines))``.
      timeout_s: the extraction time limit, seconds (named in the message of a timeout).

    Returns:
      A DeadLetter of step ``"extract"`` with the RawDocument as landing JSON, ``error_type`` ``"timeout"``
      (past ``timeout_s``: the extraction process was killed), ``"crashed"`` (the extraction process died on
      the page, e.g. a crash in C code) or ``"extract_failed"`` (any other exception, with its traceback).
    """
    raw, (exc_type, exc_repr, trace) = failed
    if issubclass(exc_type, TimeoutError):
        error_type, error = "timeout", f"extraction took longer than timeout_s={timeout_s} s: {raw.url}"
    elif issubclass(exc_type, BrokenProcessPool):
        error_type, error = "crashed", f"the extraction process died on this page: {exc_repr}"
    else:
        error_type, error = "extract_failed", f"{exc_repr}\n{''.join(trace)}"
    return _extract_dead_letter(raw, error_type, error)


class _BuildArticleFn(beam.DoFn):
    """``(raw, ExtractedContent, seconds)`` -> Article (source authority and name, declared language), or a
    dead letter (``bad_url``: a URL that cannot be canonicalized)."""

    def __init__(self, config: ContentConfig, shared_handle: shared.Shared):
        self._config = config
        self._shared = shared_handle
        self.extracted = Metrics.counter(METRICS_NAMESPACE, "extracted")
        self.feed_only = Metrics.counter(METRICS_NAMESPACE, "feed_only_articles")
        self.extract_ms = Metrics.distribution(METRICS_NAMESPACE, "extract_ms")

    def setup(self):
        path = self._config.sources_path or DEFAULT_SOURCES_PATH
        self._sources = self._shared.acquire(lambda: _source_table(self._config, path), tag=f"sources:{path}")

    def process(self, extracted):
        raw, content, seconds = extracted
        try:
            source = self._sources.lookup(raw.source_domain)
            article = build_article(
                raw,
                content,
                source_authority=source.authority if source else UNKNOWN_AUTHORITY,
                source_name=source.name if source else "",
            )._replace(
                # declared language evidence: <html lang>, else Content-Language (or the feed's
                # <language>, which the crawler lands there), else the outlet's registered language
                declared_language=content.html_language or (source.language if source else ""),
                paywalled=content.paywalled,
            )
        except ValueError as e:  # URL that cannot be canonicalized
            yield pvalue.TaggedOutput(DEAD_LETTER_TAG, _extract_dead_letter(raw, "bad_url", str(e)))
            return
        if article.feed_only:
            self.feed_only.inc()
        self.extracted.inc()
        self.extract_ms.update(int(seconds * 1000))
        yield article


class _CountFn(beam.DoFn):
    """Counts the elements that pass (counter ``name`` of the ``newsflow`` namespace)."""

    def __init__(self, name: str):
        self._name = name
        self.counter = Metrics.counter(METRICS_NAMESPACE, name)

    def process(self, element):
        self.counter.inc()
        yield element


class _LanguagePrior:
    """A language prior held through ``Shared`` (which needs a weak-referenceable object)."""

    def __init__(self, prior: dict[str, float]):
        self.prior = prior


class _DetectLanguageFn(beam.DoFn):
    """Article -> Article with ``language`` / ``language_confidence`` from fastText lid.176 on the
    headline and lead text, with ``declared_language`` and the sources table's language mix
    (:class:`OutletLanguages`) as evidence (``newsflow.core.language``)."""

    def __init__(self, config: ContentConfig, shared_handle: shared.Shared, prior_handle: shared.Shared | None = None):
        self._config = config
        self._shared = shared_handle
        self._prior_shared = prior_handle or shared.Shared()
        self.und = Metrics.counter(METRICS_NAMESPACE, "language_und")

    def setup(self):
        config = self._config
        self._language = self._shared.acquire(
            lambda: _language_identifier(config), tag=f"language:{config.language_threshold}"
        )
        path = config.sources_path or DEFAULT_SOURCES_PATH
        self._prior = self._prior_shared.acquire(
            lambda: _LanguagePrior(OutletLanguages.from_sources(_source_table(config, path)).prior()),
            tag=f"language-prior:{path}",
        ).prior

    def process(self, article: Article):
        # Headline + lead text, with the publisher's declared language and the outlets' languages
        # as evidence (newsflow.core.language: module docstring).
        language, confidence = self._language.detect(
            fingerprint_text(article)[:2000], declared=article.declared_language or None, prior=self._prior
        )
        if language == "und":
            self.und.inc()
        yield article._replace(language=language, language_confidence=float(confidence))


class _FingerprintFn(beam.DoFn):
    """Article -> Article with its 64-bit SimHash (16 hex) over title + text."""

    def process(self, article: Article):
        yield article._replace(simhash=to_hex(simhash(fingerprint_text(article))))


class DetectLanguage(beam.PTransform):
    """Article -> Article with language code and confidence ("und" when unsure)."""

    def __init__(self, config: ContentConfig = ContentConfig()):
        super().__init__()
        self._config = config

    def expand(self, pcoll):
        return pcoll | "DetectLanguage" >> beam.ParDo(_DetectLanguageFn(self._config, shared.Shared()))


class FingerprintArticles(beam.PTransform):
    """Article -> Article with ``simhash`` set (see ``newsflow.core.simhash`` for the definition)."""

    def expand(self, pcoll):
        return pcoll | "SimHash" >> beam.ParDo(_FingerprintFn())


def stamp_event_time(article: Article, timestamp=beam.DoFn.TimestampParam) -> beam.window.TimestampedValue:
    """``article`` timestamped with its ``event_time``, or with ``timestamp`` (the message's, as the
    source set it) when that is later, ``event_time`` then raised to match: no step moves an article
    before its message's timestamp, and the record and its timestamp agree downstream."""
    t = float(timestamp)
    if t > article.event_time:
        article = article._replace(event_time=t)
    return beam.window.TimestampedValue(article, article.event_time)


class ExtractArticles(beam.PTransform):
    """RawDocument -> Article with text and metadata (trafilatura); failures dead-lettered.

    A page (a document with an HTML body) is parsed in a separate process under the time limit
    ``extraction.timeout_s`` (Beam's ``with_exception_handling(use_subprocess=True, timeout=...)``: one
    long-lived process per DoFn instance, replaced after a timeout or a crash). A page that takes longer
    becomes a dead letter ``"timeout"``, one that kills the process (a crash in C code) ``"crashed"``; the
    job goes on with the next page. Feed-only documents have no HTML to parse and are extracted in-process.
    Parallelism comes from the runner (its workers each run their own extraction process).

    Output elements are timestamped with the article's event time, the time its message carries
    (:func:`newsflow.core.articles.event_time`: feed/sitemap date clamped to the fetch, else the fetch time;
    Pub/Sub and Kafka sources read it from the message, landing files from the record). Never earlier
    than the element's timestamp on arrival: if a message's timestamp is later than its record says,
    the article takes the message's (:func:`stamp_event_time`). A publish time found by extraction is
    stored in ``publish_time`` and does not restamp.

    Returns ``{"main": PCollection[Article], "dead_letter": PCollection[DeadLetter]}``; every dead letter
    has step ``"extract"`` and the RawDocument as landing JSON (replayable as-is).
    """

    def __init__(self, config: ContentConfig = ContentConfig()):
        super().__init__()
        self._config = config

    def expand(self, pcoll):
        config = self._config
        routed = pcoll | "Route" >> beam.ParDo(_RouteFn(config)).with_outputs(PAGES_TAG, DEAD_LETTER_TAG, main="main")
        pages = routed[PAGES_TAG] | "ExtractPages" >> beam.ParDo(_ExtractPageFn(config)).with_exception_handling(
            main_tag="main",
            dead_letter_tag=FAILED_TAG,
            use_subprocess=True,
            timeout=config.extraction.timeout_s,
        ).with_outputs(DEAD_LETTER_TAG, main="main")
        failed = pages[FAILED_TAG] | "FailedPages" >> beam.Map(
            failed_page_dead_letter, config.extraction.timeout_s
        ).with_output_types(DeadLetter)
        built = (
            (routed.main, pages["main"])
            | "Extracted" >> beam.Flatten()
            | "BuildArticles"
            >> beam.ParDo(_BuildArticleFn(config, shared.Shared())).with_outputs(DEAD_LETTER_TAG, main="main")
        )
        timestamped = built.main | "StampEventTime" >> beam.Map(stamp_event_time).with_output_types(Article)
        dead = (
            (routed[DEAD_LETTER_TAG], pages[DEAD_LETTER_TAG], failed, built[DEAD_LETTER_TAG])
            | "DeadLetters" >> beam.Flatten()
            | "CountDeadLetters" >> beam.ParDo(_CountFn("dead_lettered_extract")).with_output_types(DeadLetter)
        )
        return {"main": timestamped, DEAD_LETTER_TAG: dead}
