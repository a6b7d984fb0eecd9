"""Click-based topic interests normalised by exposure: what a reader clicks *given what it was shown*.

Liu, Dolan & Pedersen (IUI 2010, "Personalized news recommendation based on click behavior") observed
that a reader's click distribution over topics mixes genuine interest with what the news (here: the
feeds) put in front of them, and divided the reader's distribution by the general one. With
impressions logged we can do this per reader and per position: for reader ``u`` and topic label ``t``::

    E_t = Σ_{impressions i of a story labelled t}  d(t_i) · b(p_i)      # examined exposure
    C_t = Σ_{clicks j on a story labelled t}       d(t_j) · (1 + log1p(dwell_j / 30 s))
    r   = Σ_j d(t_j)·(1 + log1p(dwell_j/30)) / Σ_i d(t_i)·b(p_i)        # the reader's overall rate
    m_t     = (C_t + K·r) / (E_t + K)                                   # shrunk toward r
    score_t = m_t + β · √(m_t / (E_t + K))                              # upper confidence bound
    interest_t = score_t / max_t' score_t'

``d`` is the 14-day half-life time decay and the dwell weight of
:mod:`newsflow.core.learning.interests`; ``b(p)`` is the examination propensity of 0-based position ``p``
(click-through at ``p`` over click-through at 0 across all readers, Joachims et al., WSDM 2017), so an
impression far down a page counts as less exposure; ``K`` = :data:`PRIOR_IMPRESSIONS` pseudo-impressions
at the reader's own rate (a label seen once and clicked once does not jump to the top); ``β`` =
:data:`EXPLORATION` adds the Poisson standard error of ``m_t`` (an upper confidence bound, as UCB
bandits for news recommendation do: Li, Chu, Langford & Schapire, WWW 2010), so a label the reader
has seen little of is shown until the evidence says otherwise. Every label of
a story counts (a story labelled ``Entertainment, explainer`` is exposure and a click for both). Labels
never shown get the prior: ``interest_* = (r + β·√(r/K)) / max score``, stored under :data:`UNSEEN` so serving can
rank an unexplored topic at the reader's average instead of at 0.

A click-share (``C_t / Σ C``), the previous definition, learns whatever the feed showed most: in
``newsflow simulate-readers`` (seed 1) readers were shown mostly business and entertainment stories, so
those topics led their shares whatever their tastes, and ranking For You by them reached an expected
CTR@10 below ``/v1/top``'s (lift 0.95); by the exposure-normalised interest, 1.15.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from newsflow.core.learning.interests import DWELL_SCALE_SECONDS, MAX_DWELL_SECONDS, time_decay
from newsflow.schemas import Event

PRIOR_IMPRESSIONS = 1.0
"""K: pseudo-impressions (examined) at the reader's overall rate added to every label."""
UNSEEN = "*"
"""Key of the interest of a label the reader was never shown."""
EXPLORATION = 0.3
"""β: weight of the standard error in the upper confidence bound."""
MAX_POSITION = 20
"""Positions ≥ this share the propensity of this position."""
MAX_LABELS = 50


def position_propensity(counts: Mapping[int, tuple[float, float]]) -> dict[int, float]:
    """Examination propensity per position from ``{position: (impressions, clicks)}`` over all readers.

    Returns:
      ``{position: CTR(p) / CTR(0)}`` for positions 0..:data:`MAX_POSITION` with impressions, clipped to
      (0, 1]; all 1.0 when position 0 has no clicks (no evidence of a bias). Positions ≥ MAX_POSITION are
      pooled.
    """
    pooled: dict[int, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for p, (imps, clicks) in counts.items():
        cell = pooled[min(max(int(p), 0), MAX_POSITION)]
        cell[0] += float(imps)
        cell[1] += float(clicks)
    base = pooled.get(0)
    if not base or base[0] <= 0 or base[1] <= 0:
        return {p: 1.0 for p in pooled}
    ctr0 = base[1] / base[0]
    out = {}
    for p, (imps, clicks) in pooled.items():
        ratio = (clicks / imps) / ctr0 if imps > 0 else 1.0
        out[p] = min(1.0, max(ratio, 1e-3))
    return out


def topic_interests(
    events: Iterable[Event],
    story_topics: Mapping[str, Sequence[str]],
    now: float,
    propensity: Mapping[int, float] | None = None,
    prior_impressions: float = PRIOR_IMPRESSIONS,
    exploration: float = EXPLORATION,
) -> dict[str, float]:
    """One reader's exposure-normalised topic interests (formula in the module docstring).

    Args:
      events: the reader's events (impression, click, dwell).
      story_topics: story id → its topic labels (any case; stored lower case).
      now: UTC epoch seconds (time decay reference).
      propensity: position → examination propensity (:func:`position_propensity`); missing positions
        and ``None`` count 1.0.
      prior_impressions: K.
      exploration: β (0: the posterior mean alone).

    Returns:
      ``{label: interest in [0, 1]}`` (largest = 1, rounded to 4 places, at most 50 labels) plus
      :data:`UNSEEN`; empty without a click on a story with a label.
    """
    events = list(events)
    dwell: dict[str, float] = {}
    for e in events:
        if e.type == "dwell" and e.dwell_seconds is not None:
            dwell[e.story_id] = max(dwell.get(e.story_id, 0.0), min(float(e.dwell_seconds), MAX_DWELL_SECONDS))
    prop = propensity or {}
    exposure: dict[str, float] = defaultdict(float)
    clicks: dict[str, float] = defaultdict(float)
    total_e = total_c = 0.0
    for e in events:
        labels = {str(t).lower() for t in story_topics.get(e.story_id) or () if str(t).strip()}
        if e.type == "impression":
            pos = min(max(int(e.position or 0), 0), MAX_POSITION)
            w = time_decay(e.event_time, now) * float(prop.get(pos, 1.0))
            total_e += w
            for t in labels:
                exposure[t] += w
        elif e.type == "click":
            w = time_decay(e.event_time, now) * (1.0 + math.log1p(dwell.get(e.story_id, 0.0) / DWELL_SCALE_SECONDS))
            total_c += w
            for t in labels:
                clicks[t] += w
    if not clicks or total_c <= 0:
        return {}
    rate = total_c / total_e if total_e > 0 else 1.0
    k = float(prior_impressions)
    beta = float(exploration)

    def ucb(c: float, e: float) -> float:
        m = (c + k * rate) / (e + k)
        return m + beta * math.sqrt(m / (e + k))

    scores = {t: ucb(clicks.get(t, 0.0), exposure.get(t, 0.0)) for t in set(exposure) | set(clicks)}
    unseen = ucb(0.0, 0.0)
    best = max(max(scores.values()), unseen)
    top = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_LABELS]
    out = {t: round(s / best, 4) for t, s in top}
    out[UNSEEN] = round(unseen / best, 4)
    return out
