"""Nightly job: reader interest vectors, MinHash user clusters and story co-visitation.

Input: the events of the ``--history_days`` days ending at ``--date`` and the newest story
snapshots (:mod:`newsflow.jobs.nightly_common`). Three outputs, computed at the end of the date (``now``):

1. **Interest vectors** and **topic interests** (Liu et al., IUI 2010, click-based interests): per
   reader, :func:`newsflow.core.learning.topic_interest.topic_interests` (decayed, dwell-weighted clicks per
   topic label over position-weighted exposure, shrunk to the reader's rate; the examination propensity
   per position is estimated over all readers' events of the window) and,
   in the story-embedding space, :func:`newsflow.core.learning.interests.interest_vector`: clicks weighted by
   dwell (``1 + log1p(dwell/30 s)``, dwell capped at 600 s) and time-decayed with a 14-day
   half-life, skipped impressions as weak negatives (weight 0.1), L2-normalised; plus the
   reader's click count and 50 most recent clicked stories.
2. **User clusters** (Das et al., WWW 2007, MinHash clustering of click histories): the clusters of
   :func:`newsflow.core.learning.collaborative.minhash_user_clusters` over the readers' recent clicks
   (datasketch MinHash LSH, Jaccard threshold 0.5, fixed seed), computed by keys: each reader's LSH band
   keys (:func:`~newsflow.core.learning.collaborative.minhash_bands`), then :data:`CLUSTER_ROUNDS` rounds of
   group-by-band relabelling (:func:`~newsflow.core.learning.collaborative.descending_min_labels`), each
   linear in the band memberships; and per cluster of two or more readers the stories its readers clicked
   (top 50), so a story read by similar readers is boosted before any content overlap.
3. **Co-visitation** (Das et al.): for every pair of stories clicked by one reader (each reader's
   50 most recent clicks), the number of readers who clicked both; per story its top 20
   neighbours.

Every step is keyed (by reader, band bucket, cluster, story or model bucket); no step gathers the readers
or events into one call. Outputs (each replaced for the date), written by parallel writers: Parquet
``<output>/models/{interest,cluster,covisit}/date=D/part-*.parquet``
(:class:`~newsflow.jobs.nightly_common.WritePartition`) and the Redis versions of ``interest``,
``history``, ``cluster`` and ``covisit`` at ``D``, each spread over the 4,096 reader-bucket hashes
``Keys.model_bucket(name, D, b)`` (:class:`~newsflow.jobs.nightly_common.WriteModelBuckets`: one MULTI per
bucket, see :mod:`newsflow.storage.models`), served after ``newsflow nightly`` switches the pointer.

Run::

    python -m newsflow.jobs.interest_vectors [--date D] [--output ROOT] [--history_days N] [launcher flags]
"""

from __future__ import annotations

import itertools
import json
import sys
from collections import Counter

import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam.metrics import Metrics

from newsflow.core.learning.collaborative import descending_min_labels, minhash_bands
from newsflow.core.learning.interests import interest_vector
from newsflow.core.learning.topic_interest import position_propensity, topic_interests
from newsflow.jobs.nightly_common import (
    NightlyConfig,
    NightlyOptions,
    ReadEvents,
    ReadStories,
    WriteModelBuckets,
    WritePartition,
    config_from_options,
    partition_files,
)
from newsflow.pipelines.launcher import JobSpec, main
from newsflow.schemas._arrow import embedding_field
from newsflow.storage.ranking import encode_embedding

NAMESPACE = "newsflow.jobs.interest_vectors"
RECENT_CLICKS = 50
CLUSTER_TOP = 50
COVISIT_TOP = 20
TOPIC_TOP = 10

INTEREST_OUTPUT_SCHEMA = pa.schema(
    [
        pa.field("user_id", pa.string(), nullable=False),
        embedding_field("interest"),
        pa.field("clicks", pa.int32()),
        pa.field("recent", pa.list_(pa.string())),
        pa.field("cluster_id", pa.string()),
        pa.field("topics", pa.list_(pa.struct([("label", pa.string()), ("share", pa.float32())]))),
    ]
)
COVISIT_OUTPUT_SCHEMA = pa.schema(
    [
        pa.field("story_id", pa.string(), nullable=False),
        pa.field("neighbor_id", pa.string(), nullable=False),
        pa.field("readers", pa.int32()),
    ]
)
CLUSTER_OUTPUT_SCHEMA = pa.schema(
    [
        pa.field("cluster_id", pa.string(), nullable=False),
        pa.field("story_id", pa.string(), nullable=False),
        pa.field("clicks", pa.int32()),
    ]
)


