"""Nightly job: the stories dataset, one snapshot of every live story per night, as Parquet.

Reads every live story from Redis (``Keys.story``, with its member article ids and outlets from
``Keys.story_articles`` / ``Keys.article``) and replaces ``<output>/stories/date=D/part-00000.parquet``
(:data:`newsflow.schemas.story.STORY_SCHEMA`: story id, first-seen time, topics with probabilities,
entities, 128-dim embedding, outlets, article ids, lead and its article type,
:func:`newsflow.core.ranking.article_type.story_article_type`), so the other nightly jobs, and DuckDB or
BigQuery users, can work from Parquet alone. The streaming job's own Parquet (articles,
clusters) has no story-level embedding or topics, so the snapshot is taken from the serving state.

Run::

    python -m newsflow.jobs.snapshot_stories [--date D] [--output ROOT] [launcher flags]
"""

from __future__ import annotations

import sys

import apache_beam as beam
from apache_beam.metrics import Metrics

from newsflow.core.outlets import outlet
from newsflow.core.ranking.article_type import story_article_type
from newsflow.jobs.nightly_common import NightlyConfig, NightlyOptions, config_from_options, write_partition
from newsflow.pipelines.launcher import JobSpec, main
from newsflow.schemas._arrow import records_to_table
from newsflow.schemas.story import STORY_SCHEMA, StoryRecord
from newsflow.storage.keys import Keys

NAMESPACE = "newsflow.jobs.snapshot_stories"


class _ReadStoriesFn(beam.DoFn):
    """date -> every live story (:class:`schemas.StoryRecord` as a dict, outlets and article ids filled)."""

    def __init__(self, redis_url: str, key_prefix: str, batch: int = 500):
        self.redis_url, self.key_prefix, self.batch = redis_url, key_prefix, batch
        self.stories = Metrics.counter(NAMESPACE, "stories_snapshotted")

    def setup(self):
        from newsflow.runtime.redis_conn import connect
        from newsflow.storage.ranking import RankingStore

        self.store = RankingStore(connect(self.redis_url), Keys(self.key_prefix))

    def process(self, _date):
        ids = sorted(self.store.iter_story_ids())
        for i in range(0, len(ids), self.batch):
            for s in self.store.get_stories(ids[i : i + self.batch]):
                if s is None or s.merged_into:
                    continue
                arts = self.store.story_articles(s.story_id)
                outlets = sorted({o for o in (outlet(a.source_domain) for a in arts) if o})
                self.stories.inc()
                article_ids = [a.article_id for a in arts] or s.article_ids
                s = s._replace(outlets=outlets or s.outlets, article_ids=article_ids)
                yield s._replace(article_type=story_article_type(s))._asdict()


def _write(stories: list, config: NightlyConfig) -> str:
    stories = sorted((StoryRecord(**s) for s in stories), key=lambda s: s.story_id)
    return write_partition(config.output, "stories", config.date, records_to_table(stories, STORY_SCHEMA))


def build(pipeline: beam.Pipeline, config: NightlyConfig):
    """Adds the snapshot to ``pipeline``; returns the PCollection of the written path."""
    if not config.redis_url:
        raise ValueError("snapshot_stories reads Redis: no Redis URL resolved (set --redis_url or use a local runner)")
    return (
        pipeline
        | "NightDate" >> beam.Create([config.date])
        | "ReadLiveStories" >> beam.ParDo(_ReadStoriesFn(config.redis_url, config.key_prefix))
        | "CollectStories" >> beam.combiners.ToList()
        | "WriteStoriesPartition" >> beam.Map(_write, config)
    )


SPEC = JobSpec(
    name="snapshot_stories",
    options_class=NightlyOptions,
    config_from_options=config_from_options,
    build=build,
    counters=("stories_snapshotted",),
    description="Snapshot every live story from Redis into <output>/stories/date=D/ (Parquet).",
)

if __name__ == "__main__":
    sys.exit(main(SPEC, sys.argv[1:], "python -m newsflow.jobs.snapshot_stories"))
