"""``newsflow crawl``: run a crawl worker over the shared frontier and land RawDocuments.

State lives under the data directory of :class:`newsflow.runtime.settings.Settings` (``--data-dir``,
``$NEWSFLOW_DATA_DIR`` or ``./var``), the same one the pipeline uses: landing files go to
``<data dir>/landing`` and the frontier to Redis (``--redis-url``/``$REDIS_URL`` when set, else the
embedded server at ``<data dir>/redis/newsflow.rdb``), under ``--key-prefix``.

While it runs it prints a progress line to stderr every ``--progress-every`` seconds
(``crawl: 12.0s processed=40 landed=31 errors=2 refused=0 pending=57``); when it stops it
prints one JSON line of counters to stdout. See :data:`EPILOG` for the local crawl recipe.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

from newsflow.crawler.sinks import add_sink_arguments
from newsflow.runtime.settings import Settings, add_settings_arguments

COMMAND = "crawl"
HELP = "run a polite crawl worker (feeds -> article pages -> landing files)"

EPILOG = """\
Local crawl of the bundled corpus (no internet needed), in two terminals:

  newsflow replay-web --port 8765 --seeds-out seeds.txt
  newsflow crawl --seeds seeds.txt --resolve '*=127.0.0.1:8765' --allow-host 127.0.0.1 --duration 120

--resolve sends every host's requests to the replay server (landed documents keep their real
URLs); --allow-host exempts 127.0.0.1 from the private-address guard. Then run the pipeline on
the landed files: newsflow run --input 'var/landing/*.jsonl.gz' (the data dir is
$NEWSFLOW_DATA_DIR, else ./var; the frontier is in <data dir>/redis/newsflow.rdb).