def recent_clicks(events) -> list[str]:
    """Distinct clicked story ids, newest click first (ties: story id), at most :data:`RECENT_CLICKS`."""
    last: dict[str, float] = {}
    for e in events:
        if e.type == "click":
            last[e.story_id] = max(last.get(e.story_id, float("-inf")), e.event_time)
    return [s for s, _ in sorted(last.items(), key=lambda kv: (-kv[1], kv[0]))][:RECENT_CLICKS]


def position_counts(events) -> dict:
    """Events -> ``{position: (impressions, clicks)}`` (clicks with a position only), for
    :func:`newsflow.core.learning.topic_interest.position_propensity`."""
    out: dict = {}
    for e in events:
        if e.type in ("impression", "click") and e.position is not None:
            imps, clicks = out.get(int(e.position), (0, 0))
            out[int(e.position)] = (imps + (e.type == "impression"), clicks + (e.type == "click"))
    return out


class _PositionCountsFn(beam.CombineFn):
    """Sums :func:`position_counts` over all events."""

    def create_accumulator(self):
        return {}

    def add_input(self, acc, e):
        return self.merge_accumulators([acc, position_counts([e])])

    def merge_accumulators(self, accs):
        out: dict = {}
        for acc in accs:
            for p, (i, c) in acc.items():
                a, b = out.get(p, (0, 0))
                out[p] = (a + i, b + c)
        return out

    def extract_output(self, acc):
        return position_propensity(acc)


class _ProfileFn(beam.DoFn):
    """``(user, events)`` -> ``(user, interest float32 (128,) or None, clicks, recent story ids,
    topic interests {label: share})``."""

    def __init__(self, now: float):
        self.now = now

    def process(self, user_events, embeddings, propensity):
        user, events = user_events
        events = list(events)
        needed = {e.story_id for e in events}
        embs = {
            s: np.asarray(embeddings[s].embedding, dtype=np.float32)
            for s in needed
            if s in embeddings and embeddings[s].embedding is not None
        }
        vector = interest_vector(events, embs, self.now) if embs else None
        story_topics = {s: embeddings[s].topics for s in needed if s in embeddings}
        topics = topic_interests(events, story_topics, self.now, propensity)
        yield user, vector, sum(1 for e in events if e.type == "click"), recent_clicks(events), topics


def covisit_pairs(profile):
    """One reader's recent clicks -> ``((a, b), 1)`` for every ordered pair of distinct stories."""
    recent = profile[3]
    for a, b in itertools.permutations(sorted(set(recent)), 2):
        yield (a, b), 1


def top_neighbors(story, neighbors) -> tuple[str, list]:
    """``(story, [(neighbor, readers)])`` -> the top :data:`COVISIT_TOP` by readers (ties: id)."""
    return story, sorted(neighbors, key=lambda nb: (-nb[1], nb[0]))[:COVISIT_TOP]


CLUSTER_ROUNDS = 4
"""Rounds of keyed relabelling that compute the reader clusters (:func:`cluster_labels`). A reader's cluster
is :func:`~newsflow.core.learning.collaborative.minhash_user_clusters` ' cluster when the chain of
ever-earlier readers leading to its founder is short enough for the rounds (the label jump of each round
lets a round follow the chains the earlier rounds found); otherwise it is an earlier reader of that chain
(a similar reader still), and the job counts the readers whose cluster was still moving in the last round
(``cluster_labels_unsettled``)."""


def reader_bands(profile) -> list:
    """A profile -> ``(band key, reader)`` for each LSH band of its recent clicks (none under 2 clicks)."""
    return [(band, profile[0]) for band in minhash_bands(profile[3])]


def relabel_bucket(band, members) -> list:
    """``(band, [(reader, label)])`` -> ``[(reader, candidate label)]`` (one round, see :data:`CLUSTER_ROUNDS`)."""
    return descending_min_labels(list(members))


def _join_labels(user, grouped) -> list:
    """``(reader, {"bands": [band], "label": [label]})`` -> ``[(band, (reader, label))]``."""
    label = min(grouped["label"])
    return [(band, (user, label)) for band in grouped["bands"]]


