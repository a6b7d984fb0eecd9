"""The ``story_assignments`` dataset: one row per article with the story it belongs to now.

Written by the streaming job (``newsflow run``, and ``newsflow run-continuous``, which runs that job per
batch of landing files) through its ``WriteStoryAssignments`` step, from what Redis holds after the story
step (the storage layer's ``story_assignments`` module).

Layout::

    <output>/story_assignments/date=YYYY-MM-DD/hour=HH/part-<sha256 of the bytes, 20 hex>.parquet

Partitioned by the article's event time (UTC date and hour), which never changes: an article's row
always lives in the same partition, so a later decision about it (a merge of its story, a late
re-decision) rewrites that partition in place and never moves a row between files. Each partition
holds exactly one file, its rows sorted by ``article_id``; the file is named by the hash of its
bytes (:func:`newsflow.storage.parquet.write_content_addressed`), so the same rows give the same
file, and a replay, a shuffled input, a crash and rerun or two concurrent runs leave the same bytes.

What a write costs: a run rewrites the partitions (event hours) of its own articles and of every
member of each story its steps merged away (the retired story's members move to the survivor). A
merge therefore rewrites one file per distinct event hour among the retired story's members, each
file holding that hour's articles (about 42,000 rows at a million articles a day); the story
window bounds how many hours a story spans. Nothing else is read or written.

Rows are never dropped for lack of Redis state: an article whose assignment Redis no longer holds
(retention, a lost Redis) keeps its last row.
"""

import datetime as _dt
from typing import NamedTuple, Optional

import pyarrow as pa

from newsflow.schemas._arrow import UTC_TS

DATASET = "story_assignments"


class StoryAssignmentRow(NamedTuple):
    """One article's current story.

    Attributes:
      article_id: stable article id (32 hex chars).
      story_id: the story it belongs to now: its first story resolved through every merge since
        (``"s"`` + the founding article's id).
      first_story_id: the story its own clustering step put it in (before any merge).
      merge_count: merges between ``first_story_id`` and ``story_id`` (0: never moved).
      event_time: the article's event time (publish time, else fetch time), UTC epoch seconds.
      cluster_id: its near-duplicate group id now (``"c"`` + the group founder's id), ``None``
        when Redis holds none.
    """

    article_id: str
    story_id: str
    first_story_id: str
    merge_count: int
    event_time: float
    cluster_id: Optional[str] = None


STORY_ASSIGNMENTS_SCHEMA = pa.schema(
    [
        pa.field("article_id", pa.string(), nullable=False),
        pa.field("story_id", pa.string(), nullable=False),
        pa.field("first_story_id", pa.string(), nullable=False),
        pa.field("merge_count", pa.int32(), nullable=False),
        pa.field("event_time", UTC_TS, nullable=False),
        pa.field("cluster_id", pa.string()),
    ]
)


def partition_of(event_time: float) -> str:
    """Hive partition ``date=YYYY-MM-DD/hour=HH`` (UTC) of an event time in epoch seconds."""
    t = _dt.datetime.fromtimestamp(float(event_time), tz=_dt.UTC)
    return f"date={t:%Y-%m-%d}/hour={t:%H}"
