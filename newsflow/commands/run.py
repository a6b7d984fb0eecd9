"""``newsflow run``: run the streaming job with Beam flags (bounded replay, Dataflow or Flink).

Examples::

    newsflow run --input 'data/corpus/*.jsonl.gz' --output var/output
    newsflow run --runner DataflowRunner --streaming --pubsub_subscription projects/P/subscriptions/S \\
        --output gs://bucket/newsflow --redis_url redis://10.0.0.5:6379 --project P --region R \\
        --temp_location gs://bucket/tmp
"""

from __future__ import annotations

import argparse

COMMAND = "run"
HELP = "run the streaming job (all Beam and newsflow pipeline flags pass through; --help-flags lists them)"
ACCEPTS_EXTRA_ARGS = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--help-flags", action="store_true",
                        help="list the pipeline flags (--input, --output, --redis_url, ...) and exit")


def run(args: argparse.Namespace) -> int:
    import logging
    import sys

    from pipelines.streaming import flags_help, run as run_job, summarize

    if args.help_flags:
        print(flags_help())
        return 0
    beam_args = [a for a in getattr(args, "extra_args", []) if a != "--"]
    try:
        result = run_job(beam_args, embedded_redis=True)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    logging.getLogger(__name__).debug("finished")
    print(summarize(result))
    return 0
