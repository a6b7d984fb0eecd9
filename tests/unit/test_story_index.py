"""The indexed story step (candidates from the inverted index, keys pruned by the score bound) gives
exactly the stories of scoring every live story, on real headlines; the index itself follows joins,
merges and expiry.

The reference store below hands the assigner every live story of the look-back window, whatever
terms it asks for: the brute-force scan the index replaces. Labels are compared per row (the resolved
story id of every article), which fixes the partition and the ids.
"""

from __future__ import annotations

import math
import os

import pytest

from cli.evaluation import clustering
from newsflow.core import story_state
from newsflow.core.stories import StoryConfig, lookup_keys
from newsflow.core.story_state import InMemoryStoryStore, StoryIndex, StoryState
from tests.conftest import REPO_ROOT, SHARED_DATA

MULTILINGUAL = os.path.join(REPO_ROOT, "data", "multilingual-stories", "stories.csv")
AGGREGATOR = os.path.join(SHARED_DATA, "news-aggregator-stories", "newsCorpora_2014-03-10_11.csv")


class BruteForceStore(InMemoryStoryStore):
    """Every live story of the window is a candidate (the scan over all live stories)."""

    def candidates(self, terms, entity_keys, since):
        return [s for s in self.stories.values() if s.latest_time >= since]


class CountingStore(InMemoryStoryStore):
    """The production in-memory store, counting what it hands out and how many stories were live."""

    calls = 0
    handed = 0
    live = 0

    def candidates(self, terms, entity_keys, since):
        out = super().candidates(terms, entity_keys, since)
        type(self).calls += 1
        type(self).handed += len(out)
        type(self).live += sum(1 for s in self.stories.values() if s.latest_time >= since)
        return out


def _labels(monkeypatch, store_cls, rows, config):
    monkeypatch.setattr(story_state, "InMemoryStoryStore", store_cls)
    return clustering.story_labels(rows, config=config)


@pytest.mark.parametrize(
    "path,config",
    [
        (MULTILINGUAL, StoryConfig()),
        (MULTILINGUAL, StoryConfig(time_scale_s=math.inf)),  # no look-back window: every story stays live
        (AGGREGATOR, StoryConfig()),
    ],
    ids=["multilingual", "multilingual-no-time", "news-aggregator"],
)
def test_indexed_step_gives_the_partition_of_scoring_every_live_story(monkeypatch, path, config):
    if not os.path.exists(path):
        pytest.skip(f"{path} is not present")
    rows = clustering.read_stories(path)
    CountingStore.calls = CountingStore.handed = CountingStore.live = 0
    indexed, indexed_stats = _labels(monkeypatch, CountingStore, rows, config)
    brute, brute_stats = _labels(monkeypatch, BruteForceStore, rows, config)
    assert indexed == brute
    assert indexed_stats == brute_stats
    assert brute_stats["merges"] > 0  # the merge path was exercised
    assert len(set(brute)) < len(rows)  # stories formed
    # the index handed out fewer stories than were live (it is not a scan in disguise)
    assert CountingStore.calls >= len(rows)
    assert CountingStore.handed < 0.5 * CountingStore.live


def test_lookup_keys_leaves_out_only_terms_that_cannot_reach_the_threshold():
    vec = {"a": 0.05, "b": 0.08, "c": 0.1, "d": 0.6, "e": 0.78}
    # 0.05^2 + 0.08^2 = 0.0089 < 0.1^2; adding c gives 0.0189 >= 0.01
    terms, with_entities = lookup_keys(vec, 1.0, threshold=0.3, entity_weight=0.2)
    assert sorted(terms) == ["c", "d", "e"] and not with_entities
    # entities alone can reach the threshold: they are looked up, and the term budget is the whole threshold
    terms, with_entities = lookup_keys(vec, 1.0, threshold=0.15, entity_weight=0.2)
    assert with_entities and sorted(terms) == ["d", "e"]  # sqrt(.0025+.0064+.01) = 0.137 < 0.15
    # a centroid of norm 10 scales the budget: the same weights x 10 give the same terms
    terms, _ = lookup_keys({k: 10 * w for k, w in vec.items()}, 10.0, threshold=0.15, entity_weight=0.2)
    assert sorted(terms) == ["d", "e"]
    # entities not looked up and a budget (0.3 - 0.28) below the lightest term: every term
    assert sorted(lookup_keys(vec, 1.0, threshold=0.3, entity_weight=0.28)[0]) == list("abcde")


def _story(sid, terms, ents=(), latest=0.0):
    return StoryState(
        sid, centroid=dict.fromkeys(terms, 1.0), entities={e: [e, "ORG", 1] for e in ents}, latest_time=latest
    )


def test_story_index_follows_changes_merges_and_expiry():
    idx = StoryIndex()
    a, b = _story("sa", ["x", "y"], ["E"], latest=100.0), _story("sb", ["y", "z"], latest=200.0)
    idx.put(a)
    idx.put(b)
    assert {s.story_id for s in idx.lookup(["y"], (), 0.0)} == {"sa", "sb"}
    assert {s.story_id for s in idx.lookup([], ["E"], 0.0)} == {"sa"}
    assert {s.story_id for s in idx.lookup(["y"], (), 150.0)} == {"sb"}  # look-back filter
    # a story whose centroid lost "x" and gained "w" (pruning, absorbing) moves in the index
    a.centroid = {"y": 1.0, "w": 1.0}
    a.latest_time = 300.0
    idx.put(a)
    assert idx.lookup(["x"], (), 0.0) == []
    assert [s.story_id for s in idx.lookup(["w"], (), 0.0)] == ["sa"]
    # a merge drops the loser
    idx.drop("sb")
    assert [s.story_id for s in idx.lookup(["z", "y"], (), 0.0)] == ["sa"]
    # expiry drops stories below the floor, not a story whose latest time moved past it since
    c = _story("sc", ["q"], latest=250.0)
    idx.put(c)
    idx.expire(260.0)
    assert set(idx.states) == {"sa"} and idx.floor == 260.0
    assert idx.lookup(["q"], (), -math.inf) == []
    assert len(idx) == 1


def test_in_memory_store_answers_a_look_back_older_than_its_index():
    store = InMemoryStoryStore(index_horizon_s=10.0)
    store.save(_story("s1", ["x"], latest=0.0))
    store.save(_story("s2", ["x"], latest=100.0))
    assert {s.story_id for s in store.candidates(["x"], (), 95.0)} == {"s2"}
    assert set(store.index.states) == {"s2"}  # s1 expired from the index (0 < 95 - 10)
    # a very late article's look-back reaches s1 again: answered from all stories
    assert {s.story_id for s in store.candidates(["x"], (), -5.0)} == {"s1", "s2"}
