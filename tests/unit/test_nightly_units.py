"""Pure parts of the nightly jobs and of learned personalization, with hand-computed expectations."""

from __future__ import annotations

import datetime as dt
import math
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from newsflow.core.ranking.personalize import LearnedSignals, personal_signals, with_learned
from newsflow.jobs.decay_rates import fit_rows, impression_outcomes
from newsflow.jobs.interest_vectors import covisit_pairs, recent_clicks, top_neighbors
from newsflow.jobs.nightly_common import NightlyConfig, parse_date, partition_files, write_partition
from newsflow.schemas import Event, UserProfile


def _e(t, typ, story, time, pos=None):
    return Event("u", typ, story, time, time, pos, None, "feed")


def test_parse_date_and_config_dates():
    assert parse_date(None, today=dt.date(2026, 12, 1)) == "2026-11-30"
    assert parse_date("2026-02-03") == "2026-02-03"
    with pytest.raises(ValueError, match="2026-13-01"):
        parse_date("2026-13-01")
    c = NightlyConfig("2026-03-01", "/x", None, "nf")
    assert c.dates(3) == ["2026-02-27", "2026-02-28", "2026-03-01"]
    assert c.now == dt.datetime(2026, 3, 2, tzinfo=dt.UTC).timestamp()


def test_write_partition_replaces_the_date(tmp_path):
    root = str(tmp_path)
    t1 = pa.table({"a": [1, 2, 3]})
    write_partition(root, "models/x", "2026-01-01", t1)
    (tmp_path / "models/x/date=2026-01-01/stale.parquet").write_bytes(b"junk")
    path = write_partition(root, "models/x", "2026-01-01", pa.table({"a": [9]}))
    assert partition_files(root, "models/x", ["2026-01-01", "2026-01-02"]) == [path]
    assert pq.read_table(path).column("a").to_pylist() == [9]


def test_each_impression_is_an_outcome_answered_by_a_later_click_on_its_surface():
    events = [
        _e("u", "impression", "s", 200.0, 3),
        _e("u", "impression", "s", 100.0, 5),
        _e("u", "click", "s", 210.0),  # answers the impression at 200 (the latest before it), not 100
        Event("u", "impression", "s", 300.0, 300.0, 1, None, "top"),  # other surface: the click is not its
        _e("u", "impression", "s", 5000.0, 0),  # no click within 30 minutes after it
    ]
    assert list(impression_outcomes(("u", "s"), events)) == [
        ("s", 100.0, 5, 0),
        ("s", 200.0, 3, 1),
        ("s", 300.0, 1, 0),
        ("s", 5000.0, 0, 0),
    ]
    assert list(impression_outcomes(("u", "s"), [_e("u", "click", "s", 1.0)])) == []  # no exposure


def test_decay_fit_recovers_a_known_rate():
    # expected clicks = impressions · 0.3 · e^(−λ·age) with λ = 0.2 for "world", 0.05 for "sports"
    cells = []
    for topic, lam in (("world", 0.2), ("sports", 0.05)):
        for age in np.arange(0.0, 24.0, 0.5):
            imps = 4000
            cells.append(((topic, "news", float(age), 0), (imps, round(imps * 0.3 * math.exp(-lam * age)))))
    out = fit_rows(cells)
    rows = {r["topic"]: r for r in out if r["article_type"] is None}
    cells_out = {(r["topic"], r["article_type"]): r for r in out if r["article_type"] is not None}
    # one type per topic: the cell's estimate is the topic's own MLE, shrunk toward the topic's rate
    assert cells_out[("world", "news")]["mle_per_hour"] == pytest.approx(rows["world"]["mle_per_hour"])
    assert cells_out[("world", "news")]["lambda_per_hour"] == pytest.approx(0.2, rel=0.02)
    assert rows["world"]["lambda_per_hour"] == pytest.approx(0.2, rel=0.02)
    assert rows["sports"]["lambda_per_hour"] == pytest.approx(0.05, rel=0.05)
    assert rows["world"]["sufficient"] and rows["world"]["ci_low"] < 0.2 < rows["world"]["ci_high"]
    assert rows["*"]["impressions"] == 2 * 48 * 4000
    assert fit_rows([]) == []


