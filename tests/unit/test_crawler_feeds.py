"""Feed parsing (real rss-parser fixtures), scheduling hints, news sitemaps, AMP canonicalization."""

import json
import os

import pytest

from newsflow.core.urls import article_id, canonicalize_url, strip_amp
from newsflow.crawler.feeds import FeedParseError, parse_feed, parse_news_sitemap
from tests.conftest import SHARED_DATA

FEEDS = os.path.join(SHARED_DATA, "rss-atom-feeds")


@pytest.mark.skipif(not os.path.isdir(FEEDS), reason="shared rss-atom-feeds data absent")
def test_every_shared_feed_parses_with_expected_item_count():
    with open(os.path.join(FEEDS, "index.json"), encoding="utf-8") as f:
        index = json.load(f)
    assert len(index) == 23
    for item in index:
        with open(os.path.join(FEEDS, item["file"]), "rb") as f:
            body = f.read()
        expected = item.get("expected_items")
        if expected is None:
            with pytest.raises(FeedParseError):
                parse_feed(body)
            continue
        parsed = parse_feed(body, url="http://feeds.example/")
        assert len(parsed.entries) == expected, item["file"]
        # titles agree with rss-parser's own output where it has them
        with open(os.path.join(FEEDS, item["expected"]), "rb") as f:
            ref = json.loads(f.read().decode("utf-8", "replace"))
        ref_titles = [i.get("title") for i in ref["feed"]["items"]]
        if ref_titles and all(ref_titles) and not any("\ufffd" in t for t in ref_titles):
            assert [(e.title or "").strip() for e in parsed.entries][:3] == [t.strip() for t in ref_titles][:3]


def test_wrongly_declared_charset_is_recovered():
    text = (
        "<?xml version='1.0' encoding='utf-8'?><rss version='2.0'><channel><title>T</title>"
        "<item><title>Caf\u00e9 S\u00e3o Paulo</title><link>http://a.example/1</link></item></channel></rss>"
    )
    body = text.encode("latin-1")  # declared utf-8, actually latin-1
    parsed = parse_feed(body, content_type="application/rss+xml; charset=utf-8")
    assert len(parsed.entries) == 1
    assert parsed.entries[0].url == "http://a.example/1"
    assert "S" in parsed.entries[0].title and parsed.warning


def test_invalid_xml_and_html_refused():
    with pytest.raises(FeedParseError):
        parse_feed(b"<html><head><title>Moved</title></head><body>gone</body></html> trailing <<<")
    broken = b"<rss version='2.0'><channel><item><title>A & B</title><link>http://a.example/x</link></item>"
    parsed = parse_feed(broken)  # unclosed and an unescaped '&': recovered by feedparser's loose parser
    assert [e.url for e in parsed.entries] == ["http://a.example/x"]


def test_schedule_hints_and_relative_links():
    body = b"""<?xml version="1.0"?><rss version="2.0" xmlns:sy="http://purl.org/rss/1.0/modules/syndication/">
    <channel><title>S</title><ttl>15</ttl><sy:updatePeriod>hourly</sy:updatePeriod>
    <sy:updateFrequency>4</sy:updateFrequency><skipHours><hour>1</hour><hour>2</hour></skipHours>
    <skipDays><day>Sunday</day></skipDays>
    <item><title>One</title><link>/news/1</link><guid>g1</guid><pubDate>Mon, 10 Mar 2014 10:00:00 GMT</pubDate></item>
    </channel></rss>"""
    p = parse_feed(body, url="http://site.example/feed.xml")
    assert p.ttl_s == 900.0
    assert p.update_period_s == 900.0
    assert p.skip_hours == frozenset({1, 2}) and p.skip_days == frozenset({"Sunday"})
    e = p.entries[0]
    assert e.url == "http://site.example/news/1" and e.guid == "g1"
    assert e.published_time == 1394445600.0  # 2014-03-10T10:00:00Z


def test_news_sitemap_and_index():
    body = b"""<?xml version="1.0" encoding="UTF-8"?>
    <urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"
            xmlns:news="http://www.google.com/schemas/sitemap-news/0.9">
      <url><loc>http://n.example/a</loc><news:news><news:publication><news:name>N</news:name>
        <news:language>en</news:language></news:publication>
        <news:publication_date>2014-03-10T10:00:00Z</news:publication_date><news:title>Alpha</news:title>
      </news:news></url>
      <url><loc>/b</loc><lastmod>2014-03-10T11:00:00+01:00</lastmod></url>
    </urlset>"""
    entries, children = parse_news_sitemap(body, url="http://n.example/sitemap.xml")
    assert children == []
    assert [(e.url, e.title, e.published_time) for e in entries] == [
        ("http://n.example/a", "Alpha", 1394445600.0),
        ("http://n.example/b", None, 1394445600.0),
    ]
    idx = b"""<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
      <sitemap><loc>http://n.example/s1.xml</loc></sitemap></sitemapindex>"""
    assert parse_news_sitemap(idx) == ([], ["http://n.example/s1.xml"])
    with pytest.raises(FeedParseError):
        parse_news_sitemap(b"<urlset><url>")
    with pytest.raises(FeedParseError):
        parse_news_sitemap(b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><urlset/>')


def test_amp_variants_share_the_article_id():
    plain = "https://www.bbc.com/news/world-1"
    for amp in (
        "https://www-bbc-com.cdn.ampproject.org/c/s/www.bbc.com/news/world-1",
        "https://www.google.com/amp/s/www.bbc.com/news/world-1",
        "https://www.bbc.com/news/world-1/amp",
        "https://www.bbc.com/amp/news/world-1",
        "https://www.bbc.com/news/world-1?amp=1&utm_source=rss",
        "https://www.bbc.com/news/world-1?outputType=amp#top",
    ):
        assert canonicalize_url(amp) == plain, amp
        assert article_id(amp) == article_id(plain)
    assert canonicalize_url("https://x.example/a/b.amp.html") == "https://x.example/a/b.html"
    # words merely containing "amp" are untouched
    assert strip_amp("https://x.example/champion/ampere?camp=1") == "https://x.example/champion/ampere?camp=1"
    # pre-existing behaviour is unchanged
    assert (
        canonicalize_url("HTTP://Example.COM:80/a/./b/../c?b=2&a=1&utm_medium=x#f") == "http://example.com/a/c?a=1&b=2"
    )
