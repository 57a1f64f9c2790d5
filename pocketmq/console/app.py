"""The console's aiohttp application: the middleware chain and every page's routes under ``basePath``.

Middleware order, outermost first: reverse-proxy headers, timing and security headers, sessions/CSRF/roles,
then errors shown as pages (see :mod:`pocketmq.console.web`).
"""

from __future__ import annotations

from aiohttp import web

from pocketmq.console import pages_auth, pages_cluster, pages_groups, pages_messages, pages_topics, security
from pocketmq.console.security import PREFIX_KEY
from pocketmq.console.web import (
    CONSOLE_KEY,
    MAX_REQUEST_BODY,
    STATIC_DIR,
    Console,
    auth_middleware,
    errors_middleware,
    headers_middleware,
)


def create_app(console: Console) -> web.Application:
    app = web.Application(
        middlewares=[security.forwarded_middleware(console.config), headers_middleware, auth_middleware(console),
                     errors_middleware],
        client_max_size=MAX_REQUEST_BODY)
    app[CONSOLE_KEY] = console
    base = console.config.base_path
    routes: list[web.RouteDef] = []
    for module in (pages_auth, pages_cluster, pages_topics, pages_groups, pages_messages):
        routes.extend(module.routes())
    app.router.add_routes([web.route(r.method, base + r.path, r.handler, **r.kwargs) for r in routes])
    if base:
        app.router.add_get(base, _to_base)
    app.router.add_static(base + "/static", STATIC_DIR, append_version=False)
    return app


async def _to_base(request: web.Request) -> web.StreamResponse:
    raise web.HTTPMovedPermanently(request[PREFIX_KEY] + "/")