def test_recent_clicks_and_covisitation():
    events = [_e("u", "click", "a", 5.0), _e("u", "click", "b", 9.0), _e("u", "click", "a", 10.0)]
    events.append(_e("u", "impression", "c", 11.0))
    assert recent_clicks(events) == ["a", "b"]
    pairs = sorted(covisit_pairs(("u", None, 3, ["b", "a"])))
    assert pairs == [(("a", "b"), 1), (("b", "a"), 1)]
    assert top_neighbors("a", [("x", 2), ("b", 5), ("c", 2)]) == ("a", [("b", 5), ("c", 2), ("x", 2)])


def _axis(i):
    v = np.zeros(128, dtype=np.float32)
    v[i] = 1.0
    return v


def test_personal_signals_default_blend_with_collaborative_term_by_hand():
    scores = np.array([0.8, 0.4, 0.2])
    velocity = np.zeros(3)
    emb = np.stack([_axis(0), _axis(1), _axis(2)])
    learned = LearnedSignals({"interest": "d"}, _axis(1), 20, {"s2": 4.0, "s3": 2.0}, {}, None)
    profile = with_learned(UserProfile("u"), learned)
    assert profile.clicks == 20 and profile.interest is learned.interest
    ids = ["s1", "s2", "s3"]
    rel, why = personal_signals(scores, velocity, emb, [[], [], []], ["a", "b", "c"], profile, ids, learned)
    # h = 1 → τ = 0, w = 0.6, c = 0.2: rel = 0.2·s/max(s) + 0.6·max(0,cos) + 0.2·collab
    assert rel == pytest.approx([0.2 * 1.0, 0.2 * 0.5 + 0.6 + 0.2 * 1.0, 0.2 * 0.25 + 0.2 * 0.5])
    assert [w["top"] for w in why] == ["freshness", "interest", "collaborative"]
    assert why[1]["covisitation"] == 1.0 and why[2]["covisitation"] == 0.5 and why[0]["model"] == "default"


def test_personal_signals_learned_weights_give_click_probability():
    weights = {
        "authority": 1.0,
        "freshness": 2.0,
        "interest": 3.0,
        "covisitation": 0.0,
        "follows": 0.0,
        "breaking": 0.5,
        "position": -0.5,
        "topic_interest": 0.0,
        "_intercept": -4.0,
    }
    learned = LearnedSignals({"weights": "d"}, _axis(0), 5, {}, {}, weights)
    scores = np.array([0.5 * math.exp(-0.1), 0.25])  # authority 0.5 and 0.5; freshness e^-0.1 and 0.5
    rel, why = personal_signals(
        scores,
        np.zeros(2),
        np.stack([_axis(0), _axis(1)]),
        [[], []],
        ["a", "b"],
        UserProfile("u"),
        ["s1", "s2"],
        learned,
        authority=np.array([0.5, 0.5]),
        breaking=np.array([False, True]),
    )
    logit1 = -4.0 + 0.5 + 2.0 * math.exp(-0.1) + 3.0
    logit2 = -4.0 + 0.5 + 2.0 * 0.5 + 0.5
    assert rel == pytest.approx([1 / (1 + math.exp(-logit1)), 1 / (1 + math.exp(-logit2))])
    assert why[0]["model"] == "learned" and why[0]["top"] == "interest"


def test_ranking_weights_keep_defaults_without_an_interest_signal():
    from newsflow.jobs.ranking_weights import fit_rows as fit_weight_rows

    rng = np.random.default_rng(0)
    rows = []
    for i in range(3000):
        fresh = float(rng.uniform())
        clicked = int(rng.uniform() < 0.05 + 0.3 * fresh)
        rows.append((float(i), [0.5, fresh, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], clicked))
    out = {r["name"]: r for r in fit_weight_rows(rows)}
    assert not out["interest"]["learned"] and "no interest signal" in out["interest"]["reason"]
    assert out["interest"]["weight"] == 0.3 and out["topic_interest"]["weight"] == 0.3
    assert out["_intercept"]["weight"] == -3.0
    for i, r in enumerate(rows):  # the same rows with an interest feature that varies are fitted
        r[1][2] = float(rng.uniform(-1, 1)) if i % 2 else 0.3
    learned = {r["name"]: r for r in fit_weight_rows(rows)}
    assert learned["freshness"]["learned"] and learned["freshness"]["weight"] > 1.0
    assert 0.5 < learned["freshness"]["auc"] <= 1.0


