"""Admin API: the sources registry, readers' accounts and the audit log, ``/v1/admin/...``, mounted on the serving
app; the editors' pages (:mod:`newsflow.serving.accounts_web`) run the same :class:`AdminActions`.

Authentication: every request carries ``Authorization: Bearer <token>``, where the token is an editor's
personal API token (an account with the editor role, ``newsflow accounts add --editor NAME``; the token is
created on its account page) or, optionally, the shared ``NEWSFLOW_ADMIN_TOKEN`` setting
(:attr:`~newsflow.runtime.settings.Settings.admin_token`, at least 16 characters; shorter is ignored).
Readers' tokens, operator tokens (``newsflow serve --mint-token``), a disabled editor's tokens and web
session cookies are never accepted; a missing or wrong token gets 401 ``unauthorized``.
Every change is written to the audit log with the editor's name (``admin-token`` for the shared token) and
the time. Responses are ``Cache-Control: no-store``.

=======================================  ======  ==========================================================
route                                    method  does
=======================================  ======  ==========================================================
``/v1/admin/sources``                    GET     a page of feeds with each one's crawl schedule, last fetch,
                                                 errors and backoff and its outlet's authority (``status``
                                                 repeatable, ``search`` (outlet contains), ``outlet``,
                                                 ``offset``, ``limit``; ``more`` says a next page exists)
``/v1/admin/sources``                    POST    register JSON ``{"url", "kind", "title", "categories",
                                                 "name", "tier", "authority", "language"}`` or
                                                 ``{"feeds": [...]}`` as given; 201 when something was
                                                 added, 200 when all were already registered, 422 when
                                                 every entry failed
``/v1/admin/sources/discover``           POST    add by home page ``{"url", "paused", "all"}``: the crawl
                                                 tier's polite discovery finds the feeds (503
                                                 ``not_configured`` when the app was built without one)
``/v1/admin/sources/import``             POST    an OPML or CSV body (at most 32 MiB), same report as
                                                 ``newsflow sources import``
``/v1/admin/sources/export``             GET     ``format=opml|csv``
``/v1/admin/sources/{ref}``              GET     the feeds ``ref`` names (feed id or outlet)
``/v1/admin/sources/{ref}``              DELETE  remove (record and crawl history kept)
``/v1/admin/sources/{ref}/{action}``     POST    ``pause``, ``resume`` or ``remove``
``/v1/admin/readers``                    GET     account count and accounts by name prefix ``q``
``/v1/admin/readers/{name}/{action}``    POST    ``disable`` (no sign-in, sessions end, tokens refused) or
                                                 ``enable``
``/v1/admin/audit``                      GET     the audit log, newest first
=======================================  ======  ==========================================================

Endpoints authenticate and read the body on the event loop, then run the blocking Redis calls in
Starlette's thread pool, on the serving app's Redis client; a Redis error is a 503 ``unavailable``. The
OpenAPI description of these routes is :mod:`newsflow.serving.admin_openapi`.
"""

from __future__ import annotations

import hmac
import io
import itertools
import json
import time

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
    Outcome,
    Report,
    SourceRegistry,
    check_feed_url,
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


class AdminError(Exception):
    """An admin answer other than success: ``status``, machine ``code``, ``message``, extra ``headers``."""

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


EDITOR_OF_SHARED_TOKEN = "admin-token"  # the audit log's editor name for the shared NEWSFLOW_ADMIN_TOKEN


def parse_paging(q, default_limit: int = 100) -> tuple[int, int]:
    """``(offset, limit)`` of query parameters ``offset`` and ``limit``.

    Raises:
      AdminError: 400 when they are not integers in ``0..MAX_OFFSET`` and ``1..MAX_LIMIT``.
    """
    try:
        offset = int(q.get("offset", "0"))
        limit = int(q.get("limit", str(default_limit)))
    except ValueError:
        raise AdminError(400, "invalid_parameter", "offset and limit must be integers") from None
    if not 0 <= offset <= MAX_OFFSET or not 1 <= limit <= MAX_LIMIT:
        raise AdminError(400, "invalid_parameter", f"need 0 <= offset <= {MAX_OFFSET} and 1 <= limit <= {MAX_LIMIT}")
    return offset, limit


