"""Trending windows in the streaming job: ``ComputeTrendingWindows``.

Counts distinct new articles per story, per entity and per topic in sliding event-time
windows (1 hour every 5 minutes by default), marks stories with more than 20 as breaking
(λ = 0.5), and — when ``write_redis`` — writes each fired window to Redis (trending ZSETs,
the breaking set with expiry, and a crawler priority request for newly breaking stories;
layout in :mod:`newsflow.storage.trends`). ``WriteTrends`` stores the window counts as
Parquet (``<root>/trends/date=YYYY-MM-DD/``).

Input: a PCollection of dicts or NamedTuples with ``article_id``, ``story_id``, ``topics``,
``entities``, timestamped with the article's event time. Replays are not double counted
(counts are distinct article ids per window). When the story step merges two stories it re-sends
the retired story's articles under the survivor with ``counts_from`` = the merge's event time:
windows ending after the merge count them for the survivor, earlier windows are left as they were.
Output: ``{"trends": TrendCount, "dead_letter": DeadLetter}`` (elements missing ids are
dead-lettered).

Late lane (unbounded input): an article whose event time is more than ``allowed_lateness_seconds``
(default :data:`DEFAULT_LATE_BOUND_S`, 6 h) behind the watermark of the trending step goes to the late
lane instead of its windows: a dead letter (step ``trending``, error ``late``, the trend input as JSON)
counted by ``newsflow.trending/trend_inputs_late``. Articles within the bound update their windows (a
late firing with the corrected count). Nothing is dropped silently: the windows stay open for the bound
plus two probe steps (:func:`window_lateness_s`), longer than the gate's view of the watermark can lag
(:class:`_LateLaneFn`). The gate is keyed by a hash of the article id into :data:`LATE_GATE_SHARDS` keys
(:func:`late_gate_key`), each learning the watermark by its own probe timer; what a shard cannot judge yet
(its first articles, or after its quiet spell) goes to one fallback gate key. Bounded input has no late data.
"""

from __future__ import annotations

import json
import math
import zlib
from dataclasses import dataclass

import apache_beam as beam
from apache_beam import pvalue, window
from apache_beam.coders import FloatCoder, VarIntCoder
from apache_beam.metrics import Metrics
from apache_beam.transforms import trigger
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import ReadModifyWriteStateSpec, TimerSpec, on_timer
from apache_beam.utils.timestamp import MAX_TIMESTAMP, Timestamp

from newsflow.core.ranking.decay import BREAKING_THRESHOLD, is_breaking, lambda_for
from newsflow.schemas import TREND_SCHEMA, DeadLetter, TrendCount
from newsflow.storage.keys import Keys
from newsflow.storage.parquet import write_records
from newsflow.storage.trends import (
    parse_trend_input,
    trends_to_keys,
    write_trends,
)
from newsflow.transforms.deadletter import DEAD_LETTER_TAG
from newsflow.transforms.io import date_partition

METRICS_NAMESPACE = "newsflow.trending"
TRENDS_TAG = "trends"
UNDECIDED_TAG = "undecided"
DEFAULT_LATE_BOUND_S = 6 * 3600
"""Default late bound, seconds: sitemaps and slow feeds deliver articles hours after their event time."""
LATE_GATE_SHARDS = 16
"""Keys of the late-lane gate (:func:`late_gate_key`): each gate key sees about 1/16 of the trend inputs."""


def late_gate_key(article_id: str, shards: int = LATE_GATE_SHARDS) -> str:
    """The late-lane gate key of an article: ``"trending-<n>"``, n = CRC-32 of the UTF-8 id modulo
    ``shards`` (stable across processes and runs, unlike ``hash``), so the gate's elements spread over
    ``shards`` keys and workers instead of one hot key."""
    return f"trending-{zlib.crc32(article_id.encode('utf-8')) % shards}"


