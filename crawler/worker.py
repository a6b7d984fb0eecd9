"""Crawl worker: asyncio fetch loop over the shared Redis frontier.

Run any number of workers (processes, machines) against one frontier. Each
worker leases one task per host at a time, checks robots.txt, fetches with
limits, parses feeds into new page tasks (deduplicated through the seen-URL
set), lands article pages (and, when a page cannot be fetched, the feed entry
as a feed-only document) through a :class:`newsflow.crawler.landing.Publisher`, and
reschedules feeds adaptively (:mod:`newsflow.crawler.schedule`).

Delivery is at-least-once up to the landing buffer: documents are published
before the lease is completed; a worker killed mid-fetch loses only its lease
(the task returns after ``lease_s``) and at most ``max_age_s`` of buffered
documents. Message sinks (Pub/Sub, Kafka; :mod:`newsflow.crawler.sinks`) confirm delivery
inside ``publish`` (run off the event loop); a publish that raises is counted
(``publish_failed``), dead-lettered (step ``publish``) and the task is retried
after :func:`newsflow.crawler.schedule.backoff_delay` (page refetched, published again), never
completed as done.

Politeness (times in seconds, due times UTC epoch seconds). One request to a
host at a time, and after every request to it, robots.txt included, the host
rests before the next one (the frontier's ``next_allowed``):

- the rest is ``min_host_delay_s``, raised to the robots.txt ``Crawl-delay``
  (or seconds per request of ``Request-rate``) capped at ``max_host_delay_s``;
- after a 429 or 503 the host rests at least its ``Retry-After`` (when usable),
  else ``ScheduleConfig.min_interval_s``, at most ``throttle_cap_s`` (24 h);
- when a task's host needs its robots.txt fetched first, that fetch is the
  task's request for this turn: the task goes back to its queue and its own
  request waits the rest like any other (``robots_then_requeued`` counter);
  when no rest is due after it (a zero ``min_host_delay_s``, no ``Crawl-delay``,
  no 429/503), the task's request follows at once on the same lease
  (``robots_then_fetched``), two Redis round trips fewer than a requeue and a claim;
- a robots.txt answered 5xx/429 or unreachable disallows the host until the
  policy expires (30 min, or a longer ``Retry-After``; :mod:`newsflow.crawler.robots`);
  one larger than the parsing limit (:data:`newsflow.crawler.robots.ROBOTS_MAX_BYTES`,
  RFC 9309 section 2.5) is not an error: only that much is fetched, the line the
  limit cuts is dropped and the rest is parsed as a 2xx file (``robots_truncated``
  counter).

Retries: a feed answered 429/503 waits :func:`newsflow.crawler.schedule.throttle_delay`
(from its poll interval, doubling, capped at 24 h, a longer ``Retry-After``
wins); other feed errors back off with :func:`newsflow.crawler.schedule.backoff_delay`.
A feed failing with a permanent kind (:data:`PERMANENT_FEED_ERRORS`: too large,
a refused content type or encoding, corrupt encoding, a redirect loop or too many
redirects, HTTP 410) is also dead-lettered (step ``feed``, reason = the kind) once
per run of that failure, as an unparseable feed (``invalid_feed``) is, so an
operator sees it; it stays scheduled with backoff.
Transient failures (timeouts, network errors, 5xx, 429) are only counted.
A page answered 429/503 retries at its ``Retry-After``, else after
``throttle_delay`` from ``min_interval_s``. A 304 refreshes the stored
``ETag``/``Last-Modified`` with the ones it carries; they are sent to the URL
that gave them (the last redirect target), not only to the feed's own URL.

Redis away: when the frontier's Redis stops answering (``REDIS_DOWN``), the worker logs
``redis unreachable at <where> (<error>), retrying in N s`` (logger ``newsflow.crawler.worker``,
WARNING), stops claiming, checks with ``PING`` after :data:`REDIS_RETRY_S` and resumes by itself
once it answers (``redis reachable again at <where>``; redis-py reconnects on the same URL). A
fetched page whose document was published keeps waiting to complete its lease, so it is not
fetched and landed again; other work interrupted by the outage is dropped and its task comes back
when its lease expires. Counter increments stay buffered meanwhile.

Identity (rules in :mod:`newsflow.core.urls`, "Article identity"): the seen set is keyed by
:func:`newsflow.core.urls.article_id`, so every spelling of one URL is one entry. When a page is
landed, the URL it is known by (:func:`newsflow.core.urls.choose_canonical` of the fetched URL and the
page's declared ``rel=canonical``/``og:url``, read by :func:`newsflow.core.extraction.page_canonical_url`
exactly as the pipeline reads it; :mod:`newsflow.crawler.canonical` reads it incrementally) and the URL it
was fetched from are marked seen, and the task URL,
the post-redirect URL and the fetched URL are stored as aliases of its id (:mod:`newsflow.storage.aliases`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import random
import re
import time
import uuid
from collections.abc import Callable
from urllib.parse import urljoin, urlsplit

import redis.exceptions

from newsflow.core.urls import article_id, canonicalize_url, choose_canonical, source_domain
from newsflow.crawler.canonical import page_declared_canonical
from newsflow.crawler.config import CrawlerConfig
from newsflow.crawler.feeds import FeedParseError, parse_feed, parse_news_sitemap
from newsflow.crawler.fetch import FEED_TYPES, PAGE_TYPES, Fetcher, FetchResult
from newsflow.crawler.frontier import Frontier, Task, describe_redis
from newsflow.crawler.metrics import FETCHES, fetch_outcome
from newsflow.crawler.robots import ROBOTS_MAX_BYTES, RobotsPolicy, parse_prefix
from newsflow.crawler.safety import UnsafeAddressError
from newsflow.crawler.schedule import (
    THROTTLE_STATUSES,
    ScheduleConfig,
    apply_skips,
    backoff_delay,
    next_interval,
    seed_prior,
    stable_unit,
    throttle_delay,
    update_rate,
)
from newsflow.crawler.thumbnails import Thumbnailer
from newsflow.schemas import RawDocument
from newsflow.storage.aliases import record_aliases
from newsflow.storage.thumbnails import ThumbnailStore

_HREF_RE = re.compile(rb"""<a\s[^>]*?href\s*=\s*["']([^"'>]+)["']""", re.I)
_SKIP_EXT = (".jpg", ".jpeg", ".png", ".gif", ".svg", ".css", ".js", ".pdf", ".zip", ".mp3", ".mp4", ".xml", ".ico")
TRANSIENT = frozenset({"timeout", "network"})
PERMANENT_FEED_ERRORS = frozenset(
    {
        "too_large",
        "bad_content_type",
        "unsupported_encoding",
        "bad_encoding",
        "redirect_loop",
        "too_many_redirects",
        "http_410",  # Gone (RFC 9110 15.5.11): "likely to be permanent"
    }
)
"""Feed fetch error kinds that retrying will not fix: dead-lettered (once per run of the same failure,
not at every poll) as well as backed off."""
REFUSAL_COUNTERS = ("robots_unreachable", "robots_disallowed")
REDIS_DOWN = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)
"""Errors meaning "Redis is not answering" (server killed, restarting, loading its data, network down)."""
REDIS_RETRY_S = (1.0, 2.0, 4.0, 8.0)
"""Seconds between the worker's checks that Redis answers again, the last one repeated."""

