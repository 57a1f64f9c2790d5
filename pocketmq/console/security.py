"""Who may do what in the console, and how requests behind a reverse proxy are read.

* **Sessions** live in this process (:class:`SessionStore`, bounded, least recently used dropped first): a
  random 256-bit token in an ``HttpOnly``, ``SameSite=Strict`` cookie scoped to the console's path (``Secure``
  when the page was reached over HTTPS), expiring after ``sessionTimeoutSeconds`` unused and
  ``sessionMaxAgeSeconds`` after login. A request without a live session is sent to the login page (a
  ``303``; an htmx request gets ``401`` with ``HX-Redirect`` so the whole page goes there).
* **CSRF**: every session has its own token; every state-changing request must carry it (form field
  ``_csrf`` or header ``X-CSRF-Token``), and an ``Origin`` header, when the browser sends one, must be the
  console's own. The login form, which has no session yet, uses a double-submit cookie.
* **Roles**: a viewer reads; only an admin's POST gets through.
* **Reverse proxy**: ``X-Forwarded-For/-Proto/-Host/-Prefix`` are believed only from ``trustedProxies``;
  the external prefix (proxy prefix + ``basePath``) is what every link, redirect and cookie path uses.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import web
from aiohttp.typedefs import Middleware

from pocketmq.console.config import ConsoleConfig, normalise_base_path

SESSION_COOKIE = "pmq_session"
LOGIN_CSRF_COOKIE = "pmq_login_csrf"
CSRF_FIELD = "_csrf"
CSRF_HEADER = "X-CSRF-Token"
#: Login failures one address may have in :data:`FAILURE_WINDOW` seconds before it must wait.
MAX_FAILURES = 10
FAILURE_WINDOW = 300.0
#: Addresses whose failures are remembered at once (the oldest is forgotten past it).
MAX_FAILURE_ADDRESSES = 10_000
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
PREFIX_KEY = web.RequestKey("prefix", str)
"""The external prefix of the console's pages on this request (proxy prefix + basePath)."""
REST_KEY = web.RequestKey("rest", str)
"""The request's path after ``basePath`` (``/topics``): the same behind any proxy."""


@dataclass(slots=True)
class Session:
    user: str
    role: str
    csrf: str
    created: float
    last_seen: float
    flags: dict[str, str] = field(default_factory=dict)

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"


SESSION_KEY = web.RequestKey("session", Session)


class SessionStore:
    """Live sessions by token; every lookup checks both expiries."""

    def __init__(self, *, idle_timeout: float, max_age: float, max_sessions: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.idle_timeout = idle_timeout
        self.max_age = max_age
        self.max_sessions = max_sessions
        self.clock = clock
        self._sessions: OrderedDict[str, Session] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def create(self, user: str, role: str) -> tuple[str, Session]:
        now = self.clock()
        token = secrets.token_urlsafe(32)
        session = Session(user, role, secrets.token_urlsafe(32), now, now)
        self._sessions[token] = session
        while len(self._sessions) > self.max_sessions:
            self._sessions.popitem(last=False)
        return token, session

    def get(self, token: str | None) -> Session | None:
        if not token:
            return None
        session = self._sessions.get(token)
        if session is None:
            return None
        now = self.clock()
        if now - session.last_seen > self.idle_timeout or now - session.created > self.max_age:
            del self._sessions[token]
            return None
        session.last_seen = now
        self._sessions.move_to_end(token)
        return session

    def drop(self, token: str | None) -> None:
        if token:
            self._sessions.pop(token, None)


class LoginThrottle:
    """Failed logins per client address in a sliding window (bounded table)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._failures: OrderedDict[str, list[float]] = OrderedDict()

    def blocked(self, addr: str) -> bool:
        recent = self._recent(addr)
        return len(recent) >= MAX_FAILURES

    def failed(self, addr: str) -> None:
        recent = self._recent(addr)
        recent.append(self.clock())
        self._failures[addr] = recent
        self._failures.move_to_end(addr)
        while len(self._failures) > MAX_FAILURE_ADDRESSES:
            self._failures.popitem(last=False)

    def succeeded(self, addr: str) -> None:
        self._failures.pop(addr, None)

    def _recent(self, addr: str) -> list[float]:
        now = self.clock()
        return [t for t in self._failures.get(addr, []) if now - t < FAILURE_WINDOW]


def same_token(given: str | None, expected: str) -> bool:
    return bool(given) and hmac.compare_digest(str(given).encode(), expected.encode())


# -- reverse proxy ------------------------------------------------------------------------------------------


def _first(value: str | None) -> str:
    return value.split(",")[0].strip() if value else ""


def _valid_host(host: str) -> bool:
    return 0 < len(host) <= 255 and all(c.isalnum() or c in "-.:[]" for c in host)


def _client_ip(forwarded_for: str | None, trusted: frozenset[str]) -> str | None:
    """The right-most address of ``X-Forwarded-For`` that is not one of our proxies: the client as the nearest
    trusted proxy saw it (addresses further left were written by the client itself)."""
    hops = [h.strip() for h in (forwarded_for or "").split(",") if h.strip()]
    for hop in reversed(hops):
        try:
            ipaddress.ip_address(hop)
        except ValueError:
            return None
        if hop not in trusted:
            return hop
    return hops[0] if hops else None


def forwarded_middleware(config: ConsoleConfig) -> Middleware:
    """Read the proxy headers of a trusted peer, set the request's scheme, host, remote and external prefix."""
    trusted = config.trusted

    @web.middleware
    async def forwarded(request: web.Request, handler: Handler) -> web.StreamResponse:
        prefix = config.base_path
        if request.remote in trusted:
            changes: dict[str, str] = {}
            proto = _first(request.headers.get("X-Forwarded-Proto")).lower()
            if proto in ("http", "https"):
                changes["scheme"] = proto
            host = _first(request.headers.get("X-Forwarded-Host"))
            if host and _valid_host(host):
                changes["host"] = host
            client = _client_ip(request.headers.get("X-Forwarded-For"), trusted)
            if client:
                changes["remote"] = client
            try:
                proxy_prefix = normalise_base_path(_first(request.headers.get("X-Forwarded-Prefix")))
            except ValueError:
                proxy_prefix = ""
            prefix = proxy_prefix + config.base_path
            if changes:
                request = request.clone(**changes)  # type: ignore[arg-type]
        request[PREFIX_KEY] = prefix
        base = config.base_path
        request[REST_KEY] = request.path[len(base):] if base and request.path.startswith(base) else request.path
        return await handler(request)

    return forwarded


def own_origin(request: web.Request) -> str:
    return f"{request.scheme}://{request.host}"


def cookie_path(request: web.Request) -> str:
    return request[PREFIX_KEY] or "/"


def set_session_cookie(response: web.StreamResponse, request: web.Request, token: str) -> None:
    response.set_cookie(SESSION_COOKIE, token, path=cookie_path(request), httponly=True, samesite="Strict",
                        secure=request.scheme == "https")


def clear_session_cookie(response: web.StreamResponse, request: web.Request) -> None:
    response.del_cookie(SESSION_COOKIE, path=cookie_path(request))
