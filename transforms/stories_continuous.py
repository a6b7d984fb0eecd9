"""The story step of continuous local mode: each run re-clusters a bounded window from a checkpoint.

``newsflow run-continuous`` runs the job as bounded runs over the landing files as they arrive, and a
run's files may hold articles older than ones an earlier run assigned (a feed's older items, a slow
source). Appending them would cluster the union in arrival order, not in ``(event_time, article_id)``
order. With ``StoryTransformConfig.input_log`` the story step (:class:`ContinuousAssignFn`, after one
GroupByKey of the run's articles) therefore:

1. unless its earliest article comes after every logged one (then it only appends), picks the latest
   checkpoint at or before the run's earliest article
   (:mod:`newsflow.storage.story_checkpoints`; checkpoints are taken at every event-time bucket boundary,
   ``StoryTransformConfig.checkpoint_s`` = 1 h, that the ordered step crosses);
2. rewinds Redis to it (:func:`~newsflow.storage.story_checkpoints.rewind`: only the stories the logged
   articles after it touched) and clusters those logged articles again together with the new ones, in
   ``(order time, article_id)`` order, taking the checkpoints it crosses again;
3. deletes the trending windows ending after its first article and re-sends to trending, besides its own
   articles, the logged articles of the trending window before that (and the members the merges among them
   moved), counted only in windows ending after it (``counts_from``), so that the trending step writes
   those windows whole, as one bounded run does;
4. logs its new articles (:mod:`newsflow.storage.story_inputs`) and drops checkpoints and log buckets older
   than the late bound before the newest article.

So the story state after any sequence of runs is the one a single bounded run over all their files builds,
for every article within the late bound, and a run costs its new articles plus the logged ones after the
checkpoint it rewinds to (plus one trending window of context), not the history. Counter
``stories_reclustered``: logged articles re-clustered.

Late lane. An article not after the newest logged one and either more than ``late_bound_s`` (default 24 h)
before it or before the oldest checkpoint kept, is not re-evaluated in event-time order: it is assigned after the
run's window, on the state at its end, logged at the newest order time (so later rewinds re-run it in that
place), sends nothing to trending (its windows are long written) and is counted by ``stories_late_lane``.

Crashes. Before it rewinds, a run marks ``state.json`` pending; a run that finds the mark (the last one stopped
half-way, and the cursor brings its files again) rewinds that run's new articles as well, so it ends in the
state of a clean run.

Costs and limits. A checkpoint holds the keys of the stories live at its boundary (those with a member within
the story window, 12.5 h by default), so each bucket boundary a run crosses costs O(live stories), whatever the
history; the log and the checkpoints keep the late bound plus a trending window. A copy that bridges two
near-duplicate groups renames the members of one of them (:mod:`newsflow.storage.groups`); members of it
ordered before the rewound checkpoint keep the group id their story step read, where one bounded run reads
the final one, so that story's state may differ from one bounded run's (a gap the tests do not meet: the rewind
would have to start before the earliest renamed member).

Guard. The log's ``state.json`` keeps the number of stored assignments after the last run (the ``HLEN`` sum of
the ``Keys.story_assign`` buckets, one pipeline).
When Redis holds a different number at the next run (another job wrote stories on the same key prefix,
or the log was lost), and retention does not explain it (a moved cutoff and fewer assignments), the log
and its checkpoints are dropped and the run starts afresh on what Redis holds (counter
``stories_recluster_refused``): it adds its articles to those stories and takes a new genesis checkpoint.
"""

from __future__ import annotations

import math

import apache_beam as beam
from apache_beam import pvalue
from apache_beam.metrics import Metrics

from newsflow.schemas import StoryAssignment
from newsflow.storage.story_inputs import one_per_id, record_rank
from newsflow.transforms.stories import METRICS_NAMESPACE, TREND_INPUT_TAG, _AssignFnBase


def _order(a) -> tuple:
    return (float(a.event_time), a.article_id)


