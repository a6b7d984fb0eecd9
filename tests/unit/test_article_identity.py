"""Issue 10, items 12-13: one article, one id, however its URL is spelled (pure logic)."""

import hashlib

import pytest

from newsflow.core.articles import build_article
from newsflow.core.extraction import ExtractionConfig, declared_canonical_url, extract_content, page_canonical_url
from newsflow.core.urls import article_id, canonicalize_url, choose_canonical, identity_key, strip_amp
from newsflow.schemas.raw import RawDocument
from newsflow.storage.keys import Keys

HARBOUR = "https://www.tribune.example.net/news/harbour-fire-4471"


def test_trailing_slash_scheme_and_www_spellings_share_an_id():
    assert article_id("https://travel.example.io/guides/lisbon/") == article_id(
        "https://travel.example.io/guides/lisbon"
    )
    assert article_id("http://herald.example.org/p/alpha-9") == article_id("https://www.herald.example.org/p/alpha-9")
    # the id is the SHA-256 of the identity key, computed here by hand
    assert identity_key("http://www.herald.example.org/p/alpha-9/") == "https://herald.example.org/p/alpha-9"
    expected = hashlib.sha256(b"https://herald.example.org/p/alpha-9").hexdigest()[:32]
    assert article_id("http://herald.example.org/p/alpha-9") == expected


@pytest.mark.parametrize(
    "variant",
    [
        "https://m.tribune.example.net/news/harbour-fire-4471",
        "http://mobile.tribune.example.net/news/harbour-fire-4471/",
        "https://amp.tribune.example.net/news/harbour-fire-4471",
        "https://www.tribune.example.net/news/harbour-fire-4471/amp",
        "https://www.tribune.example.net/news/harbour-fire-4471/amp/",
        "https://www.tribune.example.net/amp/news/harbour-fire-4471",
        "https://www.tribune.example.net/news/harbour-fire-4471.amp",
        "https://www.tribune.example.net/news/harbour-fire-4471?view=amp",
        "https://www.tribune.example.net/news/harbour-fire-4471?outputType=amp",
        "https://tribune.example.net/news/harbour-fire-4471?amp=1&utm_source=rss#top",
        "https://www-tribune-example-net.cdn.ampproject.org/c/s/www.tribune.example.net/news/harbour-fire-4471",
    ],
)
def test_amp_and_mobile_variants_share_the_id(variant):
    assert identity_key(variant) == "https://tribune.example.net/news/harbour-fire-4471"
    assert article_id(variant) == article_id(HARBOUR)


def test_different_articles_keep_different_ids():
    ids = {
        article_id(u)
        for u in (
            "https://herald.example.org/p/alpha-9",
            "https://herald.example.org/p/alpha-90",
            "https://herald.example.org/P/alpha-9",  # path case is significant
            "https://herald.example.org/p/alpha-9?page=2",
            "https://other.example.org/p/alpha-9",
            "https://herald.example.org:8443/p/alpha-9",
            "https://herald.example.org/",
        )
    }
    assert len(ids) == 7
    # a host that *is* the registrable domain keeps its first label; words merely containing amp are kept
    assert identity_key("http://m.com/x") == "https://m.com/x"
    assert identity_key("https://www.bbc.co.uk/news/a") == "https://bbc.co.uk/news/a"
    assert identity_key("http://m.co.uk/a") == "https://m.co.uk/a"
    assert identity_key("http://www.site.test/a/") == "https://www.site.test/a"  # no registrable domain: kept
    assert identity_key("http://www.10.0.0.1.nip/a") == "https://www.10.0.0.1.nip/a"
    assert identity_key("https://champion.example/ampere.amp2") == "https://champion.example/ampere.amp2"
    assert strip_amp("https://x.example/a/.amp") == "https://x.example/a/.amp"


