"""``newsflow sources status``: each source's schedule, last fetch, errors and backoff.

Reads the crawl frontier from Redis (settings of :mod:`newsflow.runtime.settings`: ``--redis-url``/``$REDIS_URL``,
else the embedded server at ``<data dir>/redis/newsflow.rdb``, data dir = ``--data-dir``,
``$NEWSFLOW_DATA_DIR`` or ``./var``; keys under ``--key-prefix``) and prints a table, or one JSON object per source with
``--json``. When there is no
embedded database yet (nothing was crawled) it says so on stderr and lists 0 sources without
creating any file or directory.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import time

from newsflow.runtime.settings import Settings, add_settings_arguments

COMMAND = "status"
HELP = "show each source's schedule, last fetch, errors and backoff"


def add_arguments(parser) -> None:
    """Adds the settings flags (``--redis-path`` among them) and ``--json``."""
    add_settings_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object per source instead of a table")


def _iso(v) -> str:
    try:
        return dt.datetime.fromtimestamp(float(v), tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (TypeError, ValueError):
        return "-"


def source_rows(frontier, now: float) -> list[dict]:
    """Status rows: url, kind, next_due (ISO; ``held`` for a feed paused or removed in the sources
    registry, ``leased`` while fetched), due_in_s, interval_s, last_fetch, last_status, failures,
    backoff_until, last_error, items, fetches, leased, held."""
    rows = []
    feeds = frontier.feeds()
    pipe = frontier.r.pipeline(transaction=False)
    for h in feeds:
        pipe.sismember(frontier.keys.crawl_held(frontier.keys.crawl_bucket(h.get("host", ""))), h["tid"])
    held = pipe.execute() if feeds else []
    for h, is_held in zip(feeds, held, strict=True):
        due = None if is_held else h.get("due")
        rows.append(
            {
                "url": h.get("url", ""),
                "kind": h.get("kind", ""),
                "next_due": "held" if is_held else _iso(due) if due is not None else "leased",
                "due_in_s": None if due is None else round(float(due) - now, 1),
                "interval_s": float(h["interval_s"]) if h.get("interval_s") else None,
                "last_fetch": _iso(h.get("last_fetch")),
                "last_status": h.get("last_status", ""),
                "failures": int(h.get("failures") or 0),
                "errors": int(h.get("errors") or 0),
                "backoff_until": _iso(h.get("backoff_until")) if h.get("backoff_until") else "-",
                "last_error": h.get("last_error", ""),
                "items": int(h.get("items") or 0),
                "fetches": int(h.get("fetches") or 0),
                "leased": "holder" in h,
                "held": bool(is_held),
            }
        )
    return rows


def run(args) -> int:
    """Prints the status of every registered source; returns 0, or 2 when Redis cannot be reached."""
    import redis

    from newsflow.crawler.frontier import Frontier
    from newsflow.runtime.redis_conn import embedded_paths

    rows = []
    try:
        settings = Settings.resolve(args)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    path = settings.embedded_redis_path
    files = embedded_paths(path)
    if not settings.redis_url and not any(os.path.exists(p) for p in (files.rdb, files.aof, files.sock)):
        print(
            f"no crawl state at {path} (nothing crawled yet; set NEWSFLOW_DATA_DIR, --redis-path or REDIS_URL)",
            file=sys.stderr,
        )
    else:
        try:
            rows = source_rows(Frontier(settings.connect_redis(), settings.keys), time.time())
        except redis.RedisError as e:
            print(f"error: cannot read the crawl frontier from Redis: {e}", file=sys.stderr)
            return 2
    if args.json:
        for r in rows:
            print(json.dumps(r, ensure_ascii=False))
        return 0
    print(f"{'source':60} {'next due':20} {'interval':>9} {'last fetch':20} {'status':>14} {'fail':>4} backoff/error")
    for r in rows:
        interval = f"{r['interval_s']:.0f}s" if r["interval_s"] else "-"
        tail = r["backoff_until"] + (" " + r["last_error"][:60] if r["last_error"] else "")
        print(
            f"{r['url'][:60]:60} {r['next_due']:20} {interval:>9} {r['last_fetch']:20} "
            f"{r['last_status'][:14]:>14} {r['failures']:>4} {tail}"
        )
    print(f"{len(rows)} sources")
    return 0
