"""The messy web against real HTTP servers on 127.0.0.1: decompression bombs, throttling answers,
robots.txt politeness and validators that arrive with a 304."""

import asyncio
import json
import os
import subprocess
import sys
import time
import zlib
from collections import defaultdict

import pytest

from newsflow.crawler.frontier import Frontier
from newsflow.crawler.httpserver import HttpServer, Response
from newsflow.crawler.landing import LandingWriter
from newsflow.crawler.robots import RobotsPolicy
from newsflow.crawler.worker import CrawlWorker
from newsflow.storage.keys import Keys
from tests.helpers import NO_JITTER, Clock, Scripted, crawler_config, poll, utc

MIB = 1024 * 1024


@pytest.fixture(scope="module")
def gzip_bomb():
    """1 GiB of spaces gzipped (about 1 MB), compressed 1 MiB at a time (never 1 GiB in memory)."""
    c = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b" " * MIB
    return b"".join([c.compress(block) for _ in range(1024)] + [c.flush()])


BOMB_CHILD = r"""
import asyncio, json, sys
from newsflow.crawler.config import CrawlerConfig
from newsflow.crawler.fetch import Fetcher

def status_kib(field):
    with open("/proc/self/status") as f:
        return int(next(line for line in f if line.startswith(field + ":")).split()[1])

def reset_peak():
    # VmHWM is this process's own peak RSS (ru_maxrss would also count the forking parent's RSS);
    # writing 5 to clear_refs resets it to the current RSS (Linux >= 4.0)
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass

async def main():
    cfg = CrawlerConfig(allow_hosts=("127.0.0.1",), max_body_bytes=10 * 1024 * 1024, total_timeout_s=60.0)
    f = Fetcher(cfg)
    try:
        warm = await f.fetch(sys.argv[1] + "/small")  # imports, zlib and the connection pool warmed up
        reset_peak()
        before = status_kib("VmRSS")
        r = await f.fetch(sys.argv[1] + "/bomb")
        peak = status_kib("VmHWM")
    finally:
        await f.aclose()
    print(json.dumps({"warm": warm.ok, "kind": r.error_kind, "body": r.body, "growth_kib": peak - before}))

asyncio.run(main())
"""


def test_gzip_bomb_is_refused_with_bounded_memory(gzip_bomb):
    assert len(gzip_bomb) < 1.1 * MIB
    small = zlib.compress(b"<p>fine</p>" * 1000)

    def handler(req):
        if req.path == "/bomb":
            return Response(200, {"Content-Type": "text/html", "Content-Encoding": "gzip"}, gzip_bomb)
        return Response(200, {"Content-Type": "text/html", "Content-Encoding": "deflate"}, small)

    with HttpServer(handler) as srv:
        env = dict(os.environ, PYTHONPATH=os.getcwd())
        out = subprocess.run(
            [sys.executable, "-c", BOMB_CHILD, srv.base_url], capture_output=True, text=True, env=env, timeout=120
        )
    assert out.returncode == 0, out.stderr[-3000:]
    res = json.loads(out.stdout)
    assert res["warm"] and res["kind"] == "too_large" and res["body"] is None
    # peak RSS growth of the fetching process (measured in a child process): the kept 10 MiB cap plus a few 64 KiB steps
    # (before bounded inflating it was about 64 MiB)
    assert res["growth_kib"] < 16 * 1024, res


# --------------------------------------------------------------------------- worker: throttling, politeness, 304s


def feed_xml(host, times):
    items = "".join(
        f"<item><title>S{i}</title><link>http://{host}/news/{i}</link><guid>{host}-{i}</guid>"
        f"<pubDate>{t}</pubDate></item>"
        for i, t in enumerate(times)
    )
    return f"<?xml version='1.0'?><rss version='2.0'><channel><title>{host}</title>{items}</channel></rss>".encode()


# items 15 minutes apart: the adaptive schedule polls this feed every 900 s
FEED_900 = feed_xml(
    "t.test", ["Tue, 08 Oct 2024 11:00:00 GMT", "Tue, 08 Oct 2024 11:15:00 GMT", "Tue, 08 Oct 2024 11:30:00 GMT"]
)


@pytest.fixture
def redis(flushed_server):
    return flushed_server


def rss_ok(body, **headers):
    return Response(200, {"Content-Type": "application/rss+xml", **headers}, body)


