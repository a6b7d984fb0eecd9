"""Pure helpers of the reader web UI and preferences: time text, redirects, preference merging and
buttons, the coverage lead under blocks, and the For You "why" labels."""

from __future__ import annotations

import numpy as np
import pytest

from newsflow.schemas import UserProfile
from newsflow.serving.pages import coverage_page
from newsflow.serving.paging import decode_cursor, encode_cursor
from newsflow.serving.preferences import (
    apply_action,
    merge_preferences,
    normalize_source,
    normalize_topic,
    reader_preferences,
)
from newsflow.serving.web_view import (
    ago_text,
    coverage_changes,
    coverage_context,
    coverage_snapshot,
    iso_text,
    safe_next,
    utc_text,
    why_labels,
)
from tests.helpers import article_record as _art

T = 1_700_000_000.0  # 2023-11-14 22:13:20 UTC


def test_time_text():
    assert utc_text(T) == "2023-11-14 22:13 UTC"
    assert iso_text(T) == "2023-11-14T22:13:20Z"
    assert utc_text(None) == "" and utc_text("x") == "" and utc_text(float("nan")) == "" and iso_text(0) == ""
    assert ago_text(T - 30, T) == "just now"
    assert ago_text(T - 5 * 60, T) == "5 min ago"
    assert ago_text(T - 3 * 3600 - 59, T) == "3 h ago"
    assert ago_text(T - 86400, T) == "1 day ago" and ago_text(T - 3 * 86400, T) == "3 days ago"


@pytest.mark.parametrize(
    "value,expected",
    [
        ("/for-you", "/for-you"),
        ("/topics/world?x=1", "/topics/world?x=1"),
        ("//evil.example/", "/"),
        ("/\\evil.example", "/"),
        ("https://evil.example/", "/"),
        ("/ok\r\nSet-Cookie: x", "/"),
        ("", "/"),
        (None, "/"),
    ],
)
def test_safe_next_refuses_open_redirects(value, expected):
    assert safe_next(value) == expected


def test_normalizers():
    assert normalize_topic("  World ") == "world"
    assert normalize_source("https://uk.reuters.com/business/x") == "reuters.com"
    assert normalize_source("News.BBC.co.uk") == "bbc.co.uk"
    for bad in ("", "a/b", "x" * 65):
        with pytest.raises(ValueError):
            normalize_topic(bad)
    for bad in ("", "not a domain", "http://", 42):
        with pytest.raises(ValueError):
            normalize_source(bad)


def test_merge_preferences_replaces_given_fields_and_refuses_conflicts():
    profile = UserProfile("u", follow_topics=frozenset({"tech"}), block_sources=frozenset({"a.com"}))
    cur = reader_preferences(profile, {"prefer_sources": frozenset({"apnews.com"})})
    out = merge_preferences(cur, {"block_sources": ["uk.reuters.com", "in.reuters.com"]})
    assert out == {
        "follow_topics": ["tech"],
        "follow_sources": [],
        "block_topics": [],
        "block_sources": ["reuters.com"],
        "prefer_sources": ["apnews.com"],
        "dismiss_topics": [],
        "mute_words": [],
    }
    with pytest.raises(ValueError, match="prefer and block"):
        merge_preferences(cur, {"block_sources": ["www.apnews.com"]})
    with pytest.raises(ValueError, match="follow and dismiss"):
        merge_preferences(cur, {"dismiss_topics": ["tech"]})
    with pytest.raises(ValueError, match="follow and block"):
        merge_preferences(cur, {"block_topics": ["Tech"]})
    with pytest.raises(ValueError, match="unknown fields"):
        merge_preferences(cur, {"follow": []})
    with pytest.raises(ValueError):
        merge_preferences(cur, {"follow_topics": "tech"})
    with pytest.raises(ValueError):
        merge_preferences(cur, {"follow_topics": ["t"] * 201})
    with pytest.raises(ValueError):
        merge_preferences(cur, [])


def test_apply_action_moves_between_follow_and_block():
    cur = reader_preferences(
        UserProfile("u", follow_sources=frozenset({"reuters.com"}), follow_topics=frozenset({"tech"})),
        {"prefer_sources": frozenset({"reuters.com"}), "dismiss_topics": frozenset({"sport"})},
    )
    assert apply_action(cur, "block", "source", "uk.reuters.com") == {
        "block_sources": ["reuters.com"],
        "follow_sources": [],
        "prefer_sources": [],
    }
    assert apply_action(cur, "follow", "topic", "Sport") == {
        "follow_topics": ["sport", "tech"],
        "block_topics": [],
        "dismiss_topics": [],
    }
    assert apply_action(cur, "unfollow", "source", "www.reuters.com") == {"follow_sources": []}
    assert apply_action(cur, "dismiss", "topic", "tech") == {"dismiss_topics": ["sport", "tech"], "follow_topics": []}
    assert apply_action(cur, "prefer", "source", "bbc.co.uk") == {
        "prefer_sources": ["bbc.co.uk", "reuters.com"],
        "block_sources": [],
    }
    bad = (("mute", "topic", "x"), ("follow", "person", "x"), ("follow", "topic", "a/b"), ("prefer", "topic", "x"))
    for args in bad:
        with pytest.raises(ValueError):
            apply_action(cur, *args)


