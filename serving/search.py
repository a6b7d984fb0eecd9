"""Full-text search over stories and their articles: ``GET /v1/search`` (JSON) and ``GET /search`` (HTML).

Parameters (both): ``q`` (1-200 characters; every word must match the title, lead text, entities or outlet of
an article, through its stems in any language, :mod:`newsflow.core.search_text`), and optional filters
``topic``, ``outlet`` (a domain or URL, matched by registrable domain), ``language`` (ISO 639, e.g. ``de``),
``since`` / ``until`` (``YYYY-MM-DD``, UTC days, both included), ``limit`` (stories per page, 1-100) and
``cursor`` (the ``next_cursor`` of the previous page: the paging of every list, :mod:`newsflow.serving.paging`).

The index (:mod:`newsflow.storage.search_index`, a SQLite file the streaming job updates) returns the best
:data:`MAX_HITS` matching articles; they are grouped by their story as it is now (a merged story's articles
count for the story it was merged into; stories no longer in Redis are left out), in the order of each story's
best article. The answer::

    {"query": "...", "filters": {...}, "count": n, "next_cursor": "<cursor>" | null, "next": <the same>,
     "stories": [{<story fields of a feed item>, "matches": <matching articles>,
                  "articles": [{"article_id", "title", "url", "domain", "outlet", "language", "event_time",
                                "lead"}, ...]}]}

Readers' rules hold as on every list (:class:`newsflow.serving.reader_view.ReaderView`): with a bearer token
(API) or a session (web), stories of blocked outlets or topics and muted stories are left out, read ones are
marked (``?hide_read=1`` leaves them out) and saved ones marked; a story's articles from blocked outlets or
with muted words in the headline or lead are left out too. Answers with a reader are ``private``; others are
``public`` (CDN-cacheable) with the API's cache times. Without an index file the API answers 503
``search_unavailable`` and the page says search is not ready.
"""

from __future__ import annotations

import datetime as dt
import re
import threading
from collections.abc import Mapping
from typing import NamedTuple

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from newsflow.serving.me import live_records
from newsflow.serving.paging import BadCursor, Cursor, decode_cursor, page_of
from newsflow.serving.preferences import echo, normalize_source, normalize_topic
from newsflow.serving.reader_view import ReaderView
from newsflow.serving.resilience import REDIS_ERRORS
from newsflow.storage.search_index import Filters, Hit, IndexMissing, SearchIndex

MAX_QUERY_CHARS = 200
MAX_HITS = 500
"""Best-ranked matching articles grouped into stories per query."""
MAX_ARTICLES = 5
"""Articles listed under each story (best first); ``matches`` counts them all."""
MAX_LIMIT = 100
_LANGUAGE_RE = re.compile(r"[a-z]{2,3}\Z")
_DAY_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}\Z")
_LIMIT_RE = re.compile(r"[0-9]{1,3}\Z")


class SearchRequest(NamedTuple):
    """A validated search: query text, filters, where the page starts (``cursor``, ``None``: the first page)
    and its size."""

    q: str
    filters: Filters
    cursor: Cursor | None = None
    limit: int = 20

    def params(self) -> dict:
        """The query and its set filters as query parameters (days as ``YYYY-MM-DD``)."""
        f = self.filters
        out = {"q": self.q, "topic": f.topic, "outlet": f.outlet, "language": f.language}
        if f.since is not None:
            out["since"] = _day(f.since)
        if f.until is not None:
            out["until"] = _day(f.until - 86400)
        return {k: v for k, v in out.items() if v}


