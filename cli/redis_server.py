"""``newsflow redis start|stop|status``: the embedded Redis server of the data directory.

Every command starts the embedded server when it needs one and leaves it running when it exits (the lifetime
model is in :mod:`newsflow.runtime.redis_conn`); this command starts it ahead of time, says whether it runs, or
stops it (saving its data file). It prints one JSON line: ``{"running", "url", "pid", "rdb"}``. With a Redis
URL (``--redis-url`` / ``$REDIS_URL``) newsflow manages no server and this command refuses.

Example: ``newsflow redis stop --data-dir var`` before removing ``var/``.
"""

from __future__ import annotations

import argparse
import json
import sys

from newsflow.runtime.settings import Settings, add_settings_arguments

COMMAND = "redis"
HELP = "start, stop or show the embedded Redis server of the data directory"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """CLI options of ``newsflow redis``."""
    parser.add_argument("action", choices=("start", "stop", "status"), help="what to do")
    parser.add_argument("--no-save", action="store_true", help="stop without writing the data file")
    add_settings_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Does ``args.action``; 2 on a bad option or when a Redis URL is set."""
    from newsflow.runtime import redis_conn

    try:
        settings = Settings.resolve(args)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if settings.redis_url:
        print(f"error: Redis is {settings.redis_url}, not an embedded server newsflow manages", file=sys.stderr)
        return 2
    rdb = settings.embedded_redis_path
    if args.action == "start":
        redis_conn.ensure_embedded(rdb)
    elif args.action == "stop":
        redis_conn.stop_embedded(rdb, save=not args.no_save)
    status = redis_conn.embedded_status(rdb)
    print(json.dumps({**status, "rdb": rdb}), flush=True)
    return 0
