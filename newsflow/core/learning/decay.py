"""Per-topic freshness decay rates λ (1/hours) learned from impressions and clicks.

Model (a position-based examination model: Craswell et al., WSDM 2008, "An experimental comparison
of click position-bias models"; position propensities as in Joachims, Swaminathan & Schnabel,
WSDM 2017, "Unbiased learning-to-rank with biased feedback")::

    E[clicks_i] = impressions_i · c_s · b(p_i) · e^(−λ_g · a_i)

for row ``i`` (one impression, or an aggregate of impressions with the same keys) shown at age
``a_i`` hours (story age at impression time: impression time − story's earliest publish time, both
UTC epoch seconds, divided by 3600) in position ``p_i`` (0-based rank on the surface), where
``c_s`` is the attractiveness of stratum ``s`` (by default the group itself; e.g. the article
when each article has its own base rate), ``b`` the position bias with ``b(0) = 1`` and ``λ_g``
the decay rate of group ``g`` (a topic label, or ``"topic/type"`` for per-article-type rates).

Estimation: Poisson quasi-maximum likelihood with log link. For binary clicks with small CTRs it
is the Bernoulli likelihood's close approximation, and whatever the click distribution its score
equations are unbiased whenever the mean model above is right (so λ is consistent), while its
variance is conservative for Bernoulli data. ``c_s`` is profiled out in closed form; ``b`` is
estimated jointly by alternating closed-form updates (b(p) = clicks at p / expected clicks at p
with b = 1); each ``λ_g`` solves its profile score equation (weighted mean exposure age under
e^(−λa) = mean click age; the profile log-likelihood is concave in λ) by bisection on
[:data:`LAMBDA_MIN`, :data:`LAMBDA_MAX`].

Uncertainty: the profile Fisher information I(λ) = Σ_s Y_s · Var_s(a) (exposure-weighted age
variance under e^(−λa), Y_s the stratum's clicks) gives se(λ̂) = I^(−1/2); intervals are Wald
intervals on log λ (se(log λ) = se/λ), which track the profile-likelihood interval closely.

Shrinkage (empirical Bayes, normal-normal on log λ): prior log λ_g ~ N(log λ_global, τ²), with
λ_global fitted on all rows (one λ, the same strata and b) and τ² estimated across groups by
DerSimonian–Laird, floored at :data:`PRIOR_SD_MIN` ² (so a well-measured topic keeps its own rate)
and set to :data:`PRIOR_SD_DEFAULT` ² with fewer than three groups. Shrinkage weight
w_g = τ² / (τ² + se_g²) ∈ [0, 1] (1 = own estimate); posterior log λ = w·log λ̂_g + (1 − w)·log
λ_global with sd √w·se_g; the CI is exp(posterior ± 1.96·sd). A group without clicks gets the
global rate, w = 0 and the prior interval.

A group's data *suffices* when it has at least :data:`MIN_CLICKS` clicks and se(λ̂)/λ̂ ≤
:data:`MAX_RELATIVE_SE`; otherwise the nightly job writes no override and
:func:`newsflow.core.ranking.decay.lambda_for` keeps its fixed classes (0.5 breaking, 0.02 evergreen,
0.1 default).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

LAMBDA_MIN = 1e-4
"""Lower bound of λ (1/hours): a half-life of ~290 days."""
LAMBDA_MAX = 10.0
"""Upper bound of λ (1/hours): a half-life of ~4 minutes."""
MIN_CLICKS = 200
"""Clicks a group needs before its learned λ replaces the fixed classes."""
MAX_RELATIVE_SE = 0.25
"""Largest se(λ̂)/λ̂ for which a group's data suffices."""
PRIOR_SD_MIN = 0.1
"""Floor of the between-group sd τ of log λ."""
PRIOR_SD_DEFAULT = 0.5
"""τ of log λ used when fewer than three groups have clicks."""
MAX_POSITION = 20
"""Positions ≥ this share one bias bucket."""
Z95 = 1.959963984540054


