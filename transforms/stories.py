"""Story clustering in event-time order, independent of how the runner bundles elements.

:class:`AssignStories` keys every article to one shard key, and a stateful DoFn buffers
articles in a bag and releases them on an event-time timer: when the watermark passes time T,
every buffered article with event time <= T is sorted by ``(event_time, article_id)`` and fed to
:class:`newsflow.core.stories.StoryAssigner` (state in Redis, :class:`RedisStoryStore`). Because the
watermark only passes T once every element with event time <= T has arrived (bar late data), the
clusterer sees the same sequence whatever the arrival order or bundling: a bounded replay on the
DirectRunner gives the same stories as streaming. This is the pattern of Beam's ordered-processing
examples (buffer + event-time timer). Late elements (behind the watermark) are released at the
next timer firing in their sorted position among what is buffered then; they are counted
(``stories_late``).

Replays are idempotent (the store remembers each article id), so re-delivered bundles do not
double count. A merge re-sends the retired story's recent articles to trending under the survivor
(``counts_from`` = the merge time: windows ending after it count them there).

Continuous runs. ``newsflow run-continuous`` runs the job as bounded runs over the landing files as
they arrive, and a run's files may hold articles older than ones an earlier run assigned (a feed's
older items, a slow source). Appending them would cluster the union in arrival order, not event-time
order. With ``StoryTransformConfig.input_log`` each run instead clusters every logged input together
with its own, in ``(event_time, article_id)`` order, from an empty story state
(:meth:`RedisStoryStore.clear` under the writer lease), and then logs its own inputs
(:mod:`newsflow.storage.story_inputs`): the story state after any sequence of runs is the one a single
bounded run over all their files builds. Each run re-sends every article (and every merge's moved
articles) to trending, as that bounded run does, after deleting the story trending windows and the
breaking set (:func:`newsflow.storage.trends.clear_story_trends`), so that no count stays under a story
id the re-clustering retired. Cost: each run clusters every logged article again,
O(articles since the retention cutoff) per run, and the log keeps one line per article on disk. When
Redis holds assignments of articles the log lacks (stories written by another job on the same key
prefix, or a lost log), the run does not clear them: it adds its own articles as without a log and
counts ``stories_recluster_refused``.

Writes are batched: a released bundle's assignments are read with one ``HMGET`` and
its steps written in transactions of ``write_batch`` articles (each touched story once per
transaction); a crash leaves the state after a prefix of the ordered sequence, which the rerun
completes (:class:`newsflow.storage.stories.RedisStoryStore`, "Batched writes").
"""

from __future__ import annotations

import math
import pickle
from dataclasses import dataclass

import apache_beam as beam
from apache_beam import pvalue
from apache_beam.coders import BytesCoder, FloatCoder, StrUtf8Coder, TupleCoder
from apache_beam.metrics import Metrics
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import BagStateSpec, ReadModifyWriteStateSpec, TimerSpec, on_timer
from apache_beam.utils.timestamp import Timestamp

