"""Nightly job: freshness decay λ per topic and per (topic, article type), learned from impressions and clicks.

Input: the events of the ``--decay_days`` days ending at ``--date`` and the newest story
snapshots (:mod:`newsflow.jobs.nightly_common`). Each impression is one observation: story age at the
impression (hours since the story's first-seen time), its position, and whether a click on the same
story and surface answered it within 30 minutes (:func:`impression_outcomes`). Observations are
aggregated by (topic, age to 0.25 h, position) and fitted by
:func:`newsflow.core.learning.decay.fit_decay` (Poisson maximum likelihood with joint position bias,
empirical-Bayes shrinkage toward the global rate, 95 % intervals; its docstring has the model and
sources). The group is the story's first topic label.

Outputs (each replaced for the date):

* ``<output>/models/decay/date=D/part-00000.parquet``: one row per topic (``article_type`` null) and
  one per (topic, type) cell (λ, interval, counts, shrinkage weight, whether it suffices) plus the
  global row ``"*"``;
* Redis ``Keys.model("decay", D)``: ``topic`` -> λ and ``topic/type`` -> λ for the topics and cells
  whose data suffices (the others keep their topic's rate or the fixed classes of
  :mod:`newsflow.core.ranking.decay`); served after ``newsflow nightly`` switches.

Run::

    python -m newsflow.jobs.decay_rates [--date D] [--output ROOT] [launcher flags]
"""

from __future__ import annotations

import sys

import apache_beam as beam
import pyarrow as pa
from apache_beam.metrics import Metrics

from newsflow.core.learning.decay import MAX_POSITION
from newsflow.core.learning.decay_types import cell_key, fit_decay_by_type
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

NAMESPACE = "newsflow.jobs.decay_rates"
AGE_BUCKET_HOURS = 0.25
UNTOPICAL = "_none"
"""Group of stories without a topic label."""

DECAY_OUTPUT_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string(), nullable=False),
        pa.field("article_type", pa.string()),
        pa.field("lambda_per_hour", pa.float64()),
        pa.field("ci_low", pa.float64()),
        pa.field("ci_high", pa.float64()),
        pa.field("mle_per_hour", pa.float64()),
        pa.field("se_per_hour", pa.float64()),
        pa.field("impressions", pa.float64()),
        pa.field("clicks", pa.float64()),
        pa.field("shrinkage_weight", pa.float64()),
        pa.field("sufficient", pa.bool_()),
    ]
)


CLICK_WINDOW_SECONDS = 1800.0
"""A click answers an impression of the same story on the same surface at most this long after it."""


def impression_outcomes(user_story, events):
    """``((user, story), events)`` -> one ``(story, impression time, position, clicked)`` per impression.

    An impression is clicked when a click on the same story and surface follows it within
    :data:`CLICK_WINDOW_SECONDS` (each click answers only the latest impression before it, so a story
    shown six times and clicked once counts one click in six impressions). Clicks without a preceding
    impression (a shared link) have no exposure and are left out.
    """
    _, story = user_story
    imps = sorted(
        (e.event_time, e.position if e.position is not None else 0, e.surface) for e in events if e.type == "impression"
    )
    answered = set()
    clicks = sorted((e.event_time, e.surface) for e in events if e.type == "click")
    for t_click, surface in clicks:
        best = None
        for i, (t, _, s) in enumerate(imps):
            if s == surface and t <= t_click <= t + CLICK_WINDOW_SECONDS:
                best = i  # the latest qualifying impression (imps sorted by time)
        if best is not None:
            answered.add(best)
    for i, (t, position, _) in enumerate(imps):
        yield story, t, int(position), int(i in answered)


def _group_outcome(outcome, stories):
    story, t, position, clicked = outcome
    info = stories.get(story)
    if info is None:
        return
    age = max(0.0, (t - info.earliest_time) / 3600.0)
    group = info.topics[0] if info.topics else UNTOPICAL
    bucket = round(age / AGE_BUCKET_HOURS) * AGE_BUCKET_HOURS
    yield (group, info.article_type, bucket, min(position, MAX_POSITION)), (1, clicked)


def _sum_pairs(pairs):
    imps = clicks = 0
    for a, b in pairs:
        imps += a
        clicks += b
    return imps, clicks


def _estimate_row(topic: str, kind: str | None, e) -> dict:
    return {
        "topic": topic,
        "article_type": kind,
        "lambda_per_hour": e.lambda_per_hour,
        "ci_low": e.ci_low,
        "ci_high": e.ci_high,
        "mle_per_hour": e.mle_per_hour,
        "se_per_hour": e.se_per_hour,
        "impressions": e.n_impressions,
        "clicks": e.n_clicks,
        "shrinkage_weight": e.shrinkage_weight,
        "sufficient": bool(e.sufficient),
    }


