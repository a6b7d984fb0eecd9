"""``newsflow search-index``: the full-text search index file — its size, or a rebuild from the Parquet history.

The streaming job keeps the index up to date as it runs (:mod:`newsflow.transforms.search`); this command is for
an index that is missing, damaged or written by an older version, and for remote runners, whose workers cannot
write the serving host's file::

    newsflow search-index                # prints {"path": ..., "articles": n}
    newsflow search-index --rebuild      # re-reads <data dir>/output/articles (+ story_assignments, Redis)

Rebuild rules: :mod:`newsflow.storage.search_history`. The index is one SQLite file with one writer at a time:
a rebuild while the job writes waits for its locks (both finish; the rebuild's rows win where they overlap,
and the job's later upserts win after it).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from newsflow.runtime.settings import Settings, add_settings_arguments
from newsflow.storage.search_history import rebuild
from newsflow.storage.search_index import SearchIndex, default_index_path

COMMAND = "search-index"
HELP = "show or rebuild (--rebuild) the full-text search index from the Parquet history"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """CLI options of ``newsflow search-index``."""
    add_settings_arguments(parser)
    parser.add_argument("--rebuild", action="store_true", help="replace the index with the Parquet history's rows")
    parser.add_argument("--index", default=None, help="index file (default <data dir>/search/index.sqlite3)")
    parser.add_argument("--output", default=None, help="Parquet root to rebuild from (default <data dir>/output)")


def run(args: argparse.Namespace) -> int:
    """Prints one JSON line (``path``, ``articles`` and, after ``--rebuild``, ``with_story``). Exit 2 on bad
    arguments or a missing history."""
    try:
        settings = Settings.resolve(args)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    path = args.index or default_index_path(settings.data_dir)
    if not args.rebuild:
        if not os.path.exists(path):
            print(json.dumps({"path": path, "articles": 0, "exists": False}), flush=True)
            return 0
        print(json.dumps({"path": path, "articles": SearchIndex(path, readonly=True).count(), "exists": True}))
        return 0
    output = args.output or os.path.join(settings.data_dir, "output")
    index = SearchIndex(path)
    try:
        counts = rebuild(index, output, settings.connect_redis(), settings.keys)
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        index.close()
    print(json.dumps({"path": path, **counts}), flush=True)
    return 0
