"""Tokenizer, TF-IDF, centroid helpers and the trained 128-dim embedding model."""

from __future__ import annotations

import math

import numpy as np
import pytest

from newsflow.core.embedding import (
    EMBEDDING_DIM,
    TextModel,
    centroid_update,
    load_text_model,
    merge_means,
    stem,
    tokenize,
    train_text_model,
    url_slug_tokens,
)


def test_tokenize_and_stem():
    assert tokenize("The Bachelor's finale: Juan Pablo picks Nikki!") == [
        "bachelor",
        "finale",
        "juan",
        "pablo",
        "pick",
        "nikki",
    ]
    assert stem("stories") == "story" and stem("glass") == "glass" and stem("bus") == "bus"
    assert tokenize(None) == [] and tokenize("") == []


def test_url_slug_tokens():
    u = "http://thecelebritycafe.com/feature/2014/03/new-deal-makes-chiquita-world-s-top-banana-company"
    assert url_slug_tokens(u) == ["new", "deal", "make", "chiquita", "world", "banana", "company"]
    assert url_slug_tokens("http://www.startribune.com/politics/national/249187161.html") == []
    assert url_slug_tokens("") == []


def test_centroid_update_is_the_incremental_mean():
    m, unit = centroid_update(None, 0, np.array([3.0, 4.0]))
    assert m.tolist() == [3.0, 4.0] and unit == pytest.approx([0.6, 0.8])
    m, unit = centroid_update(m, 1, np.array([1.0, 0.0]))
    assert m.tolist() == [2.0, 2.0] and unit == pytest.approx([math.sqrt(0.5)] * 2)
    m, _ = centroid_update(m, 2, np.array([2.0, -4.0]))
    assert m.tolist() == pytest.approx([2.0, 0.0])  # mean of (3,4), (1,0), (2,-4)
    merged, _ = merge_means(np.array([2.0, 0.0]), 3, np.array([6.0, 4.0]), 1)
    assert merged.tolist() == pytest.approx([3.0, 1.0])
    with pytest.raises(ValueError):
        centroid_update(np.zeros(3), 1, np.zeros(2))


def test_tfidf_by_hand():
    # 4 docs: "apple" and "banana" in 2 each -> idf = ln(5/3)+1; hapaxes and unseen terms get ln(5)+1
    docs = ["apple banana", "apple", "cherry banana", "date"]
    m = train_text_model(docs, [], dim=1)
    assert m.vocabulary == ["apple", "banana"]
    assert m.idf_of("apple") == pytest.approx(math.log(5 / 3) + 1, rel=1e-6)
    assert m.idf_of("zebra") == pytest.approx(math.log(5) + 1)
    v = m.tfidf(["apple", "apple", "zebra"])
    wa, wz = (1 + math.log(2)) * (math.log(5 / 3) + 1), math.log(5) + 1
    n = math.hypot(wa, wz)
    assert v == pytest.approx({"apple": wa / n, "zebra": wz / n})


def test_training_is_deterministic(tmp_path):
    texts = [f"topic{i % 7} word{i % 11} shared term{i % 5} extra{i % 3}" for i in range(200)]
    a = train_text_model(texts, [], dim=8)
    b = train_text_model(texts, [], dim=8)
    assert np.array_equal(a.components, b.components)
    a.save(str(tmp_path / "m.npz"))
    c = TextModel.load(str(tmp_path / "m.npz"))
    assert c.vocabulary == a.vocabulary and np.array_equal(c.components, a.components)


def test_shipped_embedding_is_unit_128d_and_topical():
    m = load_text_model()
    e = m.embed(
        [
            "Apple releases iOS 7.1 update for iPhone and iPad",
            "iOS 7.1 now available: new features for iPhone",
            "Senate votes on budget bill as Democrats and Republicans clash",
            "",
        ]
    )
    assert e.shape == (4, EMBEDDING_DIM) and e.dtype == np.float32
    assert np.linalg.norm(e[:3], axis=1) == pytest.approx([1, 1, 1], abs=1e-5)
    assert not e[3].any()  # no known term -> zero vector
    assert e[0] @ e[1] > 0.5 > e[0] @ e[2]
    assert np.array_equal(m.embed(["Apple releases iOS 7.1"]), m.embed(["Apple releases iOS 7.1"]))