def test_coverage_lead_skips_blocked_outlets():
    arts = [
        _art("a1", "www.a.com", "c1", 0.9, T),
        _art("a2", "copy.com", "c1", 0.5, T + 60),
        _art("a3", "b.com", "c2", 0.7, T + 300),
        _art("a4", "uk.a.com", "c3", 0.6, T + 900),
    ]
    summary = {"story_id": "s1", "title": "t", "url": "https://www.a.com/a1", "domain": "www.a.com", "topics": []}
    cov = coverage_page(summary, [], arts)
    anon = coverage_context(cov, arts, None)
    assert anon["lead"]["article"]["article_id"] == "a1" and anon["outlet_count"] == 3  # a.com, copy.com, b.com
    assert [r["article"]["article_id"] for r in anon["page"]] == ["a3", "a4"]
    brief = anon["timeline"]  # a1 first, a4 latest; all four between 22:13 and 22:29 UTC: one clock hour
    assert (brief["first"]["url"], brief["latest"]["url"], brief["articles"]) == (arts[0].url, arts[3].url, 4)
    assert brief["busiest"] == [(1_699_999_200, 4)] and brief["hours"] == 1 and brief["first"]["copy_of"] == ""
    no_a = coverage_context(cov, arts, UserProfile("u", block_sources=frozenset({"a.com"})))
    assert no_a["lead"]["article"]["article_id"] == "a3"
    none = coverage_context(cov, arts, UserProfile("u", block_sources=frozenset({"a.com", "b.com"})))
    assert none["lead"] is None and none["lead_blocked"]
    # a preferred outlet leads when it covered the story, even with a syndicated copy (copy.com's a2)
    pref = coverage_context(cov, arts, UserProfile("u"), frozenset({"copy.com"}))
    assert pref["lead"]["article"]["article_id"] == "a2" and pref["lead_is_preferred"]
    assert [r["article"]["article_id"] for r in pref["page"]] == ["a1", "a3", "a4"]
    pref_e = coverage_context(cov, arts, UserProfile("u"), frozenset({"b.com", "a.com"}))
    assert pref_e["lead"]["article"]["article_id"] == "a1"  # the earliest preferred article
    a_blocked = UserProfile("u", block_sources=frozenset({"a.com"}))
    blocked_pref = coverage_context(cov, arts, a_blocked, frozenset({"a.com"}))
    assert blocked_pref["lead"]["article"]["article_id"] == "a3" and not blocked_pref["lead_is_preferred"]
    assert not coverage_context(cov, arts, None, frozenset({"nobody.com"}))["lead_is_preferred"]


def test_coverage_first_page_is_the_top_coverage_then_show_more_pages_by_time():
    # 10 outlets o0..o9 with 4 reports each: report j of outlet i has authority .9 - .1 j - .01 i, time T + 10 (4 i + j)
    arts = [
        _art(f"a{i}{j}", f"o{i}.com", f"c{i}{j}", 0.9 - 0.1 * j - 0.01 * i, T + 10 * (4 * i + j))
        for i in range(10)
        for j in range(4)
    ]
    summary = {"story_id": "s1", "title": "t", "url": arts[0].url, "domain": "o0.com", "topics": []}
    cov = coverage_page(summary, [], arts)
    first = coverage_context(cov, arts, None)
    assert first["lead"]["cluster_id"] == "c00" and first["others_count"] == 39 and first["outlet_count"] == 10
    # every outlet's best report (o0's is c01: c00 leads), best first, then every outlet's second
    top = ["c10", "c20", "c30", "c40", "c50", "c60", "c70", "c80", "c90", "c01"]
    top += ["c11", "c21", "c31", "c41", "c51", "c61", "c71", "c81", "c91", "c02"]
    assert [r["cluster_id"] for r in first["page"]] == top and first["page_start"] == 1
    assert first["next_cursor"] == encode_cursor(20, "c02")
    more = coverage_context(cov, arts, None, cursor=decode_cursor(first["next_cursor"]))
    rest = ["c03"] + [f"c{i}{j}" for i in range(1, 10) for j in (2, 3)]  # the rest, earliest first
    assert [r["cluster_id"] for r in more["page"]] == rest
    assert more["page_start"] == 21 and more["next_cursor"] is None and not more["first_page"]


