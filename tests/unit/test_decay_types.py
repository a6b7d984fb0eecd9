"""Per-article-type decay λ: simulated impressions and clicks with known rates per (topic, type) are
recovered within their 95 % intervals; thin cells shrink to their topic's rate; the article type comes
from JSON-LD, URL paths and headlines; ranking prefers a (topic, type) rate to the topic's."""

from __future__ import annotations

import math

import numpy as np
import pytest

from newsflow.core.learning.decay_types import cell_key, fit_decay_by_type, typed_lambda_overrides
from newsflow.core.ranking.article_type import ARTICLE_TYPES, article_type, story_article_type
from newsflow.core.ranking.decay import LAMBDA_DEFAULT, LAMBDA_EVERGREEN, decay_rate, lambda_for

TRUE = {  # (topic, type): (λ per hour, attractiveness c, impressions per (age, position) point)
    ("tech", "news"): (0.10, 0.20, 40),
    ("tech", "live"): (0.50, 0.30, 40),
    ("tech", "service"): (0.02, 0.10, 40),
    ("world", "news"): (0.15, 0.20, 40),
    ("world", "opinion"): (0.04, 0.15, 40),
    ("world", "analysis"): (0.30, 0.50, 1),  # thin (ages 0-10 h only, ~5 clicks): shrinks to the world rate
}
AGES = np.arange(0.0, 48.0, 0.5)
THIN_AGES = AGES[:24:4]
POSITIONS = np.arange(10)


def _simulate(seed: int):
    """Aggregated rows (topic, type, age, position, impressions, clicks) with clicks drawn as
    Binomial(impressions, c · b(p) · e^(−λ·age)), b(p) = (1 + p)^−0.7."""
    rng = np.random.default_rng(seed)
    rows = []
    for (topic, kind), (lam, c, m) in TRUE.items():
        for a in AGES if m > 1 else THIN_AGES:
            for p in POSITIONS:
                prob = c * (1.0 + p) ** -0.7 * math.exp(-lam * a)
                rows.append((topic, kind, float(a), int(p), m, int(rng.binomial(m, prob))))
    return rows


def _fit(rows):
    topic, kind, age, pos, imp, clk = zip(*rows, strict=True)
    return fit_decay_by_type(topic, kind, age, clk, impressions=imp, positions=pos)


def test_known_rates_per_type_are_recovered_within_their_intervals():
    fit = _fit(_simulate(seed=7))
    for cell, (lam, _, m) in TRUE.items():
        e = fit.cells[cell]
        assert e.group == cell_key(*cell)
        if m < 40:
            continue
        assert e.ci_low <= lam <= e.ci_high, (cell, lam, e)
        assert e.sufficient and e.shrinkage_weight > 0.9
        assert e.lambda_per_hour == pytest.approx(lam, rel=0.15)
    # the position bias b(p) = (1 + p)^-0.7 is recovered by the topic-level fit (~100 clicks at p = 9:
    # sampling error ~10 %)
    np.testing.assert_allclose(fit.topics.position_bias[:10], (1.0 + POSITIONS) ** -0.7, rtol=0.2)
    overrides = typed_lambda_overrides(fit)
    assert overrides["tech/live"] == fit.cells[("tech", "live")].lambda_per_hour
    assert "world/analysis" not in overrides


def test_a_thin_cell_shrinks_to_its_topic_rate():
    fit = _fit(_simulate(seed=7))
    thin = fit.cells[("world", "analysis")]
    world = fit.topics.groups["world"].lambda_per_hour
    assert not thin.sufficient and thin.n_impressions == len(THIN_AGES) * len(POSITIONS)
    s_rel = thin.se_per_hour / thin.mle_per_hour
    assert s_rel > 0.25  # too uncertain to override
    assert thin.shrinkage_weight == pytest.approx(fit.prior_sd**2 / (fit.prior_sd**2 + s_rel**2))
    assert thin.shrinkage_weight < 0.9
    # the estimate sits between its own MLE and the topic rate, nearer the topic
    assert abs(math.log(thin.lambda_per_hour) - math.log(world)) < abs(math.log(thin.mle_per_hour) - math.log(world))
    assert thin.ci_low <= TRUE[("world", "analysis")][0] <= thin.ci_high


def test_interval_coverage_over_seeds():
    """Across 10 simulated datasets the 95 % intervals of the five measured cells hold the true λ in
    at least 44 of 50 cases (binomial(50, 0.95) is ≥ 44 with probability 0.99)."""
    hits = 0
    for seed in range(10):
        fit = _fit(_simulate(seed))
        for cell, (lam, _, m) in TRUE.items():
            if m >= 40:
                e = fit.cells[cell]
                hits += e.ci_low <= lam <= e.ci_high
    assert hits >= 44


