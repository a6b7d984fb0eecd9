"""``newsflow sources add``: feed discovery against real HTTP servers on 127.0.0.1 (crawler/httpserver.py),
through the crawler's fetcher and safety guard, registering into a real Redis."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

import pytest

from newsflow.cli.main import main
from newsflow.crawler.discover import alternate_feed_links
from newsflow.crawler.httpserver import HttpServer, Response
from newsflow.storage.keys import Keys
from newsflow.storage.source_registry import SourceRegistry

RSS = b"""<?xml version="1.0"?><rss version="2.0"><channel><title>%s</title><link>http://x/</link>
<item><title>one</title><link>http://%s/a1</link></item><item><title>two</title><link>http://%s/a2</link></item>
</channel></rss>"""
ATOM = b"""<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom"><title>Comments</title>
<id>urn:x</id><updated>2024-01-01T00:00:00Z</updated><entry><title>c</title><id>urn:c</id>
<link href="http://home.example.com/c1"/><updated>2024-01-01T00:00:00Z</updated></entry></feed>"""
HOME = b"""<!doctype html><html><head><title>Home</title>
<link rel="alternate" type="application/rss+xml" title="Home News" href="/news/rss.xml">
<link rel="alternate" type="application/atom+xml" title="Comments" href="comments/feed">
<link rel="alternate" type="application/rss+xml" title="Broken" href="/notfeed">
<link rel="stylesheet" href="/s.css"></head><body>hi</body></html>"""
PLAIN = b"<!doctype html><html><head><title>Plain</title></head><body>no links</body></html>"
NEWS_SITEMAP = b"""<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:news="http://www.google.com/schemas/sitemap-news/0.9">
<url><loc>http://maps.example.org/story-1</loc><news:news><news:publication><news:name>Maps</news:name>
<news:language>en</news:language></news:publication><news:publication_date>2024-01-01T00:00:00Z</news:publication_date>
<news:title>Story</news:title></news:news></url></urlset>"""
PLAIN_SITEMAP = b"""<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>http://maps.example.org/about</loc></url></urlset>"""

SITES = {
    "home.example.com": {
        "/": (200, "text/html", HOME),
        "/news/rss.xml": (200, "application/rss+xml", RSS % (b"Home News", b"home.example.com", b"home.example.com")),
        "/comments/feed": (200, "application/atom+xml", ATOM),
        "/notfeed": (200, "text/html", PLAIN),
    },
    "paths.example.net": {
        "/robots.txt": (200, "text/plain", b"User-agent: *\nDisallow: /feed\n"),
        "/": (200, "text/html", PLAIN),
        "/feed": (200, "application/rss+xml", RSS % (b"Forbidden", b"p", b"p")),
        "/rss": (200, "application/rss+xml", RSS % (b"Paths RSS", b"paths.example.net", b"paths.example.net")),
    },
    "down.example.org": {
        "/robots.txt": (503, "text/plain", b"busy"),
        "/": (200, "text/html", HOME),
    },
    "maps.example.org": {
        "/robots.txt": (
            200,
            "text/plain",
            b"User-agent: *\nAllow: /\nSitemap: http://maps.example.org/sitemap.xml\n"
            b"Sitemap: http://maps.example.org/news-sitemap.xml\n",
        ),
        "/": (200, "text/html", PLAIN),
        "/sitemap.xml": (200, "application/xml", PLAIN_SITEMAP),
        "/news-sitemap.xml": (200, "application/xml", NEWS_SITEMAP),
    },
}


@pytest.fixture
def redis_flushed(server):
    """The module's embedded Redis (conftest ``server``), emptied: ``(client, unix URL)``."""
    server.flushall()
    return server, f"unix://{server.socket_file}"


def handler(req):
    site = SITES.get(req.host.split(":")[0], {})
    hit = site.get(req.path)
    if hit is None:
        return Response(404, {"Content-Type": "text/plain"}, b"not found")
    status, ctype, body = hit
    return Response(status, {"Content-Type": ctype}, body)


@pytest.fixture(scope="module")
def web():
    with HttpServer(handler) as srv:
        yield srv


def add(web, url, *extra, redis_url, allow=True):
    argv = ["sources", "add", url, "--redis-url", redis_url, "--resolve", f"*=127.0.0.1:{web.port}"]
    argv += ["--host-delay", "0.2", *(["--allow-host", "127.0.0.1"] if allow else []), *extra]
    out = io.StringIO()
    with redirect_stdout(out):
        rc = main(argv)
    return rc, out.getvalue()


def requests_to(web, host):
    return [e for e in web.log if e.host.split(":")[0] == host]


def test_home_page_alternate_links_politely(web, redis_flushed):
    client, url = redis_flushed
    web.log.clear()
    rc, out = add(web, "http://home.example.com/", "--tier", "national", "--name", "Home Daily", redis_url=url)
    assert rc == 0, out
    assert "found feed http://home.example.com/news/rss.xml 'Home News' via link, 2 items" in out
    assert "found feed http://home.example.com/comments/feed 'Comments' via link, 1 items (not registered" in out
    assert "http://home.example.com/notfeed: 200 text/html (not a feed)" in out
    [feed] = SourceRegistry(client, Keys()).feeds()
    assert (feed["url"], feed["title"], feed["outlet"]) == (
        "http://home.example.com/news/rss.xml",
        "Home News",
        "example.com",
    )
    assert (feed["name"], feed["tier"], feed["authority"]) == ("Home Daily", "national", 0.75)
    assert feed["html_url"] == "http://home.example.com/"
    log = requests_to(web, "home.example.com")
    assert [e.path for e in log] == ["/robots.txt", "/", "/news/rss.xml", "/comments/feed", "/notfeed"]
    for a, b in zip(log, log[1:], strict=False):
        assert b.start >= a.end + 0.19, "two requests to one host closer than --host-delay"
    # again: already registered, nothing changes
    rc, out = add(web, "http://home.example.com/", redis_url=url)
    assert rc == 0 and "unchanged http://home.example.com/news/rss.xml" in out
    # --all registers the comments feed too; a feed URL given directly is used as is
    rc, out = add(web, "http://home.example.com/", "--all", redis_url=url)
    assert "added http://home.example.com/comments/feed" in out
    rc, out = add(web, "http://home.example.com/news/rss.xml", "--json", redis_url=url)
    first = json.loads(out.splitlines()[0])
    assert [(f["url"], f["how"]) for f in first["found"]] == [("http://home.example.com/news/rss.xml", "given")]


