"""The console's web layer: the shared state of one console (:class:`Console`), page rendering, the middleware
chain and the application factory.

Middleware order, outermost first: reverse-proxy headers (:func:`security.forwarded_middleware`), timing and
security headers, then sessions, CSRF and roles (:func:`auth_middleware`). Pages are Jinja2 templates
(auto-escaped) rendered on the event loop; a broker's refusal (:class:`~pocketmq.admin.api.AdminError`) or a
bad form value (:class:`FormError`) is shown on the page, with the status a browser or htmx expects.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import time
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2
from aiohttp import web
from aiohttp.typedefs import Middleware

from pocketmq.admin.api import AdminClient, AdminError
from pocketmq.client import Producer
from pocketmq.common.logs import get_logger
from pocketmq.console import security
from pocketmq.console.commands import AdminCommands
from pocketmq.console.config import ConsoleConfig
from pocketmq.console.messages import CursorError
from pocketmq.console.security import PREFIX_KEY, REST_KEY, SESSION_KEY, Handler, LoginThrottle, Session, SessionStore
from pocketmq.console.users import UsersFile
from pocketmq.console.view import ClusterView
from pocketmq.remoting import route as rd

log = get_logger("pocketmq.console.web")

PACKAGE_DIR = Path(__file__).resolve().parent
STATIC_DIR = PACKAGE_DIR / "static"
#: Largest request body the console reads (a test message's body is at most 64 KiB).
MAX_REQUEST_BODY = 256 * 1024
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "font-src 'self'; object-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
NAV = (("cluster", "/", "Cluster"), ("topics", "/topics", "Topics"), ("groups", "/groups", "Consumer groups"),
       ("messages", "/messages", "Messages"), ("dlq", "/dlq", "DLQ"), ("backlogs", "/backlogs", "Backlogs"))


class FormError(ValueError):
    """A form value the console refuses before asking any broker (the message is shown as is)."""


class Console:
    """Everything one running console shares between requests."""

    def __init__(self, config: ConsoleConfig, admin: AdminClient) -> None:
        self.config = config
        self.admin = admin
        self.view = ClusterView(admin, ttl_ms=config.snapshot_ttl_ms)
        self.commands = AdminCommands(config.namesrv_addr, acl=admin.credentials is not None)
        self.sessions = SessionStore(idle_timeout=config.session_timeout_seconds,
                                     max_age=config.session_max_age_seconds, max_sessions=config.max_sessions)
        self.throttle = LoginThrottle()
        self.users = UsersFile(config.users_file) if config.users_file else None
        self.templates = jinja2.Environment(
            loader=jinja2.PackageLoader("pocketmq.console", "templates"),
            autoescape=jinja2.select_autoescape(["html"]), undefined=jinja2.StrictUndefined,
            trim_blocks=True, lstrip_blocks=True)
        self.templates.filters["when"] = when
        self.templates.filters["num"] = num
        self._producer: Producer | None = None
        self._producer_lock = asyncio.Lock()

    async def producer(self) -> Producer:
        """The console's own producer (test messages and resends), started on first use, traced."""
        async with self._producer_lock:
            if self._producer is None:
                producer = Producer("PocketMQConsole", namesrv_addr=self.config.namesrv_addr,
                                    credentials=self.admin.credentials, enable_trace=True,
                                    instance_name=f"console-{id(self)}")
                await producer.start()
                self._producer = producer
            return self._producer

    async def close(self) -> None:
        if self._producer is not None:
            await self._producer.shutdown()
            self._producer = None


CONSOLE_KEY = web.AppKey("console", Console)


def console_of(request: web.Request) -> Console:
    return request.app[CONSOLE_KEY]


# -- formatting ---------------------------------------------------------------------------------------------


def when(millis: object) -> str:
    """Epoch ms as local ``YYYY-MM-DD HH:MM:SS.mmm``; ``-`` for 0 or nothing."""
    try:
        value = int(str(millis))
    except ValueError:
        return str(millis)
    if value <= 0:
        return "-"
    stamp = datetime.datetime.fromtimestamp(value / 1000)
    return stamp.strftime("%Y-%m-%d %H:%M:%S.") + f"{value % 1000:03d}"


def num(value: object) -> str:
    """Thousands separated with a thin space; floats with two decimals."""
    if isinstance(value, float):
        return f"{value:,.2f}".replace(",", "\u2009")
    if isinstance(value, int):
        return f"{value:,}".replace(",", "\u2009")
    return str(value)


# -- urls and rendering -------------------------------------------------------------------------------------


def url(request: web.Request, path: str, **params: object) -> str:
    """A link to one of the console's pages as the browser must write it (behind the proxy's prefix)."""
    query: list[tuple[str, str]] = []
    for key, value in params.items():
        for item in value if isinstance(value, list | tuple) else [value]:
            if item is not None and item != "":
                query.append((key, str(item)))
    return request[PREFIX_KEY] + path + ("?" + urllib.parse.urlencode(query) if query else "")


def is_htmx(request: web.Request) -> bool:
    return request.headers.get("HX-Request") == "true"


def render(request: web.Request, template: str, status: int = 200, **context: Any) -> web.Response:
    console = console_of(request)
    session = request.get(SESSION_KEY)
    page = console.templates.get_template(template).render(
        url=lambda path, **params: url(request, path, **params),
        static=lambda name: f"{request[PREFIX_KEY]}/static/{name}",
        session=session, csrf=session.csrf if session else "", login_required=console.config.login_required,
        nav=NAV, htmx=is_htmx(request), **context)
    return web.Response(text=page, content_type="text/html", status=status)


