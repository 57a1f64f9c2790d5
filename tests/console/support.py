"""A console on the test's event loop, in front of the in-process cluster, and an HTTP client that logs in."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp

from pocketmq.console.config import ConsoleConfig
from pocketmq.console.server import ConsoleServer
from pocketmq.console.users import add_user

ADMIN, ADMIN_PASSWORD = "alice", "alice-password-1"
VIEWER, VIEWER_PASSWORD = "victor", "victor-password-1"
_CSRF = re.compile(r'name="csrf-token" content="([^"]*)"')
_LOGIN_CSRF = re.compile(r'name="_login_csrf" value="([^"]*)"')


def users_file(tmp: Path) -> Path:
    path = tmp / "console-users"
    add_user(path, ADMIN, "admin", ADMIN_PASSWORD)
    add_user(path, VIEWER, "viewer", VIEWER_PASSWORD)
    return path


@asynccontextmanager
async def console(tmp: Path, namesrv_addr: str, **overrides: Any) -> AsyncIterator[ConsoleServer]:
    config = ConsoleConfig(namesrv_addr=namesrv_addr, listen_port=0, users_file=str(users_file(tmp)),
                           snapshot_ttl_ms=200)
    server = ConsoleServer(dataclasses.replace(config, **overrides))
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


class Browser:
    """An HTTP client with its own cookies (IP-address cookies allowed, as a browser allows them)."""

    def __init__(self, base: str) -> None:
        self.base = base.rstrip("/")
        self.session = aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True),
                                             timeout=aiohttp.ClientTimeout(total=30))
        self.csrf = ""

    async def close(self) -> None:
        await self.session.close()

    async def get(self, path: str, **kw: Any) -> tuple[int, str, aiohttp.ClientResponse]:
        async with self.session.get(self.base + path, allow_redirects=kw.pop("allow_redirects", True), **kw) as r:
            text = await r.text()
            found = _CSRF.search(text)
            if found and found.group(1):
                self.csrf = found.group(1)
            return r.status, text, r

    async def post(self, path: str, data: dict[str, Any], *, csrf: bool = True,
                   **kw: Any) -> tuple[int, str, aiohttp.ClientResponse]:
        form = {**data, **({"_csrf": self.csrf} if csrf else {})}
        async with self.session.post(self.base + path, data=form, allow_redirects=kw.pop("allow_redirects", True),
                                     **kw) as r:
            return r.status, await r.text(), r

    async def login(self, user: str = ADMIN, password: str = ADMIN_PASSWORD) -> int:
        _status, text, _ = await self.get("/login")
        token = _LOGIN_CSRF.search(text)
        assert token is not None, text[:500]
        async with self.session.post(self.base + "/login", allow_redirects=False, data={
                "_login_csrf": token.group(1), "username": user, "password": password, "next": ""}) as r:
            await r.read()
            if r.status == 303:
                await self.get("/")  # picks up the session's CSRF token
            return r.status


@asynccontextmanager
async def browser(server: ConsoleServer, *, login: str | None = ADMIN) -> AsyncIterator[Browser]:
    b = Browser(server.url)
    try:
        if login == ADMIN:
            assert await b.login() == 303
        elif login == VIEWER:
            assert await b.login(VIEWER, VIEWER_PASSWORD) == 303
        yield b
    finally:
        await b.close()


def text_of(html: str) -> str:
    """The page's text, tags removed and whitespace folded (for assertions on what a person reads)."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).replace("&#39;", "'").replace("&amp;", "&")
