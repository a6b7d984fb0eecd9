"""Trending records: the input of a trending window (TrendInput) and its output (TrendCount)."""

from typing import NamedTuple, Optional

import pyarrow as pa

from newsflow.schemas._arrow import UTC_TS


class TrendInput(NamedTuple):
    """One newly assigned article as the trending step counts it (its element timestamp is the
    article's event time).

    Attributes:
      article_id: stable article id (32 hex chars).
      story_id: the story it was assigned to.
      topics: topic labels, lower case, without duplicates (order kept).
      entities: entity display texts, without duplicates (order kept).
      counts_from: ``None`` for a newly assigned article. For an article of a story that was merged
        into ``story_id``: the merge's event time (UTC epoch seconds); only windows ending after it
        count the article for ``story_id`` (earlier windows counted it under its old story).
    """

    article_id: str
    story_id: str
    topics: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    counts_from: Optional[float] = None


TREND_INPUT_SCHEMA = pa.schema(
    [
        pa.field("article_id", pa.string(), nullable=False),
        pa.field("story_id", pa.string(), nullable=False),
        pa.field("topics", pa.list_(pa.string())),
        pa.field("entities", pa.list_(pa.string())),
        pa.field("counts_from", pa.float64()),
    ]
)


class TrendCount(NamedTuple):
    """Distinct new articles for one key in one sliding window.

    Attributes:
      kind: ``"story"``, ``"entity"`` or ``"topic"``.
      key: story id, entity text or topic label.
      count: distinct article ids in the window.
      window_start: window start, UTC epoch seconds (inclusive).
      window_end: window end, UTC epoch seconds (exclusive).
      breaking: story kind only: ``count`` is above the breaking threshold.
      decay_lambda: story kind only: λ in 1/hours that its score uses at ``window_end``
        (0.5 breaking, else by topic class); 0.0 for other kinds.
    """

    kind: str
    key: str
    count: int
    window_start: float
    window_end: float
    breaking: bool = False
    decay_lambda: float = 0.0


TREND_SCHEMA = pa.schema(
    [
        pa.field("kind", pa.string(), nullable=False),
        pa.field("key", pa.string(), nullable=False),
        pa.field("count", pa.int32()),
        pa.field("window_start", UTC_TS),
        pa.field("window_end", UTC_TS),
        pa.field("breaking", pa.bool_()),
        pa.field("decay_lambda", pa.float32()),
    ]
)
