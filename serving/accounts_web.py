"""Account pages of the reader web UI: register, sign in and out, the account page, the editors' admin page.

==============================  ======  ===========================================================
route                           method  does
==============================  ======  ===========================================================
``/register``                   GET     the registration form (name, password twice)
``/register``                   POST    creates a reader account and signs it in
``/signin``                     GET     the sign-in form (name, password)
``/signin``                     POST    signs in: a new session id on every sign-in (the browser's
                                        previous session ends); 429 with ``Retry-After`` after 5
                                        failures for the name or the address in 15 minutes
``/signout``                    POST    ends this session
``/account``                    GET     password change, personal API tokens, sign out everywhere,
                                        deletion
``/account/password``           POST    changes the password (current one needed); every session
                                        ends and this browser gets a new one
``/account/signout-everywhere`` POST    ends every session of the account
``/account/tokens``             POST    creates a personal API token, shown once on the page
``/account/tokens/revoke``      POST    revokes one of the account's (404 for any other id)
``/account/delete``             POST    deletes the account and its data (password needed)
``/admin``                      GET     editors: sources (search ``q``, ``status``, ``offset``; each feed's
                                        schedule, last fetch, errors, backoff, authority), add by home
                                        page, import, export, the latest audit records
``/admin/sources``              POST    editors: pause, resume or remove a feed
``/admin/sources/add``          POST    editors: add a publisher by home page (feed discovery)
``/admin/sources/import``       POST    editors: import an OPML or CSV file (multipart ``file``)
``/admin/sources/export``       GET     editors: ``format=opml|csv`` download
``/admin/readers``              GET     editors: account count, search by name prefix ``q``
``/admin/readers``              POST    editors: disable or enable an account
==============================  ======  ===========================================================

Storage and rules (hashing, limits, sessions, tokens, deletion) are :mod:`newsflow.storage.accounts`; the
session cookie and CSRF are :mod:`newsflow.serving.web`'s. Signed-in forms carry the session's CSRF token;
the register and sign-in forms the double-submit ``nf_csrf`` cookie. Redirects are local paths
(:func:`newsflow.serving.web_view.safe_next`), never built from the Host header.
"""

from __future__ import annotations

import hmac
import secrets
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from newsflow.serving.admin import MAX_IMPORT_BYTES, MAX_OFFSET, AdminError, export_response
from newsflow.serving.http_body import BodyTooLarge, read_capped
from newsflow.serving.resilience import REDIS_ERRORS
from newsflow.serving.tokens import sign_token
from newsflow.serving.web import CSRF_COOKIE, SESSION_COOKIE, PageError, https
from newsflow.serving.web_view import safe_next
from newsflow.storage.accounts import (
    MAX_FAILURES,
    SESSION_TTL_SECONDS,
    TOKEN_TTL_SECONDS,
    AccountError,
    TooManyAttempts,
)

DONE = {
    "password": "Your password is changed; every other session is signed out.",
    "revoked": "The token is revoked.",
}
ADMIN_ACTIONS = ("pause", "resume", "remove")
ADMIN_STATUSES = ("active", "paused", "removed")
ADMIN_PAGE_FEEDS = 50
ADMIN_PAGE_READERS = 50
ADMIN_AUDIT_SHOWN = 20


def _unavailable() -> PageError:
    return PageError(503, "Temporarily unavailable", "Accounts cannot be reached right now; try again.")


def _address(request: Request) -> str:
    """The client address the sign-in limit counts (behind a trusted proxy, the one it forwarded)."""
    return request.client.host if request.client else "unknown"