class DecayEstimate(NamedTuple):
    """The learned decay of one group (topic).

    Attributes:
      group: the group key (topic label, or ``"topic/type"``).
      lambda_per_hour: shrunk λ, 1/hours (posterior mean of log λ, exponentiated).
      ci_low: lower end of the 95 % interval of λ, 1/hours.
      ci_high: upper end of the 95 % interval of λ, 1/hours.
      n_impressions: impressions of the group (sum of the impression weights).
      n_clicks: clicks of the group.
      shrinkage_weight: weight of the group's own estimate in [0, 1] (1 − weight goes to the
        global rate).
      sufficient: True when the data suffices to override the fixed classes (see module doc).
      mle_per_hour: the unshrunk maximum-likelihood λ̂ (``nan`` without clicks).
      se_per_hour: standard error of λ̂ from the profile Fisher information (``nan`` without clicks).
    """

    group: str
    lambda_per_hour: float
    ci_low: float
    ci_high: float
    n_impressions: float
    n_clicks: float
    shrinkage_weight: float
    sufficient: bool
    mle_per_hour: float
    se_per_hour: float


class DecayFit(NamedTuple):
    """Result of :func:`fit_decay`.

    Attributes:
      groups: per group, its :class:`DecayEstimate`, in sorted group order.
      global_lambda: λ fitted on all rows with one rate, 1/hours.
      global_se: its standard error, 1/hours.
      position_bias: float64 array of shape (MAX_POSITION + 1,), b(p) with b(0) = 1 (positions
        without impressions keep 1.0); all ones when no positions were given.
      prior_sd: τ, the between-group sd of log λ used for shrinkage.
    """

    groups: dict
    global_lambda: float
    global_se: float
    position_bias: np.ndarray
    prior_sd: float


def _weighted_age_moments(lam, strata, ages, offsets, n_strata):
    """Per stratum: (Σ o·e^(−λa), mean age, age variance) under weights o·e^(−λa)."""
    lam = np.asarray(lam, dtype=np.float64)
    w = offsets * np.exp(-lam * ages)
    s0 = np.bincount(strata, w, n_strata)
    s1 = np.bincount(strata, w * ages, n_strata)
    s2 = np.bincount(strata, w * ages * ages, n_strata)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(s0 > 0, s1 / s0, 0.0)
        var = np.where(s0 > 0, s2 / s0 - mean * mean, 0.0)
    return s0, mean, np.maximum(var, 0.0)


def _solve_lambda(rows: np.ndarray, strata, ages, offsets, clicks, n_strata) -> tuple[float, float]:
    """λ̂ and se(λ̂) for the rows selected by ``rows`` (one common λ, per-stratum c profiled out).

    The profile score Σ_s Y_s (m_s(λ) − ā_s) is decreasing in λ (m_s = exposure-weighted mean age
    under e^(−λa), ā_s = mean click age); its root is found by bisection on log λ.
    """
    st, ag, of, ck = strata[rows], ages[rows], offsets[rows], clicks[rows]
    y_s = np.bincount(st, ck, n_strata)
    if y_s.sum() <= 0:
        return float("nan"), float("nan")
    click_age = np.bincount(st, ck * ag, n_strata)  # Σ y·a per stratum

    def score(lam: float) -> float:
        _, mean, _ = _weighted_age_moments(lam, st, ag, of, n_strata)
        return float(np.sum(y_s * mean) - np.sum(click_age))

    lo, hi = math.log(LAMBDA_MIN), math.log(LAMBDA_MAX)
    if score(math.exp(lo)) <= 0:
        lam = LAMBDA_MIN
    elif score(math.exp(hi)) >= 0:
        lam = LAMBDA_MAX
    else:
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            if score(math.exp(mid)) > 0:
                lo = mid
            else:
                hi = mid
        lam = math.exp(0.5 * (lo + hi))
    _, _, var = _weighted_age_moments(lam, st, ag, of, n_strata)
    info = float(np.sum(y_s * var))
    se = 1.0 / math.sqrt(info) if info > 0 else float("inf")
    return lam, se


