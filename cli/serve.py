"""``newsflow serve``: run the API with uvicorn (and ``--mint-token`` for an operator-issued reader API token).

Settings (:mod:`newsflow.runtime.settings`): ``--redis-url`` / ``$REDIS_URL``, else the embedded server of the data
directory (the one ``newsflow demo`` fills); ``--key-prefix``; ``--data-dir``.
The editors' "add by home page" (``/admin``, ``POST /v1/admin/sources/discover``) runs the crawl tier's polite
feed discovery from this process, through the crawler's address guard: ``--allow-host`` / ``--resolve`` as for
``newsflow sources add``.
Token secret: ``$NEWSFLOW_TOKEN_SECRET`` (≥ 32 bytes),
else a random development secret kept in ``<data dir>/serving/token_secret`` (mode 0600).
Feeds come from ``newsflow build-feeds``; without them the API answers from snapshots or
with empty, stale-marked pages.
"""

from __future__ import annotations

import argparse
import math
import os
import secrets
import sys
import time

from newsflow.cli.sources_common import add_address_arguments
from newsflow.runtime.settings import Settings, add_settings_arguments

COMMAND = "serve"
HELP = "start the reader web UI and HTTP API (uvicorn) over the Redis feeds; --mint-token USER prints an API token"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """CLI options of ``newsflow serve``."""
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8080, help="TCP port (default 8080)")
    add_settings_arguments(parser)
    parser.add_argument(
        "--now",
        default=None,
        help="rank at this time: epoch seconds, ISO 8601, 'latest' (newest story) or 'wall' "
        "(the clock); default: the replay clock `newsflow demo` stores, else the clock. "
        "It then advances with the clock",
    )
    parser.add_argument(
        "--refresh-feeds",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="rebuild the precomputed feeds (newsflow build-feeds) in the background every "
        "SECONDS, first at startup; 0 disables (run build-feeds on a schedule instead)",
    )
    parser.add_argument("--log-level", default="warning", help="uvicorn log level")
    add_address_arguments(parser)  # the admin's "add by home page": the discovery's address guard
    parser.add_argument(
        "--mint-token",
        metavar="USER",
        default=None,
        help="print an operator API token for USER and exit (signed with the token secret; valid until it "
        "expires, whether or not USER has an account: rotate NEWSFLOW_TOKEN_SECRET to revoke them all)",
    )
    parser.add_argument(
        "--token-ttl", type=int, default=86400, help="lifetime of --mint-token tokens, seconds (1..31622400 = 366 days)"
    )


def token_secret(settings: Settings) -> bytes:
    """The settings' token secret (``$NEWSFLOW_TOKEN_SECRET``) or a persistent random development secret
    in ``<data dir>/serving/token_secret`` (mode 0600).

    Raises:
      ValueError: the environment secret is shorter than 32 bytes.
    """
    if settings.token_secret:
        if len(settings.token_secret) < 32:
            raise ValueError("NEWSFLOW_TOKEN_SECRET must be at least 32 bytes")
        return settings.token_secret
    path = os.path.join(settings.data_dir, "serving", "token_secret")
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
    with open(path) as f:
        return f.read().strip().encode()


def _start_feed_refresher(url: str, clock, every: float, keys) -> None:
    """Builds the feeds once now (so the API starts with fresh ones), then every ``every`` seconds
    in a daemon thread; a failing run is logged and retried at the next tick."""
    import logging
    import threading

    from newsflow.serving.app import serving_client
    from newsflow.storage.feeds import build_feeds

    log = logging.getLogger("newsflow.serve")
    client = serving_client(url)
    stop = threading.Event()

    def once() -> None:
        try:
            stats = build_feeds(client, clock(), keys=keys)
            log.info("feeds rebuilt: %s", stats)
        except Exception as e:  # noqa: BLE001 - a refresh must never kill the server; the API serves snapshots
            log.warning("feed refresh failed (%s: %s); serving the previous feeds", type(e).__name__, e)

    once()

    def loop() -> None:
        while not stop.wait(every):
            once()

    threading.Thread(target=loop, name="feed-refresher", daemon=True).start()


def run(args: argparse.Namespace) -> int:
    """Mints a token, or serves until interrupted."""
    from newsflow.runtime.redis_conn import connect
    from newsflow.serving.tokens import sign_token

    try:
        settings = Settings.resolve(args)
        secret = token_secret(settings)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not 0 <= args.port <= 65535:
        print(f"error: --port must be in 0..65535, got {args.port}", file=sys.stderr)
        return 2
    if not (math.isfinite(args.refresh_feeds) and args.refresh_feeds >= 0):
        print(
            f"error: --refresh-feeds must be a finite number of seconds >= 0, got {args.refresh_feeds}", file=sys.stderr
        )
        return 2
    if args.mint_token:
        try:
            print(sign_token(args.mint_token, secret, time.time(), args.token_ttl))
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        return 0
    import uvicorn

    from newsflow.serving.app import ServingConfig, create_app, serving_client
    from newsflow.storage.search_index import default_index_path
    from newsflow.storage.thumbnails import default_thumbnail_dir

    data_dir = settings.data_dir
    url = settings.redis_url
    embedded = None
    if not url:  # keep the embedded server alive in this process; talk to it over its socket
        embedded = connect(None, embedded_path=settings.embedded_redis_path)
        url = f"unix://{embedded.socket_file}"
    client = serving_client(url)
    from newsflow.storage.feeds import parse_now
    from newsflow.storage.ranking import RankingStore

    try:
        start = parse_now(args.now, RankingStore(client, settings.keys))
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    ranking_clock = None
    if args.now not in (None, "", "wall") or abs(start - time.time()) > 1.0:
        wall0 = time.time()
        ranking_clock = lambda: start + (time.time() - wall0)  # noqa: E731
        print(
            f"ranking clock starts at {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(start))} "
            "(replay clock or --now) and advances with the wall clock",
            flush=True,
        )
    if args.refresh_feeds < 0:
        print(f"error: --refresh-feeds must be >= 0, got {args.refresh_feeds}", file=sys.stderr)
        return 2
    if args.refresh_feeds:
        _start_feed_refresher(url, ranking_clock or time.time, args.refresh_feeds, settings.keys)
    from newsflow.cli.sources_add import discovery_as_dict, home_page_discovery
    from newsflow.cli.sources_common import CommandError, registration_host_check, resolve_overrides

    try:  # the crawl tier's discovery and address check, injected: serving does not import the crawler
        discover = discovery_as_dict(home_page_discovery(args.allow_host, resolve_overrides(args.resolve)))
        host_check = registration_host_check(args)
    except CommandError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    config = ServingConfig(
        token_secret=secret,
        keys=settings.keys,
        snapshot_dir=os.path.join(data_dir, "serving", "snapshots"),
        ranking_clock=ranking_clock,
        trusted_proxies=settings.trusted_proxies,
        admin_token=settings.admin_token or "",
        discover_feeds=discover,
        host_check=host_check,
        search_index=default_index_path(data_dir),
        thumbnail_dir=default_thumbnail_dir(data_dir),
    )
    print(
        f"newsflow on http://{args.host}:{args.port}/  (JSON API: /v1/top, schema: /openapi.json)",
        flush=True,
    )
    # forwarded headers are the app's (NEWSFLOW_TRUSTED_PROXIES), not uvicorn's default trust of 127.0.0.1
    uvicorn.run(
        create_app(client, config), host=args.host, port=args.port, log_level=args.log_level, proxy_headers=False
    )
    return 0
