"""Precomputed feeds: the job that runs after the pipeline and every few minutes.

One run (:func:`build_feeds`):

1. reads every live story (``Keys.story``; all keys: :mod:`newsflow.storage.keys`), the per-topic λ
   overrides, the breaking set and the latest trending window from Redis;
2. scores each story (``authority × e^(−λ·age_hours)``) at ``now``;
3. replaces the candidate pools ``nf:pool:edition:{edition}`` / ``nf:pool:topic:{topic}``
   (top 500 each; editions are story languages plus ``global``);
4. writes the MMR top-20 feed of every pool to ``nf:feed:edition:{edition}`` /
   ``nf:feed:topic:{topic}`` with a 5-minute TTL;
5. writes the personal feeds of every reader active in the last ``active_window`` seconds
   (all members of the active-reader shards ``nf:{s<k>}:users:active`` in that window, read in pages;
   readers handled in batches of 500: one pipeline of profiles, two of models, one of feeds per batch;
   :func:`newsflow.storage.feeds.build_feeds`) to ``nf:feed:user:{user_id}`` with the same
   TTL, each with its serving form at ``nf:feedpage:user:{user_id}`` (:mod:`newsflow.storage.feed_page`:
   the request path re-ranks it without parsing the feed);
6. optionally moves the reader-event streams to Parquet (``--events-dir``).

Run it: ``newsflow build-feeds`` (once), ``newsflow build-feeds --every 120 --max-runs 30``
(a bounded schedule loop), ``--now latest`` to score a replayed corpus at its own latest
time instead of the wall clock.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time

from newsflow.core.ranking.feeds import FeedConfig
from newsflow.runtime.settings import Settings, add_settings_arguments
from newsflow.storage.feeds import BuildStats, build_feeds, parse_now  # noqa: F401 (re-exported for callers of the job)
from newsflow.storage.ranking import RankingStore

log = logging.getLogger("newsflow.jobs.build_feeds")

COMMAND = "build-feeds"
HELP = "score stories, refresh candidate pools and write precomputed feeds (5-minute TTL) to Redis"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """CLI options of ``newsflow build-feeds``."""
    add_settings_arguments(parser)
    parser.add_argument("--now", default=None, help="scoring time: epoch seconds, ISO 8601, or 'latest' (default: now)")
    parser.add_argument("--every", type=float, default=None, help="repeat every SECONDS (bounded by --max-runs)")
    parser.add_argument(
        "--max-runs", type=int, default=None, help="runs before exiting (default 1, or 288 with --every)"
    )
    parser.add_argument("--alpha", type=float, default=FeedConfig.alpha, help="MMR relevance weight, 0.5-0.9")
    parser.add_argument("--k", type=int, default=FeedConfig.k, help="stories per public feed")
    parser.add_argument("--active-window", type=float, default=3600.0, help="seconds a reader counts as active")
    parser.add_argument("--events-dir", default=None, help="flush reader events to Parquet files here")


def run(args: argparse.Namespace) -> int:
    """Runs the job once or on a bounded schedule; prints one JSON line per run."""

    if not 0.5 <= args.alpha <= 0.9:
        print(f"error: --alpha must be in [0.5, 0.9], got {args.alpha}", file=sys.stderr)
        return 2
    if args.every is not None and args.every <= 0:
        print(f"error: --every must be > 0 seconds, got {args.every}", file=sys.stderr)
        return 2
    if args.k < 1:
        print(f"error: --k must be >= 1, got {args.k}", file=sys.stderr)
        return 2
    max_runs = args.max_runs if args.max_runs is not None else (288 if args.every else 1)
    if max_runs < 1:
        print(f"error: --max-runs must be >= 1, got {max_runs}", file=sys.stderr)
        return 2
    try:
        settings = Settings.resolve(args)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    client = settings.connect_redis()
    store = RankingStore(client, settings.keys)
    config = FeedConfig(k=args.k, alpha=args.alpha)
    runs = 0
    first_start = time.monotonic()
    try:
        while True:
            started = time.monotonic()
            try:
                now = parse_now(args.now, store)
            except ValueError as e:
                print(f"error: {e}", file=sys.stderr)
                return 2
            if args.now not in (None, "", "latest"):
                now += started - first_start  # a fixed --now advances with the schedule
            stats = build_feeds(client, now, config, args.active_window, args.events_dir, keys=settings.keys)
            print(json.dumps(stats.__dict__), flush=True)
            runs += 1
            if runs >= max_runs or args.every is None:
                return 0
            time.sleep(max(0.0, args.every - (time.monotonic() - started)))
    except KeyboardInterrupt:
        return 130