class _InterestRowFn(beam.DoFn):
    """``(reader, {"profile": [profile], "cluster": [cluster id]})`` -> its Parquet row (main output), its
    ``(model, field, value)`` Redis fields (tag ``redis``) and ``(cluster id, (reader, recent))`` (tag ``member``)."""

    def __init__(self, redis: bool):
        self.redis = redis
        self.users = Metrics.counter(NAMESPACE, "interest_users")
        self.vectors = Metrics.counter(NAMESPACE, "interest_vectors")

    def process(self, element):
        user, grouped = element
        if not grouped["profile"]:
            return
        _, vector, clicks, recent, topics = grouped["profile"][0]
        cid = grouped["cluster"][0] if grouped["cluster"] else None
        self.users.inc()
        self.vectors.inc(vector is not None)
        yield {
            "user_id": user,
            "interest": None if vector is None else [float(x) for x in vector],
            "clicks": clicks,
            "recent": recent,
            "cluster_id": cid,
            "topics": [{"label": t, "share": w} for t, w in topics.items()],
        }
        if cid is not None:
            yield beam.pvalue.TaggedOutput("member", (cid, (user, recent)))
        if self.redis:
            if vector is not None:
                yield beam.pvalue.TaggedOutput("redis", ("interest", user, encode_embedding(vector)))
            history = json.dumps({"clicks": clicks, "recent": recent, "topics": topics})
            yield beam.pvalue.TaggedOutput("redis", ("history", user, history))


class _ClusterTopFn(beam.DoFn):
    """``(cluster id, [(reader, recent)])`` of a cluster with more than one reader -> its Parquet rows (main
    output: the :data:`CLUSTER_TOP` stories its readers clicked most, ties by id) and its Redis fields (tag
    ``redis``: ``c:<id>`` -> JSON top, each reader -> the id)."""

    def __init__(self, redis: bool):
        self.redis = redis
        self.clusters = Metrics.counter(NAMESPACE, "user_clusters")

    def process(self, element):
        cid, members = element
        counts, users = Counter(), []
        for user, recent in members:
            users.append(user)
            counts.update(recent)
        if len(users) < 2:
            return
        top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:CLUSTER_TOP]
        self.clusters.inc()
        for s, k in top:
            yield {"cluster_id": cid, "story_id": s, "clicks": k}
        if self.redis:
            yield beam.pvalue.TaggedOutput("redis", ("cluster", f"c:{cid}", json.dumps(dict(top))))
            for user in users:
                yield beam.pvalue.TaggedOutput("redis", ("cluster", user, cid))


class _CoVisitOutputsFn(beam.DoFn):
    """``(story, [(neighbor, readers)])`` -> its Parquet rows (main output) and its Redis field (tag ``redis``)."""

    def __init__(self, redis: bool):
        self.redis = redis
        self.stories = Metrics.counter(NAMESPACE, "covisit_stories")

    def process(self, element):
        story, neighbors = element
        self.stories.inc()
        for n, k in neighbors:
            yield {"story_id": story, "neighbor_id": n, "readers": k}
        if self.redis:
            yield beam.pvalue.TaggedOutput("redis", ("covisit", story, json.dumps(dict(neighbors))))


def _jump(label, grouped) -> list:
    """``(label, {"follower": [reader], "label": [its own label]})`` -> each follower with the label's label."""
    if not grouped["label"]:
        return [(u, label) for u in grouped["follower"]]
    target = min(label, min(grouped["label"]))
    return [(u, target) for u in grouped["follower"]]


class _SettledFn(beam.DoFn):
    """``(reader, {"before": [label], "after": [label]})`` -> ``(reader, label after)``; counts the readers whose
    label the last round still changed (``cluster_labels_unsettled``)."""

    def __init__(self):
        self.unsettled = Metrics.counter(NAMESPACE, "cluster_labels_unsettled")

    def process(self, element):
        user, grouped = element
        after = min(grouped["after"])
        if grouped["before"] and min(grouped["before"]) != after:
            self.unsettled.inc()
        yield user, after


