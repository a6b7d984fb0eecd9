"""Held-out log-likelihood of the learned decay rate λ against the fixed classes, on a click log.

A click log such as Globo.com's has no impressions and no publish times, so the impression model
of :mod:`newsflow.core.learning.decay` cannot be fitted as is. The proxy used here:

* **exposure start** = the article's first click in the log; articles first clicked within
  :data:`BURN_IN_HOURS` of the log's first click are left out (they may be older than the log);
* **rows** = (article, age bin h = 0, 1, … up to :data:`MAX_AGE_HOURS`): clicks of the article
  in ``[first + h·1 h, first + (h+1)·1 h)`` (clipped to the part's end), not counting the first
  click itself (it defines the start, so counting it would fake a decay), with **exposure** = all
  clicks on the site in that interval (the traffic that could have seen it; this absorbs the
  day/night cycle that would otherwise look like decay); age = bin midpoint in hours;
* **model** = E[clicks] = exposure · c_article · e^(−λ·age), fitted with
  :func:`newsflow.core.learning.decay.fit_decay` (one group, one stratum per article, no positions);
* **score** = :func:`newsflow.core.learning.decay.conditional_loglik` on the held-out part: the
  log-likelihood of each held-out click's age bin given the article's held-out click total, so
  ``c_article`` cancels and no parameter is fitted on held-out data.

Split: clicks sorted by time; the first 80 % are TRAIN (λ is learned there, exposure windows end at
the split), the rest TEST (articles first clicked after the burn-in, including those first clicked
in TEST; windows start at the split for older articles, ages still count from the first click).
Without topics in the log every article is in the default class, so the fixed classes compare as
three constant rates: 0.1 (default), 0.02 (evergreen) and 0.5 (breaking).

Command (prints one JSON line; ``loglik_per_click`` is natural log per held-out click, higher is
better)::

    newsflow eval decay --clicks ../shared/data/globo-news-clicks-sample/clicks.csv.gz

Errors: bad input prints ``error: <file>: <problem>`` to stderr and exits 2
(:mod:`newsflow.cli.evaluation.inputs`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from newsflow.cli.evaluation.clicklog import index_ids, read_clicks
from newsflow.cli.evaluation.inputs import InputError, fail

COMMAND = "decay"
HELP = "held-out log-likelihood of the learned freshness decay λ versus the fixed classes on a click log"
BURN_IN_HOURS = 2.0
MAX_AGE_HOURS = 48
TRAIN_FRACTION = 0.8
FIXED_CLASSES = {"default": 0.1, "evergreen": 0.02, "breaking": 0.5}


def exposure_rows(
    times: np.ndarray,
    items: np.ndarray,
    first_click: np.ndarray,
    start: float,
    end: float,
    log_start: float,
    burn_in_hours: float = BURN_IN_HOURS,
    max_age_hours: int = MAX_AGE_HOURS,
):
    """Per (article, hourly age bin) click counts and site traffic inside ``[start, end)``.

    Args:
      times: float64 (n,), click times, UTC epoch s, of the clicks that may be counted.
      items: int64 (n,), article index per click.
      first_click: float64 (n_items,), each article's first click time (UTC epoch s; inf = never).
      start, end: the counted interval, UTC epoch s.
      log_start: the log's first click (for the burn-in), UTC epoch s.

    Returns:
      ``(article, age_hours, exposure, clicks)`` arrays of equal length: int64, float64 (bin
      midpoint, hours), float64 (site clicks in the bin ∩ [start, end)), float64; rows with zero
      exposure are dropped.
    """
    order = np.argsort(times, kind="stable")
    ts, it = times[order], items[order]
    eligible = np.flatnonzero(
        np.isfinite(first_click) & (first_click >= log_start + burn_in_hours * 3600.0) & (first_click < end)
    )
    art, age, expo, clk = [], [], [], []
    h = np.arange(max_age_hours, dtype=np.float64)
    for a in eligible:
        lo = np.maximum(first_click[a] + h * 3600.0, start)
        hi = np.minimum(first_click[a] + (h + 1) * 3600.0, end)
        ok = hi > lo
        if not ok.any():
            continue
        lo, hi, hh = lo[ok], hi[ok], h[ok]
        traffic = np.searchsorted(ts, hi, "left") - np.searchsorted(ts, lo, "left")
        mine = ts[it == a]
        if mine.size and mine[0] == first_click[a]:
            mine = mine[1:]  # the first click opens the exposure; it is not an outcome
        own = np.searchsorted(mine, hi, "left") - np.searchsorted(mine, lo, "left")
        keep = traffic > 0
        art.append(np.full(int(keep.sum()), a))
        age.append(hh[keep] + 0.5)
        expo.append(traffic[keep].astype(np.float64))
        clk.append(own[keep].astype(np.float64))
    if not art:
        return (np.empty(0, np.int64), np.empty(0), np.empty(0), np.empty(0))
    return np.concatenate(art), np.concatenate(age), np.concatenate(expo), np.concatenate(clk)


def learn_lambda(times: np.ndarray, items: np.ndarray, n_items: int, log_start: float | None = None):
    """λ (1/hours) and its :class:`~newsflow.core.learning.decay.DecayFit` learned on a click log with the
    proxy of the module docstring (all of ``times`` is training data)."""
    from newsflow.core.learning.decay import fit_decay

    first = np.full(n_items, np.inf)
    np.minimum.at(first, items, times)
    start = float(times.min()) if log_start is None else log_start
    a, age, expo, clk = exposure_rows(times, items, first, start, float(times.max()) + 1e-3, start)
    if clk.sum() <= 0:
        return None, None
    fit = fit_decay(["all"] * len(a), age, clk, impressions=expo, strata=a)
    return fit.global_lambda, fit


def evaluate(path: str) -> dict:
    """Learns λ on the first 80 % of the log and scores it and the fixed classes on the rest."""
    from newsflow.core.learning.decay import conditional_loglik

    t0 = time.perf_counter()
    clicks = read_clicks(path)
    items, _ = index_ids(clicks.article)
    times = clicks.time
    order = np.argsort(times, kind="stable")
    cut = int(TRAIN_FRACTION * len(order))
    if cut < 1 or cut >= len(order):
        raise InputError(f"{path}: too few clicks to split into train and test")
    train, test = order[:cut], order[cut:]
    split_time = float(times[test[0]])
    n_items = int(items.max()) + 1
    log_start = float(times.min())
    lam, fit = learn_lambda(times[train], items[train], n_items, log_start)
    if lam is None:
        raise InputError(
            f"{path}: no article first clicked after the {BURN_IN_HOURS:g} h burn-in has clicks in the train part"
        )
    first = np.full(n_items, np.inf)
    np.minimum.at(first, items, times)
    a, age, expo, clk = exposure_rows(times[test], items[test], first, split_time, float(times.max()) + 1e-3, log_start)
    n = float(clk.sum())
    if n <= 0:
        raise InputError(f"{path}: no held-out clicks on articles with a known first click")
    rates = {"learned": lam, **{f"fixed_{k}": v for k, v in FIXED_CLASSES.items()}}
    ll = {k: conditional_loglik(v, a, age, expo, clk) for k, v in rates.items()}
    best_fixed = max((k for k in ll if k.startswith("fixed_")), key=ll.get)
    return {
        "proxy": "clicks per article per hour of age since its first click; exposure = site clicks in that hour",
        "train_clicks": int(cut),
        "test_clicks_scored": int(n),
        "test_articles": int(len(np.unique(a))),
        "lambda_learned_per_hour": round(lam, 5),
        "lambda_ci95": [round(max(lam - 1.96 * fit.global_se, 0.0), 5), round(lam + 1.96 * fit.global_se, 5)],
        "loglik": {k: round(v, 2) for k, v in ll.items()},
        "loglik_per_click": {k: round(v / n, 5) for k, v in ll.items()},
        "gain_per_click_vs_best_fixed": round((ll["learned"] - ll[best_fixed]) / n, 5),
        "seconds": round(time.perf_counter() - t0, 2),
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds ``--clicks``."""
    parser.add_argument("--clicks", required=True, help="click log CSV (plain or .gz), Globo.com layout")


def run(args: argparse.Namespace) -> int:
    """Prints one JSON line; returns 0, or 2 on bad input (``error: <file>: <problem>`` on stderr)."""
    try:
        result = evaluate(args.clicks)
    except InputError as e:
        return fail(e)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=HELP)
    add_arguments(p)
    sys.exit(run(p.parse_args()))
