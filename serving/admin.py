"""Admin API of the sources registry: ``/v1/admin/sources`` (list, register, import, export, pause,
resume, remove), mounted on the serving app.

Authentication: every request carries ``Authorization: Bearer <token>``, where the token is an editor's
personal API token (an account with the editor role, ``newsflow accounts add --editor NAME``; the token is
created on its account page) or, optionally, the shared ``NEWSFLOW_ADMIN_TOKEN`` setting
(:attr:`~newsflow.runtime.settings.Settings.admin_token`, at least 16 characters; shorter is ignored).
Readers' tokens, operator tokens (``newsflow serve --mint-token``) and web session cookies are never
accepted; a missing or wrong token gets 401 ``unauthorized``. Editors manage sources in the browser on
the ``/admin`` page (:mod:`newsflow.serving.web`).
Responses are ``Cache-Control: no-store``.

=======================================  ======  ==========================================================
route                                    method  does
=======================================  ======  ==========================================================
``/v1/admin/sources``                    GET     feeds (``status`` repeatable, ``outlet``, ``offset``, ``limit``)
``/v1/admin/sources``                    POST    register JSON ``{"url", "kind", "title", "categories",
                                                 "name", "tier", "authority", "language"}`` or
                                                 ``{"feeds": [...]}`` (no discovery: that is the crawl
                                                 tier's ``newsflow sources add``); 201 when something was
                                                 added, 200 when all were already registered, 422 when
                                                 every entry failed
``/v1/admin/sources/import``             POST    an OPML or CSV body (at most 32 MiB), same report as
                                                 ``newsflow sources import``
``/v1/admin/sources/export``             GET     ``format=opml|csv``
``/v1/admin/sources/{ref}``              GET     the feeds ``ref`` names (feed id or outlet)
``/v1/admin/sources/{ref}``              DELETE  remove (record and crawl history kept)
``/v1/admin/sources/{ref}/{action}``     POST    ``pause``, ``resume`` or ``remove``
=======================================  ======  ==========================================================

Endpoints authenticate and read the body on the event loop, then run the registry's blocking Redis
calls in Starlette's thread pool, on the serving app's Redis client; a Redis error is a 503
``unavailable``. The OpenAPI description of these routes is :mod:`newsflow.serving.admin_openapi`.
"""

from __future__ import annotations

import hmac
import io
import itertools
import json

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route

from newsflow.core.source_files import read_csv, read_opml, write_csv, write_opml
from newsflow.core.sources import SourceTable
from newsflow.serving.http_body import BodyTooLarge, read_capped
from newsflow.storage.keys import Keys
from newsflow.storage.source_registry import (
    STATUSES,
    FeedEntry,
    FeedError,
    Report,
    SourceRegistry,
    validate_outlet_fields,
)

MIN_ADMIN_TOKEN = 16
MAX_IMPORT_BYTES = 32 * 1024 * 1024
MAX_JSON_BYTES = 4 * 1024 * 1024
MAX_OFFSET = 10_000_000  # islice takes at most sys.maxsize; no registry is near this
MAX_LIMIT = 1000


