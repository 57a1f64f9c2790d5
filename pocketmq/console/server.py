"""One running console: the admin client, the web application on this process's event loop, the snapshot and
sampler services, and (``--with-namesrv``) a name server in the same process.

:class:`ConsoleServer` has the shape :func:`pocketmq.remoting.process.run_main` runs (``start``, ``addr``,
``stop``), like the name server and broker controllers.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from pocketmq.admin.api import AdminClient, split_namesrv
from pocketmq.common.config import ConfigError
from pocketmq.common.logs import get_logger
from pocketmq.console.app import create_app
from pocketmq.console.config import ConsoleConfig
from pocketmq.console.users import UsersFile, UsersFileError
from pocketmq.console.web import Console
from pocketmq.namesrv.config import NamesrvConfig
from pocketmq.namesrv.controller import NamesrvController
from pocketmq.remoting.acl import SessionCredentials

log = get_logger("pocketmq.console.server")


def credentials_of(config: ConsoleConfig) -> SessionCredentials | None:
    if not config.access_key:
        return None
    return SessionCredentials(config.access_key, config.secret_key)


class ConsoleServer:
    """``await start()``, ``.addr`` (``host:port``), ``.url``, ``await stop()``."""

    def __init__(self, config: ConsoleConfig, *, namesrv: NamesrvConfig | None = None) -> None:
        self.config = config
        self.namesrv = NamesrvController(namesrv) if namesrv is not None else None
        self.console: Console | None = None
        self._runner: web.AppRunner | None = None
        self._port = 0

    def check(self) -> None:
        """Refuse to start without a way to log in (blocking: reads the users file)."""
        if not self.config.login_required:
            log.warning("console_login_off", reason="consoleLoginRequired=false: every visitor is an admin")
            return
        if not self.config.users_file:
            raise ConfigError("login is on and no users file is given: create one with `rmq-console adduser "
                              "--users-file FILE NAME --role admin` and pass --users-file FILE")
        try:
            users = UsersFile(self.config.users_file).load()
        except UsersFileError as exc:
            raise ConfigError(str(exc)) from None
        if not users:
            raise ConfigError(f"the users file {self.config.users_file} has no user: add one with rmq-console adduser")

    async def start(self) -> None:
        await asyncio.to_thread(self.check)
        config = self.config
        if self.namesrv is not None:
            await self.namesrv.start()
            config = self.config = _replace_namesrv(config, self.namesrv.addr)
        admin = AdminClient(split_namesrv(config.namesrv_addr), timeout=config.request_timeout_ms / 1000,
                            credentials=credentials_of(config))
        self.console = Console(config, admin)
        self._runner = web.AppRunner(create_app(self.console), access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, config.listen_host, config.listen_port)
        await site.start()
        self._port = int(self._runner.addresses[0][1])
        self.console.view.services.start()
        log.info("console_started", url=self.url, namesrv=config.namesrv_addr, login=config.login_required,
                 acl=bool(config.access_key), embedded_namesrv=self.namesrv is not None)

    @property
    def addr(self) -> str:
        return f"{self.config.listen_host}:{self._port}"

    @property
    def url(self) -> str:
        host = self.config.listen_host if self.config.listen_host not in ("0.0.0.0", "::") else "127.0.0.1"
        return f"http://{host}:{self._port}{self.config.base_path}/"

    async def stop(self) -> None:
        if self.console is not None:
            await self.console.view.services.stop()
        if self._runner is not None:
            await self._runner.cleanup()
        if self.console is not None:
            await self.console.close()
            await self.console.admin.close()
        if self.namesrv is not None:
            await self.namesrv.stop()
        log.info("console_stopped")


def _replace_namesrv(config: ConsoleConfig, addr: str) -> ConsoleConfig:
    import dataclasses

    return dataclasses.replace(config, namesrv_addr=addr)
