"""The Redis key layout (newsflow.storage.keys): prefix validation, one namespace, hash-tagged groups in one slot."""

from __future__ import annotations

import pickle

import pytest
from redis.crc import key_slot

from newsflow.storage.keys import EVENT_SHARDS, READER_BUCKETS, Keys, event_shard, reader_bucket


def every_key(k: Keys) -> dict[str, str]:
    """One instance of every key and pattern the layout names."""
    return {
        "lsh_band": k.lsh_band(2, "abcd"),
        "lsh_band_ids": k.lsh_band_ids(2, "abcd"),
        "lsh_pattern": k.lsh_pattern,
        "article": k.article("a1"),
        "article_record": k.article_record("a1"),
        "article_versions": k.article_versions("a1"),
        "cluster": k.cluster("c1"),
        "cluster_articles": k.cluster_articles("c1"),
        "cluster_sources": k.cluster_sources("c1"),
        "cluster_languages": k.cluster_languages("c1"),
        "clusters_by_size": k.clusters_by_size(7),
        "clusters_by_latest": k.clusters_by_latest(7),
        "nd_lease": k.nd_lease,
        "nd_count": k.nd_count,
        "story": k.story("s1"),
        "story_articles": k.story_articles("s1"),
        "story_state": k.story_state("s1"),
        "story_groups": k.story_groups("s1"),
        "story_outlets": k.story_outlets("s1"),
        "story_assign": k.story_assign(7),
        "story_active": k.story_active(7),
        "story_retired": k.story_retired(7),
        "story_merges": k.story_merges(7),
        "story_pattern": k.story_pattern,
        "story_journal": k.story_journal,
        "topic_lambdas": k.topic_lambdas,
        "user": k.user("u1"),
        "reader_read": k.reader_read("u1"),
        "reader_seen": k.reader_seen("u1"),
        "reader_saved": k.reader_saved("u1"),
        "active_users": k.active_users(7),
        "events": k.events(7),
        "events_flushed": k.events_flushed(7),
        "model_pointers": k.model_pointers,
        "model_manifest": k.model_manifest,
        "model": k.model("decay", "2026-12-01"),
        "model_bucket": k.model_bucket("interest", "2026-12-01", 4095),
        "breaking": k.breaking,
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
        "crawl_task": k.crawl_task("e.test", "t1"),
        "crawl_queue": k.crawl_queue("e.test"),
        "crawl_hosts": k.crawl_hosts(7),
        "crawl_host": k.crawl_host("e.test"),
        "crawl_leases": k.crawl_leases(7),
        "crawl_held": k.crawl_held(7),
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
        "nf:{lsh:0:def0}:fps",
        "nf:{lsh:1:9abc}:fps",
        "nf:{lsh:2:5678}:fps",
        "nf:{lsh:3:1234}:fps",
    ]
    assert k.article("a1") == "nf:{art:a1}:article" and k.cluster_languages("c") == "nf:{ndg:c}:cluster:languages"
    assert k.story("s1") == "nf:{st:s1}:story" and k.story_articles("s1") == "nf:{st:s1}:story:articles"
    assert k.story_active(5) == "nf:{sx:5}:story:active" and k.story_assign(9) == "nf:{sa:9}:story:assign"
    b = k.crawl_bucket("e.test")
    assert k.crawl_queue("e.test") == f"nf:{{cr:{b}}}:crawl:q:e.test"
    assert k.crawl_scheduling(b) == f"nf:{{cr:{b}}}:crawl:"
    # untagged keys are exactly the names used before the layout existed
    assert [
        k.topic_lambdas,
        k.user("u1"),
        k.breaking,
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
        "nf:breaking",
        "nf:trending:story:1700000000",
        "nf:trending:windows:story",
        "nf:pool:topic:world",
        "nf:feed:edition:en",
        "nf:clock:replay",
        "nf:crawl:priority",
        "nf:crawl:seen:a1",
        "nf:crawl:stats",
    ]
    assert k.feed_pattern("edition") == "nf:feed:edition:*" and k.story_pattern == "nf:{st:*"


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
        "story writer": [k.story_lease, k.story_journal],
        "crawl host a.test": [
            k.crawl_task("a.test", "t1"),
            k.crawl_queue("a.test"),
            k.crawl_hosts(k.crawl_bucket("a.test")),
            k.crawl_host("a.test"),
            k.crawl_leases(k.crawl_bucket("a.test")),
        ],
    }
    slots = {}
    for name, keys in groups.items():
        group_slots = {key_slot(key.encode()) for key in keys}
        assert len(group_slots) == 1, (name, group_slots)
        slots[name] = group_slots.pop()
    assert len(set(slots.values())) == 2
    untagged = [k.user(f"u{i}") for i in range(20)] + [k.feed("user", f"u{i}") for i in range(20)]
    assert all("{" not in key for key in untagged)
    assert len({key_slot(key.encode()) for key in untagged}) > 30