def _day(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%d")


def _day_start(value: str, name: str) -> float:
    if not _DAY_RE.match(value):
        raise ValueError(f"{name} must be a day YYYY-MM-DD, got {echo(value)}")
    try:
        day = dt.datetime.strptime(value, "%Y-%m-%d").replace(tzinfo=dt.UTC)
    except ValueError:
        raise ValueError(f"{name} must be a day YYYY-MM-DD, got {echo(value)}") from None
    return day.timestamp()


def parse_search(params: Mapping, default_limit: int = 20, require_q: bool = True) -> SearchRequest | None:
    """The :class:`SearchRequest` of query parameters (module docstring); ``None`` when ``q`` is empty and not
    ``require_q`` (the web's empty search page).

    Raises:
      ValueError: a parameter out of range or malformed (the message names it and shows the value).
    """
    q = " ".join(str(params.get("q", "")).split())
    if not q:
        if require_q:
            raise ValueError("q is required: the words to search for")
        return None
    if len(q) > MAX_QUERY_CHARS:
        raise ValueError(f"q must be at most {MAX_QUERY_CHARS} characters, got {len(q)}")
    topic = params.get("topic") or ""
    if topic:
        topic = normalize_topic(topic)
    src = params.get("outlet") or ""
    if src:
        src = normalize_source(src)
    language = str(params.get("language") or "").lower()
    if language and not _LANGUAGE_RE.match(language):
        raise ValueError(f"language must be an ISO 639 code like 'en' or 'de', got {echo(language)}")
    since = _day_start(params["since"], "since") if params.get("since") else None
    until = _day_start(params["until"], "until") + 86400 if params.get("until") else None
    if since is not None and until is not None and until <= since:
        raise ValueError("until must be on or after since")
    raw_limit = params.get("limit")
    limit = default_limit
    if raw_limit is not None:
        if not _LIMIT_RE.match(raw_limit) or not 1 <= int(raw_limit) <= MAX_LIMIT:
            raise ValueError(f"limit must be an integer in [1, {MAX_LIMIT}], got {echo(raw_limit)}")
        limit = int(raw_limit)
    cursor = decode_cursor(params.get("cursor"))  # BadCursor is a ValueError
    return SearchRequest(q, Filters(topic, src, language, since, until), cursor, limit)


class Searcher:
    """The serving app's reader of the index file at ``path`` (opened on first use; a missing file is retried
    on the next search)."""

    def __init__(self, path: str | None):
        self.path = path
        self._index: SearchIndex | None = None
        self._lock = threading.Lock()

    def hits(self, req: SearchRequest) -> list[Hit]:
        """The best :data:`MAX_HITS` articles of ``req``.

        Raises:
          IndexMissing: no index (no path configured, or no file yet).
        """
        if self.path is None:
            raise IndexMissing("search is not configured (no search index path)")
        with self._lock:
            if self._index is None:
                self._index = SearchIndex(self.path, readonly=True)
        return self._index.search(req.q, req.filters, MAX_HITS)


def _article(h: Hit) -> dict:
    return {
        "article_id": h.article_id,
        "title": h.title,
        "url": h.url,
        "domain": h.domain,
        "outlet": h.outlet,
        "language": h.language,
        "event_time": h.event_time,
        "lead": h.lead,
    }


def _article_shown(h: Hit, view: ReaderView) -> bool:
    """The coverage rules of :meth:`ReaderView.articles` for one search hit: not from a blocked outlet, no muted
    words in the headline or lead."""
    return h.outlet not in view.profile.block_sources and not view.mutes.search(h.title, h.lead)


def search_results(api, req: SearchRequest, view: ReaderView | None) -> dict:
    """The answer of ``req`` (module docstring) as ``view``'s reader sees it (``None``: the public answer).

    Raises:
      IndexMissing: no index yet. Redis errors propagate.
    """
    hits = api.search.hits(req)
    raw_ids = list(dict.fromkeys(h.story_id for h in hits))
    recs = live_records(api, raw_ids)
    groups: dict[str, list[Hit]] = {}
    for h in hits:
        rec = recs.get(h.story_id)
        if rec is not None:
            groups.setdefault(rec.story_id, []).append(h)
    live = {r.story_id: r for r in recs.values()}
    stories = []
    for sid, group in groups.items():
        item = live[sid].summary()
        if view is not None:
            if view.hides(item):
                continue
            group = [h for h in group if _article_shown(h, view)]
            if not group:
                continue
            item = view.marked(item)
        item["matches"] = len(group)
        item["articles"] = [_article(h) for h in group[:MAX_ARTICLES]]
        stories.append(item)
    page, nxt = page_of(stories, req.cursor, req.limit)
    return {
        "query": req.q,
        "filters": {k: v for k, v in req.params().items() if k != "q"},
        "count": len(page),
        "next_cursor": nxt,
        "next": nxt,
        "stories": page,
    }


def api_search_request(request: Request, default_limit: int) -> SearchRequest:
    """:func:`parse_search` of an API request (``/v1/search``, the search feeds).

    Raises:
      ApiError: 400 ``bad_cursor`` (a cursor this server did not issue), else 400 ``bad_parameter``.
    """
    from newsflow.serving.app import ApiError

    try:
        return parse_search(request.query_params, default_limit)
    except BadCursor as e:
        raise ApiError(400, "bad_cursor", str(e)) from None
    except ValueError as e:
        raise ApiError(400, "bad_parameter", str(e)) from None


def api_search_results(api, req: SearchRequest, view: ReaderView | None) -> dict:
    """:func:`search_results` behind the API's Redis breaker.

    Raises:
      ApiError: 503 ``search_unavailable`` without an index, 503 ``unavailable`` with Redis down.
    """
    from newsflow.serving.app import ApiError

    try:
        api._guard()
        return search_results(api, req, view)
    except IndexMissing as e:
        raise ApiError(503, "search_unavailable", str(e), {"Retry-After": "60"}) from None
    except REDIS_ERRORS as e:
        api._mark_down()
        raise ApiError(
            503, "unavailable", f"story store unavailable: {type(e).__name__}", {"Retry-After": "5"}
        ) from None


class SearchHandlers:
    """``GET /v1/search`` and ``GET /search`` over the app's :class:`~newsflow.serving.app.Api` and
    :class:`~newsflow.serving.web.Web`."""

    def __init__(self, api, web):
        self.api, self.web = api, web

    def api_search(self, request: Request) -> Response:
        req = api_search_request(request, self.api.config.default_limit)
        view = self.api._reader_view_of(request)
        payload = api_search_results(self.api, req, view)
        return self.api._respond(request, payload, "private" if view is not None else "public")

    def page(self, request: Request) -> Response:
        from newsflow.serving.web import PageError

        try:
            req = parse_search(request.query_params, self.api.config.default_limit, require_q=False)
        except ValueError as e:
            raise PageError(400, "Cannot search for that", str(e)) from None
        sess = self.web.session(request)
        view = self.web._view(request, sess[0]) if sess else None
        ctx = self.web._context(request, sess, view.profile if view else None, view)
        ctx.update(title="Search", req=req, results=None, unavailable="", params={}, next_href="")
        if req is not None:
            ctx["title"] = f"Search: {req.q}"
            ctx["params"] = req.params()
            ctx["search_q"] = req.q
            ctx["here"] = "/search?" + _query(req.params())
            try:
                self.api._guard()
                results = search_results(self.api, req, view)
                ctx["results"] = results
                if results["next_cursor"]:
                    more = dict(req.params(), cursor=results["next_cursor"])
                    if view is not None and view.hide_read:
                        more["hide_read"] = "1"  # the next page keeps the read filter
                    ctx["next_href"] = "/search?" + _query(more)
            except IndexMissing:
                ctx["unavailable"] = "Search is not ready yet: nothing has been indexed."
            except REDIS_ERRORS:
                self.api._mark_down()
                ctx["unavailable"] = "Search is unavailable right now; try again in a moment."
        ctx["alternate_feeds"] = search_feed_links(req)
        return self.web.render(request, "search.html", ctx, personal=sess is not None)


def _query(params: Mapping) -> str:
    from urllib.parse import urlencode

    return urlencode(params)


def search_feed_links(req: SearchRequest | None) -> list[tuple[str, str, str]]:
    """``(type, title, href)`` of a search's RSS and Atom feeds (none for the empty search page)."""
    if req is None:
        return []
    qs = _query(req.params())
    return [
        ("application/rss+xml", f"Search: {req.q} (RSS)", f"/feeds/search.rss?{qs}"),
        ("application/atom+xml", f"Search: {req.q} (Atom)", f"/feeds/search.atom?{qs}"),
    ]


def search_routes(api, web) -> list[Route]:
    """The search routes for :func:`newsflow.serving.app.create_app`."""
    h = SearchHandlers(api, web)
    return [
        Route("/v1/search", h.api_search, methods=["GET"]),
        Route("/search", h.page, methods=["GET"]),
    ]
