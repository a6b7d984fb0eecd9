"""Story clustering in event-time order, independent of how the runner bundles elements.

:class:`AssignStories` runs in three parts.

1. ``VectorizeArticles`` (parallel, no key): each article's story vector (headline + URL slug
   TF-IDF, :func:`newsflow.core.stories.story_vector`) is computed on any worker and travels with the
   article, so the ordered step does not tokenize or weight text.
2. Buffering by release tick (streaming, ``ordering="timers"``): each article is keyed by its
   release tick (``"<shard_key>/<tick index>"``, the next multiple of ``release_granularity_s`` at or
   after its event time): one Beam key per tick, spread over workers. A tick's bag holds only that
   tick's articles and its event-time timer (at the tick) releases all of them sorted by
   ``(event_time, article_id)`` as one batch. Bounded runs (``ordering="sort"``) group the whole
   input instead (one GroupByKey, then a sort).
3. The ordered commit, on the single ``shard_key``: :class:`newsflow.core.stories.StoryAssigner`
   (state in Redis, :class:`RedisStoryStore`) over the batches in tick order. A batch reaches it
   once the watermark passed its tick, so its state holds due batches only, never articles of later
   ticks; a firing releases every batch at or before its time and re-arms at the latest one left
   (counters ``story_buffer_read`` and ``story_buffer_released``, both steps summed: equal when the
   watermark passes the ticks one by one; a batch is read once more when every tick is due at once).

Because the watermark only passes T once every element with event time <= T has arrived (bar late
data), the clusterer sees the same sequence whatever the arrival order or bundling: a bounded replay
on the DirectRunner gives the same stories as streaming. Late elements (behind the watermark) go out
in a batch of their own, released in its sorted position among what the ordered step holds then;
they are counted (``stories_late``).

Why the commit is one key. Every decision (join the best story, merge converging ones) reads the
stories that earlier articles built, through any shared term or entity, and a story's terms reach
far: on the shared headlines every article is linked to all but a handful of others by a chain of
stories sharing a term within the time window, so no partition of the articles (by term, entity or
bucket) runs independently and still gives the stories of one ordered run. The step therefore keeps
one ordered writer and moves everything that does not read story state out of it.

Replays are idempotent (the store remembers each article id), so re-delivered bundles do not
double count. A merge re-sends the retired story's recent articles to trending under the survivor
(``counts_from`` = the merge time: windows ending after it count them there).

Continuous runs. With ``StoryTransformConfig.input_log`` (``newsflow run-continuous``), the step is
:class:`newsflow.transforms.stories_continuous.ContinuousAssignFn`: each bounded run rewinds the story
state to a checkpoint at or before its earliest article and re-clusters the logged articles after it
together with its own, so that any sequence of runs leaves the stories of one bounded run over all their
files (see that module for the window, the trending context and the late lane).

Writes are batched: a released bundle's assignments are read with one ``HMGET`` and
its steps written in transactions of ``write_batch`` articles (each touched story once per
transaction); a crash leaves the state after a prefix of the ordered sequence, which the rerun
completes (:class:`newsflow.storage.stories.RedisStoryStore`, "Batched writes").
"""

from __future__ import annotations

import math
import pickle
import typing
from dataclasses import dataclass

import apache_beam as beam
from apache_beam import pvalue
from apache_beam.coders import BytesCoder, FloatCoder, StrUtf8Coder, TupleCoder, VarIntCoder
from apache_beam.metrics import Metrics
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import BagStateSpec, ReadModifyWriteStateSpec, TimerSpec, on_timer
from apache_beam.utils.timestamp import Timestamp

from newsflow.core.stories import StoryConfig
from newsflow.schemas import StoryAssignment
from newsflow.storage.keys import Keys
from newsflow.transforms.deadletter import DEAD_LETTER_TAG, dead_letter

METRICS_NAMESPACE = "newsflow.core.stories"
TREND_INPUT_TAG = "trend_input"


