"""The search-index sink: articles and their story steps -> the full-text index file.

:class:`UpdateSearchIndex` sits beside the Redis writers of the streaming job. It takes two inputs, the clustered
:class:`~newsflow.schemas.Article` s (title, lead text, URL, outlet, language, event time) and the story step's
trend inputs (``{"article_id", "story_id", "topics", "entities"}`` dicts, one per assigned article), turns them
into :class:`~newsflow.storage.search_index.TextRow` and :class:`~newsflow.storage.search_index.StoryRow` upserts,
batches them (``BatchElements``) and writes each batch in one SQLite transaction
(:class:`~newsflow.storage.search_index.SearchIndex`, opened in ``setup()``). Both upserts are keyed by article
id, so replays and retried bundles leave the same index. Trend inputs that only move an article to a merge's
survivor (they carry ``counts_from``) are skipped: queries follow ``merged_into`` themselves.

A locked file (another writer past the busy timeout) raises ``sqlite3.OperationalError``: transient, the runner
retries the bundle. One writer per index file at a time; see :mod:`newsflow.storage.search_index` for
concurrent workers and the production option.

Counters (namespace :data:`NAMESPACE`): ``search_texts_indexed``, ``search_stories_indexed``.
"""

from __future__ import annotations

from dataclasses import dataclass

import apache_beam as beam
from apache_beam.metrics import Metrics

from newsflow.schemas import Article
from newsflow.storage.search_index import StoryRow, TextRow

NAMESPACE = "newsflow.transforms.search"


@dataclass(frozen=True)
class SearchIndexConfig:
    """Where the index is and how writes are batched.

    Attributes:
      path: the SQLite index file (local path); ``None`` turns the sink off.
      max_batch_size: upserts per transaction, at most.
      busy_timeout_s: how long a write waits for another writer's lock before failing (retried).
    """

    path: str | None = None
    max_batch_size: int = 500
    busy_timeout_s: float = 30.0


def text_row(article: Article) -> TextRow:
    """The index's article side of ``article``."""
    return TextRow(
        article.article_id,
        article.title,
        article.text,
        article.url,
        article.source_domain,
        article.language,
        float(article.event_time),
    )


def story_row(trend: dict) -> StoryRow | None:
    """The index's story side of a story step's trend input; ``None`` for a merge's move (``counts_from``)."""
    if "counts_from" in trend:
        return None
    return StoryRow(
        str(trend["article_id"]),
        str(trend["story_id"]),
        tuple(trend.get("topics") or ()),
        tuple(trend.get("entities") or ()),
    )


class _WriteRowsFn(beam.DoFn):
    """A batch of ``TextRow``/``StoryRow`` -> one transaction per kind; yields how many rows were written."""

    def __init__(self, config: SearchIndexConfig):
        self._config = config
        self.texts = Metrics.counter(NAMESPACE, "search_texts_indexed")
        self.stories = Metrics.counter(NAMESPACE, "search_stories_indexed")

    def setup(self):
        from newsflow.storage.search_index import SearchIndex

        self._index = SearchIndex(self._config.path, busy_timeout_s=self._config.busy_timeout_s)

    def process(self, batch):
        texts = [r for r in batch if isinstance(r, TextRow)]
        stories = [r for r in batch if isinstance(r, StoryRow)]
        self._index.put_texts(texts)
        self._index.put_stories(stories)
        self.texts.inc(len(texts))
        self.stories.inc(len(stories))
        yield len(batch)

    def teardown(self):
        index = getattr(self, "_index", None)
        if index is not None:
            index.close()


class UpdateSearchIndex(beam.PTransform):
    """``(articles, trend inputs)`` -> the index file updated (module docstring); returns the ``int`` counts of
    rows written per batch."""

    def __init__(self, config: SearchIndexConfig):
        super().__init__()
        self._config = config

    def expand(self, inputs):
        articles, trend_inputs = inputs
        texts = articles | "ToTextRows" >> beam.Map(text_row)
        stories = trend_inputs | "ToStoryRows" >> beam.FlatMap(lambda t: [r] if (r := story_row(t)) else [])
        return (
            (texts, stories)
            | "FlattenIndexRows" >> beam.Flatten()
            | "BatchIndexRows" >> beam.BatchElements(min_batch_size=1, max_batch_size=self._config.max_batch_size)
            | "WriteIndexRows" >> beam.ParDo(_WriteRowsFn(self._config))
        )