def action_result(request: web.Request, *, ok: bool, message: str, command: str | None,
                  details: list[str] | None = None, status: int = 200) -> web.Response:
    """The answer to an action: its outcome and the equivalent ``rmq-admin`` line, as an htmx fragment or, for
    a browser without JavaScript, a whole page."""
    template = "_result.html" if is_htmx(request) else "result.html"
    return render(request, template, status=status if not is_htmx(request) else 200, ok=ok, message=message,
                  command=command, details=details or [])


def form_int(form: Mapping[str, Any], name: str, default: int, low: int, high: int) -> int:
    raw = str(form.get(name, "") or "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise FormError(f"{name} must be a whole number, not {raw[:40]!r}") from None
    if not low <= value <= high:
        raise FormError(f"{name} must be between {low} and {high}")
    return value


def query_int(request: web.Request, name: str, default: int, low: int, high: int) -> int:
    try:
        return form_int(request.query, name, default, low, high)
    except FormError:
        return default


def parse_local_time(text: str, name: str) -> int:
    """``2026-11-27T10:15`` (a ``datetime-local`` field, local time) or epoch ms → epoch ms."""
    raw = text.strip()
    if raw.isdigit():
        return int(raw)
    try:
        return int(datetime.datetime.fromisoformat(raw).timestamp() * 1000)
    except ValueError:
        raise FormError(f"{name}: not a date and time ({raw[:40]!r})") from None


# -- middleware ---------------------------------------------------------------------------------------------


@web.middleware
async def headers_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Security headers on every answer and the handler's time as ``Server-Timing`` (what the benchmark reads)."""
    started = time.perf_counter()
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        response = exc
    response.headers["Server-Timing"] = f"app;dur={(time.perf_counter() - started) * 1000:.2f}"
    response.headers.setdefault("Content-Security-Policy", CSP)
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Referrer-Policy", "same-origin")
    response.headers.setdefault("X-Frame-Options", "DENY")
    if not request[REST_KEY].startswith("/static/") and "Cache-Control" not in response.headers:
        response.headers["Cache-Control"] = "no-store"
    if isinstance(response, web.HTTPException) and response.status >= 300:
        raise response
    return response


@web.middleware
async def errors_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A broker's refusal or a bad form value is shown on the page, never as a stack trace."""
    try:
        return await handler(request)
    except (FormError, CursorError) as exc:
        return error_answer(request, str(exc), 400)
    except (AdminError, rd.BodyDecodeError) as exc:
        log.warning("console_request_failed", path=request.path, error=str(exc))
        return error_answer(request, str(exc), 502)


def error_answer(request: web.Request, message: str, status: int) -> web.Response:
    if is_htmx(request) or request.method != "GET":
        return action_result(request, ok=False, message=message, command=None, status=status)
    return render(request, "error.html", status=status, message=message)


def _public(request: web.Request) -> bool:
    rest = request[REST_KEY]
    return rest in ("", "/login", "/healthz") or rest.startswith("/static/")


def login_redirect(request: web.Request) -> web.StreamResponse:
    """Where a request without a live session goes: the login page, back to this page afterwards."""
    query = request.rel_url.raw_query_string
    rest = request[REST_KEY] + ("?" + query if query else "") if request.method == "GET" else "/"
    here = request[PREFIX_KEY] + rest
    target = url(request, "/login", next=here if not is_htmx(request) else None)
    if is_htmx(request):
        return web.Response(status=200, headers={"HX-Redirect": target}, text="")
    if request[REST_KEY].startswith("/api/"):
        return web.json_response({"error": "not logged in", "login": target}, status=401)
    raise web.HTTPSeeOther(target)


def auth_middleware(console: Console) -> Middleware:
    @web.middleware
    async def auth(request: web.Request, handler: Handler) -> web.StreamResponse:
        if _public(request):
            return await handler(request)
        token = request.cookies.get(security.SESSION_COOKIE)
        session = console.sessions.get(token)
        new_token = None
        if session is None and not console.config.login_required:
            new_token, session = console.sessions.create("anonymous", "admin")
        if session is None:
            return login_redirect(request)
        request[SESSION_KEY] = session
        if request.method in security.UNSAFE_METHODS:
            refusal = await _refuse_unsafe(request, session)
            if refusal is not None:
                return refusal
        response = await handler(request)
        if new_token is not None:
            security.set_session_cookie(response, request, new_token)
        return response

    return auth


async def _refuse_unsafe(request: web.Request, session: Session) -> web.Response | None:
    """CSRF (token and Origin) and role checks of a state-changing request; None when it may go on."""
    origin = request.headers.get("Origin")
    if origin is not None and origin != security.own_origin(request):
        log.warning("console_csrf_refused", reason="origin", origin=origin[:100], user=session.user)
        return web.Response(status=403, text="Refused: the request comes from another site (Origin).")
    given = request.headers.get(security.CSRF_HEADER)
    if given is None and request.content_type in ("application/x-www-form-urlencoded", "multipart/form-data"):
        form = await request.post()
        value = form.get(security.CSRF_FIELD)
        given = value if isinstance(value, str) else None
    if not security.same_token(given, session.csrf):
        log.warning("console_csrf_refused", reason="token", user=session.user, path=request.path)
        return web.Response(status=403, text="Refused: the CSRF token is missing or wrong. Reload the page.")
    if not session.is_admin and request[REST_KEY] != "/logout":
        return web.Response(status=403, text="Refused: a viewer may not change anything.")
    return None


def see_other(location: str) -> web.Response:
    """A 303 to ``location`` (a path of this console) that middleware may still add headers and cookies to."""
    return web.Response(status=303, headers={"Location": location})


def json_answer(data: Any) -> web.Response:
    return web.Response(text=json.dumps(data, separators=(",", ":")), content_type="application/json")
