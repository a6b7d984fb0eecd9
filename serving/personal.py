"""The personal feed behind ``GET /v1/feed`` and the For You page (:class:`PersonalFeeds`).

A reader's page is their precomputed feed in serving form (:mod:`newsflow.storage.feed_page`), re-ranked on
request: breaking stories newer than the feed injected, blocks and the per-outlet cap applied
(:func:`newsflow.storage.feed_page.select`, the rules of :func:`newsflow.core.ranking.rerank.rerank`), and the
reader's :class:`~newsflow.serving.reader_view.ReaderView` rules: a read story only when it changed since the read,
no muted story, no story of a removed interest placed by inference. One Redis round trip reads the reader's
edition, blocks, follows and serving-only preferences, the serving form and the read marks: awaited on the
event loop through the app's ``redis.asyncio`` client (:meth:`PersonalFeeds.parts_async`), or in a worker thread
through the synchronous client (:meth:`PersonalFeeds.parts`). After it the page is a pure function of the bytes read,
the shared breaking set (:class:`BreakingSet`, read again every ``breaking_seconds``) and the query. The
breaking items' freshness scores are taken at the start of the current minute
(:data:`BREAKING_SCORE_STEP_SECONDS`), not at each refresh, so a reader's page (and its ETag) does not change
between refreshes that find the same stories, and two serving processes give the same page and ETag.
``GET /v1/feed`` keeps each answer (body and ETag) for ``page_seconds`` (:class:`RecentPages`; 1 s by default):
a reader asking again within that time gets it without a round trip or a re-rank (a preference change through
this process forgets it at once; any other change is seen at most ``page_seconds`` later).
Without a serving form the stored feed document is read, and without that the feed is built now
(:func:`newsflow.storage.feeds.build_user_feed`) and stored; with Redis unreachable, the edition's last
good snapshot is served (stale).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import NamedTuple

from starlette.concurrency import run_in_threadpool

from newsflow.core.ranking.article_type import story_article_type
from newsflow.core.ranking.decay import LAMBDA_BREAKING, decay_score
from newsflow.core.ranking.feeds import GLOBAL_EDITION, FeedConfig
from newsflow.core.ranking.front_page import banner_ok
from newsflow.core.ranking.rerank import injected_item
from newsflow.serving.pages import feed_page
from newsflow.serving.paging import Cursor, page_of
from newsflow.serving.reader_view import ReaderView
from newsflow.serving.resilience import REDIS_ERRORS, RedisBreaker, SnapshotStore
from newsflow.storage.feed_page import (
    FeedPage,
    compact_json,
    decode_feed_page,
    encode_feed_page,
    page_items,
    profile_fields,
    read_commands,
    read_for_request,
    select,
    write_user_feeds,
)
from newsflow.storage.feeds import build_user_feed
from newsflow.storage.ranking import (
    EXTRA_PREFERENCE_FIELDS,
    FEED_TTL_SECONDS,
    RankingStore,
    extras_from_values,
    user_from_hash,
)
from newsflow.storage.reader_state import decode_read

BREAKING_SCORE_STEP_SECONDS = 60.0
"""Breaking items injected into personal pages are scored at ``now - now % 60`` (UTC epoch s): at λ 0.5/h
(:data:`~newsflow.core.ranking.decay.LAMBDA_BREAKING`) a minute moves a score by at most 0.83% (e^(-0.5/60)), and
injected items are ordered by the time they became breaking, not by score
(:func:`~newsflow.core.ranking.rerank.newer_breaking`)."""

log = logging.getLogger("newsflow.serving")


class BreakingSet(NamedTuple):
    """The live breaking set as the personal feed injects it, shared by all readers
    (:meth:`PersonalFeeds.breaking_set`).

    Attributes:
      expires: ``time.monotonic()`` after which it is read again.
      since: ``{story_id: when it became breaking, UTC epoch s}``.
      items: ``{story_id: its feed item}`` (live, unmerged stories only).
      encoded: ``{story_id: compact JSON of the item as injected}``
        (:func:`newsflow.core.ranking.rerank.injected_item`).
    """

    expires: float
    since: dict
    items: dict
    encoded: dict


class RecentPages:
    """Readers' last ``/v1/feed`` answers ``(body bytes, ETag)`` per query, each kept ``seconds`` (0 disables).

    At most ``max_readers`` readers are kept (all dropped when full). Requests for the same reader and query
    that arrive while its answer is being made share that one (:meth:`get_or_make`).
    """

    def __init__(self, seconds: float, max_readers: int = 10_000, clock: Callable[[], float] = time.monotonic):
        self.seconds, self.max_readers, self._clock = seconds, max_readers, clock
        self._pages: dict[str, dict[tuple, tuple[float, bytes, str]]] = {}
        self._making: dict[tuple, asyncio.Future] = {}

    async def get_or_make(self, user: str, query: tuple, make: Callable[[], Awaitable]):
        """The kept answer to ``query`` (:meth:`get`), else what ``await make()`` returns (``make`` keeps it with
        :meth:`put` when it should be kept); while one ``make`` of ``(user, query)`` runs, other requests for it
        await that one instead of starting their own."""
        hit = self.get(user, query)
        if hit is not None:
            return hit
        key = (user, query)
        task = self._making.get(key)
        if task is None:
            task = self._making[key] = asyncio.ensure_future(make())
            task.add_done_callback(lambda _: self._making.pop(key, None))
        return await asyncio.shield(task)

    def get(self, user: str, query: tuple) -> tuple[bytes, str] | None:
        """The reader's answer to ``query`` while younger than ``seconds``, else ``None``."""
        hit = self._pages.get(user, {}).get(query)
        if hit is None or self._clock() >= hit[0]:
            return None
        return hit[1], hit[2]

    def put(self, user: str, query: tuple, body: bytes, etag: str) -> None:
        """Keeps the reader's answer to ``query``."""
        if self.seconds <= 0:
            return
        if user not in self._pages and len(self._pages) >= self.max_readers:
            self._pages = {}
        self._pages.setdefault(user, {})[query] = (self._clock() + self.seconds, body, etag)

    def forget(self, user: str) -> None:
        """Drops the reader's answers (their preferences changed)."""
        self._pages.pop(user, None)