def test_429_without_retry_after_waits_a_poll_interval_then_doubles(redis, tmp_path):
    busy = Response(429, {"Content-Type": "text/plain"}, b"slow down")
    soon = Response(503, {"Content-Type": "text/plain", "Retry-After": "soon"}, b"later")
    long_ra = Response(429, {"Content-Type": "text/plain", "Retry-After": "7200"}, b"two hours")
    date_ra = Response(503, {"Content-Type": "text/plain", "Retry-After": "Tue, 08 Oct 2024 23:00:00 GMT"}, b"x")
    site = Scripted({("t.test", "/feed.xml"): [rss_ok(FEED_900), busy, soon, long_ra, date_ra, rss_ok(FEED_900)]})
    clock = Clock(utc("2024-10-08 11:45:00"))
    with HttpServer(site) as srv:
        fr = Frontier(redis)
        fr.add("http://t.test/feed.xml", "feed", clock.t)
        w = CrawlWorker(
            fr, LandingWriter(str(tmp_path / "land")), crawler_config(srv.port), schedule=NO_JITTER, clock=clock
        )
        poll(w, clock, utc("2024-10-08 11:45:00"), tasks=4)  # robots.txt, feed, and its 3 pages
        state = fr.feeds()[0]
        assert float(state["interval_s"]) == 900.0 and float(state["next_due"]) == utc("2024-10-08 12:00:00")

        dues = []
        for at in ("2024-10-08 12:00:00", "2024-10-08 12:15:00", "2024-10-08 12:45:00", "2024-10-08 14:45:00"):
            poll(w, clock, utc(at))
            state = fr.feeds()[0]
            dues.append((state["last_status"], int(state["failures"]), float(state["next_due"])))
            if at == "2024-10-08 12:00:00":
                # not polled again before 12:15, although the host itself is free by then
                poll(w, clock, utc("2024-10-08 12:14:59"), duration_s=0.5)
                assert len(site.seen[("t.test", "/feed.xml")]) == 2
                host_free = float(redis.hget(Keys().crawl_host("t.test"), "next_allowed"))
                assert host_free == utc("2024-10-08 12:00:00") + 120.0  # host paused min_interval_s
        poll(w, clock, utc("2024-10-08 23:00:00"))
    assert dues == [
        ("http_429", 1, utc("2024-10-08 12:15:00")),  # 900 s: the poll interval
        ("http_503", 2, utc("2024-10-08 12:45:00")),  # 1800 s: "Retry-After: soon" is not usable
        ("http_429", 3, utc("2024-10-08 14:45:00")),  # Retry-After 7200 s beats 3600 s
        ("http_503", 4, utc("2024-10-08 23:00:00")),  # HTTP-date 23:00 (8 h 15 min) beats 7200 s
    ]
    assert [h.get("if-none-match") for _, h in site.seen[("t.test", "/feed.xml")]][-1] is None
    assert fr.feeds()[0]["last_status"] == "200" and fr.feeds()[0]["failures"] == "0"


def test_throttling_backoff_is_capped_at_a_day(redis, tmp_path):
    site = Scripted({("t.test", "/feed.xml"): [rss_ok(FEED_900), Response(429, {}, b"")]})
    clock = Clock(utc("2024-10-08 11:45:00"))
    with HttpServer(site) as srv:
        fr = Frontier(redis)
        fr.add("http://t.test/feed.xml", "feed", clock.t)
        w = CrawlWorker(
            fr, LandingWriter(str(tmp_path / "land")), crawler_config(srv.port), schedule=NO_JITTER, clock=clock
        )
        poll(w, clock, clock.t, tasks=4)
        waits = []
        for _ in range(9):
            at = fr.feeds()[0]["due"]
            poll(w, clock, at)
            waits.append(float(fr.feeds()[0]["next_due"]) - at)
    assert waits == [900.0, 1800.0, 3600.0, 7200.0, 14400.0, 28800.0, 57600.0, 86400.0, 86400.0]


