"""The Redis key layout (newsflow.storage.keys): prefix validation, one namespace, hash-tagged groups in one slot."""

from __future__ import annotations

import pickle

import pytest
from redis.crc import key_slot

from newsflow.storage.keys import Keys


def every_key(k: Keys) -> dict[str, str]:
    """One instance of every key and pattern the layout names."""
    return {
        "lsh_band": k.lsh_band(2, "abcd"),
        "lsh_pattern": k.lsh_pattern,
        "fingerprints": k.fingerprints,
        "article_clusters": k.article_clusters,
        "article": k.article("a1"),
        "article_revisions": k.article_revisions,
        "article_versions": k.article_versions("a1"),
        "minhashes": k.minhashes,
        "cluster": k.cluster("c1"),
        "cluster_articles": k.cluster_articles("c1"),
        "cluster_sources": k.cluster_sources("c1"),
        "cluster_languages": k.cluster_languages("c1"),
        "clusters_by_size": k.clusters_by_size,
        "story": k.story("s1"),
        "story_articles": k.story_articles("s1"),
        "story_state": k.story_state("s1"),
        "story_groups": k.story_groups("s1"),
        "story_outlets": k.story_outlets("s1"),
        "story_assign": k.story_assign,
        "story_active": k.story_active,
        "story_merges": k.story_merges,
        "story_pattern": k.story_pattern,
        "topic_lambdas": k.topic_lambdas,
        "user": k.user("u1"),
        "active_users": k.active_users,
        "events": k.events,
        "events_flushed": k.events_flushed,
        "breaking": k.breaking,
        "breaking_since": k.breaking_since,
        "breaking_windows": k.breaking_windows("s1"),
        "trending": k.trending("story", 1700000000.0),
        "trending_windows": k.trending_windows("entity"),
        "trending_pattern": k.trending_pattern,
        "pool": k.pool("edition", "en"),
        "pool_pattern": k.pool_pattern("topic"),
        "pools": k.pool_pattern(),
        "feed": k.feed("user", "u1"),
        "feed_pattern": k.feed_pattern("edition"),
        "feeds": k.feed_pattern(),
        "replay_clock": k.replay_clock,
        "crawl_task": k.crawl_task("t1"),
        "crawl_queue": k.crawl_queue("e.test"),
        "crawl_hosts": k.crawl_hosts,
        "crawl_host": k.crawl_host("e.test"),
        "crawl_leases": k.crawl_leases,
        "crawl_feeds": k.crawl_feeds,
        "crawl_domain": k.crawl_domain("e.test"),
        "crawl_seen": k.crawl_seen("a1"),
        "crawl_feed_items": k.crawl_feed_items("t1"),
        "crawl_robots": k.crawl_robots("https://e.test"),
        "crawl_priority": k.crawl_priority,
        "story_lease": k.story_lease,
        "crawl_deadletter": k.crawl_deadletter,
        "crawl_stats": k.crawl_stats,
        "pattern": k.pattern,
    }


def test_the_default_layout_keeps_the_untagged_names_and_tags_the_script_and_transaction_groups():
    k = Keys()
    assert k.prefix == "nf"
    assert k.lsh_bands("123456789abcdef0") == [
        "nf:{nd}:lsh:0:def0",
        "nf:{nd}:lsh:1:9abc",
        "nf:{nd}:lsh:2:5678",
        "nf:{nd}:lsh:3:1234",
    ]
    assert k.article("a1") == "nf:{nd}:article:a1" and k.cluster_languages("c") == "nf:{nd}:cluster:c:languages"
    assert k.story("s1") == "nf:{story}:story:s1" and k.story_active == "nf:{story}:story:active"
    assert k.crawl_queue("e.test") == "nf:{crawl}:crawl:q:e.test" and k.crawl_scheduling == "nf:{crawl}:crawl:"
    # untagged keys are exactly the names used before the layout existed
    assert [
        k.topic_lambdas,
        k.user("u1"),
        k.active_users,
        k.events,
        k.events_flushed,
        k.breaking,
        k.breaking_since,
        k.trending("story", 1700000000.9),
        k.trending_windows("story"),
        k.pool("topic", "world"),
        k.feed("edition", "en"),
        k.replay_clock,
        k.crawl_priority,
        k.crawl_seen("a1"),
        k.crawl_stats,
    ] == [
        "nf:lambda:topic",
        "nf:user:u1",
        "nf:users:active",
        "nf:events",
        "nf:events:flushed",
        "nf:breaking",
        "nf:breaking:since",
        "nf:trending:story:1700000000",
        "nf:trending:windows:story",
        "nf:pool:topic:world",
        "nf:feed:edition:en",
        "nf:clock:replay",
        "nf:crawl:priority",
        "nf:crawl:seen:a1",
        "nf:crawl:stats",
    ]
    assert k.feed_pattern("edition") == "nf:feed:edition:*" and k.story_pattern == "nf:{story}:story:*"


