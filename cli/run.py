"""``newsflow run``: launch the streaming job with Beam flags (bounded replay, Dataflow, Flink, portable runners).

Examples::

    newsflow run --input 'data/corpus/*.jsonl.gz' --output var/output
    newsflow run --runner DataflowRunner --streaming --pubsub_subscription projects/P/subscriptions/S \\
        --output gs://bucket/newsflow --redis_url redis://10.0.0.5:6379 --project P --region R \\
        --temp_location gs://bucket/tmp

Everything is done by :mod:`newsflow.pipelines.launcher` (flags, settings, runner, Redis check, JSON summary).
"""

from __future__ import annotations

import argparse

COMMAND = "run"
HELP = "run the streaming job (all Beam and newsflow pipeline flags pass through; --help-flags lists them)"
ACCEPTS_EXTRA_ARGS = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--help-flags",
        action="store_true",
        help="list the pipeline flags (--input, --output, --redis_url, --key_prefix, ...) and exit",
    )


def run(args: argparse.Namespace) -> int:
    """Launches the job; prints one JSON summary line; returns 2 on invalid flags."""
    from newsflow.pipelines.launcher import main
    from newsflow.pipelines.streaming import SPEC

    argv = list(getattr(args, "extra_args", []))
    if args.help_flags:
        argv.append("--help-flags")
    return main(SPEC, argv, prog="newsflow run")
