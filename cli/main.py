"""The ``newsflow`` command line (console script ``newsflow = newsflow.cli.main:main``).

Each command lives in its own module, which defines ``COMMAND`` (its name),
``HELP`` (one line), ``add_arguments(parser)`` and ``run(args) -> int``. Commands
are listed in :data:`COMMAND_MODULES` as ``(group, module)``; ``group`` is
``None`` for a top-level command or a group name such as ``"eval"``
(``newsflow eval extraction ...``). A module that sets ``ACCEPTS_EXTRA_ARGS = True`` receives
the arguments it did not declare in ``args.extra_args`` (``newsflow run`` passes them to Beam).
Modules are imported only when the CLI
starts, so a heavy command does not slow down the others' imports.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

COMMAND_MODULES: tuple[tuple[str | None, str], ...] = (
    (None, "newsflow.cli.demo"),
    (None, "newsflow.cli.run"),
    (None, "newsflow.cli.run_continuous"),
    (None, "newsflow.cli.build_feeds"),
    (None, "newsflow.cli.retention"),
    (None, "newsflow.cli.search_index"),
    (None, "newsflow.cli.serve"),
    (None, "newsflow.cli.redis_server"),
    ("eval", "newsflow.cli.evaluation.extraction"),
    ("eval", "newsflow.cli.evaluation.language"),
    ("eval", "newsflow.cli.evaluation.clustering"),
    ("eval", "newsflow.cli.evaluation.topics"),
    ("eval", "newsflow.cli.evaluation.personalization"),
    ("eval", "newsflow.cli.evaluation.decay"),
    (None, "newsflow.cli.train_topics"),
    ("eval", "newsflow.cli.evaluation.robots"),
    (None, "newsflow.cli.replay_web"),
    (None, "newsflow.cli.crawl"),
    ("sources", "newsflow.cli.sources_status"),
    ("sources", "newsflow.cli.sources_list"),
    ("sources", "newsflow.cli.sources_add"),
    ("sources", "newsflow.cli.sources_import"),
    ("sources", "newsflow.cli.sources_export"),
    ("sources", "newsflow.cli.sources_pause"),
    ("sources", "newsflow.cli.sources_resume"),
    ("sources", "newsflow.cli.sources_remove"),
    ("sources", "newsflow.cli.sources_authority"),
    ("accounts", "newsflow.cli.accounts_add"),
    ("accounts", "newsflow.cli.accounts_delete"),
    (None, "newsflow.cli.push_server"),
    (None, "newsflow.cli.nightly"),
    (None, "newsflow.cli.simulate_readers"),
)

GROUP_HELP = {
    "eval": "evaluation commands; each prints one JSON line",
    "sources": "source (publisher) administration",
    "accounts": "reader and editor accounts",
}


def build_parser() -> argparse.ArgumentParser:
    """Builds the argparse tree from :data:`COMMAND_MODULES`."""
    parser = argparse.ArgumentParser(prog="newsflow", description="newsflow news aggregation system")
    top = parser.add_subparsers(dest="command", metavar="COMMAND")
    top.required = True
    groups: dict[str, argparse._SubParsersAction] = {}
    for group, module_name in COMMAND_MODULES:
        module = importlib.import_module(module_name)
        if group is None:
            target = top
        else:
            if group not in groups:
                gp = top.add_parser(group, help=GROUP_HELP.get(group, group))
                groups[group] = gp.add_subparsers(dest=f"{group}_command", metavar="SUBCOMMAND")
                groups[group].required = True
            target = groups[group]
        sub = target.add_parser(module.COMMAND, help=module.HELP, description=module.HELP)
        module.add_arguments(sub)
        sub.set_defaults(_run=module.run, _accepts_extra=getattr(module, "ACCEPTS_EXTRA_ARGS", False))
    return parser


def _quiet_optional_gcp_warning(record: logging.LogRecord) -> bool:
    """Drops Beam's import-time notice that the optional BigQuery client (apitools) is missing:
    newsflow does not use BigQuery, and the notice would open every command's output."""
    return "apitools not found" not in record.getMessage()


def _exit_on_sigterm(signum, frame) -> None:
    """SIGTERM ends a command like Ctrl-C does: ``finally`` blocks and ``atexit`` handlers run, so
    embedded Redis servers are saved and stopped (uvicorn re-raises the signal after its own
    graceful shutdown, which then lands here)."""
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``newsflow`` console script; returns the process exit code."""
    import signal

    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    logging.getLogger().addFilter(_quiet_optional_gcp_warning)
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        if not args._accepts_extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.extra_args = extra
    return int(args._run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
