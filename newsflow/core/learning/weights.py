"""Ranking weights: logistic regression of click given impression.

Features (columns of ``X``, in :data:`FEATURES` order), per impression:

=================  ==================================================================  ===========
name               meaning                                                             range
=================  ==================================================================  ===========
authority          story authority (0.7 source + 0.3 article quality)                  [0, 1]
freshness          e^(−λ·age_h) with the story's λ (:mod:`newsflow.core.ranking.decay`)     [0, 1]
interest           cosine(user interest vector, story embedding), 0 without a vector   [−1, 1]
covisitation       co-visitation score from the reader's recent clicks, normalised     [0, 1]
follows            1 if a followed topic or source, else 0                             {0, 1}
breaking           1 if the story is in the breaking set, else 0                       {0, 1}
position           log1p(0-based position on the surface) (position bias control)      [0, ∞)
topic_interest     the reader's click-based topic interest in the story's topics       [0, 1]
                   (:func:`newsflow.core.ranking.personalize.topic_affinity`), 0 without
=================  ==================================================================  ===========

Every feature is computed at training time exactly as serving computes it for the candidate, so the
fitted weights mean the same thing when they rank (a model trained on the embedding cosine alone
but applied to serving's cosine-plus-topic term ranked by a different signal than it learned; in
``newsflow simulate-readers`` such a fit, freshness weight −4.9, cut the For You lift to 1.03).

Fit: ``sklearn.linear_model.LogisticRegression`` (L2, C = 1, lbfgs) on features standardised to
mean 0 / sd 1 on the training part; the returned weights are mapped back to the raw feature scale
(w_raw = w_std / sd, intercept adjusted), so ``sigmoid(intercept + Σ w·x)`` is P(click).
Held-out split: the last :data:`HOLDOUT_FRACTION` of rows by ``times`` when given (else a seeded
random 20 %); ``auc`` is the ROC AUC there. The fit replaces the defaults only when its held-out AUC
beats the defaults' on the same rows significantly: the 5th percentile of the AUC gain over 200 paired
bootstrap resamples of the held-out rows must be above 0 (a model that ranks held-out clicks no better than the hand-set
blend does not replace it; with position-biased logs a fit can lean on features that only track where
a story was shown). With ``groups`` (the nightly job passes the reader) the AUCs are *within-reader*:
a feed orders one reader's stories, and a pooled AUC rewards features that separate stories popular
with everyone (authority, co-visitation) from the rest while saying nothing about which story this
reader prefers. In ``newsflow simulate-readers`` (seed 1) a fit that beat the defaults' pooled AUC
(0.731 vs 0.698), with authority weight 1.3, ranked For You at an expected lift of 1.06 against the
defaults' 1.13.

Fallback: with fewer than :data:`MIN_IMPRESSIONS` impressions, fewer than :data:`MIN_CLICKS`
clicks or non-clicks, or a single class in either part, :data:`DEFAULT_WEIGHTS` are returned
(``learned = False``). The defaults mirror the hand-set blend of
:mod:`newsflow.core.ranking.personalize` (freshness-weighted authority 0.4, interest 0.6 split evenly
between the embedding cosine and the topic interest, follow boost 0.2) on a logit scale; they are a
prior, not a fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

FEATURES = ("authority", "freshness", "interest", "covisitation", "follows", "breaking", "position", "topic_interest")
MIN_IMPRESSIONS = 1000
MIN_CLICKS = 50
HOLDOUT_FRACTION = 0.2
DEFAULT_WEIGHTS = {
    "authority": 0.4,
    "freshness": 0.4,
    "interest": 0.3,
    "covisitation": 0.3,
    "follows": 0.2,
    "breaking": 0.3,
    "position": -0.5,
    "topic_interest": 0.3,
}
DEFAULT_INTERCEPT = -3.0
"""Logit of a ~5 % base click rate."""


class RankingWeights(NamedTuple):
    """Learned (or default) ranking weights.

    Attributes:
      weights: feature name → weight on the raw feature scale.
      intercept: logit intercept.
      auc: ROC AUC on the held-out part (``None`` for the defaults).
      n_train: rows used to fit (0 for the defaults).
      n_holdout: held-out rows (0 for the defaults).
      learned: False when the defaults were returned.
      reason: why the defaults were returned ("" when learned).
      default_auc: ROC AUC of the default weights on the same held-out rows (``None`` when no fit ran).
    """

    weights: dict
    intercept: float
    auc: float | None
    n_train: int
    n_holdout: int
    learned: bool
    reason: str
    default_auc: float | None = None


BOOTSTRAP_SAMPLES = 200


def _auc_gain_lower_bound(y: np.ndarray, learned: np.ndarray, default: np.ndarray, seed: int) -> float:
    """5th percentile of AUC(learned) − AUC(default) over :data:`BOOTSTRAP_SAMPLES` paired bootstrap
    resamples of the held-out rows (resamples with a single class are skipped; −inf when none is left)."""
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(seed)
    gains = []
    for _ in range(BOOTSTRAP_SAMPLES):
        idx = rng.integers(0, len(y), size=len(y))
        if y[idx].min() == y[idx].max():
            continue
        gains.append(roc_auc_score(y[idx], learned[idx]) - roc_auc_score(y[idx], default[idx]))
    return float(np.percentile(gains, 5)) if gains else float("-inf")


def _pair_counts(y: np.ndarray, score: np.ndarray, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per group: (clicked × unclicked pairs, pairs the score orders correctly, ties counting ½)."""
    from scipy.stats import rankdata

    keys, inverse = np.unique(groups, return_inverse=True)
    pairs, right = np.zeros(len(keys)), np.zeros(len(keys))
    order = np.argsort(inverse, kind="stable")
    bounds = np.flatnonzero(np.diff(inverse[order])) + 1
    for k, rows in enumerate(np.split(order, bounds)):
        yk = y[rows]
        p = int(yk.sum())
        q = len(yk) - p
        if p == 0 or q == 0:
            continue
        ranks = rankdata(score[rows])
        pairs[k] = p * q
        right[k] = float(ranks[yk == 1].sum()) - p * (p + 1) / 2.0
    return pairs, right


