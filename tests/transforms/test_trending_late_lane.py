"""The trending late lane under streaming delivery (TestStream on the streaming DirectRunner).

Articles arrive 0-3 h after their event time (the watermark is at the arrival time when each one is
added) and out of event-time order; that is within the 6 h late bound, so the streaming job's final
window counts equal the bounded run's over the same articles, none dropped. One article arriving 8 h
after its event time is beyond the bound: it shows in the late lane (a ``late`` dead letter, counted by
``trend_inputs_late``) and in no window.
"""

import json
import random

import apache_beam as beam
import pyarrow.dataset as ds
import pytest
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.runners.direct.direct_runner import BundleBasedDirectRunner
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms.window import TimestampedValue

from newsflow.transforms.trending import (
    DEFAULT_LATE_BOUND_S,
    ComputeTrendingWindows,
    TrendingConfig,
    WriteTrends,
    probe_step_s,
    window_lateness_s,
)

B = 1_699_999_200.0  # a multiple of 300 s
HOUR = 3600.0


def _article(i: int) -> dict:
    return {
        "article_id": f"a{i:03d}",
        "story_id": f"s{i % 4}",
        "topics": ["World" if i % 3 else "Sport"],
        "entities": [f"E{i % 5}"],
    }


def _schedule(n: int, seed: int = 7) -> list[tuple[float, float, dict]]:
    """``(arrival, event time, article)`` for ``n`` articles over 6 h, each arriving 0-3 h late."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        t = B + rng.randrange(0, 6 * 3600)
        out.append((t + rng.randrange(0, 3 * 3600 + 1), t, _article(i)))
    return out


def _final_counts(rows) -> dict:
    """``{(kind, key, window_end): count}`` of the last (largest, panes accumulate) pane of each window."""
    out: dict = {}
    for kind, key, end, count in rows:
        out[(kind, key, end)] = max(count, out.get((kind, key, end), 0))
    return out


def _bounded_counts(items, out: str) -> dict:
    """The bounded run's window counts (through its Parquet output)."""
    with beam.Pipeline(runner=FnApiRunner(), options=PipelineOptions(["--runner", "DirectRunner"])) as p:
        res = (
            p
            | beam.Create([TimestampedValue(a, t) for _, t, a in items])
            | ComputeTrendingWindows(TrendingConfig(write_redis=False), bounded=True)
        )
        _ = res["trends"] | WriteTrends(out, streaming=False)
    table = ds.dataset(out + "/trends", format="parquet", partitioning="hive").to_table()
    return _final_counts((r["kind"], r["key"], r["window_end"].timestamp(), r["count"]) for r in table.to_pylist())


def _stream(items) -> TestStream:
    stream = TestStream()
    for arrival, t, article in sorted(items, key=lambda x: x[0]):
        stream = stream.advance_watermark_to(arrival).add_elements([TimestampedValue(article, t)])
    return stream.advance_watermark_to_infinity()


def test_delivery_up_to_3h_late_and_out_of_order_gives_the_bounded_counts_and_one_late_article(tmp_path):
    items = _schedule(40)
    arrivals = [a for a, _, _ in sorted(items, key=lambda x: x[0])]
    events = [t for a, t, _ in sorted(items, key=lambda x: x[0])]
    assert events != sorted(events)  # delivered out of event-time order
    assert max(a - t for a, t, _ in items) > 2.5 * HOUR  # and up to 3 h behind the watermark
    late_article = _article(999)
    late_t = B - HOUR
    late = (late_t + DEFAULT_LATE_BOUND_S + 2 * HOUR, late_t, late_article)  # 8 h behind: beyond the bound
    assert arrivals[0] < late[0] < arrivals[-1]  # delivered among the others

    expected = _bounded_counts(items, str(tmp_path / "bounded"))
    assert sum(c for (kind, _, _), c in expected.items() if kind == "story") == 40 * 12  # 12 windows each

    opts = PipelineOptions(["--runner", "BundleBasedDirectRunner"])
    opts.view_as(StandardOptions).streaming = True
    p = beam.Pipeline(runner=BundleBasedDirectRunner(), options=opts)
    res = p | _stream([*items, late]) | ComputeTrendingWindows(TrendingConfig(write_redis=False))
    rows = res["trends"] | beam.Map(lambda c: (c.kind, c.key, c.window_end, c.count))

    def matches_bounded(actual):
        got = _final_counts(actual)
        missing = {k: v for k, v in expected.items() if got.get(k) != v}
        extra = set(got) - set(expected)
        assert not missing and not extra, (sorted(missing.items())[:5], sorted(extra)[:5])

    assert_that(rows, matches_bounded, label="FinalCountsEqualBounded")
    dead = res["dead_letter"] | beam.Map(lambda d: (d.step, d.error_type, json.loads(d.payload)["article_id"]))
    assert_that(dead, equal_to([("trending", "late", "a999")]), label="LateLane")
    # the streaming DirectRunner keeps only one bundle's counters under TestStream, so the late lane is
    # checked by its output here (the counter trend_inputs_late counts exactly these dead letters)
    p.run().wait_until_finish()


