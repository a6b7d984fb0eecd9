"""``newsflow push-server``: serve the authenticated push endpoint (``POST /v1/push``) for wire services.

Example::

    export NEWSFLOW_PUSH_CREDENTIALS="wire:$(openssl rand -hex 24)"
    newsflow push-server --port 8090

Landing files go to ``<data dir>/landing`` by default, where the data directory comes from
:class:`newsflow.runtime.settings.Settings` (``--data-dir``, ``$NEWSFLOW_DATA_DIR`` or ``./var``), as
for ``newsflow crawl`` and the pipeline.

Client credentials come from the environment variable named by
``--credentials-env`` (``CLIENT:SECRET`` pairs, comma separated) or from a
JSON file ``{"client": "secret"}`` (``--credentials-file``); the server
refuses to start without any (exit code 2, ``error: ...`` on stderr). Redis (the
seen-URL set shared with the crawler) is ``--redis-url``/``$REDIS_URL`` when set, else the
embedded server at ``<data dir>/redis/newsflow.rdb`` (``--redis-path`` overrides the file), with
keys under ``--key-prefix``.
WebSub subscriber callbacks are configured with ``--websub-file``. The protocol
is documented in :mod:`newsflow.crawler.push`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from newsflow.crawler.sinks import add_sink_arguments
from newsflow.runtime.settings import Settings, add_settings_arguments

COMMAND = "push-server"
HELP = "serve the authenticated push endpoint that lands wire-service articles at once"


def add_arguments(parser) -> None:
    """Adds the server options (every one with help text and its default)."""
    parser.formatter_class = argparse.ArgumentDefaultsHelpFormatter
    parser.add_argument("--host", default="127.0.0.1", help="bind address")
    parser.add_argument("--port", type=int, default=8090, help="TCP port")
    parser.add_argument(
        "--landing",
        default=None,
        help="landing directory or gs://bucket/prefix (None = <data dir>/landing, data dir = "
        "$NEWSFLOW_DATA_DIR or ./var)",
    )
    add_settings_arguments(parser)
    parser.add_argument(
        "--credentials-env",
        default="NEWSFLOW_PUSH_CREDENTIALS",
        help="environment variable holding CLIENT:SECRET[,CLIENT:SECRET...]",
    )
    parser.add_argument("--credentials-file", default="", help='JSON file {"client": "secret"} (overrides the env)')
    parser.add_argument("--max-body-bytes", type=int, default=1024 * 1024, help="largest accepted request body, bytes")
    parser.add_argument("--max-documents", type=int, default=100, help="most documents in one request")
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        help="host/IP/CIDR exempt from the pushed-URL safety check, repeatable (for local tests)",
    )
    parser.add_argument(
        "--websub-file",
        default="",
        help='JSON file {"id": {"topic": URL, "secret": S}}: WebSub callbacks at /websub/<id>',
    )
    parser.add_argument("--no-gzip", action="store_true", help="write .jsonl instead of .jsonl.gz landing files")
    add_sink_arguments(parser)


def load_config(args):
    """Builds a :class:`newsflow.crawler.push.PushConfig` from parsed arguments and the environment.

    Raises:
      ValueError: no credentials, an unreadable or malformed credentials file, or a bad limit.
    """
    from newsflow.crawler.push import PushConfig
    from newsflow.crawler.push_auth import parse_credentials

    if args.credentials_file:
        try:
            with open(args.credentials_file, encoding="utf-8") as f:
                raw = json.load(f)
        except (OSError, ValueError) as e:
            raise ValueError(f"cannot read credentials file {args.credentials_file!r}: {e}") from None
        if not isinstance(raw, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in raw.items()):
            raise ValueError("credentials file must be a JSON object of client name -> secret strings")
        creds = parse_credentials(",".join(f"{k}:{v}" for k, v in raw.items()))
    else:
        creds = parse_credentials(os.environ.get(args.credentials_env, ""))
    websub = {}
    if args.websub_file:
        try:
            with open(args.websub_file, encoding="utf-8") as f:
                raw = json.load(f)
            websub = {str(k): (str(v["topic"]), str(v["secret"])) for k, v in raw.items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"cannot read WebSub subscriptions from {args.websub_file!r}: {e!r}") from None
    return PushConfig(
        credentials=creds,
        max_body_bytes=args.max_body_bytes,
        max_documents=args.max_documents,
        allow_hosts=tuple(args.allow_host),
        websub=websub,
    )


def run(args) -> int:
    """Serves until interrupted; returns 2 on a configuration error."""
    try:
        settings = Settings.resolve(args)
        config = load_config(args)
    except ValueError as e:
        print(f"error: push-server: {e}", file=sys.stderr)
        return 2
    import redis
    import uvicorn

    from newsflow.cli.crawl import default_landing
    from newsflow.crawler.frontier import Frontier
    from newsflow.crawler.push import PushIngestor, create_app
    from newsflow.crawler.sinks import build_sink

    landing = args.landing or default_landing(settings)
    try:
        frontier = Frontier(settings.connect_redis(), settings.keys)
    except redis.RedisError as e:
        print(f"error: push-server: cannot reach Redis for the seen-URL set: {e}", file=sys.stderr)
        return 2
    try:
        sink, sink_names = build_sink(args, landing, worker_id="push")
    except (ValueError, ImportError) as e:
        print(f"error: push-server: {e}", file=sys.stderr)
        return 2
    ingestor = PushIngestor(config, sink, frontier)
    print(
        json.dumps(
            {
                "listening": f"http://{args.host}:{args.port}/v1/push",
                "clients": sorted(config.credentials),
                "landing": None if args.no_landing else landing,
                "sinks": sink_names,
            }
        ),
        flush=True,
    )
    uvicorn.run(create_app(ingestor), host=args.host, port=args.port, log_level="warning")
    return 0
