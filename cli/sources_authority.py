"""``newsflow sources authority``: recompute outlet authority from the rubric and the near-duplicate groups.

The nightly step of the authority rubric (``newsflow/core/authority.py``, ``data/SOURCES.md``): reads every
live near-duplicate group of two or more articles from Redis (``Keys.clusters_by_size``, each group's
articles and their ``source_domain``/``event_time``), counts per outlet how often it was first and how
often a syndicated copy (:func:`newsflow.core.authority.originality_counts`), and writes
``authority = tier base + 0.2 * (originality - 0.5)`` to every outlet record that is not a manual
override. Prints one JSON line ``{"groups", "outlets_counted", "outlets_written"}``.
"""

from __future__ import annotations

import json

from newsflow.cli.sources_common import CommandError, fail, open_registry
from newsflow.runtime.settings import add_settings_arguments

COMMAND = "authority"
HELP = "recompute outlet authority (rubric + originality from near-duplicate groups; the nightly step)"


def add_arguments(parser) -> None:
    """Adds ``--table-out`` and the settings flags."""
    parser.add_argument(
        "--table-out",
        default=None,
        help="also write data/sources.csv layered with the registry's outlet authorities to this CSV "
        "(the sources table format the enrichment step reads; default: none)",
    )
    add_settings_arguments(parser)


def run(args) -> int:
    """Recomputes; returns 0, or 2 when Redis cannot be reached."""
    import redis

    from newsflow.core.authority import originality_counts, read_near_duplicate_groups

    try:
        settings, registry = open_registry(args)
        groups = list(read_near_duplicate_groups(registry.r, settings.keys))
        counts = originality_counts(groups)
        written = registry.recompute_authority(counts)
    except CommandError as e:
        return fail(str(e))
    except redis.RedisError as e:
        return fail(f"Redis error: {e}")
    summary = {"groups": len(groups), "outlets_counted": len(counts), "outlets_written": written}
    if args.table_out:
        from newsflow.core.sources import SourceTable

        try:
            summary["table_rows"] = registry.source_table(SourceTable.load()).write(args.table_out)
        except OSError as e:
            return fail(f"cannot write {args.table_out}: {e}")
        summary["table"] = args.table_out
    print(json.dumps(summary))
    return 0