class AdminActions:
    """Every admin action, shared by the JSON API (:class:`AdminApi`) and the editors' pages
    (:mod:`newsflow.serving.accounts_web`); each change is recorded in the audit log
    (:class:`newsflow.storage.audit.AuditLog`) with the editor's name and the time. Blocking Redis calls.

    Args:
      client: redis-py client (the serving app's).
      keys: the key layout.
      clock: UTC epoch seconds.
      discover: ``home page URL -> {"found": [{"url", "kind", "title", "how", "items"}], "tried": [[url,
        outcome]], "blocked": {origin: reason}}``, the crawl tier's polite feed discovery (injected by
        ``newsflow serve``: serving does not import the crawler); ``None``: adding by home page answers
        503 ``not_configured``.
      host_check: ``url -> (problem, warning)`` run on every URL registered
        (:meth:`newsflow.storage.source_registry.SourceRegistry.register`); ``None`` resolves nothing.
    """

    def __init__(self, client, keys: Keys, clock=time.time, discover=None, host_check=None):
        from newsflow.storage.accounts import AccountStore
        from newsflow.storage.audit import AuditLog

        self.registry = SourceRegistry(client, keys, seed=SourceTable.load(), clock=clock)
        self.accounts = AccountStore(client, keys)
        self.audit = AuditLog(client, keys)
        self.clock = clock
        self.discover = discover
        self.host_check = host_check

    def _log(self, editor: str, action: str, target: str, report: Report | None = None, detail: str = "") -> None:
        if report is not None:
            detail = ", ".join(f"{n} {k}" for k, n in sorted(report.counts().items())) or "nothing"
        self.audit.record(editor, action, target, detail, self.clock())

    def register(self, editor: str, entries: list, origin: str, target: str) -> Report:
        """Registers ``(ref, FeedEntry | FeedError)`` entries with the host check; audited as ``sources.add``."""
        report = self.registry.register(entries, origin=origin, host_check=self.host_check)
        self._log(editor, "sources.add", target, report)
        return report

    def import_file(self, editor: str, body: bytes, fmt: str, name: str = "") -> Report:
        """Imports an OPML or CSV file (``fmt``); audited as ``sources.import``.

        Raises:
          AdminError: 415 for a binary body, 400 for an unknown format.
        """
        binary = _binary_kind(body)
        if binary:
            raise AdminError(415, "unsupported_media_type", f"the body is {binary}, not an OPML or CSV text file")
        if not fmt:
            fmt = "opml" if body.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"<") else "csv"
        if fmt not in ("opml", "csv"):
            raise AdminError(400, "invalid_parameter", f"format must be opml or csv, got {fmt!r}")
        reader = read_opml if fmt == "opml" else read_csv
        origin = f"api:import:{name}" if name else "api:import"
        report = self.registry.register(reader(io.BytesIO(body)), origin=origin[:200], host_check=self.host_check)
        self._log(editor, "sources.import", name or f"{fmt} upload", report)
        return report

    def add_home_page(self, editor: str, url: str, paused: bool = False, every: bool = False) -> tuple[dict, Report]:
        """Discovers the feeds of a home page (or takes a feed URL) and registers the first one (``every``:
        all of them), paused when ``paused``; returns the discovery and the report. Audited as ``sources.add``.

        Raises:
          AdminError: 503 ``not_configured`` without a discovery, 400 for a URL that is not http(s).
        """
        if self.discover is None:
            raise AdminError(503, "not_configured", "adding by home page needs `newsflow serve` (feed discovery)")
        try:
            check_feed_url(url)
        except FeedError as e:
            raise AdminError(400, "invalid_url", f"cannot add {url[:200]!r}: {e}") from None
        found = self.discover(url)
        picked = found["found"] if every else found["found"][:1]
        status = "paused" if paused else "active"
        entries = [
            (
                f"found {i + 1}",
                FeedEntry(f["url"], f["kind"], f.get("title", ""), (), "" if f.get("how") == "given" else url, status),
            )
            for i, f in enumerate(picked)
        ]
        report = self.registry.register(entries, origin="admin:add", host_check=self.host_check)
        if not entries:
            why = "; ".join(f"{o}: {b}" for o, b in sorted(found.get("blocked", {}).items()))
            detail = "no feed or news sitemap found" + (f" ({why})" if why else "")
            report.outcomes.append(Outcome(url, url, "", "error", detail))
        self._log(editor, "sources.add", url, report)
        return found, report

    def set_status(self, editor: str, ref: str, action: str) -> Report:
        """Pauses, resumes or removes the feeds ``ref`` names (history kept); audited as ``sources.<action>``.

        Raises:
          AdminError: 404 for an unknown action or when nothing matches.
        """
        if action not in ("pause", "resume", "remove"):
            raise AdminError(404, "not_found", f"unknown action {action!r} (pause, resume, remove)")
        report = self.registry.set_status(ref, action)
        if report.errors:
            raise AdminError(404, "not_found", f"no registered feed matches {ref!r}")
        self._log(editor, f"sources.{action}", ref, report)
        return report

    def sources_page(self, statuses: list[str], offset: int, limit: int, search: str = "") -> dict:
        """``{"feeds": rows with "crawl" (the frontier's schedule, or None), "offset", "limit", "more",
        "registered" (every feed), "counts" ({status: feeds})}``."""
        rows, more = self.registry.page(statuses, offset, limit, search)
        state = self.registry.crawl_state([r["id"] for r in rows])
        for r in rows:
            r["crawl"] = state.get(r["id"])
        counts = self.registry.status_counts()
        return {
            "feeds": rows,
            "offset": offset,
            "limit": limit,
            "more": more,
            "registered": sum(counts.values()),
            "counts": counts,
        }

    def readers(self, prefix: str, offset: int, limit: int) -> dict:
        """``{"count" (every account), "readers": [{"name", "role", "created", "disabled"}], "offset", "limit"}``:
        the accounts whose name starts with ``prefix``."""
        rows = self.accounts.search(prefix, offset, limit)
        return {"count": self.accounts.count(), "readers": rows, "offset": offset, "limit": limit}

    def set_disabled(self, editor: str, name: str, disabled: bool) -> bool:
        """Disables or enables an account (not the editor's own); audited as ``readers.disable|enable``.

        Raises:
          AdminError: 404 no such account, 409 an editor disabling their own account.
        """
        from newsflow.storage.accounts import AccountError

        if disabled and name == editor:
            raise AdminError(409, "conflict", "an editor cannot disable their own account")
        try:
            changed = self.accounts.set_disabled(name, disabled, self.clock())
        except AccountError:
            raise AdminError(404, "not_found", f"there is no account {name!r}") from None
        action = "disable" if disabled else "enable"
        self._log(editor, f"readers.{action}", name, detail=f"{action}d" if changed else f"already {action}d")
        return changed


