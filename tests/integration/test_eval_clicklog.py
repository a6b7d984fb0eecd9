"""``eval personalization`` and ``eval decay`` on the shared Globo.com click log (non-commercial: read
from ../shared/data only, never copied); skipped when the folder is absent."""

from __future__ import annotations

import json
import os

import pytest

from newsflow.cli.main import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLICKS = os.path.join(ROOT, "..", "shared", "data", "globo-news-clicks-sample", "clicks.csv.gz")
pytestmark = pytest.mark.skipif(not os.path.exists(CLICKS), reason="shared Globo click log not present")


def test_eval_personalization_json_shape(capsys):
    assert main(["eval", "personalization", "--clicks", CLICKS]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["queries"] > 10000
    assert set(r["baselines"]) == {"popularity", "recent_popularity", "covisitation"}
    for m in [r] + list(r["baselines"].values()):
        assert 0.0 <= m["mrr_at_10"] <= m["hr_at_10"] <= 1.0
    assert r["hr_at_10"] > max(b["hr_at_10"] for b in r["baselines"].values())


def test_eval_decay_json_shape(capsys):
    assert main(["eval", "decay", "--clicks", CLICKS]) == 0
    r = json.loads(capsys.readouterr().out)
    assert set(r["loglik"]) == {"learned", "fixed_default", "fixed_evergreen", "fixed_breaking"}
    assert r["test_clicks_scored"] > 1000 and r["lambda_learned_per_hour"] > 0
