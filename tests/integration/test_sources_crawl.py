"""The crawl worker polls what the sources registry says: registered feeds are fetched, paused ones are
not, resumed ones are again (real CrawlWorker, real HTTP server on 127.0.0.1, embedded Redis)."""

from __future__ import annotations

import asyncio
import os

from newsflow.crawler.frontier import Frontier
from newsflow.crawler.httpserver import HttpServer, Response
from newsflow.crawler.landing import LandingWriter, read_landing_file
from newsflow.crawler.schedule import ScheduleConfig
from newsflow.crawler.worker import CrawlWorker
from newsflow.storage.keys import Keys
from newsflow.storage.source_registry import FeedEntry, SourceRegistry
from tests.helpers import crawler_config

HOSTS = ("a.example.com", "b.example.net")


def rss(host: str, n: int) -> bytes:
    items = "".join(
        f"<item><title>Story {i}</title><link>http://{host}/news/{i}</link><guid>{host}-{i}</guid></item>"
        for i in range(n)
    )
    return f"<?xml version='1.0'?><rss version='2.0'><channel><title>{host}</title>{items}</channel></rss>".encode()


def handler(req):
    host = req.host.split(":")[0]
    if req.path == "/feed.xml" and host in HOSTS:
        return Response(200, {"Content-Type": "application/rss+xml"}, rss(host, 2))
    if req.path.startswith("/news/") and host in HOSTS:
        return Response(
            200, {"Content-Type": "text/html"}, f"<html><body><h1>{host}{req.path}</h1></body></html>".encode()
        )
    return Response(404, {"Content-Type": "text/plain"}, b"no")


def landed(directory) -> list[str]:
    if not os.path.isdir(directory):
        return []
    urls = []
    for name in sorted(os.listdir(directory)):
        if not name.startswith((".", "_")):
            urls += [d.url for d in read_landing_file(os.path.join(directory, name))]
    return sorted(urls)


def crawl(client, port: int, land: str) -> None:
    cfg = crawler_config(port, total_timeout_s=5, lease_s=10, concurrency=16)
    schedule = ScheduleConfig(min_interval_s=600, max_interval_s=3600)
    worker = CrawlWorker(Frontier(client, Keys()), LandingWriter(land), cfg, schedule)
    asyncio.run(worker.run(duration_s=20, idle_exit_s=1.5))


def test_worker_polls_registered_feeds_and_skips_paused_ones(flushed_server, tmp_path):
    client = flushed_server
    registry = SourceRegistry(client, Keys())
    report = registry.register([(h, FeedEntry(f"http://{h}/feed.xml")) for h in HOSTS])
    assert report.counts() == {"added": 2}
    registry.set_status("example.net", "pause")
    with HttpServer(handler) as srv:
        crawl(client, srv.port, str(tmp_path / "land1"))
        hosts_seen = {e.host.split(":")[0] for e in srv.log}
        assert landed(tmp_path / "land1") == ["http://a.example.com/news/0", "http://a.example.com/news/1"]
        assert "b.example.net" not in hosts_seen
        registry.set_status("example.net", "resume")
        crawl(client, srv.port, str(tmp_path / "land2"))
    assert landed(tmp_path / "land2") == ["http://b.example.net/news/0", "http://b.example.net/news/1"]
