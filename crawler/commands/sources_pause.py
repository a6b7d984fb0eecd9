"""``newsflow sources pause REF...``: stop polling a feed, or every feed of an outlet (kept and listed as paused).

REF is a feed id (from ``newsflow sources list``), a feed URL, or an outlet (registrable domain:
every feed of it). Exit code 1 when a REF matches nothing.
"""

from __future__ import annotations

from crawler.commands.sources_common import CommandError, add_common_arguments, fail, open_registry, print_report

COMMAND = "pause"
HELP = "stop polling a feed, or every feed of an outlet (kept and listed as paused)"


def add_arguments(parser) -> None:
    """Adds REF... and the common flags."""
    parser.add_argument("refs", nargs="+", metavar="REF", help="feed id, feed URL or outlet domain")
    add_common_arguments(parser)


def run(args) -> int:
    """Applies ``pause`` to every REF; returns 0, 1 (some REF matched nothing) or 2."""
    from newsflow.source_registry import Report

    try:
        _, registry = open_registry(args)
    except CommandError as e:
        return fail(str(e))
    report = Report()
    for ref in args.refs:
        report.outcomes.extend(registry.set_status(ref, "pause").outcomes)
    return print_report(report, args.json, verbose=True, label="pause")