def test_choose_canonical_same_site_only():
    m = "https://m.tribune.example.net/news/harbour-fire-4471"
    assert choose_canonical(m, HARBOUR) == HARBOUR
    assert (
        choose_canonical(m, "/news/harbour-fire-4471?ref=m")
        == "https://m.tribune.example.net/news/harbour-fire-4471?ref=m"
    )
    assert choose_canonical(m, "https://news.example.net/other") == "https://news.example.net/other"  # same outlet
    assert choose_canonical(m, "https://aggregator.example.com/news/harbour-fire-4471") == m  # other outlet
    assert choose_canonical(m, "https://www.tribune.example.net/") == m  # CMS pointing everything at the home page
    assert (
        choose_canonical("https://tribune.example.net/", "https://www.tribune.example.net/")
        == "https://www.tribune.example.net/"
    )
    assert choose_canonical(m, "javascript:alert(1)") == m
    assert choose_canonical(m, "https://www.tribune.example.net/news/a b") == m  # whitespace
    assert choose_canonical(m, "https://user@www.tribune.example.net/news/x") == m  # user info
    assert choose_canonical(m, "https://www.tribune.example.net/" + "x" * 2100) == m  # over MAX_URL_LENGTH
    assert choose_canonical(m, "") == m and choose_canonical(m, None) == m


def html(head):
    para = "<p>" + "Fire crews fought a blaze in a harbour warehouse through the night, the brigade said. " * 5
    body = f"<body><article><h1>Harbour fire</h1>{para}</p>{para}</p></article></body>"
    return f"<html><head><title>Harbour fire</title>{head}</head>{body}</html>"


def test_declared_canonical_is_read_from_link_then_og_url():
    import lxml.html

    both = "<meta property='og:url' content='https://www.tribune.example.net/og'><link rel='Canonical' href='/news/x'>"
    assert declared_canonical_url(lxml.html.document_fromstring(html(both))) == "/news/x"
    og = "<meta property='og:url' content=' https://www.tribune.example.net/og '><link rel='amphtml' href='/amp/x'>"
    assert declared_canonical_url(lxml.html.document_fromstring(html(og))) == "https://www.tribune.example.net/og"
    assert page_canonical_url(html("").encode()) == ""
    assert page_canonical_url(b"\x89PNG\r\n\x1a\n binary") == ""


def raw_page(url, head, source_domain="tribune.example.net"):
    return RawDocument(
        url=url,
        source_domain=source_domain,
        fetch_time=1728900000.0,
        http_status=200,
        content_type="text/html; charset=utf-8",
        body=html(head).encode(),
    )


def article_of(raw):
    content = extract_content(raw, ExtractionConfig())
    return build_article(raw, content, source_authority=0.5)


def test_mobile_page_declaring_www_canonical_is_one_article_with_the_canonical_url():
    mobile = article_of(
        raw_page("https://m.tribune.example.net/news/harbour-fire-4471", f"<link rel='canonical' href='{HARBOUR}'>")
    )
    amp = article_of(
        raw_page(
            "https://www.tribune.example.net/news/harbour-fire-4471/amp",
            "<link rel='canonical' href='/news/harbour-fire-4471'>",
        )
    )
    plain = article_of(raw_page(HARBOUR, ""))
    assert mobile.article_id == amp.article_id == plain.article_id == article_id(HARBOUR)
    assert mobile.url == amp.url == plain.url == HARBOUR
    assert mobile.canonical_url == canonicalize_url(HARBOUR)
    # a page whose canonical is on another path of the same site takes that URL's id
    short = article_of(raw_page("https://tribune.example.net/s/4471", f"<link rel='canonical' href='{HARBOUR}'>"))
    assert (short.article_id, short.url) == (article_id(HARBOUR), HARBOUR)


def test_syndicated_copy_declaring_another_outlets_canonical_stays_the_copiers_article():
    copy_url = "https://wire.example.com/tribune/harbour-fire-4471"
    copy = article_of(raw_page(copy_url, f"<link rel='canonical' href='{HARBOUR}'>", source_domain="wire.example.com"))
    assert (copy.article_id, copy.url) == (article_id(copy_url), copy_url)


def test_alias_key_name():
    assert Keys().url_alias("ab" * 16) == "nf:alias:" + "ab" * 16
    assert Keys("alt").url_alias("x") == "alt:alias:x"