log = logging.getLogger(__name__)
HOUSEKEEPING_S = 0.05
"""Seconds between the worker's housekeeping turns: priority requests and registrations applied,
counters written, the landing buffer's age checked (the idle poll interval)."""


def run_async(main):
    """Runs the coroutine ``main`` to completion on uvloop when it is installed, else ``asyncio.run``.

    uvloop's event loop makes the crawler's socket I/O several times cheaper than the default
    loop (``benchmarks.crawl``); behaviour is the same. Returns what ``main`` returns.
    """
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)


def progress_counts(before: dict, after: dict) -> dict:
    """What happened between two :meth:`Frontier.stats` snapshots, for progress lines.

    Args:
      before: counters at the start (``{name: int}``).
      after: counters now.

    Returns:
      ``{"landed", "errors", "refused"}`` increments: landed documents (article pages plus
      feed-only documents), fetch errors (``feed_error:*`` and ``page_error:*``, which include
      address-safety refusals, kind ``unsafe_address``) and robots.txt refusals. Counters are
      shared by every worker of the frontier, so with several workers they cover all of them.
    """

    def delta(name: str) -> int:
        return int(after.get(name, 0)) - int(before.get(name, 0))

    errors = sum(delta(k) for k in after if k.startswith(("feed_error:", "page_error:")))
    return {
        "landed": delta("pages_landed") + delta("feed_only_landed"),
        "errors": errors,
        "refused": sum(delta(k) for k in REFUSAL_COUNTERS),
    }


def same_site_links(html: bytes, base_url: str, limit: int) -> list[str]:
    """Absolute same-host http(s) links of an HTML page (no fragments, no media), in page order.

    Args:
      html: page bytes.
      base_url: URL of the page (relative links resolve against it).
      limit: maximum number returned.
    """
    host = (urlsplit(base_url).hostname or "").lower()
    out, seen = [], {base_url.split("#")[0]}
    for m in _HREF_RE.finditer(html[:2_000_000]):
        href = m.group(1).decode("utf-8", "replace").strip()
        url = urljoin(base_url, href).split("#")[0]
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or (parts.hostname or "").lower() != host:
            continue
        if parts.path.lower().endswith(_SKIP_EXT) or url in seen:
            continue
        seen.add(url)
        out.append(url)
        if len(out) >= limit:
            break
    return out


