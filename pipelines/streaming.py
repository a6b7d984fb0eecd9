"""The newsflow streaming job: raw documents -> articles -> near-duplicate groups -> stories -> trends.

Build without running (for tests and launchers) with :func:`build_pipeline`; run with
:func:`run` or ``newsflow run`` (both through :mod:`newsflow.pipelines.launcher`, shared with the nightly jobs).
Example, a bounded replay on this machine::

    newsflow run --input 'data/corpus/*.jsonl.gz' --output var/output

Sources (exactly one): ``--input`` landing files (JSONL or Parquet, local or ``gs://``),
``--pubsub_subscription`` (Dataflow) or ``--kafka_bootstrap_servers`` + ``--kafka_topic``
(Flink). Sinks: Redis (``--redis_url``, default ``$REDIS_URL`` or an embedded server) and
Parquet datasets under ``--output`` (articles, clusters, deadletters, trends, story_assignments), and the
full-text search index (``--search_index``, :mod:`newsflow.transforms.search`).

Runner choice, settings, the Redis check and the JSON summary are the launcher's
(:mod:`newsflow.pipelines.launcher`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from newsflow.core.embedding import default_embedding_path
from newsflow.core.extraction import ExtractionConfig
from newsflow.core.resources import default_model_dir, is_remote
from newsflow.pipelines.launcher import (
    JobSpec,
    LaunchResult,
    SettingsOptions,
    is_local,
    launch,
    resolve_settings,
    runner_name,
    summary_line,
)
from newsflow.runtime.settings import Settings
from newsflow.storage.groups import StoreConfig
from newsflow.storage.search_index import default_index_path
from newsflow.transforms.coders import register_coders
from newsflow.transforms.content import (
    ContentConfig,
    DetectLanguage,
    ExtractArticles,
    FingerprintArticles,
    ParseRawDocuments,
)
from newsflow.transforms.deadletter import DEAD_LETTER_TAG
from newsflow.transforms.enrich import EnrichArticles, EnrichConfig
from newsflow.transforms.groups import AssignNearDuplicateGroups, GroupConfig
from newsflow.transforms.io import (
    ReadKafkaMessages,
    ReadLandingFiles,
    ReadPubSubMessages,
    SinkConfig,
    WriteArticles,
    WriteDeadLetters,
    WriteGroupSnapshots,
    check_inputs_exist,
)
from newsflow.transforms.search import SearchIndexConfig, UpdateSearchIndex
from newsflow.transforms.stories import TREND_INPUT_TAG, AssignStories, StoryTransformConfig
from newsflow.transforms.story_assignments import WriteStoryAssignments
from newsflow.transforms.trending import DEFAULT_LATE_BOUND_S, ComputeTrendingWindows, TrendingConfig, WriteTrends


class NewsflowOptions(PipelineOptions):
    """Options of the streaming job (see ``--help``); validated by :func:`job_config_from_options`."""

    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument(
            "--input",
            action="append",
            default=None,
            help="landing-file pattern (repeatable): *.jsonl, *.jsonl.gz or *.parquet, local or gs://",
        )
        parser.add_argument(
            "--input_format",
            default="auto",
            choices=["auto", "jsonl", "parquet"],
            help="format of --input files; auto picks parquet for *.parquet patterns",
        )
        parser.add_argument(
            "--pubsub_subscription",
            default=None,
            help="projects/P/subscriptions/S to read JSON RawDocuments from (Dataflow); event time from the "
            "message attribute event_time (epoch ms), deduplicated by attribute article_id on DataflowRunner",
        )
        parser.add_argument("--kafka_bootstrap_servers", default=None, help="Kafka bootstrap servers (Flink)")
        parser.add_argument(
            "--kafka_topic", default=None, help="Kafka topic of JSON RawDocuments (event time = record create time)"
        )
        parser.add_argument(
            "--max_hamming_distance", type=int, default=3, help="near-duplicate threshold on 64-bit SimHash, 0..3"
        )
        parser.add_argument(
            "--extract_timeout_s", type=float, default=5.0, help="per-document extraction time limit, seconds"
        )
        parser.add_argument(
            "--max_body_bytes",
            type=int,
            default=5_000_000,
            help="page bodies larger than this are dead-lettered as too_large",
        )
        parser.add_argument(
            "--flush_seconds",
            type=int,
            default=60,
            help="streaming mode: Parquet flush interval in processing-time seconds",
        )
        parser.add_argument("--redis_batch_size", type=int, default=200, help="max articles per Redis assignment call")
        parser.add_argument(
            "--trending_window_s",
            type=int,
            default=3600,
            help="trending sliding-window size, seconds (multiple of --trending_period_s)",
        )
        parser.add_argument("--trending_period_s", type=int, default=300, help="trending window period, seconds")
        parser.add_argument(
            "--trending_allowed_lateness_s",
            type=int,
            default=DEFAULT_LATE_BOUND_S,
            help="late bound, seconds: articles up to this far behind the watermark still update their trending "
            "windows; further behind they go to the late lane (dead letter step=trending error=late, "
            "counter trend_inputs_late)",
        )
        parser.add_argument(
            "--story_input_log",
            default=None,
            help="bounded runs only (newsflow run-continuous sets it): local directory of the story input "
            "log and its checkpoints; each run rewinds the stories to the checkpoint before its earliest "
            "article and re-clusters the logged inputs after it with its own, so many runs give the stories "
            "of one run over all their files",
        )
        parser.add_argument(
            "--search_index",
            default=None,
            help="the full-text search index file (SQLite FTS5) the job updates; default "
            "<data_dir>/search/index.sqlite3 on local runners and off on remote ones (rebuild it on the serving "
            "host with `newsflow search-index --rebuild`); 'off' turns it off",
        )


@dataclass(frozen=True)
class JobConfig:
    """Validated configuration of one run of the streaming job."""

    inputs: tuple[str, ...] = ()
    input_format: str = "jsonl"
    pubsub_subscription: str | None = None
    pubsub_dedup_by_id: bool = False
    kafka_bootstrap_servers: str | None = None
    kafka_topic: str | None = None
    output: str = "var/output"
    redis_url: str | None = None
    streaming: bool = False
    content: ContentConfig = field(default_factory=ContentConfig)
    cluster: GroupConfig = field(default_factory=GroupConfig)
    enrich: EnrichConfig = field(default_factory=EnrichConfig)
    stories: StoryTransformConfig = field(default_factory=StoryTransformConfig)
    trending: TrendingConfig = field(default_factory=TrendingConfig)
    flush_seconds: int = 60
    search: SearchIndexConfig = field(default_factory=SearchIndexConfig)


def search_index_path(value: str | None, local: bool, data_dir: str) -> str | None:
    """The index file the job writes: ``--search_index`` as given, ``None`` for ``off``; unset, the default path
    (:func:`newsflow.storage.search_index.default_index_path`) on local runners and ``None`` on remote ones.

    Raises:
      ValueError: a ``gs://`` (or other remote) path: SQLite needs a local file.
    """
    if value is None:
        return default_index_path(data_dir) if local else None
    if value.lower() == "off":
        return None
    if "://" in value:
        raise ValueError(f"--search_index must be a local file (SQLite), got {value!r}")
    return value


def worker_model_paths(model_dir: str, local: bool, data_dir: str | None = None) -> tuple[str | None, str | None]:
    """``(topic model, text model)`` paths as the workers will see them.

    The topic classifier is always the one shipped with newsflow (``None``: ``data/topics/topic_model.npz``,
    packaged on every worker). Local runners and remote model directories (``gs://...``) use ``model_dir`` as
    given for the text model. Remote
    workers cannot see this machine's files: with the default model directory they get ``None``, i.e.
    the models packaged with the newsflow that ``--setup_file`` (or the Flex Template image) installs
    on them (:mod:`newsflow.core.resources`).

    Raises:
      ValueError: a remote runner with a local model directory that is not the default.
    """
    if local or is_remote(model_dir):
        return None, default_embedding_path(model_dir)
    if os.path.abspath(model_dir) == os.path.abspath(default_model_dir(data_dir)):
        return None, None
    raise ValueError(
        f"--model_dir {model_dir!r} is a local directory that remote workers cannot read: use a "
        "gs:// directory (copy the files of `newsflow train-topics` there) or leave it unset to use "
        "the models packaged by setup.py"
    )


def job_config_from_options(options: PipelineOptions, settings: Settings | None = None) -> JobConfig:
    """Validates options and builds a :class:`JobConfig`.

    Args:
      options: parsed flags (:class:`NewsflowOptions` and the launcher's settings flags).
      settings: resolved settings (Redis URL, key prefix, data and model dirs); default: resolved
        from ``options`` and the environment now.

    Raises:
      ValueError: no source or more than one, or a value out of range (the message shows it).
    """
    o = options.view_as(NewsflowOptions)
    settings = settings or resolve_settings(options)
    streaming = bool(options.view_as(StandardOptions).streaming)
    sources = [bool(o.input), bool(o.pubsub_subscription), bool(o.kafka_bootstrap_servers or o.kafka_topic)]
    if sum(sources) != 1:
        raise ValueError(
            "exactly one source is needed: --input, --pubsub_subscription, or --kafka_bootstrap_servers with "
            f"--kafka_topic (got input={o.input!r}, pubsub_subscription={o.pubsub_subscription!r}, "
            f"kafka_bootstrap_servers={o.kafka_bootstrap_servers!r}, kafka_topic={o.kafka_topic!r})"
        )
    if (o.kafka_bootstrap_servers is None) != (o.kafka_topic is None):
        raise ValueError(
            "--kafka_bootstrap_servers and --kafka_topic go together "
            f"(got {o.kafka_bootstrap_servers!r}, {o.kafka_topic!r})"
        )
    if not 0 <= o.max_hamming_distance <= 3:
        raise ValueError(
            f"--max_hamming_distance must be in 0..3 for the 4 x 16-bit band index, got {o.max_hamming_distance}"
        )
    if o.extract_timeout_s <= 0:
        raise ValueError(f"--extract_timeout_s must be > 0, got {o.extract_timeout_s}")
    if o.max_body_bytes <= 0:
        raise ValueError(f"--max_body_bytes must be > 0, got {o.max_body_bytes}")
    if o.trending_window_s <= 0 or o.trending_period_s <= 0 or o.trending_window_s % o.trending_period_s:
        raise ValueError(
            f"--trending_window_s ({o.trending_window_s}) must be a positive multiple of "
            f"--trending_period_s ({o.trending_period_s})"
        )
    if o.flush_seconds < 1:
        raise ValueError(f"--flush_seconds must be >= 1, got {o.flush_seconds}")
    if o.trending_allowed_lateness_s < 0:
        raise ValueError(f"--trending_allowed_lateness_s must be >= 0, got {o.trending_allowed_lateness_s}")
    if o.redis_batch_size < 1:
        raise ValueError(f"--redis_batch_size must be >= 1, got {o.redis_batch_size}")
    if o.input:
        check_inputs_exist(o.input)
    if (o.pubsub_subscription or o.kafka_topic) and not streaming:
        raise ValueError("Pub/Sub and Kafka sources are unbounded: add --streaming")
    if o.story_input_log and (streaming or not is_local(options) or "://" in o.story_input_log):
        raise ValueError(
            "--story_input_log is a local directory for bounded runs on a local runner (newsflow run-continuous); "
            f"got {o.story_input_log!r} with streaming={streaming}, runner {runner_name(options)}"
        )
    input_format = o.input_format
    if input_format == "auto":
        input_format = "parquet" if o.input and all(p.endswith(".parquet") for p in o.input) else "jsonl"
    store = StoreConfig(prefix=settings.key_prefix, max_distance=o.max_hamming_distance)
    topic_model, text_model = worker_model_paths(settings.model_dir, is_local(options), settings.data_dir)
    return JobConfig(
        inputs=tuple(o.input or ()),
        input_format=input_format,
        pubsub_subscription=o.pubsub_subscription,
        pubsub_dedup_by_id=runner_name(options) == "DataflowRunner",
        kafka_bootstrap_servers=o.kafka_bootstrap_servers,
        kafka_topic=o.kafka_topic,
        output=options.view_as(SettingsOptions).output or os.path.join(settings.data_dir, "output"),
        redis_url=settings.redis_url,
        streaming=streaming,
        content=ContentConfig(
            extraction=ExtractionConfig(
                timeout_s=o.extract_timeout_s,
                max_body_bytes=o.max_body_bytes,
            ),
            registry_redis_url=settings.redis_url,
            key_prefix=settings.key_prefix,
        ),
        cluster=GroupConfig(redis_url=settings.redis_url, store=store, max_batch_size=o.redis_batch_size),
        # bounded replays sort once after a GroupByKey; streaming buffers and releases on timers
        enrich=EnrichConfig(topic_model_path=topic_model, text_model_path=text_model),
        # --key_prefix reaches every Redis writer: cluster store and sinks (store), stories, trending
        stories=StoryTransformConfig(
            redis_url=settings.redis_url,
            ordering="timers" if streaming else "sort",
            text_model_path=text_model,
            key_prefix=settings.key_prefix,
            input_log=o.story_input_log,
            trend_window_s=o.trending_window_s,
        ),
        trending=TrendingConfig(
            window_seconds=o.trending_window_s,
            period_seconds=o.trending_period_s,
            allowed_lateness_seconds=o.trending_allowed_lateness_s,
            redis_url=settings.redis_url,
            key_prefix=settings.key_prefix,
        ),
        flush_seconds=o.flush_seconds,
        search=SearchIndexConfig(path=search_index_path(o.search_index, is_local(options), settings.data_dir)),
    )


class ProcessRawDocuments(beam.PTransform):
    """The source-independent core: landing bytes -> clustered Articles, plus all dead letters.

    Returns ``{"articles": PCollection[Article], "dead_letter": PCollection[DeadLetter]}``.
    """

    def __init__(self, content: ContentConfig, cluster: GroupConfig):
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
        clustered = enriched | "AssignNearDuplicateClusters" >> AssignNearDuplicateGroups(self._cluster)
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
        assigned = enriched["main"] | "AssignStoryClusters" >> AssignStories(self._stories)
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
      ``article_files``, ``cluster_files``, ``dead_letter_files``, ``trend_files``,
      ``story_assignment_files`` (paths written; bounded runs only).
    """
    register_coders()  # the records' coders, registered explicitly (see transforms/coders.py)
    read_dead = []
    if source is not None:
        raw = pipeline | "CustomSource" >> source
    elif config.inputs:
        landed = pipeline | "ReadLandingFiles" >> ReadLandingFiles(list(config.inputs), config.input_format)
        raw = landed["main"]
        read_dead.append(landed[DEAD_LETTER_TAG])
    elif config.pubsub_subscription:
        raw = pipeline | "ReadPubSub" >> ReadPubSubMessages(config.pubsub_subscription, config.pubsub_dedup_by_id)
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
        | "WriteClusterSnapshots" >> WriteGroupSnapshots(sink, config.redis_url, store)
    )
    all_dead = (
        *read_dead,
        core[DEAD_LETTER_TAG],
        stories[DEAD_LETTER_TAG],
        trending[DEAD_LETTER_TAG],
    ) | "FlattenAllDeadLetters" >> beam.Flatten()
    dead_files = all_dead | "WriteDeadLetters" >> WriteDeadLetters(sink)
    out = {}
    if config.search.path:
        out["search_index_writes"] = (articles, stories[TREND_INPUT_TAG]) | "UpdateSearchIndex" >> UpdateSearchIndex(
            config.search
        )
    if not sink.streaming:
        # Bounded runs only (``newsflow run``, each ``run-continuous`` run): under a repeated processing-time
        # trigger its chained groupings never finish on the streaming DirectRunner; not yet written by
        # ``--streaming`` jobs.
        out["story_assignment_files"] = stories["stories"] | "WriteStoryAssignments" >> WriteStoryAssignments(
            sink, config.redis_url, config.stories.key_prefix
        )
    return out | {
        "articles": articles,
        "stories": stories["stories"],
        DEAD_LETTER_TAG: all_dead,
        "article_files": article_files,
        "cluster_files": cluster_files,
        "dead_letter_files": dead_files,
        "trend_files": trend_files,
    }


SUMMARY_COUNTERS = (
    "landing_lines_read",
    "parsed",
    "extracted",
    "clustered",
    "already_clustered",
    "duplicate_article_copies",
    "clusters_created",
    "clusters_merged",
    "stories_assigned",
    "stories_created",
    "stories_merged",
    "stories_reclustered",
    "stories_late_lane",
    "stories_recluster_refused",
    "parquet_files_articles",
    "parquet_files_clusters",
    "parquet_files_deadletters",
    "parquet_files_story_assignments",
    "trend_inputs_late",
    "search_texts_indexed",
    "search_stories_indexed",
)


def story_summary(result, counters: dict[str, int]) -> dict:
    """The story step's spread over keys and the largest story, for the JSON summary.

    ``story_keys``: key groups the step processed (bounded runs: distinct keys); ``story_max_key_share``:
    the largest key group's share of the step's elements; ``largest_story_share``: the largest story's
    share of the run's articles that have a story (both in [0, 1], ``None`` when the run assigned none).
    Read from the step's ``story_key_elements`` distribution and the story-assignment sink's counters
    (:mod:`newsflow.transforms.story_assignments`).
    """
    keys, biggest, total = 0, 0, 0
    try:
        dists = result.metrics().query().get("distributions", [])
    except Exception:  # noqa: BLE001 - a runner without metrics: no distribution, counts stay 0
        dists = []
    for d in dists:
        if d.key.metric.name != "story_key_elements":
            continue
        v = d.committed if d.committed is not None else d.attempted
        if v is None or not v.count:
            continue
        keys += v.count
        biggest = max(biggest, v.max)
        total += v.sum
    articles = counters.get("story_input_articles", 0)
    return {
        "story_keys": keys,
        "story_max_key_share": round(biggest / total, 6) if total else None,
        "largest_story_share": round(counters.get("story_largest_members", 0) / articles, 6) if articles else None,
    }


SPEC = JobSpec(
    name="streaming",
    options_class=NewsflowOptions,
    config_from_options=job_config_from_options,
    build=build_pipeline,
    counters=SUMMARY_COUNTERS,
    summarize=story_summary,
    model_files=(os.path.basename(default_embedding_path("m")),),
    description="The newsflow streaming job: landing files, Pub/Sub or Kafka -> articles -> near-duplicate "
    "groups -> stories -> trends, into Redis and Parquet.",
)


def run(argv: Sequence[str] | None = None, **kwargs) -> LaunchResult:
    """Launches the streaming job with ``argv`` through :func:`newsflow.pipelines.launcher.launch`.

    Keyword arguments go to :func:`~newsflow.pipelines.launcher.launch` (``environ``, ``embedded_redis``,
    ``wait``, ``build_hook``).

    Raises:
      ValueError: invalid or unknown options, inputs that match no file, unreachable Redis.
    """
    return launch(SPEC, argv, **kwargs)


def summarize(launched: LaunchResult) -> str:
    """One JSON line of the run's main counters (what ``newsflow run`` prints)."""
    return summary_line(launched)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m newsflow.pipelines.streaming`` entry point (``--help`` lists the pipeline flags)."""
    from newsflow.pipelines.launcher import main as launcher_main

    return launcher_main(SPEC, list(argv or []), prog="python -m newsflow.pipelines.streaming")


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
