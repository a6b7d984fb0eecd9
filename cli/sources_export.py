"""``newsflow sources export --format opml|csv``: write the registered feeds to standard output.

Active and paused feeds are written (``--include-removed`` adds removed ones to CSV); the file
imports back with every feed, title and category (:mod:`newsflow.core.source_files`).
"""

from __future__ import annotations

import sys

from newsflow.cli.sources_common import CommandError, fail, open_registry
from newsflow.runtime.settings import add_settings_arguments

COMMAND = "export"
HELP = "write the registered feeds as OPML or CSV to standard output"


def add_arguments(parser) -> None:
    """Adds ``--format``, ``--include-removed`` and the settings flags."""
    parser.add_argument("--format", choices=("opml", "csv"), default="opml", help="output format (default: opml)")
    parser.add_argument(
        "--include-removed", action="store_true", help="also write removed feeds (CSV keeps their status)"
    )
    add_settings_arguments(parser)


def run(args) -> int:
    """Writes the export; returns 0, or 2 when Redis cannot be reached."""
    from newsflow.core.source_files import write_csv, write_opml

    try:
        _, registry = open_registry(args)
    except CommandError as e:
        return fail(str(e))
    statuses = ("active", "paused", "removed") if args.include_removed else ("active", "paused")
    feeds = registry.iter_feeds(statuses)
    n = write_csv(feeds, sys.stdout) if args.format == "csv" else write_opml(feeds, sys.stdout)
    print(f"exported {n} feeds", file=sys.stderr)
    return 0
