"""Personal relevance: a documented blend of freshness score, trending velocity and interest.

For candidate ``i`` with decayed score ``s_i`` (see :mod:`newsflow.core.ranking.decay`),
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

**Learned models** (the nightly jobs, switched in atomically by ``newsflow nightly``; read with
:func:`load_learned`, see :mod:`newsflow.storage.models`) change this as follows, each falling back
to the above when its model is absent:

* the reader's interest vector and click count come from the current ``interest``/``history``
  models when they have the reader (else from the profile hash ``Keys.user``);
* with click-based topic interests (the ``history`` model's exposure-normalised interests ``p_u(t)``,
  after Liu et al., IUI 2010, :mod:`newsflow.core.learning.topic_interest`), the interest term becomes
  ``0.5 · max(0, cos) + 0.5 · max_t p_u(t) / max p_u`` over the story's topics (:func:`topic_affinity`);
* a collaborative term ``k_i = max(cov_i / max(cov), clu_i / max(clu))`` joins the blend, where
  ``cov_i`` sums the co-visitation counts between story ``i`` and the reader's recent clicks and
  ``clu_i`` counts clicks on ``i`` by the reader's MinHash cluster (Das et al., WWW 2007):
  ``rel_i = (1 − w − c) · base_i + w · max(0, cos) + c · k_i`` with ``c = 0.2 · h`` when the reader
  has any collaborative signal (else ``c = 0``);
* when the current ``weights`` model was learned (not the defaults), relevance is its click
  probability instead: ``σ(b + w_a·authority + w_f·e^(−λ·age) + w_i·cos + w_t·topic + w_c·k +
  w_fo·follows + w_b·breaking)`` (position 0), plus the follow boost, where ``topic`` is
  :func:`topic_affinity` (the nightly ``ranking_weights`` job computes every feature the same way).

Each personal feed item carries ``why``: the signals that placed it (:func:`personal_signals`).

Blocks remove a candidate outright: any of its topics is a blocked topic, or its
representative source domain is a blocked source. Follows apply from the first request
(the boost above, plus :mod:`newsflow.core.ranking.feeds` adds followed topics' pools to the
candidates).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from newsflow.schemas import UserProfile

HISTORY_CLICKS = 20
"""Clicks after which the interest vector has its full weight."""
MAX_INTEREST_WEIGHT = 0.6
COLD_VELOCITY_WEIGHT = 0.5
FOLLOW_BOOST = 0.2
MAX_COLLABORATIVE_WEIGHT = 0.2
WEIGHT_FEATURES = (
    "authority",
    "freshness",
    "interest",
    "covisitation",
    "follows",
    "breaking",
    "position",
    "topic_interest",
)


class LearnedSignals(NamedTuple):
    """What the current nightly models say about one reader.

    Attributes:
      versions: ``{model name: version}`` in use (empty: no nightly run yet).
      interest: float32 (128,) interest vector from the ``interest`` model, or ``None``.
      clicks: the reader's clicks behind it (0 when unknown).
      covisit: ``{story id: co-visitation count}`` summed over the reader's recent clicks.
      cluster: ``{story id: clicks by the reader's MinHash cluster}``.
      weights: ``{feature: weight, "_intercept": b}`` of a *learned* weights model, else ``None``.
      topics: ``{topic label: share of the reader's clicks}`` (click-based topic interests).
    """

    versions: dict = {}
    interest: np.ndarray | None = None
    clicks: int = 0
    covisit: dict = {}
    cluster: dict = {}
    weights: dict | None = None
    topics: dict = {}


NO_MODELS = LearnedSignals()


def with_learned(profile: UserProfile, learned: LearnedSignals) -> UserProfile:
    """``profile`` with the nightly model's interest vector and click count where it has them
    (clicks: the larger of the two), so candidate selection and ranking see the learned history."""
    return profile._replace(
        interest=learned.interest if learned.interest is not None else profile.interest,
        clicks=max(int(profile.clicks), int(learned.clicks)),
    )


def topic_affinity(story_topics: Sequence[str], reader_topics: dict) -> float:
    """The reader's topic interest in one story: ``max_t p_u(t) / max p_u`` over the story's labels.

    Args:
      story_topics: the story's topic labels (any case).
      reader_topics: ``{lower-case label: interest}`` (the ``history`` model's ``topics``,
        :func:`newsflow.core.learning.topic_interest.topic_interests`); its ``"*"`` entry, when present, is
        the interest of a label the reader was never shown (older models without it: 0). Empty gives 0.

    Returns:
      A float in [0, 1]: 1 for a story with the reader's strongest topic, 0 without a story label.
    """
    if not reader_topics:
        return 0.0
    best = max(reader_topics.values())
    if best <= 0:
        return 0.0
    unseen = float(reader_topics.get("*", 0.0))
    return max((float(reader_topics.get(str(t).lower(), unseen)) for t in story_topics), default=0.0) / best


def history_weight(clicks: int) -> float:
    """``min(clicks, 20) / 20`` in [0, 1]."""
    return min(max(int(clicks), 0), HISTORY_CLICKS) / HISTORY_CLICKS


def _unit_max_norm(x: np.ndarray) -> np.ndarray:
    m = float(np.max(x)) if x.size else 0.0
    return x / m if m > 0 else np.zeros_like(x)


def _listed_mask(topics: Sequence[Sequence[str]], sources: Sequence[str], topic_set, source_set) -> np.ndarray:
    """Boolean mask, shape (n,): True where the source or any topic (lower-cased) is in the given sets."""
    n = len(sources)
    if not topic_set and not source_set:
        return np.zeros(n, dtype=bool)
    return np.fromiter(
        (
            (src.lower() in source_set) or any(str(t).lower() in topic_set for t in tps)
            for tps, src in zip(topics, sources, strict=False)
        ),
        dtype=bool,
        count=n,
    )


def blocked_mask(topics: Sequence[Sequence[str]], sources: Sequence[str], profile: UserProfile) -> np.ndarray:
    """Boolean mask, shape (n,): True where the reader blocked the story's topic or source."""
    return _listed_mask(topics, sources, profile.block_topics, profile.block_sources)


def followed_mask(topics: Sequence[Sequence[str]], sources: Sequence[str], profile: UserProfile) -> np.ndarray:
    """Boolean mask, shape (n,): True where a topic or the source is followed."""
    return _listed_mask(topics, sources, profile.follow_topics, profile.follow_sources)


def personal_relevance(
    scores: np.ndarray,
    velocity: np.ndarray,
    embeddings: np.ndarray,
    topics: Sequence[Sequence[str]],
    sources: Sequence[str],
    profile: UserProfile,
) -> np.ndarray:
    """Relevance of each candidate for ``profile`` without learned models (formula in the module
    docstring); :func:`personal_signals` adds the learned ones and the reasons.

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


def _collaborative(story_ids: Sequence[str], learned: LearnedSignals) -> tuple[np.ndarray, np.ndarray]:
    """(co-visitation, similar-reader) signals, each shape (n,), max-normalised to [0, 1]."""
    cov = np.array([learned.covisit.get(s, 0.0) for s in story_ids], dtype=np.float64)
    clu = np.array([learned.cluster.get(s, 0.0) for s in story_ids], dtype=np.float64)
    return _unit_max_norm(cov), _unit_max_norm(clu)


def personal_signals(
    scores: np.ndarray,
    velocity: np.ndarray,
    embeddings: np.ndarray,
    topics: Sequence[Sequence[str]],
    sources: Sequence[str],
    profile: UserProfile,
    story_ids: Sequence[str],
    learned: LearnedSignals = NO_MODELS,
    authority: np.ndarray | None = None,
    breaking: np.ndarray | None = None,
) -> tuple[np.ndarray, list[dict]]:
    """Relevance and the reasons behind it, with the learned models (module docstring).

    Args:
      scores, velocity, embeddings, topics, sources, profile: as :func:`personal_relevance`.
      story_ids: shape (n,), the candidates' ids (for the collaborative signals).
      learned: the reader's :class:`LearnedSignals` (:func:`load_learned`).
      authority: shape (n,), story authority in [0, 1] (needed by learned weights; default: scores).
      breaking: shape (n,), bool, in the breaking set (default: none).

    Returns:
      ``(relevance float64 (n,), why)``; ``why[i]`` is a JSON-safe dict: ``interest`` (cosine with
      the reader's interest vector, 0 without one), ``topic_interest`` (the reader's click share of the
      story's topic over the largest share, 0 without topic interests), ``covisitation`` and ``similar_readers`` (the
      normalised collaborative signals), ``followed`` (bool), ``freshness`` (decayed score /
      best), ``trending`` (velocity / best), ``model`` ("learned" when learned weights ranked it,
      "default" otherwise), ``versions`` (model versions used) and ``top`` (the largest
      contribution's name).
    """
    n = len(story_ids)
    scores = np.asarray(scores, dtype=np.float64)
    velocity = np.asarray(velocity, dtype=np.float64)
    interest = learned.interest if learned.interest is not None else profile.interest
    clicks = max(int(profile.clicks), int(learned.clicks))
    h = history_weight(clicks)
    cos = np.zeros(n)
    if interest is not None:
        u = np.asarray(interest, dtype=np.float64)
        norm = float(np.linalg.norm(u))
        if norm > 0 and n:
            cos = np.asarray(embeddings, dtype=np.float64) @ (u / norm)
    topic_aff = np.zeros(n)
    if learned.topics:
        topic_aff = np.array([topic_affinity(tps, learned.topics) for tps in topics], dtype=np.float64)
    # the interest term: the embedding cosine, and the click-based topic share when the model has one
    pref = 0.5 * np.maximum(cos, 0.0) + 0.5 * topic_aff if learned.topics else np.maximum(cos, 0.0)
    cov, clu = _collaborative(story_ids, learned)
    collab = np.maximum(cov, clu)
    follow = followed_mask(topics, sources, profile)
    fresh = _unit_max_norm(scores)
    trend = _unit_max_norm(velocity)
    tau = COLD_VELOCITY_WEIGHT * (1.0 - h)
    w = MAX_INTEREST_WEIGHT * h if ((interest is not None or learned.topics) and h > 0) else 0.0
    c = MAX_COLLABORATIVE_WEIGHT * h if collab.any() else 0.0
    contrib = {
        "freshness": (1.0 - w - c) * (1.0 - tau) * fresh,
        "trending": (1.0 - w - c) * tau * trend,
        "interest": w * pref,
        "collaborative": c * collab,
        "followed": FOLLOW_BOOST * follow,
    }
    rel = sum(contrib.values())
    model = "default"
    if learned.weights is not None:
        wt = learned.weights
        auth = scores if authority is None else np.asarray(authority, dtype=np.float64)
        freshness = np.divide(scores, auth, out=np.zeros(n), where=auth > 0)
        brk = np.zeros(n) if breaking is None else np.asarray(breaking, dtype=np.float64)
        terms = {
            "freshness": wt["authority"] * auth + wt["freshness"] * freshness,
            "interest": wt["interest"] * cos + wt["topic_interest"] * topic_aff,
            "collaborative": wt["covisitation"] * collab,
            "followed": wt["follows"] * follow,
            "trending": wt["breaking"] * brk,
        }
        logit = wt["_intercept"] + sum(terms.values())
        rel = 1.0 / (1.0 + np.exp(-np.clip(logit, -50, 50))) + FOLLOW_BOOST * follow
        contrib = terms
        model = "learned"
    names = list(contrib)
    stacked = np.vstack([contrib[k] for k in names]) if n else np.zeros((len(names), 0))
    why = []
    for i in range(n):
        top = names[int(np.argmax(stacked[:, i]))]
        why.append(
            {
                "interest": round(float(cos[i]), 4),
                "topic_interest": round(float(topic_aff[i]), 4),
                "covisitation": round(float(cov[i]), 4),
                "similar_readers": round(float(clu[i]), 4),
                "followed": bool(follow[i]),
                "freshness": round(float(fresh[i]), 4),
                "trending": round(float(trend[i]), 4),
                "model": model,
                "versions": dict(learned.versions),
                "top": top,
            }
        )
    return np.asarray(rel, dtype=np.float64), why
