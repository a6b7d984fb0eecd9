"""``newsflow run``: run the streaming job with Beam flags (bounded replay, Dataflow or Flink).

Examples::

    newsflow run --input 'data/corpus/*.jsonl.gz' --output var/output
    newsflow run --runner DataflowRunner --streaming --pubsub_subscription projects/P/subscriptions/S \\
        --output gs://bucket/newsflow --redis_url redis://10.0.0.5:6379 --project P --region R \\
        --temp_location gs://bucket/tmp
"""

from __future__ import annotations

import argparse
import os

COMMAND = "run"
HELP = "run the streaming job (all Beam and newsflow pipeline flags pass through)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("beam_args", nargs=argparse.REMAINDER,
                        help="pipeline flags, e.g. --input 'data/corpus/*.jsonl.gz' --output var/output; "
                             "see `python -m pipelines.streaming --help`")


def run(args: argparse.Namespace) -> int:
    from apache_beam.options.pipeline_options import PipelineOptions

    from newsflow.stores.redis_conn import embedded_socket_url
    from pipelines.streaming import NewsflowOptions, run as run_job

    beam_args = [a for a in args.beam_args if a != "--"]
    options = PipelineOptions(beam_args).view_as(NewsflowOptions)
    redis_url = None
    if not options.redis_url and not os.environ.get("REDIS_URL"):
        redis_url = embedded_socket_url()  # keep the embedded server alive in this process
    run_job(beam_args, redis_url=redis_url)
    return 0
