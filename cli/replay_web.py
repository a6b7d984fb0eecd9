"""``newsflow replay-web``: serve the bundled real corpus on 127.0.0.1 as publisher sites.

Prints one JSON line ``{"port", "hosts", "feeds", "seeds"}`` and serves until
interrupted (or ``--duration`` seconds). Crawl it with
``newsflow crawl --seeds SEEDS --resolve '*=127.0.0.1:PORT' --allow-host 127.0.0.1``.

The default corpus is the repository's ``data/corpus`` (found relative to this file, like
``newsflow demo`` does), so the command works from any directory. Bad options or an
unreadable corpus print ``error: ...`` to stderr and exit with code 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_CORPUS_DIR = os.path.join(REPO_ROOT, "data", "corpus")

COMMAND = "replay-web"
HELP = "serve the bundled corpus on 127.0.0.1 as publisher sites (robots.txt, timed RSS feeds, pages)"


def add_arguments(parser) -> None:
    """Adds the replay options (every one with help text and its default)."""
    parser.formatter_class = argparse.ArgumentDefaultsHelpFormatter
    parser.add_argument(
        "--corpus-dir",
        default=DEFAULT_CORPUS_DIR,
        help="directory with pages.jsonl.gz / headlines.jsonl.gz (the bundled corpus)",
    )
    parser.add_argument("--port", type=int, default=8765, help="TCP port on 127.0.0.1 (0 = any free port)")
    parser.add_argument("--speed", type=float, default=60.0, help="replay-clock seconds per real second")
    parser.add_argument("--start-fraction", type=float, default=0.1, help="start point in the corpus span, 0..1")
    parser.add_argument(
        "--start-time",
        default=None,
        help="replay clock start instead of --start-fraction: UTC epoch seconds or 'now' (with "
        "--speed 1 the replay clock is the wall clock: the corpus is all published and "
        "POST /_replay/publish adds articles published now)",
    )
    parser.add_argument("--no-failures", action="store_true", help="disable the injected slow/failing endpoints")
    parser.add_argument("--seeds-out", default=None, help="write the feed URLs to this file, one per line")
    parser.add_argument("--duration", type=float, default=0.0, help="stop after this many seconds (0 = forever)")


def run(args) -> int:
    """Starts the replay server."""
    from newsflow.crawler.replay import ReplayWeb, load_corpus, serve

    if args.speed <= 0 or not 0 <= args.start_fraction <= 1:
        print(
            f"error: --speed must be > 0 and --start-fraction in [0, 1], got {args.speed}, {args.start_fraction}",
            file=sys.stderr,
        )
        return 2
    try:
        start_at = (
            None if args.start_time is None else (time.time() if args.start_time == "now" else float(args.start_time))
        )
    except ValueError:
        print(f"error: --start-time must be epoch seconds or 'now', got {args.start_time!r}", file=sys.stderr)
        return 2
    try:
        web = ReplayWeb(
            load_corpus(args.corpus_dir),
            speed=args.speed,
            start_fraction=args.start_fraction,
            inject_failures=not args.no_failures,
            start_at=start_at,
        )
    except (OSError, EOFError, ValueError, KeyError, TypeError) as e:
        print(f"error: cannot load corpus from {args.corpus_dir}: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    try:
        server = serve(web, args.port)
    except OSError as e:
        print(f"error: cannot listen on 127.0.0.1:{args.port}: {e}", file=sys.stderr)
        return 2
    if args.seeds_out:
        try:
            with open(args.seeds_out, "w", encoding="utf-8") as f:
                f.write("\n".join(web.feed_urls()) + "\n")
        except OSError as e:
            server.stop()
            print(f"error: cannot write --seeds-out {args.seeds_out}: {e}", file=sys.stderr)
            return 2
    print(
        json.dumps(
            {
                "port": server.port,
                "hosts": len(web.sites),
                "feeds": len(web.feed_urls()),
                "seeds": args.seeds_out or None,
            }
        ),
        flush=True,
    )
    try:
        end = time.monotonic() + args.duration if args.duration > 0 else float("inf")
        while time.monotonic() < end:
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0
