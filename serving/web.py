"""The reader web UI: server-rendered HTML (Jinja2) on the API's app, usable without JavaScript.

Pages (all ``GET``; forms ``POST`` with a CSRF token):

==========================  ===============================================================
``/``                       top stories of an edition (``?edition=``, a page at a time: ``?cursor=``,
                            "More stories") — the same stories as
                            ``/v1/top`` in the same order — with the breaking banner
``/stories/{story_id}``     full coverage: "N sources", the lead report, the top coverage (at most 30
                            independent reports, two per outlet: :mod:`newsflow.core.coverage`) with their
                            syndicated copies, "show more" pages (``?cursor=``), the timeline in brief,
                            entities; signed in, the preferred-lead control is a text input with the
                            covering outlets as a ``<datalist>``
``/topics``, ``/topics/{t}`` the topic list and a topic's feed (as ``/v1/topics/{t}``)
``/trending``               trending stories, topics and entities, breaking stories
``/sources/{outlet}``       stories an outlet leads in the global pool
``/entities/{name}``        stories of the global pool naming an entity (a trending chip's link)
``/for-you``                the reader's own feed (as ``/v1/feed``), each card saying why
``/saved``                  the reader's saved stories (``POST``: ``op=save:<id>``/``unsave:<id>`` from any card
                            or coverage page)
``/settings``               followed and blocked topics and outlets, muted words, with undo buttons
``/signin``, ``/register``  accounts with passwords, sessions, the account page (password, personal API
``/signout``, ``/account``  tokens, sign out everywhere, deletion) and the editors' ``/admin`` page:
``/admin``                  :mod:`newsflow.serving.accounts_web`
``/prefs``                  ``POST``: follow/unfollow/block/unblock a topic or outlet, then
                            back to ``next`` (from a card: to ``#follow-<story id>``, :func:`focus_fragment`)
==========================  ===============================================================

Caching: a page without a session cookie is the same for everyone and carries the JSON API's
headers (``Cache-Control: public, max-age, s-maxage``, strong ``ETag``, ``304`` on
``If-None-Match``) plus ``Vary: Cookie``; it is also kept in the API's in-process cache. A signed-in
reader's pages apply their :class:`~newsflow.serving.reader_view.ReaderView` (blocks and muted words on top,
topics, trending, sources, breaking and coverage lists; read cards dimmed and said "Read", ``?hide_read=1``
on every list; an opened coverage page marks its story read) and are ``private, no-store``.

Sessions: the ``nf_session`` cookie holds a random session id kept (hashed) in Redis
(:mod:`newsflow.storage.accounts`); it is never an API bearer token, and API tokens are never sessions.
Cookies are always ``HttpOnly; SameSite=Lax``, and ``Secure`` when the request's scheme is https, which
behind a reverse proxy is what a trusted proxy says (``ServingConfig.trusted_proxies``).

CSRF: every form carries a token. Signed in, it is HMAC-SHA256(secret, ``"csrf|" + session
cookie``), so it changes with the session and cannot be forged without the secret; the sign-in and
registration forms use a double-submit random cookie (``nf_csrf``) against login CSRF. The pages send a
``Content-Security-Policy`` that allows no script at all.

Compression: public pages are gzip-encoded once per cached version, personal ones per answer, for requests
that accept gzip (:mod:`newsflow.serving.http_cache`).

Site files: ``/robots.txt`` (:data:`ROBOTS_TXT`), ``/manifest.webmanifest`` (:data:`MANIFEST`) and the icon
``/static/favicon.svg`` (``/favicon.ico`` redirects to it); the CSP allows the manifest (``manifest-src 'self'``).

Templates live in ``serving/templates`` and the stylesheet and icon in ``serving/static``; filters, time
text and the page-context builders are :mod:`newsflow.serving.web_view`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import threading
import time
from collections.abc import Callable
from urllib.parse import parse_qsl, quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from newsflow.core.outlets import outlet
from newsflow.core.ranking.feeds import GLOBAL_EDITION, POOL_SIZE
from newsflow.core.ranking.front_page import banner, chip_key
from newsflow.schemas import UserProfile
from newsflow.serving.feeds_out import page_feed_links
from newsflow.serving.http_body import BodyTooLarge, read_capped
from newsflow.serving.http_cache import (
    cache_headers,
    cache_hit_on_loop,
    cached_answer,
    negotiated,
    not_modified_or,
    strong_etag,
)
from newsflow.serving.me import live_records
from newsflow.serving.pages import UnknownTopic, coverage_page, feed_page
from newsflow.serving.paging import Cursor
from newsflow.serving.preferences import apply_action, normalize_source, normalize_topic, reader_preferences
from newsflow.serving.reader_view import NEW_DEVELOPMENTS, ReaderView, hide_read_param
from newsflow.serving.resilience import REDIS_ERRORS
from newsflow.serving.web_view import (
    ago_text,
    coverage_changes,
    coverage_context,
    coverage_snapshot,
    is_inferred,
    safe_next,
    templates,
    why_labels,
)
from newsflow.storage.accounts import split_session
from newsflow.storage.events import is_valid_story_id
from newsflow.storage.feed_page import drop_user_feed

SESSION_COOKIE = "nf_session"
CSRF_COOKIE = "nf_csrf"
MAX_FORM_BYTES = 8 * 1024
STATIC_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; manifest-src 'self'; form-action 'self'; "
        "base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "strict-origin-when-cross-origin",
}
MAX_LIMIT = 100
ASSET_CACHE = "public, max-age=86400"
ROBOTS_TXT = """User-agent: *
Disallow: /account
Disallow: /admin
Disallow: /for-you
Disallow: /prefs
Disallow: /register
Disallow: /saved
Disallow: /settings
Disallow: /signin
Disallow: /signout
Disallow: /v1/
"""
"""``/robots.txt``: public pages (top stories, coverage, topics, trending, sources, search, feeds) may be crawled;
readers' own pages, forms and the JSON API may not."""
MANIFEST = {
    "name": "newsflow",
    "short_name": "newsflow",
    "description": "Top stories ranked by authority and freshness, grouped into full coverage.",
    "start_url": "/",
    "scope": "/",
    "display": "browser",
    "background_color": "#ffffff",
    "theme_color": "#0b57d0",
    "icons": [{"src": "/static/favicon.svg", "sizes": "any", "type": "image/svg+xml", "purpose": "any"}],
}
"""``/manifest.webmanifest`` (W3C Web App Manifest), linked from every page."""
NAV = (
    ("/", "Top stories"),
    ("/for-you", "For You"),
    ("/topics", "Topics"),
    ("/trending", "Trending"),
    ("/saved", "Saved"),
)