@dataclass(frozen=True)
class TrendingConfig:
    """Configuration of :class:`ComputeTrendingWindows`.

    Attributes:
      window_seconds: sliding window size (default 3600 s).
      period_seconds: window period (default 300 s).
      allowed_lateness_seconds: the late bound, seconds: an article this far or less behind the
        watermark still updates its windows (they fire again with the corrected count); one further
        behind goes to the late lane (a ``late`` dead letter, counter ``trend_inputs_late``).
      breaking_threshold: a story is breaking with MORE than this many articles in a window.
      breaking_ttl_seconds: how long after its last breaking window a story stays breaking.
      top_n: keys kept in Redis per window and kind.
      write_redis: write windows/breaking set/re-crawl requests to Redis.
      redis_url: ``redis://``/``unix://`` URL; ``None`` means ``$REDIS_URL`` or the embedded server.
      key_prefix: namespace of the Redis keys (:class:`newsflow.storage.keys.Keys`).
    """

    window_seconds: int = 3600
    period_seconds: int = 300
    allowed_lateness_seconds: int = DEFAULT_LATE_BOUND_S
    breaking_threshold: int = BREAKING_THRESHOLD
    breaking_ttl_seconds: int = 3600
    top_n: int = 100
    write_redis: bool = True
    redis_url: str | None = None
    key_prefix: str = "nf"

    def __post_init__(self):
        Keys(self.key_prefix)  # validates the prefix
        if self.window_seconds <= 0 or self.period_seconds <= 0 or self.window_seconds % self.period_seconds:
            raise ValueError(
                f"window_seconds ({self.window_seconds}) must be a positive multiple of period_seconds "
                f"({self.period_seconds})"
            )
        if self.allowed_lateness_seconds < 0:
            raise ValueError(f"allowed_lateness_seconds must be >= 0, got {self.allowed_lateness_seconds}")


def probe_step_s(config: TrendingConfig) -> int:
    """Step of the late-lane gate's watermark probe, seconds: a whole number of periods, at least one and
    about a twelfth of the late bound (1,800 s for the default 21,600 s bound). The gate's view of the
    watermark lags the runner's by less than one step; a coarser step means fewer timer firings."""
    periods = max(1, round(config.allowed_lateness_seconds / 12 / config.period_seconds))
    return periods * config.period_seconds


def window_lateness_s(config: TrendingConfig) -> int:
    """How long after its end a trending window still accepts data, seconds: the late bound plus two
    probe steps, so that an article the late-lane gate lets through (at most the bound behind the gate's
    watermark, which lags the runner's by less than a step: :func:`probe_step_s`) is never dropped by the
    window."""
    return config.allowed_lateness_seconds + 2 * probe_step_s(config)


class _ParseFn(beam.DoFn):
    """dict/NamedTuple -> TrendInput (timestamp kept); bad elements -> dead letter."""

    def __init__(self):
        self.bad = Metrics.counter(METRICS_NAMESPACE, "dead_lettered_trend_input")

    def process(self, element):
        try:
            yield parse_trend_input(element)
        except ValueError as e:
            self.bad.inc()
            payload = json.dumps(element if isinstance(element, dict) else repr(element), default=repr)
            yield pvalue.TaggedOutput(
                DEAD_LETTER_TAG, DeadLetter("trending", "invalid_input", str(e), payload.encode("utf-8"))
            )