class AdminApi:
    """Handlers of the admin routes.

    Args:
      actions: the :class:`AdminActions` (registry, accounts, audit log).
      admin_token: the shared bearer token (``None`` or shorter than :data:`MIN_ADMIN_TOKEN`: none).
      editor_of: ``request -> editor name or None``, the editor whose personal token the request carries
        (blocking Redis calls; run in the thread pool); ``None`` accepts no editor token.
    """

    def __init__(self, actions: AdminActions, admin_token: str | None, editor_of=None):
        self.actions = actions
        self.registry = actions.registry
        token = (admin_token or "").encode("utf-8")
        self._token = token if len(token) >= MIN_ADMIN_TOKEN else b""
        self._editor_of = editor_of

    def _auth(self, request: Request) -> str:
        """The editor's name (:data:`EDITOR_OF_SHARED_TOKEN` for the shared token); 401 otherwise."""
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        bearer = scheme.lower() == "bearer"
        if bearer and self._token and hmac.compare_digest(given.strip().encode("utf-8"), self._token):
            return EDITOR_OF_SHARED_TOKEN
        editor = self._editor_of(request) if bearer and self._editor_of is not None else None
        if editor:
            return editor
        raise AdminError(
            401,
            "unauthorized",
            "an editor's API token is required (Authorization: Bearer <token>)",
            {"WWW-Authenticate": 'Bearer realm="newsflow-admin"'},
        )

    def _wrap(self, handler, body_cap: int = 0):
        """An async endpoint: authenticate, read at most ``body_cap`` body bytes, run ``handler(request,
        body)`` in the thread pool (blocking Redis calls); the editor's name is ``request.state.editor``."""

        async def endpoint(request: Request) -> Response:
            import redis

            try:
                request.state.editor = await run_in_threadpool(self._auth, request)
                body = await _read(request, body_cap) if body_cap else b""
                return await run_in_threadpool(handler, request, body)
            except AdminError as e:
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
            raise AdminError(400, "invalid_parameter", f"status must be one of {', '.join(STATUSES)}, got {bad[0]!r}")
        offset, limit = parse_paging(q)
        outlet = q.get("outlet")
        if outlet:
            page = list(itertools.islice(self.registry.feeds(statuses, outlet=outlet), offset, offset + limit + 1))
            more, page = len(page) > limit, page[:limit]
            return _json(
                {"feeds": page, "offset": offset, "limit": limit, "more": more, "registered": self.registry.count()}
            )
        return _json(self.actions.sources_page(statuses, offset, limit, q.get("search", "")))

    def get_feed(self, request: Request, body: bytes) -> Response:
        """GET /v1/admin/sources/{ref}."""
        ref = request.path_params["ref"]
        ids = self.registry.resolve(ref)
        if not ids:
            raise AdminError(404, "not_found", f"no registered feed matches {ref!r}")
        state = self.registry.crawl_state(ids)
        return _json({"feeds": [dict(self.registry.get(i), crawl=state.get(i)) for i in ids]})

    def register(self, request: Request, body: bytes) -> Response:
        """POST /v1/admin/sources."""
        try:
            doc = json.loads(body)
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            raise AdminError(400, "invalid_json", f"body is not JSON: {e}") from None
        items = doc.get("feeds") if isinstance(doc, dict) and "feeds" in doc else [doc]
        if not isinstance(items, list) or not items:
            raise AdminError(400, "invalid_request", 'send {"url": ...} or {"feeds": [{"url": ...}, ...]}')
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
        report = self.actions.register(request.state.editor, entries, "api", f"{len(items)} feeds (API)")
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
        ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
        fmt = request.query_params.get("format") or ""
        if not fmt and ("xml" in ctype or "opml" in ctype):
            fmt = "opml"
        elif not fmt and "csv" in ctype:
            fmt = "csv"
        report = self.actions.import_file(request.state.editor, body, fmt, request.query_params.get("name", ""))
        all_failed = bool(report.errors) and len(report.errors) == len(report.outcomes)
        return _json(_report_body(report), 422 if all_failed else 200)

    def discover(self, request: Request, body: bytes) -> Response:
        """POST /v1/admin/sources/discover: add by home page."""
        doc = _json_object(body)
        url, paused, every = doc.get("url"), doc.get("paused", False), doc.get("all", False)
        if not isinstance(url, str) or not isinstance(paused, bool) or not isinstance(every, bool):
            raise AdminError(400, "invalid_request", 'send {"url": "<home page>", "paused": bool, "all": bool}')
        found, report = self.actions.add_home_page(request.state.editor, url, paused, every)
        counts = report.counts()
        status = 201 if counts.get("added") or counts.get("restored") else 200 if counts.get("unchanged") else 422
        return _json(dict(_report_body(report), discovery=found), status)

    def export(self, request: Request, body: bytes) -> Response:
        """GET /v1/admin/sources/export?format=opml|csv."""
        return export_response(self.registry, request.query_params.get("format", "opml"))

    def action(self, request: Request, body: bytes) -> Response:
        """POST /v1/admin/sources/{ref}/{action} and DELETE /v1/admin/sources/{ref}."""
        ref = request.path_params["ref"]
        action = request.path_params.get("action", "remove")
        return _json(_report_body(self.actions.set_status(request.state.editor, ref, action)))

    def readers(self, request: Request, body: bytes) -> Response:
        """GET /v1/admin/readers?q=<name prefix>."""
        offset, limit = parse_paging(request.query_params)
        return _json(self.actions.readers(request.query_params.get("q", ""), offset, limit))

    def reader_action(self, request: Request, body: bytes) -> Response:
        """POST /v1/admin/readers/{name}/disable|enable."""
        name, action = request.path_params["name"], request.path_params["action"]
        if action not in ("disable", "enable"):
            raise AdminError(404, "not_found", f"unknown action {action!r} (disable, enable)")
        changed = self.actions.set_disabled(request.state.editor, name, action == "disable")
        return _json({"name": name, "disabled": action == "disable", "changed": changed})

    def audit(self, request: Request, body: bytes) -> Response:
        """GET /v1/admin/audit: the audit log, newest first."""
        offset, limit = parse_paging(request.query_params)
        log = self.actions.audit
        return _json({"records": log.recent(offset, limit), "count": log.count(), "offset": offset, "limit": limit})