def _view(user: str, fields: dict, reads: dict, hide_read: bool) -> ReaderView:
    """The reader's :class:`ReaderView` from the round trip's profile fields and raw read marks."""
    extras = extras_from_values([fields.get(f.encode()) for f in EXTRA_PREFERENCE_FIELDS])
    return ReaderView.of(user_from_hash(user, fields), extras, decode_read(reads or {}), hide_read=hide_read)


class PersonalFeeds:
    """Readers' personal pages (module docstring).

    Args:
      store: the ranking store over the synchronous client (worker-thread reads, feeds built on request).
      feed_config: feed-building knobs (feeds built on request; ``source_cap`` of the re-rank).
      breaker: the API's Redis circuit breaker (checked before, marked down after a Redis error).
      snapshots: the API's last good edition feeds (served when Redis is unreachable).
      now: the ranking clock, UTC epoch s (breaking scores, feeds built on request).
      breaking_seconds: how long the breaking set is kept in-process.
      page_seconds: how long a reader's ``/v1/feed`` answer is kept in-process (:attr:`pages`; 0 disables).
    """

    def __init__(
        self,
        store: RankingStore,
        feed_config: FeedConfig,
        breaker: RedisBreaker,
        snapshots: SnapshotStore,
        now: Callable[[], float],
        breaking_seconds: float,
        page_seconds: float = 0.0,
    ):
        self.store = store
        self.feed_config = feed_config
        self.breaker = breaker
        self.snapshots = snapshots
        self._now = now
        self.breaking_seconds = breaking_seconds
        self.pages = RecentPages(page_seconds)
        self._breaking_cache = BreakingSet(0.0, {}, {}, {})
        self._breaking_refresh: tuple[asyncio.AbstractEventLoop, asyncio.Task] | None = None

    def parts(
        self, user: str, edition_param: str, limit: int, hide_read: bool = False, cursor: Cursor | None = None
    ) -> tuple[dict, list | None, str]:
        """A reader's page: ``(payload without "stories", each story's compact JSON bytes, "")``; with Redis
        unreachable ``(the edition's snapshot payload, None, "redis-unavailable")``. Blocking (a worker thread).
        ``hide_read`` also drops read stories that changed since the read (:mod:`newsflow.serving.reader_view`);
        ``cursor`` picks a later page (:mod:`newsflow.serving.paging`; the payload's ``next_cursor`` names the next).
        """
        now = self._now()
        try:
            self.breaker.guard()
            fields, raw, reads = read_for_request(self.store.client, user, self.store.keys)
            view = _view(user, fields, reads, hide_read)
            return self._finish(user, edition_param, limit, now, raw, self.breaking_set(now), view, cursor)
        except REDIS_ERRORS as e:
            return self._down(user, edition_param, limit, e, cursor)

    async def parts_async(
        self,
        aredis,
        user: str,
        edition_param: str,
        limit: int,
        hide_read: bool = False,
        cursor: Cursor | None = None,
    ) -> tuple[dict, list | None, str]:
        """:meth:`parts` on the event loop: the round trip (the commands of
        :func:`~newsflow.storage.feed_page.read_commands`) through ``aredis`` (a ``redis.asyncio.Redis``); the
        breaking set's refresh (once per ``breaking_seconds``) and a feed that must be read another way or
        built go to the thread pool."""
        now = self._now()
        try:
            self.breaker.guard()
            pipe = aredis.pipeline(transaction=False)
            for command in read_commands(user, self.store.keys):
                pipe.execute_command(*command)
            values, raw, reads = await pipe.execute()
            fields = profile_fields(values)
            view = _view(user, fields, reads, hide_read)
            brk = self._breaking_cache
            if time.monotonic() >= brk.expires:
                brk = await self._refresh_breaking(now)
            done = self._from_form(user, edition_param, limit, raw, brk, view, cursor)
            if done is None:
                done = await run_in_threadpool(self._finish, user, edition_param, limit, now, raw, brk, view, cursor)
            return done
        except REDIS_ERRORS as e:
            return self._down(user, edition_param, limit, e, cursor)

    async def _refresh_breaking(self, now: float) -> BreakingSet:
        """:meth:`breaking_set` in the thread pool, one refresh at a time per event loop: requests that find the
        set expired while a refresh runs wait for that one (its answer is younger than ``breaking_seconds``)
        instead of each starting their own. With ``breaking_seconds`` 0 every request reads its own."""
        if self.breaking_seconds <= 0:
            return await run_in_threadpool(self.breaking_set, now)
        loop = asyncio.get_running_loop()
        running = self._breaking_refresh
        if running is None or running[0] is not loop or running[1].done():
            running = self._breaking_refresh = (loop, loop.create_task(run_in_threadpool(self.breaking_set, now)))
        return await asyncio.shield(running[1])

    def _down(self, user: str, edition_param: str, limit: int, e: Exception, cursor: Cursor | None = None):
        """The personal feed with Redis unreachable: the edition's snapshot (stale)."""
        self.breaker.mark_down()
        log.warning("redis unavailable for feed of %s: %s", user, e)
        edition = edition_param or GLOBAL_EDITION
        snap = self.snapshots.get(f"edition:{edition}") or self.snapshots.get(f"edition:{GLOBAL_EDITION}")
        page = feed_page("edition", edition, snap, limit, "redis-unavailable", cursor)
        page["user"] = user
        return page, None, "redis-unavailable"

    def _parse(self, user, edition_param, view, raw):
        """``(serving form or None, edition)``: the form is ``None`` when absent or unreadable."""
        edition = edition_param or view.profile.edition or GLOBAL_EDITION
        return self._decode_page(user, raw), edition

    def _from_form(self, user, edition_param, limit, raw, brk, view, cursor=None):
        """The page from the reader's serving form, without Redis, or ``None`` when the form is absent,
        unreadable or of another edition than asked (with no ``?edition=``, the reader's own: a form stored
        for another edition a request asked for is not their feed)."""
        page, edition = self._parse(user, edition_param, view, raw)
        if page is None or page.edition not in (None, edition):
            return None
        head, items = self._rerank(user, edition, limit, page, view, brk, cursor)
        return head, items, ""

    def _finish(self, user, edition_param, limit, now, raw, brk, view, cursor=None):
        """:meth:`parts` after the round trip (Redis errors propagate)."""
        page, edition = self._parse(user, edition_param, view, raw)
        if page is None:  # no serving form: the feed document (written without one), if any
            page = self._page_of_doc(user, self.store.read_feed_raw(self.store.keys.feed("user", user)))
        if page is None or page.edition not in (None, edition):
            doc = build_user_feed(self.store, self.store.user_profile(user), now, edition, self.feed_config)
            write_user_feeds(self.store.client, {user: doc}, FEED_TTL_SECONDS, self.store.keys)
            page = decode_feed_page(encode_feed_page(doc))
        head, items = self._rerank(user, edition, limit, page, view, brk, cursor)
        return head, items, ""

    def _rerank(self, user, edition, limit, page, view: ReaderView, brk, cursor=None) -> tuple[dict, list]:
        """The page's head and items: newer breaking stories injected, blocks and the outlet cap applied
        (:func:`newsflow.storage.feed_page.select`), and the reader's read, muted and removed-interest rules
        (:meth:`newsflow.serving.reader_view.ReaderView.for_you_keep`): a read story that changed is sent with
        ``"read": true`` and ``"new_since_read"``. A later page (``cursor``) selects as far as the page after
        it and starts after the cursor's story where the selection still holds it
        (:func:`newsflow.serving.paging.page_of`), so the pages of one feed version neither repeat nor skip."""
        inject = [
            (since, brk.items[sid])
            for sid, since in brk.since.items()
            if since > page.generated_at and sid in brk.items
        ]
        again: dict = {}  # index or story id -> (item, new reports) of read stories that changed

        def keep(candidate) -> bool:
            if isinstance(candidate, dict):
                item, key = candidate, candidate.get("story_id")
            else:
                sid, tps = page.ids[candidate], page.topics[candidate]
                if not (view.mutes or sid in view.reads or (view.dismiss and view.dismiss.intersection(tps))):
                    return True  # the common case: decided without parsing the item
                item, key = json.loads(page.items[candidate]), candidate
            ok, new = view.for_you_keep(item)
            if ok and new:
                again[key] = (item, new)
            return ok

        rules = view.mutes or view.reads or view.dismiss
        skip = cursor.offset if cursor is not None else 0
        picks = select(
            page,
            inject,
            view.profile,
            k=skip + 2 * limit + 1,  # room for the cursor's story having moved down by up to a page
            source_cap=self.feed_config.source_cap,
            keep=keep if rules else None,
        )
        picks, next_cursor = page_of(
            picks, cursor, limit, lambda p: page.ids[p] if isinstance(p, int) else p["story_id"]
        )
        items = page_items(page, picks, brk.encoded)
        for n, p in enumerate(picks):
            hit = again.get(p if isinstance(p, int) else p.get("story_id"))
            if hit is not None:
                items[n] = compact_json(dict(hit[0], read=True, new_since_read=hit[1]))
        head = {"user": user, "edition": edition, "generated_at": page.generated_at, "stale": False}
        head["count"] = len(items)
        head["next_cursor"] = next_cursor
        return head, items

    @staticmethod
    def _page_of_doc(user: str, raw: bytes | None) -> FeedPage | None:
        """The serving form of a stored feed document, or ``None`` (absent or unreadable: rebuilt)."""
        if raw is None:
            return None
        try:
            doc = json.loads(raw)
            return decode_feed_page(encode_feed_page(doc)) if isinstance(doc, dict) else None
        except (ValueError, KeyError, TypeError) as e:
            log.error("unreadable feed of %s (rebuilt): %s", user, e)
            return None

    @staticmethod
    def _decode_page(user: str, raw: bytes | None) -> FeedPage | None:
        if raw is None:
            return None
        try:
            return decode_feed_page(raw)
        except ValueError as e:
            log.error("unreadable feed page of %s (rebuilt): %s", user, e)
            return None

    def breaking_set(self, now: float) -> BreakingSet:
        """The live breaking set and its feed items (:class:`BreakingSet`): the stories of the breaking set
        that meet the banner rule at ``now`` (:func:`newsflow.core.ranking.front_page.banner_ok`), shared by all readers
        and cached in-process for ``breaking_seconds`` (the set changes every few minutes); items are scored
        at the start of ``now``'s minute (:data:`BREAKING_SCORE_STEP_SECONDS`)."""
        last = self._breaking_cache
        if time.monotonic() < last.expires:
            return last
        breaking = self.store.breaking(now)
        scored_at = now - now % BREAKING_SCORE_STEP_SECONDS
        items = {}
        if breaking:
            # the banner rule (newsflow.core.ranking.front_page): still over the breaking threshold in the
            # latest window ending within the last hour, and not evergreen
            ends = self.store.recent_windows("story", now, now - 3600.0)
            velocity = self.store.window_counts("story", ends[0], list(breaking)) if ends else {}
            for rec in self.store.get_stories(list(breaking)):
                if rec is None or rec.merged_into:
                    continue
                if not banner_ok(velocity.get(rec.story_id, 0), rec.topics, story_article_type(rec)):
                    continue
                items[rec.story_id] = dict(
                    rec.summary(),
                    breaking=True,
                    relevance=None,
                    score=decay_score(rec.authority, rec.earliest_time, scored_at, LAMBDA_BREAKING),
                )
        encoded = {sid: compact_json(injected_item(it)) for sid, it in items.items()}
        breaking = {sid: since for sid, since in breaking.items() if sid in items}
        self._breaking_cache = BreakingSet(time.monotonic() + self.breaking_seconds, breaking, items, encoded)
        return self._breaking_cache