_MAGIC = (
    (b"\x1f\x8b", "gzip data"),
    (b"PK\x03\x04", "a zip archive (e.g. xlsx)"),
    (b"%PDF", "a PDF document"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
)


def _binary_kind(body: bytes) -> str:
    """What a binary upload is (``"gzip data"``, ...), or ``""`` for text; UTF-16/32 with a
    byte-order mark is binary here too (the importers read UTF-8)."""
    head = body[:4096]
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    if b"\x00" in head:
        return "binary data (NUL bytes; OPML and CSV must be UTF-8 text)"
    return ""


class _Error(Exception):
    def __init__(self, status: int, code: str, message: str, headers: dict | None = None):
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers or {}


def _json(body, status: int = 200, headers: dict | None = None) -> Response:
    return Response(
        json.dumps(body, ensure_ascii=False).encode("utf-8"),
        status_code=status,
        media_type="application/json",
        headers={"Cache-Control": "no-store", **(headers or {})},
    )


def _report_body(report: Report) -> dict:
    return {"outcomes": [o._asdict() for o in report.outcomes], "summary": report.counts()}


class AdminApi:
    """Handlers of the admin routes.

    Args:
      client: redis-py client (the serving app's).
      keys: the key layout.
      admin_token: the shared bearer token (``None`` or shorter than :data:`MIN_ADMIN_TOKEN`: none).
      editor_check: ``request -> bool``, whether the request carries an editor's personal token (blocking
        Redis calls; run in the thread pool); ``None`` accepts no editor token.
    """

    def __init__(self, client, keys: Keys, admin_token: str | None, editor_check=None):
        self.registry = SourceRegistry(client, keys, seed=SourceTable.load())
        token = (admin_token or "").encode("utf-8")
        self._token = token if len(token) >= MIN_ADMIN_TOKEN else b""
        self._editor_check = editor_check

    def _auth(self, request: Request) -> None:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        bearer = scheme.lower() == "bearer"
        if bearer and self._token and hmac.compare_digest(given.strip().encode("utf-8"), self._token):
            return
        if bearer and self._editor_check is not None and self._editor_check(request):
            return
        raise _Error(
            401,
            "unauthorized",
            "an editor's API token is required (Authorization: Bearer <token>)",
            {"WWW-Authenticate": 'Bearer realm="newsflow-admin"'},
        )

    def _wrap(self, handler, body_cap: int = 0):
        """An async endpoint: authenticate, read at most ``body_cap`` body bytes, run ``handler(request,
        body)`` in the thread pool (the registry makes blocking Redis calls)."""

        async def endpoint(request: Request) -> Response:
            import redis

            try:
                await run_in_threadpool(self._auth, request)
                body = await _read(request, body_cap) if body_cap else b""
                return await run_in_threadpool(handler, request, body)
            except _Error as e:
                return _json({"error": {"code": e.code, "message": e.message}}, e.status, e.headers)
            except redis.RedisError as e:
                return _json(
                    {"error": {"code": "unavailable", "message": f"registry unavailable: {type(e).__name__}"}},
                    503,
                    {"Retry-After": "5"},
                )

        return endpoint

    # -------------------------------------------------------------------------------- handlers
    def list_feeds(self, request: Request, body: bytes) -> Response:
        """GET /v1/admin/sources."""
        q = request.query_params
        statuses = q.getlist("status") or ["active", "paused"]
        bad = [s for s in statuses if s not in STATUSES]
        if bad:
            raise _Error(400, "invalid_parameter", f"status must be one of {', '.join(STATUSES)}, got {bad[0]!r}")
        try:
            offset = int(q.get("offset", "0"))
            limit = int(q.get("limit", "100"))
        except ValueError:
            raise _Error(400, "invalid_parameter", "offset and limit must be integers") from None
        if not 0 <= offset <= MAX_OFFSET or not 1 <= limit <= MAX_LIMIT:
            raise _Error(400, "invalid_parameter", f"need 0 <= offset <= {MAX_OFFSET} and 1 <= limit <= {MAX_LIMIT}")
        outlet = q.get("outlet")
        rows = self.registry.feeds(statuses, outlet=outlet) if outlet else self.registry.iter_feeds(statuses)
        page = list(itertools.islice(rows, offset, offset + limit))
        return _json({"feeds": page, "offset": offset, "limit": limit, "registered": self.registry.count()})

    def get_feed(self, request: Request, body: bytes) -> Response:
        """GET /v1/admin/sources/{ref}."""
        ref = request.path_params["ref"]
        ids = self.registry.resolve(ref)
        if not ids:
            raise _Error(404, "not_found", f"no registered feed matches {ref!r}")
        return _json({"feeds": [self.registry.get(i) for i in ids]})

    def register(self, request: Request, body: bytes) -> Response:
        """POST /v1/admin/sources."""
        try:
            doc = json.loads(body)
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            raise _Error(400, "invalid_json", f"body is not JSON: {e}") from None
        items = doc.get("feeds") if isinstance(doc, dict) and "feeds" in doc else [doc]
        if not isinstance(items, list) or not items:
            raise _Error(400, "invalid_request", 'send {"url": ...} or {"feeds": [{"url": ...}, ...]}')
        entries, outlet_edits = [], []
        for i, item in enumerate(items):
            ref = f"feeds[{i}]"
            if not isinstance(item, dict) or not isinstance(item.get("url"), str):
                entries.append((ref, FeedError("bad_entry", "each feed is an object with a string 'url'")))
                continue
            cats = item.get("categories") or []
            if not isinstance(cats, list) or not all(isinstance(c, str) for c in cats):
                entries.append((ref, FeedError("bad_entry", "categories must be a list of strings")))
                continue
            wrong = [k for k in ("kind", "title", "html_url", "status") if not isinstance(item.get(k, ""), str | None)]
            if wrong:
                entries.append((ref, FeedError("bad_entry", f"{', '.join(wrong)} must be strings")))
                continue
            entries.append(
                (
                    ref,
                    FeedEntry(
                        url=item["url"],
                        kind=str(item.get("kind") or "feed"),
                        title=str(item.get("title") or ""),
                        categories=tuple(cats),
                        html_url=str(item.get("html_url") or ""),
                        status=str(item.get("status") or "active"),
                    ),
                )
            )
            edit = {k: item[k] for k in ("name", "tier", "authority", "language") if item.get(k) is not None}
            try:
                validate_outlet_fields(edit.get("tier"), edit.get("authority"), edit.get("language"))
                if not isinstance(edit.get("name", ""), str):
                    raise ValueError("name must be a string")
            except ValueError as e:
                entries[-1] = (ref, FeedError("bad_entry", f"outlet fields: {e}"))
                continue
            if edit:
                outlet_edits.append((ref, item["url"], edit))
        report = self.registry.register(entries, origin="api")
        by_ref = {o.ref: o for o in report.outcomes}
        for ref, _url, edit in outlet_edits:
            o = by_ref.get(ref)
            if o is None or o.result == "error":
                continue
            row = self.registry.get(o.feed_id)
            self.registry.set_outlet(
                row["outlet"],
                display_name=edit.get("name"),
                tier=edit.get("tier"),
                authority=edit.get("authority"),
                language=edit.get("language"),
            )
        counts = report.counts()
        status = 201 if counts.get("added") or counts.get("restored") else 200 if counts.get("unchanged") else 422
        return _json(_report_body(report), status)

    def import_file(self, request: Request, body: bytes) -> Response:
        """POST /v1/admin/sources/import (OPML or CSV body); 415 for a binary body (NUL bytes or the
        magic number of gzip, zip, PDF or an image), which is neither."""
        binary = _binary_kind(body)
        if binary:
            raise _Error(415, "unsupported_media_type", f"the body is {binary}, not an OPML or CSV text file")
        ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
        fmt = request.query_params.get("format") or ""
        if not fmt and ("xml" in ctype or "opml" in ctype):
            fmt = "opml"
        elif not fmt and "csv" in ctype:
            fmt = "csv"
        elif not fmt:
            fmt = "opml" if body.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"<") else "csv"
        if fmt not in ("opml", "csv"):
            raise _Error(400, "invalid_parameter", f"format must be opml or csv, got {fmt!r}")
        reader = read_opml if fmt == "opml" else read_csv
        report = self.registry.register(reader(io.BytesIO(body)), origin="api:import")
        all_failed = bool(report.errors) and len(report.errors) == len(report.outcomes)
        return _json(_report_body(report), 422 if all_failed else 200)

    def export(self, request: Request, body: bytes) -> Response:
        """GET /v1/admin/sources/export?format=opml|csv."""
        fmt = request.query_params.get("format", "opml")
        if fmt not in ("opml", "csv"):
            raise _Error(400, "invalid_parameter", f"format must be opml or csv, got {fmt!r}")
        out = io.StringIO()
        feeds = self.registry.iter_feeds()
        if fmt == "csv":
            write_csv(feeds, out)
        else:
            write_opml(feeds, out)
        media = "text/csv" if fmt == "csv" else "text/x-opml"
        return Response(out.getvalue().encode("utf-8"), media_type=media, headers={"Cache-Control": "no-store"})

    def action(self, request: Request, body: bytes) -> Response:
        """POST /v1/admin/sources/{ref}/{action} and DELETE /v1/admin/sources/{ref}."""
        ref = request.path_params["ref"]
        action = request.path_params.get("action", "remove")
        if action not in ("pause", "resume", "remove"):
            raise _Error(404, "not_found", f"unknown action {action!r} (pause, resume, remove)")
        report = self.registry.set_status(ref, action)
        if report.errors:
            raise _Error(404, "not_found", f"no registered feed matches {ref!r}")
        return _json(_report_body(report))