class _LateLaneFn(beam.DoFn):
    """(gate key, TrendInput) -> the TrendInput (timestamp kept), or a ``late`` dead letter when its
    timestamp is more than the late bound behind the watermark. Gate keys: :func:`late_gate_key`.

    Python DoFns cannot read the watermark, so the gate learns it from an event-time timer: the
    ``probe`` timer fires once the watermark has passed it, and its firing time is kept in ``seen``
    (a lower bound of the watermark). While articles arrive the probe re-arms itself every step (:func:`probe_step_s`),
    so ``seen`` lags the watermark by less than a step; after ``tight_firings`` firings without an
    article (the bound plus a window of watermark progress) its step doubles, so draining to the end of
    time takes a few dozen firings, and the next article pulls the probe back to the next step tick.
    An article arriving after such a long quiet spell is judged by the last probe (``seen`` may then
    lag by up to half the quiet spell), and a key's first article (no probe has fired yet) passes.

    With ``last=False`` (the sharded first stage) an article its key cannot judge tightly (no probe has
    fired yet, or the probe backed off) goes to the :data:`UNDECIDED_TAG` output instead; the transform
    sends those to one fallback key (``last=True``), which judges everything it gets. Only each shard's
    first articles and those after a shard's quiet spell take that path, so the fallback key sees a
    small share of the elements.

    Counters: ``trend_inputs_late``, ``trend_inputs_on_time``.

    State (per gate key; cleared never: three numbers): ``seen`` (float, epoch s),
    ``armed`` (float, the probe's time, absent when not armed), ``idle`` (firings since the last
    article).
    """

    SEEN = ReadModifyWriteStateSpec("seen", FloatCoder())
    ARMED = ReadModifyWriteStateSpec("armed", FloatCoder())
    IDLE = ReadModifyWriteStateSpec("idle", VarIntCoder())
    PROBE = TimerSpec("probe", TimeDomain.WATERMARK)

    def __init__(self, bound_s: float, step_s: float, tight_firings: int, last: bool = True):
        self._last = bool(last)
        self._bound = float(bound_s)
        self._step = float(step_s)
        self._tight = int(tight_firings)
        self.late = Metrics.counter(METRICS_NAMESPACE, "trend_inputs_late")
        self.on_time = Metrics.counter(METRICS_NAMESPACE, "trend_inputs_on_time")

    def process(
        self,
        element,
        timestamp=beam.DoFn.TimestampParam,
        seen=beam.DoFn.StateParam(SEEN),
        armed=beam.DoFn.StateParam(ARMED),
        idle=beam.DoFn.StateParam(IDLE),
        probe=beam.DoFn.TimerParam(PROBE),
    ):
        _, item = element
        t = float(timestamp)
        watermark = seen.read()
        stale = watermark is None or (idle.read() or 0) > self._tight  # no probe yet, or backed off
        idle.write(0)
        # the next step tick after what is known; also pulls in a probe pushed far out while idle
        at = (math.floor(max(t, watermark or t) / self._step) + 1) * self._step
        current = armed.read()
        if current is None or at < current:
            probe.set(Timestamp.of(at))
            armed.write(at)
        if stale and not self._last:
            yield pvalue.TaggedOutput(UNDECIDED_TAG, item)  # judged by the single fallback key
            return
        if watermark is not None and t < watermark - self._bound:
            self.late.inc()
            yield pvalue.TaggedOutput(
                DEAD_LETTER_TAG,
                DeadLetter(
                    "trending",
                    "late",
                    f"event time {t} is {watermark - t:.0f} s behind the watermark (late bound {self._bound:.0f} s)",
                    json.dumps(item._asdict() | {"event_time": t}).encode("utf-8"),
                ),
            )
            return
        self.on_time.inc()
        yield item

    @on_timer(PROBE)
    def on_probe(
        self,
        fire=beam.DoFn.TimestampParam,
        seen=beam.DoFn.StateParam(SEEN),
        armed=beam.DoFn.StateParam(ARMED),
        idle=beam.DoFn.StateParam(IDLE),
        probe=beam.DoFn.TimerParam(PROBE),
    ):
        now = float(fire)
        seen.write(now)
        n = (idle.read() or 0) + 1
        idle.write(n)
        step = self._step * (2 ** max(0, n - self._tight))
        nxt = now + step
        if nxt < float(MAX_TIMESTAMP) - 86400 * 365:
            probe.set(Timestamp.of(nxt))
            armed.write(nxt)
        else:
            armed.clear()


def _keys_in_window(element, win=beam.DoFn.WindowParam):
    """:func:`trends_to_keys` of the element in one window, except that a re-counted article
    (``counts_from`` set: an article of a story merged into ``story_id``) counts only in the windows
    that end after the merge."""
    if element.counts_from is None or float(win.end) > element.counts_from:
        yield from trends_to_keys(element)


class _DistinctArticlesFn(beam.CombineFn):
    """Counts distinct article ids and collects story topics: accumulator ``(set ids, set topics)``."""

    def create_accumulator(self):
        return set(), set()

    def add_input(self, acc, value):
        aid, topics = value
        acc[0].add(aid)
        acc[1].update(topics)
        return acc

    def merge_accumulators(self, accs):
        ids, topics = set(), set()
        for a, t in accs:
            ids |= a
            topics |= t
        return ids, topics

    def extract_output(self, acc):
        return len(acc[0]), tuple(sorted(acc[1]))


def _keys_in_sliding_windows(element, windows: window.SlidingWindows, timestamp=beam.DoFn.TimestampParam):
    """The bounded-input form of :func:`_keys_in_window`: the element's sliding windows computed
    here (Beam's own ``SlidingWindows.assign``) and put in the key,
    ``(((kind, key), window start, window end), (article_id, topics))``, so the counting runs in the
    global window with Beam's batch grouping instead of its per-window trigger machinery."""
    for win in windows.assign(window.WindowFn.AssignContext(timestamp, element=element)):
        for k, v in _keys_in_window(element, win):
            yield (k, float(win.start), float(win.end)), v


