"""I/O at the edges: landing-file, Pub/Sub and Kafka sources; Parquet and cluster-snapshot sinks.

Sources all produce ``bytes`` (one JSON RawDocument each) so the same content
transforms run behind every source. Sinks write content-addressed Parquet files
(``newsflow.storage.parquet``) so replays never add files or rows.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass

import apache_beam as beam
from apache_beam import pvalue
from apache_beam.metrics import Metrics
from apache_beam.transforms import trigger, window

from newsflow.core.timeutil import format_epoch, utc_date
from newsflow.runtime.redis_conn import connect
from newsflow.schemas import (
    ARTICLE_SCHEMA,
    DEAD_LETTER_SCHEMA,
    GROUP_SCHEMA,
    RAW_DOCUMENT_SCHEMA,
    DeadLetter,
)
from newsflow.schemas._arrow import datetime_to_epoch
from newsflow.storage.groups import RedisGroupStore, StoreConfig, current_clusters
from newsflow.storage.parquet import write_records
from newsflow.transforms.deadletter import DEAD_LETTER_TAG, METRICS_NAMESPACE, dead_letter

# ---------------------------------------------------------------------------------- sources
MAX_RECORD_BYTES = 16 * 1024 * 1024  # one landing line: a 5 MB page as base64 plus fields fits easily
_SKIP_CHUNK = 1024 * 1024


class _ReadLinesFn(beam.DoFn):
    """A matched landing file -> its lines (bytes), plus dead letters for what cannot be read.

    Lines are read with a length limit (:data:`MAX_RECORD_BYTES`), so one enormous line costs
    linear time and becomes a ``too_large`` dead letter (payload: its first KiB) instead of
    stalling the reader. A corrupt or truncated gzip file, or an I/O error, ends that file with a
    ``corrupt_file`` dead letter naming the file and how many lines were read before it; the lines
    read up to there are kept.
    """

    def __init__(self, max_record_bytes: int = MAX_RECORD_BYTES):
        self._max = max_record_bytes
        self.lines = Metrics.counter(METRICS_NAMESPACE, "landing_lines_read")
        self.files = Metrics.counter(METRICS_NAMESPACE, "landing_files_read")
        self.dead = Metrics.counter(METRICS_NAMESPACE, "dead_lettered_read")

    def process(self, readable_file):
        import gzip
        import zlib

        from apache_beam.io.filesystem import CompressionTypes

        path = readable_file.metadata.path
        n = 0
        try:
            raw = readable_file.open(compression_type=CompressionTypes.UNCOMPRESSED)
            stream = gzip.GzipFile(fileobj=raw, mode="rb") if path.endswith(".gz") else raw
            with stream:
                while True:
                    line = stream.readline(self._max + 1)
                    if not line:
                        break
                    n += 1
                    if len(line) > self._max and not line.endswith(b"\n"):
                        head = line[:1024]
                        while line and not line.endswith(b"\n"):
                            line = stream.readline(_SKIP_CHUNK)
                        self.dead.inc()
                        yield pvalue.TaggedOutput(
                            DEAD_LETTER_TAG,
                            dead_letter(
                                "read", "too_large", f"{path}: line {n} is longer than {self._max} bytes", head
                            ),
                        )
                        continue
                    self.lines.inc()
                    yield line.rstrip(b"\r\n")
        except (EOFError, zlib.error, gzip.BadGzipFile, OSError) as e:
            self.dead.inc()
            yield pvalue.TaggedOutput(
                DEAD_LETTER_TAG,
                dead_letter(
                    "read", "corrupt_file", f"{path}: {type(e).__name__}: {e} (after {n} lines)", path.encode("utf-8")
                ),
            )
            return
        self.files.inc()


class _ReadParquetRowsFn(beam.DoFn):
    """A matched Parquet landing file -> one JSON RawDocument line per row (bytes), read in row batches.

    A file that is not Parquet, is truncated, or lacks the RawDocument columns ends with a
    ``corrupt_file`` dead letter naming the file and how many rows were read before it; the other
    files are read as usual (one bad file never stops the job).
    """

    BATCH_ROWS = 1000

    def __init__(self):
        self.rows = Metrics.counter(METRICS_NAMESPACE, "landing_lines_read")
        self.files = Metrics.counter(METRICS_NAMESPACE, "landing_files_read")
        self.dead = Metrics.counter(METRICS_NAMESPACE, "dead_lettered_read")

    def process(self, readable_file):
        import pyarrow as pa
        import pyarrow.parquet as pq
        from apache_beam.io.filesystem import CompressionTypes

        path = readable_file.metadata.path
        n = 0
        try:
            with readable_file.open(compression_type=CompressionTypes.UNCOMPRESSED) as f:
                pf = pq.ParquetFile(f)
                present = set(pf.schema_arrow.names)
                missing = [c.name for c in RAW_DOCUMENT_SCHEMA if not c.nullable and c.name not in present]
                if missing:
                    raise ValueError(f"not a landing file: no column {', '.join(missing)}")
                columns = [c for c in RAW_DOCUMENT_SCHEMA.names if c in present]
                for batch in pf.iter_batches(batch_size=self.BATCH_ROWS, columns=columns):
                    for row in batch.to_pylist():
                        n += 1
                        self.rows.inc()
                        yield _parquet_row_to_json(row)
        except (OSError, ValueError, KeyError, pa.ArrowException) as e:
            self.dead.inc()
            yield pvalue.TaggedOutput(
                DEAD_LETTER_TAG,
                dead_letter(
                    "read", "corrupt_file", f"{path}: {type(e).__name__}: {e} (after {n} rows)", path.encode("utf-8")
                ),
            )
            return
        self.files.inc()


def check_inputs_exist(patterns) -> None:
    """Raises ``ValueError`` naming every pattern that matches no file (local or ``gs://``)."""
    import os

    from apache_beam.io.filesystems import FileSystems

    empty = []
    for pattern in patterns:
        if "://" not in pattern and os.path.isdir(pattern):
            raise ValueError(
                f"input {pattern!r} is a directory; give a file pattern such as '{pattern.rstrip('/')}/*.jsonl.gz'"
            )
        try:
            matched = FileSystems.match([pattern])[0].metadata_list
        except Exception as e:  # noqa: BLE001 - Beam raises several types for a bad pattern or bucket
            raise ValueError(f"cannot list input {pattern!r}: {e}") from None
        if not matched:
            empty.append(pattern)
    if empty:
        raise ValueError(f"no landing files match {', '.join(repr(p) for p in empty)}")


class ReadLandingFiles(beam.PTransform):
    """Bounded replay of landing files -> bytes, one JSON RawDocument per element.

    Args:
      patterns: file patterns, local or ``gs://`` (``*.jsonl``, ``*.jsonl.gz``, ``*.parquet``).
      file_format: ``"jsonl"`` (gzip detected from the ``.gz`` suffix) or ``"parquet"``
        (columns of ``schemas.RAW_DOCUMENT_SCHEMA``).

    Returns ``{"main": bytes records, "dead_letter": DeadLetters}`` (unreadable files and
    over-long lines; see :class:`_ReadLinesFn`).
    """

    def __init__(self, patterns: list[str], file_format: str = "jsonl"):
        super().__init__()
        if file_format not in ("jsonl", "parquet"):
            raise ValueError(f"file_format must be 'jsonl' or 'parquet', got {file_format!r}")
        self._patterns = list(patterns)
        self._format = file_format

    def expand(self, pbegin):
        from apache_beam.io import fileio

        read_fn = _ReadLinesFn() if self._format == "jsonl" else _ReadParquetRowsFn()
        out = (
            pbegin
            | "Patterns" >> beam.Create(self._patterns)
            | "MatchFiles" >> fileio.MatchAll()
            | "ReadMatches" >> fileio.ReadMatches()
            | "SpreadFiles" >> beam.Reshuffle()
            | ("ReadLines" if self._format == "jsonl" else "ReadParquetRows")
            >> beam.ParDo(read_fn).with_outputs(DEAD_LETTER_TAG, main="main")
        )
        return {"main": out.main, DEAD_LETTER_TAG: out[DEAD_LETTER_TAG]}


def _parquet_row_to_json(row: dict) -> bytes:
    import base64

    d = dict(row)
    body = d.pop("body", None)
    d["body_b64"] = None if body is None else base64.b64encode(body).decode("ascii")
    for key in ("fetch_time", "published_time"):
        value = d.get(key)
        if isinstance(value, dt.datetime):
            d[key] = datetime_to_epoch(value)
    return json.dumps(d, default=str).encode("utf-8")


def kafka_record_value(record) -> bytes:
    """The landing record of a Kafka ``(key, value)`` pair: its value bytes (``b""`` for a tombstone,
    which the parse step counts as a blank line); the key (the canonical article URL) is not needed."""
    value = record[1]
    return b"" if value is None else bytes(value)


EVENT_TIME_ATTRIBUTE = "event_time"
"""Pub/Sub attribute with the message's event time, integer epoch milliseconds
(:func:`newsflow.core.articles.event_time_ms`); the job reads it as the element timestamp."""

ID_ATTRIBUTE = "article_id"
"""Pub/Sub attribute with the article id of the message's URL; Dataflow deduplicates redeliveries by it."""


def pubsub_read_parameters(subscription: str, dataflow: bool) -> dict:
    """Keyword arguments of ``ReadFromPubSub`` for the job: the subscription, event time from the
    :data:`EVENT_TIME_ATTRIBUTE` attribute, and on Dataflow ``id_label`` :data:`ID_ATTRIBUTE` (exactly-once
    delivery by message id). Other runners do not support ``id_label``; there the job's own dedup by
    article id (the near-duplicate store remembers every id) makes redeliveries harmless."""
    return {
        "subscription": subscription,
        "timestamp_attribute": EVENT_TIME_ATTRIBUTE,
        "id_label": ID_ATTRIBUTE if dataflow else None,
    }


class ReadPubSubMessages(beam.PTransform):
    """Unbounded: Pub/Sub messages (one JSON RawDocument each, as :mod:`newsflow.crawler.sinks` publishes
    them) -> their data bytes, unchanged, timestamped with the message's ``event_time`` attribute. For Dataflow.

    Args:
      subscription: ``projects/P/subscriptions/S``.
      dataflow: the job runs on ``DataflowRunner`` (then messages are deduplicated by ``article_id``).
    """

    def __init__(self, subscription: str, dataflow: bool = False):
        super().__init__()
        self._params = pubsub_read_parameters(subscription, dataflow)

    def expand(self, pbegin):
        return pbegin | "ReadPubSub" >> beam.io.ReadFromPubSub(**self._params)


def kafka_read_transform(bootstrap_servers: str, topic: str, group_id: str = "newsflow"):
    """Beam's cross-language ``ReadFromKafka`` for the job: record values as bytes, timestamped by the
    record's create time, which the crawler sets to the document's event time (:class:`KafkaSink`
    in :mod:`newsflow.crawler.sinks`), so the watermark follows event time as on Pub/Sub."""
    from apache_beam.io.kafka import ReadFromKafka

    return ReadFromKafka(
        consumer_config={"bootstrap.servers": bootstrap_servers, "group.id": group_id},
        topics=[topic],
        timestamp_policy=ReadFromKafka.create_time_policy,
    )


class ReadKafkaMessages(beam.PTransform):
    """Unbounded: Kafka record values (one JSON RawDocument each, as :mod:`newsflow.crawler.sinks` produces
    them; key = canonical article URL; timestamp = event time) -> bytes at that timestamp. For Flink.

    Uses Beam's cross-language ``ReadFromKafka`` (needs a Java expansion service on the runner) with the
    create-time timestamp policy (:func:`kafka_read_transform`).
    """

    def __init__(self, bootstrap_servers: str, topic: str, group_id: str = "newsflow"):
        super().__init__()
        self._bootstrap = bootstrap_servers
        self._topic = topic
        self._group = group_id

    def expand(self, pbegin):
        return (
            pbegin
            | "ReadKafka" >> kafka_read_transform(self._bootstrap, self._topic, self._group)
            | "KafkaValues" >> beam.Map(kafka_record_value)
        )


# ------------------------------------------------------------------------------------ sinks
@dataclass(frozen=True)
class SinkConfig:
    """Where and how the Parquet datasets are written.

    Attributes:
      output_root: local directory or ``gs://bucket/prefix``; datasets go to
        ``<root>/articles``, ``<root>/clusters``, ``<root>/deadletters``.
      streaming: in streaming mode files are flushed every ``flush_seconds`` of processing
        time (global window, repeated processing-time trigger: no element is ever late and
        dropped); in batch mode once at the end.
      flush_seconds: processing-time flush interval in streaming mode.
      shards_per_partition: files per partition and flush (rows routed by article/cluster id hash).
    """

    output_root: str
    streaming: bool = False
    flush_seconds: int = 60
    shards_per_partition: int = 1


def date_partition(epoch_s: float | None) -> str:
    """Hive partition ``date=YYYY-MM-DD`` (UTC) of an epoch time; ``date=unknown`` for ``None``."""
    if epoch_s is None:
        return "date=unknown"
    return "date=" + utc_date(epoch_s)


def _shard(key: str, shards: int) -> int:
    return int(hashlib.sha256(key.encode("utf-8")).hexdigest()[:8], 16) % max(1, shards)


def _flush_windowing(config: SinkConfig):
    if config.streaming:
        return beam.WindowInto(
            window.GlobalWindows(),
            trigger=trigger.Repeatedly(trigger.AfterProcessingTime(config.flush_seconds)),
            accumulation_mode=trigger.AccumulationMode.DISCARDING,
        )
    return beam.WindowInto(window.GlobalWindows())


class _WritePartitionFn(beam.DoFn):
    """(partition, shard), records -> one content-addressed Parquet file; emits its path."""

    def __init__(self, root: str, dataset: str, schema, sort_field: str, dedupe: bool):
        self._root = root
        self._dataset = dataset
        self._schema = schema
        self._sort_field = sort_field
        self._dedupe = dedupe
        self.files = Metrics.counter(METRICS_NAMESPACE, f"parquet_files_{dataset}")
        self.rows = Metrics.counter(METRICS_NAMESPACE, f"parquet_rows_{dataset}")

    def process(self, element):
        (partition, _shard_id), records = element
        records = list(records)
        if self._dedupe:
            by_key = {}
            for r in records:  # same id twice (e.g. one article from two feeds): keep one, deterministically
                k = getattr(r, self._sort_field)
                by_key[k] = r if k not in by_key else max(by_key[k], r, key=repr)
            records = list(by_key.values())
        sort_field = self._sort_field
        path = write_records(
            self._root,
            self._dataset,
            partition,
            records,
            self._schema,
            sort_key=lambda r: (getattr(r, sort_field), repr(r)),
        )
        if path:
            self.files.inc()
            self.rows.inc(len(records))
            yield path


class _StoreSink(beam.PTransform):
    """A sink that reads the near-duplicate store while writing: sink config, Redis URL, store config."""

    def __init__(self, config: SinkConfig, redis_url: str | None, store: StoreConfig = StoreConfig()):
        super().__init__()
        self._config = config
        self._redis_url = redis_url
        self._store = store


class WriteArticles(_StoreSink):
    """Articles -> ``<root>/articles/date=YYYY-MM-DD/part-<hash>.parquet`` (by event date, UTC).

    Group ids are re-read from Redis just before writing, so rows carry the cluster an
    article belongs to after any merge (the ``cluster_id`` of ``Keys.article``, rewritten on merge).
    """

    def expand(self, pcoll):
        cfg = self._config
        return (
            pcoll
            | "Window" >> _flush_windowing(cfg)
            | "KeyByPartition"
            >> beam.Map(lambda a: ((date_partition(a.event_time), _shard(a.article_id, cfg.shards_per_partition)), a))
            | "Group" >> beam.GroupByKey()
            | "ResolveClusters" >> beam.ParDo(_ResolveGroupIdsFn(self._redis_url, self._store))
            | "Write" >> beam.ParDo(_WritePartitionFn(cfg.output_root, "articles", ARTICLE_SCHEMA, "article_id", True))
        )


class _StoreFn(beam.DoFn):
    """A DoFn that opens the near-duplicate store in ``setup()`` (config only in the constructor)."""

    def __init__(self, redis_url, store: StoreConfig):
        self._redis_url = redis_url
        self._store_config = store

    def setup(self):
        self._store = RedisGroupStore(connect(self._redis_url), self._store_config)


class _ResolveGroupIdsFn(_StoreFn):
    """(key, articles) -> (key, articles with their current cluster id after any merge).

    Only the copy of an article that Redis holds (same URL and event time as ``Keys.article(id)``)
    is kept: when two documents share a canonical URL (a ``utm_`` variant, a re-fetch with a new
    publish time), the article exists once, in Redis and in Parquet, whatever partitions the
    copies fell in. Of the versions of a re-slugged article (``RedisGroupStore.resolve_revisions``) only
    the newest is kept, under the id the article is stored as, with the other versions' ids in ``aliases``
    (each of them, in Redis, resolves to the stored id). Dropped copies are counted
    (``duplicate_article_copies``).
    """

    def __init__(self, redis_url, store: StoreConfig):
        super().__init__(redis_url, store)
        self.duplicates = Metrics.counter(METRICS_NAMESPACE, "duplicate_article_copies")

    def process(self, element):
        key, articles = element
        # versions of a re-slugged article (newsflow/core/urls.py rule 5): only the newest, under the stored id
        resolved = self._store.resolve_revisions(list(articles))
        articles = [a for a in resolved if a is not None]
        self.duplicates.inc(len(resolved) - len(articles))
        keys = self._store.keys
        pipe = self._store.client.pipeline(transaction=False)
        for a in articles:
            pipe.hmget(keys.article(a.article_id), "url", "event_time", "cluster_id")
        out = []
        for a, (url, event_time, _) in zip(articles, pipe.execute() if articles else [], strict=False):
            if url is not None and (url.decode() != a.url or event_time.decode() != format_epoch(a.event_time)):
                self.duplicates.inc()
                continue
            out.append(a)
        current = current_clusters(self._store.client, keys, [a.article_id for a in out])
        yield (
            key,
            [a._replace(cluster_id=cid) if cid is not None else a for a, cid in zip(out, current, strict=False)],
        )


class WriteGroupSnapshots(_StoreSink):
    """Group ids touched -> their current state read from Redis -> Parquet.

    ``<root>/clusters/date=YYYY-MM-DD/part-<hash>.parquet`` partitioned by the cluster's
    earliest event date. Each flush writes the state of the clusters touched since the
    previous flush (merged clusters included, with ``merged_into`` set).
    """

    def expand(self, pcoll):
        cfg = self._config
        return (
            pcoll
            | "Window" >> _flush_windowing(cfg)
            | "KeyByShard" >> beam.Map(lambda cid: (_shard(cid, cfg.shards_per_partition), cid))
            | "Group" >> beam.GroupByKey()
            | "ReadState" >> beam.ParDo(_ReadGroupsFn(self._redis_url, self._store))
            | "GroupByDate" >> beam.GroupByKey()
            | "Write" >> beam.ParDo(_WritePartitionFn(cfg.output_root, "clusters", GROUP_SCHEMA, "cluster_id", True))
        )


class _ReadGroupsFn(_StoreFn):
    """(shard, cluster ids) -> ((date partition, shard), NearDuplicateGroup) read from Redis."""

    def process(self, element):
        shard, cluster_ids = element
        ids = sorted(set(cluster_ids))
        for i in range(0, len(ids), 500):
            for cluster in self._store.get_clusters(ids[i : i + 500]):
                if cluster is not None:
                    yield (date_partition(cluster.earliest_time), shard), cluster


class WriteDeadLetters(beam.PTransform):
    """DeadLetters -> ``<root>/deadletters/step=<step>/part-<hash>.parquet``."""

    def __init__(self, config: SinkConfig):
        super().__init__()
        self._config = config

    def expand(self, pcoll):
        cfg = self._config
        return (
            pcoll
            | "Window" >> _flush_windowing(cfg)
            | "KeyByStep" >> beam.Map(lambda d: ((f"step={d.step}", 0), d)).with_input_types(DeadLetter)
            | "Group" >> beam.GroupByKey()
            | "Write"
            >> beam.ParDo(_WritePartitionFn(cfg.output_root, "deadletters", DEAD_LETTER_SCHEMA, "payload", False))
        )
