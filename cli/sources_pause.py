"""``newsflow sources pause REF...``: stop polling a feed, or every feed of an outlet (kept and listed as paused).

REF is a feed id (from ``newsflow sources list``), a feed URL, or an outlet (registrable domain:
every feed of it). Exit code 1 when a REF matches nothing.
"""

from __future__ import annotations

from newsflow.cli.sources_common import add_ref_arguments, apply_status

COMMAND = "pause"
HELP = "stop polling a feed, or every feed of an outlet (kept and listed as paused)"


def add_arguments(parser) -> None:
    """Adds REF... and the common flags."""
    add_ref_arguments(parser)


def run(args) -> int:
    """Applies ``pause`` to every REF; returns 0, 1 (some REF matched nothing) or 2."""
    return apply_status(args, "pause")