def test_common_paths_obey_robots_txt(web, redis_flushed):
    client, url = redis_flushed
    web.log.clear()
    rc, out = add(web, "http://paths.example.net/", redis_url=url)
    assert rc == 0, out
    assert "http://paths.example.net/feed: robots.txt disallows" in out
    assert "found feed http://paths.example.net/rss 'Paths RSS' via common-path" in out
    assert "/feed" not in [e.path for e in requests_to(web, "paths.example.net")]
    assert [f["url"] for f in SourceRegistry(client, Keys()).feeds()] == ["http://paths.example.net/rss"]


def test_robots_news_sitemap(web, redis_flushed):
    client, url = redis_flushed
    rc, out = add(web, "http://maps.example.org/", "--json", redis_url=url)
    assert rc == 0, out
    first = json.loads(out.splitlines()[0])
    assert [(f["url"], f["kind"], f["how"]) for f in first["found"]] == [
        ("http://maps.example.org/news-sitemap.xml", "sitemap", "robots")
    ]
    assert any("not a news sitemap" in t["outcome"] for t in first["tried"])
    [feed] = SourceRegistry(client, Keys()).feeds()
    assert (feed["url"], feed["kind"]) == ("http://maps.example.org/news-sitemap.xml", "sitemap")


def test_safety_guard_and_unsafe_urls(web, redis_flushed):
    client, url = redis_flushed
    # without --allow-host the resolved 127.0.0.1 is refused by the guard: nothing fetched, nothing found
    n = len(web.log)
    rc, out = add(web, "http://home.example.com/", redis_url=url, allow=False)
    assert rc == 1 and "unsafe_address" in out and "no feed or news sitemap found" in out
    assert len(web.log) == n
    rc, _ = add(web, "http://169.254.169.254/latest/", redis_url=url)
    assert rc == 2
    assert SourceRegistry(client, Keys()).count() == 0


def test_unresolvable_host_is_a_dns_failure_not_a_robots_verdict(redis_flushed):
    client, url = redis_flushed
    # RFC 6761: names under .invalid never resolve; no --resolve override, so real DNS is asked
    out = io.StringIO()
    with redirect_stdout(out):
        rc = main(["sources", "add", "http://no-such-outlet.invalid/", "--redis-url", url, "--host-delay", "0"])
    lines = out.getvalue().splitlines()
    assert rc == 1
    assert lines[0].startswith("fetched http://no-such-outlet.invalid/robots.txt: dns: cannot resolve")
    assert "unsafe_address" not in out.getvalue() and "robots.txt disallows" not in out.getvalue()
    # one "skipped" line for the page asked for, no walk over the common feed paths
    assert [x for x in lines if x.startswith("fetched ")][1:] == [
        "fetched http://no-such-outlet.invalid/: skipped: host unreachable (dns: "
        + lines[0].split(": dns: ", 1)[1]
        + ")"
    ]
    assert (
        "no feed or news sitemap found for http://no-such-outlet.invalid/"
        " (http://no-such-outlet.invalid: host unreachable" in out.getvalue()
    )
    assert SourceRegistry(client, Keys()).count() == 0


def test_robots_txt_answering_503_is_named(web, redis_flushed):
    _, url = redis_flushed
    web.log.clear()
    rc, out = add(web, "http://down.example.org/", "--json", redis_url=url)
    assert rc == 1
    first = json.loads(out.splitlines()[0])
    why = "robots.txt answered 503, host disallowed for now (RFC 9309 2.3.1.4)"
    assert first["blocked"] == {"http://down.example.org": why}
    assert [(t["url"], t["outcome"]) for t in first["tried"]] == [
        ("http://down.example.org/robots.txt", "503 text/plain"),
        ("http://down.example.org/", "skipped: " + why),
    ]
    assert [e.path for e in requests_to(web, "down.example.org")] == ["/robots.txt"]


def test_no_discover_registers_as_given(web, redis_flushed):
    client, url = redis_flushed
    n = len(web.log)
    rc, out = add(web, "https://www.example.com/sitemap-news.xml", "--no-discover", "--kind", "sitemap", redis_url=url)
    assert rc == 0 and len(web.log) == n
    [feed] = SourceRegistry(client, Keys()).feeds()
    assert feed["kind"] == "sitemap" and feed["authority"] == 0.5


def test_alternate_links_resolve_against_base():
    html = (
        b'<html><head><base href="https://cdn.example.com/x/">'
        b'<link rel="Alternate feed" type="application/feed+json" href="f.json">'
        b'<link rel=alternate type=application/rss+xml href="javascript:x"></head></html>'
    )
    assert alternate_feed_links(html, "https://www.example.com/") == [("https://cdn.example.com/x/f.json", "")]