class _ToTrendCountFn(beam.DoFn):
    """((kind, key), (count, topics)) in a window -> TrendCount with breaking flag and λ.

    With ``keyed_windows`` the element is ``(((kind, key), start, end), (count, topics))`` in the
    global window (the bounded-input path) and the window bounds come from the key.
    """

    def __init__(self, threshold: int, keyed_windows: bool = False):
        self._threshold = threshold
        self._keyed_windows = keyed_windows
        self.breaking = Metrics.counter(METRICS_NAMESPACE, "breaking_story_windows")

    def process(self, element, win=beam.DoFn.WindowParam):
        key_part, (count, topics) = element
        if self._keyed_windows:
            (kind, key), start, end = key_part
        else:
            (kind, key), start, end = key_part, float(win.start), float(win.end)
        brk, lam = False, 0.0
        if kind == "story":
            brk = is_breaking(count, self._threshold)
            lam = lambda_for(topics, brk)
            if brk:
                self.breaking.inc()
        yield TrendCount(kind, key, int(count), start, end, brk, lam)


class _WriteRedisFn(beam.DoFn):
    """Buffers a bundle's TrendCounts and writes them in one pass (pipelined) at bundle end.

    Redis errors propagate so the runner retries the bundle; the writes are idempotent
    (ZADD of absolute counts, breaking expiry only moves forward).
    """

    def __init__(self, config: TrendingConfig):
        self._config = config
        self.newly_breaking = Metrics.counter(METRICS_NAMESPACE, "newly_breaking")

    def setup(self):
        from newsflow.runtime.redis_conn import connect

        self._client = connect(self._config.redis_url)

    def start_bundle(self):
        self._buffer = []

    def process(self, element):
        self._buffer.append(element)

    def finish_bundle(self):
        if self._buffer:
            c = self._config
            fresh = write_trends(
                self._client, self._buffer, c.window_seconds, c.top_n, c.breaking_ttl_seconds, keys=Keys(c.key_prefix)
            )
            self.newly_breaking.inc(len(fresh))
            self._buffer = []


class ComputeTrendingWindows(beam.PTransform):
    """Timestamped article records -> ``{"trends": TrendCount, "dead_letter": DeadLetter}``.

    ``bounded``: how the windows are computed. Unbounded input (``False``) uses Beam's sliding
    windows with the watermark trigger (and late firings within the allowed lateness). Bounded input
    (``True``; ``None``, the default, decides by ``pcoll.is_bounded``) has no late data and fires each
    window once, so the same windows are computed in the global window with the window in the key
    (:func:`_keys_in_sliding_windows`): the same TrendCounts, without the per-key trigger state
    machine that cost the bounded demo replay about 35 s (``benchmarks.pipeline``).
    """

    def __init__(self, config: TrendingConfig = TrendingConfig(), bounded: bool | None = None):
        super().__init__()
        self._config = config
        self._bounded = bounded

    def expand(self, pcoll):
        c = self._config
        parsed = pcoll | "ParseTrendInput" >> beam.ParDo(_ParseFn()).with_outputs(DEAD_LETTER_TAG, main=TRENDS_TAG)
        bounded = pcoll.is_bounded if self._bounded is None else self._bounded
        if bounded:
            trends = (
                parsed[TRENDS_TAG]
                | "KeyByStoryEntityTopicWindow"
                >> beam.FlatMap(_keys_in_sliding_windows, window.SlidingWindows(c.window_seconds, c.period_seconds))
                | "CountDistinctArticles" >> beam.CombinePerKey(_DistinctArticlesFn())
                | "ToTrendCount" >> beam.ParDo(_ToTrendCountFn(c.breaking_threshold, keyed_windows=True))
            )
        else:
            step = probe_step_s(c)
            tight = math.ceil((c.allowed_lateness_seconds + c.window_seconds) / step) + 1
            gated = (
                parsed[TRENDS_TAG]
                | "KeyToLateGate" >> beam.Map(lambda ti: (late_gate_key(ti.article_id), ti))
                | "LateLane"
                >> beam.ParDo(_LateLaneFn(c.allowed_lateness_seconds, step, tight, last=False)).with_outputs(
                    DEAD_LETTER_TAG, UNDECIDED_TAG, main=TRENDS_TAG
                )
            )
            fallback = (
                gated[UNDECIDED_TAG]
                | "KeyToFallbackGate" >> beam.Map(lambda ti: ("trending", ti))
                | "FallbackLateLane"
                >> beam.ParDo(_LateLaneFn(c.allowed_lateness_seconds, step, tight)).with_outputs(
                    DEAD_LETTER_TAG, main=TRENDS_TAG
                )
            )
            late = (gated[DEAD_LETTER_TAG], fallback[DEAD_LETTER_TAG]) | "LateLaneDeadLetters" >> beam.Flatten()
            trends = (
                (gated[TRENDS_TAG], fallback[TRENDS_TAG])
                | "GatedTrendInputs" >> beam.Flatten()
                | "SlidingWindows"
                >> beam.WindowInto(
                    window.SlidingWindows(c.window_seconds, c.period_seconds),
                    trigger=trigger.AfterWatermark(late=trigger.AfterCount(1)),
                    allowed_lateness=window_lateness_s(c),
                    accumulation_mode=trigger.AccumulationMode.ACCUMULATING,
                )
                | "KeyByStoryEntityTopic" >> beam.FlatMap(_keys_in_window)
                | "CountDistinctArticles" >> beam.CombinePerKey(_DistinctArticlesFn())
                | "ToTrendCount" >> beam.ParDo(_ToTrendCountFn(c.breaking_threshold))
            )
        if c.write_redis:
            _ = trends | "WriteTrendingToRedis" >> beam.ParDo(_WriteRedisFn(c))
        dead = parsed[DEAD_LETTER_TAG]
        if not bounded:
            dead = (dead, late) | "TrendDeadLetters" >> beam.Flatten()
        return {"trends": trends, "dead_letter": dead}


