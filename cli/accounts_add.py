"""``newsflow accounts add [--editor] NAME``: create a reader or editor account; the password comes from stdin.

The password is the first line of standard input (``printf '%s\\n' "$PW" | newsflow accounts add --editor
ana``), or is asked for without echo when stdin is a terminal; it is never a flag (flags show in ``ps``).
There is no default account: the first editor is made this way, and can then sign into ``/admin``.
``--editor`` on an existing account with the right password makes it an editor. Exit 1 when the name is
taken (with another password) or the name or password is refused, 2 on bad settings.
"""

from __future__ import annotations

import argparse
import sys
import time

from newsflow.runtime.settings import Settings, add_settings_arguments

COMMAND = "add"
HELP = "create a reader account (or an editor with --editor); the password is read from stdin"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """NAME, ``--editor`` and the settings flags."""
    parser.add_argument("name", metavar="NAME", help="account name: 1-64 letters, digits or . _ @ : -")
    parser.add_argument("--editor", action="store_true", help="the account may manage sources (/admin)")
    add_settings_arguments(parser)


def read_password(stream=None) -> str:
    """The password: the first line of ``stream`` (stdin), or a no-echo prompt on a terminal."""
    stream = stream or sys.stdin
    if stream.isatty():
        import getpass

        return getpass.getpass("password: ")
    return stream.readline().rstrip("\r\n")


def open_store(args: argparse.Namespace):
    """The :class:`newsflow.storage.accounts.AccountStore` of the settings flags, or ``None`` (error printed)."""
    from newsflow.storage.accounts import AccountStore

    try:
        settings = Settings.resolve(args)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return None
    return AccountStore(settings.connect_redis(), settings.keys)


def run(args: argparse.Namespace) -> int:
    """Creates the account (or promotes an existing one with ``--editor``); prints one line."""
    from newsflow.storage.accounts import AccountError

    store = open_store(args)
    if store is None:
        return 2
    password = read_password()
    role = "editor" if args.editor else "reader"
    now = time.time()
    try:
        store.create(args.name, password, now, role=role)
    except AccountError as e:
        if e.reason != "taken" or not args.editor:
            print(f"error: {e}", file=sys.stderr)
            return 1
        if not store.check_password(args.name, password, "cli", now):
            print(f"error: {e} (and the password given is not its password)", file=sys.stderr)
            return 1
        store.set_role(args.name, "editor")
        print(f"{args.name} is now an editor")
        return 0
    print(f"created {role} account {args.name}")
    return 0
