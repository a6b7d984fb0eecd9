"""Muted words and phrases (newsflow.core.muting) and a reader's view rules (newsflow.serving.reader_view), pure."""

from __future__ import annotations

import pytest

from newsflow.core.muting import MAX_PHRASE_CHARS, MuteMatcher, normalize_phrase
from newsflow.schemas import UserProfile
from newsflow.serving.reader_view import ReaderView, hide_read_param
from newsflow.storage.reader_state import ReadMark, changed_since_read, decode_read
from tests.helpers import article_record as _art


@pytest.mark.parametrize(
    "raw, stored",
    [
        ("Kardashian", "kardashian"),
        ("  North \t Korea ", "north korea"),
        ("ＫＡＲＤＡＳＨＩＡＮ", "kardashian"),  # full-width forms (NFKC)
        ("Straße", "strasse"),  # case folding, not lower()
        ("ΟΔΥΣΣΕΥΣ", "οδυσσευσ"),  # Greek final sigma folds to sigma
    ],
)
def test_phrases_are_stored_normalized(raw, stored):
    assert normalize_phrase(raw) == stored


@pytest.mark.parametrize("bad", ["", "   ", "x" * (MAX_PHRASE_CHARS + 1), "a\u200bb", 7, None])
def test_bad_phrases_are_refused_with_a_message(bad):
    with pytest.raises(ValueError, match="muted word"):
        normalize_phrase(bad)


@pytest.mark.parametrize(
    "phrase, text, hit",
    [
        ("kardashian", "Kim Kardashian wins award", True),
        ("kardashian", "KARDASHIAN'S new show", True),
        ("kardashian", "Kardashianism explained", False),  # whole words only
        ("kardashian", "The Kardashians return", False),
        ("north korea", "North  Korea talks resume", True),  # any white space between words
        ("north korea", "Northkorea", False),
        ("путин", "Путин прибыл в Пекин", True),  # Cyrillic: whole words, case-insensitive
        ("путин", "Путинская реформа", False),
        ("αθήνα", "Σεισμός στην ΑΘΉΝΑ", True),  # Greek
        ("القاهرة", "مظاهرات في القاهرة اليوم", True),  # Arabic
        ("北京", "奥运会在北京举行", True),  # Han has no spaces: a phrase matches inside a sentence
        ("東京", "東京都の知事", True),
        ("กรุงเทพ", "น้ำท่วมกรุงเทพวันนี้", True),  # Thai
        ("c++", "Learning C++ fast", True),  # punctuation is escaped, not a pattern
        ("u.s.", "U.S. stocks fall", True),
    ],
)
def test_matching_is_case_insensitive_on_whole_words_in_any_script(phrase, text, hit):
    assert (MuteMatcher([phrase]).search(text) is not None) is hit


def test_a_matcher_checks_titles_descriptions_and_entities_and_skips_invalid_stored_phrases():
    m = MuteMatcher(["kardashian", "", "x" * 500])  # the invalid ones (an older stored list) are skipped
    assert m.phrases == frozenset({"kardashian"}) and m
    assert m.mutes({"title": "Awards night", "entities": ["Kim Kardashian"]})
    assert m.mutes({"title": "Awards night", "entities": [{"name": "Kim Kardashian"}]})
    assert m.mutes({"title": "Awards night", "description": "with kardashian guests"})
    assert not m.mutes({"title": "Awards night", "entities": [None, 3]})
    assert not MuteMatcher().mutes({"title": "Kardashian"}) and not MuteMatcher()


def _item(sid, title="t", domain="x.com", topics=(), n=1, **kw):
    return dict(story_id=sid, title=title, domain=domain, topics=list(topics), independent_count=n, **kw)


