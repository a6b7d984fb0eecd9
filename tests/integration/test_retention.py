"""Retention on a real Redis: old groups, articles and stories go; what stays is exactly the state of the
kept input; the live-story index is what ranking reads; the job refuses articles older than the cutoff."""

from __future__ import annotations

import math

import numpy as np

from newsflow.core.embedding import TextModel
from newsflow.core.stories import StoryAssigner, StoryConfig
from newsflow.schemas import StoryArticle
from newsflow.storage.groups import RedisGroupStore
from newsflow.storage.keys import Keys
from newsflow.storage.ranking import RankingStore
from newsflow.storage.retention import expire
from newsflow.storage.stories import RedisStoryStore
from tests.helpers import art, is_nd_key, is_story_key, nd_articles, redis_state, state_difference

KEYS = Keys()


def test_groups_expire_whole_and_what_stays_is_the_state_of_the_kept_articles(redis_server):
    client, _ = redis_server
    old = [art("o1", 0b0, "a.com", t=100.0), art("o2", 0b11, "b.com", t=200.0)]  # one group, all old
    mixed = [art("m1", 0xFF00_0000, "c.com", t=150.0), art("m2", 0xFF00_0001, "d.com", t=5000.0)]  # old + new
    new = [art("n1", 0xFFFF_FFFF_0000, "e.com", t=6000.0)]
    store = RedisGroupStore(client)
    store.assign_batch(old + mixed + new)
    assert store.cluster_count() == 3
    assert store.expire_before(1000.0) == (1, 2)
    after = redis_state(client)
    client.flushall()
    store.assign_batch(mixed + new)  # computed independently: only what retention keeps
    assert after == redis_state(client), state_difference(after, redis_state(client))
    assert store.expire_before(1000.0) == (0, 0)  # idempotent


def _model() -> TextModel:
    return TextModel(["alpha", "beta", "delta", "gamma"], np.ones(4, np.float32), 1.0, np.eye(4, dtype=np.float32))


def _story_art(aid, t, title):
    return StoryArticle(aid, t, title, url=f"http://x.com/{aid}", source_domain="x.com", authority=0.5, language="en")


CFG = StoryConfig(join_threshold=0.5, merge_threshold=0.35, time_scale_s=math.inf, entity_weight=0.0)


def test_stories_expire_with_their_assignments_and_merge_records_under_the_lease(redis_server):
    client, _ = redis_server
    store = RedisStoryStore(client)
    clusterer = StoryAssigner(store, _model(), CFG)
    # a1/a2 are two stories that a3 merges (old); b1 is a recent story
    for a in [
        _story_art("a1", 100.0, "alpha beta"),
        _story_art("a2", 160.0, "gamma delta"),
        _story_art("a3", 220.0, "alpha beta gamma delta"),
        _story_art("b1", 9000.0, "omega"),
    ]:
        with store.writer_lease():
            clusterer.add(a)
    assert [m["from"] for m in store.merges()] == ["sa2"]
    assert client.zrange(KEYS.story_retired_of("sa2"), 0, -1) == [b"sa2"]
    assert sorted(RankingStore(client).iter_story_ids()) == ["sa1", "sb1"]
    counts = store.expire_before(1000.0)
    assert counts == {"stories": 1, "merged": 1, "merge_records": 1, "assignments": 3}
    assert sorted(k.decode() for k in client.keys("*")) == sorted(
        [
            KEYS.story("sb1"),
            KEYS.story_state("sb1"),
            KEYS.story_groups("sb1"),
            KEYS.story_outlets("sb1"),
            KEYS.story_articles("sb1"),
            KEYS.story_assign_of("b1"),
            KEYS.story_active_of("sb1"),
        ]
    )
    assert client.hgetall(KEYS.story_assign_of("b1")) == {b"b1": b"sb1"}
    assert list(RankingStore(client).iter_story_ids()) == ["sb1"]
    assert list(RankingStore(client).iter_story_ids(since=9500.0)) == []


def test_newsflow_retention_records_the_cutoff_and_the_job_dead_letters_older_articles(tmp_path, redis_server):
    from newsflow.pipelines.streaming import run
    from newsflow.storage.parquet import read_dataset
    from tests.helpers import write_headlines

    client, url = redis_server
    landing = write_headlines(tmp_path / "in.jsonl", 150)
    argv = ["--runner", "DirectRunner", "--input", landing, "--output", str(tmp_path / "out"), "--redis_url", url]
    assert run(argv, environ={}).state == "DONE"
    before = {}  # article id -> (event time, url), read before retention
    for a in nd_articles(client, KEYS):
        t, u = client.hmget(KEYS.article(a), "event_time", "url")
        before[a] = (float(t), u.decode())
    times = sorted(t for t, _ in before.values())
    cutoff = times[len(times) // 2]  # about half the articles are older
    out = expire(client, cutoff, KEYS)
    assert out["cutoff"] == cutoff and out["groups"] > 0 and out["stories"] > 0
    # nothing older than the cutoff is left in a group or a story whose latest time is before it
    groups = RedisGroupStore(client)
    latest_index = [
        z for i in range(KEYS.nd_shards) for z in client.zrange(KEYS.clusters_by_latest(i), 0, -1, withscores=True)
    ]
    assert latest_index
    for cid, latest in latest_index:
        assert latest >= cutoff and groups.get_cluster(cid.decode()).latest_time == latest
    assert all(s >= cutoff for k in KEYS.story_active_keys for _, s in client.zrange(k, 0, -1, withscores=True))
    kept = set(nd_articles(client, KEYS))
    assert kept and len(kept) < len(times)
    nd_and_stories = {k: v for k, v in redis_state(client).items() if is_nd_key(k) or is_story_key(k)}
    # a cutoff is only moved forward
    assert expire(client, cutoff - 86400.0, KEYS)["cutoff"] == cutoff
    # a rerun of the same input: older articles are dead letters, the kept state does not change
    assert run(argv, environ={}).state == "DONE"
    assert {k: v for k, v in redis_state(client).items() if is_nd_key(k) or is_story_key(k)} == nd_and_stories
    dead = read_dataset(str(tmp_path / "out"), "deadletters").to_pylist()
    too_old = {d["url"] for d in dead if d["error_type"] == "older_than_retention"}
    assert too_old == {u for t, u in before.values() if t < cutoff}


def test_a_cutoff_that_is_not_a_finite_past_time_is_refused_and_a_corrupt_one_is_replaced(redis_server):
    import time

    import pytest

    from newsflow.cli.main import main

    client, url = redis_server
    for bad in (float("nan"), float("inf"), time.time() + 10 * 86400):
        with pytest.raises(ValueError, match="retention cutoff"):
            expire(client, bad, KEYS)
    assert client.get(KEYS.retention_cutoff) is None
    for now in ("nan", "inf", "1e30", "3026-01-01"):
        assert main(["retention", "--redis-url", url, "--now", now]) == 2
    assert main(["retention", "--redis-url", url, "--days", "nan"]) == 2
    assert client.get(KEYS.retention_cutoff) is None
    client.set(KEYS.retention_cutoff, "nan")  # written by a version without these checks
    assert expire(client, 1000.0, KEYS)["cutoff"] == 1000.0 and client.get(KEYS.retention_cutoff) == b"1000.0"
