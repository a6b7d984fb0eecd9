"""Feeds in Redis: candidates read from the ranking store, a reader's feed built from them, and one run of the feed
builder (scores, candidate pools and precomputed feeds). The ranking math is in :mod:`newsflow.core.ranking`.

The ``newsflow build-feeds`` command wraps it as a scheduled job; ``serving`` and ``newsflow demo``
call it directly. The steps are listed in :func:`build_feeds`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from newsflow.core.ranking.article_type import story_article_type
from newsflow.core.ranking.decay import decay_rate
from newsflow.core.ranking.feeds import (
    GLOBAL_EDITION,
    Candidates,
    FeedConfig,
    build_public_feeds,
    compute_pools,
    feed_doc,
    live_stories,
    rank,
)
from newsflow.core.ranking.personalize import (
    LearnedSignals,
    blocked_mask,
    history_weight,
    personal_signals,
    with_learned,
)
from newsflow.core.timeutil import epoch_or_iso_to_epoch
from newsflow.schemas import StoryRecord, UserProfile
from newsflow.storage.events import flush_events
from newsflow.storage.feed_page import write_user_feeds
from newsflow.storage.keys import EVENT_SHARDS, Keys
from newsflow.storage.models import load_learned, load_learned_many
from newsflow.storage.ranking import FEED_TTL_SECONDS, RankingStore, user_from_hash

USER_BATCH = 500
"""Readers per batch of ``build_feeds``: one pipeline of their profiles, two of their models, one of their feeds."""
ACTIVE_PAGE = 1000
"""Members per ``ZRANGEBYSCORE`` page when ``build_feeds`` walks the active-reader shards."""


def iter_active_readers(client, since: float, keys: Keys = Keys(), page: int = ACTIVE_PAGE):
    """Every reader with an event at or after ``since`` (UTC epoch s), shard by shard, each once.

    Reads the :data:`~newsflow.storage.keys.EVENT_SHARDS` shards ``Keys.active_users(k)`` in rounds of one
    pipeline (``ZRANGEBYSCORE since +inf LIMIT offset page`` for every shard not yet exhausted), so a run
    over ``n`` active readers takes about ``n / (256 · page) + 1`` round trips and holds one round in memory.

    Yields:
      Reader ids (str), in shard order, then score order within a shard.
    """
    offset = dict.fromkeys(range(EVENT_SHARDS), 0)
    while offset:
        pipe = client.pipeline(transaction=False)
        shards = sorted(offset)
        for k in shards:
            pipe.zrangebyscore(keys.active_users(k), float(since), "+inf", start=offset[k], num=page)
        for k, got in zip(shards, pipe.execute(), strict=True):
            yield from (u.decode() if isinstance(u, bytes) else str(u) for u in got)
            if len(got) < page:
                del offset[k]
            else:
                offset[k] += page


def _batches(items, n: int):
    batch = []
    for item in items:
        batch.append(item)
        if len(batch) == n:
            yield batch
            batch = []
    if batch:
        yield batch


def replay_clock(client, keys: Keys = Keys()) -> float | None:
    """The replay clock (UTC epoch s) that ``newsflow demo`` stores at ``Keys.replay_clock``, or ``None``.

    A replayed corpus has no "now" of its own: the demo sets this to the end of its replayed
    stream so that ranking, feeds and the API score its stories as if live at that moment.
    """
    raw = client.get(keys.replay_clock)
    return None if raw is None else float(raw)


def velocity_map(store: RankingStore, n: int = 500, now: float | None = None) -> dict[str, int]:
    """``story_id -> new articles`` in the latest trending window ending at or before ``now`` (UTC epoch s;
    ``None``: any) (empty when none)."""
    _, rows = store.latest_trending("story", n, now)
    return dict(rows)


def user_candidate_ids(
    store: RankingStore,
    profile: UserProfile,
    edition: str,
    velocity: Mapping[str, int],
    config: FeedConfig = FeedConfig(),
    pool_cache: dict | None = None,
) -> list[str]:
    """Candidate story ids for a reader.

    A reader with history gets the edition pool, the global pool's top
    ``global_extra`` and the top ``trending_extra`` trending stories. A cold-start reader
    (no clicks) gets the edition's trending stories (trending ∩ edition pool) plus the
    global pool's top ``global_extra``. Both get the top ``follow_extra`` of each followed
    topic's pool. Order: first occurrence. ``pool_cache`` (a dict a batch job keeps for one run) memoizes
    the pool reads, so readers of one run share them.
    """

    def pool(kind: str, name: str, n: int) -> list[tuple[str, float]]:
        if pool_cache is None:
            return store.pool(kind, name, n)
        if (kind, name, n) not in pool_cache:
            pool_cache[kind, name, n] = store.pool(kind, name, n)
        return pool_cache[kind, name, n]

    ed_pool = [sid for sid, _ in pool("edition", edition or GLOBAL_EDITION, config.pool_size)]
    glob = [sid for sid, _ in pool("edition", GLOBAL_EDITION, config.global_extra)]
    trending = sorted(velocity, key=lambda sid: (-velocity[sid], sid))[: config.trending_extra]
    if history_weight(profile.clicks) == 0:
        ed_set = set(ed_pool)
        ids = [sid for sid in trending if sid in ed_set] + glob
    else:
        ids = ed_pool + glob + trending
    for topic in sorted(profile.follow_topics):
        ids += [sid for sid, _ in pool("topic", topic, config.follow_extra)]
    seen, out = set(), []
    for sid in ids:
        if sid not in seen:
            seen.add(sid)
            out.append(sid)
    return out


def build_user_feed(
    store: RankingStore,
    profile: UserProfile,
    now: float,
    edition: str = "",
    config: FeedConfig = FeedConfig(),
    k: int | None = None,
    stories_by_id: Mapping[str, StoryRecord] | None = None,
    shared: tuple | None = None,
    learned: LearnedSignals | None = None,
    pool_cache: dict | None = None,
) -> dict:
    """A reader's personal feed document (MMR over personal relevance, blocks removed).

    Args:
      store: Redis-backed ranking store.
      profile: the reader (an unknown reader has an empty profile: cold start).
      now: UTC epoch seconds.
      edition: edition to draw from; "" uses the profile's, else ``global``.
      config: feed knobs.
      k: items to keep (default ``config.user_k``).
      stories_by_id: already-loaded live stories (a batch job passes all of them); ids
        not in it are read from Redis.
      shared: ``(velocity, lambda overrides, breaking ids)`` already read for this ``now``
        (a batch job reads them once for all readers).
      learned: the reader's model signals already read (a batch job reads a batch's at once,
        :func:`newsflow.storage.models.load_learned_many`); ``None`` reads them.
      pool_cache: see :func:`user_candidate_ids`.

    Returns:
      Feed document with ``kind="user"`` and ``name=profile.user_id``.
    """
    edition = edition or profile.edition or GLOBAL_EDITION
    if learned is None:
        learned = load_learned(store.client, store.keys, profile.user_id)
    profile = with_learned(profile, learned)
    if shared is None:
        shared = (velocity_map(store, now=now), store.lambda_overrides(), set(store.breaking(now)))
    velocity, overrides, breaking_ids = shared
    ids = user_candidate_ids(store, profile, edition, velocity, config, pool_cache)
    if stories_by_id is not None:
        missing = [sid for sid in ids if sid not in stories_by_id]
        fetched = {s.story_id: s for s in live_stories(store.get_stories(missing), now)} if missing else {}
        stories = [stories_by_id.get(sid) or fetched.get(sid) for sid in ids]
        stories = [s for s in stories if s is not None]
    else:
        stories = live_stories(store.get_stories(ids), now) if ids else []
    cands = Candidates(stories, now, overrides, breaking_ids, velocity)
    if not len(cands):
        return feed_doc("user", profile.user_id, now, config.alpha, [])
    story_ids = [s.story_id for s in cands.stories]
    rel, why = personal_signals(
        cands.scores,
        cands.velocity,
        cands.embeddings,
        cands.topics,
        cands.sources,
        profile,
        story_ids,
        learned,
        authority=np.array([s.authority for s in cands.stories], dtype=np.float64),
        breaking=cands.breaking,
    )
    blocked = blocked_mask(cands.topics, cands.sources, profile)
    items = rank(cands, rel, k or config.user_k, config.alpha, config.source_cap, exclude=blocked)
    index = {sid: i for i, sid in enumerate(story_ids)}
    for item in items:
        i = index[item["story_id"]]
        lam, source, group = decay_rate(
            cands.topics[i], bool(cands.breaking[i]), overrides, story_article_type(cands.stories[i])
        )
        item["why"] = dict(why[i], decay={"lambda_per_hour": round(lam, 4), "source": source, "group": group})
    doc = feed_doc("user", profile.user_id, now, config.alpha, items)
    doc["edition"] = edition
    return doc


def latest_story_time(store: RankingStore) -> float | None:
    """The newest ``latest_time`` over all stories, or ``None`` with no stories."""
    ids = list(store.iter_story_ids())
    times = [s.latest_time for s in store.get_stories(ids) if s is not None]
    return max(times) if times else None


def parse_now(value: str | None, store: RankingStore, clock: Callable[[], float] = time.time) -> float:
    """Resolves ``--now``: ``None`` → the replay clock when one is set (see :func:`replay_clock`),
    else the clock; ``wall`` → the clock; ``latest`` → newest story time; a number → UTC epoch
    seconds; else an ISO 8601 time (naive means UTC).

    Raises:
      ValueError: unparsable value, not a finite time between 1970 and the year 9999 (``nan``, ``inf``,
        ``1e30``), or ``latest`` with no stories.
    """
    t = _parse_now(value, store, clock)
    if not (math.isfinite(t) and 0.0 <= t <= MAX_EPOCH_S):
        raise ValueError(f"--now must be a time between 1970 and 9999 (UTC epoch seconds), got {value!r}")
    return t


MAX_EPOCH_S = 253402300799.0  # 9999-12-31T23:59:59Z


def _parse_now(value: str | None, store: RankingStore, clock: Callable[[], float]) -> float:
    if value is None or value == "":
        replay = replay_clock(store.client, store.keys)
        return float(clock()) if replay is None else replay
    if value == "wall":
        return float(clock())
    if value == "latest":
        t = latest_story_time(store)
        if t is None:
            raise ValueError("--now latest: there are no stories in Redis")
        return t
    try:
        return epoch_or_iso_to_epoch(value)
    except ValueError:
        raise ValueError(f"--now must be epoch seconds, ISO 8601 or 'latest', got {value!r}") from None


@dataclass(frozen=True)
class BuildStats:
    """What one run did (counts) and its ``now`` (UTC epoch s) and duration (s)."""

    now: float
    stories: int
    pools: int
    public_feeds: int
    user_feeds: int
    events_flushed: int
    seconds: float


def build_feeds(
    client,
    now: float,
    config: FeedConfig = FeedConfig(),
    active_window: float = 3600.0,
    events_dir: str | None = None,
    feed_ttl: int = FEED_TTL_SECONDS,
    keys: Keys = Keys(),
) -> BuildStats:
    """One run of the job (steps in the module docstring).

    Args:
      client: ``redis.Redis`` client.
      now: scoring time, UTC epoch seconds.
      config: feed knobs (k, α, source cap, pool size).
      active_window: readers with an event in the last this-many seconds get a feed.
      events_dir: where to flush reader events as Parquet; ``None`` skips it.
      feed_ttl: TTL of written feeds, seconds.
      keys: the Redis key layout (:class:`newsflow.storage.keys.Keys`).

    Returns:
      :class:`BuildStats`.
    """
    t0 = time.perf_counter()
    store = RankingStore(client, keys)
    ids = list(store.iter_story_ids())
    stories = []
    for i in range(0, len(ids), 1000):
        stories += live_stories(store.get_stories(ids[i : i + 1000]), now)
    stories.sort(key=lambda s: s.story_id)
    shared = (velocity_map(store, now=now), store.lambda_overrides(), set(store.breaking(now)))
    cands = Candidates(stories, now, shared[1], shared[2], shared[0])
    pools = compute_pools(cands, config.pool_size)
    for (kind, name), members in pools.items():
        store.replace_pool(kind, name, members, config.pool_size)
    feeds = {keys.feed(kind, name): doc for (kind, name), doc in build_public_feeds(cands, pools, now, config).items()}
    store.write_feeds(feeds, feed_ttl)
    by_id = {s.story_id: s for s in stories}
    pool_cache: dict = {}
    users = 0
    for batch in _batches(iter_active_readers(client, now - active_window, keys), USER_BATCH):
        pipe = client.pipeline(transaction=False)
        for uid in batch:
            pipe.hgetall(keys.user(uid))
        profiles = [user_from_hash(uid, h) for uid, h in zip(batch, pipe.execute(), strict=True)]
        learned = load_learned_many(client, keys, batch)
        docs = {
            p.user_id: build_user_feed(
                store, p, now, "", config, stories_by_id=by_id, shared=shared, learned=m, pool_cache=pool_cache
            )
            for p, m in zip(profiles, learned, strict=True)
        }
        write_user_feeds(client, docs, feed_ttl, keys)
        users += len(docs)
    flushed = 0
    if events_dir:
        while True:
            n, _ = flush_events(client, events_dir, keys=keys)
            flushed += n
            if n == 0:
                break
    return BuildStats(now, len(stories), len(pools), len(feeds), users, flushed, round(time.perf_counter() - t0, 3))
