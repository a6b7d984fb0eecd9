"""``newsflow sources list [--json]``: the registered feeds with their outlet, status and authority."""

from __future__ import annotations

import json

from newsflow.cli.sources_common import CommandError, add_common_arguments, fail, open_registry

COMMAND = "list"
HELP = "list the registered feeds (outlet, status, tier, authority, categories)"


def add_arguments(parser) -> None:
    """Adds ``--status``, ``--outlet`` and the common flags."""
    parser.add_argument(
        "--status",
        choices=("active", "paused", "removed", "all"),
        action="append",
        default=None,
        help="only feeds with this status, repeatable (default: active and paused)",
    )
    parser.add_argument("--outlet", default=None, help="only the feeds of this outlet (registrable domain)")
    add_common_arguments(parser)


def run(args) -> int:
    """Prints the feeds; returns 0, or 2 when Redis cannot be reached."""
    try:
        _, registry = open_registry(args)
    except CommandError as e:
        return fail(str(e))
    statuses = args.status or ["active", "paused"]
    if "all" in statuses:
        statuses = ["active", "paused", "removed"]
    rows = registry.feeds(statuses, outlet=args.outlet) if args.outlet else registry.iter_feeds(statuses)
    n = 0
    if not args.json:
        print(f"{'id':24} {'status':7} {'outlet':24} {'tier':8} {'auth':>5} url / title / categories")
    for r in rows:
        n += 1
        if args.json:
            print(json.dumps(r, ensure_ascii=False))
            continue
        auth = "-" if r["authority"] is None else f"{r['authority']:.2f}"
        cats = f" [{', '.join(r['categories'])}]" if r["categories"] else ""
        title = f" {r['title']!r}" if r["title"] else ""
        print(
            f"{r['id']:24} {r['status']:7} {r['outlet'][:24]:24} {r['tier'] or '-':8} {auth:>5} {r['url']}{title}{cats}"
        )
    if not args.json:
        print(f"{n} feeds")
    return 0
