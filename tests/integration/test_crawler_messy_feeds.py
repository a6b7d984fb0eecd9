"""Issue 10, items 6-9 end to end: a crawl worker fetches real feeds from a 127.0.0.1 HTTP server and lands
their entries (pages answer 404, so each entry lands as a feed-only document carrying the feed's fields)."""

import glob
import os

import pytest

from newsflow.crawler.frontier import Frontier
from newsflow.crawler.httpserver import HttpServer, Response
from newsflow.crawler.landing import LandingWriter, read_landing_file
from newsflow.crawler.worker import CrawlWorker
from tests.helpers import NO_JITTER, Clock, Scripted, crawler_config, poll, utc


@pytest.fixture
def redis(flushed_server):
    return flushed_server


LAKE = (
    b'{"version":"https://jsonfeed.org/version/1","title":"Example Lake Weekly","items":[{"id":"lw-1",'
    b'"url":"https://lakeweekly.example.org/2024/05/ice-out/","title":"Ice out on the lake a week early",'
    b'"date_published":"2024-05-02T06:00:00Z"}]}'
)
GREEK = ["Ο δήμος ανακοίνωσε νέο πάρκο", "Κλειστός ο δρόμος την Κυριακή"]


def greek_feed():
    items = (
        f"<item><title>{GREEK[0]}</title><link>https://dimos.example.gr/a</link>"
        "<description>Το νέο πάρκο BAD ανοίγει.</description><pubDate>Mon, 04 Nov 2024 08:00:00 AEDT</pubDate></item>"
        f"<item><title>{GREEK[1]}</title><link>https://dimos.example.gr/b</link>"
        "<description>Closed for cleaning\x01 until Friday.</description>"
        "<pubDate>Wed, 06 Mar 2024 10:00:00 XST</pubDate></item>"
    )
    channel = f"<channel><title>Δήμος</title>{items}</channel>"
    text = f"<?xml version='1.0' encoding='UTF-8'?><rss version='2.0'>{channel}</rss>"
    return text.encode("utf-8").replace(b"BAD", b"\xc3")


def crawl(redis, tmp_path, feeds, tasks):
    site = Scripted({k: [v] for k, v in feeds.items()})
    clock = Clock(utc("2024-11-04 00:00:00"))
    with HttpServer(site) as srv:
        fr = Frontier(redis)
        for host, path in feeds:
            fr.add(f"http://{host}{path}", "feed", clock.t)
        w = CrawlWorker(
            fr, LandingWriter(str(tmp_path / "land")), crawler_config(srv.port), schedule=NO_JITTER, clock=clock
        )
        poll(w, clock, clock.t, tasks=tasks, duration_s=10.0)
    docs = [d for p in sorted(glob.glob(os.path.join(tmp_path, "land", "*.jsonl*"))) for d in read_landing_file(p)]
    return fr, {d.url: d for d in docs}


def test_json_feed_is_fetched_and_its_entry_landed(redis, tmp_path):
    feeds = {
        ("lakeweekly.example.org", "/feed.json"): Response(200, {"Content-Type": "application/feed+json"}, LAKE),
        ("lakeweekly.example.org", "/plain.json"): Response(200, {"Content-Type": "application/json"}, LAKE),
    }
    fr, docs = crawl(redis, tmp_path, feeds, tasks=3)
    stats = fr.stats()
    assert not any(k.startswith("feed_error") for k in stats), stats
    assert int(stats["feeds_fetched"]) == 2
    doc = docs["https://lakeweekly.example.org/2024/05/ice-out/"]
    assert (doc.title, doc.published_time) == ("Ice out on the lake a week early", 1714629600.0)
    assert doc.feed_url.endswith("/feed.json") or doc.feed_url.endswith("/plain.json")


def test_greek_feed_with_a_bad_byte_lands_exact_titles_clean_text_and_zoned_times(redis, tmp_path):
    rss = Response(200, {"Content-Type": "application/rss+xml; charset=utf-8"}, greek_feed())
    feeds = {("dimos.example.gr", "/rss"): rss}
    fr, docs = crawl(redis, tmp_path, feeds, tasks=3)
    a, b = docs["https://dimos.example.gr/a"], docs["https://dimos.example.gr/b"]
    assert int(fr.stats()["entry_date_zone_unknown"]) == 1  # "XST": counted, not read as UTC
    assert [a.title, b.title] == GREEK
    assert a.summary == "Το νέο πάρκο \ufffd ανοίγει."
    assert b.summary == "Closed for cleaning until Friday."
    assert a.published_time == utc("2024-11-03 21:00:00")  # AEDT is +11:00
    assert b.published_time is None  # "XST" resolves to no zone: unknown, not UTC


TAG_TITLES = b"""<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom"><title>Web dev</title>
<entry><title type="text">Why &lt;details&gt; is not an accordion</title><link href="https://dev.example.org/a"/>
<id>a</id><updated>2024-11-03T08:00:00Z</updated></entry>
<entry><title type="html"><![CDATA[Styling &lt;details&gt; markers]]></title><link href="https://dev.example.org/b"/>
<id>b</id><updated>2024-11-03T08:00:00Z</updated></entry>
<entry><title type="html"><![CDATA[Tram stop opens <em>early</em>]]></title><link href="https://dev.example.org/c"/>
<id>c</id><updated>2024-11-03T08:00:00Z</updated></entry></feed>"""
TAG_RSS = b"""<?xml version="1.0"?><rss version="2.0"><channel><title>Tags</title>
<item><title>Why &lt;details&gt; is not an accordion</title><link>https://rss.example.org/a</link></item>
<item><title>AT&amp;T &lt; Verizon on coverage</title><link>https://rss.example.org/b</link></item>
</channel></rss>"""


def test_titles_about_tags_keep_their_tag_names_and_lose_their_markup(redis, tmp_path):
    """Issue 37 item 5 (RFC 4287 §3.1.1): a text title is text, an html title is HTML; the landed document's
    title reads back, through extraction, as the literal words a reader should see."""
    from newsflow.core.extraction import extract_content

    feeds = {
        ("dev.example.org", "/atom"): Response(200, {"Content-Type": "application/atom+xml"}, TAG_TITLES),
        ("rss.example.org", "/rss"): Response(200, {"Content-Type": "application/rss+xml"}, TAG_RSS),
    }
    _fr, docs = crawl(redis, tmp_path, feeds, tasks=7)  # 2 feeds, 5 pages
    titles = {url: extract_content(doc).title for url, doc in docs.items()}
    assert titles == {
        "https://dev.example.org/a": "Why <details> is not an accordion",
        "https://dev.example.org/b": "Styling <details> markers",
        "https://dev.example.org/c": "Tram stop opens early",
        "https://rss.example.org/a": "Why <details> is not an accordion",
        "https://rss.example.org/b": "AT&T < Verizon on coverage",
    }
