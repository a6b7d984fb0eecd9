"""Outlets, not hostnames, in ranking: the two-per-source cap, blocks and follows key on the registrable
domain (uk.reuters.com, in.reuters.com and reuters.com are one outlet)."""

from __future__ import annotations

import numpy as np

from newsflow.core.ranking.feeds import Candidates, FeedConfig, build_public_feeds, compute_pools
from newsflow.core.ranking.rerank import is_blocked, rerank, without_blocked
from newsflow.schemas import StoryRecord, UserProfile
from newsflow.storage.ranking import user_from_hash

NOW = 1_700_000_000.0


def _story(sid: str, domain: str, authority: float, axis: int) -> StoryRecord:
    emb = np.zeros(128, dtype=np.float32)
    emb[axis] = 1.0  # orthogonal embeddings: MMR has no similarity reason to skip any story
    return StoryRecord(
        story_id=sid,
        title=sid,
        url=f"https://{domain}/{sid}",
        domain=domain,
        representative_id="a" + sid,
        article_count=1,
        source_count=1,
        independent_count=1,
        earliest_time=NOW - 3600,
        latest_time=NOW - 3600,
        topics=["world"],
        languages=["en"],
        authority=authority,
        embedding=emb,
        entities=[],
        merged_into="",
    )


def test_public_feed_caps_two_per_outlet_not_per_host():
    # the four most authoritative stories come from three reuters hosts; a per-host cap kept all four
    stories = [
        _story("r1", "www.reuters.com", 0.99, 0),
        _story("r2", "uk.reuters.com", 0.98, 1),
        _story("r3", "in.reuters.com", 0.97, 2),
        _story("r4", "uk.reuters.com", 0.96, 3),
        _story("b1", "www.bbc.co.uk", 0.50, 4),
        _story("b2", "news.bbc.co.uk", 0.49, 5),
        _story("b3", "bbc.co.uk", 0.48, 6),
        _story("x1", "example.org", 0.30, 7),
    ]
    cands = Candidates(stories, NOW, {}, [], {})
    assert cands.sources[:4] == ["reuters.com"] * 4
    feeds = build_public_feeds(cands, compute_pools(cands), NOW)
    ids = [it["story_id"] for it in feeds[("edition", "global")]["stories"]]
    # page 1 by authority: two reuters, then two bbc, then example.org; the other three are over its cap and
    # open page 2 (each page of 20 has its own cap)
    assert ids == ["r1", "r2", "b1", "b2", "x1", "r3", "r4", "b3"]
    one_page = build_public_feeds(cands, compute_pools(cands), NOW, FeedConfig(k=5, depth=5))
    assert [it["story_id"] for it in one_page[("edition", "global")]["stories"]] == ["r1", "r2", "b1", "b2", "x1"]


def test_rerank_blocks_and_caps_by_outlet():
    items = [
        {"story_id": "1", "domain": "uk.reuters.com", "topics": ["world"]},
        {"story_id": "2", "domain": "in.reuters.com", "topics": ["world"]},
        {"story_id": "3", "domain": "reuters.com", "topics": ["business"]},
        {"story_id": "4", "domain": "www.bbc.co.uk", "topics": ["sport"]},
        {"story_id": "5", "domain": "apnews.com", "topics": ["sport"]},
    ]
    anon = UserProfile("u")
    assert [i["story_id"] for i in rerank(items, 0.0, [], anon, k=10, source_cap=2)] == ["1", "2", "4", "5"]
    blocker = UserProfile("u", block_sources=frozenset({"reuters.com"}), block_topics=frozenset({"sport"}))
    assert rerank(items, 0.0, [], blocker, k=10) == []
    no_bbc = UserProfile("u", block_sources=frozenset({"bbc.co.uk"}))
    assert [i["story_id"] for i in without_blocked(items, no_bbc)] == ["1", "2", "3", "5"]
    assert is_blocked({"domain": "news.bbc.co.uk", "topics": []}, no_bbc)


def test_stored_host_blocks_and_follows_become_outlets():
    h = {
        b"block_sources": b'["uk.reuters.com", "WWW.BBC.CO.UK"]',
        b"follow_sources": b'["https://in.reuters.com/world"]',
        b"block_topics": b'["Sport"]',
    }
    p = user_from_hash("u1", h)
    assert p.block_sources == frozenset({"reuters.com", "bbc.co.uk"})
    assert p.follow_sources == frozenset({"reuters.com"})
    assert p.block_topics == frozenset({"sport"})
