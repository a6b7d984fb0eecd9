"""The ``story_assignments`` sink: story step results -> the affected partitions rewritten from Redis.

:class:`WriteStoryAssignments` takes the story step's :class:`~newsflow.schemas.StoryAssignment` s,
finds the articles whose story they may have changed (the articles themselves, and the members of
every story merged away by their steps, also for replayed articles, whose step result is empty),
reads those articles' rows from Redis and rewrites each partition they fall in
(:mod:`newsflow.storage.story_assignments`; layout and costs in :mod:`newsflow.schemas.story_assignments`).

In a bounded run the sink fires once, after every story step of the run has committed; in streaming
it fires every ``flush_seconds`` (the next firing rewrites what a later step changed). It also counts
the run's articles and the size of the largest story among them (counters ``story_input_articles``,
``story_largest_members``), for the job summary's ``largest_story_share``.
"""

from __future__ import annotations

import apache_beam as beam
from apache_beam import pvalue
from apache_beam.metrics import Metrics

from newsflow.schemas.story_assignments import StoryAssignmentRow, partition_of
from newsflow.storage.keys import Keys
from newsflow.transforms.io import SinkConfig, _flush_windowing, _shard

NAMESPACE = "newsflow.transforms.story_assignments"
_OWN_STORY = "own_story"


class _ConnectFn(beam.DoFn):
    """Opens the Redis client in ``setup()``."""

    def __init__(self, redis_url: str | None, key_prefix: str):
        self._redis_url, self._key_prefix = redis_url, key_prefix

    def setup(self):
        from newsflow.runtime.redis_conn import connect

        self._client = connect(self._redis_url)
        self._keys = Keys(self._key_prefix)


class _TouchedRowsFn(_ConnectFn):
    """(shard, [(article id, replayed, merged story ids)]) -> (partition, row tuple) for every touched
    article Redis knows, and the story id of each of the run's own articles on :data:`_OWN_STORY`
    (an article's own entries are in one shard only)."""

    def __init__(self, redis_url, key_prefix):
        super().__init__(redis_url, key_prefix)
        self.touched = Metrics.counter(NAMESPACE, "story_assignment_rows_touched")
        self.unknown = Metrics.counter(NAMESPACE, "story_assignment_rows_unknown")
        self.own = Metrics.counter(NAMESPACE, "story_input_articles")

    def process(self, element):
        from newsflow.storage import story_assignments as sa

        _, items = element
        own_set = {aid for aid, _, _ in items}
        merged = {sid for _, _, m in items for sid in m}
        replayed = {aid for aid, dup, _ in items if dup}
        touched = sa.touched_articles(self._client, self._keys, own_set, merged, replayed)
        rows = sa.current_rows(self._client, self._keys, touched)
        for aid in sorted(rows):
            row = rows[aid]
            if row is None:
                self.unknown.inc()
                continue
            self.touched.inc()
            yield partition_of(row.event_time), tuple(row)
            if aid in own_set:
                self.own.inc()
                yield pvalue.TaggedOutput(_OWN_STORY, row.story_id)


class _RewritePartitionFn(_ConnectFn):
    """(partition, row tuples) -> the partition's file path, rewritten under its lock."""

    def __init__(self, redis_url, key_prefix, root: str):
        super().__init__(redis_url, key_prefix)
        self._root = root
        self.files = Metrics.counter(NAMESPACE, "parquet_files_story_assignments")

    def process(self, element):
        from newsflow.storage.story_assignments import rewrite_partition

        partition, tuples = element
        rows: dict[str, StoryAssignmentRow] = {}
        for t in sorted(set(map(tuple, tuples)), key=repr):  # one article touched by two shards: same row
            rows[t[0]] = StoryAssignmentRow(*t)
        path = rewrite_partition(self._client, self._keys, self._root, partition, rows)
        if path:
            self.files.inc()
            yield path


class _CountLargestStoryFn(beam.DoFn):
    """The largest story's member count among the run's own articles -> counter ``story_largest_members``."""

    def __init__(self):
        self.largest = Metrics.counter(NAMESPACE, "story_largest_members")

    def process(self, largest: int):
        self.largest.inc(largest)
        yield largest


class WriteStoryAssignments(beam.PTransform):
    """StoryAssignments -> ``<root>/story_assignments/date=D/hour=H/part-<hash>.parquet`` (paths written).

    Args:
      config: where and when to write (``output_root``, streaming flushes; ``shards_per_partition``
        spreads the Redis reads over that many keys).
      redis_url: Redis holding the story state.
      key_prefix: Redis key namespace.
    """

    def __init__(self, config: SinkConfig, redis_url: str | None, key_prefix: str = "nf", read_shards: int = 8):
        super().__init__()
        self._config = config
        self._redis_url = redis_url
        self._key_prefix = key_prefix
        self._read_shards = read_shards

    def expand(self, assignments):
        cfg, shards = self._config, self._read_shards
        touched = (
            assignments
            | "Window" >> _flush_windowing(cfg)
            | "KeyByShard"
            >> beam.Map(lambda a: (_shard(a.article_id, shards), (a.article_id, bool(a.duplicate), tuple(a.merged))))
            | "Group" >> beam.GroupByKey()
            | "ReadRows"
            >> beam.ParDo(_TouchedRowsFn(self._redis_url, self._key_prefix))
            .with_output_types(tuple[str, tuple])
            .with_outputs(_OWN_STORY, main="rows")
        )
        _ = (
            touched[_OWN_STORY]
            | "CountPerStory" >> beam.combiners.Count.PerElement()
            | "StorySizes" >> beam.Values()
            | "LargestStory" >> beam.CombineGlobally(max).without_defaults()
            | "CountLargestStory" >> beam.ParDo(_CountLargestStoryFn())
        )
        return (
            touched.rows
            | "GroupByPartition" >> beam.GroupByKey()
            | "Rewrite" >> beam.ParDo(_RewritePartitionFn(self._redis_url, self._key_prefix, cfg.output_root))
        )
