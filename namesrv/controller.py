"""``NamesrvController``: the name server's composition root (server, tables, liveness scan)."""

from __future__ import annotations

import asyncio
import contextlib
import time

import structlog

from namesrv.config import NamesrvConfig
from namesrv.kvconfig import KVConfigManager
from namesrv.processor import NamesrvProcessor
from namesrv.routeinfo import RouteInfoManager
from remoting.connection import Connection
from remoting.server import RemotingServer, ServerConfig

log = structlog.get_logger("namesrv")


class NamesrvController:
    """Owns one name server: start it, read its address, stop it."""

    def __init__(self, config: NamesrvConfig) -> None:
        self.config = config
        self.routes = RouteInfoManager()
        self.kv = KVConfigManager(config.kv_config_path)
        self.server = RemotingServer(
            ServerConfig(
                host=config.listen_host,
                port=config.listen_port,
                max_connections=config.max_connections,
                max_frame_length=config.max_frame_length,
                idle_timeout=config.server_channel_max_idle_time,
            ),
            name="namesrv",
        )
        processor = NamesrvProcessor(self.routes, self.kv, order_message_enable=config.order_message_enable)
        for code, handler in processor.handlers().items():
            self.server.register(code, handler)
        self.server.on_connection_closed(self._on_connection_closed)
        self._scan_task: asyncio.Task[None] | None = None

    @property
    def addr(self) -> str:
        return self.server.addr

    async def start(self) -> None:
        await asyncio.to_thread(self.kv.load)
        await self.server.start()
        self._scan_task = asyncio.get_running_loop().create_task(self._scan_loop(), name="namesrv-scan")

    async def stop(self) -> None:
        if self._scan_task is not None:
            self._scan_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._scan_task
            self._scan_task = None
        await self.server.stop(grace=2.0)

    def _on_connection_closed(self, conn: Connection) -> None:
        self.routes.on_channel_destroy(conn)

    async def _scan_loop(self) -> None:
        interval = self.config.scan_not_active_broker_interval
        while True:
            await asyncio.sleep(interval)
            self.scan_once()

    def scan_once(self) -> None:
        """Drop brokers silent for longer than the expiry and close their connections."""
        expired = self.routes.scan_not_active_broker(time.monotonic(), self.config.broker_channel_expired_time)
        for channel in expired:
            if isinstance(channel, Connection):
                log.warning("broker_expired", peer=channel.remote_addr)
                channel.close()
