"""StoryState keeps its serving fields incrementally (no member list): on random member sequences, late earlier
copies and merges, every field equals the one computed from the whole member list by the definition."""

from __future__ import annotations

import json
import random

import pytest

from newsflow.core.outlets import outlet
from newsflow.core.story_state import InMemoryStoryStore, StoryState

DOMAINS = ["uk.reuters.com", "in.reuters.com", "bbc.co.uk", "www.bbc.co.uk", "example.com", ""]


def brute(members: dict[str, dict]) -> dict:
    """Serving fields from the whole member list, by the definition (the pre-delta code's algorithm)."""
    originals: dict[str, tuple[float, str]] = {}
    for aid, m in members.items():
        key = (m["t"], aid)
        cur = originals.get(m["cluster"])
        if cur is None or key < cur:
            originals[m["cluster"]] = key
    rep = min(((-members[a]["authority"], t, a) for t, a in originals.values()), default=None)
    r = members[rep[2]] if rep else {}
    return {
        "representative_id": rep[2] if rep else "",
        "title": r.get("title", ""),
        "url": r.get("url", ""),
        "domain": r.get("domain", ""),
        "authority": round(float(r.get("authority", 0.0)), 6),
        "article_count": len(members),
        "source_count": len({outlet(m["domain"]) for m in members.values() if m["domain"]}),
        "independent_count": len(originals),
        "languages": json.dumps(sorted({m["lang"] for m in members.values()})),
    }


def random_member(rng: random.Random, i: int, prefix: str) -> tuple[str, dict]:
    aid = f"{prefix}{i:03d}"
    return aid, {
        "t": float(rng.randrange(50)),  # ties on time are common: the article id breaks them
        "domain": rng.choice(DOMAINS),
        "cluster": f"c{rng.randrange(8)}",
        "authority": rng.choice([0.2, 0.5, 0.5, 0.9]),
        "title": f"title {aid}",
        "url": f"http://x/{aid}",
        "lang": rng.choice(["en", "de", "und"]),
    }


def add(state: StoryState, aid: str, m: dict) -> None:
    state.add_member(aid, m["t"], m["domain"], m["cluster"], m["authority"], m["title"], m["url"], m["lang"])


def fields(state: StoryState) -> dict:
    rec = state.serving_record()
    return {k: rec[k] for k in brute({})}


@pytest.mark.parametrize("seed", range(40))
def test_incremental_fields_equal_the_definition_in_any_arrival_order(seed):
    rng = random.Random(seed)
    members = dict(random_member(rng, i, "a") for i in range(rng.randrange(1, 30)))
    state = StoryState("s1")
    seen: dict[str, dict] = {}
    for aid in rng.sample(sorted(members), len(members)):  # arrival order unrelated to event time: late copies
        add(state, aid, members[aid])
        seen[aid] = members[aid]
        assert fields(state) == brute(seen)
    assert state.delta.added == {a: m["t"] for a, m in members.items()}
    assert set(state.delta.groups) == {m["cluster"] for m in members.values()}


@pytest.mark.parametrize("seed", range(40))
def test_merge_gives_the_fields_of_the_union(seed):
    rng = random.Random(1000 + seed)
    mw = dict(random_member(rng, i, "w") for i in range(rng.randrange(1, 20)))
    ml = dict(random_member(rng, i, "l") for i in range(rng.randrange(1, 20)))
    winner, loser = StoryState("sw"), StoryState("sl")
    for aid, m in mw.items():
        add(winner, aid, m)
    winner.committed()  # the winner's members are committed, the loser's are not
    for aid, m in ml.items():
        add(loser, aid, m)
    winner.absorb_members(loser)
    assert fields(winner) == brute({**mw, **ml})
    assert winner.delta.added == {a: m["t"] for a, m in ml.items()}
    assert winner.delta.absorbed == ["sl"]
    assert winner.delta.outlets == {outlet(m["domain"]) for m in ml.values() if m["domain"]} - {
        outlet(m["domain"]) for m in mw.values() if m["domain"]
    }


def test_json_is_fixed_size_and_leaves_members_to_the_store():
    small, big = StoryState("s1"), StoryState("s2")
    rng = random.Random(7)
    for i in range(5):
        add(small, *random_member(rng, i, "a"))
    for i in range(500):
        add(big, *random_member(rng, i, "b"))
    text = big.to_json()
    assert [f"b{i:03d}" for i in range(500) if f'"b{i:03d}"' in text] == [big.representative[1]]
    assert abs(len(big.to_json()) - len(small.to_json())) < 60  # counts, languages and the representative only
    back = StoryState.from_json(big.to_json(), groups=big.groups, outlets=big.outlets)
    assert back == big and back.serving_record() == big.serving_record() and not back.delta


def test_a_state_written_with_its_members_is_read_into_groups_outlets_and_a_delta():
    rng = random.Random(3)
    members = dict(random_member(rng, i, "a") for i in range(25))
    legacy = json.dumps({"story_id": "s1", "centroid": {"x": 1.0}, "members": members, "latest_time": 49.0})
    state = StoryState.from_json(legacy)
    assert fields(state) == brute(members)
    assert state.delta.added == {a: m["t"] for a, m in members.items()}
    assert state.centroid == {"x": 1.0} and "members" not in state.to_json()


def test_memory_store_members_follow_saves_and_merges():
    store = InMemoryStoryStore()
    a, b = StoryState("sa"), StoryState("sb")
    add(a, "a1", {"t": 1.0, "domain": "x.com", "cluster": "c1", "authority": 0.5, "title": "", "url": "", "lang": "en"})
    store.save(a, "a1")
    add(b, "b1", {"t": 2.0, "domain": "y.com", "cluster": "c2", "authority": 0.5, "title": "", "url": "", "lang": "en"})
    store.save(b, "b1")
    add(b, "b2", {"t": 3.0, "domain": "y.com", "cluster": "c2", "authority": 0.5, "title": "", "url": "", "lang": "en"})
    a.absorb_members(b)  # b2 is not saved yet: it reaches sa through the merge
    store.merge(b, a, 3.0, "b2")
    store.save(a, "b2")
    assert store.members == {"sa": {"a1": 1.0, "b1": 2.0, "b2": 3.0}, "sb": {"b1": 2.0, "b2": 3.0}}
    assert a.article_count == 3 and a.source_count() == 2 and a.independent_count() == 2 and not a.delta
