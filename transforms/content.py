"""Content transforms: parse landing records, extract, detect language, fingerprint.

Each public composite takes one frozen config and returns a ``TaggedOutput``-style
dict ``{"main": ..., "dead_letter": ...}``; every failure becomes a
:class:`schemas.DeadLetter` with the step, the reason and the raw payload.
"""

from __future__ import annotations

import collections
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import apache_beam as beam
from apache_beam import pvalue
from apache_beam.metrics import Metrics
from apache_beam.utils import shared
from apache_beam.utils.windowed_value import WindowedValue

from newsflow.core.articles import build_article, fingerprint_text
from newsflow.core.extraction import ExtractionConfig, ExtractionError
from newsflow.core.language import LanguageIdentifier
from newsflow.core.simhash import simhash, to_hex
from newsflow.core.sources import DEFAULT_SOURCES_PATH, UNKNOWN_AUTHORITY, SourceTable
from newsflow.core.urls import check_document_url
from newsflow.runtime.sandbox import ArticleExtractor
from newsflow.schemas import Article, RawDocument, RecordError
from newsflow.schemas.raw import loads_record
from newsflow.transforms.deadletter import DEAD_LETTER_TAG, METRICS_NAMESPACE, dead_letter, raw_payload, rewindowed

_MAX_LINE_BYTES = 64 * 1024 * 1024


class _ParseFn(beam.DoFn):
    """Parses one landing record (JSON bytes) into a validated RawDocument; bad records are dead-lettered.

    A UTF-8 byte-order mark at the start of a line is ignored; blank lines are not records (counted
    as ``blank_lines``). Validation: ``RawDocument.from_json_dict`` (types, ranges, Unicode) and
    ``newsflow.core.urls.check_document_url`` (URL shape and safety, source domain matches the URL).
    """

    def __init__(self):
        self.parsed = Metrics.counter(METRICS_NAMESPACE, "parsed")
        self.blank = Metrics.counter(METRICS_NAMESPACE, "blank_lines")
        self.dead = Metrics.counter(METRICS_NAMESPACE, "dead_lettered_parse")

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
        yield raw


class ParseRawDocuments(beam.PTransform):
    """bytes (one landing-file line or message) -> RawDocument, plus dead letters."""

    def expand(self, pcoll):
        out = pcoll | "Parse" >> beam.ParDo(_ParseFn()).with_outputs(DEAD_LETTER_TAG, main="main")
        return {"main": out.main, DEAD_LETTER_TAG: out[DEAD_LETTER_TAG]}


@dataclass(frozen=True)
class ContentConfig:
    """Configuration of the content steps.

    Attributes:
      extraction: per-document extraction limits and options.
      sources_path: the sources authority CSV (``None``: the table shipped with newsflow, resolved on the
        worker, so a remote worker reads its installed copy, not this machine's path).
      language_threshold: fastText confidence below which the language is "und" (None: library default).
      registry_redis_url / key_prefix / use_registry: where the sources registry lives
        (:mod:`newsflow.storage.source_registry`; ``None``: not read, as in unit tests). When it holds
        outlet records (``newsflow sources ...`` seeded it), their authority (edited, or recomputed by
        ``newsflow sources authority``) is layered over the CSV table, so a source added or re-rated
        there is used by the job; with no records the CSV table alone is used.
    """

    extraction: ExtractionConfig = field(default_factory=ExtractionConfig)
    sources_path: str | None = None
    language_threshold: float | None = None
    registry_redis_url: str | None = None
    key_prefix: str = "nf"
    use_registry: bool = True


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


#: Documents queued per extraction child in :class:`_ExtractFn` (a page body is at most
#: ``max_body_bytes``, so the queue holds at most ``16 * workers * max_body_bytes`` of bodies).
IN_FLIGHT_PER_WORKER = 16


