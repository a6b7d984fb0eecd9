"""Freshness decay λ per topic *and* article type, shrunk toward the topic's rate.

A live blog, an opinion piece and a how-to of one topic age at different speeds
(:mod:`newsflow.core.ranking.article_type`). :func:`fit_decay_by_type` fits the two-level model:

1. topics: :func:`newsflow.core.learning.decay.fit_decay` on the topic groups (position bias b(p) estimated
   jointly, topic λ shrunk toward the global rate);
2. cells ``(topic, type)``: with the topic fit's b(p) held fixed, each cell's λ̂ and se by the same
   profile Poisson likelihood (the cell's own attractiveness c profiled out, so a type that is clicked
   more or less often does not bias its rate), then empirical-Bayes shrinkage of log λ̂ toward the
   topic's shrunk log λ: prior log λ_cell ~ N(log λ_topic, τ²) with τ² by DerSimonian–Laird over the
   cells' deviations from their topic (floored at ``PRIOR_SD_MIN``², ``PRIOR_SD_DEFAULT``² with fewer
   than three measured cells). Weight w = τ²/(τ² + s²) (s = se/λ̂); posterior
   log λ = w·log λ̂ + (1 − w)·log λ_topic with variance w·s² + (1 − w)²·sd_topic² (the topic's own
   uncertainty carried along); 95 % interval exp(post ± 1.96·sd). A cell without clicks gets the
   topic's rate, w = 0, and sd² = τ² + sd_topic².

Where the data is thin the cell therefore *is* its topic's rate (and the topic, when thin, the global
rate). A cell's data suffices under the same rule as a topic (:data:`~newsflow.core.learning.decay.MIN_CLICKS`
clicks and relative se ≤ :data:`~newsflow.core.learning.decay.MAX_RELATIVE_SE`); only sufficient cells become
overrides ``"topic/type"`` (:func:`typed_lambda_overrides`), which
:func:`newsflow.core.ranking.decay.lambda_for` prefers to the topic's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from newsflow.core.learning.decay import (
    MAX_POSITION,
    MAX_RELATIVE_SE,
    MIN_CLICKS,
    PRIOR_SD_DEFAULT,
    PRIOR_SD_MIN,
    Z95,
    DecayEstimate,
    DecayFit,
    _dersimonian_laird,
    _solve_lambda,
    fit_decay,
)

TYPE_SEPARATOR = "/"


def cell_key(topic: str, kind: str) -> str:
    """The override key of a (topic, article type) cell: ``"topic/type"``."""
    return f"{topic}{TYPE_SEPARATOR}{kind}"


class TypedDecayFit(NamedTuple):
    """Result of :func:`fit_decay_by_type`.

    Attributes:
      topics: the topic-level :class:`~newsflow.core.learning.decay.DecayFit` (its position bias is used by
        the cells).
      cells: ``{(topic, type): DecayEstimate}`` (``group`` is ``"topic/type"``), sorted by key.
      prior_sd: τ, the sd of a cell's log λ around its topic's.
    """

    topics: DecayFit
    cells: dict
    prior_sd: float


def _log_sd(e: DecayEstimate) -> float:
    """sd of log λ implied by an estimate's 95 % interval."""
    if e.ci_low > 0 and e.ci_high > 0:
        return (math.log(e.ci_high) - math.log(e.ci_low)) / (2 * Z95)
    return PRIOR_SD_DEFAULT