def _json_object(body: bytes) -> dict:
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise AdminError(400, "invalid_json", f"body is not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise AdminError(400, "invalid_request", "the body is a JSON object")
    return doc


def export_response(registry: SourceRegistry, fmt: str) -> Response:
    """The registry's active and paused feeds as an OPML or CSV download.

    Raises:
      AdminError: 400 for another format.
    """
    if fmt not in ("opml", "csv"):
        raise AdminError(400, "invalid_parameter", f"format must be opml or csv, got {fmt!r}")
    out = io.StringIO()
    feeds = registry.iter_feeds()
    if fmt == "csv":
        write_csv(feeds, out)
    else:
        write_opml(feeds, out)
    media = "text/csv" if fmt == "csv" else "text/x-opml"
    disposition = f'attachment; filename="newsflow-sources.{fmt}"'
    return Response(
        out.getvalue().encode("utf-8"),
        media_type=media,
        headers={"Cache-Control": "no-store", "Content-Disposition": disposition},
    )


async def _read(request: Request, cap: int) -> bytes:
    try:
        return await read_capped(request, cap)
    except BodyTooLarge as e:
        raise AdminError(413, "too_large", f"body of {e.size} bytes exceeds {cap}") from None


def admin_app(actions: AdminActions, admin_token: str | None = None, editor_of=None) -> Starlette:
    """The admin sub-application (routes in the module docstring), to mount at ``/v1/admin``.

    Args:
      actions: the :class:`AdminActions` the pages share.
      admin_token: the shared admin bearer token; ``None`` reads ``NEWSFLOW_ADMIN_TOKEN`` through
        :meth:`newsflow.runtime.settings.Settings.resolve` (now, not at import).
      editor_of: see :class:`AdminApi`.
    """
    if admin_token is None:
        from newsflow.runtime.settings import Settings

        admin_token = Settings.resolve().admin_token
    api = AdminApi(actions, admin_token, editor_of)
    w = api._wrap
    routes = [
        Route("/sources", w(api.list_feeds), methods=["GET"]),
        Route("/sources", w(api.register, MAX_JSON_BYTES), methods=["POST"]),
        Route("/sources/import", w(api.import_file, MAX_IMPORT_BYTES), methods=["POST"]),
        Route("/sources/export", w(api.export), methods=["GET"]),
        Route("/sources/discover", w(api.discover, MAX_JSON_BYTES), methods=["POST"]),
        Route("/sources/{ref}", w(api.get_feed), methods=["GET"]),
        Route("/sources/{ref}", w(api.action), methods=["DELETE"]),
        Route("/sources/{ref}/{action}", w(api.action), methods=["POST"]),
        Route("/readers", w(api.readers), methods=["GET"]),
        Route("/readers/{name}/{action}", w(api.reader_action), methods=["POST"]),
        Route("/audit", w(api.audit), methods=["GET"]),
    ]
    return Starlette(routes=routes)


def admin_mount(actions: AdminActions, admin_token: str | None = None, editor_of=None) -> Mount:
    """``Mount("/v1/admin", admin_app(...))`` for the serving app's route list."""
    return Mount("/v1/admin", app=admin_app(actions, admin_token, editor_of))