def _within_group_gain(y, learned, default, groups, seed: int) -> tuple[float, float, float]:
    """(within-group AUC of ``learned``, of ``default``, 5th percentile of their difference over
    :data:`BOOTSTRAP_SAMPLES` resamples of the groups); −inf as the percentile with no group holding
    both a click and a non-click."""
    pairs, right_l = _pair_counts(y, learned, groups)
    _, right_d = _pair_counts(y, default, groups)
    keep = pairs > 0
    pairs, right_l, right_d = pairs[keep], right_l[keep], right_d[keep]
    if not len(pairs):
        return float("nan"), float("nan"), float("-inf")
    auc_l, auc_d = right_l.sum() / pairs.sum(), right_d.sum() / pairs.sum()
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(pairs), size=(BOOTSTRAP_SAMPLES, len(pairs)))
    gains = (right_l[idx].sum(axis=1) - right_d[idx].sum(axis=1)) / pairs[idx].sum(axis=1)
    return float(auc_l), float(auc_d), float(np.percentile(gains, 5))


def defaults(reason: str) -> RankingWeights:
    """The fallback weights with ``reason``."""
    return RankingWeights(dict(DEFAULT_WEIGHTS), DEFAULT_INTERCEPT, None, 0, 0, False, reason)


def fit_weights(
    features: np.ndarray,
    clicked: Sequence[int],
    times: Sequence[float] | None = None,
    seed: int = 0,
    c: float = 1.0,
    groups: Sequence | None = None,
) -> RankingWeights:
    """Fits the ranking weights (method and fallback in the module docstring).

    Args:
      features: float array (n, 8), columns in :data:`FEATURES` order.
      clicked: shape (n,), 1 if the impression was clicked else 0.
      times: shape (n,), impression times (UTC epoch s) for a time-based held-out split.
      seed: seed of the random split when ``times`` is None.
      c: inverse L2 regularisation strength.
      groups: shape (n,), the reader of each impression. When given, the fit is judged as a feed is:
        by how it orders *one reader's* impressions. ``auc`` and ``default_auc`` are then within-reader
        AUCs on the held-out rows (the share of a reader's (clicked, unclicked) pairs ordered correctly,
        pooled over readers) and the bootstrap resamples readers.

    Returns:
      A :class:`RankingWeights`.
    """
    x = np.asarray(features, dtype=np.float64)
    y = np.asarray(clicked, dtype=np.int64).reshape(-1)
    if x.ndim != 2 or x.shape[1] != len(FEATURES) or x.shape[0] != len(y):
        raise ValueError(f"features must have shape (n, {len(FEATURES)}) matching clicked, got {x.shape} and {y.shape}")
    n, pos = len(y), int(y.sum())
    if n < MIN_IMPRESSIONS:
        return defaults(f"{n} impressions < {MIN_IMPRESSIONS}")
    if pos < MIN_CLICKS or n - pos < MIN_CLICKS:
        return defaults(f"{pos} clicks / {n - pos} non-clicks: need {MIN_CLICKS} of each")
    if times is not None:
        order = np.argsort(np.asarray(times, dtype=np.float64), kind="stable")
    else:
        order = np.random.default_rng(seed).permutation(n)
    cut = int(round(n * (1 - HOLDOUT_FRACTION)))
    tr, ho = order[:cut], order[cut:]
    if len(set(y[tr])) < 2 or len(set(y[ho])) < 2:
        return defaults("a single class in the training or held-out part")
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    mu = x[tr].mean(axis=0)
    sd = x[tr].std(axis=0)
    sd[sd == 0] = 1.0
    model = LogisticRegression(C=c, max_iter=1000).fit((x[tr] - mu) / sd, y[tr])
    w_std = model.coef_[0]
    w_raw = w_std / sd
    intercept = float(model.intercept_[0] - np.sum(w_std * mu / sd))
    auc = float(roc_auc_score(y[ho], model.decision_function((x[ho] - mu) / sd)))
    learned_score = model.decision_function((x[ho] - mu) / sd)
    default_logit = x[ho] @ np.array([DEFAULT_WEIGHTS[f] for f in FEATURES], dtype=np.float64)
    default_auc = float(roc_auc_score(y[ho], default_logit))
    if groups is not None:
        g = np.asarray(list(groups), dtype=object).reshape(-1)
        if len(g) != n:
            raise ValueError(f"groups must have {n} entries, got {len(g)}")
        auc, default_auc, low = _within_group_gain(y[ho], learned_score, default_logit, g[ho].astype(str), seed)
    else:
        low = _auc_gain_lower_bound(y[ho], learned_score, default_logit, seed)
    if not low > 0.0:
        out = defaults(
            f"learned held-out AUC {auc:.4f} vs the defaults' {default_auc:.4f}: "
            f"gain not significant (bootstrap 5th percentile {low:.4f})"
        )
        return out._replace(auc=auc, n_train=len(tr), n_holdout=len(ho), default_auc=default_auc)
    weights = {f: float(w) for f, w in zip(FEATURES, w_raw, strict=True)}
    return RankingWeights(weights, intercept, auc, len(tr), len(ho), True, "", default_auc)