def test_a_cell_without_clicks_gets_the_topic_rate_and_a_wider_interval():
    rows = _simulate(seed=3) + [("tech", "feature", 1.0, 0, 5, 0), ("tech", "feature", 2.0, 1, 5, 0)]
    fit = _fit(rows)
    e, tech = fit.cells[("tech", "feature")], fit.topics.groups["tech"]
    assert e.lambda_per_hour == pytest.approx(tech.lambda_per_hour) and e.shrinkage_weight == 0.0
    assert e.ci_high / e.ci_low > tech.ci_high / tech.ci_low and math.isnan(e.mle_per_hour)
    with pytest.raises(ValueError, match="differ in length"):
        fit_decay_by_type(["a"], [], [1.0], [0])


@pytest.mark.parametrize(
    ("url", "title", "schema", "expected"),
    [
        ("https://x.com/a", "Anything", "LiveBlogPosting", "live"),
        ("https://x.com/a", "Anything", ["NewsArticle", "OpinionNewsArticle"], "opinion"),
        ("https://x.com/a", "Anything", "https://schema.org/AnalysisNewsArticle", "analysis"),
        ("https://x.com/a", "Anything", "ReportageNewsArticle", "news"),
        ("https://www.theguardian.com/commentisfree/2014/mar/11/x", "A view", None, "opinion"),
        ("https://www.bbc.co.uk/news/live/world-123", "Ukraine crisis", None, "live"),
        ("https://www.washingtonpost.com/news/opinions/wp/2014/03/10/x", "A finale", None, "opinion"),
        ("https://www.ft.com/content/analysis/abc", "Markets", None, "analysis"),
        ("https://www.jsonline.com/features/drinks/x", "Homemade syrup", None, "feature"),
        ("https://www.vox.com/explainers/x", "Inflation", None, "service"),
        ("https://x.com/2014/03/11/markets", "Business news and markets: as it happened", None, "live"),
        ("https://x.com/a", "Opinion | Is Football Violence a Crime?", None, "opinion"),
        ("https://x.com/a", "Analysis: China slows", None, "analysis"),
        ("https://x.com/a", "How to retire early", None, "service"),
        ("https://x.com/a", "Bitcoin explained", None, "service"),
        ("https://x.com/a", "What's Wrong With Verizon Today?", None, "news"),
        ("https://x.com/olive/oil", "Olive oil prices rise", None, "news"),
        (None, None, None, "news"),
        (12, b"bytes", {"@type": 1}, "news"),
        ("http://[::1", "Live: storm hits the coast", None, "live"),
    ],
)
def test_article_type_from_schema_url_and_headline(url, title, schema, expected):
    assert article_type(url, title, schema) == expected
    assert expected in ARTICLE_TYPES


def test_ranking_prefers_the_topic_and_type_rate():
    overrides = {"tech": 0.08, "tech/live": 0.6}
    assert lambda_for(["Tech"], False, overrides, article_type="live") == 0.6
    assert lambda_for(["Tech"], False, overrides, article_type="opinion") == 0.08
    assert lambda_for(["world", "tech"], False, {"tech/live": 0.6}, article_type="live") == 0.6
    assert lambda_for(["world"], False, overrides, article_type="live") == LAMBDA_DEFAULT
    # fixed classes: service (explainers, how-tos) is evergreen without a learned rate
    assert lambda_for(["world"], False, None, article_type="service") == LAMBDA_EVERGREEN
    assert lambda_for(["world"], True, overrides, article_type="service") == 0.5

    class Story:
        url, title = "https://x.com/live/a", "Storm"

    assert story_article_type(Story()) == "live"
    Story.article_type = "opinion"
    assert story_article_type(Story()) == "opinion"


def test_decay_rate_names_where_the_rate_comes_from():
    overrides = {"tech": 0.08, "tech/live": 0.6}
    assert decay_rate(["Tech"], False, overrides, "live") == (0.6, "learned", "tech/live")
    assert decay_rate(["world", "Tech"], False, overrides, "opinion") == (0.08, "learned", "tech")
    assert decay_rate(["world"], False, overrides, "news") == (LAMBDA_DEFAULT, "default", "")
    assert decay_rate(["world"], False, overrides, "service") == (LAMBDA_EVERGREEN, "evergreen", "")
    assert decay_rate(["tech"], True, overrides, "live") == (0.5, "breaking", "")
