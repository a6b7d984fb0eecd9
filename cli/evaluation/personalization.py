"""Next-click prediction on a click log: our session scorer against three baselines.

Protocol
--------
* **Split**: with ``--test-clicks TEST`` all of TRAIN trains and TEST is scored. Without it TRAIN
  is split by time: ``--split hours`` (the default) gives each session the clock hour (UTC,
  ``floor(t / 3600)``) of its ``session_start`` (of its first click where the log has no such
  column) and holds out the sessions of the last 20 % of those distinct hours, whole: the test part
  is hours of sessions a deployment had not seen, as the click log's own hourly files are (they
  group sessions by start hour; its held-back part is the next hours' files). ``--split clicks``
  holds out the last 20 % of the clicks by time (the older protocol, which cuts hours and sessions
  in two).
* **Replay**: every click (train and test) is ingested in time order. All clicks with one timestamp
  are ingested together, after the queries at that timestamp are answered, so a query sees exactly
  the clicks strictly before its time, as a live system would. (TRAIN clicks later than the first
  TEST click are therefore replayed at their time, never seen early.)
* **Queries**: a test session is the test clicks of one ``session_id`` in time order; with ≥ 2 of
  them, each click after the first is a query: rank 10 articles for the session's earlier test
  clicks at the click's time, excluding those already clicked in the session; a hit is the clicked
  article in the 10. ``hr_at_10`` = hits / queries; ``mrr_at_10`` = mean of 1/rank (0 outside 10).
* **Ties** (every method): after its own keys, the clicks in the hour before the query (more
  first), then all clicks so far (more first), then the article id (ascending).

Methods (all counts from TRAIN plus test clicks so far)
-------------------------------------------------------
* ``popularity``: most clicks so far.
* ``recent_popularity``: most clicks in ``[t − 1 h, t)``.
* ``covisitation``: Σ over the session's clicked articles of the number of sessions that clicked
  both; ties by last-hour clicks, then topped up in recent_popularity order.
* ours (:class:`newsflow.core.learning.collaborative.SessionScorer`): decayed session-order transitions
  from the last click + decayed co-visitation from the session's clicks (recent ones weigh more) +
  decayed popularity × learned freshness e^(−λ·age since first click) + MinHash cluster-mates'
  decayed clicks, each normalised to a distribution, blended with the weights below. λ is learned
  on the training clicks with :func:`newsflow.cli.evaluation.decay.learn_lambda`; user clusters come
  from the training clicks with :func:`newsflow.core.learning.collaborative.minhash_user_clusters`.

Hyper-parameters were chosen with ``--tune`` (a grid search that splits TRAIN's clicks by time at
80 %, fits on the first part and scores the rest, 12,564 validation queries; the test part is never
used) on the shared Globo sample's TRAIN part (its first 80 %), in three stages, each widening the
grid where the previous best sat on an edge: (1) w_covisit ∈ {0.5, 1}, w_popularity ∈ {0.1, 0.3,
0.6}, w_cluster ∈ {0, 0.1}, pair half-life ∈ {6, 24} h, popularity half-life ∈ {0.5, 1} h → best
validation HR@10 0.6588; (2) w_covisit ∈ {0.25, 0.5}, w_popularity ∈ {0.6, 1, 1.5}, popularity
half-life ∈ {0.25, 0.5} h → 0.6709; (3) w_cluster ∈ {0, 0.1}, popularity half-life ∈ {0.1, 0.25} h →
0.6775 (w_cluster 0.1: 0.6774, so cluster-mates add nothing on this log, whose users mostly have
one session). Chosen (:data:`DEFAULT_CONFIG`): w_transition = 1.0, w_covisit = 0.25,
w_popularity = 1.0, w_cluster = 0.0, pair half-life 6 h, popularity half-life 0.1 h, session decay
0.5, freshness λ = learned (on the Globo sample it lands on its lower bound 1e-4/h, see
``newsflow eval decay``). The grid in :func:`tune` is the last stage's.

Command (prints one JSON line)::

    newsflow eval personalization --clicks ../shared/data/globo-news-clicks-sample/clicks.csv.gz

Errors: bad input prints ``error: <file>: <problem>`` to stderr and exits 2
(:mod:`newsflow.cli.evaluation.inputs`).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from collections import defaultdict

import numpy as np

from newsflow.cli.evaluation.clicklog import index_ids, read_clicks
from newsflow.cli.evaluation.inputs import InputError, fail
from newsflow.core.learning.collaborative import (
    PairCounts,
    ScorerConfig,
    SessionScorer,
    minhash_user_clusters,
    rank_items,
)

COMMAND = "personalization"
HELP = "next-click HR@10/MRR@10 of the session scorer versus popularity, recent-popularity and co-visitation baselines"
K = 10
TRAIN_FRACTION = 0.8
HOUR = 3600.0
DEFAULT_CONFIG = ScorerConfig(
    w_transition=1.0,
    w_covisit=0.25,
    w_popularity=1.0,
    w_cluster=0.0,
    pair_half_life_hours=6.0,
    popularity_half_life_hours=0.1,
    freshness_lambda=0.0,  # replaced by the learned λ unless a config sets use_learned_lambda=False
    session_decay=0.5,
)
BASELINES = ("popularity", "recent_popularity", "covisitation")


class _Log:
    """The merged click stream as arrays, sorted by (time, file order)."""

    def __init__(self, time_s, item, session, user, is_test, start=None):
        order = np.lexsort((np.arange(len(time_s)), time_s))
        self.start = np.full(len(time_s), np.nan) if start is None else np.asarray(start, np.float64)[order]
        self.time = np.asarray(time_s, dtype=np.float64)[order]
        self.item = np.asarray(item, dtype=np.int64)[order]
        self.session = np.asarray(session, dtype=np.int64)[order]
        self.user = np.asarray(user, dtype=np.int64)[order]
        self.is_test = np.asarray(is_test, dtype=bool)[order]


def replay(
    log: _Log,
    n_items: int,
    config: ScorerConfig | None = DEFAULT_CONFIG,
    user_clusters=None,
    baselines: bool = True,
    t_ref: float = 0.0,
) -> dict:
    """Runs the protocol of the module docstring.

    Args:
      log: the merged stream (items as ints in ``[0, n_items)``).
      n_items: number of distinct articles.
      config: our scorer's settings; ``None`` = baselines only.
      user_clusters: user index → cluster id for our scorer.
      baselines: also score the three baselines.

    Returns:
      ``{"queries": int, "<method>": {"hits": int, "rr": float}}`` for ``ours`` and the baselines.
    """
    alltime = np.zeros(n_items, dtype=np.float64)
    lasthour = np.zeros(n_items, dtype=np.float64)
    covis = PairCounts(None)
    scorer = SessionScorer(n_items, config, user_clusters, t_ref) if config is not None else None
    methods = (["ours"] if scorer is not None else []) + (list(BASELINES) if baselines else [])
    stats = {m: {"hits": 0, "rr": 0.0} for m in methods}
    context: dict[int, list[int]] = defaultdict(list)
    seen_test_session: set[int] = set()
    queries = 0
    n = len(log.time)
    window_lo = 0
    i = 0
    while i < n:
        t = log.time[i]
        j = i
        while j < n and log.time[j] == t:
            j += 1
        while window_lo < i and log.time[window_lo] < t - HOUR:
            lasthour[log.item[window_lo]] -= 1
            window_lo += 1
        for e in range(i, j):
            if not log.is_test[e]:
                continue
            s = int(log.session[e])
            if s in seen_test_session:
                queries += 1
                ctx = context[s]
                target = int(log.item[e])
                ranked = {}
                if baselines:
                    ranked["popularity"] = rank_items([alltime, lasthour], K, ctx)
                    ranked["recent_popularity"] = rank_items([lasthour, alltime], K, ctx)
                    cv = np.zeros(n_items)
                    for c in ctx:
                        row, _ = covis.row(c)
                        if row:
                            idx = np.fromiter(row.keys(), np.int64, len(row))
                            cv[idx] += np.fromiter(row.values(), np.float64, len(row))
                    ranked["covisitation"] = rank_items([cv, lasthour, alltime], K, ctx)
                if scorer is not None:
                    score = scorer.scores(ctx, t, int(log.user[e]))
                    ranked["ours"] = rank_items([score, lasthour, alltime], K, ctx)
                for m, top in ranked.items():
                    if target in top:
                        stats[m]["hits"] += 1
                        stats[m]["rr"] += 1.0 / (top.index(target) + 1)
            seen_test_session.add(s)
            context[s].append(int(log.item[e]))
        for e in range(i, j):
            it = int(log.item[e])
            alltime[it] += 1
            lasthour[it] += 1
            if baselines:
                covis.add(int(log.session[e]), it, t)
            if scorer is not None:
                scorer.observe(int(log.session[e]), int(log.user[e]), it, t)
        i = j
    return {"queries": queries, **stats}


def _metrics(stat: dict, queries: int) -> dict:
    return {
        "hr_at_10": round(stat["hits"] / queries, 4) if queries else 0.0,
        "mrr_at_10": round(stat["rr"] / queries, 4) if queries else 0.0,
    }


def _fit(log: _Log, n_items: int, config: ScorerConfig, use_learned_lambda: bool = True):
    """Learns λ and user clusters on the non-test clicks that precede the first test click."""
    from newsflow.cli.evaluation.decay import learn_lambda

    first_test = log.time[log.is_test].min() if log.is_test.any() else np.inf
    train = (~log.is_test) & (log.time < first_test)
    lam = None
    if use_learned_lambda and train.sum() > 0:
        lam, _ = learn_lambda(log.time[train], log.item[train], n_items)
    if lam is not None:
        config = config._replace(freshness_lambda=float(lam))
    clusters = None
    if config.w_cluster:
        items_by_user: dict = defaultdict(set)
        for u, it in zip(log.user[train], log.item[train], strict=True):
            items_by_user[int(u)].add(int(it))
        clusters = minhash_user_clusters(items_by_user)
    return config, clusters


def _held_out(times: np.ndarray, sessions: np.ndarray, starts: np.ndarray, fraction: float, split: str) -> np.ndarray:
    """Boolean mask of the test part of one click stream (module docstring, **Split**).

    Args:
      times: click times, seconds since the epoch, any order; shape (n,).
      sessions: session index of each click; shape (n,).
      starts: each click's session start, seconds since the epoch, NaN if unknown; shape (n,).
      fraction: the share kept for training (0.8).
      split: ``"hours"`` (sessions of the last ``1 - fraction`` of distinct start hours) or ``"clicks"``.

    Raises:
      InputError: the sessions start in fewer than two distinct hours (``"hours"``): nothing can be held out.
    """
    if split == "clicks":
        order = np.lexsort((np.arange(len(times)), times))
        is_test = np.zeros(len(times), dtype=bool)
        is_test[order[int(fraction * len(times)) :]] = True
        return is_test
    if split != "hours":
        raise ValueError(f"unknown split {split!r}")
    _, inverse = np.unique(sessions, return_inverse=True)
    start = np.full(int(inverse.max()) + 1, np.inf)
    np.minimum.at(start, inverse, np.where(np.isfinite(starts), starts, times))
    session_hour = np.floor(start / HOUR)
    distinct = np.unique(session_hour)
    if len(distinct) < 2:
        raise InputError("too few clicks to split into train and test: every session starts in one hour")
    first_test_hour = distinct[int(fraction * len(distinct))]
    return session_hour[inverse] >= first_test_hour


def _build_log(train, test, split_fraction: float | None, split: str = "hours") -> tuple[_Log, int]:
    """Merges TRAIN (and TEST) into one indexed stream; without TEST, splits TRAIN by ``split``."""
    parts = [train] if test is None else [train, test]
    articles = [a for p in parts for a in p.article]
    sessions = [s for p in parts for s in p.session]
    users = [u for p in parts for u in p.user]
    times = np.concatenate([p.time for p in parts])
    item, distinct = index_ids(articles)
    sess, _ = index_ids(sessions)
    user, _ = index_ids(users)
    if test is None:
        is_test = _held_out(times, sess, train.session_start, split_fraction, split)
    else:
        is_test = np.r_[np.zeros(len(train.time), bool), np.ones(len(test.time), bool)]
    return _Log(times, item, sess, user, is_test, np.concatenate([p.session_start for p in parts])), len(distinct)


def _validation_log(log: _Log, split: str = "hours") -> _Log:
    """TRAIN's clicks only, their last 20 % (of hours or clicks, as ``split``) the validation part (``--tune``)."""
    keep = ~log.is_test
    is_val = _held_out(log.time[keep], log.session[keep], log.start[keep], TRAIN_FRACTION, split)
    return _Log(log.time[keep], log.item[keep], log.session[keep], log.user[keep], is_val, log.start[keep])


