"""The nightly learning core (newsflow.core.learning): decay MLE, collaborative signals, interest vectors,
ranking weights — on seeded synthetic data and hand-computed tiny inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from newsflow.core.learning.collaborative import (
    DecayedPopularity,
    PairCounts,
    ScorerConfig,
    SessionScorer,
    minhash_user_clusters,
    rank_items,
)
from newsflow.core.learning.decay import MIN_CLICKS, conditional_loglik, fit_decay, lambda_overrides
from newsflow.core.learning.interests import interest_vector, interest_vectors
from newsflow.core.learning.weights import DEFAULT_WEIGHTS, FEATURES, fit_weights
from newsflow.schemas import Event


def _impressions(rng, lam, n, c=0.3):
    age = rng.uniform(0, 24, n)
    pos = rng.integers(0, 10, n)
    clicked = rng.random(n) < c / (1 + pos) * np.exp(-lam * age)
    return age, pos, clicked


def test_decay_recovers_known_lambdas_within_ci_and_position_bias():
    rng = np.random.default_rng(7)
    truth = {"politics": 0.15, "sports": 0.3, "science": 0.05}
    g, a, p, y = [], [], [], []
    for topic, lam in truth.items():
        age, pos, clicked = _impressions(rng, lam, 20000)
        g += [topic] * len(age)
        a.append(age), p.append(pos), y.append(clicked)
    fit = fit_decay(g, np.concatenate(a), np.concatenate(y), positions=np.concatenate(p))
    for topic, lam in truth.items():
        e = fit.groups[topic]
        assert e.ci_low <= lam <= e.ci_high, e
        assert e.sufficient and e.shrinkage_weight > 0.9 and e.n_impressions == 20000
    # b(p) = 1/(1+p) in the simulation
    assert fit.position_bias[0] == 1.0
    np.testing.assert_allclose(fit.position_bias[1:4], [1 / 2, 1 / 3, 1 / 4], rtol=0.2)
    assert set(lambda_overrides(fit)) == set(truth)


def test_thin_topic_is_shrunk_to_the_global_rate():
    rng = np.random.default_rng(3)
    g, a, y = [], [], []
    for topic, lam, n in [("a", 0.1, 20000), ("b", 0.12, 20000), ("c", 0.08, 20000), ("thin", 0.6, 1000)]:
        age, _, clicked = _impressions(rng, lam, n)
        g += [topic] * n
        a.append(age), y.append(clicked)
    fit = fit_decay(g, np.concatenate(a), np.concatenate(y))
    thin = fit.groups["thin"]
    assert not thin.sufficient and thin.n_clicks < MIN_CLICKS
    assert thin.shrinkage_weight < 0.8
    assert thin.shrinkage_weight < min(fit.groups[t].shrinkage_weight for t in "abc") - 0.2
    # the shrunk rate lies strictly between the thin topic's own MLE and the global rate
    lo, hi = sorted([thin.mle_per_hour, fit.global_lambda])
    assert lo < thin.lambda_per_hour < hi
    assert thin.ci_low < thin.lambda_per_hour < thin.ci_high
    assert "thin" not in lambda_overrides(fit)


def test_topic_without_clicks_gets_the_global_rate():
    fit = fit_decay(["x", "x", "y"], [1.0, 2.0, 1.0], [1, 0, 0])
    assert fit.groups["y"].lambda_per_hour == pytest.approx(fit.global_lambda)
    assert fit.groups["y"].shrinkage_weight == 0.0 and math.isnan(fit.groups["y"].mle_per_hour)


def test_conditional_loglik_by_hand():
    # one stratum, two rows of exposure 1 at ages 0 and 1, one click each
    # λ = 0: p = 1/2 each -> 2·log(1/2); λ = ln 2: p = (2/3, 1/3)
    assert conditional_loglik(0.0, ["s", "s"], [0, 1], [1, 1], [1, 1]) == pytest.approx(2 * math.log(0.5))
    expected = math.log(2 / 3) + math.log(1 / 3)
    assert conditional_loglik(math.log(2), ["s", "s"], [0, 1], [1, 1], [1, 1]) == pytest.approx(expected)


def test_covisitation_counts_by_hand():
    cv = PairCounts()
    for key, item, t in [
        ("s1", "a", 0),
        ("s1", "b", 1),
        ("s1", "c", 2),
        ("s2", "a", 3),
        ("s2", "b", 4),
        ("s2", "a", 5),
        ("s3", "c", 6),
    ]:
        cv.add(key, item, t)
    assert cv.count("a", "b") == 2 and cv.count("b", "a") == 2  # s1 and s2; the repeat in s2 adds nothing
    assert cv.count("a", "c") == 1 and cv.count("b", "c") == 1
    assert cv.neighbors("c") == {"a": 1.0, "b": 1.0}
    # user keys with a window: pairs only within 10 s
    w = PairCounts(window_seconds=10)
    for item, t in [("a", 0), ("b", 5), ("c", 20)]:
        w.add("u", item, t)
    assert w.count("a", "b") == 1 and w.count("a", "c") == 0 and w.count("b", "c") == 0


def test_transitions_and_decay_by_hand():
    tr = PairCounts(half_life_hours=1.0, directed=True)
    for item, t in [("a", 0), ("b", 3600), ("a", 7200)]:
        tr.add("s", item, t)
    # a->b formed at 1 h, b->a at 2 h; at 3 h they weigh 2^-2 and 2^-1
    assert tr.count("a", "b", now=3 * 3600) == pytest.approx(0.25)
    assert tr.count("b", "a", now=3 * 3600) == pytest.approx(0.5)
    assert tr.count("b", "a", now=7200) == pytest.approx(1.0)
    pop = DecayedPopularity(3, half_life_hours=2.0)
    pop.add(1, 0.0)
    pop.add(1, 7200.0)
    pop.add(2, 7200.0)
    np.testing.assert_allclose(pop.at(7200.0), [0.0, 1.5, 1.0])
    assert pop.first_seen[1] == 0.0 and np.isinf(pop.first_seen[0])


def test_decayed_counts_survive_rebasing():
    tr = PairCounts(half_life_hours=0.01, directed=True)  # exponent passes the rebase limit quickly
    tr.add("s", "a", 0.0)
    tr.add("s", "b", 10.0)
    tr.add("t", "a", 30000.0)
    tr.add("t", "b", 30000.0 + 36.0)
    assert tr.count("a", "b", now=30036.0) == pytest.approx(1.0)


def test_minhash_clusters_group_identical_click_sets():
    users = {"u1": [1, 2, 3, 4], "u2": [4, 3, 2, 1], "u3": [10, 11, 12, 13], "u4": [1], "u5": [10, 11, 12, 13]}
    clusters = minhash_user_clusters(users, threshold=0.5)
    assert clusters == {"u1": "u1", "u2": "u1", "u3": "u3", "u5": "u3"}  # u4: too few items
    assert minhash_user_clusters(users, threshold=0.5) == clusters  # deterministic


def test_session_scorer_by_hand():
    cfg = ScorerConfig(
        w_transition=1.0,
        w_covisit=0.5,
        w_popularity=0.2,
        w_cluster=1.0,
        pair_half_life_hours=None,
        popularity_half_life_hours=None,
        freshness_lambda=0.0,
        session_decay=0.5,
    )
    sc = SessionScorer(4, cfg, user_clusters={"u1": "u1", "u2": "u1", "u3": "u3"})
    for sess, user, item, t in [
        ("s1", "u1", 0, 0),
        ("s1", "u1", 1, 1),
        ("s2", "u2", 0, 2),
        ("s2", "u2", 2, 3),
        ("s3", "u3", 1, 4),
        ("s3", "u3", 3, 5),
    ]:
        sc.observe(sess, user, item, t)
    c = sc.components([1], now=10, user="u2")
    # transitions from 1: 1->3 (s3) only; co-visits of 1: 0 (s1), 3 (s3) -> 1/2 each
    np.testing.assert_allclose(c["transition"], [0, 0, 0, 1])
    np.testing.assert_allclose(c["covisit"], [0.5, 0, 0, 0.5])
    np.testing.assert_allclose(c["popularity"], [2 / 6, 2 / 6, 1 / 6, 1 / 6])
    np.testing.assert_allclose(c["cluster"], [2 / 4, 1 / 4, 1 / 4, 0])  # u1+u2 clicks; u3 is a singleton
    s = sc.scores([1], now=10, user="u2")
    np.testing.assert_allclose(s, [0.25 + 0.2 / 3 + 0.5, 0.2 / 3 + 0.25, 0.2 / 6 + 0.25, 1 + 0.25 + 0.2 / 6])
    assert rank_items([s], 2, exclude=[1]) == [3, 0]


def test_rank_items_ties_and_exclusion():
    primary = np.array([1.0, 2.0, 2.0, 0.0, 2.0])
    second = np.array([0.0, 1.0, 5.0, 0.0, 1.0])
    assert rank_items([primary, second], 3) == [2, 1, 4]
    assert rank_items([primary, second], 3, exclude=[2]) == [1, 4, 0]
    assert rank_items([primary], 10, exclude=[0, 1, 2, 3, 4]) == []


def _ev(user, typ, story, t, dwell=None):
    return Event(user, typ, story, float(t), float(t), None, dwell)


def test_interest_vector_by_hand():
    emb = {
        "x": np.array([1.0, 0.0, 0.0], np.float32),
        "y": np.array([0.0, 1.0, 0.0], np.float32),
        "z": np.array([0.0, 0.0, 1.0], np.float32),
    }
    hl = 14 * 86400.0
    events = [
        _ev("u", "click", "x", 0),
        _ev("u", "dwell", "x", 0, 30.0),  # weight 2^-1 · (1 + ln 2)
        _ev("u", "click", "y", hl),  # weight 1
        _ev("u", "impression", "z", hl),  # skip: -0.1
        _ev("u", "impression", "x", hl),  # clicked: not a skip
    ]
    v = interest_vector(events, emb, now=hl)
    raw = np.array([0.5 * (1 + math.log(2)), 1.0, -0.1])
    np.testing.assert_allclose(v, raw / np.linalg.norm(raw), rtol=1e-6)
    assert v.dtype == np.float32
    assert interest_vector([_ev("u", "impression", "x", 0)], emb, now=0) is None
    vs = interest_vectors(events + [_ev("w", "click", "q", 0)], emb, now=hl)
    assert list(vs) == ["u"]  # w clicked a story without an embedding


def test_ranking_weights_learned_and_fallback():
    rng = np.random.default_rng(0)
    n = 5000
    x = rng.random((n, len(FEATURES)))
    logit = -2.0 + 2.0 * x[:, 1] + 3.0 * x[:, 2] - 1.0 * x[:, 6]
    y = rng.random(n) < 1 / (1 + np.exp(-logit))
    w = fit_weights(x, y, times=np.arange(n))
    assert w.learned and w.auc > 0.65 and w.n_holdout == 1000
    assert w.weights["interest"] == pytest.approx(3.0, abs=0.6)
    assert w.weights["freshness"] == pytest.approx(2.0, abs=0.6)
    assert w.weights["position"] < 0
    few = fit_weights(x[:100], y[:100])
    assert not few.learned and few.weights == DEFAULT_WEIGHTS and "100 impressions" in few.reason
    no_clicks = fit_weights(x, np.zeros(n))
    assert not no_clicks.learned


def test_within_reader_auc_ignores_between_reader_differences():
    from newsflow.core.learning.weights import _within_group_gain

    # reader a: clicks on its high-topic stories; reader b: clicks on its high-topic story too. The
    # "between" score ranks all of a's stories above all of b's (a clicks more) but orders neither
    # reader's stories correctly; "within" orders both readers' stories right.
    y = np.array([1, 0, 0, 1, 0, 0])
    groups = np.array(["a", "a", "a", "b", "b", "b"])
    within = np.array([0.9, 0.1, 0.2, 0.8, 0.3, 0.1])
    between = np.array([0.5, 0.6, 0.7, 0.1, 0.2, 0.2])
    auc_w, auc_b, low = _within_group_gain(y, within, between, groups, seed=0)
    assert auc_w == 1.0
    # a: 0 of 2 pairs right; b: 0 right and 0 ties over 2 pairs -> 0
    assert auc_b == 0.0 and low == 1.0
    g2 = np.array(["a", "a", "a", "b", "b", "c"])  # c has one impression: no pair, left out
    auc_w2, _, _ = _within_group_gain(y, within, between, g2, seed=0)
    assert auc_w2 == 1.0


def test_fit_weights_judged_within_reader_keeps_defaults_when_only_readers_differ():
    rng = np.random.default_rng(3)
    n, readers = 6000, 300
    groups = rng.integers(0, readers, n)
    x = rng.random((n, len(FEATURES)))
    base = rng.uniform(-4, 0, readers)  # readers differ in how much they click ...
    x[:, 0] = (base[groups] + 4) / 4 + rng.normal(0, 0.05, n)  # ... and authority only tracks the reader
    y = rng.random(n) < 1 / (1 + np.exp(-(base[groups] + 0.0 * x[:, 7])))  # nothing orders a reader's stories
    pooled = fit_weights(x, y, times=np.arange(n))
    grouped = fit_weights(x, y, times=np.arange(n), groups=groups)
    assert pooled.learned and pooled.weights["authority"] > 1.0  # the pooled gate takes the reader effect
    assert not grouped.learned and "gain not significant" in grouped.reason
    assert abs(grouped.auc - 0.5) < 0.1
