"""Story assignment beyond one writer: speculative scoring on shards, an ordered exact commit.

The single ordered writer (:class:`newsflow.stories.StoryClusterer`) runs one step per article:
score every live story (candidate search), join the best or found a story, then compare the
grown story with every other live story for merges. Each step depends on the previous one, so it
runs on one core (``benchmarks.story_writer`` states that ceiling). This module spreads the
scoring over ``K`` shard processes and keeps the outcome *identical* to the single writer's —
the same story ids, joins, merges and scores, not only the same partition of articles.

Design (optimistic concurrency with an ordered commit; no sharding by language, stories cross
languages, and no sharding of the stories an article may join, since any live story may win):

* **Replicas.** Each shard keeps a replica of the scoring view of the live stories (centroid,
  entity keys, earliest/latest time), at a *version* ``V`` = the number of article steps whose
  outcome it has applied. The sequencer streams every step's changes to every shard in order.
* **Speculative join scoring (the shards).** Articles are dealt round-robin to the shards ahead
  of the sequencer. A shard computes the article's TF-IDF vector and scores it, with the single
  writer's own :meth:`StoryClusterer._article_score`, against every live story of its replica
  (same window, same zero-score skip), and returns ``(V, vector, [(score, story id)])`` keeping
  only scores ``>= join_threshold`` (only those can be joined; a step whose best score is lower
  founds a story whatever that score is).
* **Ordered commit (the sequencer, one process).** Steps are committed in the input order
  (``(event_time, article_id)``, as the streaming step releases them). For article ``i`` scored
  at version ``V``, every story whose last change is at a step ``>= V`` (stamped ``> V``) is
  *re-scored* from its current state; the speculative scores of all other stories are the exact
  scores of their current state (same state, same arithmetic), and a story retired since ``V``
  is stamped too, so the best story and its score are exactly the single writer's (ties to the
  smaller id, as there). The re-computation is limited to the stories changed since the
  article's snapshot: a few per article when the shards run a few dozen articles ahead.
* **Merge check.** After a join the grown story must be compared with every other live story,
  and 98% of joins on the bundled headlines hit a story changed in the previous 8 steps (news
  arrive in bursts), so it cannot be speculated from a snapshot. ``merge_checks="sequencer"``
  (default): the sequencer runs the single writer's merge loop on its exact state.
  ``merge_checks="shards"``: the sequencer sends the grown story to all shards; shard ``k`` runs the single writer's
  :meth:`StoryClusterer._merge_candidates` over the replica stories with ``crc32(id) % K == k``
  (its replica is at exactly this step's version: messages are ordered) and answers its best
  ``(score, id)``. If no shard has a score ``>= merge_threshold`` there is no merge (the single
  writer's max over all stories is the max of the shards' maxima); otherwise the sequencer runs
  the single writer's merge loop itself on its exact state (rare: 39 of 4,588 steps). A shard
  applies a checked step's view only once the step is final (the next message, or the merge fix).
* **Stealing.** If the shard of the next article has not answered, the sequencer scores the
  article itself on its exact state (``steal=True``) instead of waiting; the late answer is dropped.
* **State.** The sequencer owns the :class:`~newsflow.stores.story_store.StoryStore` (in memory, or
  ``RedisStoryStore(cache=True, write_batch=...)`` as in the streaming job) and writes through it
  exactly as the single writer does (``save``, ``merge``), so the store ends in the same state.

When the speedup holds (measured, ``python -m benchmarks.story_writer --json``). The shards take
the vectors and the join scan (about a third of the single writer's CPU on the bundled headlines),
and with ``merge_checks="shards"`` the merge checks too (the largest part, ~45%); what stays in the
sequencer is the commit itself (absorb, the embedding mean, pruning, save), the re-scoring, the
messages, and with ``merge_checks="sequencer"`` (default) the merge checks. So:

* the re-computation rate is low (``stats.as_dict()["rescore_share"]``: ~21% of the scores the shards compute
  are re-computed at commit, ~7 stories sharing a term per article, ~1.5 changed ones), but the
  stories an article joins are the hot ones: 98% of joins hit a story changed in the previous 8
  steps, so 87% of the kept speculative join scores are superseded; speculation cannot reach
  the merge checks, which depend on the grown story;
* the sequencer's CPU is the new ceiling: 0.74-0.88x the single writer's with merge checks in the
  sequencer, 0.45-0.56x with them on the shards (3 benchmark runs), i.e. at most 1.14-1.35x resp.
  1.8-2.2x more articles/s, and only when each shard and the sequencer have a core of their own;
* split merge checks cost one synchronous round trip per join (4,348 on the slice); on idle cores
  that is tens of microseconds, under contention a scheduler slice, more than the check itself;
* ``steal`` keeps the sequencer from stalling when a shard is descheduled (it scores the article
  itself: 12-1,468 of 4,588 articles in the runs), so a loaded shard costs little;
* on this machine (2 cores shared with other work, load average 9.7-10.3 during the runs) 2 shards
  ran at 1.44x, 0.82x and 0.75x the single writer's articles/s (merge checks in the sequencer)
  and at 0.54-0.69x with split merge checks; 1 shard at 0.52-0.90x (the same work plus messages).

It pays with ``K + 1`` free cores and many live stories per article (costly steps). The step that
would remove the round trip (not built): commit joins optimistically as "no merge", let the shards
verify the merge checks asynchronously, and roll the sequencer and the replicas back to a step
whose check finds a merge (39 of 4,588 steps on the slice). Late articles (event time behind the
sequencer's pruning horizon) and replays are committed with the single writer's full path.

Usage::

    with ShardedStoryAssigner(store, text_model, shards=2) as assigner:
        assignments = assigner.assign(articles)   # event-time ordered, like StoryClusterer.add

Shards are ``fork``-started processes (Linux/macOS), fed through pipes; the articles are sent to
them by value.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import zlib
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.reduction import ForkingPickler

from newsflow.embedding import TextModel
from newsflow.stores.story_store import StoryState, StoryStore
from newsflow.stories import StoryClusterer, StoryConfig
from schemas.story import StoryArticle, StoryAssignment

# Messages sequencer -> shard (tuples: kind, then the step ``j`` they belong to; every message but
# "fix" also says that all steps before ``j`` are final):
#   ("score", j, [(i, article), ...])    score these articles speculatively (i numbers articles)
#   ("prune", j, floor)                  forget stories whose latest time is before ``floor``
#   ("check", j, view, since)            step j grew ``view``: answer ("hit", j, best) over my part;
#                                        the view is applied once step j is final
#   ("fix", j, [views], [retired ids])   step j's final changes (instead of a pending view)
#   ("batch", j, [messages])             several of the above, in order
#   ("stop", j)
# Messages shard -> sequencer:
#   ("spec", i, V, vector, [(score, story id), ...], stories scored)
#   ("hit", j, (score, story id) | None)


def _view(story: StoryState) -> tuple:
    """The scoring view of a story shipped to the shards: id, centroid, entity keys, times."""
    return (story.story_id, dict(story.centroid), tuple(story.entities), story.earliest_time, story.latest_time)


def _from_view(view: tuple) -> StoryState:
    sid, centroid, ents, earliest, latest = view
    return StoryState(
        story_id=sid,
        centroid=centroid,
        entities=dict.fromkeys(ents),
        earliest_time=earliest,
        latest_time=latest,
    )


def _part(story_id: str, shards: int) -> int:
    """Shard owning ``story_id`` in merge checks (stable across processes and runs)."""
    return zlib.crc32(story_id.encode()) % shards


class _Replica:
    """A shard's copy of the live stories' scoring views at a version: every step before
    ``version`` is applied; ``pending`` is the last step's view until a later message confirms it."""

    def __init__(self, views: Sequence[tuple]) -> None:
        self.stories: dict[str, StoryState] = {v[0]: _from_view(v) for v in views}
        self.version = 0
        self.pending: tuple[int, tuple] | None = None

    def advance(self, j: int) -> None:
        """Every step before ``j`` is final: applies the pending view of an earlier step."""
        if self.pending is not None and self.pending[0] < j:
            step, view = self.pending
            self.stories[view[0]] = _from_view(view)
            self.version = max(self.version, step + 1)
            self.pending = None
        self.version = max(self.version, j)

    def live(self, since: float) -> list[StoryState]:
        """Stories with ``latest_time >= since``."""
        return [s for s in self.stories.values() if s.latest_time >= since]