def test_robots_429_disallows_for_its_retry_after(redis, tmp_path):
    site = Scripted(
        {
            ("u.test", "/robots.txt"): [Response(429, {"Retry-After": "7200"}, b"")],
            ("u.test", "/feed.xml"): [rss_ok(FEED_900)],
        }
    )
    clock = Clock(utc("2024-10-08 12:00:00"))
    with HttpServer(site) as srv:
        fr = Frontier(redis)
        fr.add("http://u.test/feed.xml", "feed", clock.t)
        w = CrawlWorker(fr, LandingWriter(str(tmp_path / "land")), crawler_config(srv.port), clock=clock)
        poll(w, clock, clock.t)
        poll(w, clock, utc("2024-10-08 13:59:59"), duration_s=0.5)
    state = fr.feeds()[0]
    assert state["last_status"] == "robots_unreachable"
    assert float(state["next_due"]) == utc("2024-10-08 14:00:00")
    assert len(site.seen[("u.test", "/robots.txt")]) == 1 and ("u.test", "/feed.xml") not in site.seen
    assert float(redis.hget(Keys().crawl_host("u.test"), "next_allowed")) >= utc("2024-10-08 14:00:00")


def test_robots_txt_request_counts_for_host_politeness(redis, tmp_path):
    feeds = {
        "r.test": feed_xml("r.test", ["Tue, 08 Oct 2024 11:00:00 GMT", "Tue, 08 Oct 2024 11:15:00 GMT"]),
        "s.test": feed_xml("s.test", ["Tue, 08 Oct 2024 11:00:00 GMT", "Tue, 08 Oct 2024 11:15:00 GMT"]),
    }
    page = Response(200, {"Content-Type": "text/html"}, b"<html>story</html>")
    site = Scripted(
        {
            ("r.test", "/robots.txt"): [
                Response(200, {"Content-Type": "text/plain"}, b"User-agent: *\nCrawl-delay: 0.6\n")
            ],
            ("r.test", "/feed.xml"): [rss_ok(feeds["r.test"])],
            ("s.test", "/feed.xml"): [rss_ok(feeds["s.test"])],  # s.test has no robots.txt (404)
            **{(h, f"/news/{i}"): [page] for h in feeds for i in range(2)},
        }
    )
    with HttpServer(site) as srv:
        fr = Frontier(redis)
        for h in feeds:
            fr.add(f"http://{h}/feed.xml", "feed", 0.0)
        w = CrawlWorker(
            fr,
            LandingWriter(str(tmp_path / "land")),
            crawler_config(srv.port, min_host_delay_s=0.4),
            schedule=NO_JITTER,
        )
        asyncio.run(w.run(max_tasks=6, duration_s=20))
        time.sleep(0.1)
        log = list(srv.log)
    for host, delay in (("r.test", 0.6), ("s.test", 0.4)):
        reqs = sorted((e for e in log if e.host.split(":")[0] == host), key=lambda e: e.start)
        assert [e.path for e in reqs][:2] == ["/robots.txt", "/feed.xml"]
        assert len(reqs) == 4
        gaps = [b.start - a.end for a, b in zip(reqs, reqs[1:], strict=False)]
        assert min(gaps) >= delay - 0.01, (host, gaps)
    assert fr.stats()["robots_then_requeued"] == 2


def test_with_no_rest_due_the_task_follows_its_robots_txt_on_the_same_lease(redis, tmp_path):
    # min_host_delay_s 0: a host whose robots.txt sets no Crawl-delay has its feed fetched right after the file,
    # without going back to its queue; one with a Crawl-delay still waits it out in the queue
    times = ["Tue, 08 Oct 2024 11:00:00 GMT", "Tue, 08 Oct 2024 11:15:00 GMT"]
    text = {"Content-Type": "text/plain"}
    site = Scripted(
        {
            ("z.test", "/robots.txt"): [Response(200, text, b"User-agent: *\nDisallow: /x\n")],
            ("x.test", "/robots.txt"): [Response(200, text, b"User-agent: *\nCrawl-delay: 0.3\n")],
            # y.test has no robots.txt (404: everything allowed, no delay)
            **{(h, "/feed.xml"): [rss_ok(feed_xml(h, times))] for h in ("x.test", "y.test", "z.test")},
        }
    )
    with HttpServer(site) as srv:
        fr = Frontier(redis)
        for h in ("x.test", "y.test", "z.test"):
            fr.add(f"http://{h}/feed.xml", "feed", 0.0)
        cfg = crawler_config(srv.port)
        w = CrawlWorker(fr, LandingWriter(str(tmp_path / "land")), cfg, schedule=NO_JITTER)
        asyncio.run(w.run(idle_exit_s=1.0, duration_s=20))
        time.sleep(0.1)
        log = list(srv.log)
    by_host = defaultdict(list)
    for e in sorted(log, key=lambda e: e.start):
        by_host[e.host.split(":")[0]].append(e)
    for host in ("x.test", "y.test", "z.test"):
        assert [e.path for e in by_host[host]][:2] == ["/robots.txt", "/feed.xml"], host
    x_robots, x_feed = by_host["x.test"][:2]
    assert x_feed.start - x_robots.end >= 0.3 - 0.01
    stats = fr.stats()
    assert stats["robots_then_fetched"] == 2 and stats["robots_then_requeued"] == 1
    assert stats["feeds_fetched"] == 3
    # the policies reach the shared cache (sent with the counters) for the other workers
    for origin, delay in (("http://x.test", 0.3), ("http://y.test", None), ("http://z.test", None)):
        pol = RobotsPolicy.from_json(fr.robots_get(origin))
        assert pol.crawl_delay(cfg.robots_agent) == delay
    assert not RobotsPolicy.from_json(fr.robots_get("http://z.test")).allowed("http://z.test/x/1", cfg.robots_agent)


