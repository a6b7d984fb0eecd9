"""AssignStories' streaming path: articles wait per release tick (one Beam key per tick), then the ordered
step releases the tick batches; the stories are those of one sequential run in ``(event_time, article_id)``
order, whether the watermark passes the ticks one by one or all at once (TestStream on the
BundleBasedDirectRunner, real Redis).

Slow (about 25 s on a loaded 2-core machine): the step runs twice over 150 real headlines, the least that
spreads them over ten ticks with stories of several sizes."""

from __future__ import annotations

import json
import pickle
import random
from collections import Counter

import pytest
from apache_beam.metrics.execution import MetricsContainer, MetricsEnvironment
from apache_beam.metrics.metricbase import MetricName
from apache_beam.runners.worker import statesampler
from apache_beam.transforms.window import TimestampedValue
from apache_beam.utils.counters import CounterFactory
from apache_beam.utils.timestamp import Timestamp

from newsflow.core.embedding import load_text_model
from newsflow.core.stories import StoryAssigner, StoryConfig
from newsflow.core.story_state import InMemoryStoryStore
from newsflow.schemas import StoryArticle
from newsflow.transforms.stories import METRICS_NAMESPACE, AssignStories, StoryTransformConfig
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


class _Bag:
    """The bag state a runner hands a DoFn (read, add, clear), held in a list."""

    def __init__(self):
        self.items = []

    def read(self):
        return list(self.items)

    def add(self, x):
        self.items.append(x)

    def clear(self):
        self.items = []


class _Cell(_Bag):
    """A read-modify-write state cell."""

    def read(self):
        return self.items[0] if self.items else None

    def write(self, x):
        self.items = [x]


class _Timer:
    def __init__(self):
        self.at = None

    def set(self, ts):
        self.at = float(ts)


def _entries(articles) -> dict[float, list]:
    """Tick time -> the ``_CollectTickFn`` entries of the articles due at it, as that step sorts them."""
    from newsflow.transforms.stories import _release_tick

    out: dict[float, list] = {}
    for a in articles:
        entry = (a.event_time, a.article_id, pickle.dumps((a, None)))
        out.setdefault(_release_tick(a.event_time, 60.0) * 60.0, []).append(entry)
    return {t: sorted(v) for t, v in sorted(out.items())}


def _counted(run) -> dict[str, int]:
    """Runs ``run()`` inside a Beam metrics container (as a worker does); returns the buffer counters."""
    sampler = statesampler.StateSampler("", CounterFactory())
    statesampler.set_current_tracker(sampler)
    state = sampler.scoped_state("step", "process", metrics_container=MetricsContainer("step"))
    sampler.start()
    try:
        with state:
            run()
            container = MetricsEnvironment.current_container()
            return {
                name: container.get_counter(MetricName(METRICS_NAMESPACE, name)).get_cumulative()
                for name in ("story_buffer_read", "story_buffer_released")
            }
    finally:
        sampler.stop()


def test_each_firing_reads_only_the_batches_it_releases_while_the_watermark_passes_tick_by_tick(redis_server):
    from newsflow.transforms.stories import _CollectTickFn, _OrderedAssignFn

    _, url = redis_server
    articles = _articles()
    ticks = _entries(articles)
    cfg = StoryTransformConfig(url)
    collect, ordered = _CollectTickFn(cfg), _OrderedAssignFn(cfg)
    ordered.setup()
    out = []

    def steady():
        bag, state, timer = _Bag(), _Cell(), _Timer()
        for tick, entries in ticks.items():
            tick_bag = _Bag()
            for e in entries:
                collect.process((f"stories/{int(tick // 60)}", e), tick_bag, _Timer())
            (batch,) = collect.on_flush(Timestamp.of(tick), tick_bag)
            ordered.process(batch.value, bag, state, timer)
            assert timer.at == tick
            out.extend(ordered.on_flush(Timestamp.of(tick), bag, state, timer))
            assert bag.items == [] and state.read() is None

    counters = _counted(steady)
    assert counters == {"story_buffer_read": 2 * N, "story_buffer_released": 2 * N}
    assigned = {r.value.article_id for r in out if isinstance(r, TimestampedValue)}
    assert assigned == {a.article_id for a in articles}


def test_when_every_tick_is_due_at_once_a_batch_is_read_by_at_most_two_firings(redis_server):
    from newsflow.transforms.stories import _OrderedAssignFn

    _, url = redis_server
    ticks = _entries(_articles())
    ordered = _OrderedAssignFn(StoryTransformConfig(url))
    ordered.setup()
    first, last = min(ticks), max(ticks)

    def jump():
        bag, state, timer = _Bag(), _Cell(), _Timer()
        for tick in reversed(ticks):  # any arrival order: the timer goes to the earliest tick
            ordered.process(("stories", (tick, ticks[tick])), bag, state, timer)
        assert timer.at == first
        list(ordered.on_flush(Timestamp.of(first), bag, state, timer))
        assert timer.at == last and len(bag.items) == len(ticks) - 1  # re-armed at the latest tick left
        list(ordered.on_flush(Timestamp.of(last), bag, state, timer))
        assert bag.items == [] and state.read() is None

    counters = _counted(jump)
    assert counters == {"story_buffer_read": 2 * N - len(ticks[first]), "story_buffer_released": N}