def test_a_fit_no_better_than_the_defaults_on_held_out_rows_keeps_the_defaults():
    from newsflow.core.learning.weights import DEFAULT_WEIGHTS, FEATURES, fit_weights

    rng = np.random.default_rng(1)
    x = rng.random((4000, len(FEATURES)))
    logit = x @ np.array([DEFAULT_WEIGHTS[f] for f in FEATURES])
    y = (logit > np.quantile(logit, 0.9)).astype(int)  # clicks are exactly the defaults' top 10 %
    w = fit_weights(x, y, times=np.arange(4000))
    assert not w.learned and w.default_auc == 1.0 and w.auc <= 1.0
    assert w.weights == DEFAULT_WEIGHTS and "vs the defaults' 1.0000" in w.reason


def test_topic_interests_are_clicks_over_examined_exposure_by_hand():
    from newsflow.core.learning.topic_interest import UNSEEN, position_propensity, topic_interests

    now = 14 * 86400.0  # one half-life after t = 0
    # propensity: CTR at position 1 is half of position 0's
    prop = position_propensity({0: (100, 20), 1: (100, 10), 2: (50, 0)})
    assert prop == {0: 1.0, 1: 0.5, 2: 1e-3}
    events = [
        Event("u", "impression", "a", now, now, 0, None, "feed"),  # tech: exposure 1
        Event("u", "impression", "b", now, now, 1, None, "feed"),  # world+tech: exposure 0.5 each
        Event("u", "impression", "c", 0.0, 0.0, 0, None, "feed"),  # sports, one half-life old: 0.5
        Event("u", "click", "b", now, now, 1, None, "feed"),  # world+tech click, weight 1 + ln 2 (dwell)
        Event("u", "dwell", "b", now, now, None, 30.0, "feed"),
        Event("u", "click", "d", now, now, None, None, "feed"),  # a story without labels: in r only
    ]
    labels = {"a": ("Tech",), "b": ("world", "tech"), "c": ("sports",), "d": ()}
    got = topic_interests(events, labels, now, prop, exploration=0.0)
    cw = 1 + math.log(2)
    r = (cw + 1.0) / (1.0 + 0.5 + 0.5)  # all clicks over all examined exposure
    score = {"tech": (cw + r) / (1.5 + 1), "world": (cw + r) / (0.5 + 1), "sports": r / (0.5 + 1)}
    best = max(score.values())
    assert got == {**{t: round(v / best, 4) for t, v in score.items()}, UNSEEN: round(r / best, 4)}
    # world: one click in little exposure; tech: the same click over three times the exposure; sports:
    # shown, never clicked, so below a label never shown
    assert got["world"] == 1.0 > got["tech"] and got[UNSEEN] > got["sports"]
    # the upper confidence bound adds β·√(m / (E + K)): the less a label was shown, the larger
    ucb = topic_interests(events, labels, now, prop, exploration=0.5)
    bound = {
        "tech": score["tech"] + 0.5 * math.sqrt(score["tech"] / 2.5),
        "world": score["world"] + 0.5 * math.sqrt(score["world"] / 1.5),
        "sports": score["sports"] + 0.5 * math.sqrt(score["sports"] / 1.5),
        UNSEEN: r + 0.5 * math.sqrt(r / 1.0),
    }
    top = max(bound.values())
    assert ucb == {t: round(v / top, 4) for t, v in bound.items()}
    # no clicks: no interests
    assert topic_interests([e for e in events if e.type == "impression"], labels, now, prop) == {}
    # no evidence of a position bias without clicks at position 0
    assert position_propensity({0: (10, 0), 3: (10, 1)}) == {0: 1.0, 3: 1.0}


def test_topic_interests_join_the_interest_term_by_hand():
    learned = LearnedSignals({"history": "d"}, None, 20, {}, {}, None, {"tech": 0.6, "world": 0.2})
    scores = np.array([1.0, 1.0, 1.0])
    emb = np.zeros((3, 128))
    profile = with_learned(UserProfile("u"), learned)
    topics = [["Tech"], ["world"], ["sports"]]
    rel, why = personal_signals(scores, np.zeros(3), emb, topics, ["a", "b", "c"], profile, ["s1", "s2", "s3"], learned)
    # no interest vector: cos = 0; h = 1, w = 0.6: rel = 0.4 · 1 + 0.6 · 0.5 · share / 0.6
    assert rel == pytest.approx([0.4 + 0.3 * 1.0, 0.4 + 0.3 * (0.2 / 0.6), 0.4])
    assert [w["topic_interest"] for w in why] == [1.0, round(0.2 / 0.6, 4), 0.0]


