"""RSS 2.0 and Atom 1.0 feeds of the public lists (feedgen), linked from the pages with ``<link rel="alternate">``.

Routes (``{fmt}`` is ``rss`` or ``atom``):

* ``/feeds/top.{fmt}?edition=`` — top stories of an edition (``global`` by default);
* ``/feeds/topics/{topic}.{fmt}`` — a topic's stories (404 for an unknown topic);
* ``/feeds/sources/{outlet}.{fmt}`` — the stories an outlet leads (as on ``/sources/{outlet}``);
* ``/feeds/search.{fmt}?q=&topic=&outlet=&language=&since=&until=`` — the first page of a search
  (:mod:`newsflow.serving.search`; 503 before anything is indexed).

Each item is a story: its headline, a link and guid to its full-coverage page on this site, a summary naming the
lead outlet and how many outlets and independent reports cover it, its topics as categories, published at its
earliest article and updated at its latest. Feeds are the public lists (a feed reader has no session): no
reader's blocks or mutes apply. Absolute links use this request's scheme and host (behind a proxy, those it
forwards when trusted: ``ServingConfig.trusted_proxies``). Answers carry the public cache headers and ETags of
the API.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from urllib.parse import quote, urlencode

from feedgen.feed import FeedGenerator
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from newsflow.core.ranking.feeds import GLOBAL_EDITION
from newsflow.serving.http_cache import cache_headers, not_modified_or, strong_etag
from newsflow.serving.pages import UnknownTopic
from newsflow.serving.preferences import normalize_source, normalize_topic
from newsflow.serving.resilience import REDIS_ERRORS
from newsflow.serving.search import api_search_request, api_search_results

MEDIA_TYPES = {"rss": "application/rss+xml", "atom": "application/atom+xml"}
FEED_ITEMS = 30


def feed_links(title: str, path: str, query: dict | None = None) -> list[tuple[str, str, str]]:
    """``(media type, title, href)`` of the RSS and Atom feeds at ``path`` + ``.rss`` / ``.atom`` (for the
    pages' ``<link rel="alternate">``)."""
    qs = ("?" + urlencode(query)) if query else ""
    return [
        (MEDIA_TYPES["rss"], f"{title} (RSS)", f"{path}.rss{qs}"),
        (MEDIA_TYPES["atom"], f"{title} (Atom)", f"{path}.atom{qs}"),
    ]


def page_feed_links(path: str, edition: str = "") -> list[tuple[str, str, str]]:
    """The feed links of the web page at ``path`` (top stories, a topic, an outlet; none for other pages)."""
    if path == "/":
        plain = edition if edition and edition.replace("-", "").isalnum() and len(edition) <= 12 else ""
        return feed_links("Top stories", "/feeds/top", {"edition": plain} if plain else None)
    for prefix, kind in (("/topics/", "topics"), ("/sources/", "sources")):
        name = path[len(prefix) :]
        if path.startswith(prefix) and name and "/" not in name:
            return feed_links(name, f"/feeds/{kind}/{quote(name, safe='')}")
    return []


def _time(t) -> dt.datetime:
    return dt.datetime.fromtimestamp(float(t or 0.0), dt.UTC)


def render_feed(fmt: str, title: str, page_url: str, self_url: str, stories: Sequence[dict], now: float) -> bytes:
    """The RSS 2.0 (``fmt="rss"``) or Atom (``"atom"``) document of ``stories`` (feed items: ``story_id``,
    ``title``, ``domain``, ``topics``, ``source_count``, ``independent_count``, ``earliest_time``,
    ``latest_time``); ``page_url`` is the HTML page the feed mirrors, ``self_url`` the feed itself, both
    absolute; ``now`` (UTC epoch seconds) dates an empty feed."""
    base = page_url.split("/", 3)
    origin = "/".join(base[:3])
    fg = FeedGenerator()
    fg.id(self_url)
    fg.title(title)
    fg.link(href=page_url, rel="alternate")
    fg.link(href=self_url, rel="self")
    fg.description(f"{title}: stories grouped into full coverage by newsflow")
    fg.language("en")
    fg.generator("newsflow")
    newest = max((float(s.get("latest_time") or 0.0) for s in stories), default=now)
    fg.updated(_time(newest))
    fg.lastBuildDate(_time(newest))
    for s in reversed(list(stories)[:FEED_ITEMS]):  # feedgen prepends: reversed keeps the list's order
        url = f"{origin}/stories/{quote(str(s['story_id']), safe='')}"
        fe = fg.add_entry()
        fe.id(url)
        fe.guid(url, permalink=True)
        fe.title(s.get("title") or "(untitled story)")
        fe.link(href=url)
        outlets = int(s.get("source_count") or 0)
        reports = int(s.get("independent_count") or 0)
        fe.description(
            f"Led by {s.get('domain') or 'an unknown outlet'}; {outlets} outlet{'s' if outlets != 1 else ''}, "
            f"{reports} independent report{'s' if reports != 1 else ''}."
        )
        for t in s.get("topics") or ():
            fe.category(term=str(t))
        fe.published(_time(s.get("earliest_time")))
        fe.updated(_time(s.get("latest_time") or s.get("earliest_time")))
    return fg.rss_str(pretty=False) if fmt == "rss" else fg.atom_str(pretty=False)


class FeedsOut:
    """Handlers of the feed routes over the app's :class:`~newsflow.serving.app.Api` and
    :class:`~newsflow.serving.web.Web`."""

    def __init__(self, api, web):
        self.api, self.web = api, web

    def _answer(self, request: Request, fmt: str, title: str, page_path: str, stories: Sequence[dict], stale=""):
        origin = f"{request.url.scheme}://{request.url.netloc}"
        page_query = ("?" + request.url.query) if request.url.query else ""
        body = render_feed(
            fmt,
            title,
            origin + page_path + page_query,
            str(request.url),
            stories,
            self.api._ranking_now(),
        )
        cfg = self.api.config
        headers = cache_headers("public", cfg.max_age, cfg.s_maxage, cfg.stale_s_maxage, stale)
        headers["ETag"] = strong_etag(body)
        response = Response(body, media_type=MEDIA_TYPES[fmt] + "; charset=utf-8", headers=headers)
        return not_modified_or(response, request.headers.get("if-none-match", ""))

    def _fmt(self, request: Request) -> str:
        from newsflow.serving.app import ApiError

        fmt = request.path_params["fmt"]
        if fmt not in MEDIA_TYPES:
            raise ApiError(404, "not_found", f"feeds are .rss or .atom, got .{fmt}")
        return fmt

    def top(self, request: Request) -> Response:
        fmt = self._fmt(request)
        edition = self.api._edition(request)
        page, stale, _ = self.web._feed("edition", edition, FEED_ITEMS)
        title = "Top stories" if edition == GLOBAL_EDITION else f"Top stories ({edition})"
        return self._answer(request, fmt, title, "/", page["stories"], stale)

    @staticmethod
    def _name(request: Request, param: str, normalize) -> str:
        """The path parameter ``param`` normalized (a 400 ``bad_parameter`` when it cannot be)."""
        from newsflow.serving.app import ApiError

        try:
            return normalize(request.path_params[param])
        except ValueError as e:
            raise ApiError(400, "bad_parameter", str(e)) from None

    def topic(self, request: Request) -> Response:
        from newsflow.serving.app import ApiError

        fmt = self._fmt(request)
        topic = self._name(request, "topic", normalize_topic)
        try:
            page, stale = self.api.topic_feed(topic, FEED_ITEMS)
        except UnknownTopic as e:
            raise ApiError(404, "not_found", str(e)) from None
        return self._answer(request, fmt, f"Topic: {topic}", f"/topics/{quote(topic, safe='')}", page["stories"], stale)

    def source(self, request: Request) -> Response:
        fmt = self._fmt(request)
        name = self._name(request, "outlet", normalize_source)
        try:
            self.api._guard()
            stories = self.web._stories_by_outlet().get(name, [])[:FEED_ITEMS]
            stale = ""
        except REDIS_ERRORS:
            self.api._mark_down()
            stories, stale = [], "redis-unavailable"
        return self._answer(request, fmt, name, f"/sources/{quote(name, safe='')}", stories, stale)

    def search(self, request: Request) -> Response:
        fmt = self._fmt(request)
        req = api_search_request(request, FEED_ITEMS)
        results = api_search_results(self.api, req, None)
        return self._answer(request, fmt, f"Search: {req.q}", "/search", results["stories"])


def feed_routes(api, web) -> list[Route]:
    """The feed routes for :func:`newsflow.serving.app.create_app`."""
    h = FeedsOut(api, web)
    return [
        Route("/feeds/top.{fmt}", h.top, methods=["GET"]),
        Route("/feeds/search.{fmt}", h.search, methods=["GET"]),
        Route("/feeds/topics/{topic}.{fmt}", h.topic, methods=["GET"]),
        Route("/feeds/sources/{outlet}.{fmt}", h.source, methods=["GET"]),
    ]
