"""OPML/CSV source lists (newsflow.core.source_files) and the feed URL rules (newsflow.storage.source_registry)."""

from __future__ import annotations

import io

import pytest

from newsflow.core.source_entries import FeedEntry, FeedError, check_feed_url, clean_categories, crawl_task_id
from newsflow.core.source_files import read_csv, read_file, read_opml, write_csv, write_opml

OPML = b"""<?xml version="1.0" encoding="UTF-8"?>
<opml version="2.0"><head><title>reader export</title></head><body>
  <outline text="News" title="News">
    <outline text="World">
      <outline type="rss" text="BBC World" xmlUrl="https://feeds.bbci.co.uk/news/world/rss.xml"
               htmlUrl="https://www.bbc.co.uk/news/world"/>
    </outline>
    <outline type="rss" text="Example" xmlUrl="https://example.com/feed.xml" category="/tech,/science/space"/>
  </outline>
  <outline type="rss" title="Top level" text="ignored text" xmlUrl="https://news.example.org/rss"/>
  <outline type="rss" text="No url" xmlUrl=""/>
</body></opml>
"""


def entries(parsed):
    return [(ref, e) for ref, e in parsed if isinstance(e, FeedEntry)]


def errors(parsed):
    return [(ref, e) for ref, e in parsed if isinstance(e, FeedError)]


def test_opml_nested_folders_and_category_attribute_become_categories():
    parsed = list(read_opml(io.BytesIO(OPML)))
    got = entries(parsed)
    assert [e.url for _, e in got] == [
        "https://feeds.bbci.co.uk/news/world/rss.xml",
        "https://example.com/feed.xml",
        "https://news.example.org/rss",
    ]
    assert got[0][1].categories == ("News/World",)
    assert got[0][1].title == "BBC World" and got[0][1].html_url == "https://www.bbc.co.uk/news/world"
    assert got[1][1].categories == ("News", "tech", "science/space")
    assert got[2][1].title == "Top level" and got[2][1].categories == ()
    # outlines are counted from 1 in document order (folders included)
    assert [ref for ref, _ in got] == ["outline 3", "outline 4", "outline 5"]
    [(ref, err)] = errors(parsed)
    assert ref == "outline 6" and err.code == "bad_entry"


def test_opml_1_0_without_head_title_and_with_namespaced_attributes():
    src = b'<opml version="1.0"><body><outline text="a" xmlUrl="http://a.example.net/f" /></body></opml>'
    [(ref, e)] = list(read_opml(io.BytesIO(src)))
    assert ref == "outline 1" and e.url == "http://a.example.net/f" and e.title == "a"


def test_entity_expansion_is_refused_with_a_clear_error():
    bomb = b"""<?xml version="1.0"?>
<!DOCTYPE opml [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">
<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]>
<opml version="2.0"><body><outline text="&c;" xmlUrl="https://example.com/x"/></body></opml>"""
    [(ref, err)] = list(read_opml(io.BytesIO(bomb)))
    assert ref == "file" and err.code == "bad_file" and "entit" in err.message


def test_external_entity_is_refused():
    xxe = b"""<?xml version="1.0"?><!DOCTYPE opml [<!ENTITY x SYSTEM "file:///etc/passwd">]>
<opml><body><outline text="&x;" xmlUrl="https://example.com/x"/></body></opml>"""
    [(ref, err)] = list(read_opml(io.BytesIO(xxe)))
    assert err.code == "bad_file"


def test_invalid_xml_keeps_entries_before_the_error():
    src = (
        b'<opml version="2.0"><body>\n<outline xmlUrl="https://a.example.com/f"/>\n'
        b'<outline xmlUrl="https://b.example.com/f"/>\n<outline xmlUrl="x" <broken\n</body></opml>'
    )
    parsed = list(read_opml(io.BytesIO(src)))
    assert [e.url for _, e in entries(parsed)] == ["https://a.example.com/f", "https://b.example.com/f"]
    [(ref, err)] = errors(parsed)
    assert ref == "line 4" and err.code == "bad_file" and "line 4" in err.message


def test_not_opml_root_and_empty_file():
    [(_, err)] = list(read_opml(io.BytesIO(b"<rss><channel/></rss>")))
    assert err.code == "bad_file" and "<rss>" in err.message
    [(_, err)] = list(read_opml(io.BytesIO(b"")))
    assert err.code == "bad_file"


class _Outlines(io.RawIOBase):
    """A file of ``n`` feed outlines generated on the fly (never held in memory)."""

    def __init__(self, n: int):
        self.n, self.i, self.buf = n, 0, b'<opml version="2.0"><body>'
        self.done = False

    def readable(self):
        return True

    def readinto(self, b):
        while len(self.buf) < len(b) and not self.done:
            if self.i < self.n:
                end = min(self.n, self.i + 2000)
                self.buf += b"".join(
                    b'<outline text="f%d" xmlUrl="https://s%d.example.com/feed"/>' % (k, k) for k in range(self.i, end)
                )
                self.i = end
            else:
                self.buf += b"</body></opml>"
                self.done = True
        k = min(len(b), len(self.buf))
        b[:k], self.buf = self.buf[:k], self.buf[k:]
        return k


