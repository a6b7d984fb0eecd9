"""Nightly job: ranking weights, a logistic model of click given impression.

Input: the events of the :data:`WEIGHTS_DAYS` days ending at the night, the newest story snapshots,
the night's decay output and, for each day's events, the interest and co-visitation outputs of the
night *before that day* (the models that were serving when the impressions were shown, so a day's
clicks never explain themselves). One day of a small site is often too little to tell a fit from
the defaults (``newsflow simulate-readers``: 12,000 impressions a day, the first significant fit came on
the fourth night); the window triples the rows while every row keeps the features it was served with.
Each impression is one row (clicked when a click on the same story and surface answered it within 30 minutes, see
:func:`newsflow.jobs.decay_rates.impression_outcomes`); its features (:data:`newsflow.core.learning.weights.FEATURES`):

* ``authority``: story authority; ``freshness``: e^(−λ·age_h) at the impression, λ from the
  night's sufficient decay estimates (per topic and article type), else the fixed classes
  (:func:`newsflow.core.ranking.decay.lambda_for`);
* ``interest``: cosine of the reader's previous-night interest vector and the story embedding (0 without);
* ``topic_interest``: the reader's previous-night click-based topic interest in the story's labels,
  :func:`newsflow.core.ranking.personalize.topic_affinity` (what serving computes; 0 without);
* ``covisitation``: ``c / (1 + c)`` with ``c`` the sum of previous-night co-visitation counts between
  the story and the reader's recent clicks;
* ``follows`` and ``breaking``: 0 (follows live only in Redis and the breaking flag is not in the
  story snapshot; the fitted weight is then 0 and serving keeps the defaults' boosts);
* ``position``: log1p(0-based position).

Every per-reader input is keyed: each day's impression outcomes are joined by reader (``CoGroupByKey``) with
the previous night's ``interest`` rows read from Parquet in the pipeline; the co-visitation counts (per
story pair) and the night's λ overrides are side inputs read from Parquet in the pipeline. The fit takes
at most :data:`MAX_FIT_ROWS` rows (a deterministic sample above it, :func:`sample_key`).

Fit: :func:`newsflow.core.learning.weights.fit_weights` (scikit-learn logistic regression, time-ordered
held-out within-reader AUC; the defaults when data is thin, when the fit's held-out within-reader AUC
does not beat the defaults' on the same rows, or when no reader had a previous-night interest vector,
since a fit would then weigh interest 0 and turn personalization off). Outputs (replaced for the date): Parquet
``<output>/models/weights/date=D/`` (one row per feature plus the intercept) and Redis
``Keys.model("weights", D)``.

Run::

    python -m newsflow.jobs.ranking_weights [--date D] [--output ROOT] [launcher flags]
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import sys

import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam.metrics import Metrics

from newsflow.core.learning.weights import FEATURES, defaults, fit_weights
from newsflow.core.ranking.decay import lambda_for
from newsflow.core.ranking.personalize import topic_affinity
from newsflow.jobs.decay_rates import impression_outcomes, override_key
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

NAMESPACE = "newsflow.jobs.ranking_weights"

WEIGHTS_OUTPUT_SCHEMA = pa.schema(
    [
        pa.field("name", pa.string(), nullable=False),
        pa.field("weight", pa.float64()),
        pa.field("learned", pa.bool_()),
        pa.field("auc", pa.float64()),
        pa.field("default_auc", pa.float64()),
        pa.field("n_train", pa.int64()),
        pa.field("n_holdout", pa.int64()),
        pa.field("reason", pa.string()),
    ]
)


def _previous(date: str) -> str:
    return (dt.date.fromisoformat(date) - dt.timedelta(days=1)).isoformat()


WEIGHTS_DAYS = 3
"""Days of events (ending at the night's date) the fit uses."""


MAX_FIT_ROWS = 200_000
"""Most impression rows the fit sees: above it, a deterministic sample (the rows with the largest
:func:`sample_key`), so the fit's memory does not grow with the readers."""


def sample_key(row) -> bytes:
    """A feature row's stable sampling key (BLAKE2b of its repr: the same rows win on every runner)."""
    return hashlib.blake2b(repr(row).encode(), digest_size=8).digest()


def model_files(config: NightlyConfig, date: str) -> dict[str, list[str]]:
    """The Parquet files the rows of ``date`` are featurised from: the night's ``decay`` output and the
    ``interest`` and ``covisit`` outputs of the night before ``date`` (the models serving that day)."""
    prev = _previous(date)
    return {
        "decay": partition_files(config.output, "models/decay", [config.date]),
        "interest": partition_files(config.output, "models/interest", [prev]),
        "covisit": partition_files(config.output, "models/covisit", [prev]),
    }


def _lambda_entry(row: dict) -> list:
    return [(override_key(row), row["lambda_per_hour"])] if row["sufficient"] else []


def _reader_model(row: dict) -> tuple:
    """An interest output row -> ``(reader, (interest tuple or None, recent tuple, {topic: share}))``."""
    topics = {str(t["label"]).lower(): float(t["share"]) for t in row.get("topics") or []}
    interest = tuple(row["interest"]) if row["interest"] is not None else None
    return row["user_id"], (interest, tuple(row["recent"] or ()), topics)


def _featurise(element, stories, lambdas, covisit) -> list:
    """``(reader, {"outcome": [outcome], "model": [previous-night model]})`` -> the reader's feature rows."""
    user, grouped = element
    ctx = {"lambdas": lambdas, "interest": {}, "recent": {}, "covisit": covisit, "topics": {}}
    if grouped["model"]:
        interest, recent, topics = grouped["model"][0]
        if interest is not None:
            ctx["interest"][user] = interest
        ctx["recent"][user], ctx["topics"][user] = recent, topics
    return [row for outcome in grouped["outcome"] for row in features_of((user, outcome), stories, ctx)]


class _ReadParquet(beam.PTransform):
    """Parquet files -> their rows (dicts); an empty PCollection without files."""

    def __init__(self, files: list[str]):
        super().__init__()
        self.files = files

    def expand(self, pbegin):
        return pbegin | "Files" >> beam.Create(self.files) | "Rows" >> beam.io.ReadAllFromParquet()


def features_of(outcome_user, stories, ctx) -> list:
    """``(user, (story, first impression time, position, clicked))`` -> ``[(t, features, clicked, user)]``
    (empty when the story has no snapshot)."""
    user, (story, t, position, clicked) = outcome_user
    # ctx: {"lambdas": {override key: λ}, "interest" / "recent" / "topics": {reader: ...}, "covisit": {(a, b): n}}
    info = stories.get(story)
    if info is None:
        return []
    age = max(0.0, (t - info.earliest_time) / 3600.0)
    lam = lambda_for(info.topics, False, ctx["lambdas"], article_type=info.article_type)
    interest = 0.0
    u = ctx["interest"].get(user)
    if u is not None and info.embedding is not None:
        a, b = np.asarray(u, dtype=np.float64), np.asarray(info.embedding, dtype=np.float64)
        na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
        interest = float(a @ b / (na * nb)) if na > 0 and nb > 0 else 0.0
    c = float(sum(ctx["covisit"].get((r, story), 0) for r in ctx["recent"].get(user, ())))
    row = {
        "authority": info.authority,
        "freshness": math.exp(-lam * age),
        "interest": interest,
        "covisitation": c / (1.0 + c),
        "follows": 0.0,
        "breaking": 0.0,
        "position": math.log1p(max(0, position)),
        "topic_interest": topic_affinity(info.topics, ctx["topics"].get(user, {})),
    }
    return [(t, [row[f] for f in FEATURES], clicked, user)]


def fit_rows(rows: list) -> list[dict]:
    """Feature rows ``(t, features, clicked[, user])`` -> output rows (:data:`WEIGHTS_OUTPUT_SCHEMA`): one
    per feature + ``_intercept``. With the reader given, the fit is judged by within-reader AUC
    (:func:`newsflow.core.learning.weights.fit_weights`, ``groups``)."""
    rows = sorted(rows, key=lambda r: (r[0], r[1], r[2], *r[3:]))
    x = np.asarray([r[1] for r in rows], dtype=np.float64).reshape(-1, len(FEATURES))
    personal = x[:, [FEATURES.index("interest"), FEATURES.index("topic_interest")]] if len(rows) else x
    if len(rows) and float(personal.std(axis=0).max()) == 0.0:
        # no previous-night interest vectors (first night, or none matched): a fit would give interest
        # weight 0 and switch personalization off, so the defaults stay
        w = defaults("no interest signal in the training rows (no previous-night interest model)")
    else:
        groups = [r[3] for r in rows] if rows and all(len(r) > 3 for r in rows) else None
        w = fit_weights(x, [r[2] for r in rows], times=[r[0] for r in rows], groups=groups)
    common = {"learned": w.learned, "auc": w.auc, "default_auc": w.default_auc, "n_train": w.n_train}
    common.update(n_holdout=w.n_holdout, reason=w.reason)
    out = [dict(common, name=f, weight=float(w.weights[f])) for f in FEATURES]
    out.append(dict(common, name="_intercept", weight=float(w.intercept)))
    return out


class _PublishWeightsFn(beam.DoFn):
    """rows -> Parquet partition + the versioned Redis hash."""

    def __init__(self, config: NightlyConfig):
        self.config = config
        self.learned = Metrics.counter(NAMESPACE, "weights_learned")

    def setup(self):
        self.models = open_models(self.config)

    def process(self, rows):
        path = write_partition(
            self.config.output, "models/weights", self.config.date, pa.Table.from_pylist(rows, WEIGHTS_OUTPUT_SCHEMA)
        )
        learned = bool(rows[0]["learned"])
        if self.models is not None:
            mapping = {r["name"]: repr(r["weight"]) for r in rows}
            mapping["_learned"] = "1" if learned else "0"
            mapping["_auc"] = json.dumps(rows[0]["auc"])
            self.models.write("weights", self.config.date, mapping)
        self.learned.inc(int(learned))
        yield path


def build(pipeline: beam.Pipeline, config: NightlyConfig):
    """Adds the job to ``pipeline``; returns the PCollection of the written path."""
    stories = pipeline | "ReadStories" >> ReadStories(
        partition_files(config.output, "stories", config.dates(config.history_days))
    )
    story_map = beam.pvalue.AsDict(stories)
    lambdas = beam.pvalue.AsDict(
        pipeline
        | "ReadDecay" >> _ReadParquet(model_files(config, config.date)["decay"])
        | "SufficientLambdas" >> beam.FlatMap(_lambda_entry)
    )
    per_day = []
    dates = config.dates(WEIGHTS_DAYS)
    for back, date in zip(range(len(dates) - 1, -1, -1), dates, strict=True):
        files = partition_files(config.output, "events", [date])
        if not files and date != config.date:
            continue
        day = f"[night-{back}]"  # labels relative to the night, the same every night
        models = model_files(config, date)
        covisit = beam.pvalue.AsDict(
            pipeline
            | f"ReadCoVisit{day}" >> _ReadParquet(models["covisit"])
            | f"CoVisitPairs{day}" >> beam.Map(lambda r: ((r["story_id"], r["neighbor_id"]), r["readers"]))
        )
        outcomes = (
            pipeline
            | f"ReadEvents{day}" >> ReadEvents(files)
            | f"ImpressionsAndClicks{day}" >> beam.Filter(lambda e: e.type in ("impression", "click"))
            | f"KeyByReaderStory{day}" >> beam.Map(lambda e: ((e.user_id, e.story_id), e))
            | f"GroupByReaderStory{day}" >> beam.GroupByKey()
            | f"ImpressionOutcomes{day}"
            >> beam.FlatMapTuple(lambda k, es: [(k[0], o) for o in impression_outcomes(k, es)])
        )
        readers = (
            pipeline
            | f"ReadInterest{day}" >> _ReadParquet(models["interest"])
            | f"KeyModelByReader{day}" >> (beam.Map(_reader_model))
        )
        per_day.append(
            {"outcome": outcomes, "model": readers}
            | f"JoinReaderModels{day}" >> beam.CoGroupByKey()
            | f"Features{day}" >> beam.FlatMap(_featurise, story_map, lambdas, covisit)
        )
    return (
        per_day
        | "AllDays" >> beam.Flatten()
        | "SampleRows" >> beam.combiners.Top.Of(MAX_FIT_ROWS, key=sample_key)
        | "FitWeights" >> beam.Map(fit_rows)
        | "PublishWeights" >> beam.ParDo(_PublishWeightsFn(config))
    )


SPEC = JobSpec(
    name="ranking_weights",
    options_class=NightlyOptions,
    config_from_options=config_from_options,
    build=build,
    counters=("weights_learned",),
    description="Fit the ranking weights (logistic click model; defaults when data is thin) "
    "(models/weights/date=D, Redis).",
)

if __name__ == "__main__":
    sys.exit(main(SPEC, sys.argv[1:], "python -m newsflow.jobs.ranking_weights"))
