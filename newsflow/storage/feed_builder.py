"""One run of the feed builder (pure, Beam-free): scores, candidate pools and precomputed feeds.

The ``newsflow build-feeds`` command wraps it as a scheduled job; ``serving`` and ``newsflow demo``
call it directly. The steps are listed in :func:`build_feeds`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from newsflow.core.ranking.feeds import (
    Candidates,
    FeedConfig,
    build_public_feeds,
    build_user_feed,
    compute_pools,
    live_stories,
    velocity_map,
)
from newsflow.storage.events import flush_events
from newsflow.storage.feed_page import write_user_feeds
from newsflow.storage.keys import Keys
from newsflow.storage.ranking import FEED_TTL_SECONDS, RankingStore


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
    shared = (velocity_map(store), store.lambda_overrides(), set(store.breaking(now)))
    cands = Candidates(stories, now, shared[1], shared[2], shared[0])
    pools = compute_pools(cands, config.pool_size)
    for (kind, name), members in pools.items():
        store.replace_pool(kind, name, members, config.pool_size)
    feeds = build_public_feeds(cands, pools, now, config, keys)
    store.write_feeds(feeds, feed_ttl)
    users = store.active_users(now - active_window)
    by_id = {s.story_id: s for s in stories}
    user_feeds = {}
    for uid in users:
        user_feeds[uid] = build_user_feed(
            store, store.user_profile(uid), now, "", config, stories_by_id=by_id, shared=shared
        )
        if len(user_feeds) >= 200:
            write_user_feeds(client, user_feeds, feed_ttl, keys)
            user_feeds.clear()
    write_user_feeds(client, user_feeds, feed_ttl, keys)
    flushed = 0
    if events_dir:
        while True:
            n, _ = flush_events(client, events_dir, keys=keys)
            flushed += n
            if n == 0:
                break
    return BuildStats(
        now, len(stories), len(pools), len(feeds), len(users), flushed, round(time.perf_counter() - t0, 3)
    )
