"""Near-duplicate group assignment against the Redis store (``newsflow.storage.groups``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import apache_beam as beam
import redis
from apache_beam import pvalue
from apache_beam.metrics import Metrics

from newsflow.runtime.redis_conn import connect
from newsflow.schemas import Article
from newsflow.storage.groups import RedisGroupStore, StoreConfig
from newsflow.transforms.deadletter import DEAD_LETTER_TAG, METRICS_NAMESPACE, dead_letter


@dataclass(frozen=True)
class GroupConfig:
    """Configuration of :class:`AssignNearDuplicateGroups`.

    Attributes:
      redis_url: Redis to use (``redis://``, ``unix://``); ``None`` means ``$REDIS_URL`` or the
        embedded server of this process.
      store: key prefix and Hamming threshold.
      min_batch_size / max_batch_size: articles per write cycle of the store (a fixed number of Redis round
        trips, :meth:`RedisGroupStore.assign_batch`).
    """

    redis_url: str | None = None
    store: StoreConfig = field(default_factory=StoreConfig)
    min_batch_size: int = 1
    max_batch_size: int = 200


class _AssignFn(beam.DoFn):
    """Batch of Articles -> Articles with ``cluster_id`` (one all-or-nothing write cycle per batch).

    Transient Redis errors and a lost writer lease propagate (the runner retries the bundle; a stored
    article is a no-op). An article the store refuses (no valid SimHash), or one older
    than the retention cutoff (``Keys.retention_cutoff``, set by ``newsflow retention``), is
    dead-lettered; the rest of its batch is still assigned.
    """

    def __init__(self, config: GroupConfig):
        self._config = config
        self.assigned = Metrics.counter(METRICS_NAMESPACE, "clustered")
        self.replayed = Metrics.counter(METRICS_NAMESPACE, "already_clustered")
        self.created = Metrics.counter(METRICS_NAMESPACE, "clusters_created")
        self.merged = Metrics.counter(METRICS_NAMESPACE, "clusters_merged")
        self.dead = Metrics.counter(METRICS_NAMESPACE, "dead_lettered_cluster")

    def setup(self):
        self._store = RedisGroupStore(connect(self._config.redis_url), self._config.store)

    def process(self, batch):
        good = []
        raw_cutoff = self._store.client.get(self._store.keys.retention_cutoff)
        cutoff = float(raw_cutoff) if raw_cutoff is not None else None
        if cutoff is not None and not math.isfinite(cutoff):
            cutoff = None  # a corrupt value (the next newsflow retention replaces it) expires nothing
        for article in batch:
            fp = article.simhash or ""
            if cutoff is not None and article.event_time is not None and float(article.event_time) < cutoff:
                # state this old was expired (newsflow retention): assigning it would found a new group and
                # story for an event whose coverage is gone, and a replay would not match the first pass
                self.dead.inc()
                yield pvalue.TaggedOutput(
                    DEAD_LETTER_TAG,
                    dead_letter(
                        "cluster",
                        "older_than_retention",
                        f"event time {article.event_time} is before the retention cutoff {cutoff}",
                        repr(article._replace(text=article.text[:1000])).encode("utf-8"),
                        article.url,
                    ),
                )
            elif len(fp) != 16:
                self.dead.inc()
                yield pvalue.TaggedOutput(
                    DEAD_LETTER_TAG,
                    dead_letter(
                        "cluster",
                        "missing_simhash",
                        f"invalid simhash {fp!r}",
                        repr(article._replace(text=article.text[:1000])).encode("utf-8"),
                        article.url,
                    ),
                )
            else:
                good.append(article)
        if not good:
            return
        try:
            results = self._store.assign_batch(good)
        except redis.ResponseError as e:  # a command Redis refuses (e.g. a key of the wrong type): permanent
            for article in good:
                self.dead.inc()
                yield pvalue.TaggedOutput(
                    DEAD_LETTER_TAG,
                    dead_letter(
                        "cluster",
                        "redis_script_error",
                        str(e),
                        repr(article._replace(text=article.text[:1000])).encode("utf-8"),
                        article.url,
                    ),
                )
            return
        for article, result in zip(good, results, strict=False):
            if result.new_article:
                self.assigned.inc()
            else:
                self.replayed.inc()
            if result.created:
                self.created.inc()
            if result.merged:
                self.merged.inc(len(result.merged))
            yield article._replace(cluster_id=result.cluster_id)


class AssignNearDuplicateGroups(beam.PTransform):
    """Article (with SimHash) -> Article with ``cluster_id``; state in Redis.

    Closest candidate within the Hamming threshold wins (ties: smallest article id);
    otherwise the article founds a new cluster. Articles are batched per Redis call with
    ``BatchElements``, which does not keep element timestamps, so each output is restamped with its
    ``event_time`` (the message's timestamp, :func:`newsflow.transforms.content.stamp_event_time`).
    """

    def __init__(self, config: GroupConfig = GroupConfig()):
        super().__init__()
        self._config = config

    def expand(self, pcoll):
        out = (
            pcoll
            | "Batch"
            >> beam.BatchElements(
                min_batch_size=self._config.min_batch_size, max_batch_size=self._config.max_batch_size
            )
            | "Assign" >> beam.ParDo(_AssignFn(self._config)).with_outputs(DEAD_LETTER_TAG, main="main")
        )
        restamped = out.main | "RestampEventTime" >> beam.Map(
            lambda a: beam.window.TimestampedValue(a, a.event_time)
        ).with_output_types(Article)
        return {"main": restamped, DEAD_LETTER_TAG: out[DEAD_LETTER_TAG]}