class _WriteTrendFileFn(beam.DoFn):
    def __init__(self, root: str):
        self._root = root

    def process(self, element):
        partition, rows = element
        path = write_records(
            self._root,
            "trends",
            partition,
            list(rows),
            TREND_SCHEMA,
            sort_key=lambda t: (t.window_end, t.kind, -t.count, t.key),
        )
        if path:
            yield path


def _trend_date(t) -> str:
    return date_partition(t.window_end)


class _WriteTrendBatchFn(beam.DoFn):
    """A batch of TrendCounts (one bundle's fired panes) -> one Parquet file per UTC date."""

    def __init__(self, root: str):
        self._root = root

    def process(self, batch):
        by_date: dict[str, list] = {}
        for t in batch:
            by_date.setdefault(_trend_date(t), []).append(t)
        for partition, rows in sorted(by_date.items()):
            path = write_records(
                self._root,
                "trends",
                partition,
                rows,
                TREND_SCHEMA,
                sort_key=lambda t: (t.window_end, t.kind, -t.count, t.key),
            )
            if path:
                yield path


class WriteTrends(beam.PTransform):
    """TrendCounts (entities/topics/stories per window) -> Parquet under ``<root>/trends``.

    Batch (bounded input): regrouped in the global window and written once per UTC date of the
    window end, so a replay writes the same files. Streaming: each bundle of fired window panes is
    written as it comes (one file per date per bundle), with no second trigger: re-windowing the
    sliding-window output into a global window with a processing-time trigger never finished on
    Beam's streaming DirectRunner. ``streaming=None`` picks by whether the input is bounded.
    ``flush_seconds`` is kept for signature compatibility and is unused in streaming mode.
    Emits the paths written.
    """

    def __init__(self, output_root: str, streaming: bool | None = None, flush_seconds: int = 60):
        super().__init__()
        self._root, self._streaming, self._flush = output_root, streaming, flush_seconds

    def expand(self, pcoll):
        streaming = (not pcoll.is_bounded) if self._streaming is None else self._streaming
        if streaming:
            return (
                pcoll
                | "BatchFiredPanes" >> beam.BatchElements(min_batch_size=1, max_batch_size=10_000)
                | "WriteParquetBatches" >> beam.ParDo(_WriteTrendBatchFn(self._root))
            )
        return (
            pcoll
            | "GlobalWindow" >> beam.WindowInto(window.GlobalWindows())
            | "KeyByDate" >> beam.Map(lambda t: (_trend_date(t), t))
            | "GroupByDate" >> beam.GroupByKey()
            | "WriteParquet" >> beam.ParDo(_WriteTrendFileFn(self._root))
        )
