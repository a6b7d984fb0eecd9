"""Entry point of the nightly Dataflow Flex Template (deploy/dataflow/nightly.Dockerfile): runs the
whole nightly loop (:func:`newsflow.jobs.nightly.run_night`) from the template launcher, submitting the four
Beam jobs one after another with the Dataflow flags the launcher passes.

The launcher runs ``python jobs/nightly_template.py --<parameter>=<value> ... <Dataflow flags>`` with
the parameters of deploy/dataflow/nightly-metadata.json: ``redis_url`` and ``output`` (required),
``date`` (default: yesterday, UTC), ``key_prefix``, ``history_days``, ``decay_days``. Every other flag
(``--runner``, ``--project``, ``--region``, ``--temp_location``, ``--sdk_container_image``, ...) goes
to each job. Prints the JSON summary; exits 0 ok, 1 failed, 2 bad flags, 3 locked (Cloud Scheduler
and the Dataflow console then show the launch as failed).

Run it anywhere as the launcher would, e.g. locally on the DirectRunner::

    python jobs/nightly_template.py --redis_url=redis://... --output=/tmp/out --date=2026-11-30
"""

from __future__ import annotations

import argparse
import json
import sys

from newsflow.jobs.nightly import run_night
from newsflow.jobs.nightly_common import parse_date
from newsflow.runtime.settings import Settings


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """The template parameters, and the remaining (Beam/Dataflow) flags."""
    p = argparse.ArgumentParser(prog="jobs/nightly_template.py", allow_abbrev=False)
    p.add_argument("--redis_url", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("--date", default=None)
    p.add_argument("--key_prefix", default=None)
    p.add_argument("--history_days", type=int, default=28)
    p.add_argument("--decay_days", type=int, default=7)
    return p.parse_known_args(argv)


def main(argv: list[str]) -> int:
    """Runs the night; returns the exit code."""
    args, beam_args = parse(argv)
    try:
        settings = Settings.resolve(args)
        date = parse_date(args.date)
    except ValueError as e:
        print(json.dumps({"status": "failed", "error": str(e)}))
        return 2
    summary = run_night(
        settings.connect_redis(),
        settings,
        date,
        args.output,
        beam_args,
        args.history_days,
        args.decay_days,
    )
    print(json.dumps(summary, default=str), flush=True)
    return {"ok": 0, "locked": 3}.get(summary["status"], 1)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