@dataclass(frozen=True)
class StoryTransformConfig:
    """Configuration of :class:`AssignStories`.

    Attributes:
      redis_url: Redis holding the story state (``None``: ``$REDIS_URL`` or the embedded server).
      stories: clustering thresholds.
      text_model_path: text model file (``None``: the default, built when missing).
      shard_key: key of the ordered commit (every article's decision goes through it, see "Why the
        commit is one key" in the module docstring); the streaming path's release-tick keys are
        ``"<shard_key>/<tick index>"``.
      ordering: ``"timers"`` (streaming: buffer in state, release on event-time timers) or
        ``"sort"`` (bounded replays: one GroupByKey then a sort by ``(event_time, article_id)``;
        the whole input is present, so the order cannot depend on bundling, and it avoids
        re-reading the buffer at every timer firing).
      release_granularity_s: timers are set to the next multiple of this many seconds after an
        article's event time, so articles of the same minute are released (sorted) together by
        one firing instead of one firing each.
      key_prefix: namespace of the Redis keys (:class:`newsflow.storage.keys.Keys`).
      write_batch: article steps per Redis transaction (``RedisStoryStore(write_batch=...)``): a
        released bundle is written in transactions of this many articles, the last one when the
        writer lease is released, and its stored assignments are read with one ``HMGET``.
      merged_trend_horizon_s: when a step merges stories, the retired story's articles from this
        many seconds before the merge are re-sent to trending under the survivor (must be at least
        the trending window; older ones fall in no window that ends after the merge).
      input_log: continuous local mode (``ordering="sort"`` only): local directory of the story input
        log and its checkpoints (:mod:`newsflow.transforms.stories_continuous`): after any sequence of
        runs, the stories of one bounded run over all their input. ``None``: each run adds to the
        stories in Redis.
      trend_window_s: with ``input_log``: the trending window, seconds (the job's ``--trending_window_s``):
        each run re-sends the logged articles of one window before its first article to trending.
      late_bound_s: with ``input_log``: articles ordered more than this many seconds before the newest
        logged one go to the late lane (``stories_late_lane``) instead of a rewind.
      checkpoint_s: with ``input_log``: event-time bucket of the log files and of the checkpoints, seconds
        (a run rewinds at most one bucket before its earliest article).
    """

    redis_url: str | None = None
    stories: StoryConfig = StoryConfig()
    text_model_path: str | None = None
    shard_key: str = "stories"
    ordering: str = "timers"
    release_granularity_s: float = 60.0
    key_prefix: str = "nf"
    write_batch: int = 256
    merged_trend_horizon_s: float = 86400.0
    input_log: str | None = None
    trend_window_s: float = 3600.0
    late_bound_s: float = 86400.0
    checkpoint_s: float = 3600.0

    def __post_init__(self):
        Keys(self.key_prefix)  # validates the prefix
        if not isinstance(self.write_batch, int) or self.write_batch < 1:
            raise ValueError(f"write_batch must be an integer >= 1, got {self.write_batch!r}")
        if self.ordering not in ("timers", "sort"):
            raise ValueError(f"ordering must be 'timers' or 'sort', got {self.ordering!r}")
        if not self.merged_trend_horizon_s > 0:
            raise ValueError(f"merged_trend_horizon_s must be > 0, got {self.merged_trend_horizon_s}")
        if self.release_granularity_s <= 0:
            raise ValueError(f"release_granularity_s must be > 0, got {self.release_granularity_s}")
        if not (self.trend_window_s > 0 and self.late_bound_s > 0 and self.checkpoint_s > 0):
            raise ValueError(
                "trend_window_s, late_bound_s and checkpoint_s must be > 0, got "
                f"{self.trend_window_s}, {self.late_bound_s}, {self.checkpoint_s}"
            )
        if self.input_log is not None and self.ordering != "sort":
            raise ValueError(f"input_log needs ordering='sort' (bounded runs), got ordering={self.ordering!r}")