def test_for_you_keeps_a_read_story_only_when_it_has_new_independent_reports():
    view = ReaderView(UserProfile("u"), reads={"s1": ReadMark(100.0, 2), "s2": ReadMark(100.0, -1)})
    assert view.for_you_keep(_item("s1", n=2)) == (False, 0)  # read, unchanged
    assert view.for_you_keep(_item("s1", n=5)) == (True, 3)  # three new independent reports
    assert view.for_you_keep(_item("s2", n=9)) == (False, 0)  # read with unknown count: never "changed"
    assert view.for_you_keep(_item("s3")) == (True, 0)  # unread
    assert view._replace(hide_read=True).for_you_keep(_item("s1", n=5)) == (False, 3)


def test_for_you_drops_removed_interests_only_when_inferred():
    profile = UserProfile("u", follow_topics=frozenset({"tech"}), follow_sources=frozenset({"a.com"}))
    view = ReaderView(profile, dismiss=frozenset({"world"}))
    assert view.for_you_keep(_item("s1", topics=["World"])) == (False, 0)
    assert view.for_you_keep(_item("s1", topics=["World"], domain="news.a.com"))[0]  # followed outlet placed it
    assert view.for_you_keep(_item("s1", topics=["World", "Tech"]))[0]  # followed topic placed it
    assert view.for_you_keep(_item("s1", topics=["World"], breaking=True))[0]


def test_lists_mark_read_and_saved_and_hide_blocked_muted_and_read_ones():
    view = ReaderView(
        UserProfile("u", block_sources=frozenset({"b.com"})),
        mutes=MuteMatcher(["storm"]),
        reads={"s3": ReadMark(1.0, 1)},
        saved=frozenset({"s4"}),
    )
    items = [
        _item("s1", "Storm hits"),
        _item("s2", domain="www.b.com"),
        _item("s3"),
        _item("s4"),
        _item("s5", "Stormy weather"),
    ]
    shown = view.stories(items)
    assert [(s["story_id"], s.get("read"), s.get("saved")) for s in shown] == [
        ("s3", True, None),
        ("s4", None, True),
        ("s5", None, None),
    ]
    assert [s["story_id"] for s in view._replace(hide_read=True).stories(items)] == ["s4", "s5"]
    assert "read" not in items[2]  # the input items are not changed
    assert view.topics([{"topic": "Storm"}, {"topic": "world"}]) == [{"topic": "world"}]
    assert view.entities([{"entity": "Storm Ciarán"}, {"entity": "Paris"}]) == [{"entity": "Paris"}]


def test_coverage_articles_drop_blocked_outlets_their_republished_reports_and_muted_headlines():
    arts = [
        _art("a1", "a.com", "c1", 0.9, 10.0),
        _art("a2", "wire-copy.com", "c1", 0.5, 11.0),  # a copy of a.com's report
        _art("a3", "b.com", "c2", 0.7, 12.0),
        _art("a4", "news.a.com", "c2", 0.2, 13.0),  # a.com copying b.com's report: only the copy goes
        _art("a5", "e.com", "c3", 0.6, 14.0, "Kardashian speaks"),
    ]
    view = ReaderView(UserProfile("u", block_sources=frozenset({"a.com"})), mutes=MuteMatcher(["kardashian"]))
    assert [a.article_id for a in view.articles(arts)] == ["a3"]
    assert [a.article_id for a in ReaderView(UserProfile("u")).articles(arts)] == ["a1", "a2", "a3", "a4", "a5"]


def test_read_marks_decode_and_changes_count_new_reports():
    marks = decode_read({b"s1": b"100.5:3", b"s2": b"garbage", "s3": "7:-1"})
    assert marks == {"s1": ReadMark(100.5, 3), "s3": ReadMark(7.0, -1)}
    assert changed_since_read(marks["s1"], 5) == 2 and changed_since_read(marks["s1"], 2) == 0
    assert changed_since_read(None, 5) == 0 and changed_since_read(marks["s1"], "x") == 0


@pytest.mark.parametrize("raw, on", [("1", True), ("true", True), ("YES", True), ("0", False), ("", False)])
def test_hide_read_parameter(raw, on):
    assert hide_read_param({"hide_read": raw}) is on