def _shard_main(conn, shard: int, shards: int, model: TextModel, config: StoryConfig, views) -> None:
    """A shard process: speculative join scores and its part of the merge checks (see module doc)."""
    clusterer = StoryClusterer(_NullStore(), model, config)
    replica = _Replica(views)
    queue: deque[tuple[int, StoryArticle]] = deque()
    join = config.join_threshold

    def handle(msg) -> bool:
        """Applies one message; True on "stop"."""
        kind, j = msg[0], msg[1]
        if kind == "batch":
            return any(handle(m) for m in msg[2])
        if kind == "fix":
            _, j, changed, retired = msg
            if replica.pending is not None and replica.pending[0] == j:
                replica.pending = None  # superseded by the final changes
            replica.advance(j)
            for view in changed:
                replica.stories[view[0]] = _from_view(view)
            for sid in retired:
                replica.stories.pop(sid, None)
            replica.version = max(replica.version, j + 1)
            return False
        replica.advance(j)
        if kind == "score":
            queue.extend(msg[2])
        elif kind == "prune":
            floor = msg[2]
            replica.stories = {k: s for k, s in replica.stories.items() if s.latest_time >= floor}
        elif kind == "check":
            _, j, view, since = msg
            grown = _from_view(view)
            others = [
                s for s in replica.live(since) if s.story_id != grown.story_id and _part(s.story_id, shards) == shard
            ]
            best = clusterer._best_merge(grown, others)
            conn.send(("hit", j, None if best is None else (best[0], best[1].story_id)))
            replica.pending = (j, view)
        return kind == "stop"

    while True:
        while not queue or conn.poll():
            if handle(conn.recv()):
                return
        i, article = queue.popleft()
        t = float(article.event_time)
        vec = clusterer.vector(article)
        ent_keys = {e[0] for e in article.entities}
        out, scored = [], 0
        for story in replica.live(t - config.window_s):
            s = clusterer._join_score(vec, ent_keys, story, t)
            if s is None:
                continue
            scored += 1
            if s >= join:
                out.append((s, story.story_id))
        conn.send(("spec", i, replica.version, vec, out, scored))