class _ExtractFn(beam.DoFn):
    """RawDocument -> Article (text, metadata, source authority) or a dead letter.

    Extraction runs under the per-document time limit of ``ExtractionConfig``, in its child
    processes (:class:`newsflow.runtime.sandbox.ArticleExtractor`). With ``extraction.workers`` > 1 the
    DoFn keeps up to ``IN_FLIGHT_PER_WORKER * workers`` documents of a bundle in flight (one thread
    per child waits on its answer), so the children parse pages in parallel with each other and
    with the fused steps after extraction that this process runs (language, fingerprints, clusters,
    enrichment); outputs leave in input order with each input's own timestamp and window, and
    the last ones at ``finish_bundle``. With one worker each document is extracted in ``process``.
    """

    def __init__(self, config: ContentConfig, shared_handle: shared.Shared):
        self._config = config
        self._shared = shared_handle
        self.extracted = Metrics.counter(METRICS_NAMESPACE, "extracted")
        self.dead = Metrics.counter(METRICS_NAMESPACE, "dead_lettered_extract")
        self.feed_only = Metrics.counter(METRICS_NAMESPACE, "feed_only_articles")
        self.extract_ms = Metrics.distribution(METRICS_NAMESPACE, "extract_ms")

    def setup(self):
        self._extractor = ArticleExtractor(self._config.extraction)
        path = self._config.sources_path or DEFAULT_SOURCES_PATH
        self._sources = self._shared.acquire(lambda: _source_table(self._config, path), tag=f"sources:{path}")
        workers = self._config.extraction.workers
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="extract") if workers > 1 else None
        self._max_in_flight = IN_FLIGHT_PER_WORKER * workers
        self._pending: collections.deque = collections.deque()

    def teardown(self):
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        extractor = getattr(self, "_extractor", None)
        if extractor is not None:
            extractor.close()

    def start_bundle(self):
        self._pending = collections.deque()

    def _timed_extract(self, raw: RawDocument):
        started = time.perf_counter()
        content = self._extractor.extract(raw)
        return content, time.perf_counter() - started

    def process(self, raw: RawDocument, timestamp=beam.DoFn.TimestampParam, win=beam.DoFn.WindowParam):
        if self._pool is None:
            yield from self._outputs(raw, lambda: self._timed_extract(raw))
            return
        future = self._pool.submit(self._timed_extract, raw)
        self._pending.append((raw, future, WindowedValue(None, timestamp, (win,))))
        while self._pending and (len(self._pending) > self._max_in_flight or self._pending[0][1].done()):
            yield from self._earlier_outputs(*self._pending.popleft())

    def finish_bundle(self):
        while self._pending:
            yield from self._earlier_outputs(*self._pending.popleft())

    def _earlier_outputs(self, raw: RawDocument, future, where: WindowedValue):
        """The outputs of an earlier input, carrying that input's timestamp and window."""
        return rewindowed(self._outputs(raw, future.result), where)

    def _outputs(self, raw: RawDocument, extract) -> list:
        """``[Article]`` or ``[TaggedOutput(dead letter)]`` for ``raw``; ``extract()`` returns
        ``(ExtractedContent, seconds)`` or raises."""
        try:
            content, seconds = extract()
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
        except ExtractionError as e:
            reason, detail = e.error_type, str(e)
        except ValueError as e:  # URL that cannot be canonicalized
            reason, detail = "bad_url", str(e)
        except Exception as e:  # noqa: BLE001 - deterministic for this document: dead-letter it, keep the job running
            reason, detail = "extract_failed", f"{type(e).__name__}: {e}"
        else:
            if article.feed_only:
                self.feed_only.inc()
            self.extracted.inc()
            self.extract_ms.update(int(seconds * 1000))
            return [article]
        self.dead.inc()
        return [pvalue.TaggedOutput(DEAD_LETTER_TAG, dead_letter("extract", reason, detail, raw_payload(raw), raw.url))]


class _DetectLanguageFn(beam.DoFn):
    """Article -> Article with ``language`` / ``language_confidence`` from fastText lid.176 on the
    headline and lead text, with ``declared_language`` as evidence (``newsflow.core.language``)."""

    def __init__(self, config: ContentConfig, shared_handle: shared.Shared):
        self._config = config
        self._shared = shared_handle
        self.und = Metrics.counter(METRICS_NAMESPACE, "language_und")

    def setup(self):
        config = self._config
        self._language = self._shared.acquire(
            lambda: _language_identifier(config), tag=f"language:{config.language_threshold}"
        )

    def process(self, article: Article):
        # Headline + lead text, with the publisher's declared language as evidence.
        language, confidence = self._language.detect(
            fingerprint_text(article)[:2000], declared=article.declared_language or None
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


class ExtractArticles(beam.PTransform):
    """RawDocument -> Article with text and metadata (trafilatura); failures dead-lettered.

    Output elements are timestamped with the article's event time (publish time, else fetch
    time), so downstream event-time windows see when the news happened.
    """

    def __init__(self, config: ContentConfig = ContentConfig()):
        super().__init__()
        self._config = config

    def expand(self, pcoll):
        out = pcoll | "Extract" >> beam.ParDo(_ExtractFn(self._config, shared.Shared())).with_outputs(
            DEAD_LETTER_TAG, main="main"
        )
        timestamped = out.main | "StampEventTime" >> beam.Map(
            lambda a: beam.window.TimestampedValue(a, a.event_time)
        ).with_output_types(Article)
        return {"main": timestamped, DEAD_LETTER_TAG: out[DEAD_LETTER_TAG]}