def _init_metrics(fn) -> None:
    fn.assigned = Metrics.counter(METRICS_NAMESPACE, "stories_assigned")
    fn.created = Metrics.counter(METRICS_NAMESPACE, "stories_created")
    fn.merged = Metrics.counter(METRICS_NAMESPACE, "stories_merged")
    fn.replayed = Metrics.counter(METRICS_NAMESPACE, "stories_replayed")
    fn.late = Metrics.counter(METRICS_NAMESPACE, "stories_late")
    fn.dead = Metrics.counter(METRICS_NAMESPACE, "stories_dead_lettered")
    # elements per key of the step (one update per key group): the job summary's story_keys / story_max_key_share
    fn.key_elements = Metrics.distribution(METRICS_NAMESPACE, "story_key_elements")
    fn.reclustered = Metrics.counter(METRICS_NAMESPACE, "stories_reclustered")
    fn.recluster_refused = Metrics.counter(METRICS_NAMESPACE, "stories_recluster_refused")


class _AssignFnBase(beam.DoFn):
    """Shared part of the story-assignment DoFns: metrics, the clusterer (opened in ``setup``)."""

    def __init__(self, config: StoryTransformConfig):
        self._config = config
        _init_metrics(self)

    def setup(self):
        from newsflow.core.embedding import load_text_model
        from newsflow.core.stories import StoryAssigner
        from newsflow.runtime.redis_conn import connect
        from newsflow.storage.stories import RedisStoryStore

        # One ordered writer (a single shard key) at a time, by the store's writer lease: the store may
        # cache live stories in process, and drops the cache when another writer took a turn in between.
        self._store = RedisStoryStore(
            connect(self._config.redis_url),
            cache=True,
            keys=Keys(self._config.key_prefix),
            write_batch=self._config.write_batch,
        )
        self._clusterer = StoryAssigner(
            self._store, load_text_model(self._config.text_model_path), self._config.stories
        )

    def _current_clusters(self, articles: list) -> list:
        """The articles with their near-duplicate group id as Redis holds it now (``cluster_id`` of ``Keys.article``).

        A group id handed downstream can change afterwards (an earlier copy arriving late renames the
        group, a bridging copy merges two): re-reading it when the article is released, with the
        authority of an original or a copy that goes with it, keeps the story's independent-report
        count, authority and representative a function of the groups, not of the arrival order.
        Returns one entry per input article: ``None`` for a superseded version of a re-slugged article.
        """
        from newsflow.storage.groups import current_clusters, resolve_revisions

        out = []
        keys = Keys(self._config.key_prefix)
        # a re-slugged article's versions (newsflow/core/urls.py rule 5) are one article, one report: the newest
        # version under the stored id; the others become None (skipped by the callers)
        resolved = resolve_revisions(self._store.r, keys, articles)
        articles = [a for a in resolved if a is not None]
        for i in range(0, len(articles), 1000):
            chunk = articles[i : i + 1000]
            current = current_clusters(self._store.r, keys, [a.article_id for a in chunk])
            for a, c in zip(chunk, current, strict=True):
                out.append(a.with_cluster(c) if c is not None else a)
        it = iter(out)
        return [None if a is None else next(it) for a in resolved]

    def _assign(self, article, t, vector=None):
        """Runs the clusterer on one article (``vector``: its story vector from :class:`_VectorizeFn`, or
        ``None`` to compute it); yields the assignment or a dead letter."""
        try:
            result: StoryAssignment = self._clusterer.add(article, vector)
        except ValueError as e:  # permanent: bad record (refused before any state changed)
            self.dead.inc()
            yield pvalue.TaggedOutput(
                DEAD_LETTER_TAG,
                dead_letter("stories", "invalid_article", str(e), repr(article).encode("utf-8"), article.url),
            )
            return
        except Exception:
            self._store.invalidate()  # a half-applied step: the retry must start from Redis state
            raise
        if result.duplicate:
            self.replayed.inc()
        else:
            self.assigned.inc()
        if result.created:
            self.created.inc()
        if result.merged:
            self.merged.inc(len(result.merged))
        yield beam.window.TimestampedValue(result, t)
        # A replayed article (a rerun after a crash, a concurrent run, a retried bundle) is sent to trending
        # again, under the story it was first assigned to (as a clean run sent it): trending counts distinct
        # article ids per window, so a re-send never double counts, and without it a rerun would rewrite
        # windows with the counts of the new articles only.
        story_id = result.story_id
        if result.duplicate:
            story_id = self._store.assigned_story(article.article_id) or story_id
        trend = {
            "article_id": article.article_id,
            "story_id": story_id,
            "event_time": t,
            "topics": [label for label, _ in article.topics],
            "entities": [text for _, text, _ in article.entities],
        }
        yield pvalue.TaggedOutput(TREND_INPUT_TAG, beam.window.TimestampedValue(trend, t))
        # A merge moves the retired story's articles to the survivor: they are re-sent under it (no topics or
        # entities: those were counted already), counted only by windows ending after the merge. A replay of
        # the article that made the merge re-sends the same (the store answers from the merge records).
        if result.merged or result.duplicate:
            for aid, into, mt, when in self._store.merged_members(
                article.article_id, self._config.merged_trend_horizon_s
            ):
                moved = {
                    "article_id": aid,
                    "story_id": into,
                    "event_time": mt,
                    "topics": [],
                    "entities": [],
                    "counts_from": when,
                }
                yield pvalue.TaggedOutput(TREND_INPUT_TAG, beam.window.TimestampedValue(moved, mt))