def test_validators_from_a_304_are_sent_on_the_next_poll(redis, tmp_path):
    lm1, lm2 = "Mon, 07 Oct 2024 08:00:00 GMT", "Tue, 08 Oct 2024 05:00:00 GMT"
    body = feed_xml("v.test", ["Mon, 07 Oct 2024 07:00:00 GMT"])
    site = Scripted(
        {
            ("v.test", "/feed.xml"): [
                rss_ok(body, **{"Last-Modified": lm1, "ETag": '"v1"'}),
                Response(304, {"Last-Modified": lm2, "ETag": '"v2"'}, b""),
                Response(304, {}, b""),  # a 304 without validators keeps the stored ones
                Response(304, {}, b""),
            ]
        }
    )
    clock = Clock(utc("2024-10-08 06:00:00"))
    with HttpServer(site) as srv:
        fr = Frontier(redis)
        fr.add("http://v.test/feed.xml", "feed", clock.t)
        fr.mark_seen("http://v.test/news/0", 86400)  # only the feed is fetched
        w = CrawlWorker(
            fr, LandingWriter(str(tmp_path / "land")), crawler_config(srv.port), schedule=NO_JITTER, clock=clock
        )
        for _ in range(4):
            poll(w, clock, fr.feeds()[0]["due"])  # the queue's due time (next_due is rounded)
    sent = [(h.get("if-modified-since"), h.get("if-none-match")) for _, h in site.seen[("v.test", "/feed.xml")]]
    assert sent == [(None, None), (lm1, '"v1"'), (lm2, '"v2"'), (lm2, '"v2"')]
    st = fr.feeds()[0]
    assert (st["last_modified"], st["etag"], st["last_status"]) == (lm2, '"v2"', "304")


def test_validators_reach_a_redirected_feed(redis, tmp_path):
    body = feed_xml("w.test", ["Mon, 07 Oct 2024 07:00:00 GMT"])
    site = Scripted(
        {
            ("w.test", "/feed.xml"): [Response(301, {"Location": "/v2/feed.xml"}, b"")],
            ("w.test", "/v2/feed.xml"): [rss_ok(body, ETag='"a"'), Response(304, {"ETag": '"b"'}, b"")],
        }
    )
    clock = Clock(utc("2024-10-08 06:00:00"))
    with HttpServer(site) as srv:
        fr = Frontier(redis)
        fr.add("http://w.test/feed.xml", "feed", clock.t)
        fr.mark_seen("http://w.test/news/0", 86400)
        w = CrawlWorker(
            fr, LandingWriter(str(tmp_path / "land")), crawler_config(srv.port), schedule=NO_JITTER, clock=clock
        )
        for _ in range(3):
            poll(w, clock, fr.feeds()[0]["due"])
    assert [h.get("if-none-match") for _, h in site.seen[("w.test", "/v2/feed.xml")]] == [None, '"a"', '"b"']
    assert [h.get("if-none-match") for _, h in site.seen[("w.test", "/feed.xml")]] == [None, None, None]
    assert fr.feeds()[0]["validators_url"] == "http://w.test/v2/feed.xml"
