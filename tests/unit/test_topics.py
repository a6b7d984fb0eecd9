"""Topic classifier: known topics on clear headlines through the shipped model and embedder, article types as a
separate field, a fixture of known labels, the model file, label rules, splits."""

from __future__ import annotations

import json

import numpy as np
import pytest

from newsflow.core.embedder import load_embedder
from newsflow.core.topic_training import cv_fold, fit
from newsflow.core.topics import (
    ARTICLE_TYPES,
    LABELS,
    MODEL_FORMAT,
    SECTIONS,
    Example,
    Labels,
    TopicClassifier,
    class_section,
    load_training_examples,
    read_web_sections,
    rule_types,
    source_class,
    split_bucket,
    split_of,
    url_section,
    web_example,
)


@pytest.fixture(scope="module")
def shipped():
    """The shipped classifier and the pipeline's embedder (a few headlines: well under a second)."""
    return TopicClassifier.load(), load_embedder()


def _predict(shipped, heads):
    clf, embedder = shipped
    return clf.predict(embedder.embed(heads), heads)


def test_shipped_model_matches_the_embedder_and_covers_every_section(shipped):
    clf, embedder = shipped
    assert clf.embedder_name == embedder.name and clf.dim == embedder.dim == 384
    assert {class_section(c) for c in clf.classes} - {None} == set(SECTIONS)


def test_known_topics_on_clear_headlines(shipped):
    texts = [
        "Stocks fall as Fed raises interest rates",
        "Apple unveils new iPhone with faster chip",
        "Senate passes bill after vote on Trump impeachment",
        # title + lead, as the pipeline embeds them (headline-only sports and world texts are weaker: the training
        # text is mostly HuffPost headline + description)
        "Lakers beat Celtics in overtime\nLeBron James scored 40 points as the Lakers won the NBA game in Boston.",
        "Russia and Ukraine trade blame after strike on Kyiv\nMissiles hit the capital overnight, Ukrainian "
        "officials said, as Moscow denied targeting civilians.",
    ]
    out = _predict(shipped, texts)
    assert [o.topics[0][0] for o in out] == ["Business", "Technology", "Politics", "Sports", "World"]
    assert all(0.5 < o.topics[0][1] <= 1.0 and o.types == [] for o in out)


def test_article_types_are_a_separate_field(shipped):
    out = _predict(shipped, ["What is inflation and why does it matter?", "Legendary Actor Dies At 89"])
    assert [o.types for o in out] == [[("explainer", 1.0)], [("obituary", 1.0)]]
    assert all(t not in ARTICLE_TYPES for o in out for t, _ in o.topics)  # a topic is never a type
    assert out[1].topics  # the obituary still has its section


def test_section_probabilities_and_abstention(shipped):
    clf, embedder = shipped
    v = embedder.embed(["Stocks fall", "10 easy ways to style your living room this fall"])
    p = clf.probabilities(v)
    assert p.shape == (2, len(SECTIONS)) and ((p >= 0) & (p <= 1 + 1e-9)).all()
    # a section's probability is the sum of its classes' (classes without a section would take the rest)
    cp = clf.class_probabilities(v)
    assert cp.sum(axis=1) == pytest.approx([1.0, 1.0]) and (p.sum(axis=1) <= 1 + 1e-9).all()
    sports = [i for i, c in enumerate(clf.classes) if class_section(c) == "Sports"]
    assert p[:, SECTIONS.index("Sports")] == pytest.approx(cp[:, sports].sum(axis=1))
    assert clf.predict(v, ["", ""], threshold=1.01) == [Labels([], []), Labels([], [])]
    assert clf.predict(v[:0], []) == []


