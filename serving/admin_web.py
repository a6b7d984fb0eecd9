"""The editors' admin pages: sources and readers, in the site's house style (signed-in editors only).

==============================  ======  ===========================================================
route                           method  does
==============================  ======  ===========================================================
``/admin``                      GET     sources (search ``q``, ``status``, ``offset``; each feed's
                                        schedule, last fetch, errors, backoff, authority), add by home
                                        page, import, export, the latest audit records
``/admin/sources``              POST    pause, resume or remove a feed
``/admin/sources/add``          POST    add a publisher by home page (feed discovery)
``/admin/sources/import``       POST    import an OPML or CSV file (multipart ``file``)
``/admin/sources/export``       GET     ``format=opml|csv`` download
``/admin/readers``              GET     account count, search by name prefix ``q``
``/admin/readers``              POST    disable or enable an account
==============================  ======  ===========================================================

A signed-out ``GET`` is sent to sign in, a signed-out ``POST`` is a 401 page, a reader gets a 403 page. Every
action runs :class:`newsflow.serving.admin.AdminActions` (the admin API's, so it is audited the same way, with
the editor's name); forms carry the session's CSRF token (:mod:`newsflow.serving.web`).
"""

from __future__ import annotations

from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from newsflow.serving.accounts_web import _unavailable
from newsflow.serving.admin import MAX_IMPORT_BYTES, MAX_OFFSET, AdminError, export_response
from newsflow.serving.http_body import BodyTooLarge, read_capped
from newsflow.serving.resilience import REDIS_ERRORS
from newsflow.serving.web import PageError
from newsflow.serving.web_view import safe_next

ADMIN_ACTIONS = ("pause", "resume", "remove")
ADMIN_STATUSES = ("active", "paused", "removed")
ADMIN_PAGE_FEEDS = 50
ADMIN_PAGE_READERS = 50
ADMIN_AUDIT_SHOWN = 20