def test_late_bound_is_validated_and_windows_outlast_it():
    with pytest.raises(ValueError, match="allowed_lateness_seconds"):
        TrendingConfig(allowed_lateness_seconds=-1)
    c = TrendingConfig()
    assert c.allowed_lateness_seconds == DEFAULT_LATE_BOUND_S == 6 * 3600
    # the probe steps a twelfth of the bound (30 min = 6 periods of 300 s); windows stay open two steps more
    assert probe_step_s(c) == 1800 and window_lateness_s(c) == 6 * 3600 + 3600
    assert probe_step_s(TrendingConfig(allowed_lateness_seconds=600)) == 300  # never below one period


def test_after_a_quiet_day_the_gate_catches_up_with_the_watermark():
    """Two days without articles (the probe backs off to firing about a day apart), then an article on
    time and, 9 h of watermark later, one 8.5 h behind it: the on-time one is counted, the late one goes
    to the late lane (it would be dropped silently if the backed-off probe were not pulled back in)."""
    quiet_end = B + 50 * HOUR
    stream = (
        TestStream()
        .advance_watermark_to(B)
        .add_elements([TimestampedValue(_article(0), B)])
        .advance_watermark_to(quiet_end)
        .add_elements([TimestampedValue(_article(1), quiet_end)])
        .advance_watermark_to(quiet_end + 9 * HOUR)
        .add_elements([TimestampedValue(_article(2), quiet_end + 0.5 * HOUR)])
        .advance_watermark_to_infinity()
    )
    opts = PipelineOptions(["--runner", "BundleBasedDirectRunner"])
    opts.view_as(StandardOptions).streaming = True
    with beam.Pipeline(runner=BundleBasedDirectRunner(), options=opts) as p:
        res = p | stream | ComputeTrendingWindows(TrendingConfig(write_redis=False))
        stories = res["trends"] | beam.Filter(lambda c: c.kind == "story") | beam.Map(lambda c: (c.key, c.count))

        def only_the_on_time_ones(actual):
            assert set(actual) == {("s0", 1), ("s1", 1)}, sorted(set(actual))

        assert_that(stories, only_the_on_time_ones, label="Counted")
        dead = res["dead_letter"] | beam.Map(lambda d: (d.error_type, json.loads(d.payload)["article_id"]))
        assert_that(dead, equal_to([("late", "a002")]), label="LateLane")


def test_the_gate_spreads_its_elements_over_several_keys():
    """The gate keys each trend input by a stable hash of its article id (no single hot key): the 40
    articles of the schedule and 1,000 more ids land on many keys, none holding more than a small share."""
    from collections import Counter

    from newsflow.transforms.trending import LATE_GATE_SHARDS, late_gate_key

    for ids in ([a["article_id"] for _, _, a in _schedule(40)], [f"https://example.com/{i}" for i in range(1000)]):
        counts = Counter(late_gate_key(aid) for aid in ids)
        assert len(counts) >= min(len(ids), LATE_GATE_SHARDS) // 2, counts
        assert max(counts.values()) <= max(4, len(ids) // 8), counts
    # stable: the key is a function of the id alone (a CRC-32, not the per-process string hash)
    assert late_gate_key("a001") == late_gate_key("a001") == f"trending-{__import__('zlib').crc32(b'a001') % 16}"