class AccountPages:
    """Handlers of the routes in the module docstring over a :class:`newsflow.serving.web.Web`."""

    def __init__(self, web):
        self.web = web
        self.api = web.api
        self.accounts = web.api.accounts

    def _now(self) -> float:
        return self.api.config.clock()

    def _session_cookie(self, request: Request, response: Response, cookie: str) -> Response:
        response.set_cookie(
            SESSION_COOKIE, cookie, max_age=SESSION_TTL_SECONDS, httponly=True, samesite="lax", secure=https(request)
        )
        return response

    @staticmethod
    def _end_cookie(request: Request, response: Response) -> Response:
        response.delete_cookie(SESSION_COOKIE, httponly=True, samesite="lax", secure=https(request))
        return response

    async def _call(self, fn, *args):
        """``fn(*args)`` in the thread pool behind the Redis breaker; Redis down is a 503 page."""
        try:
            self.api._guard()
            return await run_in_threadpool(fn, *args)
        except REDIS_ERRORS:
            self.api._mark_down()
            raise _unavailable() from None

    # -- signed-out forms -----------------------------------------------------------------------------
    def form_page(
        self,
        request: Request,
        template: str = "signin.html",
        error: str = "",
        status: int = 200,
        name: str = "",
        next_path: str | None = None,
        retry_after: int | None = None,
    ) -> Response:
        """The sign-in or registration form (``template``) with a fresh double-submit CSRF cookie."""
        sess = self.web.session(request)
        token = request.cookies.get(CSRF_COOKIE) or secrets.token_hex(16)
        ctx = self.web._context(request, sess, None)
        ctx.update(
            title="Create an account" if template == "register.html" else "Sign in",
            signin_csrf=token,
            next=safe_next(next_path if next_path is not None else request.query_params.get("next")),
            error=error,
            name=name[:64],
        )
        resp = self.web.render(request, template, ctx, personal=True, status=status)
        resp.set_cookie(CSRF_COOKIE, token, max_age=3600, httponly=True, samesite="lax", secure=https(request))
        if retry_after is not None:
            resp.headers["Retry-After"] = str(retry_after)
        return resp

    def signin_form(self, request: Request) -> Response:
        return self.form_page(request, "signin.html")

    def register_form(self, request: Request) -> Response:
        return self.form_page(request, "register.html")

    async def _anon_form(self, request: Request) -> dict[str, str]:
        form = await self.web._form(request)
        cookie = request.cookies.get(CSRF_COOKIE, "")
        if not cookie or not hmac.compare_digest(cookie.encode(), form.get("csrf", "").encode()):
            raise PageError(403, "Form expired", "The form expired; open it again and resubmit.")
        return form

    def _signed_in(self, request: Request, cookie: str, next_path: str) -> Response:
        resp = RedirectResponse(next_path, status_code=303)
        resp.delete_cookie(CSRF_COOKIE, httponly=True, samesite="lax", secure=https(request))
        return self._session_cookie(request, resp, cookie)

    async def signin(self, request: Request) -> Response:
        form = await self._anon_form(request)
        name, password = form.get("name", "").strip(), form.get("password", "")
        next_path = safe_next(form.get("next"))
        now, address, previous = self._now(), _address(request), request.cookies.get(SESSION_COOKIE)

        def attempt() -> str | None:
            if not self.accounts.check_password(name, password, address, now):
                return None
            return self.accounts.new_session(name, now, replaces=previous)

        try:
            cookie = await self._call(attempt)
        except TooManyAttempts as e:
            minutes = -(-e.retry_after // 60)
            error = f"Too many failed sign-ins ({MAX_FAILURES} in 15 minutes). Try again in {minutes} min."
            return await run_in_threadpool(
                self.form_page, request, "signin.html", error, 429, name, next_path, e.retry_after
            )
        if cookie is None:
            error = "That name and password do not match an account."
            return await run_in_threadpool(self.form_page, request, "signin.html", error, 400, name, next_path)
        return self._signed_in(request, cookie, next_path)

    async def register(self, request: Request) -> Response:
        form = await self._anon_form(request)
        name, password = form.get("name", "").strip(), form.get("password", "")
        next_path = safe_next(form.get("next"))
        now, previous = self._now(), request.cookies.get(SESSION_COOKIE)

        def create() -> str:
            if password != form.get("password2", ""):
                raise AccountError("bad_password", "The two passwords differ.")
            self.accounts.create(name, password, now)
            return self.accounts.new_session(name, now, replaces=previous)

        try:
            cookie = await self._call(create)
        except AccountError as e:
            error = str(e)[:1].upper() + str(e)[1:]
            return await run_in_threadpool(self.form_page, request, "register.html", error, 400, name, next_path)
        return self._signed_in(request, cookie, next_path)

    # -- signed in -------------------------------------------------------------------------------------
    async def _signed_in_form(self, request: Request) -> tuple[dict[str, str], tuple[str, str]]:
        form = await self.web._form(request)
        sess = await run_in_threadpool(self.web.session, request)
        self.web._check_csrf(form, sess)
        return form, sess

    async def signout(self, request: Request) -> Response:
        form = await self.web._form(request)
        sess = await run_in_threadpool(self.web.session, request)
        if sess is not None:
            self.web._check_csrf(form, sess)
            await self._call(self.accounts.end_session, sess[1])
        return self._end_cookie(request, RedirectResponse("/", status_code=303))

    def account_page(self, request: Request, new_token: str = "", error: str = "", status: int = 200) -> Response:
        sess = self.web.session(request)
        if sess is None:
            return RedirectResponse("/signin?next=/account", status_code=303)
        now = self._now()
        try:
            self.api._guard()
            role, tokens = self.accounts.role(sess[0]), self.accounts.tokens(sess[0], now)
        except REDIS_ERRORS:
            self.api._mark_down()
            raise _unavailable() from None
        ctx = self.web._context(request, sess, None)
        ctx.update(
            title="Your account",
            role=role,
            tokens=tokens,
            new_token=new_token,
            error=error,
            done=DONE.get(request.query_params.get("done", ""), ""),
        )
        return self.web.render(request, "account.html", ctx, personal=True, status=status)

    async def change_password(self, request: Request) -> Response:
        form, (user, cookie) = await self._signed_in_form(request)
        now, address = self._now(), _address(request)

        def change() -> str:
            if form.get("new", "") != form.get("new2", ""):
                raise AccountError("bad_password", "The two new passwords differ.")
            self.accounts.change_password(user, form.get("current", ""), form.get("new", ""), address, now)
            return self.accounts.new_session(user, now)  # every session ended: this browser gets a new one

        try:
            new_cookie = await self._call(change)
        except TooManyAttempts as e:
            return await self._limited(request, e)
        except AccountError as e:
            return await run_in_threadpool(self.account_page, request, "", str(e), 400)
        return self._session_cookie(request, RedirectResponse("/account?done=password", status_code=303), new_cookie)

    async def _limited(self, request: Request, e: TooManyAttempts) -> Response:
        """The account page answering 429 with ``Retry-After`` (a password check hit the sign-in limit)."""
        resp = await run_in_threadpool(self.account_page, request, "", "Too many wrong passwords; wait.", 429)
        resp.headers["Retry-After"] = str(e.retry_after)
        return resp

    async def signout_everywhere(self, request: Request) -> Response:
        _, (user, _) = await self._signed_in_form(request)
        await self._call(self.accounts.end_all_sessions, user)
        return self._end_cookie(request, RedirectResponse("/signin", status_code=303))

    async def create_token(self, request: Request) -> Response:
        form, (user, _) = await self._signed_in_form(request)
        now = self._now()
        try:
            jti, _ = await self._call(self.accounts.add_token, user, form.get("name", ""), now, TOKEN_TTL_SECONDS)
        except AccountError as e:
            return await run_in_threadpool(self.account_page, request, "", str(e), 400)
        token = sign_token(user, self.api.config.token_secret, now, TOKEN_TTL_SECONDS, token_id=jti)
        return await run_in_threadpool(self.account_page, request, token)

    async def revoke_token(self, request: Request) -> Response:
        form, (user, _) = await self._signed_in_form(request)
        if not await self._call(self.accounts.revoke_token, user, form.get("id", "")):
            raise PageError(404, "No such token", "You have no API token with that id.")
        return RedirectResponse("/account?done=revoked", status_code=303)

    async def delete_account(self, request: Request) -> Response:
        form, (user, _) = await self._signed_in_form(request)
        now, address = self._now(), _address(request)

        def delete() -> bool:
            if not self.accounts.check_password(user, form.get("password", ""), address, now):
                return False
            self.accounts.delete(user, now)
            self.api.personal.pages.forget(user)
            return True

        try:
            deleted = await self._call(delete)
        except TooManyAttempts as e:
            return await self._limited(request, e)
        if not deleted:
            return await run_in_threadpool(
                self.account_page, request, "", "The password is not right; the account is not deleted.", 400
            )
        request.state.nf_session = None
        page = self.web.error_page(
            request,
            PageError(200, "Account deleted", f"The account {user} and its reading data are deleted."),
        )
        return self._end_cookie(request, page)

    # -- editors -----------------------------------------------------------------------------------
    def _editor(self, request: Request) -> tuple[str, str] | Response:
        """The editor's session, a redirect to sign in, or a 403 for a reader (blocking)."""
        sess = self.web.session(request)
        if sess is None:
            return RedirectResponse(f"/signin?next={safe_next(request.url.path)}", status_code=303)
        try:
            self.api._guard()
            role = self.accounts.role(sess[0])
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
            return await self._call(fn, *args)
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


def account_routes(web) -> list[Route]:
    """The routes of the module docstring for :func:`newsflow.serving.web.web_routes`."""
    pages = AccountPages(web)
    return [
        Route("/signin", pages.signin_form, methods=["GET"]),
        Route("/signin", pages.signin, methods=["POST"]),
        Route("/register", pages.register_form, methods=["GET"]),
        Route("/register", pages.register, methods=["POST"]),
        Route("/signout", pages.signout, methods=["POST"]),
        Route("/account", pages.account_page, methods=["GET"]),
        Route("/account/password", pages.change_password, methods=["POST"]),
        Route("/account/signout-everywhere", pages.signout_everywhere, methods=["POST"]),
        Route("/account/tokens", pages.create_token, methods=["POST"]),
        Route("/account/tokens/revoke", pages.revoke_token, methods=["POST"]),
        Route("/account/delete", pages.delete_account, methods=["POST"]),
        Route("/admin", pages.admin_page, methods=["GET"]),
        Route("/admin/sources", pages.admin_action, methods=["POST"]),
        Route("/admin/sources/add", pages.admin_add, methods=["POST"]),
        Route("/admin/sources/import", pages.admin_import, methods=["POST"]),
        Route("/admin/sources/export", pages.admin_export, methods=["GET"]),
        Route("/admin/readers", pages.readers_page, methods=["GET"]),
        Route("/admin/readers", pages.reader_action, methods=["POST"]),
    ]