Counters: processed = tasks handled by this worker; landed = documents written (article
pages plus feed-only documents); errors = failed fetches, including safety-guard refusals
(error kind unsafe_address, e.g. metadata.google.internal or a private IP); refused =
robots.txt refusals. `newsflow sources status` shows each feed's schedule and last error.
"""


def default_landing(settings: Settings) -> str:
    """``<data dir>/landing`` of the resolved settings."""
    return os.path.join(settings.data_dir, "landing")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds the worker options (with help text, defaults shown, and the local recipe as epilog)."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument(
        "--seeds",
        default="",
        help="file of feed URLs (one per line, '#' comments) to register before crawling "
        "(default: none; sources already in the frontier are crawled anyway)",
    )
    parser.add_argument(
        "--sitemap", action="append", default=[], help="news sitemap URL to register (repeatable; default: none)"
    )
    parser.add_argument(
        "--landing",
        default=None,
        help="landing directory or gs://bucket/prefix (default: <data dir>/landing, data dir = "
        "$NEWSFLOW_DATA_DIR or ./var)",
    )
    add_settings_arguments(parser)
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        help="host/IP/CIDR exempt from the private-address guard, repeatable (e.g. 127.0.0.1 "
        "for local replay; default: none)",
    )
    parser.add_argument(
        "--resolve",
        action="append",
        default=[],
        help="HOST=IP:PORT connect override ('*' for every host), repeatable, for local replay "
        "(default: none, real DNS)",
    )
    parser.add_argument("--concurrency", type=int, default=16, help="concurrent fetches (default: %(default)s)")
    parser.add_argument(
        "--min-host-delay",
        type=float,
        default=1.0,
        help="seconds between two requests to one host; robots.txt Crawl-delay may raise it (default: %(default)s)",
    )
    parser.add_argument(
        "--follow-links",
        type=int,
        default=0,
        choices=(0, 1),
        help="1 = also follow same-site links of article pages, one level deep (default: %(default)s)",
    )
    parser.add_argument("--duration", type=float, default=None, help="stop after this many seconds (default: no limit)")
    parser.add_argument("--max-tasks", type=int, default=None, help="stop after this many tasks (default: no limit)")
    parser.add_argument(
        "--idle-exit", type=float, default=None, help="stop after this many seconds with nothing due (default: never)"
    )
    parser.add_argument(
        "--progress-every",
        type=float,
        default=5.0,
        help="seconds between progress lines on stderr; 0 = none (default: %(default)s)",
    )
    parser.add_argument("--no-gzip", action="store_true", help="write .jsonl instead of .jsonl.gz landing files")
    parser.add_argument(
        "--landing-max-age",
        type=float,
        default=5.0,
        help="seconds a landed document may wait in the buffer before its file is committed (default: %(default)s)",
    )
    parser.add_argument(
        "--min-poll-interval",
        type=float,
        default=None,
        help="shortest feed re-poll interval, seconds (default: 120, the adaptive schedule's floor; "
        "lower it only for sites you run, e.g. the local replay)",
    )
    parser.add_argument(
        "--max-poll-interval", type=float, default=None, help="longest feed re-poll interval, seconds (default: 21600)"
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="serve Prometheus metrics at http://0.0.0.0:PORT/metrics while crawling (default: off)",
    )
    parser.add_argument(
        "--thumbnails",
        nargs="?",
        const="",
        default=None,
        metavar="DIR",
        help="fetch each landed page's lead image and publisher icon through the crawler's address guard and "
        "store WebP thumbnails in DIR (local or gs://; without DIR: $NEWSFLOW_THUMBNAILS or <data dir>/thumbnails, "
        "where `newsflow serve` reads them); default: off, or on when $NEWSFLOW_THUMBNAILS is set",
    )
    add_sink_arguments(parser)


def format_progress(p: dict) -> str:
    """One progress line from a :meth:`newsflow.crawler.worker.CrawlWorker.run` progress dict."""
    return (
        f"crawl: {p['elapsed_s']:.1f}s processed={p['processed']} landed={p['landed']} "
        f"errors={p['errors']} refused={p['refused']} pending={p['pending']}"
    )


def run(args) -> int:
    """Registers seeds and runs one worker; returns 0, or 2 on a bad option or unreadable seeds file."""
    import redis

    from newsflow.crawler.config import CrawlerConfig
    from newsflow.crawler.frontier import Frontier
    from newsflow.crawler.schedule import ScheduleConfig
    from newsflow.crawler.sinks import build_sink
    from newsflow.crawler.worker import CrawlWorker, run_async
    from newsflow.storage.thumbnails import ENV_THUMBNAILS, ThumbnailStore, default_thumbnail_dir

    try:
        settings = Settings.resolve(args)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    resolve = {}
    for item in args.resolve:
        host, sep, target = item.partition("=")
        if not sep or ":" not in target:
            print(f"error: --resolve must be HOST=IP:PORT, got {item!r}", file=sys.stderr)
            return 2
        resolve[host.strip().lower()] = target.strip()
    try:
        cfg = CrawlerConfig(
            allow_hosts=tuple(args.allow_host),
            resolve=resolve,
            concurrency=args.concurrency,
            min_host_delay_s=args.min_host_delay,
            follow_links=args.follow_links,
        )
    except ValueError as e:
        print(f"error: invalid crawler option: {e}", file=sys.stderr)
        return 2
    urls = []
    if args.seeds:
        try:
            with open(args.seeds, encoding="utf-8") as f:
                urls = [ln.strip() for ln in f if ln.strip() and not ln.lstrip().startswith("#")]
        except (OSError, UnicodeDecodeError) as e:
            print(f"error: cannot read seeds file {args.seeds!r}: {e}", file=sys.stderr)
            return 2
    try:
        frontier = Frontier(settings.connect_redis(), settings.keys)
    except redis.RedisError as e:
        print(f"error: cannot open the crawl frontier in Redis: {e}", file=sys.stderr)
        return 2
    now = time.time()
    added = 0
    for url, kind in [(u, "feed") for u in urls] + [(u, "sitemap") for u in args.sitemap]:
        try:
            added += frontier.add(url, kind, now)
        except ValueError as e:
            print(f"skipping {kind} {url!r}: {e}", file=sys.stderr)
    landing = args.landing or default_landing(settings)
    schedule = ScheduleConfig()
    intervals = {
        k: v
        for k, v in (("min_interval_s", args.min_poll_interval), ("max_interval_s", args.max_poll_interval))
        if v is not None
    }
    if intervals:
        schedule = dataclasses.replace(schedule, **intervals)
    if not 0 < schedule.min_interval_s <= schedule.max_interval_s or args.landing_max_age < 0:
        print(
            f"error: need 0 < --min-poll-interval <= --max-poll-interval and --landing-max-age >= 0, got "
            f"{schedule.min_interval_s}, {schedule.max_interval_s}, {args.landing_max_age}",
            file=sys.stderr,
        )
        return 2
    try:
        writer, sink_names = build_sink(args, landing)
    except (ValueError, ImportError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for part in getattr(writer, "sinks", [writer]):
        if hasattr(part, "max_age_s"):
            part.max_age_s = args.landing_max_age
    if args.metrics_port is not None:
        from newsflow.crawler.metrics import serve_metrics

        try:
            serve_metrics(args.metrics_port, frontier)
        except OSError as e:
            print(f"error: cannot serve metrics on port {args.metrics_port}: {e}", file=sys.stderr)
            return 2
    thumbnails = None
    if args.thumbnails is not None or os.environ.get(ENV_THUMBNAILS):
        thumbnails = ThumbnailStore(args.thumbnails or default_thumbnail_dir(settings.data_dir))
    worker = CrawlWorker(frontier, writer, cfg, schedule, thumbnails=thumbnails)
    print(f"crawl: publishing to {', '.join(sink_names)}, {added} new sources registered", file=sys.stderr, flush=True)

    def progress(p: dict) -> None:
        print(format_progress(p), file=sys.stderr, flush=True)

    every = args.progress_every
    stats = run_async(
        worker.run(
            max_tasks=args.max_tasks,
            duration_s=args.duration,
            idle_exit_s=args.idle_exit,
            progress=progress if every > 0 else None,
            progress_every_s=every or 5.0,
        )
    )
    print(
        json.dumps(
            {
                "seeds_added": added,
                "files": len(getattr(writer, "committed", [])),
                "landing": None if args.no_landing else landing,
                "sinks": sink_names,
                **stats,
            }
        )
    )
    return 0