def override_key(row: dict) -> str:
    """The decay model key of an output row: ``topic``, or ``topic/type`` for a type row."""
    return row["topic"] if not row.get("article_type") else cell_key(row["topic"], row["article_type"])


def fit_rows(cells: list) -> list[dict]:
    """Aggregated cells ``((topic, type, age h, position), (impressions, clicks))`` -> output rows
    (:data:`DECAY_OUTPUT_SCHEMA`): one per topic, one per (topic, type) and the global row ``"*"``;
    none without cells."""
    if not cells:
        return []
    cells = sorted(cells)
    fit = fit_decay_by_type(
        topics=[c[0][0] for c in cells],
        types=[c[0][1] for c in cells],
        age_hours=[c[0][2] for c in cells],
        clicks=[c[1][1] for c in cells],
        impressions=[c[1][0] for c in cells],
        positions=[c[0][3] for c in cells],
    )
    rows = [_estimate_row(g, None, e) for g, e in sorted(fit.topics.groups.items())]
    rows += [_estimate_row(t, k, e) for (t, k), e in sorted(fit.cells.items())]
    fit = fit.topics
    total_i = float(sum(c[1][0] for c in cells))
    total_c = float(sum(c[1][1] for c in cells))
    rows.append(
        {
            "topic": "*",
            "article_type": None,
            "lambda_per_hour": fit.global_lambda,
            "ci_low": None,
            "ci_high": None,
            "mle_per_hour": fit.global_lambda,
            "se_per_hour": fit.global_se,
            "impressions": total_i,
            "clicks": total_c,
            "shrinkage_weight": None,
            "sufficient": False,
        }
    )
    return rows


class _PublishDecayFn(beam.DoFn):
    """rows -> Parquet partition + the versioned Redis hash (sufficient topics only)."""

    def __init__(self, config: NightlyConfig):
        self.config = config
        self.topics = Metrics.counter(NAMESPACE, "decay_topics_fitted")
        self.overrides = Metrics.counter(NAMESPACE, "decay_overrides_written")

    def setup(self):
        self.models = open_models(self.config)

    def process(self, rows):
        path = write_partition(
            self.config.output, "models/decay", self.config.date, pa.Table.from_pylist(rows, DECAY_OUTPUT_SCHEMA)
        )
        overrides = {
            override_key(r): repr(float(r["lambda_per_hour"]))
            for r in rows
            if r["sufficient"] and r["topic"] != UNTOPICAL
        }
        if self.models is not None:
            self.models.write("decay", self.config.date, overrides or {"_empty": "1"})
        self.topics.inc(max(0, len(rows) - 1))
        self.overrides.inc(len(overrides))
        yield path


def build(pipeline: beam.Pipeline, config: NightlyConfig):
    """Adds the decay job to ``pipeline``; returns the PCollection of the written path."""
    event_files = partition_files(config.output, "events", config.dates(config.decay_days))
    events = pipeline | "ReadEvents" >> ReadEvents(event_files)
    stories = pipeline | "ReadStories" >> ReadStories(
        partition_files(config.output, "stories", config.dates(config.history_days))
    )
    cells = (
        events
        | "ImpressionsAndClicks" >> beam.Filter(lambda e: e.type in ("impression", "click"))
        | "KeyByReaderStory" >> beam.Map(lambda e: ((e.user_id, e.story_id), e))
        | "GroupByReaderStory" >> beam.GroupByKey()
        | "ImpressionOutcomes" >> beam.FlatMapTuple(impression_outcomes)
        | "ToTopicAgePosition" >> beam.FlatMap(_group_outcome, beam.pvalue.AsDict(stories))
        | "SumCells" >> beam.CombinePerKey(_sum_pairs)
        | "CollectCells" >> beam.combiners.ToList()
    )
    return cells | "FitDecay" >> beam.Map(fit_rows) | "PublishDecay" >> beam.ParDo(_PublishDecayFn(config))


SPEC = JobSpec(
    name="decay_rates",
    options_class=NightlyOptions,
    config_from_options=config_from_options,
    build=build,
    counters=("decay_topics_fitted", "decay_overrides_written"),
    description="Learn freshness decay λ per topic and article type from impressions and clicks "
    "(models/decay/date=D, Redis).",
)

if __name__ == "__main__":
    sys.exit(main(SPEC, sys.argv[1:], "python -m newsflow.jobs.decay_rates"))
