"""Checkpoints of the story state (newsflow/storage/story_checkpoints.py) on a real Redis: a rewind restores
exactly the keys of the checkpoint for the stories the later articles touched, and leaves the others; the
trending windows after a boundary go with the breaking windows among them."""

from __future__ import annotations

import json
import math

import pytest

from newsflow.schemas.trend import TrendCount
from newsflow.storage.keys import Keys
from newsflow.storage.ranking import RankingStore
from newsflow.storage.stories import RedisStoryStore
from newsflow.storage.story_checkpoints import Checkpoints, clear_trends_after, rewind, snapshot
from newsflow.storage.trends import write_trends
from tests.helpers import is_story_key, redis_state

KEYS = Keys()
T0 = 1_700_000_000.0


def _story(client, sid: str, members: dict[str, float], state: bytes) -> None:
    client.hset(KEYS.story(sid), mapping={"title": f"title {sid}", "embedding": b"\x00\xff\x10", "merged_into": ""})
    client.zadd(KEYS.story_articles(sid), members)
    client.set(KEYS.story_state(sid), state)
    client.hset(KEYS.story_groups(sid), mapping={f"c{m}": "[1]" for m in members})
    client.hset(KEYS.story_outlets(sid), "a.com", 1)
    client.zadd(KEYS.story_active_of(sid), {sid: max(members.values())})
    for m in members:
        client.hsetnx(KEYS.story_assign_of(m), m, sid)


def _merge(client, loser: str, into: str, time: float, article_id: str) -> None:
    rec = [{"from": loser, "into": into, "time": time, "article_id": article_id}]
    client.hset(KEYS.story_merges_of(article_id), article_id, json.dumps(rec))


def _story_state(client) -> dict:
    return {k: v for k, v in redis_state(client).items() if is_story_key(k)}


def _before_and_after(client, tmp_path) -> tuple[dict, dict, dict]:
    """Three stories and a checkpoint at T0, then two articles after it: x joins s1, y founds s3, whose step
    merges s2 into it. Returns (story keys at the checkpoint, the checkpoint, story keys after x and y)."""
    _story(client, "old", {"o1": T0 - 90_000}, b'{"s":"old"}')  # out of the story window: not in the checkpoint
    _story(client, "s1", {"a1": T0 - 60, "a2": T0 - 30}, b'{"s":1}')
    _story(client, "s2", {"b1": T0 - 10}, b'{"s":2}')
    _merge(client, "z", "s1", 1.0, "a1")
    before = _story_state(client)
    ckpts = Checkpoints(str(tmp_path))
    path = ckpts.put(5, snapshot(client, KEYS, T0 - 45_000))
    assert ckpts.list() == [(5, path)] and ckpts.put(5, snapshot(client, KEYS, T0 - 45_000)) == path
    held = Checkpoints.read(path)
    assert sorted(held["stories"]) == ["s1", "s2"]
    assert held["stories"]["s1"][0] == T0 - 30  # its live-index score

    client.zadd(KEYS.story_articles("s1"), {"x": T0 + 5})
    client.set(KEYS.story_state("s1"), b'{"s":1,"n":3}')
    client.hset(KEYS.story_groups("s1"), "cx", "[1]")
    client.zadd(KEYS.story_active_of("s1"), {"s1": T0 + 5})
    client.hset(KEYS.story_assign_of("x"), "x", "s1")
    client.hset(KEYS.story_assign_of("y"), "y", "s3")
    _story(client, "s3", {"y": T0 + 9}, b'{"s":3}')
    client.zadd(KEYS.story_articles("s3"), {"b1": T0 - 10})
    client.hset(KEYS.story("s2"), "merged_into", "s3")
    client.delete(KEYS.story_state("s2"), KEYS.story_groups("s2"), KEYS.story_outlets("s2"))
    client.zrem(KEYS.story_active_of("s2"), "s2")
    client.zadd(KEYS.story_retired_of("s2"), {"s2": T0 - 10})
    _merge(client, "s2", "s3", T0 + 9, "y")
    after = _story_state(client)
    assert after != before
    return before, held, after


def test_a_rewind_restores_the_checkpoint_for_what_later_articles_touched(redis_server, tmp_path):
    client, _ = redis_server
    before, held, _ = _before_and_after(client, tmp_path)
    store = RedisStoryStore(client)
    with store.writer_lease():
        undone = rewind(store, held, {"x", "y"})
    assert _story_state(client) == before  # per-story keys, index shards, assignment and merge buckets
    assert undone["stories"] == ["s1", "s2", "s3"]
    assert [r["article_id"] for r in undone["merges"]] == ["y"]
    assert undone["restored_losers"] == {"s2": [("b1", T0 - 10)]}
    assert client.hget(KEYS.story_merges_of("a1"), "a1") is not None  # a record of an earlier step stays
    assert not client.exists(KEYS.story_journal) and not client.exists(KEYS.story_lease)


class _DiesWhileApplying(RedisStoryStore):
    """A story writer that sends the first ``n`` commands of its write set and then loses its connection."""

    def __init__(self, client, n: int):
        super().__init__(client)
        self.n = n

    def _apply(self, ops):
        super()._apply(ops[: self.n])
        raise ConnectionError(f"died after {self.n} of {len(ops)} commands")


@pytest.mark.parametrize("sent", [0, 3, 12])
def test_a_rewind_that_dies_part_way_is_completed_by_the_next_writer(redis_server, tmp_path, sent):
    client, _ = redis_server
    before, held, _ = _before_and_after(client, tmp_path)
    dying = _DiesWhileApplying(client, sent)
    with pytest.raises(ConnectionError), dying.writer_lease():
        rewind(dying, held, {"x", "y"})
    assert client.exists(KEYS.story_journal)  # the whole write set is journaled
    assert _story_state(client) != before
    with RedisStoryStore(client).writer_lease():  # the next lease holder applies the journal first
        pass
    assert _story_state(client) == before
    assert not client.exists(KEYS.story_journal)


def test_a_checkpoint_of_another_layout_is_refused_before_anything_is_written(redis_server, tmp_path):
    client, _ = redis_server
    _, held, after = _before_and_after(client, tmp_path)
    values = held["stories"]["s1"][1]
    values["nf:{story}:story:s1"] = values.pop(KEYS.story("s1"))  # a key of the single-tag layout
    with pytest.raises(ValueError, match="not keys of story s1"):
        rewind(RedisStoryStore(client), held, {"x", "y"})
    assert _story_state(client) == after


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
    assert RankingStore(client).breaking(t) == {"s1": t - 300}
    assert client.zscore(KEYS.breaking, "s3") is None
    assert not client.exists(KEYS.breaking_windows("s3"))
    assert clear_trends_after(client, KEYS, math.inf) == 0