from newsflow.core.stories import StoryConfig
from newsflow.schemas import StoryAssignment
from newsflow.storage.keys import Keys
from newsflow.storage.trends import clear_story_trends
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
      shard_key: key of the single ordering shard (all articles share it: story clustering
        compares each article with every live story, so one ordered stream is the simple, exact
        choice; it handles thousands of articles per second, far above the crawl rate).
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
        log (:class:`newsflow.storage.story_inputs.StoryInputLog`). Each run clusters the logged
        inputs together with its own from an empty story state, then logs its own: after any
        sequence of runs, the stories of one bounded run over all their input (see "Continuous
        runs" in the module docstring). ``None``: each run adds to the stories in Redis.
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

    def _assign(self, article, t):
        """Runs the clusterer on one article; yields the assignment or a dead letter."""
        try:
            result: StoryAssignment = self._clusterer.add(article)
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


class _OrderedAssignFn(_AssignFnBase):
    """(shard key, StoryArticle) -> StoryAssignment, released in event-time order.

    State: ``buffer`` (bag of ``(event_time, article_id, pickled StoryArticle)`` not yet released,
    with a deterministic ``TupleCoder``) and ``timer_at`` (event time the flush timer is set to, or
    absent). The flush timer is set to
    the release tick (next multiple of ``release_granularity_s``) of the earliest buffered article
    and fires when the watermark passes it; it releases everything at or before the tick, sorted by
    ``(event_time, article_id)``, clears the bag and re-adds what is left, then re-arms itself for
    the earliest remaining article. Both are empty once the watermark passes the last article.
    """

    BUFFER = BagStateSpec("buffer", TupleCoder((FloatCoder(), StrUtf8Coder(), BytesCoder())))
    TIMER_AT = ReadModifyWriteStateSpec("timer_at", FloatCoder())
    FLUSH = TimerSpec("flush", TimeDomain.WATERMARK)

    def process(
        self,
        element,
        buffer=beam.DoFn.StateParam(BUFFER),
        timer_at=beam.DoFn.StateParam(TIMER_AT),
        flush=beam.DoFn.TimerParam(FLUSH),
    ):
        _, article = element
        t = float(article.event_time)
        # The bag holds (time, id, pickled article): three objects per entry, cheap for the
        # runner's state cache to size, whatever the embedding length.
        buffer.add((t, article.article_id, pickle.dumps(article, protocol=pickle.HIGHEST_PROTOCOL)))
        g = self._config.release_granularity_s
        tick = math.ceil(t / g) * g
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
        items = sorted(buffer.read(), key=lambda x: (x[0], x[1]))
        ready = [x for x in items if x[0] <= limit]
        rest = [x for x in items if x[0] > limit]
        buffer.clear()
        for x in rest:
            buffer.add(x)
        if rest:
            g = self._config.release_granularity_s
            tick = math.ceil(rest[0][0] / g) * g
            flush.set(Timestamp.of(tick))
            timer_at.write(tick)
        else:
            timer_at.clear()
        if not ready:
            return
        articles = self._current_clusters([pickle.loads(payload) for _, _, payload in ready])
        ready = [x for x, a in zip(ready, articles, strict=True) if a is not None]
        articles = [a for a in articles if a is not None]
        with self._store.writer_lease():  # concurrent writers take turns (RedisStoryStore.writer_lease)
            self._store.prefetch_assigned(a.article_id for a in articles)
            for (t, _, _), article in zip(ready, articles, strict=True):
                if t < limit - self._config.release_granularity_s:
                    self.late.inc()
                yield from self._assign(article, t)


class _SortedAssignFn(_AssignFnBase):
    """(shard key, all StoryArticles) -> StoryAssignments in ``(event_time, article_id)`` order.

    For bounded input after a GroupByKey: every article is in the group, so sorting gives the
    same sequence whatever the file order or bundling. With ``input_log`` (continuous mode) the
    group is clustered together with every logged input from an empty story state, when the
    log covers every article Redis has assigned (else, counted as ``stories_recluster_refused``,
    the group is added to the stories in Redis as without a log); the group is logged after its
    assignments are committed, and logged inputs before the retention cutoff are pruned after a
    re-clustering left Redis without them.
    """

    def setup(self):
        super().setup()
        from newsflow.storage.story_inputs import StoryInputLog

        self._log = StoryInputLog(self._config.input_log) if self._config.input_log else None

    def process(self, element):
        _, articles = element
        articles = list(articles)
        self.key_elements.update(len(articles))
        batch = articles
        logged_all = self._log.read() if self._log is not None else {}
        logged = self._unexpired(logged_all)
        if logged_all:
            from newsflow.storage.story_inputs import one_per_id

            batch = list(one_per_id([*logged.values(), *articles]).values())
        ordered = self._current_clusters(sorted(batch, key=lambda a: (float(a.event_time), a.article_id)))
        reclustered = False
        with self._store.writer_lease():  # concurrent writers take turns (RedisStoryStore.writer_lease)
            if logged_all:
                known = logged_all.keys() | {a.article_id for a in articles}
                if self._store.assigned_ids() <= known:
                    self._store.clear()  # re-cluster everything from an empty state
                    clear_story_trends(self._store.r, self._store.keys)  # this run's trending step rewrites them
                    reclustered = True
                    self.reclustered.inc(len(logged))
                else:  # Redis holds stories the log cannot rebuild (another job wrote them): add to them
                    self.recluster_refused.inc()
                    new = {a.article_id for a in articles}
                    ordered = [a for a in ordered if a is None or a.article_id in new]
            ordered = [a for a in ordered if a is not None]  # superseded versions of re-slugged articles
            self._store.prefetch_assigned(a.article_id for a in ordered)
            for article in ordered:
                yield from self._assign(article, float(article.event_time))
        if self._log is not None:
            self._log.add(a for a in articles if a != logged_all.get(a.article_id))
        if len(logged) < len(logged_all) and reclustered:  # Redis no longer holds the expired ones either
            self._log.prune(self._cutoff)

    def _unexpired(self, logged: dict) -> dict:
        """The logged inputs at or after the retention cutoff (``Keys.retention_cutoff``: older state was
        expired, and the near-duplicate step refuses such articles, so a bounded run would not cluster
        them either)."""
        if not logged:
            return logged
        raw = self._store.r.get(self._store.keys.retention_cutoff)
        cutoff = float(raw) if raw is not None else -math.inf
        if not math.isfinite(cutoff):
            cutoff = -math.inf  # as the near-duplicate step: a corrupt value expires nothing
        self._cutoff = cutoff
        return {aid: a for aid, a in logged.items() if float(a.event_time) >= cutoff}


def _str(v) -> str:
    return v.decode() if isinstance(v, bytes) else v


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
        key = self._config.shard_key
        keyed = pcoll | "KeyToShard" >> beam.Map(lambda a: (key, a))
        if self._config.ordering == "sort":
            keyed = keyed | "CollectBoundedInput" >> beam.GroupByKey()
            fn = _SortedAssignFn(self._config)
        else:
            fn = _OrderedAssignFn(self._config)
        out = keyed | "AssignInEventTimeOrder" >> beam.ParDo(fn).with_outputs(
            DEAD_LETTER_TAG, TREND_INPUT_TAG, main="main"
        )
        return {"main": out.main, DEAD_LETTER_TAG: out[DEAD_LETTER_TAG], TREND_INPUT_TAG: out[TREND_INPUT_TAG]}