@pytest.mark.parametrize("bad", ["", "{nf}", "a:b", "nf*", "a b", "x" * 33, None, 7])
def test_a_prefix_that_is_not_a_plain_namespace_is_refused(bad):
    with pytest.raises(ValueError, match="key prefix"):
        Keys(bad)


@pytest.mark.parametrize("prefix", ["nf", "alt", "team-a.prod_2"])
def test_every_key_and_pattern_is_under_the_prefix(prefix):
    k = Keys(prefix)
    for name, key in every_key(k).items():
        assert key.startswith(prefix + ":"), (name, key)
    other = every_key(Keys(prefix + "x"))
    assert not set(every_key(k).values()) & set(other.values())


def test_tagged_groups_share_one_cluster_slot_and_other_keys_spread():
    k = Keys("alt")
    groups = {
        "nd": [
            k.fingerprints,
            k.article_clusters,
            k.article("a9"),
            k.cluster("c1"),
            k.cluster_articles("c2"),
            k.cluster_sources("c3"),
            k.cluster_languages("c4"),
            k.clusters_by_size,
            *k.lsh_bands("0123456789abcdef"),
        ],
        "story": [
            k.story("s1"),
            k.story("s2"),
            k.story_articles("s3"),
            k.story_state("s4"),
            k.story_groups("s5"),
            k.story_outlets("s6"),
            k.story_assign,
            k.story_active,
            k.story_merges,
        ],
        "crawl": [
            k.crawl_task("t1"),
            k.crawl_queue("a.test"),
            k.crawl_queue("b.test"),
            k.crawl_hosts,
            k.crawl_host("a.test"),
            k.crawl_leases,
        ],
    }
    slots = {}
    for name, keys in groups.items():
        group_slots = {key_slot(key.encode()) for key in keys}
        assert len(group_slots) == 1, (name, group_slots)
        slots[name] = group_slots.pop()
    assert len(set(slots.values())) == 3
    untagged = [k.user(f"u{i}") for i in range(20)] + [k.feed("user", f"u{i}") for i in range(20)]
    assert all("{" not in key for key in untagged)
    assert len({key_slot(key.encode()) for key in untagged}) > 30


def test_parsers_and_pickling():
    k = Keys("alt")
    assert k.story_id_of(b"alt:{story}:story:s1") == "s1"
    assert [
        k.story_id_of(x)
        for x in (
            k.story_articles("s1"),
            k.story_state("s1"),
            k.story_groups("s1"),
            k.story_outlets("s1"),
            k.story_assign,
            k.story_active,
            k.story_merges,
            Keys().story("s1"),
        )
    ] == [None] * 8
    assert k.feed_name_of("edition", "alt:feed:edition:en") == "en"
    assert k.feed_name_of("edition", "alt:feed:topic:en") is None
    assert k.feed_name_of("edition", "nf:feed:edition:en") is None
    with pytest.raises(ValueError):
        k.feed("story", "x")
    with pytest.raises(ValueError):
        k.pool("user", "x")
    assert pickle.loads(pickle.dumps(k)) == k