def cluster_labels(profiles):
    """Profiles -> ``(reader, cluster id)`` for every reader with at least two recent clicks.

    Keyed throughout: every reader's LSH band keys, then :data:`CLUSTER_ROUNDS` rounds of (1) joining the
    readers' labels to their band memberships, grouping by band and giving each reader the smallest label
    among itself and the bucket's earlier readers
    (:func:`~newsflow.core.learning.collaborative.descending_min_labels`), keeping its smallest over its
    bands; (2) replacing each label by the label's own label (pointer jumping: a label is an earlier reader
    reachable from the reader, so its label is too). Each round is linear in the band memberships."""
    bands = profiles | "MinHashBands" >> beam.FlatMap(reader_bands)
    memberships = bands | "ReaderBands" >> beam.MapTuple(lambda band, user: (user, band))
    labels = (
        memberships
        | "FirstLabels" >> beam.Map(lambda ub: (ub[0], ub[0]))
        | "DistinctReaders" >> beam.CombinePerKey(min)
    )
    before = labels
    for i in range(CLUSTER_ROUNDS):
        before = labels
        relabelled = (
            {"bands": memberships, "label": labels}
            | f"JoinLabels[{i}]" >> beam.CoGroupByKey()
            | f"LabelBands[{i}]" >> beam.FlatMapTuple(_join_labels)
            | f"GroupBand[{i}]" >> beam.GroupByKey()
            | f"Relabel[{i}]" >> beam.FlatMapTuple(relabel_bucket)
            | f"SmallestLabel[{i}]" >> beam.CombinePerKey(min)
        )
        labels = (
            {
                "follower": relabelled | f"ByLabel[{i}]" >> beam.MapTuple(lambda u, label: (label, u)),
                "label": relabelled,
            }
            | f"JoinLabelOfLabel[{i}]" >> beam.CoGroupByKey()
            | f"JumpToLabelOfLabel[{i}]" >> beam.FlatMapTuple(_jump)
        )
    return (
        {"before": before, "after": labels}
        | "CompareLastRound" >> beam.CoGroupByKey()
        | "SettledLabels" >> beam.ParDo(_SettledFn())
    )


def build(pipeline: beam.Pipeline, config: NightlyConfig):
    """Adds the job to ``pipeline``; returns the PCollection of written Parquet paths."""
    event_files = partition_files(config.output, "events", config.dates(config.history_days))
    events = pipeline | "ReadEvents" >> ReadEvents(event_files)
    stories = pipeline | "ReadStories" >> ReadStories(
        partition_files(config.output, "stories", config.dates(config.history_days))
    )
    propensity = events | "PositionPropensity" >> beam.CombineGlobally(_PositionCountsFn())
    profiles = (
        events
        | "KeyByReader" >> beam.Map(lambda e: (e.user_id, e))
        | "GroupByReader" >> beam.GroupByKey()
        | "InterestProfiles"
        >> beam.ParDo(_ProfileFn(config.now), beam.pvalue.AsDict(stories), beam.pvalue.AsSingleton(propensity))
    )
    redis = bool(config.redis_url)
    rows = (
        {
            "profile": profiles | "KeyProfiles" >> beam.Map(lambda p: (p[0], p)),
            "cluster": cluster_labels(profiles),
        }
        | "JoinClusters" >> beam.CoGroupByKey()
        | "InterestRows" >> beam.ParDo(_InterestRowFn(redis)).with_outputs("member", "redis", main="rows")
    )
    clusters = (
        rows.member
        | "GroupClusters" >> beam.GroupByKey()
        | "ClusterTops" >> beam.ParDo(_ClusterTopFn(redis)).with_outputs("redis", main="rows")
    )
    covisit = (
        profiles
        | "CoVisitPairs" >> beam.FlatMap(covisit_pairs)
        | "CountCoVisits" >> beam.CombinePerKey(sum)
        | "KeyByStory" >> beam.MapTuple(lambda ab, n: (ab[0], (ab[1], n)))
        | "GroupNeighbors" >> beam.GroupByKey()
        | "TopNeighbors" >> beam.MapTuple(top_neighbors)
        | "CoVisitOutputs" >> beam.ParDo(_CoVisitOutputsFn(redis)).with_outputs("redis", main="rows")
    )
    d = config.date
    paths = (
        rows.rows | "WriteInterest" >> WritePartition(config.output, "models/interest", d, INTEREST_OUTPUT_SCHEMA),
        covisit.rows | "WriteCoVisit" >> WritePartition(config.output, "models/covisit", d, COVISIT_OUTPUT_SCHEMA),
        clusters.rows | "WriteClusters" >> WritePartition(config.output, "models/cluster", d, CLUSTER_OUTPUT_SCHEMA),
    ) | "WrittenPaths" >> beam.Flatten()
    if redis:
        (
            (rows.redis, clusters.redis, covisit.redis)
            | "RedisFields" >> beam.Flatten()
            | "PublishModels" >> WriteModelBuckets(config, ("interest", "history", "cluster", "covisit"))
        )
    return paths


SPEC = JobSpec(
    name="interest_vectors",
    options_class=NightlyOptions,
    config_from_options=config_from_options,
    build=build,
    counters=("interest_users", "interest_vectors", "user_clusters", "covisit_stories", "cluster_labels_unsettled"),
    description="Learn reader interest vectors, MinHash user clusters and story co-visitation "
    "(models/{interest,cluster,covisit}/date=D, Redis).",
)

if __name__ == "__main__":
    sys.exit(main(SPEC, sys.argv[1:], "python -m newsflow.jobs.interest_vectors"))
