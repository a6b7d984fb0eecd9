"""Topic classifier: known topics on clear headlines, calibration, label rules, splits."""

from __future__ import annotations

import numpy as np
import pytest

from jobs.train_topics import ensure_topic_model
from newsflow.topics import LABELS, SECTIONS, TopicClassifier, platt_fit, rule_types, split_bucket


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
