"""``newsflow sources import FILE``: register the feeds of an OPML 1.0/2.0, CSV or URL-list file.

Formats and limits: :mod:`newsflow.core.source_files`. Each entry is checked (URL syntax, the
address rules that need no DNS, then each host resolved once: refused when every address is
forbidden, a warning when it does not resolve; ``--allow-host``/``--resolve`` as for ``sources
add``) and reported: ``added``, ``unchanged`` (already registered, or repeated in the file),
``restored`` (was removed) or ``error`` with the reason; good entries are
registered whatever happens to bad ones. Importing the same file twice changes nothing.
Exit code: 0 when the file was imported, even if some entries were refused (each is reported; a
second import of the same file exits 0 too); 1 when nothing in it could be registered (a refused or
unreadable file, or every entry failed), or with ``--strict`` when any entry failed; 2 when the file
or Redis cannot be opened.
"""

from __future__ import annotations

import os

from newsflow.cli.sources_common import (
    CommandError,
    add_address_arguments,
    add_common_arguments,
    fail,
    open_registry,
    print_report,
    registration_host_check,
)

COMMAND = "import"
HELP = "register the feeds of an OPML, CSV or URL-list file (folders/categories become topics)"


def add_arguments(parser) -> None:
    """Adds FILE, ``--format``, ``--max-entries``, ``-v`` and the common flags."""
    parser.add_argument(
        "file", help="OPML (.opml/.xml), CSV, or a list of URLs one per line (.txt, the --seeds format)"
    )
    parser.add_argument("--format", choices=("opml", "csv", "urls"), default=None, help="file format (default: detect)")
    parser.add_argument(
        "--max-entries", type=int, default=200_000, help="feeds read at most from the file (default: %(default)s)"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="also list the entries that were added")
    parser.add_argument("--strict", action="store_true", help="exit 1 when any entry was refused")
    add_address_arguments(parser)
    add_common_arguments(parser)


def run(args) -> int:
    """Imports the file; returns 0, 1 or 2 (module docstring)."""
    from newsflow.core.source_files import read_file

    if not os.path.isfile(args.file):
        return fail(f"no such file: {args.file}")
    try:
        _, registry = open_registry(args)
        host_check = registration_host_check(args)
    except CommandError as e:
        return fail(str(e))
    try:
        report = registry.register(
            read_file(args.file, args.format, max_entries=max(1, args.max_entries)),
            origin=f"import:{os.path.basename(args.file)}",
            host_check=host_check,
        )
    except OSError as e:
        return fail(f"cannot read {args.file}: {e}")
    any_failed = print_report(report, args.json, args.verbose, label=f"import {args.file}")
    usable = any(o.result not in ("error", "repaired") for o in report.outcomes)
    return 1 if (any_failed and (args.strict or not usable)) else 0
