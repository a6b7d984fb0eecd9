"""``newsflow nightly [--date D]``: the nightly learning loop, in order, under a lease.

Steps, for the night ``D`` (default: yesterday, UTC):

1. take the lease ``Keys.nightly_lock(D)`` (a random token, ``--lock-ttl`` ≤ 60 s, renewed by this
   run every third of it): a second scheduler for the same date exits at once with status ``locked``
   (exit code 3) and runs nothing; a run killed mid-way stops renewing, so a rerun can take the date
   at most ``--lock-ttl`` seconds later and completes with the outputs of a clean run;
2. move the reader-event stream into ``<output>/events/date=*/`` (exactly once, see
   :func:`newsflow.storage.events.flush_events`) and quarantine unreadable events files
   (``<output>/quarantine/``, a dead letter each under ``<output>/deadletters/step=nightly_events/``);
3. run the Beam batch jobs in dependency order on the shared launcher (same flags as the
   streaming job; DirectRunner by default): ``snapshot_stories`` -> ``decay_rates`` ->
   ``interest_vectors`` -> ``ranking_weights`` (each replaces its date's Parquet and Redis version);
4. switch every model to version ``D`` in one transaction (:meth:`newsflow.storage.models.ModelStore.switch`;
   the previous version stays for rollback, older ones are pruned; a date older than the models
   serving is a backfill: written, not switched);
5. release the lease (only if it still holds this run's token), whatever happened.

It prints one JSON line (``date``, ``status`` ``ok``/``failed``/``locked``, ``events_flushed``,
``quarantined`` [events files moved aside], ``jobs`` [launcher summaries, with ``future_events_refused``
for the jobs reading events], ``models`` [current versions], ``seconds``, ``error``) and exits 0
only when everything succeeded. A job that fails leaves the previous night's models serving.

Beam flags after ``--`` (``--runner DataflowRunner --project ... --region ...``) go to every job.
"""

from __future__ import annotations

import argparse
import json
import math
import os

from newsflow.jobs.nightly import STEPS, run_night
from newsflow.runtime.settings import Settings, add_settings_arguments
from newsflow.storage.lease import MAX_TTL_SECONDS

COMMAND = "nightly"
HELP = "run the nightly learning jobs (decay, interests, weights) for one date under a lease; prints JSON"
ACCEPTS_EXTRA_ARGS = True
EXIT_LOCKED = 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``newsflow nightly``."""
    add_settings_arguments(parser)
    parser.add_argument("--date", default=None, help="night to compute, YYYY-MM-DD UTC (default: yesterday)")
    parser.add_argument(
        "--output", default=None, help="Parquet root with events/, stories/, models/ (default <data dir>/output)"
    )
    parser.add_argument("--history-days", type=int, default=28, help="days of events for interests and clusters")
    parser.add_argument("--decay-days", type=int, default=7, help="days of events for the decay fit")
    parser.add_argument(
        "--step",
        choices=STEPS,
        default="all",
        help="all (default); or one step for a scheduler that runs the jobs itself (the Airflow DAG): "
        "flush (events to Parquet) or switch (serve the date's models), each under the date's lock",
    )
    parser.add_argument(
        "--lock-ttl",
        type=float,
        default=MAX_TTL_SECONDS,
        help="seconds the date's lease outlives this run if it dies (it is renewed while the run lives); "
        "at most 60, default 60",
    )
    parser.add_argument(
        "--retention-days",
        type=float,
        default=None,
        help="also expire stories, groups and articles older than the end of --date minus this many days "
        "(newsflow retention; default: keep everything)",
    )


def run(args: argparse.Namespace) -> int:
    """``newsflow nightly``: prints the JSON summary; exit 0 ok, 1 failed, 2 bad flags, 3 locked."""
    from newsflow.jobs.nightly_common import parse_date
    from newsflow.runtime.redis_conn import embedded_socket_url

    try:
        settings = Settings.resolve(args)
        date = parse_date(args.date)
    except ValueError as e:
        print(json.dumps({"status": "failed", "error": str(e)}))
        return 2
    if args.retention_days is not None and not args.retention_days > 0:
        print(json.dumps({"status": "failed", "error": "--retention-days must be > 0"}))
        return 2
    if not (math.isfinite(args.lock_ttl) and 1.0 <= args.lock_ttl <= MAX_TTL_SECONDS):
        error = f"--lock-ttl must be in [1, {MAX_TTL_SECONDS:g}] seconds, got {args.lock_ttl}"
        print(json.dumps({"status": "failed", "error": error}))
        return 2
    for name in ("history_days", "decay_days"):
        if not 1 <= getattr(args, name) <= 366:
            print(json.dumps({"status": "failed", "error": f"--{name.replace('_', '-')} must be in [1, 366]"}))
            return 2
    if not settings.redis_url:  # the jobs' workers reach the embedded server through its socket
        settings = settings.with_redis_url(embedded_socket_url(settings.embedded_redis_path))
    client = settings.connect_redis()
    extra = [a for a in (getattr(args, "extra_args", None) or []) if a != "--"]
    summary = run_night(
        client,
        settings,
        date,
        args.output or os.path.join(settings.data_dir, "output"),
        extra,
        args.history_days,
        args.decay_days,
        args.lock_ttl,
        args.step,
        args.retention_days,
    )
    print(json.dumps(summary, default=str), flush=True)
    return {"ok": 0, "locked": EXIT_LOCKED}.get(summary["status"], 1)