class _NullStore:
    """The shards' clusterer never touches a store (it only scores)."""

    def __getattr__(self, name):  # pragma: no cover - a bug if reached
        raise RuntimeError(f"shard clusterer must not call store.{name}")


@dataclass
class ShardStats:
    """Counters of one :meth:`ShardedStoryAssigner.assign` run.

    Attributes:
      articles: steps committed.
      shard_scored: article-story scores the shards computed (stories sharing a term or entity).
      spec_scores: of those, kept (``>= join_threshold``) and sent to the sequencer.
      spec_reused: of those, used as they were (their story unchanged since the snapshot).
      rescored: join scores the sequencer re-computed (stories changed since the snapshot).
      rescored_articles: articles with at least one re-computed score.
      snapshot_lag: sum over articles of (step - snapshot version), steps.
      merge_checks: joins whose merge check ran on the shards.
      merge_fallbacks: of those, with a hit (the sequencer ran the merge loop itself).
      stolen: articles the sequencer scored itself because their shard had not answered yet.
      full_steps: steps committed with the single writer's full path (late articles, replays).
    """

    articles: int = 0
    shard_scored: int = 0
    spec_scores: int = 0
    spec_reused: int = 0
    rescored: int = 0
    rescored_articles: int = 0
    snapshot_lag: int = 0
    merge_checks: int = 0
    merge_fallbacks: int = 0
    full_steps: int = 0
    stolen: int = 0

    def as_dict(self) -> dict:
        """Counters plus ``rescore_share`` (scores the sequencer re-computed over those the shards
        computed: the re-computation rate) and ``mean_snapshot_lag`` (steps)."""
        return {
            "articles": self.articles,
            "shard_scored": self.shard_scored,
            "spec_scores": self.spec_scores,
            "spec_reused": self.spec_reused,
            "rescored": self.rescored,
            "rescored_articles": self.rescored_articles,
            "rescore_share": round(self.rescored / self.shard_scored, 4) if self.shard_scored else 0.0,
            "mean_snapshot_lag": round(self.snapshot_lag / self.articles, 2) if self.articles else 0.0,
            "merge_checks": self.merge_checks,
            "merge_fallbacks": self.merge_fallbacks,
            "full_steps": self.full_steps,
            "stolen": self.stolen,
        }


