"""``newsflow run-continuous``: the streaming job over new landing files as they arrive, then fresh feeds.

Example, beside ``newsflow replay-web``, ``newsflow crawl`` and ``newsflow serve --refresh-feeds 0``::

    newsflow run-continuous --input-dir var/landing --every 5

Every ``--every`` seconds it runs the job over landing files it has not processed yet and rebuilds
the feeds (one JSON line per run); see :mod:`newsflow.pipelines.continuous` for the cursor and the clock.
Flags it does not know go to every job run (``newsflow run --help-flags``), except ``--input`` and
``--story_input_log``, which it sets (the story input log, see :mod:`newsflow.pipelines.continuous`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from newsflow.runtime.settings import Settings, add_settings_arguments

COMMAND = "run-continuous"
HELP = "keep running the streaming job over new landing files, rebuilding the feeds after each run"
ACCEPTS_EXTRA_ARGS = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """CLI options of ``newsflow run-continuous`` (unknown flags go to the job)."""
    parser.formatter_class = argparse.ArgumentDefaultsHelpFormatter
    parser.add_argument("--input-dir", default=None, help="landing directory (None = <data dir>/landing)")
    parser.add_argument("--every", type=float, default=5.0, help="seconds between two looks at the directory")
    parser.add_argument("--max-files", type=int, default=200, help="most landing files per job run")
    parser.add_argument(
        "--now",
        default=None,
        help="ranking time of the feeds: 'wall', epoch seconds or ISO 8601 (None = the replay "
        "clock when `newsflow demo` set one, else the wall clock)",
    )
    parser.add_argument(
        "--cursor", default=None, help="manifest of processed files (None = <data dir>/continuous/cursor-<hash>.jsonl)"
    )
    parser.add_argument("--max-runs", type=int, default=None, help="exit after this many runs that found files")
    parser.add_argument("--idle-exit", type=float, default=None, help="exit after this many seconds without new files")
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="serve Prometheus metrics at http://0.0.0.0:PORT/metrics while running (default: off)",
    )
    add_settings_arguments(parser, models=True)


def run(args) -> int:
    """Runs the loop until interrupted (or ``--max-runs``/``--idle-exit``); 2 on a bad option."""
    from newsflow.pipelines.continuous import ContinuousConfig, default_cursor_path, default_story_log_dir, run_loop
    from newsflow.runtime.redis_conn import connect, embedded_socket_url

    extra = list(getattr(args, "extra_args", []) or [])
    for flag, instead in (("--input", "give --input-dir"), ("--story_input_log", "it is kept per landing directory")):
        if any(a == flag or a.startswith(flag + "=") for a in extra):
            print(f"error: run-continuous chooses the job's {flag} itself; {instead}", file=sys.stderr)
            return 2
    if args.every <= 0 or args.max_files < 1:
        print(f"error: --every must be > 0 and --max-files >= 1, got {args.every}, {args.max_files}", file=sys.stderr)
        return 2
    try:
        settings = Settings.resolve(args)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    # the embedded server's socket keeps its address across restarts; clients of it restart a killed server
    url = settings.redis_url or embedded_socket_url(settings.embedded_redis_path)
    input_dir = args.input_dir or os.path.join(settings.data_dir, "landing")
    job_argv = [
        "--redis_url",
        url,
        "--key_prefix",
        settings.key_prefix,
        "--data_dir",
        settings.data_dir,
        "--model_dir",
        settings.model_dir,
        "--story_input_log",
        default_story_log_dir(settings.data_dir, input_dir, settings.key_prefix),
        *extra,
    ]
    config = ContinuousConfig(
        input_dir=input_dir,
        cursor_path=args.cursor or default_cursor_path(settings.data_dir, input_dir, settings.key_prefix),
        job_argv=tuple(job_argv),
        every_s=args.every,
        max_files=args.max_files,
        now=args.now,
        key_prefix=settings.key_prefix,
    )
    print(
        json.dumps(
            {
                "input_dir": input_dir,
                "cursor": config.cursor_path,
                "every_s": args.every,
                "redis": settings.describe_redis(),
            }
        ),
        flush=True,
    )

    def report(out: dict) -> None:
        print(json.dumps(out), flush=True)

    if args.metrics_port is not None:
        from prometheus_client import start_http_server

        try:
            start_http_server(args.metrics_port)
        except OSError as e:
            print(f"error: cannot serve metrics on port {args.metrics_port}: {e}", file=sys.stderr)
            return 2

    try:
        run_loop(config, connect(url), max_runs=args.max_runs, idle_exit_s=args.idle_exit, report=report)
    except KeyboardInterrupt:
        return 130
    return 0