def test_ranking_weights_topic_feature_equals_the_served_topic_interest():
    from newsflow.core.learning.weights import FEATURES
    from newsflow.jobs.nightly_common import StoryInfo
    from newsflow.jobs.ranking_weights import features_of

    stories = {"s1": StoryInfo(0.0, ("Tech",), 0.5, None), "s2": StoryInfo(0.0, ("sports", "World"), 0.5, None)}
    shares = {"tech": 0.6, "world": 0.2}
    ctx = {"lambdas": {}, "interest": {}, "recent": {}, "covisit": {}, "topics": {"u": shares}}
    got = [features_of(("u", (s, 3600.0, 2, 0)), stories, ctx)[0][1] for s in ("s1", "s2")]
    col = FEATURES.index("topic_interest")
    assert [row[col] for row in got] == pytest.approx([1.0, 0.2 / 0.6])
    assert got[0][FEATURES.index("position")] == pytest.approx(math.log(3))
    # serving's reason for the same reader and stories is the same number
    learned = LearnedSignals({"history": "d"}, None, 20, {}, {}, None, shares)
    _, why = personal_signals(
        np.ones(2),
        np.zeros(2),
        np.zeros((2, 128)),
        [["Tech"], ["sports", "World"]],
        ["a", "b"],
        UserProfile("u"),
        ["s1", "s2"],
        learned,
    )
    assert [w["topic_interest"] for w in why] == [1.0, round(0.2 / 0.6, 4)]
    # a reader without topic interests gets 0
    ctx["topics"] = {}
    assert features_of(("u", ("s1", 3600.0, 0, 1)), stories, ctx)[0][1][col] == 0.0


def test_learned_weights_rank_by_the_topic_interest_weight():
    weights = {f: 0.0 for f in ("authority", "freshness", "interest", "covisitation", "follows", "breaking")}
    weights.update(position=-0.5, topic_interest=2.0, _intercept=-3.0)
    learned = LearnedSignals({"weights": "d", "history": "d"}, None, 5, {}, {}, weights, {"tech": 0.5, "world": 0.25})
    rel, why = personal_signals(
        np.ones(3),
        np.zeros(3),
        np.zeros((3, 128)),
        [["world"], ["tech"], ["sports"]],
        ["a", "b", "c"],
        UserProfile("u"),
        ["s1", "s2", "s3"],
        learned,
        authority=np.ones(3),
    )
    expected = [1 / (1 + math.exp(-(-3.0 + 2.0 * x))) for x in (0.5, 1.0, 0.0)]
    assert rel == pytest.approx(expected) and why[1]["model"] == "learned"


def test_ranking_weights_freshness_uses_the_topic_and_type_rate():
    from newsflow.core.learning.weights import FEATURES
    from newsflow.jobs.nightly_common import StoryInfo, _story_row
    from newsflow.jobs.ranking_weights import features_of

    stories = {"a": StoryInfo(0.0, ("tech",), 0.5, None, "live"), "b": StoryInfo(0.0, ("tech",), 0.5, None, "opinion")}
    ctx = {"lambdas": {"tech": 0.05, "tech/live": 0.5}, "interest": {}, "recent": {}, "covisit": {}, "topics": {}}
    fresh = [features_of(("u", (s, 7200.0, 0, 0)), stories, ctx)[0][1][FEATURES.index("freshness")] for s in "ab"]
    assert fresh == pytest.approx([math.exp(-0.5 * 2), math.exp(-0.05 * 2)])
    # snapshots written before the article_type column: the type is derived from URL and headline
    row = {"story_id": "s", "topics": ["Tech"], "url": "https://x.com/opinion/a", "title": "T", "authority": 0.5}
    assert _story_row(("p", row))[1][1].article_type == "opinion"
    assert _story_row(("p", dict(row, article_type="live")))[1][1].article_type == "live"


def test_topic_affinity_gives_unseen_labels_the_readers_prior():
    from newsflow.core.ranking.personalize import topic_affinity

    interests = {"world": 1.0, "sports": 0.2, "*": 0.5}
    assert topic_affinity(["World", "sports"], interests) == 1.0
    assert topic_affinity(["sports"], interests) == 0.2  # shown and skipped: below the prior
    assert topic_affinity(["science"], interests) == 0.5  # never shown: the reader's average
    assert topic_affinity([], interests) == 0.0
    assert topic_affinity(["science"], {"world": 0.6, "tech": 0.2}) == 0.0  # older model: no prior
    assert topic_affinity(["tech"], {"world": 0.6, "tech": 0.2}) == pytest.approx(1 / 3)