def test_a_million_outlines_reads_the_cap_and_reports_the_rest_once():
    parsed = list(read_opml(io.BufferedReader(_Outlines(1_000_000)), max_entries=5000))
    good = entries(parsed)
    assert len(good) == 5000 and good[-1][1].url == "https://s4999.example.com/feed"
    [(ref, err)] = errors(parsed)
    assert ref == "outline 5001" and err.code == "too_many"


def test_finished_outlines_are_not_kept_in_memory():
    import tracemalloc

    tracemalloc.start()
    n = sum(1 for _ in read_opml(io.BufferedReader(_Outlines(50_000)), max_entries=100_000))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert n == 50_000
    # 50,000 kept elements would hold >= 4 MB (80 B each plus their attributes)
    assert peak < 2_000_000, f"peak {peak / 1e6:.1f} MB: finished outlines are kept"


def test_csv_columns_categories_and_per_row_errors(tmp_path):
    path = tmp_path / "feeds.csv"
    path.write_text(
        "\ufeffURL,title,categories,kind,status\n"
        "https://example.com/rss,Example,News/World|tech,,\n"
        ",no url,,,\n"
        "https://example.com/news-sitemap.xml,Sitemap,,sitemap,paused\n"
        "https://example.com/x,bad kind,,podcast,\n",
        encoding="utf-8",
    )
    parsed = list(read_file(str(path)))
    good = entries(parsed)
    assert [(r, e.url, e.kind, e.status) for r, e in good] == [
        ("line 2", "https://example.com/rss", "feed", "active"),
        ("line 4", "https://example.com/news-sitemap.xml", "sitemap", "paused"),
    ]
    assert good[0][1].categories == ("News/World", "tech")
    assert [(r, e.code) for r, e in errors(parsed)] == [("line 3", "bad_entry"), ("line 5", "bad_entry")]


def test_csv_removed_status_and_an_unterminated_quote_are_reported_not_imported(tmp_path):
    path = tmp_path / "feeds.csv"
    path.write_text(
        "url,kind,title,categories,html_url,status\n"
        "https://example.com/c1.xml,feed,C1,,,active\n"
        "https://example.com/c3.xml,feed,C3,,,removed\n"
        'https://example.com/c4.xml,feed,"unterminated,,,active\n'
        "http://127.0.0.1:6379/,feed,redis,,,active\n"
        "https://example.com/c5.xml,feed,C5,,,active\n",
        encoding="utf-8",
    )
    parsed = list(read_file(str(path)))
    assert [e.url for _, e in entries(parsed)] == ["https://example.com/c1.xml"]
    errs = errors(parsed)
    assert [(r, e.code) for r, e in errs] == [("line 3", "bad_entry"), ("lines 4-6", "bad_entry")]
    assert "unterminated quote" in errs[1][1].message


def test_csv_without_url_column_and_with_bad_bytes():
    [(_, err)] = list(read_csv(io.BytesIO(b"name,title\na,b\n")))
    assert err.code == "bad_file" and "url" in err.message
    parsed = list(read_csv(io.BytesIO(b"url\nhttps://a.example.com/f\nhttps://b.example.com/\xff\xfe\n")))
    assert [e.url for _, e in entries(parsed)] == ["https://a.example.com/f"]
    assert errors(parsed)[0][1].code == "bad_file"


def _feed(url, title="", categories=(), kind="feed", status="active", html_url=""):
    return {
        "url": url,
        "title": title,
        "categories": list(categories),
        "kind": kind,
        "status": status,
        "html_url": html_url,
    }


ROUND_TRIP = [
    _feed(
        "https://feeds.bbci.co.uk/news/world/rss.xml",
        'BBC <World> & "more"',
        ["News/World"],
        html_url="https://bbc.co.uk",
    ),
    _feed("https://example.com/feed.xml", "Example", ["News", "tech", "science/space"]),
    _feed("https://example.com/sitemap.xml", "Sitemap", [], kind="sitemap", status="paused"),
    _feed("https://example.net/a?x=1&y=2", "Ünïcode title", ["Sport/Football/Premier League", "uk"]),
    _feed("https://example.org/plain", "", []),
]


def _key(f):
    return (f["url"], f["title"], tuple(f["categories"]), f["kind"], f["status"], f["html_url"])


@pytest.mark.parametrize("fmt", ["opml", "csv"])
def test_round_trip_keeps_every_feed_title_and_category(fmt):
    out = io.StringIO()
    n = (write_opml if fmt == "opml" else write_csv)(ROUND_TRIP, out)
    assert n == len(ROUND_TRIP)
    reader = read_opml if fmt == "opml" else read_csv
    back = [
        _feed(e.url, e.title, e.categories, e.kind, e.status, e.html_url)
        for _, e in entries(reader(io.BytesIO(out.getvalue().encode("utf-8"))))
    ]
    assert sorted(map(_key, back)) == sorted(map(_key, ROUND_TRIP))


