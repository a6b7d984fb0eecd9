"""Decay per λ class, MMR picks on a hand-made set, the source cap, personalization, re-rank.

Expected values are computed by hand in the comments (e^-1 = 0.36787944,
e^-0.2 = 0.81873075, e^-0.04 = 0.96078944, e^-0.6 = 0.54881164).
"""

import math

import numpy as np
import pytest

from newsflow.core.ranking.decay import decay_score, decay_scores, is_breaking, lambda_for
from newsflow.core.ranking.mmr import mmr_select, mmr_select_reference
from newsflow.core.ranking.personalize import blocked_mask, personal_relevance
from newsflow.core.ranking.rerank import rerank
from newsflow.schemas import UserProfile

NOW = 1_700_000_000.0
TWO_HOURS_AGO = NOW - 7200.0


# ---- decay ---------------------------------------------------------------------------
def test_lambda_classes():
    assert lambda_for(["business"], breaking=True) == 0.5
    assert lambda_for(["business"], breaking=False) == 0.1
    assert lambda_for(["Obituary"], breaking=False) == 0.02
    assert lambda_for(["world", "explainer"], breaking=False) == 0.02
    assert lambda_for(["historical"], breaking=False) == 0.02
    # override beats the class, breaking beats the override; first topic with an override wins
    assert lambda_for(["sports", "obituary"], False, {"sports": 0.3}) == 0.3
    assert lambda_for(["tech", "sports"], False, {"sports": 0.3, "tech": 0.05}) == 0.05
    assert lambda_for(["sports"], True, {"sports": 0.3}) == 0.5


def test_breaking_threshold_is_strictly_more_than_20():
    assert not is_breaking(20)
    assert is_breaking(21)


@pytest.mark.parametrize(
    "lam, expected",
    [(0.5, 0.8 * 0.36787944), (0.1, 0.8 * 0.81873075), (0.02, 0.8 * 0.96078944), (0.3, 0.8 * 0.54881164)],
)
def test_decay_each_lambda_class_two_hours(lam, expected):
    assert decay_score(0.8, TWO_HOURS_AGO, NOW, lam) == pytest.approx(expected, rel=1e-7)


def test_decay_vectorized_and_future_clamped():
    got = decay_scores(
        np.array([0.8, 0.8, 0.5]), np.array([TWO_HOURS_AGO, TWO_HOURS_AGO, NOW + 3600]), NOW, np.array([0.5, 0.02, 0.1])
    )
    np.testing.assert_allclose(got, [0.29430355, 0.76863155, 0.5], rtol=1e-7)
    # half-life check: λ = 0.1 halves the score after ln2/0.1 hours
    assert decay_score(1.0, NOW - 3600 * math.log(2) / 0.1, NOW, 0.1) == pytest.approx(0.5)


# ---- MMR -----------------------------------------------------------------------------
# A and B are the same story angle (identical vectors), C is orthogonal, D is between.
REL = np.array([1.0, 0.9, 0.6, 0.5])
EMB = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])
SRC = ["a.com", "b.com", "c.com", "d.com"]


def test_mmr_hand_made_alpha_07():
    # step1 gains .7*rel: A .70 B .63 C .42 D .35 -> A ; sims to A: B 1, C 0, D .6
    # step2: B .63-.3*1=.33  C .42-0=.42  D .35-.3*.6=.17 -> C ; max sims: B 1, D .8
    # step3: B .33  D .35-.24=.11 -> B ; step4 D
    assert mmr_select(REL, EMB, SRC, k=4, alpha=0.7) == [0, 2, 1, 3]
    assert mmr_select_reference(REL.tolist(), EMB.tolist(), SRC, k=4, alpha=0.7) == [0, 2, 1, 3]


def test_mmr_hand_made_alpha_09_prefers_relevance():
    # step2: B .81-.1=.71  C .54  D .45-.06=.39 -> B ; step3: C .54, D .39 -> C
    assert mmr_select(REL, EMB, SRC, k=4, alpha=0.9) == [0, 1, 2, 3]
    assert mmr_select(REL, EMB, SRC, k=2, alpha=0.7) == [0, 2]


def test_mmr_alpha_out_of_range_and_shape_errors():
    with pytest.raises(ValueError, match="alpha"):
        mmr_select(REL, EMB, SRC, alpha=0.95)
    with pytest.raises(ValueError, match="disagree"):
        mmr_select(REL, EMB[:3], SRC)
    assert mmr_select(np.zeros(0), np.zeros((0, 4)), [], k=5) == []


def test_source_cap_removes_rest_of_that_source():
    rel = np.array([1.0, 0.9, 0.8, 0.5, 0.4])
    emb = np.eye(5)  # orthogonal: gains are just .7*rel
    src = ["x.com", "x.com", "x.com", "y.com", "z.com"]
    assert mmr_select(rel, emb, src, k=4, source_cap=None) == [0, 1, 2, 3]
    assert mmr_select(rel, emb, src, k=4, source_cap=2) == [0, 1, 3, 4]
    # cap of 1: x.com once, then y, z; then nothing is left even though k=4
    assert mmr_select(rel, emb, src, k=4, source_cap=1) == [0, 3, 4]
    assert mmr_select_reference(rel.tolist(), emb.tolist(), src, k=4, source_cap=1) == [0, 3, 4]


