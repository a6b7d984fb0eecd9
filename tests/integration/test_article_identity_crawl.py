"""Issue 10, items 12-13 end to end: the crawler's seen set and alias keys against real HTTP on 127.0.0.1,
then the landed pages through extraction and build_article (the pipeline's per-document logic)."""

import glob
import os

import pytest

from newsflow.core.articles import build_article
from newsflow.core.extraction import ExtractionConfig, extract_content
from newsflow.core.urls import article_id
from newsflow.crawler.frontier import Frontier
from newsflow.crawler.httpserver import HttpServer, Response
from newsflow.crawler.landing import LandingWriter, read_landing_file
from newsflow.crawler.worker import CrawlWorker
from newsflow.storage.aliases import record_aliases, resolve_article_id
from newsflow.storage.keys import Keys
from tests.helpers import NO_JITTER, Clock, Scripted, crawler_config, poll, utc

HARBOUR = "https://www.tribune.example.net/news/harbour-fire-4471"


@pytest.fixture
def redis(flushed_server):
    return flushed_server


def page(title, head=""):
    para = f"<p>{title}: " + "crews worked through the night and the harbour road stayed closed until noon. " * 5
    body = f"<body><article><h1>{title}</h1>{para}</p>{para}</p></article></body>"
    return Response(
        200, {"Content-Type": "text/html; charset=utf-8"}, f"<html><head>{head}</head>{body}</html>".encode()
    )


def rss(links):
    items = "".join(f"<item><title>T{i}</title><link>{u}</link></item>" for i, u in enumerate(links))
    body = f"<?xml version='1.0'?><rss version='2.0'><channel><title>f</title>{items}</channel></rss>"
    return Response(200, {"Content-Type": "application/rss+xml"}, body.encode())


def test_one_article_one_id_in_the_crawler_and_the_pipeline(redis, tmp_path):
    canonical = f"<link rel='canonical' href='{HARBOUR}'>"
    first = rss(
        [
            "http://m.tribune.example.net/news/harbour-fire-4471",  # mobile copy declaring the www canonical
            "http://m.tribune.example.net/news/harbour-fire-4471/amp",  # its AMP variant: same id, not fetched
            "http://travel.example.io/guides/lisbon/",
            "http://travel.example.io/guides/lisbon",  # trailing slash: same id, not fetched
            "http://herald.example.org/p/alpha-9",
            "http://tribune.example.net/s/4471",  # short link redirecting to the mobile page
        ]
    )
    second = rss(
        [
            "http://www.herald.example.org/p/alpha-9",  # www + (in production) https: seen
            "http://www.tribune.example.net/news/harbour-fire-4471",  # the canonical itself: seen
            "http://tribune.example.net/news/harbour-fire-4471?view=amp",
            "http://tribune.example.net/s/4471",  # the alias: seen
        ]
    )
    site = Scripted(
        {
            ("feeds.example.com", "/rss"): [first, second],
            ("m.tribune.example.net", "/news/harbour-fire-4471"): [page("Harbour fire", canonical)],
            ("tribune.example.net", "/s/4471"): [
                Response(301, {"Location": "http://m.tribune.example.net/news/harbour-fire-4471?src=short"}, b"")
            ],
            ("travel.example.io", "/guides/lisbon/"): [page("Lisbon guide")],
            ("herald.example.org", "/p/alpha-9"): [page("Alpha nine")],
        }
    )
    clock = Clock(utc("2024-10-14 09:00:00"))
    land = tmp_path / "land"
    with HttpServer(site) as srv:
        fr = Frontier(redis)
        fr.add("http://feeds.example.com/rss", "feed", clock.t)
        w = CrawlWorker(fr, LandingWriter(str(land)), crawler_config(srv.port), schedule=NO_JITTER, clock=clock)
        poll(w, clock, clock.t, tasks=5, duration_s=10.0)  # feed + 4 pages
        poll(w, clock, float(fr.feeds()[0]["due"]), tasks=1, duration_s=5.0)  # the second poll of the feed
    stats = fr.stats()
    fetched = {k: len(v) for k, v in site.seen.items() if k[1] != "/robots.txt"}
    assert fetched == {
        ("feeds.example.com", "/rss"): 2,
        ("m.tribune.example.net", "/news/harbour-fire-4471"): 2,  # from the feed, and once behind the short link
        ("tribune.example.net", "/s/4471"): 1,
        ("travel.example.io", "/guides/lisbon/"): 1,
        ("herald.example.org", "/p/alpha-9"): 1,
    }
    assert stats["entry_seen_before"] == 2 + 4
    keys = Keys()
    harbour_id = article_id(HARBOUR)
    # the short link is an alias of the canonical article; spelled variants resolve without an alias key
    assert resolve_article_id(redis, keys, "http://tribune.example.net/s/4471") == harbour_id
    assert resolve_article_id(redis, keys, "https://amp.tribune.example.net/news/harbour-fire-4471") == harbour_id
    assert redis.get(keys.url_alias(article_id("http://tribune.example.net/s/4471"))) == harbour_id.encode()

    # the pipeline's per-document logic gives the landed pages the crawler's ids
    docs = [d for p in sorted(glob.glob(os.path.join(land, "*.jsonl*"))) for d in read_landing_file(p)]
    articles = [build_article(d, extract_content(d, ExtractionConfig()), source_authority=0.5) for d in docs]
    by_id = {}
    for a in articles:
        by_id.setdefault(a.article_id, set()).add(a.url)
    assert by_id == {
        harbour_id: {HARBOUR},
        article_id("https://travel.example.io/guides/lisbon"): {"http://travel.example.io/guides/lisbon/"},
        article_id("https://herald.example.org/p/alpha-9"): {"http://herald.example.org/p/alpha-9"},
    }


def test_an_alias_keeps_the_first_article_it_resolved_to(redis):
    keys = Keys()
    first, second = article_id("https://a.example.org/x"), article_id("https://a.example.org/y")
    assert (
        record_aliases(redis, keys, first, ["https://a.example.org/old", "https://www.a.example.org/x/", "bad url"], 60)
        == 1
    )
    assert record_aliases(redis, keys, second, ["https://a.example.org/old"], 60) == 0
    assert resolve_article_id(redis, keys, "http://a.example.org/old/") == first
    assert resolve_article_id(redis, keys, "https://a.example.org/new") == article_id("https://a.example.org/new")
    assert 0 < redis.ttl(keys.url_alias(article_id("https://a.example.org/old"))) <= 60