class CrawlWorker:
    """One crawl worker process.

    Args:
      frontier: shared frontier.
      publisher: where RawDocuments go (e.g. :class:`newsflow.crawler.landing.LandingWriter`).
      config: limits, politeness and safety settings.
      schedule: adaptive schedule settings.
      worker_id: unique id (default: random).
      clock: UTC epoch seconds source.
      rng: random source for jitter.
      thumbnails: where the thumbnail step (:mod:`newsflow.crawler.thumbnails`) stores a landed page's pictures;
        ``None``: pictures are not fetched and pages land without thumbnail names.
    """

    def __init__(
        self,
        frontier: Frontier,
        publisher,
        config: CrawlerConfig = CrawlerConfig(),
        schedule: ScheduleConfig = ScheduleConfig(),
        worker_id: str = "",
        clock=time.time,
        rng: random.Random | None = None,
        thumbnails: ThumbnailStore | None = None,
    ):
        self.frontier = frontier
        self.thumbnails = thumbnails
        self._thumbnailer: Thumbnailer | None = None
        self.publisher = publisher
        self.config = config
        self.schedule = schedule
        self.worker_id = worker_id or f"w-{uuid.uuid4().hex[:10]}"
        self.clock = clock
        self.rng = rng or random.Random()
        self.fetcher: Fetcher | None = None
        self._robots: dict[str, RobotsPolicy] = {}
        self._counts: dict[str, int] = {}  # counter increments not yet written to Redis
        self._tails: set[asyncio.Task] = set()  # page tails running (see _start_tail)
        self._tail_slots: asyncio.Semaphore | None = None  # set while run() runs
        self._tail_error: BaseException | None = None
        self._stop: asyncio.Event | None = None
        self._redis_wait: asyncio.Future | None = None  # set while Redis is away (see _redis_gone)
        self.processed = 0

    def _count(self, name: str, by: int = 1) -> None:
        """Adds to a frontier counter (``Keys.crawl_stats``); written by :meth:`flush_counters`."""
        self._counts[name] = self._counts.get(name, 0) + by

    def flush_counters(self) -> None:
        """Writes the buffered counter increments (one pipeline, :meth:`Frontier.incr_many`).

        It runs every :data:`HOUSEKEEPING_S` seconds, before every progress report and when the loop
        ends, so counters lag the work by well under a second (they are statistics; no decision reads
        them). When Redis is away the increments stay buffered for the next turn.
        """
        counts, self._counts = self._counts, {}
        try:
            self.frontier.incr_many(counts)
        except Exception:
            for name, by in counts.items():  # kept for the next turn
                self._counts[name] = self._counts.get(name, 0) + by
            raise

    def stop(self) -> None:
        """Asks a running :meth:`run` to finish the work in hand and return (call it on the worker's event loop)."""
        if self._stop is not None:
            self._stop.set()

    # ------------------------------------------------------------------ loop
    async def run(
        self,
        max_tasks: int | None = None,
        duration_s: float | None = None,
        idle_exit_s: float | None = None,
        poll_s: float = 0.05,
        progress: Callable[[dict], None] | None = None,
        progress_every_s: float = 5.0,
    ) -> dict:
        """Crawls until ``max_tasks`` tasks are done, ``duration_s`` passes, or nothing was due for ``idle_exit_s``.

        Args:
          max_tasks: stop after this many tasks (``None``: no limit).
          duration_s: stop after this many seconds of wall time.
          idle_exit_s: stop after this many seconds with nothing due and nothing in flight.
          poll_s: sleep between claims when nothing is due, seconds.
          progress: called every ``progress_every_s`` seconds (and once at the end) with
            ``{"elapsed_s", "processed", "landed", "errors", "refused", "pending"}`` (see
            :func:`progress_counts`; ``pending`` = queued plus leased tasks).
          progress_every_s: seconds between progress calls.

        Returns:
          ``{"processed": int}`` plus the frontier counters.
        """
        self.fetcher = Fetcher(self.config, clock=self.clock)
        if self.thumbnails is not None:
            self._thumbnailer = Thumbnailer(self.fetcher, self.thumbnails, self._picture_dead_letter)
        start = time.monotonic()
        stats_at_start = self.frontier.stats() if progress is not None else {}

        def report() -> None:
            try:
                self.flush_counters()
                counts = progress_counts(stats_at_start, self.frontier.stats())
                pending = self.frontier.pending()
            except REDIS_DOWN:  # no line while Redis is away (the waiting is logged)
                return
            progress(
                {
                    "elapsed_s": round(time.monotonic() - start, 1),
                    "processed": self.processed,
                    **counts,
                    "pending": pending,
                }
            )

        async def reporter():
            while not stop.is_set():
                try:
                    await asyncio.wait_for(stop.wait(), progress_every_s)
                except TimeoutError:
                    report()

        last_work = [time.monotonic()]
        inflight = [0]
        stop = self._stop = asyncio.Event()
        self._tail_slots = asyncio.Semaphore(max(4, 2 * self.config.concurrency))
        self._tail_error = None
        housekeeping_at = [0.0]  # monotonic time of the last priorities/flush turn

        async def loop(i: int):
            while not stop.is_set():
                if max_tasks is not None and self.processed >= max_tasks:
                    stop.set()
                    break
                if duration_s is not None and time.monotonic() - start >= duration_s:
                    stop.set()
                    break
                if self._redis_wait is not None:  # another loop found Redis away: wait with it
                    await asyncio.shield(self._redis_wait)
                    continue
                try:
                    await turn(i)
                except REDIS_DOWN as e:
                    await self._redis_gone(e)

        async def turn(i: int) -> None:
            now = self.clock()
            mono = time.monotonic()
            if i == 0 and mono - housekeeping_at[0] >= HOUSEKEEPING_S:
                # priority requests, registrations, counters and the landing buffer's age: every
                # HOUSEKEEPING_S, not every turn
                housekeeping_at[0] = mono
                self.frontier.apply_priorities(now)
                self.flush_counters()
                await self._maybe_flush_publisher()
            tasks = self.frontier.claim(self.worker_id, now, self.config.lease_s, 1)
            if not tasks:
                idle = inflight[0] == 0 and not self._tails
                if idle_exit_s is not None and idle and time.monotonic() - last_work[0] >= idle_exit_s:
                    stop.set()
                    return
                await asyncio.sleep(poll_s)
                return
            last_work[0] = time.monotonic()
            inflight[0] += 1
            try:
                handled = await self.process(tasks[0])
            finally:
                inflight[0] -= 1
                last_work[0] = time.monotonic()
            if handled:
                self.processed += 1

        running = asyncio.get_running_loop()
        loops = [running.create_task(loop(i)) for i in range(self.config.concurrency)]
        try:
            await asyncio.gather(*loops, *([reporter()] if progress is not None else []))
        finally:
            stop.set()
            # when one loop failed, the others finish the task in hand first (a page they publish after the final
            # flush below would stay in the landing buffer while its lease completes: lost)
            await asyncio.gather(*loops, return_exceptions=True)
            while self._tails:  # every fetched page is published and its lease completed before exit
                await asyncio.gather(*self._tails, return_exceptions=True)
            self._tail_slots = None
            self.publisher.flush()
            self.flush_counters()
            await self.fetcher.aclose()
        if self._tail_error is not None:
            raise self._tail_error
        if progress is not None:
            report()
        return {"processed": self.processed, **self.frontier.stats()}

    async def _redis_gone(self, error: BaseException) -> bool:
        """Waits until Redis answers again after ``error`` (one of :data:`REDIS_DOWN`).

        One check runs at a time, whichever coroutine hit the error first; the others wait for it.
        Each failed check is logged (WARNING) with the time to the next one. Returns True once Redis
        answers ``PING``, False when the worker is stopping first.
        """
        if self._redis_wait is None:
            self._redis_wait = asyncio.ensure_future(self._until_redis_answers(error))
            self._redis_wait.add_done_callback(self._redis_back)
        return await asyncio.shield(self._redis_wait)

    def _redis_back(self, wait: asyncio.Future) -> None:
        if self._redis_wait is wait:
            self._redis_wait = None

    async def _until_redis_answers(self, error: BaseException) -> bool:
        where = describe_redis(self.frontier.r)
        for attempt in itertools.count():
            wait = REDIS_RETRY_S[min(attempt, len(REDIS_RETRY_S) - 1)]
            log.warning("redis unreachable at %s (%s), retrying in %g s", where, error, wait)
            if self._stop is not None:
                try:
                    await asyncio.wait_for(self._stop.wait(), wait)
                    return False  # stopping
                except TimeoutError:
                    pass
            else:
                await asyncio.sleep(wait)
            try:
                await asyncio.to_thread(self.frontier.r.ping)
            except REDIS_DOWN as e:
                error = e
                continue
            log.warning("redis reachable again at %s; crawling resumes", where)
            return True

    async def _start_tail(self, coro) -> None:
        """Runs ``coro`` (the rest of a fetched page's work) without holding the connection loop.

        A page's tail (publish, identity records, lease completion) is CPU and Redis work; the loop
        that fetched it claims its next task meanwhile, so fetching and post-processing overlap.
        The tail still completes the lease only after the document is published, as before
        (delivery and politeness unchanged: the host stays in flight until then). At most
        ``2 x concurrency`` tails run (the loop waits for a slot); :meth:`run` waits for all of
        them before it returns, and an exception in one stops the worker and is raised by
        :meth:`run`. Outside :meth:`run` the tail is awaited in place.
        """
        if self._tail_slots is None:
            await coro
            return
        await self._tail_slots.acquire()
        t = asyncio.get_running_loop().create_task(coro)
        self._tails.add(t)
        t.add_done_callback(self._tail_done)

    def _tail_done(self, t: asyncio.Task) -> None:
        self._tails.discard(t)
        if self._tail_slots is not None:
            self._tail_slots.release()
        if not t.cancelled() and isinstance(t.exception(), REDIS_DOWN):
            # Redis went away before the document was published (the failure path's dead letter): the task's
            # lease expires and it runs again; the loops notice the outage on their next call
            log.warning("page tail dropped, redis unreachable: %s", t.exception())
        elif not t.cancelled() and t.exception() is not None and self._tail_error is None:
            self._tail_error = t.exception()
            if self._stop is not None:
                self._stop.set()

    async def _maybe_flush_publisher(self) -> None:
        """Commits the landing buffer if it is old enough, off the event loop when a flush is due (file
        write, fsync, upload); publishers without ``maybe_flush`` are skipped.

        Publishers with a cheap ``flush_due()`` (:class:`newsflow.crawler.landing.LandingWriter`) are asked
        first, so the thread hop happens only for a real flush; others are called in place.
        """
        mf = getattr(self.publisher, "maybe_flush", None)
        if mf is None:
            return
        due = getattr(self.publisher, "flush_due", None)
        if due is None:
            mf()
        elif due():
            await asyncio.to_thread(mf)

    # ------------------------------------------------------------------ robots
    async def robots_policy(self, url: str) -> RobotsPolicy:
        """robots.txt policy for ``url``'s scheme/host/port (memory, then Redis, then fetched)."""
        pol, _ = await self._robots_policy(url)
        return pol

    async def _robots_policy(self, url: str) -> tuple[RobotsPolicy, FetchResult | None]:
        """The robots.txt policy for ``url`` and the robots.txt fetch result when it was requested just now (the
        new policy is then shared with other workers through Redis, :meth:`Frontier.robots_put`)."""
        parts = urlsplit(url)
        key = f"{parts.scheme}://{parts.netloc.lower()}"
        now = self.clock()
        pol = self._robots.get(key)
        if pol is not None and pol.expires_at > now:
            return pol, None
        cached = self.frontier.robots_get(key)
        if cached:
            pol = RobotsPolicy.from_json(cached)
            if pol.expires_at > now:
                self._robots[key] = pol
                return pol, None
        robots_url = key + "/robots.txt"
        res = await self._fetch("robots", robots_url, prefix_limit=ROBOTS_MAX_BYTES)
        if res.error_kind == "unsafe_address" and res.refused_url in ("", robots_url):
            # the host itself is refused by the safety guard: not the site's verdict, nothing stored (a robots.txt
            # that redirects to a refused address is the site's doing: "unreachable" below, stored like any other)
            raise UnsafeAddressError(res.error)
        # network error, timeout or redirect trouble: "unreachable" (disallow for a while)
        status = 0 if res.error_kind else res.status
        body = res.body or b""
        if res.truncated:  # past the parsing limit (RFC 9309 2.5): the prefix, without its cut last line
            body = parse_prefix(body, truncated=True)
            self._count("robots_truncated")
        error = ""
        if res.error_kind:  # kept on the policy and counted, so the refusals it causes say why
            error = f"{res.error_kind}: {res.error}"
            self._count(f"robots_error:{res.error_kind}")
        pol = RobotsPolicy.from_fetch(key, status, body, now, retry_after_s=res.retry_after_s, error=error)
        self._robots[key] = pol
        self._count("robots_fetched")
        self.frontier.robots_put(key, pol.to_json(), pol.expires_at - now)
        return pol, res

    async def _fetch(self, kind: str, url: str, *args, **kwargs) -> FetchResult:
        """:meth:`Fetcher.fetch`, counted in ``newsflow_crawl_fetches_total`` (``kind``: robots, feed, page)."""
        res = await self.fetcher.fetch(url, *args, **kwargs)
        FETCHES.labels(kind, fetch_outcome(res)).inc()
        return res

    def _host_delay(self, pol: RobotsPolicy, result: FetchResult | None = None) -> float:
        """Seconds the host must rest after a request (module doc, "Politeness")."""
        delay = self.config.min_host_delay_s
        cd = pol.crawl_delay(self.config.robots_agent)
        if cd:
            delay = max(delay, min(cd, self.config.max_host_delay_s))
        if result is not None and not result.error_kind and result.status in THROTTLE_STATUSES:
            pause = self.schedule.min_interval_s if result.retry_after_s is None else result.retry_after_s
            delay = max(delay, min(pause, self.schedule.throttle_cap_s))
        return delay

    # ------------------------------------------------------------------ tasks
    async def process(self, task: Task) -> bool:
        """Fetches and handles one leased task, then completes its lease.

        Returns:
          False when only robots.txt was requested and the task went back to its queue
          to wait out the host delay; True when the task itself was handled.
        """
        now = self.clock()
        try:
            pol, robots_res = await self._robots_policy(task.url)
        except UnsafeAddressError as e:
            self._refuse_unsafe(task, now, str(e))
            return True
        except Exception as e:  # defensive: a robots bug must not kill the worker or leak the lease
            self.frontier.dead_letter("robots", "robots_error", f"{type(e).__name__}: {e}", now, task.url)
            self.frontier.complete(
                task,
                self.worker_id,
                self.clock(),
                self.config.min_host_delay_s,
                now + self.schedule.backoff_base_s if task.kind != "page" else None,
            )
            return True
        delay = self._host_delay(pol, robots_res)
        if robots_res is not None and pol.allowed(task.url, self.config.robots_agent):
            if delay > 0:
                # robots.txt was a request to this host too: the task waits out the host delay in its queue
                self._count("robots_then_requeued")
                self.frontier.complete(task, self.worker_id, self.clock(), delay, self.clock())
                return False
            # no rest is due after it (min_host_delay_s 0, no Crawl-delay, no throttling answer): the task's own
            # request follows at once on the same lease, as it would right after a requeue and a claim
            self._count("robots_then_fetched")
        if not pol.allowed(task.url, self.config.robots_agent):
            reason = "robots_unreachable" if pol.disallow_all else "robots_disallowed"
            self._count(reason)
            if task.kind == "page":
                if await self._land_feed_only(task, now, reason, pol.refusal, delay=delay):
                    self.frontier.complete(task, self.worker_id, self.clock(), delay, None)
            else:
                retry = pol.expires_at if pol.disallow_all else now + self.schedule.max_interval_s
                self._complete_feed_failure(task, now, delay, reason, f"{pol.refusal}: {task.url}", min_due=retry)
            return True
        if task.kind == "page":
            await self._process_page(task, delay)
        else:
            await self._process_feed(task, delay)
        return True

    def _refuse_unsafe(self, task: Task, now: float, error: str) -> None:
        """Reports a task whose host the address-safety guard refuses (error kind ``unsafe_address``).

        Nothing is fetched (not even robots.txt). A page is dead-lettered (not landed: its URL
        points at a forbidden address); a feed is backed off for at least ``max_interval_s``.
        """
        self._count("unsafe_address")
        detail = f"safety guard refused {task.url}: {error}"
        if task.kind == "page":
            self._count("page_error:unsafe_address")
            self.frontier.dead_letter("page", "unsafe_address", detail, now, task.url)
            self.frontier.complete(task, self.worker_id, self.clock(), self.config.min_host_delay_s, None)
        else:
            self._count("feed_error:unsafe_address")
            self.frontier.dead_letter(task.kind, "unsafe_address", detail, now, task.url)
            self._complete_feed_failure(
                task,
                now,
                self.config.min_host_delay_s,
                "unsafe_address",
                detail,
                min_due=now + self.schedule.max_interval_s,
            )

    async def _process_feed(self, task: Task, delay: float) -> None:
        st = task.state
        res = await self._fetch(
            "feed",
            task.url,
            st.get("etag", ""),
            st.get("last_modified", ""),
            FEED_TYPES,
            validators_url=st.get("validators_url", ""),
        )
        now = self.clock()
        delay = max(delay, self._host_delay(self._robots_for(task.url), res))
        if res.error_kind or not (200 <= res.status < 300 or res.status == 304):
            kind = res.error_kind or f"http_{res.status}"
            self._count(f"feed_error:{kind}")
            if kind in PERMANENT_FEED_ERRORS and task.state.get("last_status") != kind:
                # the first failure of this kind since the feed last answered otherwise: one record per run
                # of failures, not one per poll (the feed's state keeps last_error and its failure count)
                self.frontier.dead_letter("feed", kind, res.error or f"HTTP {res.status}", now, task.url)
            self._complete_feed_failure(
                task,
                now,
                delay,
                kind,
                res.error or f"HTTP {res.status}",
                retry_after=res.retry_after_s,
                throttled=not res.error_kind and res.status in THROTTLE_STATUSES,
            )
            return
        fields = {"last_fetch": now, "last_status": res.status, "failures": 0, "last_error": "", "backoff_until": ""}
        published, marks = [], []  # marks: article URLs marked seen with the completion
        if res.status == 304:
            new_items, first = 0, False
            hints = {}
            self._count("feed_not_modified")
            # a 304 carries the representation's current validators (RFC 9110 15.4.5): the next poll sends them
            for name, header in (("etag", "etag"), ("last_modified", "last-modified")):
                if res.headers.get(header, "").strip():
                    fields[name] = res.headers[header].strip()
        else:
            fields["etag"] = res.headers.get("etag", "")
            fields["last_modified"] = res.headers.get("last-modified", "")
            fields["validators_url"] = res.final_url  # where the validators came from (after redirects)
            try:
                if task.kind == "sitemap":
                    entries, children = parse_news_sitemap(res.body, res.final_url)
                    for child in children:
                        self.frontier.add(child, "sitemap", now, source=task.url)
                    parsed_title, parsed_language, hints = "", "", {}
                else:
                    parsed = parse_feed(res.body, res.final_url, res.headers.get("content-type", ""))
                    entries, parsed_title, parsed_language = parsed.entries, parsed.title, parsed.language
                    hints = {
                        "ttl_s": parsed.ttl_s,
                        "update_period_s": parsed.update_period_s,
                        "skip_hours": sorted(parsed.skip_hours),
                        "skip_days": sorted(parsed.skip_days),
                    }
                    if parsed.warning:
                        self._count("feed_warning")
                    if parsed.unresolved_dates:
                        # a zone name nobody can resolve: those entries take the fetch time (never UTC)
                        self._count("entry_date_zone_unknown", parsed.unresolved_dates)
            except FeedParseError as e:
                self._count("feed_error:invalid_feed")
                self.frontier.dead_letter("feed", "invalid_feed", str(e), now, task.url)
                self._complete_feed_failure(task, now, delay, "invalid_feed", str(e))
                return
            fields["title"] = parsed_title
            fields["hints"] = json.dumps(hints)
            linked = self._linked_entries(task, entries, now)
            # the seen checks (not marking), the new entries' tasks, the feed's item-id set, and the seen marks
            # only with the completion: a failure anywhere in between leaves entries unmarked, queued again by
            # the next fetch, never marked seen without a task
            seen = self.frontier.seen([e.url for e in linked])
            adds = self._entry_tasks(task, linked, seen, parsed_title, now, parsed_language)
            self.frontier.add_many(adds)
            new_items, first = self.frontier.count_new_items(task.tid, [e.guid or e.url or "" for e in entries])
            marks = [a["url"] for a in adds]
            published = [e.published_time for e in entries]
            fields["items"] = len(entries)
        hints = hints or json.loads(st.get("hints") or "{}")
        if first or not st.get("alpha"):
            alpha, beta = seed_prior(self.schedule, published, hints.get("ttl_s"), hints.get("update_period_s"))
        else:
            last = float(st.get("last_fetch") or now)
            alpha, beta = update_rate(float(st["alpha"]), float(st["beta"]), new_items, now - last, self.schedule)
        interval = next_interval(alpha, beta, self.schedule, self.rng)
        due = apply_skips(now + interval, hints.get("skip_hours", ()), hints.get("skip_days", ()))
        fields.update(
            alpha=repr(alpha),
            beta=repr(beta),
            interval_s=round(interval, 1),
            new_items=new_items,
            next_due=round(due, 3),
            fetches=int(st.get("fetches") or 0) + 1,
        )
        ok = self.frontier.complete(
            task, self.worker_id, now, delay, due, fields, seen_urls=marks, seen_ttl_s=self.config.seen_ttl_s
        )
        self._count("feeds_fetched" if ok else "lease_lost")

    def _robots_for(self, url: str) -> RobotsPolicy:
        parts = urlsplit(url)
        return self._robots[f"{parts.scheme}://{parts.netloc.lower()}"]

    def _linked_entries(self, task: Task, entries, now: float) -> list:
        """The entries with a usable link; the others are dead-lettered (step ``feed``) and counted."""
        linked = []
        for e in entries:
            if not e.url:
                self._count("entry_without_link")
                self.frontier.dead_letter("feed", "entry_without_link", (e.title or e.guid or "")[:300], now, task.url)
                continue
            try:
                canonicalize_url(e.url)
            except ValueError as err:
                self.frontier.dead_letter("feed", "bad_url", str(err), now, task.url)
                continue
            linked.append(e)
        return linked

    def _entry_tasks(
        self, task: Task, linked: list, seen: list[bool], feed_title: str, now: float, feed_language: str = ""
    ) -> list[dict]:
        """The page tasks (:meth:`Frontier.add_many` items) of the linked entries not seen before, counted."""
        source_name = task.state.get("source_name") or feed_title or None
        adds = []
        for e, was_seen in zip(linked, seen, strict=True):
            if was_seen:
                continue
            meta = {
                "title": e.title,
                "summary": e.summary,
                "published_time": e.published_time,
                "source_name": source_name,
                "feed_url": task.url,
            }
            if feed_language:
                meta["feed_language"] = feed_language
            adds.append({"url": e.url, "kind": "page", "due": now, "source": task.url, "depth": 0, "meta": meta})
        if len(linked) > len(adds):
            self._count("entry_seen_before", len(linked) - len(adds))
        if adds:
            self._count("pages_enqueued", len(adds))
        return adds

    def _complete_feed_failure(
        self,
        task: Task,
        now: float,
        delay: float,
        kind: str,
        error: str,
        retry_after: float | None = None,
        min_due: float | None = None,
        throttled: bool = False,
    ) -> None:
        """Reschedules a failed feed: error backoff, or for a 429/503 ``throttle_delay`` from its poll interval."""
        failures = int(task.state.get("failures") or 0) + 1
        if throttled:
            interval = float(task.state.get("interval_s") or self.schedule.default_interval_s)
            wait = throttle_delay(failures, interval, self.schedule, stable_unit(f"{task.tid}|{failures}"), retry_after)
        else:
            wait = backoff_delay(failures, self.schedule, self.rng, retry_after)
        due = now + wait
        if min_due is not None:
            due = max(due, min_due)
        fields = {
            "last_fetch": now,
            "last_status": kind,
            "failures": failures,
            "last_error": error[:300],
            "backoff_until": round(due, 3),
            "next_due": round(due, 3),
            "errors": int(task.state.get("errors") or 0) + 1,
        }
        self.frontier.complete(task, self.worker_id, now, delay, due, fields)

    async def _process_page(self, task: Task, delay: float) -> None:
        res = await self._fetch("page", task.url, accept_types=PAGE_TYPES)
        now = self.clock()
        delay = max(delay, self._host_delay(self._robots_for(task.url), res))
        if res.ok:
            h = res.headers
            m = task.meta
            doc = RawDocument(
                url=res.final_url,
                source_domain=source_domain(res.final_url),
                fetch_time=res.fetch_time,
                http_status=res.status,
                content_type=h.get("content-type", ""),
                # the feed's declared language stands in when the server declares none
                content_language=h.get("content-language", "") or m.get("feed_language", ""),
                etag=h.get("etag", ""),
                last_modified=h.get("last-modified", ""),
                body=res.body,
                title=m.get("title"),
                summary=m.get("summary"),
                published_time=m.get("published_time"),
                source_name=m.get("source_name"),
                feed_url=m.get("feed_url"),
            )
            await self._start_tail(self._page_tail(task, res, doc, now, delay))
            return
        kind = res.error_kind or f"http_{res.status}"
        self._count(f"page_error:{kind}")
        attempts = int(task.meta.get("attempts") or 0) + 1
        transient = kind in TRANSIENT or res.status >= 500 or res.status == 429
        if transient and attempts < self.config.page_attempts:
            if res.status in THROTTLE_STATUSES and res.retry_after_s is not None:
                wait = min(res.retry_after_s, self.schedule.throttle_cap_s)
            elif res.status in THROTTLE_STATUSES:
                wait = throttle_delay(
                    attempts, self.schedule.min_interval_s, self.schedule, stable_unit(f"{task.tid}|{attempts}")
                )
            else:
                wait = backoff_delay(attempts, self.schedule, self.rng, res.retry_after_s)
            meta = dict(task.meta, attempts=attempts, last_error=kind)
            self.frontier.complete(
                task, self.worker_id, now, delay, now + wait, {"meta": json.dumps(meta, ensure_ascii=False)}
            )
            return
        if await self._land_feed_only(task, now, kind, res.error or f"HTTP {res.status}", delay):
            self.frontier.complete(task, self.worker_id, now, delay, None)

    def _picture_dead_letter(self, step: str, reason: str, detail: str, url: str) -> None:
        """Records a picture the thumbnail step could not have; with Redis away it is only counted (buffered
        ``picture_dead_letter_unrecorded``): a missing picture must not hold its page back."""
        try:
            self.frontier.dead_letter(step, reason, detail, self.clock(), url)
        except REDIS_DOWN:
            self._count("picture_dead_letter_unrecorded")

    async def _page_tail(self, task: Task, res: FetchResult, doc: RawDocument, now: float, delay: float) -> None:
        """A fetched page's work after the fetch: publish, identity, links, lease completion."""
        body, ctype = res.body or b"", res.headers.get("content-type", "")
        if self._thumbnailer is not None:
            pictures = await self._thumbnailer.page_pictures(body, ctype, res.final_url)
            doc = doc._replace(image_thumb=pictures.image_thumb or None, icon_thumb=pictures.icon_thumb or None)
        # the declared canonical is read in the publish's thread hop (one hop per page, not two)
        published, declared = await self._publish(
            task, [doc], now, delay, then=lambda: page_declared_canonical(body, ctype)
        )
        if not published:
            return
        self._count("pages_landed")
        while True:  # the document is out: complete the lease even across a Redis outage (no second landing)
            try:
                self._finish_page(task, res, declared, now, delay)
                return
            except REDIS_DOWN as e:
                if not await self._redis_gone(e):
                    return  # stopping: the lease expires and the page is fetched again

    def _finish_page(self, task: Task, res: FetchResult, declared: str, now: float, delay: float) -> None:
        """A published page's Redis work (idempotent, so it may run again): aliases, links, seen marks, completion."""
        m = task.meta
        seen = self._record_identity(task, res, declared)
        if self.config.follow_links and task.depth < self.config.follow_links:
            # the page's own URLs are seen before its links are checked (a link to its canonical is not new)
            self.frontier.mark_seen_many(seen, self.config.seen_ttl_s)
            links = []
            for link in same_site_links(res.body, res.final_url, self.config.max_links_per_page):
                try:
                    canonicalize_url(link)
                    article_id(link)
                except ValueError:  # a link no URL rules accept (a port out of range, ...): skipped, counted
                    self._count("bad_link")
                    continue
                links.append(link)
            # as a feed's entries: checked without marking, added, and marked seen with the lease completion
            meta = {"source_name": m.get("source_name"), "feed_url": m.get("feed_url")}
            adds = [
                {"url": link, "kind": "page", "due": now, "source": task.url, "depth": task.depth + 1, "meta": meta}
                for link, was_seen in zip(links, self.frontier.seen(links), strict=True)
                if not was_seen
            ]
            self.frontier.add_many(adds)
            if adds:
                self._count("links_enqueued", len(adds))
            seen = [a["url"] for a in adds]
        ok = self.frontier.complete(
            task, self.worker_id, now, delay, None, seen_urls=seen, seen_ttl_s=self.config.seen_ttl_s
        )
        if not ok:
            self._count("lease_lost")

    def _record_identity(self, task: Task, res: FetchResult, declared: str) -> list[str]:
        """Stores a landed page's other URLs as aliases (module doc; ``declared``: the canonical URL the page
        declares, :func:`newsflow.crawler.canonical.page_declared_canonical`); returns its canonical and fetched
        URLs, to be marked seen with the page's completion."""
        known_as = choose_canonical(res.final_url, declared)
        try:
            target = article_id(known_as)
        except ValueError:
            return []
        added = record_aliases(
            self.frontier.r, self.frontier.keys, target, [task.url, res.final_url], self.config.alias_ttl_s
        )
        if added:
            self._count("aliases_recorded", added)
        return sorted({known_as, res.final_url})

    async def _publish(self, task: Task, docs: list, now: float, delay: float, then: Callable | None = None) -> tuple:
        """Publishes ``docs`` off the event loop; ``(True, then())`` once the sink accepted them.

        ``then`` (no arguments; exceptions propagate) runs in the same worker thread right after the
        publish succeeded, so CPU work on the page costs no second thread hop; without it the second
        item is None. On an exception from the sink it did not confirm delivery: the failure is counted
        (``publish_failed``) and dead-lettered (step ``publish``), and the task is put back
        to be fetched and published again after ``backoff_delay`` of its ``publish_failures``
        (seconds); returns ``(False, None)`` and the caller must not complete the task as done.
        """

        def publish_then() -> tuple:
            try:
                self.publisher.publish(docs)
            except Exception as e:  # noqa: BLE001 - any sink error means "not delivered": report and retry
                return False, e
            return True, None if then is None else then()

        published, value = await asyncio.to_thread(publish_then)
        if published:
            return True, value
        e = value  # the sink's exception
        failures = int(task.meta.get("publish_failures") or 0) + 1
        self._count("publish_failed")
        self.frontier.dead_letter("publish", "publish_failed", f"{type(e).__name__}: {e}"[:300], now, task.url)
        meta = dict(task.meta, publish_failures=failures)
        wait = backoff_delay(failures, self.schedule, self.rng)
        self.frontier.complete(
            task, self.worker_id, self.clock(), delay, now + wait, {"meta": json.dumps(meta, ensure_ascii=False)}
        )
        return False, None

    async def _land_feed_only(self, task: Task, now: float, reason: str, detail: str = "", delay: float = 0.0) -> bool:
        """Lands the feed entry without a body when its page cannot be fetched; else dead-letters it.

        Returns False when publishing failed (the task was put back for a retry by :meth:`_publish`).
        """
        m = task.meta
        if m.get("title") or m.get("summary"):
            doc = RawDocument(
                url=task.url,
                source_domain=source_domain(task.url),
                fetch_time=now,
                http_status=0,
                content_language=m.get("feed_language", ""),
                title=m.get("title"),
                summary=m.get("summary"),
                published_time=m.get("published_time"),
                source_name=m.get("source_name"),
                feed_url=m.get("feed_url"),
            )
            published, _ = await self._publish(task, [doc], now, delay)
            if not published:
                return False
            self._count("feed_only_landed")
        self.frontier.dead_letter("page", reason, detail or reason, now, task.url)
        return True
