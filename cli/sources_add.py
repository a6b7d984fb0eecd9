"""``newsflow sources add URL``: register a publisher by its home page, feed or news sitemap URL.

For a home page the feeds are discovered (:mod:`newsflow.crawler.discover`: ``<link rel="alternate">``
RSS/Atom/JSON Feed, then common feed paths, then robots.txt news sitemaps), politely and through
the crawler's address-safety guard; ``--no-discover`` registers the URL as given. Every URL
registered is checked once more: its host is resolved and refused when every address is private,
loopback or otherwise forbidden (a host that does not resolve is registered with a warning; the
fetch-time guard checks it again at every fetch). The command prints
what it fetched, what it found and what it registered. ``--name``, ``--tier``, ``--authority`` and
``--language`` set the outlet's record (an explicit authority overrides the rubric of
``newsflow/core/authority.py``). Exit code: 0 when something is registered (or already was), 1 when
nothing was found or everything failed, 2 for a bad option or an unreachable Redis.
"""

from __future__ import annotations

import asyncio
import json

from newsflow.cli.sources_common import (
    CommandError,
    add_address_arguments,
    add_common_arguments,
    fail,
    open_registry,
    print_report,
    registration_host_check,
    resolve_overrides,
)

COMMAND = "add"
HELP = "register a publisher by home page, feed or news sitemap URL (feeds are discovered)"


def add_arguments(parser) -> None:
    """Adds URL, the outlet fields, discovery options and the common flags."""
    from newsflow.core.authority import TIERS

    parser.add_argument("url", help="home page, feed or news sitemap URL")
    parser.add_argument("--name", default=None, help="outlet display name (default: unchanged)")
    parser.add_argument("--tier", choices=TIERS, default=None, help="outlet tier (sets the rubric's authority)")
    parser.add_argument("--authority", type=float, default=None, help="outlet authority in [0, 1] (an override)")
    parser.add_argument("--language", default=None, help="outlet language code, e.g. en or pt-br")
    parser.add_argument("--title", default=None, help="feed title (default: the feed's own title)")
    parser.add_argument("--category", action="append", default=[], help="topic/tag of the feed, repeatable")
    parser.add_argument("--kind", choices=("feed", "sitemap"), default="feed", help="kind for --no-discover")
    parser.add_argument("--no-discover", action="store_true", help="register the URL as given, fetch nothing")
    parser.add_argument(
        "--all", action="store_true", help="register every discovered alternate feed (default: the first one)"
    )
    parser.add_argument("--paused", action="store_true", help="register paused (not polled until resumed)")
    add_address_arguments(parser)
    parser.add_argument(
        "--host-delay", type=float, default=1.0, help="seconds between two requests to one host (default: %(default)s)"
    )
    parser.add_argument("--max-requests", type=int, default=16, help="HTTP requests at most (default: %(default)s)")
    add_common_arguments(parser)


def home_page_discovery(
    allow_hosts=(), resolve: dict[str, str] | None = None, host_delay: float = 1.0, max_requests: int = 16
):
    """The polite feed discovery (:class:`newsflow.crawler.discover.Discoverer`, through the crawler's
    address-safety guard) as a blocking callable ``url -> Discovery`` (one event loop per call, so it runs in
    any thread): what ``newsflow sources add`` and the admin's "add by home page" (``newsflow serve``) use.

    Args:
      allow_hosts: hosts/IPs/CIDRs exempt from the private-address guard.
      resolve: ``{host: "ip:port"}`` connect overrides (``"*"`` for every host).
      host_delay: seconds between two requests to one host.
      max_requests: HTTP requests at most per discovery.

    Raises:
      CommandError: ``host_delay < 0`` or ``max_requests < 1``.
    """
    from newsflow.crawler.config import CrawlerConfig
    from newsflow.crawler.discover import Discoverer, DiscoveryConfig
    from newsflow.crawler.fetch import Fetcher

    if host_delay < 0 or max_requests < 1:
        raise CommandError("need --host-delay >= 0 and --max-requests >= 1")
    cfg = CrawlerConfig(allow_hosts=tuple(allow_hosts), resolve=dict(resolve or {}), total_timeout_s=20.0)

    def discover(url: str):
        async def go():
            fetcher = Fetcher(cfg)
            try:
                d = Discoverer(fetcher, DiscoveryConfig(max_requests=max_requests, host_delay_s=host_delay))
                return await d.discover(url)
            finally:
                await fetcher.aclose()

        return asyncio.run(go())

    return discover