class PageError(Exception):
    """An HTML error page (``status``, ``title``, ``message``)."""

    def __init__(self, status: int, title: str, message: str):
        super().__init__(message)
        self.status, self.title, self.message = status, title, message


_PLAIN = re.compile(r"[A-Za-z0-9_-]{1,40}\Z")


def _here(request: Request) -> str:
    """The page's own address for sign-in's ``next``: the path plus only the ``edition`` parameter, and
    only a plain one. Anonymous pages are cached per path and edition, so echoing any other query text
    would serve one visitor's query to the next."""
    edition = request.query_params.get("edition", "")
    return request.url.path + (f"?edition={edition}" if _PLAIN.match(edition) else "")


class Web:
    """HTML handlers over an :class:`newsflow.serving.app.Api` (its store, snapshots, cache and clocks)."""

    def __init__(self, api):
        self.api = api
        self.env = templates()
        self.secret = api.config.token_secret
        self._names_lock = threading.Lock()
        self._memos: dict[str, tuple[float, object]] = {}

    # -- readers ------------------------------------------------------------------------
    def session(self, request: Request) -> tuple[str, str] | None:
        """``(reader, session cookie)`` of a live session, else ``None`` (an unknown, ended or expired
        session, or Redis down, is signed out). The one way pages identify a reader (the JSON API's is
        :meth:`newsflow.serving.app.Api._user`); looked up once per request. Blocking: not on the event loop."""
        if "nf_session" in request.scope.get("state", {}):
            return request.state.nf_session
        cookie = request.cookies.get(SESSION_COOKIE)
        found = None
        if cookie and split_session(cookie) is not None:
            try:
                self.api._guard()
                user = self.api.accounts.session_user(cookie, self.api.config.clock())
                found = (user, cookie) if user else None
            except REDIS_ERRORS:
                self.api._mark_down()
        request.state.nf_session = found
        return found

    def csrf_for(self, token: str) -> str:
        """The CSRF token of a session: hex HMAC-SHA256(secret, ``"csrf|" + token``), 32 chars."""
        return hmac.new(self.secret, b"csrf|" + token.encode("ascii"), hashlib.sha256).hexdigest()[:32]

    def _profile(self, reader: str | None) -> UserProfile | None:
        if reader is None:
            return None
        try:
            self.api._guard()
            return self.api.store.user_profile(reader)
        except REDIS_ERRORS:
            self.api._mark_down()
            return UserProfile(reader)

    def _extras(self, reader: str | None) -> dict:
        """The reader's preferred lead outlets and removed interests
        (:meth:`RankingStore.preference_extras`); empty for anonymous readers or with Redis down."""
        if reader is None:
            return {"prefer_sources": frozenset(), "dismiss_topics": frozenset(), "mute_words": frozenset()}
        try:
            self.api._guard()
            return self.api.store.preference_extras(reader)
        except REDIS_ERRORS:
            self.api._mark_down()
            return {"prefer_sources": frozenset(), "dismiss_topics": frozenset(), "mute_words": frozenset()}

    # -- rendering ------------------------------------------------------------------------
    def _context(self, request: Request, sess, profile: UserProfile | None, view: ReaderView | None = None) -> dict:
        return {
            "hide_read": bool(view and view.hide_read),
            "reader": sess[0] if sess else None,
            "csrf": self.csrf_for(sess[1]) if sess else "",
            "profile": profile,
            "here": _here(request),
            "nav": NAV,
            "now": self.api._ranking_now(),
            "ago": ago_text,
            "stale": "",
            "alternate_feeds": page_feed_links(request.url.path, request.query_params.get("edition", "")),
        }

    def render(self, request: Request, template: str, ctx: dict, personal: bool, status: int = 200) -> Response:
        """An HTML response: public pages get the API's CDN headers and a strong ETag (``304`` on a
        matching ``If-None-Match``); personal ones ``private, no-store``, gzip-encoded when the request accepts
        it (:func:`~newsflow.serving.http_cache.negotiated`)."""
        body = self.env.get_template(template).render(**ctx).encode("utf-8")
        cfg = self.api.config
        headers = cache_headers(
            "private" if personal else "public", cfg.max_age, cfg.s_maxage, cfg.stale_s_maxage, ctx.get("stale", "")
        )
        headers["Vary"] = "Cookie, Accept-Encoding"
        headers.update(SECURITY_HEADERS)
        if status != 200:
            headers["Cache-Control"] = "no-store"
        headers["ETag"] = strong_etag(body)
        resp = Response(body, status_code=status, headers=headers, media_type="text/html; charset=utf-8")
        if personal:  # sent once: compressed here; a public page is compressed once by the cache that keeps it
            resp = negotiated(resp, request.headers.get("accept-encoding", ""))
        return not_modified_or(resp, request.headers.get("if-none-match", ""))

    def public_page(self, key_of: Callable[[Request], str | None], handler: Callable[[Request], Response]):
        """:func:`~newsflow.serving.http_cache.cache_hit_on_loop` for a page :meth:`_page` caches for signed-out
        readers under ``key_of(request)`` (``None``: not cacheable): a signed-out request whose page is
        cached is answered on the event loop; any other runs ``handler`` in the worker pool."""

        def cache_key(request: Request) -> str | None:
            if split_session(request.cookies.get(SESSION_COOKIE, "")) is not None:
                return None  # maybe signed in: the handler looks the session up, off the event loop
            key = key_of(request)
            return None if key is None else "html|" + key

        return cache_hit_on_loop(self.api.cache, cache_key, handler)

    def _home_key(self, request: Request) -> str:
        return f"home|{self.api._edition(request)}|{self.api._cursor_key(request)}"

    def _topic_key(self, request: Request) -> str | None:
        try:
            return f"topic|{normalize_topic(request.path_params['topic'])}|{self.api._cursor_key(request)}"
        except ValueError:
            return None

    def _view(self, request: Request, reader: str) -> ReaderView:
        """The signed-in reader's :class:`~newsflow.serving.reader_view.ReaderView` (``?hide_read=1`` read from
        the request); with Redis down, an empty one."""
        try:
            self.api._guard()
            return self.api.reader_view(reader, hide_read_param(request.query_params))
        except REDIS_ERRORS:
            self.api._mark_down()
            return ReaderView(UserProfile(reader))

    def _page(self, request: Request, key: str, template: str, build) -> Response:
        """Renders ``template`` with ``build(view)``'s context: cached in-process for anonymous
        readers under ``key`` (``view`` is ``None``), personal (the reader's :class:`ReaderView` applied,
        private) for a signed-in one."""
        sess = self.session(request)
        if sess is None:

            def anon() -> Response:
                ctx = self._context(request, None, None)
                ctx.update(build(None))
                return self.render(request, template, ctx, personal=False)

            return cached_answer(self.api.cache, "html|" + key, anon, request)
        view = self._view(request, sess[0])
        ctx = self._context(request, sess, view.profile, view)
        ctx.update(build(view))
        return self.render(request, template, ctx, personal=True)

    # -- data -----------------------------------------------------------------------------
    def _names_of(self, kind: str) -> list[str]:
        """Edition or topic names that have a precomputed feed (:meth:`Api.feed_names`)."""
        return self.api.feed_names(kind)

    def _memo(self, key: str, build):
        """``build()``, kept in-process for ``local_cache_seconds`` (shared by every reader; 0 disables):
        the data behind a page, before any reader's blocks are applied."""
        ttl = self.api.config.local_cache_seconds
        if ttl <= 0:
            return build()
        now = time.monotonic()
        with self._names_lock:
            hit = self._memos.get(key)
        if hit is not None and hit[0] > now:
            return hit[1]
        value = build()
        with self._names_lock:
            if len(self._memos) >= 10_000:
                self._memos.clear()
            self._memos[key] = (now + ttl, value)
        return value

    def _feed(
        self, kind: str, name: str, limit: int, cursor: Cursor | None = None, view: ReaderView | None = None
    ) -> tuple[dict, str, int]:
        """``(page, stale reason, stories of the feed the reader's rules hide)``: a reader's ``view`` filters the
        whole feed before it is paged (not kept in the memo); without one the page is the public one (kept)."""

        def doc_of() -> tuple[dict | None, str]:
            key = self.api.store.keys.feed(kind, name)
            fallback = f"edition:{GLOBAL_EDITION}" if kind == "edition" else ""
            return self.api._feed_with_fallback(f"{kind}:{name}", key, fallback)

        if view is not None:
            doc, stale = doc_of()
            everything = (doc or {}).get("stories", [])
            shown = view.stories(everything)
            page = feed_page(kind, name, dict(doc or {}, stories=shown), limit, stale, cursor)
            return page, stale, len(everything) - len(shown)

        def build() -> tuple[dict, str, int]:
            doc, stale = doc_of()
            return feed_page(kind, name, doc, limit, stale, cursor), stale, 0

        at = "" if cursor is None else f"{cursor.offset}:{cursor.last_id}"
        return self._memo(f"feed|{kind}|{name}|{limit}|{at}", build)

    def _stories_by_outlet(self) -> dict[str, list[dict]]:
        """Summaries of the global pool's stories grouped by the outlet that leads them, in pool (score)
        order: ``{outlet: [story summary]}``. Redis errors propagate."""

        def build() -> dict[str, list[dict]]:
            store = self.api.store
            ids = [sid for sid, _ in store.pool("edition", GLOBAL_EDITION, POOL_SIZE)]
            out: dict[str, list[dict]] = {}
            for rec in store.get_stories(ids):
                if rec is not None and not rec.merged_into:
                    out.setdefault(outlet(rec.domain), []).append(rec.summary())
            return out

        return self._memo("by-outlet", build)

    def _stories_by_entity(self) -> dict[str, list[dict]]:
        """Summaries of the global pool's stories by the normalised form of each entity they name
        (:func:`newsflow.core.ranking.front_page.chip_key`, as the trending chips), in pool (score) order.
        Redis errors propagate."""

        def build() -> dict[str, list[dict]]:
            store = self.api.store
            ids = [sid for sid, _ in store.pool("edition", GLOBAL_EDITION, POOL_SIZE)]
            out: dict[str, list[dict]] = {}
            for rec in store.get_stories(ids):
                if rec is None or rec.merged_into:
                    continue
                for key in dict.fromkeys(chip_key(str(e.get("text", ""))) for e in rec.entities or ()):
                    if key:
                        out.setdefault(key, []).append(rec.summary())
            return out

        return self._memo("by-entity", build)

    def entity(self, request: Request) -> Response:
        """``/entities/{name}``: the live stories naming an entity (a trending chip's link)."""
        key = chip_key(request.path_params["name"])
        if not key:
            raise PageError(400, "Not an entity", "give a name, e.g. /entities/barack%20obama")
        limit = self.api.config.default_limit

        def build(view):
            stories, stale = [], ""
            try:
                self.api._guard()
                stories = self._stories_by_entity().get(key, [])[:limit]
            except REDIS_ERRORS:
                self.api._mark_down()
                stale = "redis-unavailable"
            if view:
                stories = view.stories(stories)
            return {"title": key, "entity": key, "stories": stories, "stale": stale}

        return self._page(request, f"entity|{key}", "entity.html", build)

    def _breaking(self, view: ReaderView | None) -> list[dict]:
        try:
            self.api._guard()
            breaking, items = self.api._breaking_items(self.api._ranking_now())
        except REDIS_ERRORS:
            self.api._mark_down()
            return []
        rows = [dict(items[sid], breaking_since=since) for sid, since in breaking.items() if sid in items]
        rows.sort(key=lambda r: (-r["breaking_since"], r["story_id"]))
        return view.stories(rows) if view else rows

    # -- pages ----------------------------------------------------------------------------
    def home(self, request: Request) -> Response:
        edition = self.api._edition(request)
        limit = self.api.config.default_limit
        cursor = self.api._cursor(request)  # a bad one is a 400, like a bad edition

        def build(view):
            page, stale, hidden = self._feed("edition", edition, limit, cursor, view)
            shown = page["stories"]
            return {
                "title": "Top stories",
                "edition": edition,
                "editions": self.api.menu_editions(edition),
                "stories": shown,
                "hidden": hidden,
                # the banner on the first page only, without the stories of its first cards
                "breaking": banner(self._breaking(view), shown) if cursor is None else [],
                "next_cursor": page["next_cursor"],
                "generated_at": page["generated_at"],
                "stale": stale,
            }

        return self._page(request, self._home_key(request), "home.html", build)

    def topics(self, request: Request) -> Response:
        def build(view):
            names = self._names_of("topic")
            if view:
                names = [r["topic"] for r in view.topics({"topic": t} for t in names)]
            return {"title": "Topics", "topics": names}

        return self._page(request, "topics", "topics.html", build)

    def topic(self, request: Request) -> Response:
        raw = request.path_params["topic"]
        try:
            topic = normalize_topic(raw)
        except ValueError as e:
            raise PageError(400, "Not a topic", str(e)) from None
        limit = self.api.config.default_limit
        cursor = self.api._cursor(request)
        at = "" if cursor is None else f"{cursor.offset}:{cursor.last_id}"

        def build(view):
            try:
                if view is not None:  # the reader's rules filter the feed before it is paged
                    page, stale = self.api.topic_feed(topic, limit, cursor, view)
                else:
                    page, stale = self._memo(
                        f"topic|{topic}|{limit}|{at}", lambda: self.api.topic_feed(topic, limit, cursor)
                    )
            except UnknownTopic as e:
                raise PageError(404, "Topic not found", str(e)) from None
            stories = page["stories"]
            blocked_topic = bool(view and topic in view.profile.block_topics)
            return {
                "title": f"Topic: {topic}",
                "topic": topic,
                "blocked_topic": blocked_topic,
                "stories": [] if blocked_topic else stories,
                "next_cursor": None if blocked_topic else page["next_cursor"],
                "generated_at": page["generated_at"],
                "stale": stale,
            }

        return self._page(request, self._topic_key(request), "topic.html", build)

    def trending(self, request: Request) -> Response:
        limit = self.api.config.default_limit

        def build(view):
            now = self.api._ranking_now()
            stale = ""
            try:
                self.api._guard()
                end, rows, chips, topic_rows = self.api.trending_parts(now, limit)
            except REDIS_ERRORS:
                self.api._mark_down()
                end, rows, chips, topic_rows, stale = None, [], [], [], "redis-unavailable"
            stories = [dict(rec.summary(), new_articles=c) for rec, c in rows]
            topics = [{"topic": k, "new_articles": c} for k, c in topic_rows]
            entities = chips
            if view:
                stories, topics, entities = view.stories(stories), view.topics(topics), view.entities(entities)
            return {
                "title": "Trending",
                "window_end": end,
                "stories": stories,
                "entities": entities,
                "topics": topics,
                "breaking": banner(self._breaking(view), stories),
                "stale": stale,
            }

        return self._page(request, "trending", "trending.html", build)

    def source(self, request: Request) -> Response:
        raw = request.path_params["outlet"]
        try:
            name = normalize_source(raw)
        except ValueError as e:
            raise PageError(400, "Not a source", str(e)) from None
        if name != raw:
            return RedirectResponse(f"/sources/{quote(name, safe='')}", status_code=301)
        limit = self.api.config.default_limit

        def build(view):
            stories, stale = [], ""
            try:
                self.api._guard()
                stories = self._stories_by_outlet().get(name, [])[:limit]
            except REDIS_ERRORS:
                self.api._mark_down()
                stale = "redis-unavailable"
            blocked = bool(view and name in view.profile.block_sources)
            if view:
                stories = [] if blocked else view.stories(stories)
            preferred = bool(view and name in view.prefer)
            return {
                "title": name,
                "outlet": name,
                "blocked_source": blocked,
                "preferred_source": preferred,
                "stories": stories,
                "stale": stale,
            }

        return self._page(request, f"source|{name}", "source.html", build)

    def story(self, request: Request) -> Response:
        sid = request.path_params["story_id"]
        if not is_valid_story_id(sid):
            raise PageError(400, "Not a story", f"story id must be 1-128 chars of [A-Za-z0-9_.:-], got {sid!r}")
        try:
            self.api._guard()
            rec = self.api.store.get_story(sid)
            if rec is None:
                raise PageError(404, "Story not found", f"There is no story {sid}.")
            if rec.merged_into:
                return RedirectResponse(f"/stories/{quote(rec.merged_into, safe='')}", status_code=301)
            articles = self.api.store.story_articles(sid)
        except REDIS_ERRORS:
            self.api._mark_down()
            raise PageError(503, "Temporarily unavailable", "The story store is unavailable; try again.") from None

        cursor = self.api._cursor(request)  # "show more": a bad one is a 400

        def build(view):
            if view is None:
                cov = coverage_page(rec.summary(), rec.entities, articles)
                return dict(coverage_context(cov, articles, None, cursor=cursor), title=rec.title or "Full coverage")
            arts = view.articles(articles)  # blocked outlets and muted headlines left out of lists and timeline
            cov = view.marked(coverage_page(rec.summary(), rec.entities, arts))
            ctx = coverage_context(cov, arts, view.profile, view.prefer, cursor)
            ctx["title"] = rec.title or "Full coverage"
            if len(arts) < len(articles):  # the head still tells the story's whole coverage: "5 sources"
                whole = coverage_page(rec.summary(), rec.entities, articles)
                ctx["story"] = dict(cov, coverage=whole["coverage"], by_language=whole["by_language"])
                ctx["outlet_count"] = len({outlet(x["domain"]) for x in whole["sources"]})
            ctx["hidden_articles"] = len(articles) - len(arts)
            ctx["changes"] = self._since_last_look(view.profile.user_id, sid, cov) if cursor is None else None
            return ctx

        return self._page(request, self._story_key(request), "story.html", build)

    def _story_key(self, request: Request) -> str | None:
        """The anonymous cache key of a coverage page (its story and cursor); ``None`` for a bad story id (the
        handler answers 400). A bad cursor raises the 400 :meth:`Api._cursor` raises."""
        sid = request.path_params["story_id"]
        if not is_valid_story_id(sid):
            return None
        return f"story|{sid}|{self.api._cursor_key(request)}"

    def _since_last_look(self, reader: str, sid: str, cov: dict) -> dict | None:
        """What changed in ``sid``'s coverage since ``reader`` last opened it
        (:func:`newsflow.serving.web_view.coverage_changes`), and records this view: the story is marked read
        with its independent reports now, and the coverage seen is kept (the read-state store); ``None`` on a
        first view or with Redis down."""
        now = self.api._ranking_now()
        try:
            self.api._guard()
            state = self.api.reader_state
            seen = state.seen_story(reader, sid)
            reports = int(cov.get("independent_count") or cov["coverage"]["independent_reports"])
            state.mark_read(reader, {sid: (now, reports)}, {sid: coverage_snapshot(cov, now)})
            self.api.personal.pages.forget(reader)
        except REDIS_ERRORS:
            self.api._mark_down()
            return None
        return coverage_changes(seen, cov, now)

    def for_you(self, request: Request) -> Response:
        sess = self.session(request)
        if sess is None:
            return RedirectResponse("/signin?next=/for-you", status_code=303)
        edition = self.api._edition(request, default="")
        limit = self.api.config.default_limit
        cursor = self.api._cursor(request)  # a bad one is a 400, like a bad edition
        view = self._view(request, sess[0])
        # the same page as /v1/feed: read stories only when they changed, removed interests and mutes dropped
        payload, stale = self.api.personal_feed(sess[0], edition, limit, view.hide_read, cursor)
        velocity = {}
        try:
            self.api._guard()
            now = self.api._ranking_now()
            # the same for every reader: kept in-process for local_cache_seconds, like the breaking set
            velocity = self._memo("velocity", lambda: dict(self.api.store.latest_trending("story", 100, now)[1]))
        except REDIS_ERRORS:
            self.api._mark_down()
        stories = []
        for it in view.stories(payload["stories"]):
            labels = why_labels(it, view.profile, velocity)
            if it.get("new_since_read"):
                labels = [NEW_DEVELOPMENTS, *labels]
            stories.append(dict(it, why=labels, inferred=is_inferred(labels)))
        ctx = self._context(request, sess, view.profile, view)
        ctx.update(
            title="For You",
            stories=stories,
            edition=payload.get("edition") or edition or GLOBAL_EDITION,
            generated_at=payload.get("generated_at"),
            stale=stale,
            next_cursor=payload.get("next_cursor"),
            edition_param=edition,
        )
        return self.render(request, "for_you.html", ctx, personal=True)

    def saved(self, request: Request) -> Response:
        sess = self.session(request)
        if sess is None:
            return RedirectResponse("/signin?next=/saved", status_code=303)
        view = self._view(request, sess[0])
        stories, stale = [], ""
        try:
            self.api._guard()
            rows = self.api.reader_state.saved(sess[0], 0, MAX_LIMIT)
            recs = live_records(self.api, [sid for sid, _ in rows])
            # saved stories stay listed even when blocked or muted later: the reader chose each one
            stories = [view.marked(dict(recs[sid].summary(), saved_at=t)) for sid, t in rows if sid in recs]
        except REDIS_ERRORS:
            self.api._mark_down()
            stale = "redis-unavailable"
        if view.hide_read:
            stories = [s for s in stories if not s.get("read")]
        ctx = self._context(request, sess, view.profile, view)
        ctx.update(title="Saved stories", stories=stories, stale=stale)
        return self.render(request, "saved.html", ctx, personal=True)

    async def save_form(self, request: Request) -> Response:
        """``POST /saved``: ``op=save:<story id>`` or ``op=unsave:<story id>``, then back to ``next`` at the story's
        button (``#save-<story id>``: keyboard focus stays on it)."""
        form = await self._form(request)
        sess = self.session(request)
        self._check_csrf(form, sess)
        action, _, sid = form.get("op", "").partition(":")
        if action not in ("save", "unsave") or not is_valid_story_id(sid):
            raise PageError(400, "Could not change that", "op must be save:<story id> or unsave:<story id>")

        def change() -> None:
            if action == "unsave":
                self.api.reader_state.unsave(sess[0], sid)
                return
            rec = live_records(self.api, [sid]).get(sid)
            if rec is None:
                raise PageError(404, "Story not found", f"There is no story {sid}.")
            self.api.reader_state.save(sess[0], rec.story_id, self.api._ranking_now())

        await self._write(change, "Saved stories", 409, "Too many saved stories")
        return RedirectResponse(safe_next(form.get("next")).split("#", 1)[0] + f"#save-{sid}", status_code=303)

    async def _write(self, change, what: str, refused_status: int, refused_title: str) -> None:
        """``change()`` in the thread pool behind the API's Redis breaker: a ``ValueError`` is refused with
        ``refused_status``/``refused_title`` and its message, Redis down is a 503 saying ``what`` cannot be
        changed."""
        try:
            self.api._guard()
            await run_in_threadpool(change)
        except ValueError as e:
            raise PageError(refused_status, refused_title, str(e)) from None
        except REDIS_ERRORS:
            self.api._mark_down()
            raise PageError(503, "Temporarily unavailable", f"{what} cannot be changed right now.") from None

    def settings(self, request: Request) -> Response:
        sess = self.session(request)
        if sess is None:
            return RedirectResponse("/signin?next=/settings", status_code=303)
        ctx = self._context(request, sess, self._profile(sess[0]))
        profile = ctx["profile"]
        ctx.update(
            title="Your topics, sources and muted words",
            prefs=reader_preferences(profile, self._extras(sess[0])),
        )
        return self.render(request, "settings.html", ctx, personal=True)

    # -- forms ---------------------------------------------------------------------------------
    async def _form(self, request: Request) -> dict[str, str]:
        if "application/x-www-form-urlencoded" not in request.headers.get("content-type", ""):
            raise PageError(415, "Unsupported form", "Forms must be sent as application/x-www-form-urlencoded.")
        try:
            body = await read_capped(request, MAX_FORM_BYTES)
        except BodyTooLarge:
            raise PageError(413, "Form too large", f"Forms are limited to {MAX_FORM_BYTES} bytes.") from None
        try:
            return dict(parse_qsl(body.decode("utf-8"), keep_blank_values=True, max_num_fields=20))
        except (UnicodeDecodeError, ValueError):
            raise PageError(400, "Bad form", "The form could not be read.") from None

    def _check_csrf(self, form: dict, sess) -> None:
        if sess is None:
            raise PageError(401, "Signed out", "Your session ended; sign in again.")
        if not hmac.compare_digest(self.csrf_for(sess[1]).encode(), form.get("csrf", "").encode()):
            raise PageError(403, "Form expired", "The form expired; reload the page and try again.")

    async def prefs(self, request: Request) -> Response:
        form = await self._form(request)
        sess = self.session(request)
        self._check_csrf(form, sess)

        def save() -> None:
            store = self.api.store
            action, kind, value = form_action(form)
            change = apply_action(self.api.preferences_of(sess[0]), action, kind, value)
            store.write_preferences(sess[0], change)
            drop_user_feed(store.client, sess[0], store.keys)  # rebuilt with the new preferences
            self.api.personal.pages.forget(sess[0])

        await self._write(save, "Preferences", 400, "Could not change that")
        return RedirectResponse(safe_next(form.get("next")).split("#", 1)[0] + focus_fragment(form), status_code=303)

    def error_page(self, request: Request, exc: PageError) -> Response:
        """The HTML error page; the reader of a session looked up earlier in the request shows in its header
        (it never looks one up: error handlers run on the event loop)."""
        sess = request.state.nf_session if "nf_session" in request.scope.get("state", {}) else None
        ctx = self._context(request, sess, None)
        ctx.update(title=exc.title, message=exc.message)
        return self.render(request, "error.html", ctx, personal=True, status=exc.status)