def test_vectorized_matches_reference_on_random_sets():
    rng = np.random.default_rng(7)
    for _ in range(20):
        n, d = 60, 16
        rel = rng.random(n)
        emb = rng.normal(size=(n, d))
        src = [f"s{rng.integers(0, 12)}.com" for _ in range(n)]
        alpha = float(rng.uniform(0.5, 0.9))
        assert mmr_select(rel, emb, src, k=20, alpha=alpha) == mmr_select_reference(
            rel.tolist(), emb.tolist(), src, k=20, alpha=alpha
        )


# ---- personalization -------------------------------------------------------------------
SCORES = np.array([0.8, 0.4, 0.2])
VELOCITY = np.array([0.0, 10.0, 5.0])
R2 = 1 / math.sqrt(2)
UNIT = np.zeros((3, 128), dtype=np.float32)
UNIT[0, 0] = 1.0
UNIT[1, 1] = 1.0
UNIT[2, 0] = UNIT[2, 1] = R2
TOPICS = [["business"], ["tech"], ["sports"]]
SOURCES = ["a.com", "b.com", "c.com"]


def test_cold_start_is_half_score_half_velocity():
    cold = UserProfile("u1")
    # s/max = [1, .5, .25], v/max = [0, 1, .5] -> .5*each
    np.testing.assert_allclose(personal_relevance(SCORES, VELOCITY, UNIT, TOPICS, SOURCES, cold), [0.5, 0.75, 0.375])


def test_interest_takes_over_gradually():
    u = np.zeros(128, dtype=np.float32)
    u[1] = 2.0  # only direction matters
    p10 = UserProfile("u1", interest=u, clicks=10)
    # h=.5 tau=.25 w=.3: base=[.75, .625, .3125]; cos=[0, 1, .70711]
    # rel = .7*base + .3*cos = [.525, .7375, .21875+.21213]
    np.testing.assert_allclose(
        personal_relevance(SCORES, VELOCITY, UNIT, TOPICS, SOURCES, p10),
        [0.525, 0.7375, 0.21875 + 0.3 * R2],
        rtol=1e-6,
    )
    p40 = UserProfile("u1", interest=u, clicks=40)  # capped at 20 clicks: w=.6, tau=0
    np.testing.assert_allclose(
        personal_relevance(SCORES, VELOCITY, UNIT, TOPICS, SOURCES, p40),
        [0.4, 0.4 * 0.5 + 0.6, 0.4 * 0.25 + 0.6 * R2],
        rtol=1e-6,
    )
    # clicks but no interest vector yet: velocity weight fades, no interest term
    np.testing.assert_allclose(
        personal_relevance(SCORES, VELOCITY, UNIT, TOPICS, SOURCES, UserProfile("u", clicks=20)),
        [1.0, 0.5, 0.25],
    )


def test_follows_boost_and_blocks_mask():
    p = UserProfile(
        "u1",
        follow_topics=frozenset({"sports"}),
        follow_sources=frozenset({"a.com"}),
        block_sources=frozenset({"b.com"}),
    )
    np.testing.assert_allclose(personal_relevance(SCORES, VELOCITY, UNIT, TOPICS, SOURCES, p), [0.7, 0.75, 0.575])
    assert blocked_mask(TOPICS, SOURCES, p).tolist() == [False, True, False]
    pt = UserProfile("u1", block_topics=frozenset({"tech", "sports"}))
    assert blocked_mask(TOPICS, SOURCES, pt).tolist() == [False, True, True]


# ---- light re-rank ---------------------------------------------------------------------
def _it(sid, dom, topics=()):
    return {"story_id": sid, "domain": dom, "topics": list(topics)}


def test_rerank_injects_newer_breaking_and_reapplies_blocks_and_cap():
    items = [
        _it("s1", "a.com"),
        _it("s2", "a.com"),
        _it("s3", "b.com"),
        _it("s4", "a.com"),
        _it("s5", "c.com", ["sports"]),
        _it("s6", "d.com"),
    ]
    breaking = [
        (1100.0, _it("s9", "a.com")),
        (900.0, _it("s8", "e.com")),
        (1200.0, _it("s3", "b.com")),
        (1150.0, _it("s7", "f.com", ["sports"])),
    ]
    p = UserProfile("u1", block_topics=frozenset({"sports"}))
    out = rerank(items, generated_at=1000.0, breaking=breaking, profile=p, k=20, source_cap=2)
    # s7 blocked (sports), s9 injected (newer than cache), s8 older than the cache, s3 already in;
    # a.com: s9, s1 kept, s2 and s4 over the cap; s5 blocked.
    assert [i["story_id"] for i in out] == ["s9", "s1", "s3", "s6"]
    assert out[0]["injected"] is True and "injected" not in out[1]
    assert [i["story_id"] for i in rerank(items, 1000.0, breaking, p, k=2)] == ["s9", "s1"]
