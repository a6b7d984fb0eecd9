"""``newsflow accounts delete NAME``: delete an account and its reader data, as the reader's own deletion does.

Removes the account, its sessions and API tokens, profile, last-seen coverage, precomputed feed, its fields of
the stored per-reader models and its active-reader entry, and records its tombstone, so ``newsflow nightly``
and ``newsflow retention`` drop the events it sent (:mod:`newsflow.storage.accounts`). Exit 1 when there is
no such account.
"""

from __future__ import annotations

import argparse
import sys
import time

from newsflow.runtime.settings import add_settings_arguments

COMMAND = "delete"
HELP = "delete an account and its reader data (its events are then dropped by nightly and retention)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """NAME and the settings flags."""
    parser.add_argument("name", metavar="NAME", help="account name")
    add_settings_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Deletes the account; prints one line."""
    from newsflow.cli.accounts_add import open_store

    store = open_store(args)
    if store is None:
        return 2
    if store.role(args.name) is None:
        print(f"error: there is no account {args.name!r}", file=sys.stderr)
        return 1
    store.delete(args.name, time.time())
    print(f"deleted account {args.name}")
    return 0