class ContinuousAssignFn(_AssignFnBase):
    """(shard key, all of a run's StoryArticles) -> StoryAssignments, dead letters and trend inputs, with the
    story input log ``config.input_log`` (see the module docstring).

    Besides the window's assignments it emits, as replays (``duplicate=True``), the members of every merged
    story the rewind brought back that the window does not hold (their current story may have changed), so
    that the ``story_assignments`` sink rewrites their rows.
    """

    def __init__(self, config):
        super().__init__(config)
        self.late_lane = Metrics.counter(METRICS_NAMESPACE, "stories_late_lane")

    def setup(self):
        super().setup()
        from newsflow.storage.story_checkpoints import Checkpoints
        from newsflow.storage.story_inputs import StoryInputLog

        self._log = StoryInputLog(self._config.input_log, self._config.checkpoint_s)
        self._ckpts = Checkpoints(self._config.input_log)

    def _cutoff(self) -> float:
        """The retention cutoff (``Keys.retention_cutoff``; ``-inf`` when unset or corrupt)."""
        raw = self._store.r.get(self._store.keys.retention_cutoff)
        try:
            cutoff = float(raw) if raw is not None else -math.inf
        except ValueError:
            return -math.inf
        return cutoff if math.isfinite(cutoff) else -math.inf

    def _start(self, cutoff: float) -> tuple[float, bool]:
        """Checks the guard and retention against ``state.json`` (a fresh start clears the log and checkpoints);
        returns the newest order time logged (``-inf`` when none) and whether the last run stopped half-way."""
        state = self._log.load_state()
        assigned = self._store.assigned_count()
        if state is not None:
            before = state.get("cutoff")
            moved = cutoff > (-math.inf if before is None else float(before))
            pending = bool(state.get("pending"))
            if pending or assigned == state.get("assigned") or (moved and assigned < int(state.get("assigned") or 0)):
                if moved:  # retention expired stories a checkpoint may hold, and the articles before the cutoff
                    window_s = self._config.stories.window_s
                    self._ckpts.drop(
                        b for b, _ in self._ckpts.list() if b is not None and self._boundary(b) - window_s >= cutoff
                    )
                    self._log.prune(cutoff)
                newest = state.get("newest")
                return (-math.inf if newest is None else float(newest)), pending
            self.recluster_refused.inc()
        self._log.clear()
        self._ckpts.drop()
        return -math.inf, False

    def _boundary(self, bucket: int | None) -> float:
        return -math.inf if bucket is None else bucket * self._log.bucket_s

    def _before(self, a: int | None, b: int | None) -> bool:
        """Whether checkpoint bucket ``a`` comes before ``b`` (genesis, ``None``, before all)."""
        return self._boundary(a) < self._boundary(b)

    def process(self, element):
        from newsflow.storage.story_checkpoints import Checkpoints, clear_trends_after, rewind, snapshot

        _, articles = element
        articles = list(articles)
        self.key_elements.update(len(articles))
        r, keys = self._store.r, self._store.keys
        window_s, bound = self._config.stories.window_s, self._config.late_bound_s
        batch = one_per_id(articles)
        cutoff = self._cutoff()
        to_log: list = []
        replaced: dict[str, float] = {}
        with self._store.writer_lease():  # concurrent writers take turns (RedisStoryStore.writer_lease)
            newest, pending = self._start(cutoff)
            if not self._ckpts.list() and batch:
                if newest == -math.inf:  # genesis: the state before every logged article
                    first = min(float(a.event_time) for a in batch.values())
                    self._ckpts.put(None, snapshot(r, keys, first - bound - window_s))
                else:  # retention passed every checkpoint: the state now is the one after the newest bucket
                    b = self._log.bucket(newest) + 1
                    self._ckpts.put(b, snapshot(r, keys, self._boundary(b) - window_s))
            ckpts = self._ckpts.list()
            # an article after every logged one appends; an earlier one needs a checkpoint at or before it
            floor = max(newest - bound, self._boundary(ckpts[0][0]) if ckpts else math.inf)
            on_time = [a for a in batch.values() if float(a.event_time) >= floor or float(a.event_time) > newest]
            late = sorted((a for a in batch.values() if floor > float(a.event_time) <= newest), key=_order)
            top = newest
            if on_time:
                e = min(float(a.event_time) for a in on_time)
                if e > newest and not pending:  # after every logged article: the state now is the state at e
                    bucket, path, logged = (None if newest == -math.inf else self._log.bucket(newest)), None, {}
                else:
                    bucket, path = [(b, p) for b, p in ckpts if self._boundary(b) <= e][-1]
                    logged = self._log.entries(since=self._boundary(bucket))
                window = dict(logged)
                new_ids = set()
                for a in on_time:
                    cur = window.get(a.article_id)
                    if cur is None or record_rank(a) < record_rank(cur[1]):
                        if cur is not None:
                            replaced[a.article_id] = cur[0]
                        window[a.article_id] = (float(a.event_time), a)
                        new_ids.add(a.article_id)
                order = sorted(window.values(), key=lambda x: (x[0], x[1].article_id))
                first = order[0][0]
                # a run that stopped half-way (state "pending") may have assigned some of these same new articles
                undo = set(logged) | (new_ids if pending else set())
                self._log.save_state(self._state(newest, cutoff, pending=True))
                if undo:
                    undone = rewind(self._store, Checkpoints.read(path), undo)
                    self._store.invalidate()
                    self.reclustered.inc(len(logged))
                    for sid, members in sorted(undone["restored_losers"].items()):
                        for aid, t in members:
                            if aid not in window:  # its story may change: the assignments sink re-reads its row
                                yield beam.window.TimestampedValue(StoryAssignment(aid, sid, False, True, (), 0.0), t)
                clear_trends_after(r, keys, first)
                yield from self._trend_context(first)
                logged_now: list = []
                taken: set = set()
                yield from self._run_window(order, bucket, new_ids, logged_now, taken)
                to_log += logged_now
                top = max(top, order[-1][0])
                # the checkpoints after the rewound one that no article of the window crossed now are stale
                kept = [b for b, _ in self._ckpts.list()]
                self._ckpts.drop(keep=[b for b in kept if b in taken or b == bucket or self._before(b, bucket)])
            if late:
                for a in self._current_clusters(late):
                    if a is None:
                        continue
                    self.late_lane.inc()
                    dup = False
                    for out in self._assign(a, float(a.event_time)):
                        if isinstance(out, pvalue.TaggedOutput) and out.tag == TREND_INPUT_TAG:
                            continue  # its trending windows were written long ago
                        if not isinstance(out, pvalue.TaggedOutput):
                            dup = out.value.duplicate
                        yield out
                    if not dup:
                        to_log.append((top, a))
        self._log.add(to_log)
        if replaced:
            self._log.drop(replaced)
        self._finish(top, cutoff)

    def _run_window(self, order, bucket, new_ids: set, logged: list, taken: set):
        """Assigns the window's ``(order time, article)`` s in order, taking a checkpoint at each bucket
        boundary it crosses after ``bucket`` (their buckets go to ``taken``); appends ``(order time, article)`` of
        each of ``new_ids`` that was not a replay to ``logged``: the article as assigned, so a re-slugged one is
        logged as its newest version under its stored id (``resolve_revisions``), never as a superseded one."""
        from newsflow.storage.story_checkpoints import snapshot

        r, keys = self._store.r, self._store.keys
        arts = self._current_clusters([a for _, a in order])
        pairs = [(o, a) for (o, _), a in zip(order, arts, strict=True) if a is not None]
        self._store.prefetch_assigned(a.article_id for _, a in pairs)
        last = bucket
        for o, a in pairs:
            b = self._log.bucket(o)
            if last is None or b > last:
                self._store.flush()
                self._ckpts.put(b, snapshot(r, keys, self._boundary(b) - self._config.stories.window_s))
                taken.add(b)
                last = b
            quiet = o != float(a.event_time)  # an article of the late lane, re-run at its place
            dup = False
            for out in self._assign(a, float(a.event_time)):
                if isinstance(out, pvalue.TaggedOutput):
                    if quiet and out.tag == TREND_INPUT_TAG:
                        continue
                else:
                    dup = out.value.duplicate
                yield out
            if a.article_id in new_ids and not dup:
                logged.append((o, a))

    def _trend_context(self, first: float):
        """Trend inputs of the logged articles ordered in the trending window before ``first`` (under the story
        they were assigned to, counted only by windows ending after ``first``) and of the members moved by
        their steps' merges, so that the windows ending after ``first`` are written whole."""
        from newsflow.storage.story_index import assigned_stories, merge_records

        r, keys = self._store.r, self._store.keys
        w = self._config.trend_window_s
        context = self._log.entries(since=first - w, until=first)
        ids = sorted(context)
        stories = assigned_stories(r, keys, ids)
        for aid in ids:
            o, a = context[aid]
            sid = stories.get(aid)
            if sid is None or o != float(a.event_time):  # unassigned, or of the late lane (never in trending)
                continue
            t = float(a.event_time)
            trend = {
                "article_id": aid,
                "story_id": sid,
                "event_time": t,
                "topics": [label for label, _ in a.topics],
                "entities": [text for _, text, _ in a.entities],
                "counts_from": first,
            }
            yield pvalue.TaggedOutput(TREND_INPUT_TAG, beam.window.TimestampedValue(trend, t))
        horizon = self._config.merged_trend_horizon_s
        for rec in merge_records(r, keys, ids):
            when = float(rec["time"])
            lo = max(when - horizon, first - w)
            for aid, mt in r.zrangebyscore(keys.story_articles(rec["from"]), f"({lo!r}", "+inf", withscores=True):
                moved = {
                    "article_id": aid.decode() if isinstance(aid, bytes) else aid,
                    "story_id": rec["into"],
                    "event_time": float(mt),
                    "topics": [],
                    "entities": [],
                    "counts_from": max(when, first),
                }
                yield pvalue.TaggedOutput(TREND_INPUT_TAG, beam.window.TimestampedValue(moved, float(mt)))

    def _finish(self, top: float, cutoff: float) -> None:
        """Saves the state and drops what the late bound leaves behind: checkpoints before ``top - late bound``
        but the latest of them, and log buckets older than that one's boundary less a trending window."""
        bound = self._config.late_bound_s
        ckpts = [b for b, _ in self._ckpts.list()]
        below = [b for b in ckpts if self._boundary(b) <= top - bound]
        if below:
            self._ckpts.drop(keep=[b for b in ckpts if self._boundary(b) > top - bound] + [below[-1]])
            self._log.prune(self._boundary(below[-1]) - self._config.trend_window_s)
        self._log.save_state(self._state(top, cutoff))

    def _state(self, newest: float, cutoff: float, pending: bool = False) -> dict:
        """``state.json``: ``assigned`` (stored assignments, ``RedisStoryStore.assigned_count``), ``cutoff``
        (retention cutoff seen), ``newest`` (newest order time logged; ``None`` for none), ``pending`` (a run is
        between its rewind and its end: the next run trusts the log and rewinds this run's articles too)."""
        return {
            "assigned": self._store.assigned_count(),
            "cutoff": None if cutoff == -math.inf else cutoff,
            "newest": None if newest == -math.inf else newest,
            "pending": pending,
        }