class _VectorizeFn(beam.DoFn):
    """StoryArticle -> ``(StoryArticle, its story vector as sorted (term, weight) pairs)``, in parallel.

    The state-independent part of an article's step (tokenizing, IDF weighting, the cross-language
    form: :func:`newsflow.core.stories.story_vector`) runs here, on any worker, keyed by nothing, so the
    ordered step only looks up and scores candidates. ``None`` instead of the pairs when the vector
    cannot be computed (the ordered step then computes it, and dead-letters the article if that fails).
    """

    def __init__(self, config: StoryTransformConfig):
        self._config = config

    def setup(self):
        from newsflow.core.embedding import load_text_model

        self._model = load_text_model(self._config.text_model_path)

    def process(self, article):
        from newsflow.core.stories import story_vector

        try:
            vec = tuple(sorted(story_vector(self._model, article, self._config.stories).items()))
        except (TypeError, ValueError):
            vec = None
        yield article, vec


def _vector_key(article) -> tuple:
    return article.article_id, article.title, article.url, article.language


def _vectors(pairs) -> dict:
    """``(article, vector pairs)`` -> {(id, title, url, language): vector dict} (what ``_assign`` looks up)."""
    return {_vector_key(a): dict(v) for a, v in pairs if v is not None}


def _release_tick(t: float, g: float) -> int:
    """Index of the release tick of event time ``t`` (UTC epoch s): the tick is at ``index * g`` seconds.
    A non-finite time gets tick 0 (released first; the clusterer dead-letters the article)."""
    return math.ceil(t / g) if math.isfinite(t) else 0


class _CollectTickFn(beam.DoFn):
    """(``"<shard key>/<tick index>"``, (event time, article id, pickled (article, vector))) -> (shard key, tick batch).

    State: ``buffer`` (bag of the key's entries: every article of one release tick, so each firing
    reads exactly what it releases). The watermark timer is set to the tick's time; it emits the
    batch ``(tick time, sorted entries)`` at the tick time and clears the bag. An article arriving
    after its tick fired (late) sets the timer again and goes out in a batch of its own.
    """

    BUFFER = BagStateSpec("buffer", TupleCoder((FloatCoder(), StrUtf8Coder(), BytesCoder())))
    FLUSH = TimerSpec("flush", TimeDomain.WATERMARK)

    def __init__(self, config: StoryTransformConfig):
        self._config = config
        self.read = Metrics.counter(METRICS_NAMESPACE, "story_buffer_read")
        self.released = Metrics.counter(METRICS_NAMESPACE, "story_buffer_released")

    def process(self, element, buffer=beam.DoFn.StateParam(BUFFER), flush=beam.DoFn.TimerParam(FLUSH)):
        key, entry = element
        buffer.add(entry)
        tick = int(key.rsplit("/", 1)[1])
        flush.set(Timestamp.of(tick * self._config.release_granularity_s))

    @on_timer(FLUSH)
    def on_flush(self, fire=beam.DoFn.TimestampParam, buffer=beam.DoFn.StateParam(BUFFER)):
        items = sorted(buffer.read(), key=lambda x: (x[0], x[1]))
        buffer.clear()
        self.read.inc(len(items))
        self.released.inc(len(items))
        if items:
            yield beam.window.TimestampedValue((self._config.shard_key, (float(fire), items)), fire)


