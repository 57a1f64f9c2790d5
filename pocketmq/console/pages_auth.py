"""Login, logout and the health check.

The login form has no session to hold its CSRF token, so it uses a double-submit cookie: a random token in a
``SameSite=Strict`` cookie and the same token in the form; another site can make a browser post the form but
cannot read or set the cookie. Passwords are checked in a thread (scrypt takes ~50 ms) and never logged;
after :data:`~pocketmq.console.security.MAX_FAILURES` failures an address waits.
"""

from __future__ import annotations

import asyncio
import secrets

from aiohttp import web

from pocketmq.common.logs import get_logger
from pocketmq.console import security
from pocketmq.console.security import PREFIX_KEY, SESSION_KEY
from pocketmq.console.users import MAX_PASSWORD_LENGTH, UsersFileError
from pocketmq.console.web import console_of, render, see_other, url

log = get_logger("pocketmq.console.auth")


def routes() -> list[web.RouteDef]:
    return [web.get("/login", login_page), web.post("/login", login), web.post("/logout", logout),
            web.get("/healthz", healthz)]


def safe_next(request: web.Request, target: str | None) -> str:
    """Where to go after login: a path of this console only (never another site, never ``//host``)."""
    prefix = request[PREFIX_KEY]
    if target and target.startswith(prefix + "/") and not target.startswith("//") and "\\" not in target:
        return target
    return prefix + "/"


def _login_form(request: web.Request, *, error: str = "", status: int = 200) -> web.Response:
    # The same token for every form this browser gets: a second tab (or a stray request the browser makes on
    # its own) must not invalidate the form already shown.
    held = request.cookies.get(security.LOGIN_CSRF_COOKIE, "")
    token = held if 24 <= len(held) <= 64 and held.replace("-", "").replace("_", "").isalnum() else \
        secrets.token_urlsafe(24)
    response = render(request, "login.html", status=status, error=error, login_csrf=token,
                      next=safe_next(request, request.query.get("next")))
    response.set_cookie(security.LOGIN_CSRF_COOKIE, token, path=security.cookie_path(request), httponly=True,
                        samesite="Strict", secure=request.scheme == "https", max_age=3600)
    return response


async def login_page(request: web.Request) -> web.StreamResponse:
    console = console_of(request)
    if not console.config.login_required or console.sessions.get(request.cookies.get(security.SESSION_COOKIE)):
        raise web.HTTPSeeOther(safe_next(request, request.query.get("next")))
    return _login_form(request)


async def login(request: web.Request) -> web.StreamResponse:
    console = console_of(request)
    form = await request.post()
    cookie = request.cookies.get(security.LOGIN_CSRF_COOKIE, "")
    field = form.get("_login_csrf")
    if not cookie or not isinstance(field, str) or not security.same_token(field, cookie):
        return web.Response(status=403, text="Refused: the login form's CSRF token is missing or wrong. Reload it.")
    addr = request.remote or "?"
    if console.throttle.blocked(addr):
        return _login_form(request, error="Too many failed logins from this address; wait a few minutes.",
                           status=429)
    name, password = str(form.get("username", "")), str(form.get("password", ""))
    if console.users is None or not name or not password or len(password) > MAX_PASSWORD_LENGTH:
        console.throttle.failed(addr)
        return _login_form(request, error="Wrong user name or password.", status=401)
    try:
        user = await asyncio.to_thread(console.users.authenticate, name, password)
    except UsersFileError as exc:
        log.error("console_users_file_unreadable", error=str(exc))
        return _login_form(request, error="The console's users file cannot be read; see its log.", status=500)
    if user is None:
        console.throttle.failed(addr)
        log.warning("console_login_failed", user=name[:64], peer=addr)
        return _login_form(request, error="Wrong user name or password.", status=401)
    console.throttle.succeeded(addr)
    console.sessions.drop(request.cookies.get(security.SESSION_COOKIE))
    token, _session = console.sessions.create(user.name, user.role)
    log.info("console_login", user=user.name, role=user.role, peer=addr)
    response = see_other(safe_next(request, str(form.get("next", "")) or None))
    security.set_session_cookie(response, request, token)
    response.del_cookie(security.LOGIN_CSRF_COOKIE, path=security.cookie_path(request))
    return response


async def logout(request: web.Request) -> web.StreamResponse:
    console = console_of(request)
    session = request.get(SESSION_KEY)
    console.sessions.drop(request.cookies.get(security.SESSION_COOKIE))
    if session is not None:
        log.info("console_logout", user=session.user)
    response = see_other(url(request, "/login"))
    security.clear_session_cookie(response, request)
    return response


async def healthz(request: web.Request) -> web.StreamResponse:
    return web.Response(text="ok\n")