def _dersimonian_laird(theta: np.ndarray, s: np.ndarray) -> float:
    """Between-group variance τ² of estimates ``theta`` with standard errors ``s``."""
    w = 1.0 / (s * s)
    mean = float(np.sum(w * theta) / np.sum(w))
    q = float(np.sum(w * (theta - mean) ** 2))
    denom = float(np.sum(w) - np.sum(w * w) / np.sum(w))
    return max(0.0, (q - (len(theta) - 1)) / denom) if denom > 0 else 0.0


def fit_decay(
    groups: Sequence[str],
    age_hours: Sequence[float],
    clicks: Sequence[float],
    impressions: Sequence[float] | None = None,
    positions: Sequence[int] | None = None,
    strata: Sequence | None = None,
    iterations: int = 15,
) -> DecayFit:
    """Fits λ per group by maximum likelihood, with joint position bias and shrinkage.

    Args:
      groups: shape (n,), group key per row (topic label, or ``"topic/type"``).
      age_hours: shape (n,), float, story age at impression in hours (≥ 0; negatives count as 0).
      clicks: shape (n,), clicks of the row (0/1 for single impressions, counts for aggregates).
      impressions: shape (n,), impressions of the row (default 1 each); for the impression-free
        proxy of the eval command this is an exposure measure (site traffic in that hour).
      positions: shape (n,), 0-based positions (≥ MAX_POSITION pooled); ``None`` = no position
        bias (b ≡ 1).
      strata: shape (n,), key of the attractiveness ``c`` per row (default: the group); must be
        nested in groups (e.g. article ids).
      iterations: alternating updates of b and λ.

    Returns:
      A :class:`DecayFit`.
    """
    g_keys = [str(g) for g in groups]
    n = len(g_keys)
    ages = np.maximum(np.asarray(age_hours, dtype=np.float64).reshape(n), 0.0)
    ck = np.asarray(clicks, dtype=np.float64).reshape(n)
    imp = np.ones(n) if impressions is None else np.asarray(impressions, dtype=np.float64).reshape(n)
    names = sorted(set(g_keys))
    g_index = {g: i for i, g in enumerate(names)}
    gi = np.fromiter((g_index[g] for g in g_keys), dtype=np.int64, count=n)
    if strata is None:
        si, n_strata = gi, len(names)
    else:
        keys = list(strata)
        s_index: dict = {}
        si = np.fromiter((s_index.setdefault(k, len(s_index)) for k in keys), dtype=np.int64, count=n)
        n_strata = len(s_index)
    bias = np.ones(MAX_POSITION + 1)
    pos = None if positions is None else np.clip(np.asarray(positions, dtype=np.int64).reshape(n), 0, MAX_POSITION)
    lam_g = np.full(len(names), 0.1)
    all_rows = np.arange(n)
    group_rows = [np.flatnonzero(gi == k) for k in range(len(names))]
    for _ in range(max(1, iterations) if pos is not None else 1):
        offsets = imp * bias[pos] if pos is not None else imp
        for k, rows in enumerate(group_rows):
            lam_k, _ = _solve_lambda(rows, si, ages, offsets, ck, n_strata)
            lam_g[k] = lam_k if math.isfinite(lam_k) else 0.1
        if pos is None:
            break
        decay = np.exp(-lam_g[gi] * ages)
        base = imp * decay  # expected clicks / (c·b)
        c = np.bincount(si, ck, n_strata) / np.maximum(np.bincount(si, base * bias[pos], n_strata), 1e-300)
        expected_p = np.bincount(pos, c[si] * base, MAX_POSITION + 1)
        clicks_p = np.bincount(pos, ck, MAX_POSITION + 1)
        new_bias = np.where(expected_p > 0, clicks_p / np.maximum(expected_p, 1e-300), 1.0)
        seen = new_bias[expected_p > 0]
        ref = new_bias[0] if expected_p[0] > 0 and new_bias[0] > 0 else (seen[0] if seen.size else 1.0)
        new_bias = new_bias / ref if ref > 0 else new_bias
        new_bias[expected_p <= 0] = 1.0
        if np.allclose(new_bias, bias, rtol=1e-6, atol=1e-9):
            bias = new_bias
            break
        bias = new_bias
    offsets = imp * bias[pos] if pos is not None else imp
    lam_glob, se_glob = _solve_lambda(all_rows, si, ages, offsets, ck, n_strata)
    if not math.isfinite(lam_glob):
        lam_glob, se_glob = 0.1, float("inf")

    mle, se = [], []
    for rows in group_rows:
        lam_k, se_k = _solve_lambda(rows, si, ages, offsets, ck, n_strata)
        mle.append(lam_k)
        se.append(se_k)
    mle_a, se_a = np.array(mle), np.array(se)
    ok = np.isfinite(mle_a) & np.isfinite(se_a) & (se_a > 0)
    theta, s = np.log(mle_a[ok]), se_a[ok] / mle_a[ok]
    if ok.sum() >= 3:
        tau2 = max(_dersimonian_laird(theta, s), PRIOR_SD_MIN**2)
    else:
        tau2 = PRIOR_SD_DEFAULT**2
    theta_glob = math.log(lam_glob)
    n_imp = np.bincount(gi, imp, len(names))
    n_clk = np.bincount(gi, ck, len(names))
    out = {}
    for k, name in enumerate(names):
        if ok[k]:
            s_k = se_a[k] / mle_a[k]
            w = tau2 / (tau2 + s_k * s_k)
            post = w * math.log(mle_a[k]) + (1 - w) * theta_glob
            sd = math.sqrt(w) * s_k
            sufficient = bool(n_clk[k] >= MIN_CLICKS and s_k <= MAX_RELATIVE_SE)
        else:
            w, post, sd, sufficient = 0.0, theta_glob, math.sqrt(tau2), False
        out[name] = DecayEstimate(
            group=name,
            lambda_per_hour=math.exp(post),
            ci_low=math.exp(post - Z95 * sd),
            ci_high=math.exp(post + Z95 * sd),
            n_impressions=float(n_imp[k]),
            n_clicks=float(n_clk[k]),
            shrinkage_weight=float(w),
            sufficient=sufficient,
            mle_per_hour=float(mle_a[k]),
            se_per_hour=float(se_a[k]),
        )
    return DecayFit(out, float(lam_glob), float(se_glob), bias, math.sqrt(tau2))