class ShardedStoryAssigner:
    """Story assignment with ``shards`` scoring processes and one ordered committer (this process).

    The result of :meth:`assign` (assignments, store state, merges) is the single writer's
    (:meth:`StoryClusterer.add` over the same articles in the same order) — see the module
    docstring for why and for when it is faster.

    Args:
      store: the story state; the sequencer writes through it as the single writer does. Stories
        already in it are loaded into the shards' replicas at :meth:`start`.
      text_model: IDF table (:class:`newsflow.embedding.TextModel`).
      config: thresholds (:class:`newsflow.stories.StoryConfig`).
      shards: scoring processes, ``>= 1``.
      ahead: how many articles the shards may score ahead of the sequencer (larger keeps them
        busy, smaller keeps their snapshots fresh), ``>= shards``.
      horizon_s: stories whose latest time is this far behind the newest window start are pruned
        from the replicas and the sequencer's index; an article whose window reaches behind the
        pruned part is committed with the single writer's full path.
      merge_checks: ``"sequencer"`` (the sequencer checks a grown story against the other live
        stories, as the single writer) or ``"shards"`` (split by story id over the shards, one
        round trip per join).
      steal: when the shard of the next article has not answered yet, the sequencer scores it
        itself on its exact state instead of waiting (the same result; counted in ``stolen``).

    Raises:
      ValueError: ``shards < 1`` or ``ahead < shards``.
    """

    def __init__(
        self,
        store: StoryStore,
        text_model: TextModel,
        config: StoryConfig = StoryConfig(),
        shards: int = 2,
        ahead: int = 32,
        horizon_s: float = 86400.0,
        merge_checks: str = "sequencer",
        steal: bool = True,
    ) -> None:
        if shards < 1:
            raise ValueError(f"shards must be >= 1, got {shards}")
        if ahead < shards:
            raise ValueError(f"ahead must be >= shards ({shards}), got {ahead}")
        if merge_checks not in ("sequencer", "shards"):
            raise ValueError(f"merge_checks must be 'sequencer' or 'shards', got {merge_checks!r}")
        self.merge_checks = merge_checks
        self.steal = steal
        self.clusterer = StoryClusterer(store, text_model, config)
        self.store = store
        self.model = text_model
        self.config = self.clusterer.config
        self.shards = shards
        self.ahead = ahead
        self.horizon_s = horizon_s
        self._procs: list = []
        self._conns: list = []
        self._live: dict[str, StoryState] = {}  # the sequencer's index of live stories (same objects as the store's)
        self._stamp: dict[str, int] = {}  # story id -> 1 + the step that last changed it
        self._log: list[tuple[str, ...]] = []  # step -> story ids it changed
        self._pruned_before = -math.inf
        self._step = 0
        self._outbox: list[tuple] = []  # replica updates not yet sent to the shards
        self._issued = 0  # articles sent to the shards, over all calls
        self._next = 0  # number of the article being committed
        self._spec: dict[int, tuple] = {}  # article index -> (version, vector, scores) received early
        self.stats = ShardStats()

    # ---- process management -------------------------------------------------------------------
    def start(self) -> ShardedStoryAssigner:
        """Loads the store's live stories and starts the shard processes."""
        if self._procs:
            return self
        live = self.store.active(-math.inf)
        self._live = {s.story_id: s for s in live}
        views = [_view(s) for s in live]
        ctx = mp.get_context("fork")
        for k in range(self.shards):
            parent, child = ctx.Pipe(duplex=True)
            p = ctx.Process(
                target=_shard_main,
                args=(child, k, self.shards, self.model, self.config, views),
                daemon=True,
            )
            p.start()
            child.close()
            self._procs.append(p)
            self._conns.append(parent)
        return self

    def close(self) -> None:
        """Stops the shard processes (idempotent)."""
        for c in self._conns:
            try:
                c.send(("stop", self._step))
            except (BrokenPipeError, OSError):
                pass
        for p in self._procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join()
        for c in self._conns:
            c.close()
        self._procs, self._conns = [], []

    def __enter__(self) -> ShardedStoryAssigner:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- assignment ---------------------------------------------------------------------------
    def assign(self, articles: Sequence[StoryArticle]) -> list[StoryAssignment]:
        """Assigns ``articles`` (call in event-time order, as :meth:`StoryClusterer.add`).

        Returns:
          one :class:`StoryAssignment` per article, in order, equal to the single writer's.

        Raises:
          ValueError: an article has no id or a non-finite event time (as the single writer;
            the steps before it are committed).
        """
        self.start()
        n = len(articles)
        spec = self._spec
        base = self._issued  # articles are numbered across calls, so late answers are recognized
        sent = 0

        def feed(upto: int) -> None:
            nonlocal sent
            upto = min(upto, n)
            if upto <= sent:
                return
            self._flush()
            batches: list[list] = [[] for _ in range(self.shards)]
            for i in range(sent, upto):
                batches[i % self.shards].append((base + i, articles[i]))
            for k, b in enumerate(batches):
                if b:
                    self._conns[k].send(("score", self._step, b))
            sent = upto

        def wait_spec(i: int) -> tuple | None:
            conn = self._conns[i % self.shards]
            while base + i not in spec:
                if self.steal and not conn.poll():
                    return None  # the shard is behind: score it here rather than wait
                self._keep_spec(conn.recv())
            return spec.pop(base + i)

        out = []
        try:
            feed(self.ahead)
            for i, article in enumerate(articles):
                self._next = base + i
                if i % max(1, self.ahead // 4) == 0:
                    feed(i + self.ahead)
                got = wait_spec(i)
                if got is None:
                    self.stats.stolen += 1
                    version, vec, scores = self._score_here(article)
                else:
                    version, vec, scores, scored = got
                    self.stats.shard_scored += scored
                out.append(self._commit(article, version, vec, scores))
        finally:
            # answers still in flight are dropped on arrival (their number is below _next)
            self._issued = self._next = base + n
            spec.clear()
        return out

    def _keep_spec(self, msg) -> None:
        """Keeps a shard's speculative score message (dropped if its article was committed)."""
        if msg[0] != "spec":
            raise RuntimeError(f"shard protocol: expected a score, got {msg[0]!r}")
        if msg[1] >= self._next:
            self._spec[msg[1]] = msg[2:]

    def _score_here(self, article: StoryArticle) -> tuple:
        """What a shard would answer, computed by the sequencer on its current (exact) state."""
        cl = self.clusterer
        t = float(article.event_time)
        since = t - self.config.window_s
        vec = cl.vector(article)
        ent_keys = {e[0] for e in article.entities}
        scores = []
        for story in self._live.values():
            if story.latest_time < since:
                continue
            s = cl._join_score(vec, ent_keys, story, t)
            if s is not None and s >= self.config.join_threshold:
                scores.append((s, story.story_id))
        return self._step, vec, scores

    def _changed_since(self, version: int) -> set[str]:
        out: set[str] = set()
        for ids in self._log[version : self._step]:
            out.update(ids)
        return out

    def _end_step(self, changed: Sequence[str], retired: Sequence[str], message) -> None:
        j = self._step
        for sid in changed:
            self._stamp[sid] = j + 1
        for sid in retired:
            self._stamp[sid] = j + 1
            self._live.pop(sid, None)
        self._log.append(tuple(changed) + tuple(retired))
        self._step += 1
        if message is not None:
            self._outbox.append(message)

    def _flush(self) -> None:
        """Sends the queued replica updates to every shard, as one message."""
        if self._outbox:
            self._broadcast(("batch", self._step, self._outbox))
            self._outbox = []

    def _broadcast(self, msg) -> None:
        """Sends ``msg`` to every shard, pickled once."""
        data = ForkingPickler.dumps(msg)
        for c in self._conns:
            c.send_bytes(data)

    def _prune(self, since: float) -> None:
        """Once the window start passed the last pruning floor by ``horizon_s``, forgets (here and on
        the shards) the stories whose latest time is ``horizon_s`` before it; articles whose window
        starts before the floor take the full path."""
        floor = since - self.horizon_s
        if floor > self._pruned_before + self.horizon_s or self._pruned_before == -math.inf:
            self._live = {k: s for k, s in self._live.items() if s.latest_time >= floor}
            self._pruned_before = floor
            self._outbox.append(("prune", self._step, floor))

    def _commit(self, article: StoryArticle, version: int, vec: dict, scores: list) -> StoryAssignment:
        """One step of the ordered sequence, exactly :meth:`StoryClusterer.add`'s outcome."""
        cl, cfg, st = self.clusterer, self.config, self.stats
        st.articles += 1
        if not article.article_id:
            raise ValueError("article has no article_id")
        if not math.isfinite(article.event_time):
            raise ValueError(f"article {article.article_id} has a non-finite event_time {article.event_time!r}")
        t = float(article.event_time)
        since = t - cfg.window_s
        prior = self.store.assigned_story(article.article_id)
        if prior is not None or since < self._pruned_before:
            # a replay (changes nothing) or a late article: the single writer's full path; its
            # changes are the final story (joined, founded or merge survivor) and the retired ones
            st.full_steps += 1
            res = cl.add(article)
            if prior is not None:
                self._end_step((), (), None)
                return res
            live = {s.story_id: s for s in self.store.active(self._pruned_before)}
            for sid in res.merged:
                self._live.pop(sid, None)
            self._live.update(live)
            final = live.get(res.story_id)  # None: the story ends before the floor (stays pruned)
            views = [_view(final)] if final is not None else []
            retired = list(res.merged)
            self._end_step((res.story_id,), retired, ("fix", self._step, views, retired))
            return res
        self._prune(since)
        st.snapshot_lag += self._step - version
        ent_keys = {e[0] for e in article.entities}
        changed = self._changed_since(version)
        best_sid, best_score = None, -1.0
        reused = 0
        for s, sid in scores:
            if sid in changed:
                continue
            reused += 1
            if s > best_score or (s == best_score and sid < best_sid):
                best_sid, best_score = sid, s
        st.spec_scores += len(scores)
        st.spec_reused += reused
        rescored = 0
        for sid in changed:
            story = self._live.get(sid)
            if story is None or story.latest_time < since:
                continue
            s = cl._join_score(vec, ent_keys, story, t)
            if s is None:
                continue
            rescored += 1
            if s > best_score or (s == best_score and best_sid is not None and sid < best_sid):
                best_sid, best_score = sid, s
        st.rescored += rescored
        st.rescored_articles += rescored > 0
        if best_sid is not None and best_score >= cfg.join_threshold:
            story, created = self._live[best_sid], False
        else:
            story, created, best_score = StoryState(story_id="s" + article.article_id), True, 0.0
        cl._absorb(story, article, vec)
        cl._norms.pop(story.story_id, None)
        j = self._step
        if created:
            self._live[story.story_id] = story
            self.store.save(story, article.article_id)
            self._end_step((story.story_id,), (), ("fix", j, [_view(story)], []))
            return StoryAssignment(article.article_id, story.story_id, True, False, (), round(best_score, 6))
        if self.merge_checks == "sequencer":
            return self._merge_here(article, story, since, best_score)
        st.merge_checks += 1
        view = _view(story)
        self._flush()
        self._broadcast(("check", j, view, since))
        hits = [self._wait_hit(c, j) for c in self._conns]
        hits = [h for h in hits if h is not None]
        top = max(hits, key=lambda h: (h[0], h[1]), default=None)
        if top is None or top[0] < cfg.merge_threshold:
            self.store.save(story, article.article_id)
            self._end_step((story.story_id,), (), None)  # shards confirm the pending view themselves
            return StoryAssignment(article.article_id, story.story_id, False, False, (), round(best_score, 6))
        st.merge_fallbacks += 1  # a merge: the single writer's loop, on the sequencer's exact state
        return self._merge_here(article, story, since, best_score)

    def _merge_here(self, article: StoryArticle, story: StoryState, since: float, best_score: float):
        """The single writer's merge loop for the story ``article`` grew, then its save."""
        cl, j, t = self.clusterer, self._step, float(article.event_time)
        # the single writer's candidates bar the grown story (order is irrelevant: max by (score, id))
        others = [s for sid, s in self._live.items() if sid != story.story_id and s.latest_time >= since]
        story, merged, touched = cl._merge_converging(story, others, t, article.article_id)
        self.store.save(story, article.article_id)
        self._live[story.story_id] = story
        retired = [sid for sid in dict.fromkeys(touched) if sid != story.story_id]
        self._end_step((story.story_id,), retired, ("fix", j, [_view(story)], retired))
        return StoryAssignment(article.article_id, story.story_id, False, False, tuple(merged), round(best_score, 6))

    def _wait_hit(self, conn, j: int):
        """Reads ``conn`` up to step ``j``'s merge-check answer, keeping speculative scores."""
        while True:
            msg = conn.recv()
            if msg[0] == "hit":
                if msg[1] != j:
                    raise RuntimeError(f"shard protocol: answer for step {msg[1]}, expected {j}")
                return msg[2]
            self._keep_spec(msg)


__all__ = ["ShardStats", "ShardedStoryAssigner"]