def test_opml_writer_drops_xml_illegal_characters():
    out = io.StringIO()
    write_opml([_feed("https://example.com/f", "bad\x01title\x0b")], out)
    [(_, e)] = list(read_opml(io.BytesIO(out.getvalue().encode())))
    assert e.title == "badtitle"


def test_check_feed_url_syntax_and_no_dns_address_rules():
    for ok in ("https://example.com/feed", "http://www.example.org/rss?x=1", "https://news.example:8443/f"):
        assert check_feed_url(ok) == ok
    bad = {
        "": "bad_url",
        "ftp://example.com/f": "bad_url",
        "https:///nohost": "bad_url",
        "https://example.com/a b": "bad_url",
        "https://user:pw@example.com/f": "bad_url",
        "https://example.com\\@evil.com/": "bad_url",
        "http://127.0.0.1/feed": "unsafe_url",
        "http://2130706433/feed": "unsafe_url",
        "http://169.254.169.254/latest/meta-data": "unsafe_url",
        "http://metadata.google.internal/": "unsafe_url",
        "http://localhost:8080/": "unsafe_url",
        "http://[::1]/": "unsafe_url",
        "http://intranet/": "unsafe_url",
        "http://10.1.2.3/rss": "unsafe_url",
    }
    for url, code in bad.items():
        with pytest.raises(FeedError) as exc:
            check_feed_url(url)
        assert exc.value.code == code, url


def test_clean_categories_and_task_id():
    assert clean_categories(["/News / World/", "a//b", " x  y ", "a/b", ""]) == ("News/World", "a/b", "x y")
    assert crawl_task_id("feed", "https://Example.com/f?utm_source=x") == crawl_task_id("feed", "https://example.com/f")
    assert crawl_task_id("feed", "https://example.com/f") != crawl_task_id("sitemap", "https://example.com/f")
    assert len(crawl_task_id("feed", "https://example.com/f")) == 24


def test_url_list_the_seeds_format(tmp_path):
    path = tmp_path / "seeds"
    path.write_bytes(b"# feeds\nhttps://example.com/rss\n\n  https://example.org/atom.xml  \nnot a url\n\xff\xfe\n")
    parsed = list(read_file(str(path)))
    assert [(r, e.url) for r, e in entries(parsed)] == [
        ("line 2", "https://example.com/rss"),
        ("line 4", "https://example.org/atom.xml"),
    ]
    assert [(r, e.code) for r, e in errors(parsed)] == [("line 5", "bad_entry"), ("line 6", "bad_file")]


def test_detect_format():
    from newsflow.core.source_files import detect_format

    assert detect_format("x.opml", b"") == "opml"
    assert detect_format("x.txt", b"url,title\n") == "urls"
    assert detect_format("x", b"\xef\xbb\xbf <?xml version='1.0'?><opml>") == "opml"
    assert detect_format("x", b"# comment\nhttps://example.com/rss\n") == "urls"
    assert detect_format("x", b"url,title\nhttps://example.com/rss,a\n") == "csv"


def test_invisible_and_bidi_characters_in_a_feed_url_are_refused():
    from newsflow.core.source_entries import FeedError, check_feed_url

    for url in ("https://example.com/\u202efeed.xml", "https://exa\u200bmple.com/x", "https://example.com/a\u00a0b"):
        with pytest.raises(FeedError, match="format characters"):
            check_feed_url(url)
    assert check_feed_url("https://example.com/f\u00fc\u00df.xml") == "https://example.com/f\u00fc\u00df.xml"


@pytest.mark.parametrize("chunk", [7, 16, 33, 1 << 16])
def test_repairs_do_not_depend_on_where_reads_cut_the_bytes(chunk, monkeypatch):
    """Each record holds an HTML entity (&eacute; -> &#233;), two bare '&' and one unknown reference (read as
    text), beside XML's own references, which stay; any chunk size gives the same bytes and counts."""
    from newsflow.core.source_files import _RepairingReader

    record = b'<a t="Pok&eacute;mon &amp; Smith & D" u="?a=1&b=2&#233;&#xE9;&nosuch;"/>'
    fixed = b'<a t="Pok&#233;mon &amp; Smith &amp; D" u="?a=1&amp;b=2&#233;&#xE9;&amp;nosuch;"/>'
    monkeypatch.setattr(_RepairingReader, "CHUNK", chunk)
    reader = _RepairingReader(io.BytesIO(record * 500))
    assert b"".join(iter(lambda: reader.read(100), b"")) == fixed * 500
    assert (reader.bare, reader.entities) == (1500, {"eacute": 500})
