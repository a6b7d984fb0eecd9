"""Retention: ``newsflow retention`` expires stories, near-duplicate groups and their articles.

State that scales: the near-duplicate index and the story state grow with every article. This job,
run once a night (``newsflow nightly`` or a cron line), deletes what is older than the retention
period, measured in event time:

* near-duplicate groups whose latest member is older than the cutoff, as a whole, with every
  member's LSH band entries, fingerprint, article -> group entry and serving hash
  (:meth:`newsflow.storage.groups.RedisGroupStore.expire_before`, one atomic script per 500 groups);
* stories whose latest article is older than the cutoff, with their state, serving hash, article list
  and their articles' assignments; merged stories and merge records before the cutoff
  (:meth:`newsflow.storage.stories.RedisStoryStore.expire_before`, under the story writer lease);
* readers whose last event is older than the cutoff, from the active-reader shards
  (:func:`newsflow.storage.events.trim_active_readers`, one script per 1,000 members of one shard);
* the events of deleted accounts (received up to their deletion), from every partition of the events dataset
  under ``--output`` (:func:`newsflow.storage.tombstones.purge_deleted_events`; the tombstones are the
  ``P:{s<k>}:readers:deleted`` sets account deletion writes).

The cutoff is ``now - days`` (UTC epoch seconds). It is recorded at ``Keys.retention_cutoff``
(only ever moved forward); the streaming job dead-letters articles older than it
(``older_than_retention``) instead of founding new groups and stories for them. Trending windows,
feeds and the breaking set expire on their own (Redis TTLs); other Parquet history is kept.

Default retention: 30 days (DESIGN: 48 h is the story window; older stories are history, served from
Parquet). ``--now`` defaults to the replay clock when one is set (``newsflow demo``), else the wall
clock, like ``newsflow build-feeds``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

from newsflow.runtime.settings import Settings, add_settings_arguments
from newsflow.storage.feeds import parse_now
from newsflow.storage.ranking import RankingStore
from newsflow.storage.retention import expire
from newsflow.storage.tombstones import purge_deleted_events

COMMAND = "retention"
HELP = "expire stories, near-duplicate groups and articles older than the retention period (event time)"
DEFAULT_RETENTION_DAYS = 30.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """CLI options of ``newsflow retention``."""
    add_settings_arguments(parser)
    parser.add_argument(
        "--days", type=float, default=DEFAULT_RETENTION_DAYS, help="retention period in days (default 30)"
    )
    parser.add_argument(
        "--now", default=None, help="epoch seconds, ISO 8601, 'latest' or 'wall' (default: replay clock, else now)"
    )
    parser.add_argument(
        "--output",
        default=None,
        help="Parquet root whose events/ deleted readers are purged from (default <data dir>/output)",
    )


def run(args: argparse.Namespace) -> int:
    """Expires old state once; prints one JSON line of counts. Exit 2 on bad arguments."""
    if not (math.isfinite(args.days) and args.days > 0):
        print(f"error: --days must be a finite number > 0, got {args.days}", file=sys.stderr)
        return 2
    try:
        settings = Settings.resolve(args)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    client = settings.connect_redis()
    try:
        now = parse_now(args.now, RankingStore(client, settings.keys))
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        counts = expire(client, now - args.days * 86400.0, settings.keys)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    output = args.output or os.path.join(settings.data_dir, "output")
    counts["deleted_reader_events"] = purge_deleted_events(client, f"{output.rstrip('/')}/events", settings.keys)
    print(json.dumps(counts), flush=True)
    return 0
