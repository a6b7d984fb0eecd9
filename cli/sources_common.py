"""Shared plumbing of the ``newsflow sources ...`` commands: open the registry, print reports.

Every sources command resolves one :class:`newsflow.runtime.settings.Settings` (``--redis-url``/``$REDIS_URL``,
else the embedded server under the data directory; keys under ``--key-prefix``) and works on the
registry of :mod:`newsflow.storage.source_registry`, seeded with the outlets of ``data/sources.csv``.
"""

from __future__ import annotations

import json
import sys

from newsflow.runtime.settings import Settings, add_settings_arguments


class CommandError(Exception):
    """A command cannot run (bad settings, Redis unreachable); the message is printed, exit code 2."""


def add_common_arguments(parser, json_help: str = "print one JSON object per line instead of text") -> None:
    """Adds the settings flags and ``--json``."""
    add_settings_arguments(parser)
    parser.add_argument("--json", action="store_true", help=json_help)


def open_registry(args):
    """``(settings, SourceRegistry)`` for the command's flags.

    Raises:
      CommandError: invalid settings or Redis unreachable.
    """
    import redis

    from newsflow.core.sources import SourceTable
    from newsflow.storage.source_registry import SourceRegistry

    try:
        settings = Settings.resolve(args)
        client = settings.connect_redis()
        client.ping()
    except ValueError as e:
        raise CommandError(str(e)) from None
    except redis.RedisError as e:
        raise CommandError(f"cannot reach Redis at {Settings.resolve(args).describe_redis()}: {e}") from None
    return settings, SourceRegistry(client, settings.keys, seed=SourceTable.load())


def print_report(report, as_json: bool, verbose: bool = False, label: str = "") -> int:
    """Prints a :class:`newsflow.storage.source_registry.Report`; returns the exit code (1 if any entry failed).

    Text: one line per entry that was not simply added (all of them with ``verbose``), then a
    summary ``<label>: 3 added, 1 unchanged, 1 error``. JSON: one object per entry, then
    ``{"summary": {...}}``.
    """
    counts = report.counts()
    if as_json:
        for o in report.outcomes:
            print(json.dumps(o._asdict(), ensure_ascii=False))
        print(json.dumps({"summary": counts}, sort_keys=True))
    else:
        for o in report.outcomes:
            if verbose or o.result != "added":
                tail = f" ({o.detail})" if o.detail else ""
                print(f"{o.ref}: {o.result} {o.url}{tail}")
        parts = [f"{n} {k}" for k, n in sorted(counts.items())] or ["nothing to do"]
        print(f"{label or 'sources'}: {', '.join(parts)}")
    return 1 if report.errors else 0


def fail(message: str) -> int:
    """Prints ``error: message`` to stderr; returns 2."""
    print(f"error: {message}", file=sys.stderr)
    return 2


def add_ref_arguments(parser) -> None:
    """REF... (feed id, feed URL or outlet domain) and the common flags: the status commands' arguments."""
    parser.add_argument("refs", nargs="+", metavar="REF", help="feed id, feed URL or outlet domain")
    add_common_arguments(parser)


def apply_status(args, action: str) -> int:
    """Applies ``action`` (``pause``, ``resume`` or ``remove``) to every REF of ``args.refs`` and prints the
    report; returns 0, 1 (some REF matched nothing) or 2 (settings or Redis unusable)."""
    from newsflow.storage.source_registry import Report

    try:
        _, registry = open_registry(args)
    except CommandError as e:
        return fail(str(e))
    report = Report()
    for ref in args.refs:
        report.outcomes.extend(registry.set_status(ref, action).outcomes)
    return print_report(report, args.json, verbose=True, label=action)


def add_address_arguments(parser) -> None:
    """``--allow-host`` and ``--resolve``: the address guard's exemptions and connect overrides."""
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        help="host/IP/CIDR exempt from the private-address guard, repeatable (default: none)",
    )
    parser.add_argument(
        "--resolve",
        action="append",
        default=[],
        help="HOST=IP:PORT connect override ('*' for every host), repeatable (default: real DNS)",
    )


def resolve_overrides(items: list[str]) -> dict[str, str]:
    """``--resolve`` values as ``{host: "ip:port"}``.

    Raises:
      CommandError: an item is not ``HOST=IP:PORT``.
    """
    out = {}
    for item in items:
        host, sep, target = item.partition("=")
        if not sep or ":" not in target:
            raise CommandError(f"--resolve must be HOST=IP:PORT, got {item!r}")
        out[host.strip().lower()] = target.strip()
    return out


def registration_host_check(args):
    """The registration-time address check (:class:`newsflow.crawler.safety.RegistrationHostCheck`) for
    ``args.allow_host`` and ``args.resolve``: a host with an override resolves to its override's IP, others
    through DNS.

    Raises:
      CommandError: a bad ``--resolve`` item.
    """
    from newsflow.crawler.safety import AddressPolicy, RegistrationHostCheck, system_resolver

    overrides = resolve_overrides(args.resolve)

    def resolve(host: str) -> list[str]:
        target = overrides.get(host.lower(), overrides.get("*"))
        return [target.rsplit(":", 1)[0].strip("[]")] if target else system_resolver(host)

    return RegistrationHostCheck(AddressPolicy(args.allow_host), resolve)