def test_parsers_and_pickling():
    k = Keys("alt")
    assert k.feed_name_of("edition", "alt:feed:edition:en") == "en"
    assert k.feed_name_of("edition", "alt:feed:topic:en") is None
    assert k.feed_name_of("edition", "nf:feed:edition:en") is None
    with pytest.raises(ValueError):
        k.feed("story", "x")
    with pytest.raises(ValueError):
        k.pool("user", "x")
    assert pickle.loads(pickle.dumps(k)) == k


def test_a_readers_state_shares_their_model_bucket_slot_and_readers_spread():
    k = Keys()
    b = reader_bucket("u1")
    assert k.reader_read("u1") == f"nf:{{r{b}}}:reader:u1:read"
    same = {k.reader_read("u1"), k.reader_seen("u1"), k.reader_saved("u1"), k.model_bucket("interest", "d", b)}
    assert len({key_slot(key.encode()) for key in same}) == 1
    assert len({key_slot(k.reader_read(f"u{i}").encode()) for i in range(50)}) > 40


def test_reader_models_events_and_active_readers_spread_over_buckets_and_shards():
    k = Keys()
    assert k.model_bucket("interest", "2026-12-01", 17) == "nf:{r17}:model:interest:2026-12-01"
    assert k.events(3) == "nf:{s3}:events" and k.events_flushed(3) == "nf:{s3}:events:flushed"
    assert k.active_users(3) == "nf:{s3}:users:active" and k.model_pointers == "nf:models:pointers"
    # a reader's models of every name and version share its bucket's slot; a shard's keys share one slot
    b = reader_bucket("reader-42")
    assert 0 <= b < READER_BUCKETS and b == reader_bucket("reader-42")  # stable
    slots = {key_slot(k.model_bucket(n, v, b).encode()) for n in ("interest", "history") for v in ("d1", "d2")}
    assert len(slots) == 1
    assert len({key_slot(x.encode()) for x in (k.events(9), k.events_flushed(9), k.active_users(9))}) == 1
    assert event_shard("reader-42") == b % EVENT_SHARDS and READER_BUCKETS % EVENT_SHARDS == 0
    # the CRC-32 buckets of 50,000 synthetic ids are even: no bucket gets twice its share
    counts = [0] * READER_BUCKETS
    for i in range(50_000):
        counts[reader_bucket(f"u{i}")] += 1
    assert max(counts) < 2 * 50_000 / READER_BUCKETS
    bucket_slots = {key_slot(k.model_bucket("interest", "d", i).encode()) for i in range(READER_BUCKETS)}
    shard_slots = {key_slot(k.events(i).encode()) for i in range(EVENT_SHARDS)}
    assert len(bucket_slots) > 0.75 * READER_BUCKETS and len(shard_slots) > 0.9 * EVENT_SHARDS


def test_near_duplicate_keys_are_tagged_by_their_entity_and_spread_over_slots():
    """Every near-duplicate key family's hash tag holds the id of one entity (band bucket, article, group, index
    shard): the keys of one entity share a slot, different entities' keys spread; the lease and the counter are
    single untagged keys."""
    import re

    k = Keys("alt")
    families = {
        "band bucket": lambda i: [k.lsh_band(i % 4, f"{i:04x}"), k.lsh_band_ids(i % 4, f"{i:04x}")],
        "article": lambda i: [k.article(f"a{i}"), k.article_record(f"a{i}"), k.article_versions(f"a{i}")],
        "group": lambda i: [
            k.cluster(f"ca{i}"),
            k.cluster_articles(f"ca{i}"),
            k.cluster_sources(f"ca{i}"),
            k.cluster_languages(f"ca{i}"),
        ],
        "index shard": lambda i: [k.clusters_by_size(i), k.clusters_by_latest(i)],
    }
    for name, keys_of in families.items():
        slots = set()
        for i in range(200):
            keys = keys_of(i)
            tags = {re.search(r"{([^}]*)}", key).group(1) for key in keys}
            assert len(tags) == 1, (name, keys)
            assert str(i) in tags.pop() or f"{i:04x}" in keys[0], (name, keys)
            slots |= {key_slot(key.encode()) for key in keys}
        assert len(slots) > 150, (name, len(slots))  # 200 entities: spread, not one slot
    assert "{" not in k.nd_lease and "{" not in k.nd_count
    assert {k.cluster_shard(f"c{i}") for i in range(5000)} == set(range(k.nd_shards))