def tune(log: _Log, n_items: int, split: str = "hours") -> list[dict]:
    """Grid search on the validation tail of TRAIN; returns results sorted best first."""
    val = _validation_log(log, split)
    t_ref = float(val.time[0])
    base, clusters = _fit(val, n_items, DEFAULT_CONFIG._replace(w_cluster=1.0))
    results = []
    grid = itertools.product((0.25,), (0.5,), (1.0,), (0.0, 0.1), (6.0,), (0.1, 0.25))
    for w_cv, sd, w_pop, w_cl, pair_h, pop_h in grid:
        cfg = base._replace(
            w_transition=1.0,
            w_covisit=w_cv,
            session_decay=sd,
            w_popularity=w_pop,
            w_cluster=w_cl,
            pair_half_life_hours=pair_h,
            popularity_half_life_hours=pop_h,
        )
        r = replay(val, n_items, cfg, clusters if w_cl else None, baselines=False, t_ref=t_ref)
        results.append({"config": cfg._asdict(), **_metrics(r["ours"], r["queries"]), "queries": r["queries"]})
    results.sort(key=lambda d: (-d["hr_at_10"], -d["mrr_at_10"]))
    return results


def evaluate(
    train_path: str, test_path: str | None = None, config: ScorerConfig = DEFAULT_CONFIG, split: str = "hours"
) -> dict:
    """Scores our scorer and the baselines on the same queries (protocol in the module docstring).

    Returns the JSON of ``run``: ``queries``, ``hr_at_10``, ``mrr_at_10``, ``baselines`` (per method),
    ``hr_at_10_vs_best_baseline`` (our HR@10 / the best baseline's, the issue's ratio),
    ``hr_at_10_gain_vs_best_baseline`` (that ratio − 1), ``split``, ``freshness_lambda_per_hour``,
    ``seconds``."""
    t0 = time.perf_counter()
    train = read_clicks(train_path)
    test = read_clicks(test_path) if test_path else None
    try:
        log, n_items = _build_log(train, test, TRAIN_FRACTION, split)
    except InputError as e:
        raise InputError(f"{train_path}: {e}") from None
    if not log.is_test.any() or log.is_test.all():
        raise InputError(f"{train_path}: too few clicks to split into train and test")
    cfg, clusters = _fit(log, n_items, config)
    r = replay(log, n_items, cfg, clusters, baselines=True, t_ref=float(log.time[0]))
    if r["queries"] == 0:
        raise InputError(f"{test_path or train_path}: no test session has two or more clicks: nothing to score")
    out = {
        "queries": r["queries"],
        **_metrics(r["ours"], r["queries"]),
        "baselines": {m: _metrics(r[m], r["queries"]) for m in BASELINES},
    }
    best = max(out["baselines"][m]["hr_at_10"] for m in BASELINES)
    out["hr_at_10_vs_best_baseline"] = round(out["hr_at_10"] / best, 4) if best else None
    out["hr_at_10_gain_vs_best_baseline"] = round(out["hr_at_10"] / best - 1.0, 4) if best else None
    out["split"] = "test file" if test is not None else split
    out["freshness_lambda_per_hour"] = round(cfg.freshness_lambda, 5)
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds ``--clicks``, ``--test-clicks``, ``--split``, ``--tune``."""
    parser.add_argument("--clicks", required=True, help="TRAIN click log CSV (plain or .gz), Globo.com layout")
    parser.add_argument("--test-clicks", default=None, help="TEST click log; default: the last 20 %% of TRAIN by time")
    parser.add_argument(
        "--split",
        choices=("hours", "clicks"),
        default="hours",
        help="without --test-clicks: hold out the last 20 %% of clock hours (default) or of clicks",
    )
    parser.add_argument(
        "--tune",
        action="store_true",
        help="grid-search the scorer on the validation tail of TRAIN only and print the results",
    )


def run(args: argparse.Namespace) -> int:
    """Prints one JSON line; returns 0, or 2 on bad input (``error: <file>: <problem>`` on stderr)."""
    try:
        if getattr(args, "tune", False):
            train = read_clicks(args.clicks)
            log, n_items = _build_log(train, None, TRAIN_FRACTION, args.split)
            results = tune(log, n_items, args.split)
            print(json.dumps({"best": results[0], "top5": results[1:5], "configs": len(results)}))
            return 0
        result = evaluate(args.clicks, args.test_clicks, split=getattr(args, "split", "hours"))
    except InputError as e:
        return fail(e)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=HELP)
    add_arguments(p)
    sys.exit(run(p.parse_args()))