async def _read(request: Request, cap: int) -> bytes:
    try:
        return await read_capped(request, cap)
    except BodyTooLarge as e:
        raise _Error(413, "too_large", f"body of {e.size} bytes exceeds {cap}") from None


def admin_app(client, keys: Keys, admin_token: str | None = None, editor_check=None) -> Starlette:
    """The admin sub-application (routes in the module docstring), to mount at ``/v1/admin``.

    Args:
      client: redis-py client.
      keys: the key layout.
      admin_token: the shared admin bearer token; ``None`` reads ``NEWSFLOW_ADMIN_TOKEN`` through
        :meth:`newsflow.runtime.settings.Settings.resolve` (now, not at import).
      editor_check: see :class:`AdminApi`.
    """
    if admin_token is None:
        from newsflow.runtime.settings import Settings

        admin_token = Settings.resolve().admin_token
    api = AdminApi(client, keys, admin_token, editor_check)
    w = api._wrap
    routes = [
        Route("/sources", w(api.list_feeds), methods=["GET"]),
        Route("/sources", w(api.register, MAX_JSON_BYTES), methods=["POST"]),
        Route("/sources/import", w(api.import_file, MAX_IMPORT_BYTES), methods=["POST"]),
        Route("/sources/export", w(api.export), methods=["GET"]),
        Route("/sources/{ref}", w(api.get_feed), methods=["GET"]),
        Route("/sources/{ref}", w(api.action), methods=["DELETE"]),
        Route("/sources/{ref}/{action}", w(api.action), methods=["POST"]),
    ]
    return Starlette(routes=routes)


def admin_mount(client, keys: Keys, admin_token: str | None = None, editor_check=None) -> Mount:
    """``Mount("/v1/admin", admin_app(...))`` for the serving app's route list."""
    return Mount("/v1/admin", app=admin_app(client, keys, admin_token, editor_check))
