"""The search index's text analysis (per-language stems, CJK bigrams, safe MATCH expressions) and the SQLite
index itself (upserts in either order, filters, ranking), on a file under tmp_path."""

import sqlite3

import pytest

from newsflow.core.search_text import analyze, query_expression, query_terms, words
from newsflow.storage.search_index import Filters, IndexMissing, SearchIndex, StoryRow, TextRow, date_tags
from tests.helpers import utc


def test_documents_are_stemmed_in_their_own_language():
    assert analyze("Elections and voters", "en") == "elect and voter"
    assert analyze("Die Wahlen in Berlin", "de") == "die wahl in berlin"
    assert analyze("Les élections présidentielles", "fr-FR") == "le élect présidentiel"
    # no stemmer for Japanese: words kept; CJK runs become bigrams
    assert analyze("東京都の選挙", "ja") == "東京 京都 都の の選 選挙"
    assert words("Titanfall's 792p") == ["titanfall", "s", "792p"]


def test_a_date_range_is_covered_by_the_fewest_year_month_and_day_tags():
    def tags(a, b):
        return date_tags(utc(a + " 00:00:00"), utc(b + " 00:00:00"))

    assert tags("2014-03-10", "2014-03-12") == ["xd20140310", "xd20140311"]
    assert tags("2014-03-01", "2014-04-01") == ["xm201403"]
    assert tags("2013-12-30", "2015-03-02") == [
        "xd20131230",
        "xd20131231",
        "xy2014",
        "xm201501",
        "xm201502",
        "xd20150301",
    ]
    assert tags("2014-03-10", "2014-03-10") == []


def test_a_query_word_matches_through_its_stem_in_any_language_and_cannot_inject_syntax():
    forms = query_terms("Wahlen", ["en", "de"])
    assert forms == [["wahl", "wahlen"]]
    expr = query_expression('titanfall NEAR("x" OR', ["en"])
    assert expr == '("titanfal" OR "titanfall") AND ("near") AND ("x") AND ("or")'
    assert query_expression("   ...   ") == ""


@pytest.fixture
def index(tmp_path):
    ix = SearchIndex(str(tmp_path / "search" / "index.sqlite3"))
    yield ix
    ix.close()


DAY = 86400.0
TEXTS = [
    TextRow(
        "a1",
        "Titanfall review: robots and jetpacks",
        "Respawn's shooter launches",
        "http://p/1",
        "www.polygon.com",
        "en",
        1000.0,
    ),
    TextRow(
        "a2",
        "Titanfall launches at 792p",
        "Microsoft confirms the resolution",
        "http://v/2",
        "uk.ign.com",
        "en",
        2000.0,
    ),
    TextRow(
        "a3", "Die Wahlen in Berlin", "Wähler gehen zur Urne", "http://s/3", "www.spiegel.de", "de", 3 * DAY + 3000.0
    ),
    TextRow(
        "a4",
        "Election night in Berlin",
        "Voters go to the polls",
        "http://r/4",
        "www.reuters.com",
        "en",
        4 * DAY + 4000.0,
    ),
]
STORIES = [
    StoryRow("a1", "s1", ("Gaming",), ("Respawn Entertainment",)),
    StoryRow("a2", "s1", ("Gaming", "Technology"), ("Microsoft",)),
    StoryRow("a3", "s2", ("Politics",), ("Berlin",)),
    StoryRow("a4", "s2", ("Politics",), ("Berlin",)),
]


def ids(hits):
    return sorted(h.article_id for h in hits)


def test_rows_upserted_in_either_order_give_the_same_index(tmp_path, index):
    index.put_texts(TEXTS)
    index.put_stories(STORIES)
    other = SearchIndex(str(tmp_path / "other.sqlite3"))
    other.put_stories(STORIES[::-1])
    other.put_texts(TEXTS[::-1])
    other.put_texts(TEXTS[:2])  # a replay changes nothing
    for q in ("titanfall", "wahl", "microsoft", "berlin", "polygon", "respawn"):
        assert ids(index.search(q)) == ids(other.search(q)), q
    assert index.count() == other.count() == 4


def test_words_match_title_lead_entities_and_outlet_and_filters_narrow(index):
    index.put_texts(TEXTS)
    assert index.search("titanfall") == []  # no story yet: not found
    index.put_stories(STORIES)
    assert ids(index.search("titanfall")) == ["a1", "a2"]
    assert ids(index.search("resolution")) == ["a2"]  # lead text
    assert ids(index.search("microsoft")) == ["a2"]  # lead and entity
    assert ids(index.search("polygon")) == ["a1"]  # outlet
    assert ids(index.search("respawn entertainment")) == ["a1"]  # entity (every word must match)
    assert ids(index.search("titanfall robots")) == ["a1"]
    assert ids(index.search("Wahl")) == ["a3"]  # German stem of "Wahlen"
    assert ids(index.search("wähler", Filters(language="de"))) == ["a3"]
    assert ids(index.search("berlin", Filters(language="en"))) == ["a4"]
    assert ids(index.search("berlin", Filters(outlet="spiegel.de"))) == ["a3"]
    assert ids(index.search("titanfall", Filters(topic="technology"))) == ["a2"]
    assert ids(index.search("titanfall", Filters(topic="politics"))) == []
    # date ranges match whole UTC days: [day 4, ...) and [..., day 4)
    assert ids(index.search("berlin", Filters(since=4 * DAY))) == ["a4"]
    assert ids(index.search("berlin", Filters(until=4 * DAY))) == ["a3"]
    assert ids(index.search("berlin", Filters(since=3 * DAY, until=5 * DAY))) == ["a3", "a4"]
    assert ids(index.search("berlin", Filters(since=5 * DAY))) == []
    # the title weighs more than the lead: "launches" is a1's lead word but a2's headline word
    assert [h.article_id for h in index.search("launches")] == ["a2", "a1"]


def test_a_reader_sees_committed_batches_and_a_missing_file_is_a_clear_error(tmp_path, index):
    reader = SearchIndex(index.path, readonly=True)
    assert reader.count() == 0
    index.put_texts(TEXTS)
    index.put_stories(STORIES)
    assert ids(reader.search("berlin")) == ["a3", "a4"]
    with pytest.raises(sqlite3.OperationalError):
        reader._thread_conn().execute("DELETE FROM docs")  # read-only
    with pytest.raises(IndexMissing, match="no search index"):
        SearchIndex(str(tmp_path / "nothing.sqlite3"), readonly=True)