def lambda_overrides(fit: DecayFit) -> dict[str, float]:
    """``{group: λ}`` for the groups whose data suffices (the ``nf:lambda:topic`` hash content);
    the others stay on the fixed classes of :mod:`newsflow.core.ranking.decay`."""
    return {g: e.lambda_per_hour for g, e in fit.groups.items() if e.sufficient}


def conditional_loglik(lam: float, strata: Sequence, age_hours, exposure, clicks) -> float:
    """Log-likelihood of the click ages given each stratum's click total (c profiled out).

    Per stratum ``s`` the clicks are multinomial over its rows with
    p_i = o_i·e^(−λ·a_i) / Σ_{j∈s} o_j·e^(−λ·a_j); the attractiveness ``c_s`` cancels, so decay rates
    can be compared on held-out data without fitting ``c`` there.

    Args:
      lam: λ, 1/hours (a scalar, or shape (n,) for a per-row rate).
      strata: shape (n,), stratum key per row (e.g. article id).
      age_hours: shape (n,), age in hours.
      exposure: shape (n,), exposure o (impressions, or a traffic proxy), > 0.
      clicks: shape (n,), clicks.

    Returns:
      Σ_i y_i·log p_i (natural log), a float ≤ 0.
    """
    keys = list(strata)
    index: dict = {}
    si = np.fromiter((index.setdefault(k, len(index)) for k in keys), dtype=np.int64, count=len(keys))
    a = np.asarray(age_hours, dtype=np.float64)
    o = np.asarray(exposure, dtype=np.float64)
    y = np.asarray(clicks, dtype=np.float64)
    lam_rows = np.broadcast_to(np.asarray(lam, dtype=np.float64), a.shape)
    logw = np.log(o) - lam_rows * a
    # log-sum-exp per stratum
    mx = np.full(len(index), -np.inf)
    np.maximum.at(mx, si, logw)
    lse = mx + np.log(np.bincount(si, np.exp(logw - mx[si]), len(index)))
    return float(np.sum(y * (logw - lse[si])))
