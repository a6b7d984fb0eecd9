"""Scripts and Unicode (issue 11, items 7-9): NFC, tokenization by script, script-fair lengths."""

from __future__ import annotations

import unicodedata

import numpy as np

from newsflow.core.embedding import TextModel, sparse_dot, tokenize
from newsflow.core.scripts import dense_class, is_dense, latin_equivalent_length, nfc

NFC_TITLE = "Hélène Dupré ouvre la médiathèque de Génève"
NFD_TITLE = unicodedata.normalize("NFD", NFC_TITLE)

BUS_JA = (
    "北浜市、市営バス路線を再編へ\n北浜市は、来年4月から市営バスの路線を大幅に再編すると発表した。"
    "利用者の少ない路線を統合し、駅と病院を結ぶ便を増やす。"
    "市の担当者は「高齢者が通院しやすい交通網にしたい」と話した。"
)


def _tiny_model() -> TextModel:
    # One known term; every other term gets unseen_idf (the shipped model's rule).
    return TextModel(["storm"], np.array([1.0]), 2.0, np.ones((1, 1)))


def test_nfc_composes_and_keeps_composed_text():
    assert NFD_TITLE != NFC_TITLE and len(NFD_TITLE) == len(NFC_TITLE) + 7
    assert nfc(NFD_TITLE) == NFC_TITLE
    assert nfc(NFC_TITLE) is NFC_TITLE
    assert nfc(None) == "" and nfc("") == ""


def test_nfd_title_tokenizes_into_whole_words():
    expected = ["hélène", "dupré", "ouvre", "la", "médiathèque", "génève"]  # "de" is a stop word
    assert tokenize(NFD_TITLE) == expected
    assert tokenize(NFC_TITLE) == expected


def test_dense_characters_by_script():
    assert is_dense("京") and is_dense("バ") and is_dense("ก") and is_dense("\u0e31")  # Thai vowel mark
    assert is_dense("ក") and is_dense("ພ") and is_dense("က")  # Khmer, Lao, Burmese letters
    assert not is_dense("a") and not is_dense("한") and not is_dense("、") and not is_dense("。")
    assert "\\U00004e00-\\U00009fff" in dense_class()


def test_cjk_tokens_are_character_bigrams():
    assert tokenize("Tokyo 東京都で大雪") == ["tokyo", "東京", "京都", "都で", "で大", "大雪"]
    assert tokenize("雪") == ["雪"]
    assert tokenize("the storm") == ["storm"]  # spaced scripts unchanged


def test_japanese_copies_have_similar_story_vectors():
    model = _tiny_model()
    a = model.tfidf(tokenize(BUS_JA))
    b = model.tfidf(tokenize(BUS_JA.replace("と話した", "と述べた")))
    unrelated = model.tfidf(tokenize("東京都で大雪、交通機関に乱れ。関東地方では朝から雪が降り続いた。"))
    assert len(a) > 50
    assert sparse_dot(a, b) > 0.9
    assert sparse_dot(a, unrelated) < 0.2


def test_latin_equivalent_length():
    assert latin_equivalent_length("Storm hits") == 10
    assert latin_equivalent_length("東京、雪") == 3 * 3 + 1
    assert latin_equivalent_length("한국") == 4
    assert latin_equivalent_length("ภาษา") == 4
    assert latin_equivalent_length(None) == 0


def test_nfd_person_name_is_found_as_entity():
    from newsflow.core.entities import EntityExtractor, load_nlp

    title = "Hélène Dupré opens the new library in Geneva"
    nfd = unicodedata.normalize("NFD", title)
    # spaCy alone misses the person in the decomposed spelling ...
    assert "Hélène Dupré" not in [s.text for s in load_nlp()(nfd).ents]
    # ... the extractor normalizes first.
    assert [e.text for e in EntityExtractor().extract(nfd)] == ["Hélène Dupré", "Geneva"]
