"""Topic classifier: known topics on clear headlines, a fixture of known labels, calibration, model files,
label rules, splits."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from newsflow.cli.train_topics import ensure_topic_model
from newsflow.core.topic_training import calibrate, fit_model
from newsflow.core.topics import (
    LABELS,
    MODEL_FORMAT,
    SECTIONS,
    Example,
    TopicClassifier,
    class_section,
    load_training_examples,
    model_format,
    platt_fit,
    read_web_sections,
    rule_types,
    source_class,
    split_bucket,
    split_of,
    url_section,
    web_example,
)


@pytest.fixture(scope="module")
def clf():
    return TopicClassifier.load(ensure_topic_model())


def test_known_topics_on_clear_headlines(clf):
    heads = [
        "Stocks fall as Fed raises interest rates",
        "Apple unveils new iPhone with faster chip",
        "Senate passes bill after vote on Trump impeachment",
    ]
    out = clf.predict(heads)
    assert [o[0][0] for o in out] == ["Business", "Technology", "Politics"]
    assert all(0.5 <= o[0][1] <= 1.0 for o in out)


def test_probabilities_are_in_range_and_low_confidence_gives_no_label(clf):
    p = clf.probabilities(["Stocks fall", "zzqx vrrp"])
    assert p.shape == (2, len(LABELS)) and ((p >= 0) & (p <= 1)).all()
    assert clf.predict(["zzqx vrrp"], threshold=0.999) == [[]]
    assert clf.predict([]) == []


def test_explainer_type(clf):
    labels = dict(clf.predict(["What is inflation and why does it matter?"])[0])
    assert "explainer" in labels


def test_platt_fit_recovers_a_known_mapping():
    rng = np.random.default_rng(0)
    z = rng.normal(0, 2, 20000)
    raw = 1 / (1 + np.exp(-z))
    # true probability sigmoid(0.5 * z - 1)
    y = rng.random(z.size) < 1 / (1 + np.exp(-(0.5 * z - 1)))
    a, b = platt_fit(raw, y)
    assert a == pytest.approx(0.5, abs=0.05) and b == pytest.approx(-1.0, abs=0.06)
    assert platt_fit(raw[:10], np.zeros(10)) == (1.0, 0.0)


def test_rule_types_and_split():
    assert rule_types("Legendary Actor Dies At 89") == ["obituary"]
    assert rule_types("Why Is Gas So Expensive?") == ["explainer"]
    assert rule_types("The Berlin Wall Fell 30 Years Ago Today") == ["historical"]
    assert rule_types("Stocks rise") == []
    assert split_bucket("x") == split_bucket("x") and 0 <= split_bucket("x") < 10
    assert set(SECTIONS) < set(LABELS)


def test_sports_world_and_lifestyle_on_clear_headlines(clf):
    out = clf.predict(
        [
            "Lakers beat Celtics in overtime as LeBron James scores 40",
            "Russia and Ukraine trade blame after strike on Kyiv",
            "10 easy ways to style your living room this fall",
        ]
    )
    assert out[0][0][0] == "Sports" and out[1][0][0] == "World"
    # a lifestyle headline (HuffPost HOME & LIVING, a class with no section) gets no confident section
    assert not any(label in SECTIONS for label, _ in out[2])


def test_source_classes_map_to_sections():
    assert class_section(source_class("huffpost", "SPORTS")) == "Sports"
    assert class_section("huffpost:U.S. NEWS") == "Nation"
    assert class_section("huffpost:STYLE & BEAUTY") is None
    assert class_section("aggregator:m") == "Health"
    assert class_section("agnews:2") is None


# a fixture whose labels are known by construction: each class has its own vocabulary
_FIXTURE = {
    "huffpost:SPORTS": ["striker scores late goal in derby match", "coach praises goalkeeper after cup match"],
    "huffpost:POLITICS": ["senate vote on the budget bill fails", "governor signs bill after senate vote"],
    "huffpost:STYLE & BEAUTY": ["new lipstick shades for autumn makeup", "makeup artist shares lipstick tips"],
    "aggregator:b": ["shares slide as bank profits drop", "bank shares rally on profits report"],
}


def _fixture_model():
    texts = [t for ts in _FIXTURE.values() for t in ts] * 3
    classes = [c for c, ts in _FIXTURE.items() for _ in ts] * 3
    types = [
        ("obituary",) if "coach" in t else ("explainer",) if "tips" in t else ("historical",) if "derby" in t else ()
        for t in texts
    ]
    return fit_model(texts, classes, types), texts, classes


def test_fit_model_learns_a_fixture_and_section_scores_are_class_maxima():
    model, _, _ = _fixture_model()
    clf = TopicClassifier(model, {})
    probe = ["goal in the cup match", "budget bill vote", "bank profits", "lipstick and makeup"]
    raw = clf.raw_scores(probe)
    assert raw.shape == (4, len(LABELS))
    assert [SECTIONS[int(np.argmax(r[: len(SECTIONS)]))] for r in raw[:3]] == ["Sports", "Politics", "Business"]
    # a section's score is its source class's own SVM margin; sections with no class score -10
    margins = model["sections"].decision_function(model["vectorizer"].transform(probe))
    cls = list(model["sections"].classes_)
    assert raw[:, SECTIONS.index("Sports")] == pytest.approx(margins[:, cls.index("huffpost:SPORTS")])
    assert raw[:, SECTIONS.index("Health")] == pytest.approx(np.full(4, -10.0))
    # the lifestyle text's best class is the unmapped one: every section margin is below it
    assert margins[3].argmax() == cls.index("huffpost:STYLE & BEAUTY")
    assert raw[3, : len(SECTIONS)].max() < margins[3].max()


def test_calibration_and_save_load_roundtrip(tmp_path):
    import joblib

    model, texts, classes = _fixture_model()
    clf = TopicClassifier(model, {})
    labels = [(s,) if (s := class_section(c)) else () for c in classes]
    platt = calibrate(clf, texts, labels)
    assert platt["Sports"] == platt["Politics"] and platt["Sports"][0] > 0  # pooled, margin raises probability
    path = tmp_path / "topics-v1.bin"
    joblib.dump(model, path)
    (tmp_path / "topics-v1.bin.calibration.json").write_text(json.dumps({"format": MODEL_FORMAT, "platt": platt}))
    assert model_format(str(path)) == MODEL_FORMAT
    loaded = TopicClassifier.load(str(path))
    probe = ["late goal wins the match", "senate bill vote"]
    assert loaded.predict(probe) == TopicClassifier(model, platt).predict(probe)
    assert [s for s, _ in loaded.top_section(probe)] == ["Sports", "Politics"]


def test_load_rejects_a_model_of_another_format(tmp_path):
    path = tmp_path / "topics-v1.bin"
    path.write_bytes(b"\xba\x16\x4f\x2f fastText model")
    assert model_format(str(path)) is None  # no calibration file
    (tmp_path / "topics-v1.bin.calibration.json").write_text(json.dumps({"platt": {}}))
    with pytest.raises(ValueError, match="format None, expected .*train-topics --force"):
        TopicClassifier.load(str(path))
    (tmp_path / "topics-v1.bin.calibration.json").write_text(json.dumps({"format": MODEL_FORMAT, "platt": {}}))
    with pytest.raises(ValueError, match="cannot read the topic model"):
        TopicClassifier.load(str(path))


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


def test_a_model_is_read_once_per_process_until_its_files_change(tmp_path):
    import shutil

    src = ensure_topic_model()
    path = str(tmp_path / "topics-v1.bin")
    shutil.copy(src, path)
    shutil.copy(src + ".calibration.json", path + ".calibration.json")
    a = TopicClassifier.load(path)
    b = TopicClassifier.load(path, threshold=0.7)
    assert b.model is a.model and b.threshold == 0.7  # same files: read once
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # a retrained model lands
    c = TopicClassifier.load(path)
    assert c.model is not a.model
    texts = ["Senate passes the budget bill", "Striker scores twice in the cup final"]
    assert (c.raw_scores(texts) == a.raw_scores(texts)).all()
    with open(path, "wb") as f:
        f.write(b"not a model")
    with pytest.raises(ValueError, match="cannot read the topic model"):
        TopicClassifier.load(path)
