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
2. **User clusters** (Das et al., WWW 2007, MinHash clustering of click histories):
   :func:`newsflow.core.learning.collaborative.minhash_user_clusters` over the readers' click sets
   (datasketch MinHash LSH, Jaccard threshold 0.5, fixed seed), and per cluster the stories its
   readers clicked (top 50), so a story read by similar readers is boosted before any content
   overlap.
3. **Co-visitation** (Das et al.): for every pair of stories clicked by one reader (each reader's
   50 most recent clicks), the number of readers who clicked both; per story its top 20
   neighbours.

Outputs (each replaced for the date): Parquet ``<output>/models/{interest,cluster,covisit}/date=D/``
and the Redis versions of ``interest``, ``history``, ``cluster`` and ``covisit`` at ``D``, each spread
over the 4,096 reader-bucket hashes ``Keys.model_bucket(name, D, b)`` (see :mod:`newsflow.storage.models`:
one bounded MULTI per bucket), served after ``newsflow nightly`` switches the pointer.

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

from newsflow.core.learning.collaborative import minhash_user_clusters
from newsflow.core.learning.interests import interest_vector
from newsflow.core.learning.topic_interest import position_propensity, topic_interests
from newsflow.jobs.nightly_common import (
    NightlyConfig,
    NightlyOptions,
    ReadEvents,
    ReadStories,
    config_from_options,
    open_models,
    partition_files,
    write_partition,
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
        self.users = Metrics.counter(NAMESPACE, "interest_users")
        self.vectors = Metrics.counter(NAMESPACE, "interest_vectors")

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
        self.users.inc()
        if vector is not None:
            self.vectors.inc()
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


def cluster_rows(profiles: list) -> tuple[dict, dict]:
    """All profiles -> ``({user: cluster id}, {cluster id: [(story, clicks)] top 50})``."""
    clusters = minhash_user_clusters({p[0]: p[3] for p in profiles})
    counts: dict[str, Counter] = {}
    for user, _, _, recent, _ in profiles:
        cid = clusters.get(user)
        if cid is not None:
            counts.setdefault(cid, Counter()).update(recent)
    top = {
        cid: sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[:CLUSTER_TOP]
        for cid, c in counts.items()
        if len([u for u, k in clusters.items() if k == cid]) > 1
    }
    return clusters, top


class _PublishFn(beam.DoFn):
    """(profiles, covisit) -> Parquet partitions + versioned Redis hashes; yields written paths."""

    def __init__(self, config: NightlyConfig):
        self.config = config
        self.clusters = Metrics.counter(NAMESPACE, "user_clusters")
        self.covisit = Metrics.counter(NAMESPACE, "covisit_stories")

    def setup(self):
        self.models = open_models(self.config)

    def process(self, _unused, profiles, covisit):
        c, d = self.config, self.config.date
        profiles = sorted(profiles, key=lambda p: p[0])
        clusters, cluster_top = cluster_rows(profiles)
        covisit = sorted(covisit)
        interest_rows = [
            {
                "user_id": u,
                "interest": None if v is None else [float(x) for x in v],
                "clicks": n,
                "recent": recent,
                "cluster_id": clusters.get(u),
                "topics": [{"label": t, "share": w} for t, w in topics.items()],
            }
            for u, v, n, recent, topics in profiles
        ]
        interest_table = pa.Table.from_pylist(interest_rows, INTEREST_OUTPUT_SCHEMA)
        yield write_partition(c.output, "models/interest", d, interest_table)
        yield write_partition(
            c.output,
            "models/covisit",
            d,
            pa.Table.from_pylist(
                [{"story_id": s, "neighbor_id": n, "readers": k} for s, nbs in covisit for n, k in nbs],
                COVISIT_OUTPUT_SCHEMA,
            ),
        )
        yield write_partition(
            c.output,
            "models/cluster",
            d,
            pa.Table.from_pylist(
                [
                    {"cluster_id": cid, "story_id": s, "clicks": k}
                    for cid, top in sorted(cluster_top.items())
                    for s, k in top
                ],
                CLUSTER_OUTPUT_SCHEMA,
            ),
        )
        self.clusters.inc(len(cluster_top))
        self.covisit.inc(len(covisit))
        if self.models is None:
            return
        m = self.models
        vectors = {p[0]: encode_embedding(p[1]) for p in profiles if p[1] is not None}
        m.write("interest", d, vectors or {"_empty": ""})
        history = {u: json.dumps({"clicks": n, "recent": r, "topics": t}) for u, _, n, r, t in profiles}
        m.write("history", d, history or {"_empty": ""})
        cluster_map = {u: cid for u, cid in clusters.items() if cid in cluster_top}
        cluster_map.update({f"c:{cid}": json.dumps(dict(top)) for cid, top in cluster_top.items()})
        m.write("cluster", d, cluster_map or {"_empty": ""})
        m.write("covisit", d, {s: json.dumps(dict(nbs)) for s, nbs in covisit} or {"_empty": ""})


def build(pipeline: beam.Pipeline, config: NightlyConfig):
    """Adds the job to ``pipeline``; returns the PCollection of written paths."""
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
    covisit = (
        profiles
        | "CoVisitPairs" >> beam.FlatMap(covisit_pairs)
        | "CountCoVisits" >> beam.CombinePerKey(sum)
        | "KeyByStory" >> beam.MapTuple(lambda ab, n: (ab[0], (ab[1], n)))
        | "GroupNeighbors" >> beam.GroupByKey()
        | "TopNeighbors" >> beam.MapTuple(top_neighbors)
    )
    return (
        pipeline
        | "Once" >> beam.Create([None])
        | "Publish"
        >> beam.ParDo(
            _PublishFn(config),
            beam.pvalue.AsList(profiles),
            beam.pvalue.AsList(covisit),
        )
    )


SPEC = JobSpec(
    name="interest_vectors",
    options_class=NightlyOptions,
    config_from_options=config_from_options,
    build=build,
    counters=("interest_users", "interest_vectors", "user_clusters", "covisit_stories"),
    description="Learn reader interest vectors, MinHash user clusters and story co-visitation "
    "(models/{interest,cluster,covisit}/date=D, Redis).",
)

if __name__ == "__main__":
    sys.exit(main(SPEC, sys.argv[1:], "python -m newsflow.jobs.interest_vectors"))