def form_action(form: dict[str, str]) -> tuple[str, str, str]:
    """``(action, kind, value)`` of a preference form: a card's pressed button sends them as one
    ``op=action:kind:value`` field (topics and outlets never contain ``:``); single-purpose forms send
    ``action``, ``kind`` and ``value`` fields."""
    op = form.get("op")
    if op:
        parts = op.split(":", 2)
        return (parts[0], parts[1], parts[2]) if len(parts) == 3 else ("", "", "")
    return form.get("action", ""), form.get("kind", ""), form.get("value", "")


HIDING_ACTIONS = frozenset({"block", "dismiss"})
"""Card actions after which the card leaves the page (its topic or outlet blocked, the interest removed)."""


def focus_fragment(form: dict[str, str]) -> str:
    """Where keyboard focus lands after a card's preference button: ``"#follow-<story id>"`` naming the first
    button of the card the form came from (``card``), or of the next card (``after``) when the action hides
    this one (:data:`HIDING_ACTIONS`); ``""`` when the form names no valid card (a settings form, the coverage
    page). Browsers focus a focusable fragment target, and open the ``<details>`` around it."""
    action = form_action(form)[0]
    card, after = form.get("card", ""), form.get("after", "")
    target = after if action in HIDING_ACTIONS and after else card
    return f"#follow-{target}" if target and is_valid_story_id(target) else ""


