"""Story clustering: joins, separations, merges, replay idempotence, serving fields (in-memory store)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from newsflow.core.embedding import TextModel, load_text_model
from newsflow.core.stories import StoryAssigner, StoryConfig
from newsflow.core.story_state import InMemoryStoryStore, StoryState
from newsflow.schemas import StoryArticle


def tiny_model() -> TextModel:
    """Every IDF is 1, so TF-IDF vectors are plain normalized term counts (hand-computable)."""
    vocab = ["alpha", "beta", "delta", "gamma"]
    return TextModel(vocab, np.ones(4, np.float32), 1.0, np.eye(4, dtype=np.float32))


HAND = StoryConfig(join_threshold=0.5, merge_threshold=0.35, time_scale_s=math.inf, entity_weight=0.0)


def art(aid, t, title, **kw):
    return StoryArticle(article_id=aid, event_time=t, title=title, **kw)


def test_merge_when_an_article_bridges_two_stories():
    store = InMemoryStoryStore()
    c = StoryAssigner(store, tiny_model(), HAND)
    a1 = c.add(art("a1", 0, "alpha beta"))
    a2 = c.add(art("a2", 60, "gamma delta"))
    assert a1.created and a2.created and a1.story_id == "sa1" and a2.story_id == "sa2"
    # a3 = (.5,.5,.5,.5): cosine 1/sqrt(2) = 0.7071 to both stories; the tie goes to the smaller id.
    a3 = c.add(art("a3", 120, "alpha beta gamma delta"))
    assert a3.story_id == "sa1" and not a3.created
    assert a3.score == pytest.approx(0.707107, abs=1e-6)
    # sa1's centroid is now (1.2071, 1.2071, .5, .5); its cosine to sa2 is cos(67.5 deg) = 0.38268 >= 0.35
    assert a3.merged == ("sa2",)
    assert store.resolve("sa2") == "sa1"
    assert store.merges == [{"from": "sa2", "into": "sa1", "time": 120.0, "article_id": "a3"}]
    story = store.get("sa1")
    assert sorted(store.members["sa1"]) == ["a1", "a2", "a3"] and story.article_count == 3
    assert story.merged_from == ["sa2"]
    assert store.get("sa2") is None


def test_no_merge_below_threshold():
    cfg = StoryConfig(join_threshold=0.5, merge_threshold=0.39, time_scale_s=math.inf, entity_weight=0.0)
    store = InMemoryStoryStore()
    c = StoryAssigner(store, tiny_model(), cfg)
    for i, title in enumerate(["alpha beta", "gamma delta", "alpha beta gamma delta"]):
        c.add(art(f"a{i + 1}", 60 * i, title))
    assert store.merges == []  # 0.38268 < 0.39
    assert sorted(store.stories) == ["sa1", "sa2"]


def test_replay_is_idempotent():
    store = InMemoryStoryStore()
    c = StoryAssigner(store, tiny_model(), HAND)
    inputs = [
        art("a1", 0, "alpha beta", source_domain="x.com"),
        art("a2", 10, "alpha beta gamma", source_domain="y.com"),
    ]
    first = [c.add(a) for a in inputs]
    before = store.get("sa1").to_json()
    again = [c.add(a) for a in inputs]
    assert [r.story_id for r in again] == [r.story_id for r in first] == ["sa1", "sa1"]
    assert all(r.duplicate for r in again) and not any(r.duplicate for r in first)
    assert store.get("sa1").to_json() == before
    assert store.get("sa1").serving_record()["article_count"] == 2


def test_time_decay_keeps_a_stale_story_closed():
    cfg = StoryConfig(join_threshold=0.5, merge_threshold=0.9, time_scale_s=3600.0, entity_weight=0.0)
    store = InMemoryStoryStore()
    c = StoryAssigner(store, tiny_model(), cfg)
    c.add(art("a1", 0, "alpha beta"))
    # same text 1 h later: score exp(-1) = 0.368 < 0.5 -> a new story
    r = c.add(art("a2", 3600, "alpha beta"))
    assert r.created
    # 30 min after a2: exp(-0.5) = 0.607 to sa2 (sa1 is 1.5 h old: 0.223)
    r3 = c.add(art("a3", 5400, "alpha beta"))
    assert r3.story_id == "sa2" and r3.score == pytest.approx(math.exp(-0.5), abs=1e-6)


def test_entity_overlap_adds_to_the_score():
    cfg = StoryConfig(join_threshold=0.5, merge_threshold=0.9, time_scale_s=math.inf, entity_weight=0.2)
    store = InMemoryStoryStore()
    c = StoryAssigner(store, tiny_model(), cfg)
    ent = (("PERSON:tim cook", "Tim Cook", "PERSON"),)
    c.add(art("a1", 0, "alpha beta gamma", entities=ent))
    # cosine (1,1,0,0)/sqrt2 . (1,1,1,0)/sqrt3 = 2/sqrt6 = 0.8165, + 0.2 * 1.0 overlap
    r = c.add(art("a2", 1, "alpha beta", entities=ent))
    assert r.score == pytest.approx(2 / math.sqrt(6) + 0.2, abs=1e-6)


def test_independent_reports_sources_and_representative():
    store = InMemoryStoryStore()
    c = StoryAssigner(store, tiny_model(), HAND)
    emb1 = np.array([1, 0, 0, 0], np.float32)
    emb2 = np.array([0, 1, 0, 0], np.float32)
    c.add(
        art(
            "w1",
            0,
            "alpha beta",
            source_domain="wire.com",
            cluster_id="cw1",
            authority=0.60,
            language="en",
            topics=(("Business", 0.9),),
            embedding=emb1,
        )
    )
    # syndicated copy of w1 on a high-authority site: not an independent report, cannot represent
    c.add(
        art(
            "w2",
            5,
            "alpha beta",
            source_domain="big.com",
            cluster_id="cw1",
            authority=0.95,
            language="en",
            topics=(("Business", 0.7),),
            embedding=emb1,
        )
    )
    c.add(
        art(
            "o1",
            9,
            "alpha beta delta",
            source_domain="paper.com",
            cluster_id=None,
            authority=0.80,
            language="de",
            embedding=emb2,
        )
    )
    rec = store.get("sw1").serving_record()
    assert rec["article_count"] == 3
    assert rec["source_count"] == 3
    assert rec["independent_count"] == 2
    assert rec["representative_id"] == "o1" and rec["domain"] == "paper.com" and rec["authority"] == 0.8
    assert rec["earliest_time"] == 0 and rec["latest_time"] == 9
    assert json.loads(rec["languages"]) == ["de", "en"]
    assert json.loads(rec["topics"]) == {"Business": pytest.approx(0.8)}
    e = np.frombuffer(rec["embedding"], dtype="<f4")
    # mean of (1,0,0,0),(1,0,0,0),(0,1,0,0) = (2/3, 1/3, 0, 0), normalized
    assert e == pytest.approx(np.array([2, 1, 0, 0]) / math.sqrt(5), abs=1e-6)
    assert rec["merged_into"] == ""


def test_state_round_trips_through_json():
    s = StoryState("s1", centroid={"a": 1.5}, entities={"ORG:x": ["X", "ORG", 2]}, earliest_time=1.0, latest_time=2.0)
    assert StoryState.from_json(s.to_json()) == s


def test_bad_input_is_a_clear_error():
    c = StoryAssigner(InMemoryStoryStore(), tiny_model(), HAND)
    with pytest.raises(ValueError, match="event_time"):
        c.add(art("a1", float("nan"), "alpha"))
    with pytest.raises(ValueError, match="article_id"):
        c.add(art("", 0, "alpha"))
    with pytest.raises(ValueError, match="join_threshold"):
        StoryConfig(join_threshold=0).validate()


# ---- the shipped model, default thresholds: real headlines -------------------------------------
T0 = 1394470501.0  # 2014-03-10 16:55 UTC


@pytest.fixture(scope="module")
def shipped():
    return load_text_model()


def test_two_rewrites_of_one_event_join_and_other_events_stay_apart(shipped):
    store = InMemoryStoryStore()
    c = StoryAssigner(store, shipped)
    items = [
        art(
            "b1",
            T0,
            "Chiquita and Fyffes agree merger to create world's largest banana company",
            url="http://a.com/2014/03/10/chiquita-fyffes-merger-banana/",
        ),
        art(
            "m1",
            T0 + 300,
            "Malaysia Airlines flight MH370 missing over South China Sea",
            url="http://b.com/world/malaysia-airlines-jet-missing",
        ),
        art(
            "b2",
            T0 + 600,
            "Chiquita, Fyffes merge to form world's biggest banana supplier",
            url="http://c.com/business/chiquita-fyffes-banana-deal",
        ),
        art(
            "m2",
            T0 + 900,
            "Search for missing Malaysia Airlines jet widens",
            url="http://d.com/news/search-for-missing-malaysia-airlines-jet",
        ),
        art(
            "p1",
            T0 + 1200,
            "Colorado collects $2 million in January marijuana taxes",
            url="http://e.com/colorado-pot-tax-revenue",
        ),
    ]
    res = {a.article_id: c.add(a) for a in items}
    assert res["b2"].story_id == res["b1"].story_id == "sb1"
    assert res["m2"].story_id == res["m1"].story_id == "sm1"
    assert res["p1"].created
    assert len({store.resolve(r.story_id) for r in res.values()}) == 3
    assert store.merges == []


def test_same_words_a_day_later_is_a_new_story(shipped):
    store = InMemoryStoryStore()
    c = StoryAssigner(store, shipped)
    c.add(art("x1", T0, "Xbox Live outage hits Titanfall launch"))
    r = c.add(art("x2", T0 + 86400, "Xbox Live outage hits Titanfall launch"))
    # decay exp(-24 h / 6 h) = 0.018: even an identical headline cannot reopen the story
    assert r.created