def fit_decay_by_type(
    topics: Sequence[str],
    types: Sequence[str],
    age_hours: Sequence[float],
    clicks: Sequence[float],
    impressions: Sequence[float] | None = None,
    positions: Sequence[int] | None = None,
    iterations: int = 15,
) -> TypedDecayFit:
    """Fits λ per topic and per (topic, article type) cell (model in the module docstring).

    Args:
      topics: shape (n,), topic label per row.
      types: shape (n,), article type per row (:data:`newsflow.core.ranking.article_type.ARTICLE_TYPES`).
      age_hours: shape (n,), story age at impression in hours (negatives count as 0).
      clicks: shape (n,), clicks of the row.
      impressions: shape (n,), impressions of the row (default 1 each).
      positions: shape (n,), 0-based display positions (``None``: no position bias).
      iterations: alternating updates of the topic-level fit.

    Returns:
      A :class:`TypedDecayFit`.

    Raises:
      ValueError: ``types`` and ``topics`` differ in length.
    """
    t_keys = [str(t) for t in topics]
    k_keys = [str(k) for k in types]
    n = len(t_keys)
    if len(k_keys) != n:
        raise ValueError(f"topics and types differ in length: {n} and {len(k_keys)}")
    topic_fit = fit_decay(t_keys, age_hours, clicks, impressions, positions, iterations=iterations)
    ages = np.maximum(np.asarray(age_hours, dtype=np.float64).reshape(n), 0.0)
    ck = np.asarray(clicks, dtype=np.float64).reshape(n)
    imp = np.ones(n) if impressions is None else np.asarray(impressions, dtype=np.float64).reshape(n)
    if positions is None:
        offsets = imp
    else:
        pos = np.clip(np.asarray(positions, dtype=np.int64).reshape(n), 0, MAX_POSITION)
        offsets = imp * topic_fit.position_bias[pos]
    names = sorted(set(zip(t_keys, k_keys, strict=True)))
    index = {c: i for i, c in enumerate(names)}
    ci = np.fromiter((index[c] for c in zip(t_keys, k_keys, strict=True)), dtype=np.int64, count=n)
    mle, se = np.full(len(names), np.nan), np.full(len(names), np.nan)
    for i in range(len(names)):
        rows = np.flatnonzero(ci == i)
        mle[i], se[i] = _solve_lambda(rows, ci, ages, offsets, ck, len(names))
    prior = np.array([math.log(topic_fit.groups[t].lambda_per_hour) for t, _ in names])
    prior_sd = np.array([_log_sd(topic_fit.groups[t]) for t, _ in names])
    ok = np.isfinite(mle) & np.isfinite(se) & (se > 0) & (mle > 0)
    s_rel = np.where(ok, se / np.where(mle > 0, mle, 1.0), np.inf)
    if ok.sum() >= 3:
        tau2 = max(_dersimonian_laird(np.log(mle[ok]) - prior[ok], s_rel[ok]), PRIOR_SD_MIN**2)
    else:
        tau2 = PRIOR_SD_DEFAULT**2
    n_imp = np.bincount(ci, imp, len(names))
    n_clk = np.bincount(ci, ck, len(names))
    cells = {}
    for i, (topic, kind) in enumerate(names):
        if ok[i]:
            w = tau2 / (tau2 + s_rel[i] ** 2)
            post = w * math.log(mle[i]) + (1 - w) * prior[i]
            sd = math.sqrt(w * s_rel[i] ** 2 + (1 - w) ** 2 * prior_sd[i] ** 2)
            sufficient = bool(n_clk[i] >= MIN_CLICKS and s_rel[i] <= MAX_RELATIVE_SE)
        else:
            w, post, sd, sufficient = 0.0, prior[i], math.sqrt(tau2 + prior_sd[i] ** 2), False
        cells[(topic, kind)] = DecayEstimate(
            group=cell_key(topic, kind),
            lambda_per_hour=math.exp(post),
            ci_low=math.exp(post - Z95 * sd),
            ci_high=math.exp(post + Z95 * sd),
            n_impressions=float(n_imp[i]),
            n_clicks=float(n_clk[i]),
            shrinkage_weight=float(w),
            sufficient=sufficient,
            mle_per_hour=float(mle[i]),
            se_per_hour=float(se[i]),
        )
    return TypedDecayFit(topic_fit, cells, math.sqrt(tau2))


def typed_lambda_overrides(fit: TypedDecayFit) -> dict[str, float]:
    """``{topic: λ}`` for sufficient topics plus ``{"topic/type": λ}`` for sufficient cells (the
    decay model's content; :func:`newsflow.core.ranking.decay.lambda_for` reads both)."""
    out = {g: e.lambda_per_hour for g, e in fit.topics.groups.items() if e.sufficient}
    out.update({e.group: e.lambda_per_hour for e in fit.cells.values() if e.sufficient})
    return out