def test_rule_types_and_split():
    assert rule_types("Legendary Actor Dies At 89") == ["obituary"]
    assert rule_types("Why Is Gas So Expensive?") == ["explainer"]
    assert rule_types("The Berlin Wall Fell 30 Years Ago Today") == ["historical"]
    assert rule_types("Stocks rise") == []
    assert split_bucket("x") == split_bucket("x") and 0 <= split_bucket("x") < 10
    assert set(SECTIONS) < set(LABELS) and not set(SECTIONS) & set(ARTICLE_TYPES)
    folds = [cv_fold(f"k{i}") for i in range(1000)]
    assert set(folds) == {0, 1, 2, 3, 4} and min(folds.count(k) for k in range(5)) > 150


def test_source_classes_map_to_sections():
    assert class_section(source_class("huffpost", "SPORTS")) == "Sports"
    assert class_section("huffpost:U.S. NEWS") == "Nation"
    assert class_section("huffpost:STYLE & BEAUTY") is None
    assert class_section("aggregator:m") == "Health"
    assert class_section("agnews:2") is None


def _fixture_vectors():
    """Three source classes, each a Gaussian blob around its own axis of an 8-dim space (labels known by
    construction), 40 vectors each."""
    rng = np.random.default_rng(0)
    classes = ["huffpost:SPORTS", "huffpost:POLITICS", "huffpost:STYLE & BEAUTY"]
    x = np.concatenate([rng.normal(0, 0.3, (40, 8)) + 3 * np.eye(8)[i] for i in range(3)])
    return x, [c for c in classes for _ in range(40)]


def test_fit_learns_a_fixture_and_roundtrips_through_its_file(tmp_path):
    x, classes = _fixture_vectors()
    clf = fit(x, classes, "fixture-embedder", {"c": 1.0, "threshold": 0.5})
    probe = 3 * np.eye(8)[:3]
    top = clf.top_section(probe)
    assert [s for s, _ in top[:2]] == ["Sports", "Politics"] and min(p for _, p in top[:2]) > 0.9
    # the lifestyle point: its class has no section, so no section reaches the threshold
    assert clf.predict(probe, ["", "", ""])[2] == Labels([], [])
    path = str(tmp_path / "m.npz")
    clf.save(path)
    loaded = TopicClassifier.load(path)
    assert loaded.classes == clf.classes and loaded.embedder_name == "fixture-embedder" and loaded.threshold == 0.5
    assert loaded.probabilities(probe) == pytest.approx(clf.probabilities(probe), abs=1e-5)  # float32 weights
    with pytest.raises(ValueError, match="at least two classes"):
        fit(x[:40], classes[:40], "e")


def test_load_rejects_a_file_that_is_not_a_topic_model(tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"\xba\x16\x4f\x2f fastText model")
    with pytest.raises(ValueError, match="not a topic model"):
        TopicClassifier.load(str(bad))
    other = tmp_path / "other.npz"
    np.savez(other, format=np.array("newsflow-topics/tfidf-word-char-linear-svm/2"))
    with pytest.raises(ValueError, match=f"expected {MODEL_FORMAT!r}"):
        TopicClassifier.load(str(other))
    with pytest.raises(FileNotFoundError, match="train-topics"):
        TopicClassifier.load(str(tmp_path / "missing.npz"))


def test_shipped_examples_split_by_key_and_headline_copies_only_in_train():
    data = load_training_examples()
    for split, exs in data.items():
        assert all(split_of(e.key) == split for e in exs)
    train_keys = {e.key for e in data["train"]}
    assert not train_keys & {e.key for e in data["calibration"] + data["test"]}
    assert len(data["train"]) > len(train_keys)  # headline-only copies
    huffpost_test = [e.key for e in data["test"] if e.source_class.startswith("huffpost:")]
    assert huffpost_test and len(set(huffpost_test)) == len(huffpost_test)  # aggregator keys are whole stories