class _OrderedAssignFn(_AssignFnBase):
    """(shard key, tick batch) -> StoryAssignment, released in event-time order.

    State: ``buffer`` (bag of ``(tick time, article count, pickled batch)``: the tick batches of
    :class:`_CollectTickFn` not yet released) and ``timer_at`` (event time the flush timer is set to,
    or absent). A batch arrives once the watermark passed its tick, so the bag holds only batches of
    ticks the watermark has (nearly) reached, never articles of later ticks. The timer is set to the
    earliest buffered tick; a firing releases every batch at or before its time, sorted by
    ``(event_time, article_id)``, and re-arms at the latest tick left. A batch that waits is read again
    by each firing before its release: none while the watermark passes the ticks one by one, one when
    they all became due at once, more only when batches of earlier ticks keep arriving meanwhile
    (late data) (``story_buffer_read`` vs ``story_buffer_released``).
    Both are empty once the watermark passes the last article.
    """

    BUFFER = BagStateSpec("buffer", TupleCoder((FloatCoder(), VarIntCoder(), BytesCoder())))
    TIMER_AT = ReadModifyWriteStateSpec("timer_at", FloatCoder())
    FLUSH = TimerSpec("flush", TimeDomain.WATERMARK)

    def __init__(self, config: StoryTransformConfig):
        super().__init__(config)
        self.read = Metrics.counter(METRICS_NAMESPACE, "story_buffer_read")
        self.released = Metrics.counter(METRICS_NAMESPACE, "story_buffer_released")

    def process(
        self,
        element,
        buffer=beam.DoFn.StateParam(BUFFER),
        timer_at=beam.DoFn.StateParam(TIMER_AT),
        flush=beam.DoFn.TimerParam(FLUSH),
    ):
        _, (tick, items) = element
        buffer.add((tick, len(items), pickle.dumps(items, protocol=pickle.HIGHEST_PROTOCOL)))
        current = timer_at.read()
        if current is None or tick < current:
            flush.set(Timestamp.of(tick))
            timer_at.write(tick)

    @on_timer(FLUSH)
    def on_flush(
        self,
        fire=beam.DoFn.TimestampParam,
        buffer=beam.DoFn.StateParam(BUFFER),
        timer_at=beam.DoFn.StateParam(TIMER_AT),
        flush=beam.DoFn.TimerParam(FLUSH),
    ):
        limit = float(fire)
        batches = list(buffer.read())
        self.read.inc(sum(n for _, n, _ in batches))
        ready = [b for b in batches if b[0] <= limit]
        rest = [b for b in batches if b[0] > limit]
        if rest:
            buffer.clear()
            for b in rest:
                buffer.add(b)
            last = max(b[0] for b in rest)
            flush.set(Timestamp.of(last))
            timer_at.write(last)
        else:
            buffer.clear()
            timer_at.clear()
        if not ready:
            return
        entries = sorted((x for _, _, payload in ready for x in pickle.loads(payload)), key=lambda x: (x[0], x[1]))
        self.released.inc(len(entries))
        pairs = [pickle.loads(payload) for _, _, payload in entries]
        vectors = _vectors(pairs)
        articles = self._current_clusters([a for a, _ in pairs])
        times = [t for (t, _, _), a in zip(entries, articles, strict=True) if a is not None]
        articles = [a for a in articles if a is not None]
        with self._store.writer_lease():  # concurrent writers take turns (RedisStoryStore.writer_lease)
            self._store.prefetch_assigned(a.article_id for a in articles)
            for t, article in zip(times, articles, strict=True):
                if t < limit - self._config.release_granularity_s:
                    self.late.inc()
                yield from self._assign(article, t, vectors.get(_vector_key(article)))