def discovery_as_dict(discover):
    """``url -> {"found": [{"url", "kind", "title", "how", "items"}], "tried": [[url, outcome]], "blocked"}``
    over a :func:`home_page_discovery` callable: the shape of ``ServingConfig.discover_feeds``."""

    def run_one(url: str) -> dict:
        d = discover(url)
        return {"found": [f.__dict__ for f in d.found], "tried": [list(t) for t in d.tried], "blocked": d.blocked}

    return run_one


def _discover(args):
    discover = home_page_discovery(args.allow_host, resolve_overrides(args.resolve), args.host_delay, args.max_requests)
    return discover(args.url)


def run(args) -> int:
    """Discovers and registers; returns 0, 1 or 2 (see the module docstring)."""
    from newsflow.core.outlets import outlet
    from newsflow.storage.source_registry import FeedEntry, FeedError, check_feed_url, validate_outlet_fields

    try:
        check_feed_url(args.url)
    except FeedError as e:
        return fail(f"cannot add {args.url!r}: {e}")
    try:
        validate_outlet_fields(args.tier, args.authority, args.language)
    except ValueError as e:
        return fail(str(e))
    try:
        _, registry = open_registry(args)
    except CommandError as e:
        return fail(str(e))
    status = "paused" if args.paused else "active"
    if args.no_discover:
        chosen = [(args.url, args.kind, args.title or "", "")]
        found_rows, tried = [], []
    else:
        try:
            found = _discover(args)
        except (CommandError, ValueError) as e:
            return fail(str(e))
        tried = found.tried
        found_rows = found.found
        picked = found_rows if args.all else found_rows[:1]
        # the page the feed was found on is its home page (none when the URL given was the feed)
        chosen = [(f.url, f.kind, args.title or f.title, "" if f.how == "given" else args.url) for f in picked]
    entries = [
        (f"found {i + 1}", FeedEntry(url, kind, title, tuple(args.category), home, status))
        for i, (url, kind, title, home) in enumerate(chosen)
    ]
    try:
        host_check = registration_host_check(args)
    except CommandError as e:
        return fail(str(e))
    report = registry.register(entries, origin="add", host_check=host_check)
    outlets = sorted({outlet(o.url) for o in report.outcomes if o.result != "error"})
    outlet_records = {}
    if any(v is not None for v in (args.name, args.tier, args.authority, args.language)):
        for name in outlets:
            try:
                outlet_records[name] = registry.set_outlet(
                    name, display_name=args.name, tier=args.tier, authority=args.authority, language=args.language
                )
            except ValueError as e:
                return fail(f"feeds registered, outlet {name} not changed: {e}")
    if args.json:
        print(
            json.dumps(
                {
                    "url": args.url,
                    "tried": [{"url": u, "outcome": o} for u, o in tried],
                    "found": [f.__dict__ for f in found_rows],
                    "blocked": {} if args.no_discover else found.blocked,
                    "outlets": outlet_records,
                },
                ensure_ascii=False,
            )
        )
    else:
        for u, o in tried:
            print(f"fetched {u}: {o}")
        for f in found_rows:
            mark = "" if any(c[0] == f.url for c in chosen) else " (not registered; --all registers it)"
            title = f" {f.title!r}" if f.title else ""
            print(f"found {f.kind} {f.url}{title} via {f.how}, {f.items} items{mark}")
        if not args.no_discover and not found_rows:
            why = "; ".join(f"{o}: {b}" for o, b in sorted(found.blocked.items()))
            print(f"no feed or news sitemap found for {args.url}" + (f" ({why})" if why else ""))
        for name, rec in outlet_records.items():
            print(f"outlet {name}: " + ", ".join(f"{k}={v}" for k, v in sorted(rec.items()) if k != "updated"))
    code = print_report(report, args.json, verbose=True, label="add")
    return code if entries else 1
