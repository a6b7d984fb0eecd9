"""Personal relevance: a documented blend of freshness score, trending velocity and interest.

For candidate ``i`` with decayed score ``s_i`` (see :mod:`newsflow.ranking.decay`),
velocity ``v_i`` (new articles in the latest trending window) and unit embedding ``e_i``,
and a reader with ``c`` clicks and interest vector ``u``::

    h        = min(c, 20) / 20                      # history weight, 0 → 1 over ~20 clicks
    base_i   = (1 − τ) · s_i / max(s) + τ · v_i / max(v),   τ = 0.5 · (1 − h)
    rel_i    = (1 − w) · base_i + w · max(0, cos(u, e_i)),  w = 0.6 · h
    rel_i   += 0.2  if the story has a followed topic or its representative source is followed

So a cold-start reader (no clicks, no interest vector) is ranked half by freshness score
and half by trending velocity; each click shifts weight towards the interest vector until,
at 20 clicks, relevance is 0.4 · score + 0.6 · interest. ``max(s)`` / ``max(v)`` are taken
over the candidate set (a zero max gives zero for that term). Without an interest vector
``w`` is 0 whatever the click count.

Blocks remove a candidate outright: any of its topics is a blocked topic, or its
representative source domain is a blocked source. Follows apply from the first request
(the boost above, plus :mod:`newsflow.ranking.feeds` adds followed topics' pools to the
candidates).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from schemas import UserProfile

HISTORY_CLICKS = 20
"""Clicks after which the interest vector has its full weight."""
MAX_INTEREST_WEIGHT = 0.6
COLD_VELOCITY_WEIGHT = 0.5
FOLLOW_BOOST = 0.2


def history_weight(clicks: int) -> float:
    """``min(clicks, 20) / 20`` in [0, 1]."""
    return min(max(int(clicks), 0), HISTORY_CLICKS) / HISTORY_CLICKS


def _unit_max_norm(x: np.ndarray) -> np.ndarray:
    m = float(np.max(x)) if x.size else 0.0
    return x / m if m > 0 else np.zeros_like(x)


def blocked_mask(topics: Sequence[Sequence[str]], sources: Sequence[str], profile: UserProfile) -> np.ndarray:
    """Boolean mask, shape (n,): True where the reader blocked the story's topic or source."""
    n = len(sources)
    if not profile.block_topics and not profile.block_sources:
        return np.zeros(n, dtype=bool)
    return np.fromiter(
        (
            (src.lower() in profile.block_sources) or any(str(t).lower() in profile.block_topics for t in tps)
            for tps, src in zip(topics, sources, strict=False)
        ),
        dtype=bool,
        count=n,
    )


def followed_mask(topics: Sequence[Sequence[str]], sources: Sequence[str], profile: UserProfile) -> np.ndarray:
    """Boolean mask, shape (n,): True where a topic or the source is followed."""
    n = len(sources)
    if not profile.follow_topics and not profile.follow_sources:
        return np.zeros(n, dtype=bool)
    return np.fromiter(
        (
            (src.lower() in profile.follow_sources) or any(str(t).lower() in profile.follow_topics for t in tps)
            for tps, src in zip(topics, sources, strict=False)
        ),
        dtype=bool,
        count=n,
    )


def personal_relevance(
    scores: np.ndarray,
    velocity: np.ndarray,
    embeddings: np.ndarray,
    topics: Sequence[Sequence[str]],
    sources: Sequence[str],
    profile: UserProfile,
) -> np.ndarray:
    """Relevance of each candidate for ``profile`` (formula in the module docstring).

    Args:
      scores: shape (n,), decayed scores (≥ 0).
      velocity: shape (n,), new articles in the latest trending window (≥ 0).
      embeddings: shape (n, 128), unit rows (zero rows allowed).
      topics: per candidate, its topic labels.
      sources: per candidate, its representative source domain.
      profile: the reader.

    Returns:
      float64 array of shape (n,). Blocked candidates are NOT removed here; use
      :func:`blocked_mask`.
    """
    scores = np.asarray(scores, dtype=np.float64)
    velocity = np.asarray(velocity, dtype=np.float64)
    h = history_weight(profile.clicks)
    tau = COLD_VELOCITY_WEIGHT * (1.0 - h)
    base = (1.0 - tau) * _unit_max_norm(scores) + tau * _unit_max_norm(velocity)
    rel = base
    if profile.interest is not None and h > 0:
        u = np.asarray(profile.interest, dtype=np.float64)
        norm = float(np.linalg.norm(u))
        if norm > 0:
            cos = np.asarray(embeddings, dtype=np.float64) @ (u / norm)
            w = MAX_INTEREST_WEIGHT * h
            rel = (1.0 - w) * base + w * np.maximum(cos, 0.0)
    return rel + FOLLOW_BOOST * followed_mask(topics, sources, profile)