def test_ranking_weights_rows_of_each_day_use_the_models_of_the_night_before(tmp_path):
    from newsflow.jobs.interest_vectors import INTEREST_OUTPUT_SCHEMA
    from newsflow.jobs.ranking_weights import WEIGHTS_DAYS, _reader_model, model_files

    root = str(tmp_path)
    for date, label in (("2026-03-01", "tech"), ("2026-03-02", "world")):
        row = {"user_id": "u", "interest": None, "clicks": 3, "recent": ["s1"], "cluster_id": None}
        row["topics"] = [{"label": label, "share": 1.0}]
        write_partition(root, "models/interest", date, pa.Table.from_pylist([row], INTEREST_OUTPUT_SCHEMA))
    config = NightlyConfig("2026-03-03", root, None, "nf")
    assert WEIGHTS_DAYS == 3 and config.dates(WEIGHTS_DAYS) == ["2026-03-01", "2026-03-02", "2026-03-03"]

    def topics(date=config.date):
        rows = [r for f in model_files(config, date)["interest"] for r in pq.read_table(f).to_pylist()]
        return {r["user_id"]: _reader_model(r)[1][2] for r in rows}

    assert topics() == {"u": {"world": 1.0}}  # the night's own events: 03-02's models
    assert topics("2026-03-02") == {"u": {"tech": 1.0}}
    assert model_files(config, "2026-03-01") == {"decay": [], "interest": [], "covisit": []}  # none before day one


def test_keyed_cluster_rounds_give_the_sequential_minhash_clusters():
    import random
    from collections import defaultdict

    from newsflow.core.learning.collaborative import descending_min_labels, minhash_bands, minhash_user_clusters

    rnd = random.Random(5)
    users = {f"u{i:03d}": [f"s{(i % 9) * 3 + k}" for k in range(4)] + [f"s{rnd.randrange(40)}"] for i in range(200)}
    users["lonely"] = ["x1", "x2"]
    users["one"] = ["s1"]  # under two clicks: no bands, no cluster
    assert minhash_bands(users["one"]) == [] and len(minhash_bands(users["lonely"])) == 14
    buckets = defaultdict(list)
    for u, items in users.items():
        for band in minhash_bands(items):
            buckets[band].append(u)
    labels = {u: u for members in buckets.values() for u in members}
    for _ in range(8):  # relabel over the buckets, then jump to the label's label (the job's rounds)
        new = {}
        for members in buckets.values():
            for u, label in descending_min_labels([(u, labels[u]) for u in members]):
                new[u] = min(new.get(u, label), label)
        labels = {u: min(label, new[label]) for u, label in new.items()}
    expected = minhash_user_clusters(users)
    assert labels == expected and "one" not in labels and labels["lonely"] == "lonely"
    assert len(set(expected.values())) < len(expected) / 5  # real clusters formed
    assert descending_min_labels([("b", "b"), ("a", "a"), ("c", "a")]) == [("a", "a"), ("b", "a"), ("c", "a")]


def test_write_partition_transform_replaces_the_partition_with_the_runs_shards(tmp_path):
    import apache_beam as beam

    from newsflow.jobs.nightly_common import WritePartition

    schema = pa.schema([pa.field("k", pa.string()), pa.field("n", pa.int64())])
    root = str(tmp_path)
    write_partition(root, "models/x", "2026-03-01", pa.Table.from_pylist([{"k": "old", "n": 0}], schema))
    stale = tmp_path / "models/x/date=2026-03-01/part-00007.parquet"  # a shard an earlier, wider run left
    pq.write_table(pa.Table.from_pylist([{"k": "stale", "n": -1}], schema), stale)
    rows = [{"k": f"r{i}", "n": i} for i in range(50)]
    with beam.Pipeline() as p:
        _ = p | beam.Create(rows) | WritePartition(root, "models/x", "2026-03-01", schema)
    files = partition_files(root, "models/x", ["2026-03-01"])
    got = sorted((r for f in files for r in pq.read_table(f).to_pylist()), key=lambda r: r["n"])
    assert got == rows and not stale.exists()
    assert sorted(os.listdir(tmp_path / "models/x")) == ["date=2026-03-01"]  # the staging directory is gone