class AdminPages:
    """Handlers of the routes in the module docstring over a :class:`newsflow.serving.web.Web`."""

    def __init__(self, web):
        self.web = web
        self.api = web.api

    def _editor(self, request: Request) -> tuple[str, str] | Response:
        """The editor's session, a redirect to sign in, or a 403 for a reader (blocking)."""
        sess = self.web.session(request)
        if sess is None:
            return RedirectResponse(f"/signin?next={safe_next(request.url.path)}", status_code=303)
        try:
            self.api._guard()
            role = self.api.accounts.role(sess[0])
        except REDIS_ERRORS:
            self.api._mark_down()
            raise _unavailable() from None
        if role != "editor":
            raise PageError(403, "Editors only", "This page is for editors; your account is a reader's.")
        return sess

    async def _editor_form(self, request: Request, form: dict | None = None) -> tuple[dict, tuple[str, str]]:
        """The form (read here unless given) and the editor's session after the CSRF check; a signed-out
        request is a 401 page, a reader's a 403."""
        form = form if form is not None else await self.web._form(request)
        sess = await run_in_threadpool(self._editor, request)
        if isinstance(sess, Response):
            raise PageError(401, "Signed out", "Your session ended; sign in again.")
        self.web._check_csrf(form, sess)
        return form, sess

    async def _admin(self, fn, *args):
        """``fn(*args)`` of :class:`~newsflow.serving.admin.AdminActions` in the thread pool: its 4xx/5xx
        answers become error pages, Redis down a 503 page."""
        try:
            self.api._guard()
            return await run_in_threadpool(fn, *args)
        except REDIS_ERRORS:
            self.api._mark_down()
            raise _unavailable() from None
        except AdminError as e:
            raise PageError(e.status, "Could not do that", e.message) from None

    def admin_page(self, request: Request, report=None, report_title: str = "", status: int = 200) -> Response:
        """GET /admin: sources (search, status filter, paging, schedule and errors), add, import, export,
        and the latest audit records."""
        sess = self._editor(request)
        if isinstance(sess, Response):
            return sess
        q = request.query_params
        shown = q.get("status", "listed")
        statuses = {"listed": ["active", "paused"], "all": list(ADMIN_STATUSES)}.get(shown, [shown])
        if not set(statuses) <= set(ADMIN_STATUSES):
            raise PageError(400, "Unknown status", f"status must be listed, all or one of {', '.join(ADMIN_STATUSES)}")
        search = q.get("q", "").strip()[:100]
        try:
            offset = max(0, min(int(q.get("offset", "0")), MAX_OFFSET))
        except ValueError:
            offset = 0
        admin = self.api.admin
        try:
            self.api._guard()
            page = admin.sources_page(statuses, offset, ADMIN_PAGE_FEEDS, search)
            audit = admin.audit.recent(0, ADMIN_AUDIT_SHOWN)
        except REDIS_ERRORS:
            self.api._mark_down()
            raise _unavailable() from None

        def link(off: int) -> str:
            return "/admin?" + urlencode({k: v for k, v in (("q", search), ("status", shown), ("offset", off)) if v})

        ctx = self.web._context(request, sess, None)
        ctx.update(
            title="Sources",
            page=page,
            search=search,
            shown=shown,
            statuses=("listed", "all", *ADMIN_STATUSES),
            prev_link=link(max(0, offset - ADMIN_PAGE_FEEDS)) if offset else "",
            next_link=link(offset + ADMIN_PAGE_FEEDS) if page["more"] else "",
            back=link(offset),
            audit=audit,
            report=report,
            report_title=report_title,
            can_discover=admin.discover is not None,
        )
        return self.web.render(request, "admin.html", ctx, personal=True, status=status)

    async def _report_page(self, request: Request, report, title: str) -> Response:
        status = 400 if report.errors and len(report.errors) == len(report.outcomes) else 200
        return await run_in_threadpool(self.admin_page, request, report, title, status)

    async def admin_action(self, request: Request) -> Response:
        """POST /admin/sources: pause, resume or remove a feed, back to the page it was pressed on."""
        form, (editor, _) = await self._editor_form(request)
        action, ref = form.get("action", ""), form.get("ref", "")
        if action not in ADMIN_ACTIONS:
            raise PageError(400, "Unknown action", f"action must be one of {', '.join(ADMIN_ACTIONS)}")
        await self._admin(self.api.admin.set_status, editor, ref, action)
        back = safe_next(form.get("next"))
        return RedirectResponse(back if back.startswith("/admin") else "/admin", status_code=303)

    async def admin_add(self, request: Request) -> Response:
        """POST /admin/sources/add: add a publisher by home page (or feed URL)."""
        form, (editor, _) = await self._editor_form(request)
        url, paused = form.get("url", "").strip(), form.get("paused") == "on"
        _, report = await self._admin(self.api.admin.add_home_page, editor, url, paused, form.get("all") == "on")
        return await self._report_page(request, report, f"Adding {url}")

    async def admin_import(self, request: Request) -> Response:
        """POST /admin/sources/import: an OPML or CSV file (``multipart/form-data``, field ``file``)."""
        ctype = request.headers.get("content-type", "")
        if not ctype.startswith("multipart/form-data"):
            raise PageError(415, "Unsupported form", "Send the file as multipart/form-data.")
        try:
            body = await read_capped(request, MAX_IMPORT_BYTES + 64 * 1024)
        except BodyTooLarge:
            raise PageError(413, "File too large", f"Files are limited to {MAX_IMPORT_BYTES} bytes.") from None

        async def stream():
            yield body

        try:
            parsed = await MultiPartParser(request.headers, stream(), max_files=1, max_fields=5).parse()
        except MultiPartException as e:
            raise PageError(400, "Bad upload", str(e)) from None
        upload = parsed.get("file")
        if not isinstance(upload, UploadFile):
            raise PageError(400, "No file", "Choose an OPML or CSV file to import.")
        data = await upload.read()
        fields = {k: v for k, v in parsed.items() if isinstance(v, str)}
        _, (editor, _) = await self._editor_form(request, fields)
        name = (upload.filename or "upload").rsplit("/", 1)[-1][:100]
        fmt = "csv" if name.lower().endswith(".csv") else "opml" if name.lower().endswith((".opml", ".xml")) else ""
        report = await self._admin(self.api.admin.import_file, editor, data, fmt, name)
        return await self._report_page(request, report, f"Importing {name}")

    async def admin_export(self, request: Request) -> Response:
        """GET /admin/sources/export?format=opml|csv: the download."""
        sess = await run_in_threadpool(self._editor, request)
        if isinstance(sess, Response):
            return sess
        return await self._admin(export_response, self.api.admin.registry, request.query_params.get("format", "opml"))

    def readers_page(self, request: Request) -> Response:
        """GET /admin/readers: account count, search by name prefix, disable and enable."""
        sess = self._editor(request)
        if isinstance(sess, Response):
            return sess
        search = request.query_params.get("q", "").strip()[:64]
        try:
            offset = max(0, min(int(request.query_params.get("offset", "0")), MAX_OFFSET))
        except ValueError:
            offset = 0
        try:
            self.api._guard()
            found = self.api.admin.readers(search, offset, ADMIN_PAGE_READERS + 1)
        except REDIS_ERRORS:
            self.api._mark_down()
            raise _unavailable() from None
        rows = found["readers"]

        def link(off: int) -> str:
            return "/admin/readers?" + urlencode({k: v for k, v in (("q", search), ("offset", off)) if v})

        ctx = self.web._context(request, sess, None)
        ctx.update(
            title="Readers",
            count=found["count"],
            readers=rows[:ADMIN_PAGE_READERS],
            search=search,
            prev_link=link(max(0, offset - ADMIN_PAGE_READERS)) if offset else "",
            next_link=link(offset + ADMIN_PAGE_READERS) if len(rows) > ADMIN_PAGE_READERS else "",
            back=link(offset),
        )
        return self.web.render(request, "admin_readers.html", ctx, personal=True)

    async def reader_action(self, request: Request) -> Response:
        """POST /admin/readers: disable or enable an account."""
        form, (editor, _) = await self._editor_form(request)
        action = form.get("action", "")
        if action not in ("disable", "enable"):
            raise PageError(400, "Unknown action", "action must be disable or enable")
        await self._admin(self.api.admin.set_disabled, editor, form.get("name", ""), action == "disable")
        back = safe_next(form.get("next"))
        return RedirectResponse(back if back.startswith("/admin/readers") else "/admin/readers", status_code=303)


def admin_routes(web) -> list[Route]:
    """The routes of the module docstring (:func:`newsflow.serving.accounts_web.account_routes` adds them)."""
    pages = AdminPages(web)
    return [
        Route("/admin", pages.admin_page, methods=["GET"]),
        Route("/admin/sources", pages.admin_action, methods=["POST"]),
        Route("/admin/sources/add", pages.admin_add, methods=["POST"]),
        Route("/admin/sources/import", pages.admin_import, methods=["POST"]),
        Route("/admin/sources/export", pages.admin_export, methods=["GET"]),
        Route("/admin/readers", pages.readers_page, methods=["GET"]),
        Route("/admin/readers", pages.reader_action, methods=["POST"]),
    ]
