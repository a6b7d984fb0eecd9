"""AssignStories' streaming path: articles wait per release tick (one Beam key per tick), the ordered step
reads only the tick batches it releases, and the stories are those of one sequential run in
``(event_time, article_id)`` order (TestStream on the BundleBasedDirectRunner, real Redis).

Slow (about 25 s each on a loaded 2-core machine): each test runs the step over 150 real headlines twice or
compares it with a sequential run, the least that spreads them over ten ticks with stories of several sizes."""

from __future__ import annotations

import json
import random
from collections import Counter

import apache_beam as beam
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.runners.portability.fn_api_runner import FnApiRunner

from newsflow.core.embedding import load_text_model
from newsflow.core.stories import StoryAssigner, StoryConfig
from newsflow.core.story_state import InMemoryStoryStore
from newsflow.schemas import StoryArticle
from newsflow.transforms.stories import AssignStories, StoryTransformConfig
from tests.helpers import arrival_stream, corpus_lines, redis_story_of_every_article, streaming_test_pipeline

pytestmark = pytest.mark.slow

CFG = StoryConfig()
B = 1_700_000_040.0  # a multiple of 60: ticks at B + 60 k
N = 150
TICKS = 10  # the articles fall in ten one-minute ticks


def _articles() -> list[StoryArticle]:
    """The first N bundled headlines (title, URL, outlet), spread over the ten ticks (several per second)."""
    out = []
    for i, line in enumerate(corpus_lines(N)):
        doc = json.loads(line)
        t = B + 1 + (i * 37) % (TICKS * 60 - 1)
        out.append(StoryArticle(f"a{i:03d}", float(t), doc["title"], doc["url"], doc["source_domain"]))
    return out


def _sequential(articles) -> dict[str, str]:
    """Article id -> story of one sequential run over the articles in (event time, id) order (in memory)."""
    store = InMemoryStoryStore()
    assigner = StoryAssigner(store, load_text_model(), CFG)
    ids = {a.article_id: assigner.add(a).story_id for a in sorted(articles, key=lambda a: (a.event_time, a.article_id))}
    return {aid: store.resolve(sid) for aid, sid in ids.items()}


def _stream(redis_server, articles, batches) -> dict[str, str]:
    """Runs the step on ``arrival_stream(articles, batches)`` (streaming) on an empty Redis; returns Redis'
    story per article."""
    client, url = redis_server
    client.flushall()
    with streaming_test_pipeline() as p:
        _ = p | arrival_stream(articles, batches, B + TICKS * 60 + 60) | AssignStories(StoryTransformConfig(url))
    return redis_story_of_every_article(client)


def test_articles_released_tick_by_tick_get_the_stories_of_one_sequential_run(redis_server):
    articles = _articles()
    expected = _sequential(articles)
    sizes = sorted(Counter(expected.values()).values())
    assert len(sizes) >= 8 and sizes[-1] < N / 2  # several stories, none holding most articles
    # arrival shuffled within each minute; the watermark passes each tick after its articles arrived
    rnd = random.Random(11)
    batches = []
    for k in range(TICKS):
        idx = [i for i, a in enumerate(articles) if B + 60 * k < a.event_time <= B + 60 * (k + 1)]
        rnd.shuffle(idx)
        batches.append((idx, B + 60 * (k + 1) + 1))
    assert _stream(redis_server, articles, batches) == expected
    # every article arrives before the watermark moves: all ticks become due at once
    order = list(range(N))
    random.Random(3).shuffle(order)
    assert _stream(redis_server, articles, [(order, None)]) == expected


def test_the_ordered_step_reads_each_article_at_most_twice_when_every_tick_is_due_at_once(redis_server):
    """The FnApiRunner (the bounded local runner) reports counters from timer firings (the streaming
    test runner drops them): with the whole input present, every tick fires at once; the first firing
    of the ordered step reads every batch and releases the earliest, the next releases the rest."""
    articles = _articles()
    client, url = redis_server
    p = beam.Pipeline(runner=FnApiRunner())
    order = list(range(N))
    random.Random(5).shuffle(order)
    _ = (
        p
        | beam.Create([articles[i] for i in order])
        | beam.Map(lambda a: beam.window.TimestampedValue(a, a.event_time))
        | AssignStories(StoryTransformConfig(url, ordering="timers"))
    )
    result = p.run()
    result.wait_until_finish()
    counters = Counter()
    for c in result.metrics().query(MetricsFilter())["counters"]:
        counters[c.key.metric.name] += c.committed
    assert redis_story_of_every_article(client) == _sequential(articles)
    first_tick = sum(1 for a in articles if a.event_time <= B + 60)
    assert counters["stories_assigned"] == N
    # the tick step reads and releases each article once; the ordered step releases each once and
    # reads each batch once per firing that finds it (two here: the earliest tick's, then the last one)
    assert counters["story_buffer_released"] == 2 * N
    assert counters["story_buffer_read"] == 3 * N - first_tick