def test_headline_and_description_copies_follow_their_row():
    from newsflow.core.embedding import read_huffpost
    from newsflow.core.topics import huffpost_example

    plain = load_training_examples()
    both = load_training_examples(copy_splits=("train", "calibration"), description_copies=True)
    assert both["test"] == plain["test"]  # the test split never gets copies
    # a HuffPost row's copies: the row itself, its headline alone, its description alone, same key and labels
    row = next(
        r
        for r in read_huffpost()
        if split_of(huffpost_example(r)[0]) == "calibration" and r["short_description"] and r["category"] == "SPORTS"
    )
    ex = huffpost_example(row)
    assert ex.text == f"{row['headline']}. {row['short_description']}"
    assert [e for e in plain["calibration"] if e.key == ex.key] == [ex]
    copies = [e for e in both["calibration"] if e.key == ex.key]
    assert copies == [ex, ex._replace(text=row["headline"]), ex._replace(text=row["short_description"])]
    # counts: one extra row per HuffPost row with a headline (train), one per non-empty description
    n_desc = sum(
        1
        for r in read_huffpost()
        if split_of(huffpost_example(r)[0]) == "train"
        and (r.get("short_description") or "").strip()
        and (huffpost_example(r).labels or huffpost_example(r).source_class)
    )
    with_desc = load_training_examples(description_copies=True)
    assert len(with_desc["train"]) - len(plain["train"]) == n_desc
    assert len(with_desc["calibration"]) == len(plain["calibration"])  # copies only where asked


def test_url_sections_and_web_examples():
    assert url_section("https://www.theguardian.com/sport/2018/jan/31/rasual-butler") == "Sports"
    assert url_section("https://financialpost.com/news/economy/economists-weigh-in") == "Business"
    assert url_section("https://www.theguardian.com/us-news/2018/jan/31/fbi") == "Nation"
    assert url_section("https://www.nytimes.com/2019/11/19/opinion/republicans.html") is None
    assert url_section("") is None
    row = {"url": "https://x.org/sport/a", "title": "Legend Dies At 89", "text": "He won.", "section": "Sports"}
    ex = web_example(row)
    assert ex == Example("web:" + row["url"], "Legend Dies At 89. He won.", ("Sports", "obituary"), "web:Sports")
    assert class_section(ex.source_class) == "Sports"
    assert web_example({"url": "u", "text": "Body only.", "section": "Opinion"}).labels == ()


def test_web_sections_file_matches_the_url_table():
    rows = read_web_sections()
    assert rows and all(url_section(r["url"]) == r["section"] for r in rows)
    assert all(r["license"].startswith("MIT") for r in rows)
    assert sum(r["section"] == "Sports" for r in rows) >= 10


def test_build_topic_web_data_from_a_fixture(tmp_path):
    from newsflow.cli.build_topic_web_data import collect

    (tmp_path / "rss-atom-feeds" / "expected_rss_parser").mkdir(parents=True)
    (tmp_path / "article-extraction-benchmark").mkdir()
    (tmp_path / "fundus-news-pages").mkdir()
    items = [
        {"link": "https://g.com/sport/2018/a", "title": "Spurs win", "contentSnippet": "A late goal."},
        {"link": "https://g.com/commentisfree/2018/b", "title": "An opinion", "contentSnippet": "Text."},
    ]
    (tmp_path / "rss-atom-feeds" / "expected_rss_parser" / "guardian.json").write_text(
        json.dumps({"feed": {"items": items}})
    )
    (tmp_path / "article-extraction-benchmark" / "ground-truth.json").write_text(
        json.dumps({"1": {"url": "https://n.com/science/c", "articleBody": "word " * 100}})
    )
    pages = [
        {"html_lang": "en", "url": "https://p.com/news/world/d", "expected": {"title": "Talks"}, "body_text": "Go."},
        {"html_lang": "de", "url": "https://p.de/sport/e", "expected": {"title": "Tor"}, "body_text": "Ja."},
    ]
    (tmp_path / "fundus-news-pages" / "expected.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pages))
    rows = collect(str(tmp_path))
    assert [(r["url"], r["section"], r["title"]) for r in rows] == [
        ("https://g.com/sport/2018/a", "Sports", "Spurs win"),
        ("https://n.com/science/c", "Science", ""),
        ("https://p.com/news/world/d", "World", "Talks"),
    ]
    assert len(rows[1]["text"]) <= 300 and rows[1]["text"].startswith("word word")
