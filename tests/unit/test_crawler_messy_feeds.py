"""Issue 10, items 6-11: feeds, dates and XML as publishers really serve them (pure parsing, no I/O)."""

import calendar
import json
import time

import pytest

from newsflow.core.decoding import mostly_utf8, strip_control_chars
from newsflow.core.extraction import ExtractionConfig, extract_content, html_fragment_to_text
from newsflow.core.timeutil import feed_zone_date_to_epoch, zone_abbreviation_offset_s
from newsflow.crawler.feeds import FeedParseError, parse_feed, parse_json_feed, parse_news_sitemap, publisher_country
from newsflow.schemas.raw import RawDocument

GREEK = ["Ο δήμος ανακοίνωσε νέο πάρκο", "Κλειστός ο δρόμος την Κυριακή"]


def utc(text):
    """UTC epoch seconds of ``"2024-11-03T21:00"``."""
    return float(calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M")))


def rss(items, encoding="UTF-8", title="Δήμος"):
    body = "".join(
        f"<item><title>{t}</title><link>https://dimos.example.gr/{i}</link><description>{d}</description>"
        f"{f'<pubDate>{p}</pubDate>' if p else ''}</item>"
        for i, (t, d, p) in enumerate(items)
    )
    channel = f"<channel><title>{title}</title>{body}</channel>"
    return f"<?xml version='1.0' encoding='{encoding}'?><rss version='2.0'>{channel}</rss>"


# ----------------------------------------------------------------------------------------------- item 6: charset


def greek_feed_with_bad_byte():
    text = rss([(GREEK[0], "Το νέο πάρκο BAD ανοίγει.", None), (GREEK[1], "Λόγω εργασιών.", None)])
    return text.encode("utf-8").replace(b"BAD", b"\xc3")


def test_utf8_feed_with_one_invalid_byte_keeps_its_titles():
    body = greek_feed_with_bad_byte()
    with pytest.raises(UnicodeDecodeError):
        body.decode("utf-8")
    for ctype in ("application/rss+xml; charset=utf-8", "application/rss+xml", ""):
        parsed = parse_feed(body, "https://dimos.example.gr/feed", ctype)
        assert [e.title for e in parsed.entries] == GREEK, ctype
        # only the bad byte is replaced (U+FFFD), the rest of that description is intact
        assert parsed.entries[0].summary == "Το νέο πάρκο \ufffd ανοίγει."
        assert parsed.entries[1].summary == "Λόγω εργασιών."
        assert parsed.title == "Δήμος"


def test_feed_that_is_not_mostly_utf8_still_goes_to_the_charset_fallback():
    # latin-1 bytes declared UTF-8: no valid multi-byte sequences, so no repair is attempted
    body = rss([("Café São Paulo", "x", None)], encoding="utf-8", title="Cidade").encode("latin-1")
    assert mostly_utf8(body) is None
    parsed = parse_feed(body, content_type="application/rss+xml; charset=utf-8")
    assert parsed.entries[0].title.startswith("Caf") and parsed.warning
    # a feed declared in another charset is never "repaired" as UTF-8
    body = rss([("Ωραία μέρα", "x", None)], encoding="iso-8859-7").encode("iso-8859-7")
    assert parse_feed(body).entries[0].title == "Ωραία μέρα"


def test_mostly_utf8_threshold():
    assert mostly_utf8("αβγδεζηθικ".encode() + b"\xc3") == "αβγδεζηθικ\ufffd"
    assert mostly_utf8("αβγδεζηθι".encode() + b"\xc3") is None  # 9 good characters per bad byte: not enough
    assert mostly_utf8(b"plain") == "plain"


# ------------------------------------------------------------------------------------- item 7: control characters


def test_control_characters_leave_feed_summaries():
    item = ("Pool closed", "Closed for cleaning\x01 until Friday.", None)
    parsed = parse_feed(rss([item]).encode())
    assert parsed.entries[0].summary == "Closed for cleaning until Friday."
    assert not parsed.warning  # the bytes were cleaned before the strict XML parser saw them
    # as a character reference (legal syntax, illegal character) too
    parsed = parse_feed(rss([("Pool&#1; closed", "Closed for cleaning&#x1; until Friday.", None)]).encode())
    assert parsed.entries[0].title == "Pool closed"
    assert parsed.entries[0].summary == "Closed for cleaning until Friday."


def test_strip_control_chars_keeps_tab_newline_and_other_text():
    assert strip_control_chars("a\x00b\x08c\x0bd\x1fe\tf\ng\rh\x7fi\ufffej\uffffk\ud800l") == "abcde\tf\ng\rh\x7fijkl"
    assert strip_control_chars("") == ""


def test_control_characters_leave_stored_article_text():
    raw = RawDocument(
        url="https://pool.example.org/news/closed",
        source_domain="pool.example.org",
        fetch_time=1714629600.0,
        title="Pool\x02 closed",
        summary="<p>Closed for cleaning\x01 until Friday.</p>",
    )
    content = extract_content(raw, ExtractionConfig())
    assert (content.title, content.text) == ("Pool closed", "Closed for cleaning until Friday.")
    assert html_fragment_to_text("Closed for cleaning\x01 until Friday.") == "Closed for cleaning until Friday."
    para = "<p>The municipal pool is closed for cleaning\x01 until Friday, the council said. " + "More. " * 150 + "</p>"
    head = "<head><title>Pool\x03 closed</title></head>"
    page = f"<html>{head}<body><article><h1>Pool\x03 closed</h1>{para}</article></body></html>"
    raw = raw._replace(http_status=200, content_type="text/html; charset=utf-8", body=page.encode())
    content = extract_content(raw, ExtractionConfig())
    assert "\x01" not in content.text and "\x03" not in content.title
    assert "closed for cleaning until Friday" in content.text
    assert content.title == "Pool closed"


# ---------------------------------------------------------------------------------------------- item 8: JSON Feed

LAKE = (
    '{"version":"https://jsonfeed.org/version/1","title":"Example Lake Weekly","items":[{"id":"lw-1",'
    '"url":"https://lakeweekly.example.org/2024/05/ice-out/","title":"Ice out on the lake a week early",'
    '"date_published":"2024-05-02T06:00:00Z"}]}'
)


def test_json_feed_from_the_issue():
    for ctype in ("application/feed+json", "application/json", ""):
        parsed = parse_feed(LAKE.encode(), "https://lakeweekly.example.org/feed.json", ctype)
        assert parsed.version == "json1" and parsed.title == "Example Lake Weekly"
        assert len(parsed.entries) == 1
        e = parsed.entries[0]
        assert e.guid == "lw-1"
        assert e.published_time == 1714629600.0
        assert e.url == "https://lakeweekly.example.org/2024/05/ice-out/"
        assert e.title == "Ice out on the lake a week early"


def test_json_feed_1_1_fields_and_fallbacks():
    doc = {
        "version": "https://jsonfeed.org/version/1.1",
        "title": "T",
        "items": [
            {"id": 7, "url": "/a", "content_text": "Text\x01 body", "date_modified": "2024-05-02T08:00:00+02:00"},
            {"id": "b", "external_url": "https://other.example/b", "summary": "S", "content_html": "<p>H</p>"},
            {"id": "c", "url": "https://x.example/c", "date_published": "2024-05-02T06:00:00"},  # no offset: unknown
            "not an item",
        ],
    }
    parsed = parse_json_feed(("\ufeff" + json.dumps(doc)).encode(), "https://x.example/feed.json")
    assert parsed.version == "json11"
    assert [(e.guid, e.url, e.summary, e.published_time) for e in parsed.entries] == [
        ("7", "https://x.example/a", "Text body", 1714629600.0),
        ("b", "https://other.example/b", "S", None),
        ("c", "https://x.example/c", None, None),
    ]


@pytest.mark.parametrize(
    "body",
    [b"{not json", b"[1, 2]", b'{"version": "1", "items": []}', b'{"version": "https://jsonfeed.org/version/1"}'],
)
def test_bad_json_feeds_are_refused(body):
    with pytest.raises(FeedParseError):
        parse_feed(body, content_type="application/json")


# --------------------------------------------------------------------------------- item 9: zone abbreviations


def test_zone_abbreviations_from_the_issue():
    items = [
        ("A", "a", "Mon, 04 Nov 2024 08:00:00 AEDT"),
        ("B", "b", "Wed, 06 Mar 2024 10:00:00 CET"),
        ("C", "c", "Wed, 06 Mar 2024 10:00:00 IST"),  # India, Ireland or Israel: unknown
        ("D", "d", "Wed, 06 Mar 2024 10:00:00 QQT"),  # no such zone: unknown
        ("E", "e", "Wed, 06 Mar 2024 10:00:00 EST"),  # RFC 822: US Eastern
        ("F", "f", "Wed, 06 Mar 2024 10:00:00 +0530"),
        ("G", "g", "Wed, 06 Mar 2024 10:00:00 GMT"),
    ]
    got = [e.published_time for e in parse_feed(rss(items).encode()).entries]
    assert got == [
        utc("2024-11-03T21:00"),
        utc("2024-03-06T09:00"),
        None,
        None,
        utc("2024-03-06T15:00"),
        utc("2024-03-06T04:30"),
        utc("2024-03-06T10:00"),
    ]


def test_zone_names_of_the_messy_web_round_three():
    """Issue 37 item 3. Offsets from tzdata: BST (London) +1, CEST +2, AEST +10, EEST +3, NZDT +13; IST is
    +05:30 in India (Asia/Kolkata), +01:00 in Ireland (Europe/Dublin's summer name), +02:00 in Israel
    (Asia/Jerusalem) and unknown without a country; QQT is no zone."""
    items = [(n, n, f"Wed, 10 Jul 2024 12:00:00 {n}") for n in ("BST", "CEST", "AEST", "EEST", "NZDT", "IST", "QQT")]
    body = rss(items).encode()
    hours = {"BST": 11, "CEST": 10, "AEST": 2, "EEST": 9, "NZDT": -1}
    generic = parse_feed(body, "https://news.example.com/rss")
    got = {e.title: e.published_time for e in generic.entries}
    base = utc("2024-07-10T00:00")
    for name, hour in hours.items():
        assert got[name] == base + hour * 3600, name
    assert got["IST"] is None and got["QQT"] is None and generic.unresolved_dates == 2
    by_url = {
        "https://www.thehindu.in/feed": utc("2024-07-10T06:30"),
        "https://www.irishnews.ie/rss": utc("2024-07-10T11:00"),
        "https://www.haaretz.co.il/rss": utc("2024-07-10T10:00"),
    }
    for url, expected in by_url.items():
        feed = parse_feed(body, url)
        assert {e.title: e.published_time for e in feed.entries}["IST"] == expected, url
        assert feed.unresolved_dates == 1  # QQT
    # the declared language's region is evidence too, and wins over a generic TLD
    declared = rss(items[5:6]).replace("<channel>", "<channel><language>en-IN</language>").encode()
    assert parse_feed(declared, "https://news.example.com/rss").entries[0].published_time == utc("2024-07-10T06:30")
    assert publisher_country("https://bbc.co.uk/news") == "GB" and publisher_country("https://x.com/") is None


def test_atom_updated_is_used_when_published_zone_is_unknown():
    body = b"""<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom"><title>T</title>
    <entry><title>X</title><link href="https://a.example/x"/><id>x</id>
    <published>Wed, 06 Mar 2024 10:00:00 IST</published><updated>2024-03-06T11:00:00+01:00</updated></entry></feed>"""
    assert parse_feed(body).entries[0].published_time == utc("2024-03-06T10:00")


def test_zone_abbreviation_table():
    assert zone_abbreviation_offset_s("AEDT") == 11 * 3600
    assert zone_abbreviation_offset_s("cet") == 3600
    assert zone_abbreviation_offset_s("CEST") == 7200
    assert zone_abbreviation_offset_s("NST") == -(3 * 3600 + 1800)  # Newfoundland
    assert zone_abbreviation_offset_s("CST") == -6 * 3600  # RFC 5322 wins over China/Cuba
    assert zone_abbreviation_offset_s("IST") is None
    assert zone_abbreviation_offset_s("XYZ") is None
    assert feed_zone_date_to_epoch("2024-03-06T10:00:00Z") == (None, False)
    assert feed_zone_date_to_epoch("Wed, 06 Mar 2024 10:00:00 +0100") == (None, False)
    assert feed_zone_date_to_epoch("Wed, 06 Mar 2024 10:00 CET") == (utc("2024-03-06T09:00"), True)
    assert feed_zone_date_to_epoch("sometime 10:00:00 CET") == (None, True)
    assert feed_zone_date_to_epoch("2024-03-06 10:00:00 CET") == (utc("2024-03-06T09:00"), True)
    assert feed_zone_date_to_epoch("2024-03-06T10:00:00 UTC") == (utc("2024-03-06T10:00"), True)
    assert feed_zone_date_to_epoch("2024-03-06T10:00:00+01:00 CET") == (None, True)  # contradictory


# ------------------------------------------------------------------------------- item 10: URL date is a fallback


def page(meta=""):
    para = "<p>" + "The council opened the new harbour walk on Monday after two years of building work. " * 5
    return (
        f"<html lang='en'><head><title>Harbour walk opens</title>{meta}</head><body><article>"
        f"<h1>Harbour walk opens</h1>{para}</p>{para}</p></article></body></html>"
    ).encode()


def page_doc(body, published_time=None):
    return RawDocument(
        url="https://tribune.example.net/2024/10/14/harbour-walk-opens",
        source_domain="tribune.example.net",
        fetch_time=utc("2024-10-15T00:00"),
        http_status=200,
        content_type="text/html; charset=utf-8",
        body=body,
        published_time=published_time,
    )


def test_page_time_beats_a_date_in_the_url():
    meta = "<meta property='article:published_time' content='2024-10-14T11:00:00+02:00'>"
    content = extract_content(page_doc(page(meta)), ExtractionConfig())
    assert content.publish_time == utc("2024-10-14T09:00")


def test_url_date_is_only_a_fallback():
    cfg = ExtractionConfig()
    assert extract_content(page_doc(page()), cfg).publish_time == utc("2024-10-14T00:00")
    # the feed's exact time beats the day-only URL date
    assert extract_content(page_doc(page(), utc("2024-10-14T07:30")), cfg).publish_time == utc("2024-10-14T07:30")


# ------------------------------------------------------------------------------------ item 11: hardened XML

LAUGHS = b"""<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">
<!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
<!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">]>"""
XXE = b"""<?xml version="1.0"?><!DOCTYPE x [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>"""


def test_feeds_with_entity_declarations_are_refused():
    for prolog in (LAUGHS, XXE):
        for root in (
            b"<rss version='2.0'><channel><title>&lol2;</title><item><title>a</title><link>https://a.example/1</link></item></channel></rss>",
            b"<feed xmlns='http://www.w3.org/2005/Atom'><title>t</title><entry><title>&xxe;</title></entry></feed>",
        ):
            with pytest.raises(FeedParseError, match="declares entities"):
                parse_feed(prolog + root)
    # a plain RSS 0.91 DOCTYPE without entity declarations still parses
    rss091 = (
        b'<?xml version="1.0"?><!DOCTYPE rss PUBLIC "-//Netscape Communications//DTD RSS 0.91//EN" '
        b'"http://my.netscape.com/publish/formats/rss-0.91.dtd"><rss version="0.91"><channel><title>t</title>'
        b"<item><title>a</title><link>https://a.example/1</link></item></channel></rss>"
    )
    assert [e.url for e in parse_feed(rss091).entries] == ["https://a.example/1"]


def test_sitemaps_with_a_dtd_are_refused():
    urlset = b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>https://a.example/&lol2;</loc></url></urlset>'
    for prolog in (LAUGHS, XXE, b'<?xml version="1.0"?><!DOCTYPE urlset>'):
        with pytest.raises(FeedParseError, match="DTD refused"):
            parse_news_sitemap(prolog + urlset)
    ok = b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>https://a.example/1</loc></url></urlset>'
    assert [e.url for e in parse_news_sitemap(ok)[0]] == ["https://a.example/1"]


def test_unknown_declared_xml_encoding_is_parsed_or_refused_never_raised():
    """``encoding='x-bogus'`` used to raise LookupError out of parse_feed and parse_news_sitemap
    (the crawl worker only catches FeedParseError, so the crawl died)."""
    from newsflow.crawler.feeds import FeedParseError, parse_feed, parse_news_sitemap

    decl = b"<?xml version='1.0' encoding='x-bogus'?>"
    rss = decl + b"<rss version='2.0'><channel><title>T</title><item><title>A</title>"
    rss += b"<link>https://pub.test/a</link></item></channel></rss>"
    feed = parse_feed(rss, "https://pub.test/feed.xml")
    assert [(e.url, e.title) for e in feed.entries] == [("https://pub.test/a", "A")]
    sitemap = decl + b"<urlset xmlns='http://www.sitemaps.org/schemas/sitemap/0.9'><url>"
    sitemap += b"<loc>https://pub.test/a</loc></url></urlset>"
    with pytest.raises(FeedParseError, match="unknown encoding"):
        parse_news_sitemap(sitemap, "https://pub.test/sitemap.xml")
