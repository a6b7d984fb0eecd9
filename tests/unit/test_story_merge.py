"""The live-story merge rule: two stories that converge as articles arrive (no single bridging article)
are merged, the earliest-founded survives (ties: smaller id), the merge is stricter than a join.

Expected scores are computed here from the definition (unit term-count vectors, centroid = sum of
member vectors, cosine of centroids) with numpy, not taken from the clusterer.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from newsflow.core.embedding import TextModel
from newsflow.core.stories import StoryAssigner, StoryConfig
from newsflow.core.story_state import InMemoryStoryStore
from newsflow.schemas import StoryArticle

VOCAB = ["alpha", "beta", "delta", "gamma"]
CFG = StoryConfig(join_threshold=0.5, merge_threshold=0.35, time_scale_s=math.inf, entity_weight=0.0)


def tiny_model() -> TextModel:
    """Every IDF is 1: an article vector is its normalized term counts."""
    return TextModel(VOCAB, np.ones(4, np.float32), 1.0, np.eye(4, dtype=np.float32))


def unit(title: str) -> np.ndarray:
    v = np.array([title.split().count(w) for w in VOCAB], float)
    return v / np.linalg.norm(v)


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


# Story A starts "alpha beta", story B "gamma delta"; then each grows by one article leaning towards
# the other ("alpha beta gamma" joins A, "gamma delta alpha" joins B). After the first drift the two
# centroids are still apart; after the second they have converged past merge_threshold.
A1, B1, DRIFT_A, DRIFT_B = "alpha beta", "gamma delta", "alpha beta gamma", "gamma delta alpha"


def test_expected_scores_from_the_definition():
    after_one = cos(unit(A1) + unit(DRIFT_A), unit(B1))
    after_both = cos(unit(A1) + unit(DRIFT_A), unit(B1) + unit(DRIFT_B))
    assert after_one == pytest.approx(0.214186, abs=1e-6) and after_one < CFG.merge_threshold
    assert after_both == pytest.approx(0.408248, abs=1e-6) and after_both >= CFG.merge_threshold
    # each drifting article still joins its own story (>= join 0.5), not the other one
    assert cos(unit(DRIFT_A), unit(A1)) == pytest.approx(0.816497, abs=1e-6)
    assert cos(unit(DRIFT_B), unit(B1)) == pytest.approx(0.816497, abs=1e-6)
    assert cos(unit(DRIFT_B), unit(A1) + unit(DRIFT_A)) == pytest.approx(0.563952, abs=1e-6)


@pytest.mark.parametrize("drift_a_first", [True, False])
def test_converging_stories_merge_into_the_earliest(drift_a_first):
    store = InMemoryStoryStore()
    c = StoryAssigner(store, tiny_model(), CFG)
    assert c.add(StoryArticle("a1", 0.0, A1)).story_id == "sa1"
    assert c.add(StoryArticle("a2", 10.0, B1)).story_id == "sa2"
    first, second = (("a3", DRIFT_A), ("a4", DRIFT_B)) if drift_a_first else (("a4", DRIFT_B), ("a3", DRIFT_A))
    r1 = c.add(StoryArticle(first[0], 20.0, first[1]))
    assert r1.merged == () and sorted(store.stories) == ["sa1", "sa2"]  # 0.2142 < 0.35: still two
    r2 = c.add(StoryArticle(second[0], 30.0, second[1]))
    # the second drift makes the centroids converge (0.4082 >= 0.35): sa2 (founded later) merges into sa1
    assert r2.story_id == "sa1" and r2.merged == ("sa2",) and not r2.created
    assert r2.score == pytest.approx(0.816497, abs=1e-6)  # its join score, to its own story
    assert sorted(store.stories) == ["sa1"]
    assert sorted(store.members["sa1"]) == ["a1", "a2", "a3", "a4"] and store.stories["sa1"].article_count == 4
    assert sorted(store.members["sa2"]) == ["a2", "a4"]  # the retired story keeps its members at retirement
    assert store.stories["sa1"].merged_from == ["sa2"]
    assert store.resolve("sa2") == "sa1"
    assert store.merges == [{"from": "sa2", "into": "sa1", "time": 30.0, "article_id": second[0]}]
    assert [store.resolve(store.assign[a]) for a in ("a1", "a2", "a3", "a4")] == ["sa1"] * 4


def test_survivor_is_the_earliest_founded_not_the_smaller_id():
    store = InMemoryStoryStore()
    c = StoryAssigner(store, tiny_model(), CFG)
    c.add(StoryArticle("z1", 0.0, A1))  # story sz1, founded first
    c.add(StoryArticle("b2", 5.0, B1))  # story sb2: smaller id, founded later
    c.add(StoryArticle("z3", 20.0, DRIFT_A))
    r = c.add(StoryArticle("b4", 30.0, DRIFT_B))  # sb2 grows and triggers the merge
    assert r.story_id == "sz1" and r.merged == ("sb2",)
    assert store.resolve("sb2") == "sz1"


def test_ties_in_founding_time_go_to_the_smaller_id():
    store = InMemoryStoryStore()
    c = StoryAssigner(store, tiny_model(), CFG)
    c.add(StoryArticle("m1", 0.0, A1))
    c.add(StoryArticle("k2", 0.0, B1))  # same founding time: sk2 < sm1
    c.add(StoryArticle("m3", 20.0, DRIFT_A))
    r = c.add(StoryArticle("k4", 30.0, DRIFT_B))
    assert r.story_id == "sk2" and r.merged == ("sm1",)


def test_merge_is_stricter_than_a_join():
    # merge threshold just above the converged score (0.4082): the stories stay apart
    cfg = StoryConfig(join_threshold=0.5, merge_threshold=0.41, time_scale_s=math.inf, entity_weight=0.0)
    store = InMemoryStoryStore()
    c = StoryAssigner(store, tiny_model(), cfg)
    for aid, t, title in (("a1", 0.0, A1), ("a2", 10.0, B1), ("a3", 20.0, DRIFT_A), ("a4", 30.0, DRIFT_B)):
        c.add(StoryArticle(aid, t, title))
    assert store.merges == [] and sorted(store.stories) == ["sa1", "sa2"]
    assert StoryConfig().merge_threshold > StoryConfig().join_threshold
