"""Checkpoints of the story state (newsflow/storage/story_checkpoints.py) on a real Redis: a rewind restores
exactly the keys of the checkpoint for the stories the later articles touched, and leaves the others; the
trending windows after a boundary go with the breaking windows among them."""

from __future__ import annotations

import math

from newsflow.schemas.trend import TrendCount
from newsflow.storage.keys import Keys
from newsflow.storage.story_checkpoints import Checkpoints, clear_trends_after, rewind, snapshot
from newsflow.storage.trends import write_trends
from tests.helpers import redis_state

KEYS = Keys()
T0 = 1_700_000_000.0


def _story(client, sid: str, members: dict[str, float], state: bytes) -> None:
    client.hset(KEYS.story(sid), mapping={"title": f"title {sid}", "embedding": b"\x00\xff\x10", "merged_into": ""})
    client.zadd(KEYS.story_articles(sid), members)
    client.set(KEYS.story_state(sid), state)
    client.hset(KEYS.story_groups(sid), mapping={f"c{m}": "[1]" for m in members})
    client.hset(KEYS.story_outlets(sid), "a.com", 1)
    client.zadd(KEYS.story_active, {sid: max(members.values())})
    for m in members:
        client.hsetnx(KEYS.story_assign, m, sid)


def _story_state(client) -> dict:
    base = KEYS.story_base.encode()
    return {k: v for k, v in redis_state(client).items() if k.startswith(base)}


def test_a_rewind_restores_the_checkpoint_for_what_later_articles_touched(redis_server, tmp_path):
    client, _ = redis_server
    _story(client, "old", {"o1": T0 - 90_000}, b'{"s":"old"}')  # out of the story window: not in the checkpoint
    _story(client, "s1", {"a1": T0 - 60, "a2": T0 - 30}, b'{"s":1}')
    _story(client, "s2", {"b1": T0 - 10}, b'{"s":2}')
    client.rpush(KEYS.story_merges, '{"from":"z","into":"s1","time":1.0,"article_id":"a1"}')
    before = _story_state(client)
    ckpts = Checkpoints(str(tmp_path))
    path = ckpts.put(5, snapshot(client, KEYS, T0 - 45_000))
    assert ckpts.list() == [(5, path)] and ckpts.put(5, snapshot(client, KEYS, T0 - 45_000)) == path
    held = Checkpoints.read(path)
    assert sorted(held["stories"]) == ["s1", "s2"]

    # after the boundary: x joins s1, y founds s3, whose step merges s2 into it
    client.zadd(KEYS.story_articles("s1"), {"x": T0 + 5})
    client.set(KEYS.story_state("s1"), b'{"s":1,"n":3}')
    client.hset(KEYS.story_groups("s1"), "cx", "[1]")
    client.zadd(KEYS.story_active, {"s1": T0 + 5})
    client.hset(KEYS.story_assign, mapping={"x": "s1", "y": "s3"})
    _story(client, "s3", {"y": T0 + 9}, b'{"s":3}')
    client.zadd(KEYS.story_articles("s3"), {"b1": T0 - 10})
    client.hset(KEYS.story("s2"), "merged_into", "s3")
    client.delete(KEYS.story_state("s2"), KEYS.story_groups("s2"), KEYS.story_outlets("s2"))
    client.zrem(KEYS.story_active, "s2")
    client.zadd(KEYS.story_retired, {"s2": T0 - 10})
    client.rpush(KEYS.story_merges, '{"from":"s2","into":"s3","time":1700000009.0,"article_id":"y"}')
    assert _story_state(client) != before

    undone = rewind(client, KEYS, held, {"x", "y"})
    assert _story_state(client) == before
    assert undone["stories"] == ["s1", "s2", "s3"]
    assert undone["restored_losers"] == {"s2": [("b1", T0 - 10)]}


def test_trending_windows_after_the_boundary_go_and_breaking_runs_are_cut_there(redis_server):
    client, _ = redis_server
    t, w = T0, 3600.0

    def window(end, counts):
        return [TrendCount("story", sid, n, end - w, end, n > 20, 0.5 if n > 20 else 0.1) for sid, n in counts]

    write_trends(client, window(t - 300, [("s1", 25), ("s2", 3)]), w, breaking_ttl_seconds=3600.0)
    write_trends(client, window(t + 300, [("s1", 30), ("s3", 40)]), w, breaking_ttl_seconds=3600.0)
    write_trends(client, [TrendCount("entity", "ECB", 4, t, t + w, False, 0.0)], w)
    assert client.zscore(KEYS.breaking, "s1") == t + 300 + 3600
    deleted = clear_trends_after(client, KEYS, t)
    assert deleted == 2  # the story window at t + 300 and the entity window at t + 3600
    assert client.exists(KEYS.trending("story", t - 300)) and not client.exists(KEYS.trending("story", t + 300))
    assert [float(s) for _, s in client.zrange(KEYS.trending_windows("story"), 0, -1, withscores=True)] == [t - 300]
    assert client.zcard(KEYS.trending_windows("entity")) == 0
    # s1 keeps its run up to the boundary; s3, breaking only after it, leaves the set
    assert client.zscore(KEYS.breaking, "s1") == t - 300 + 3600
    assert float(client.hget(KEYS.breaking_since, "s1")) == t - 300
    assert client.zscore(KEYS.breaking, "s3") is None and client.hget(KEYS.breaking_since, "s3") is None
    assert not client.exists(KEYS.breaking_windows("s3"))
    assert clear_trends_after(client, KEYS, math.inf) == 0
