"""Freshness decay: ``score = authority × e^(−λ·age_hours)``.

The decay rate λ (per hour) depends on the story:

* ``LAMBDA_BREAKING`` = 0.5 for a *breaking* story (more than 20 new articles in the
  last hour, from the streaming job's trending windows), so a burst rises fast and fades fast;
* otherwise a learned override, if the nightly job wrote one (Redis HASH ``Keys.topic_lambdas``, see
  :func:`newsflow.storage.ranking.RankingStore.lambda_overrides`): for the story's topic labels in
  order, first the rate of ``"topic/type"`` (the story's article type,
  :mod:`newsflow.core.ranking.article_type`; :mod:`newsflow.core.learning.decay_types`), then the topic's;
* otherwise ``LAMBDA_EVERGREEN`` = 0.02 when any topic label is an evergreen class
  (obituary, historical, explainer; see :data:`EVERGREEN_TOPICS`) or the article type is
  ``service`` (explainers, how-tos, guides);
* otherwise ``LAMBDA_DEFAULT`` = 0.1.

The age is measured from the story's earliest publish time; a publish time in the
future (clock skew) counts as age 0. Half-lives: ln 2 / λ = 1.39 h (breaking),
6.93 h (default), 34.7 h (evergreen).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

LAMBDA_BREAKING = 0.5
LAMBDA_EVERGREEN = 0.02
LAMBDA_DEFAULT = 0.1
BREAKING_THRESHOLD = 20
"""A story is breaking when it gains MORE than this many articles in the last hour."""

EVERGREEN_TOPICS = frozenset({"obituary", "obituaries", "historical", "history", "explainer", "explainers"})
"""Topic labels (lower case) whose stories decay slowly."""


def is_breaking(velocity: int, threshold: int = BREAKING_THRESHOLD) -> bool:
    """True when ``velocity`` (new articles in the last hour) is strictly above ``threshold``."""
    return int(velocity) > threshold


def is_evergreen(topics: Sequence[str], article_type: str | None = None) -> bool:
    """True for an evergreen story: a topic label in :data:`EVERGREEN_TOPICS` (any case) or a ``service``
    article (explainers, how-tos, guides)."""
    kind = str(article_type).lower() if article_type else None
    return kind == "service" or any(str(t).lower() in EVERGREEN_TOPICS for t in topics)


def lambda_for(
    topics: Sequence[str],
    breaking: bool,
    overrides: Mapping[str, float] | None = None,
    article_type: str | None = None,
) -> float:
    """Decay rate λ (per hour) for a story: :func:`decay_rate`'s λ.

    Args:
      topics: the story's topic labels, most confident first.
      breaking: whether the story is in the breaking set.
      overrides: learned λ per topic label (lower case) and per ``"topic/type"``, e.g. from
        ``Keys.topic_lambdas``.
      article_type: the story's article type (:data:`newsflow.core.ranking.article_type.ARTICLE_TYPES`),
        ``None`` when unknown.

    Returns:
      λ in 1/hours: 0.5 if breaking; else, for the first topic that has one, the override of
      ``"topic/type"`` or of the topic; else 0.02 for an evergreen topic or a ``service`` article;
      else 0.1.
    """
    return decay_rate(topics, breaking, overrides, article_type)[0]


def decay_rate(
    topics: Sequence[str],
    breaking: bool,
    overrides: Mapping[str, float] | None = None,
    article_type: str | None = None,
) -> tuple[float, str, str]:
    """λ (1/hours) for a story and where it comes from (arguments as :func:`lambda_for`).

    Returns:
      ``(λ, source, group)``: source ``"breaking"``, ``"learned"`` (group: the override key used,
      ``"topic/type"`` or ``"topic"``), ``"evergreen"`` or ``"default"`` (group ``""`` unless learned).
    """
    if breaking:
        return LAMBDA_BREAKING, "breaking", ""
    labels = [str(t).lower() for t in topics]
    kind = str(article_type).lower() if article_type else None
    if overrides:
        for label in labels:
            if kind is not None and f"{label}/{kind}" in overrides:
                return float(overrides[f"{label}/{kind}"]), "learned", f"{label}/{kind}"
            if label in overrides:
                return float(overrides[label]), "learned", label
    if is_evergreen(labels, kind):
        return LAMBDA_EVERGREEN, "evergreen", ""
    return LAMBDA_DEFAULT, "default", ""


def decay_score(authority: float, earliest_time: float, now: float, lam: float) -> float:
    """One story's score ``authority × e^(−λ·age_hours)``.

    Args:
      authority: story authority in [0, 1].
      earliest_time: earliest publish time, UTC epoch seconds.
      now: scoring time, UTC epoch seconds.
      lam: decay rate λ, 1/hours.

    Returns:
      The score (float, ≥ 0 for authority ≥ 0).
    """
    age_hours = max(0.0, (float(now) - float(earliest_time)) / 3600.0)
    return float(authority) * math.exp(-float(lam) * age_hours)


def decay_scores(authority: np.ndarray, earliest_time: np.ndarray, now: float, lam: np.ndarray) -> np.ndarray:
    """Vectorized :func:`decay_score`.

    Args:
      authority: shape (n,), float, in [0, 1].
      earliest_time: shape (n,), float, UTC epoch seconds.
      now: UTC epoch seconds.
      lam: shape (n,) or scalar, 1/hours.

    Returns:
      float64 array of shape (n,).
    """
    authority = np.asarray(authority, dtype=np.float64)
    age_hours = np.maximum(0.0, (float(now) - np.asarray(earliest_time, dtype=np.float64)) / 3600.0)
    return authority * np.exp(-np.asarray(lam, dtype=np.float64) * age_hours)