class _SortedAssignFn(_AssignFnBase):
    """(shard key, all StoryArticles) -> StoryAssignments in ``(event_time, article_id)`` order.

    For bounded input after a GroupByKey: every article is in the group, so sorting gives the
    same sequence whatever the file order or bundling.
    """

    def process(self, element):
        _, pairs = element
        pairs = list(pairs)
        vectors = _vectors(pairs)
        articles = [a for a, _ in pairs]
        self.key_elements.update(len(articles))
        ordered = self._current_clusters(sorted(articles, key=lambda a: (float(a.event_time), a.article_id)))
        ordered = [a for a in ordered if a is not None]  # superseded versions of re-slugged articles
        with self._store.writer_lease():  # concurrent writers take turns (RedisStoryStore.writer_lease)
            self._store.prefetch_assigned(a.article_id for a in ordered)
            for article in ordered:
                yield from self._assign(article, float(article.event_time), vectors.get(_vector_key(article)))


class AssignStories(beam.PTransform):
    """StoryArticle -> StoryAssignment (plus dead letters), in event-time order; state in Redis.

    Returns ``{"main": assignments, "dead_letter": dead letters, "trend_input": dicts}``; the
    trend inputs (``article_id``, ``story_id``, ``event_time``, topic labels, entity texts; one per
    newly assigned article, at its event time) feed ``newsflow.transforms.trending.ComputeTrendingWindows``.
    Story serving records are written to ``Keys.story(story_id)`` by the store as a side effect.
    """

    def __init__(self, config: StoryTransformConfig = StoryTransformConfig()):
        super().__init__()
        self._config = config

    def expand(self, pcoll):
        cfg = self._config
        key = cfg.shard_key
        if cfg.ordering == "sort" and cfg.input_log:
            # run-continuous: the ordered step re-clusters from a checkpoint (stories_continuous), vectors inline
            from newsflow.transforms.stories_continuous import ContinuousAssignFn

            keyed = pcoll | "KeyToShard" >> beam.Map(lambda a: (key, a)) | "CollectBoundedInput" >> beam.GroupByKey()
            out = keyed | "AssignInEventTimeOrder" >> beam.ParDo(ContinuousAssignFn(cfg)).with_outputs(
                DEAD_LETTER_TAG, TREND_INPUT_TAG, main="main"
            )
            return {"main": out.main, DEAD_LETTER_TAG: out[DEAD_LETTER_TAG], TREND_INPUT_TAG: out[TREND_INPUT_TAG]}
        prepared = pcoll | "VectorizeArticles" >> beam.ParDo(_VectorizeFn(cfg))
        if cfg.ordering == "sort":
            keyed = prepared | "KeyToShard" >> beam.Map(lambda p: (key, p)) | "CollectBoundedInput" >> beam.GroupByKey()
            fn = _SortedAssignFn(cfg)
        else:
            g = cfg.release_granularity_s
            keyed = (
                prepared
                | "KeyByReleaseTick"
                >> beam.Map(
                    lambda p: (
                        f"{key}/{_release_tick(float(p[0].event_time), g)}",
                        (float(p[0].event_time), p[0].article_id, pickle.dumps(p, protocol=pickle.HIGHEST_PROTOCOL)),
                    )
                ).with_output_types(tuple[str, tuple[float, str, bytes]])
                # no Reshuffle after it: on the streaming DirectRunner a GroupByKey drops what the tick timers emit
                # once the watermark is at the end of time (a drain); distributed runners shuffle to the next key
                | "CollectReleaseTicks" >> beam.ParDo(_CollectTickFn(cfg)).with_output_types(tuple[str, typing.Any])
            )
            fn = _OrderedAssignFn(cfg)
        out = keyed | "AssignInEventTimeOrder" >> beam.ParDo(fn).with_outputs(
            DEAD_LETTER_TAG, TREND_INPUT_TAG, main="main"
        )
        return {"main": out.main, DEAD_LETTER_TAG: out[DEAD_LETTER_TAG], TREND_INPUT_TAG: out[TREND_INPUT_TAG]}
