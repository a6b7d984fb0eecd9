"""Language-neutral keys (newsflow.core.multilingual) and the cross-language form of article vectors."""

from __future__ import annotations

from newsflow.core.embedding import load_text_model, sparse_dot, tokenize, url_slug_tokens
from newsflow.core.multilingual import canonical_place, cross_language_text, fold, place_aliases, stop_words


def test_fold_is_transliteration_and_case_insensitive():
    assert fold("Hélène  Dupré") == "helene dupre"
    assert fold("BERLÍN") == fold("Berlin") == "berlin"
    assert fold("U.S.") == "us"
    assert fold("Zürich") == "zurich"
    # NFD input folds like NFC input
    assert fold("He\u0301le\u0300ne") == fold("Hélène")


def test_cldr_country_names_in_six_languages_map_to_the_english_name():
    for names, english in [
        (("Alemania", "Deutschland", "Allemagne", "Germania", "Alemanha"), "germany"),
        (("Estados Unidos", "Vereinigte Staaten", "États-Unis", "Stati Uniti"), "united states"),
        (("Reino Unido", "Vereinigtes Königreich", "Royaume-Uni", "Regno Unito"), "united kingdom"),
        (("Ucrania", "Ucrânia", "Ucraina", "Ukraine"), "ukraine"),
    ]:
        for n in names:
            assert canonical_place(n) == english, n
    assert canonical_place("EE.UU.") == "us"  # as English "U.S."
    assert canonical_place("Cupertino") == "cupertino"  # not a country: folded name
    assert len(place_aliases()) > 500


def test_cross_language_text_replaces_places_and_drops_stop_words():
    assert cross_language_text("Merkel viaja a Estados Unidos, dice el Gobierno", "es") == (
        "merkel viaja united states gobierno"
    )
    assert cross_language_text("Les États-Unis et l'Allemagne signent un accord", "fr") == (
        "united states l germany signent accord"
    )
    # numbers and percentages come out as English headlines tokenize them ("0.3 percent", "21,000")
    assert tokenize(cross_language_text("Las ventas caen un 0,3% y 21.000 empleos", "es")) == tokenize(
        "ventas caen 0.3 percent 21,000 empleos"
    )
    assert "der" in stop_words("de") and "el" in stop_words("es")
    assert stop_words("xx") == frozenset()
    assert cross_language_text("", "es") == ""


def test_article_vectors_share_terms_across_languages():
    model = load_text_model()
    en_url = "https://a.example/germany-ukraine-gas-deal"
    en = model.article_vector("Germany and Ukraine sign gas deal", en_url, 1.0, "en")
    es = model.article_vector(
        "Alemania y Ucrania firman un acuerdo sobre el gas", "https://b.example/alemania-ucrania-acuerdo-gas", 1.0, "es"
    )
    de = model.article_vector("Deutschland und die Ukraine unterzeichnen Gas-Abkommen", "", 1.0, "de")
    assert {"germany", "ukraine", "gas"} <= es.keys() & en.keys()
    assert {"germany", "ukraine", "gas"} <= de.keys()
    assert sparse_dot(en, es) > 0.3 and sparse_dot(en, de) > 0.3
    # Spanish function words are gone, so two unrelated Spanish headlines share nothing
    other = model.article_vector("El Real Madrid gana la liga de los campeones", "", 1.0, "es")
    assert sparse_dot(es, other) == 0.0
    # English (and languages outside the five) are tokenized exactly as before
    title, url = "Hélène's U.S. trip: 5 things", "https://x.example/helene-us-trip-five-things"
    for lang in ("en", None, "nl"):
        assert model.article_vector(title, url, 1.0, lang) == model.tfidf(tokenize(title), url_slug_tokens(url), 1.0)


def test_dense_embedding_of_a_translation_is_near_the_english_one():
    import numpy as np

    model = load_text_model()
    en = "Germany and Ukraine sign gas deal in Berlin"
    es = "Alemania y Ucrania firman un acuerdo sobre el gas en Berlín"
    plain = model.embed([en, es])
    cross = model.embed([en, es], ["en", "es"])
    assert np.array_equal(plain[0], cross[0])  # English is embedded as before
    assert float(cross[0] @ cross[1]) > float(plain[0] @ plain[1]) + 0.1  # 0.67 -> 0.84
    assert np.array_equal(model.embed([en], [None]), model.embed([en]))


def test_acronyms_that_differ_by_language_become_the_english_ones():
    from newsflow.core.multilingual import canonical_org

    assert cross_language_text("La OCDE rebaja el PIB de España", "es") == "oecd rebaja gdp spain"
    assert cross_language_text("OCSE: il PIL cresce", "it") == "oecd gdp cresce"
    assert cross_language_text("IWF und EZB warnen", "de") == "imf ecb warnen"
    # per language: Spanish "uno" is a word (and a stop word), German "UNO" is the UN
    assert cross_language_text("Die UNO tagt", "de") == "un tagt"
    assert "un" not in cross_language_text("uno de los bancos", "es").split()
    assert canonical_org("OTAN", "fr") == "nato" and canonical_org("OTAN", "de") == "otan"
    # the English headline tokenizes to the same terms
    en = tokenize("OECD cuts Spain's GDP forecast")
    assert {"oecd", "gdp"} <= set(en) & set(tokenize(cross_language_text("La OCDE rebaja el PIB de España", "es")))