def test_a_free_report_leads_over_a_paywalled_one():
    arts = [
        _art("p1", "paper.com", "c1", 0.95, T)._replace(paywalled=True),  # the story's representative
        _art("f1", "free.org", "c2", 0.6, T + 120),
        _art("f2", "other.net", "c3", 0.7, T + 300),
    ]
    summary = {"story_id": "s1", "title": "t", "url": "https://paper.com/p1", "domain": "paper.com", "topics": []}
    cov = coverage_page(summary, [], arts)
    ctx = coverage_context(cov, arts, None)
    assert ctx["lead"]["article"]["article_id"] == "f1"  # the earliest free report
    assert [r["article"]["article_id"] for r in ctx["page"]] == ["f2", "p1"]  # free first
    no_free = coverage_context(cov, arts, UserProfile("u", block_sources=frozenset({"free.org", "other.net"})))
    assert no_free["lead"]["article"]["article_id"] == "p1"  # nothing free left: the paywalled lead stays
    # a preferred outlet still leads, paywalled or not
    assert coverage_context(cov, arts, None, frozenset({"paper.com"}))["lead"]["article"]["article_id"] == "p1"


def test_why_labels_from_feed_signals_and_fallbacks():
    p = UserProfile("u", follow_topics=frozenset({"tech"}), follow_sources=frozenset({"reuters.com"}))
    item = {"story_id": "s", "domain": "uk.reuters.com", "topics": ["Tech"], "breaking": True}
    assert why_labels(item, p, {}) == ["Breaking news", "You follow tech", "You follow reuters.com"]
    signals = {"interest": 0.42, "covisitation": 0.0, "similar_readers": 0.5, "trending": 0.1, "top": "interest"}
    assert why_labels({"story_id": "s", "domain": "x.com", "topics": [], "why": signals}, UserProfile("u"), {}) == [
        "Similar to stories you read",
        "Readers like you read this",
        "Trending now",
    ]
    quiet = {"interest": 0.1, "covisitation": 0, "similar_readers": 0, "trending": 0, "top": "freshness"}
    assert why_labels({"story_id": "s", "domain": "x.com", "why": quiet}, UserProfile("u"), {}) == [
        "Top story in your edition"
    ]
    # without signals: the trending window and the profile's interest vector
    assert why_labels({"story_id": "s", "domain": "x.com"}, UserProfile("u"), {"s": 3}) == ["Trending now"]
    reader = UserProfile("u", interest=np.ones(128, dtype=np.float32), clicks=5)
    assert why_labels({"story_id": "s", "domain": "x.com"}, reader, {}) == ["Similar to stories you read"]


def test_coverage_changes_since_the_last_look():
    arts = [_art("a1", "www.a.com", "c1", 0.9, T), _art("a3", "b.com", "c2", 0.7, T + 300)]
    summary = {"story_id": "s1", "title": "Old", "url": "https://www.a.com/a1", "domain": "www.a.com", "topics": []}
    seen = coverage_snapshot(coverage_page(summary, [], arts), T + 400)
    assert seen == {"t": T + 400, "title": "Old", "outlets": ["a.com", "b.com"], "reports": ["c1", "c2"]}
    grown = arts + [_art("a7", "uk.c.com", "c9", 0.5, T + 900), _art("a8", "copy.com", "c1", 0.1, T + 950)]
    cov = coverage_page(dict(summary, title="New"), [], grown)
    ch = coverage_changes(seen, cov, T + 1000)
    assert ch["since"] == T + 400 and ch["old_title"] == "Old"
    assert ch["new_outlets"] == ["c.com", "copy.com"]
    assert [r["cluster_id"] for r in ch["new_reports"]] == ["c9"]  # a copy in c1 is not a new report
    assert coverage_changes(None, cov, T) is None and coverage_changes({"t": "x"}, cov, T) is None
    same = coverage_changes(coverage_snapshot(cov, T + 1000), cov, T + 2000)
    assert same["new_outlets"] == [] and same["new_reports"] == [] and same["old_title"] == ""


@pytest.mark.parametrize(
    "value, expected",
    [
        ("uk.reuters.com", "reuters.com"),
        ("https://www.bbc.co.uk/news", "bbc.co.uk"),
        ("пример.рф", "xn--e1afmkfd.xn--p1ai"),
        ("https://Example.ORG", "example.org"),
    ],
)
def test_a_source_preference_is_an_outlet(value, expected):
    from newsflow.serving.preferences import normalize_source

    assert normalize_source(value) == expected


@pytest.mark.parametrize(
    "value",
    ["javascript:alert(1)", "a..b", "com", "co.uk", "http://user@evil.com/", "http://evil.com:99999/", "127.0.0.1", ""],
)
def test_junk_source_preferences_are_refused(value):
    from newsflow.serving.preferences import normalize_source

    with pytest.raises(ValueError, match="domain name"):
        normalize_source(value)
