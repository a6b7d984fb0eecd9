"""Account pages of the reader web UI: register, sign in and out, the account page (the editors' admin pages are
:mod:`newsflow.serving.admin_web`).

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
==============================  ======  ===========================================================

Storage and rules (hashing, limits, sessions, tokens, deletion) are :mod:`newsflow.storage.accounts`; the
session cookie and CSRF are :mod:`newsflow.serving.web`'s. Signed-in forms carry the session's CSRF token;
the register and sign-in forms the double-submit ``nf_csrf`` cookie. Redirects are local paths
(:func:`newsflow.serving.web_view.safe_next`), never built from the Host header.
"""

from __future__ import annotations

import hmac
import secrets

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

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


def account_routes(web) -> list[Route]:
    """The routes of the module docstring for :func:`newsflow.serving.web.web_routes`, and the editors' admin
    pages (:func:`newsflow.serving.admin_web.admin_routes`)."""
    from newsflow.serving.admin_web import admin_routes  # it imports this module

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
        *admin_routes(web),
    ]
