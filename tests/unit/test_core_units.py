"""Pure units: URL canonicalization and ids, sources table, schemas round trips, article building, Parquet files."""

from __future__ import annotations

import hashlib

import pyarrow.parquet as pq
import pytest

from newsflow.core.articles import build_article, event_time, event_time_ms
from newsflow.core.extraction import ExtractedContent
from newsflow.core.sources import UNKNOWN_AUTHORITY, SourceTable
from newsflow.core.urls import article_id, canonicalize_url, source_domain
from newsflow.schemas import ARTICLE_SCHEMA, Article, RawDocument
from newsflow.storage.parquet import list_files, read_dataset, write_records


def test_canonical_url_rules():
    assert (
        canonicalize_url("HTTP://WWW.Example.COM:80/a/./b/../c?utm_source=x&b=2&a=1#top")
        == "http://www.example.com/a/c?a=1&b=2"
    )
    assert canonicalize_url("https://example.com:443") == "https://example.com/"
    assert canonicalize_url("https://example.com:8443/x?fbclid=1") == "https://example.com:8443/x"
    assert canonicalize_url(r"http://www.iii.co.uk/news\?id=3") == "http://www.iii.co.uk/news?id=3"
    for bad in ("", "javascript:alert(1)", "file:///etc/passwd", "http://", "http://x.com:99999/"):
        with pytest.raises(ValueError):
            canonicalize_url(bad)


def test_article_id_is_sha256_of_the_canonical_url():
    url = "https://Example.com/story?utm_medium=rss"
    assert article_id(url) == hashlib.sha256(b"https://example.com/story").hexdigest()[:32]
    assert article_id(url) == article_id("https://example.com/story#comments")


def test_source_domain_and_authority_lookup_by_longest_suffix():
    table = SourceTable.load()
    assert source_domain("https://www.Reuters.com/x") == "reuters.com"
    assert table.authority("in.reuters.com") == 0.95
    assert table.lookup("blogs.wsj.com").domain == "wsj.com"
    assert table.authority("unknown-site.example") == UNKNOWN_AUTHORITY
    assert table.authority("notreuters.com") == UNKNOWN_AUTHORITY  # suffixes align on labels


def test_sources_table_rejects_out_of_range_authority(tmp_path):
    path = tmp_path / "s.csv"
    path.write_text("domain,name,tier,authority\nx.com,X,wire,1.5\n")
    with pytest.raises(ValueError, match="outside"):
        SourceTable.load(str(path))


def test_raw_document_json_round_trip_and_validation():
    raw = RawDocument(
        url="https://x.com/a", source_domain="X.com", fetch_time=12.5, http_status=200, body=b"\x00\xffhi"
    )
    back = RawDocument.from_json_dict(raw.to_json_dict())
    assert back == raw._replace(source_domain="x.com")
    with pytest.raises(ValueError, match="missing"):
        RawDocument.from_json_dict({"url": "https://x.com"})
    with pytest.raises(ValueError, match="base64"):
        RawDocument.from_json_dict({"url": "u", "source_domain": "d", "fetch_time": 1, "body_b64": "!!"})


def test_event_time_is_the_entry_date_clamped_to_the_fetch_time_else_the_fetch_time():
    assert event_time(100.0, 200.0) == 100.0
    assert event_time(None, 200.0) == 200.0
    assert event_time(200.5, 200.0) == 200.0  # an entry dated after its own fetch: the fetch time
    raw = RawDocument(url="https://x.com/a", source_domain="x.com", fetch_time=1000.0006, published_time=None)
    assert event_time_ms(raw) == 1_000_000  # rounded down: never later than the article's event_time
    assert event_time_ms(raw._replace(published_time=999.25)) == 999_250


def test_build_article_fields():
    raw = RawDocument(
        url="https://www.example.com/a?utm_source=x",
        source_domain="example.com",
        fetch_time=1000.0,
        published_time=900.0,
        source_name=None,
        body=None,
        title="T",
        summary="S",
    )
    content = ExtractedContent(
        title="Title", text="one two three", authors=("A",), site_name="Example", publish_time=900.0, html_language=""
    )
    a = build_article(raw, content, source_authority=0.75, source_name="Example News")
    assert a.article_id == article_id("https://www.example.com/a")
    assert (a.publish_time, a.event_time, a.word_count, a.feed_only) == (900.0, 900.0, 3, True)
    # extraction decides the publish time (it drops implausible feed times): no fallback to the raw field;
    # the event time is the message's (the feed date clamped to the fetch), whatever extraction found
    b = build_article(raw, content._replace(publish_time=None), source_authority=0.75)
    assert (b.publish_time, b.event_time) == (None, 900.0)
    c = build_article(raw._replace(published_time=None), content._replace(publish_time=500.0), source_authority=0.75)
    assert (c.publish_time, c.event_time) == (500.0, 1000.0)  # an earlier page date does not restamp
    assert a.source_name == "Example" and a.source_authority == 0.75


def _article(aid: str, t: float) -> Article:
    return Article(aid, "u", "u", "d", "n", "t", "x", ["a"], "", t, t, t, "en", 0.5, "0" * 16, 1, False, 0.5, "c1")


def test_parquet_files_are_content_addressed_and_round_trip(tmp_path):
    rows = [_article("b", 86400.0), _article("a", 86401.0)]
    p1 = write_records(
        str(tmp_path), "articles", "date=1970-01-02", rows, ARTICLE_SCHEMA, sort_key=lambda r: r.article_id
    )
    p2 = write_records(
        str(tmp_path),
        "articles",
        "date=1970-01-02",
        list(reversed(rows)),
        ARTICLE_SCHEMA,
        sort_key=lambda r: r.article_id,
    )
    assert p1 == p2
    with open(p1, "rb") as f:
        assert p1.endswith(f"part-{hashlib.sha256(f.read()).hexdigest()[:20]}.parquet")
    assert list_files(str(tmp_path), "articles") == [p1.split("articles/")[1]]
    table = read_dataset(str(tmp_path), "articles")
    assert table.column("article_id").to_pylist() == ["a", "b"]
    assert pq.read_schema(p1).field("event_time").type == ARTICLE_SCHEMA.field("event_time").type
    assert table.column("date").to_pylist() == ["1970-01-02"] * 2


def test_document_url_checks():
    from newsflow.core.urls import check_document_url
    from newsflow.schemas import RecordError

    check_document_url("https://www.reuters.com/world/a?b=1", "reuters.com")
    cases = {
        ("http://evil.com\\@reuters.com/story", "reuters.com"): "bad_url",  # browsers go to evil.com
        ("http://user@reuters.com/x", "reuters.com"): "bad_url",
        ("https://x.com/a b", "x.com"): "bad_url",
        ("http://2852039166/x", "x.com"): "unsafe_url",  # 169.254.169.254 as one decimal number
        ("https://reuters.com.evil.example/x", "reuters.com"): "source_mismatch",
        ("https://notreuters.com/x", "reuters.com"): "source_mismatch",
    }
    for (url, domain), error_type in cases.items():
        with pytest.raises(RecordError) as e:
            check_document_url(url, domain)
        assert e.value.error_type == error_type, url


def test_clean_title_removes_controls_and_bidi_overrides():
    from newsflow.core.articles import MAX_TITLE_CHARS, clean_title

    assert clean_title("Budget\x00 passes\u202e (reversed)\n today") == "Budget passes (reversed) today"
    assert len(clean_title("x" * 5000)) == MAX_TITLE_CHARS