def https(request: Request) -> bool:
    """Whether cookies of this response are ``Secure``: the request's scheme is https (behind a trusted proxy,
    the scheme it forwarded: ``ServingConfig.trusted_proxies``)."""
    return request.url.scheme == "https"


def site_files() -> list[Route]:
    """``/robots.txt``, ``/manifest.webmanifest`` and ``/favicon.ico`` (a redirect to the SVG icon that
    every page links), cacheable for a day."""
    robots = ROBOTS_TXT.encode()
    manifest = json.dumps(MANIFEST, indent=1).encode()
    cache = {"Cache-Control": ASSET_CACHE}

    def robots_txt(_: Request) -> Response:
        return Response(robots, media_type="text/plain; charset=utf-8", headers=cache)

    def web_manifest(_: Request) -> Response:
        return Response(manifest, media_type="application/manifest+json", headers=cache)

    def favicon(_: Request) -> Response:
        return RedirectResponse("/static/favicon.svg", status_code=301, headers=cache)

    return [
        Route("/robots.txt", robots_txt, methods=["GET"]),
        Route("/manifest.webmanifest", web_manifest, methods=["GET"]),
        Route("/favicon.ico", favicon, methods=["GET"]),
    ]


def web_routes(api) -> tuple[list, Web]:
    """The UI's routes (and the :class:`Web` handler object) for :func:`newsflow.serving.app.create_app`."""
    from newsflow.serving.accounts_web import account_routes  # it imports this module

    web = Web(api)
    routes = [
        Route("/", web.public_page(web._home_key, web.home), methods=["GET"]),
        Route("/stories/{story_id}", web.public_page(web._story_key, web.story), methods=["GET"]),
        Route("/topics", web.public_page(lambda _: "topics", web.topics), methods=["GET"]),
        Route("/topics/{topic}", web.public_page(web._topic_key, web.topic), methods=["GET"]),
        Route("/trending", web.public_page(lambda _: "trending", web.trending), methods=["GET"]),
        Route("/sources/{outlet}", web.source, methods=["GET"]),
        Route("/entities/{name}", web.entity, methods=["GET"]),
        Route("/for-you", web.for_you, methods=["GET"]),
        Route("/saved", web.saved, methods=["GET"]),
        Route("/saved", web.save_form, methods=["POST"]),
        Route("/settings", web.settings, methods=["GET"]),
        Route("/prefs", web.prefs, methods=["POST"]),
        *account_routes(web),
        *site_files(),
        Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
    ]
    return routes, web
