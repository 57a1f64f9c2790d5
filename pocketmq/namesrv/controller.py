"""``NamesrvController``: the name server's composition root (server, tables, liveness scan, and the controller of
controller mode when ``enableControllerInNamesrv`` is on: its handlers on this server, its port the peer address)."""

from __future__ import annotations

import asyncio
import dataclasses
import time

from pocketmq.common.logs import get_logger
from pocketmq.common.service import periodic
from pocketmq.controller.config import ControllerConfig
from pocketmq.controller.manager import ControllerManager, register_metrics
from pocketmq.controller.processor import ControllerRequestProcessor
from pocketmq.namesrv.admin_processor import NamesrvAdminProcessor
from pocketmq.namesrv.config import NamesrvConfig
from pocketmq.namesrv.kvconfig import KVConfigManager
from pocketmq.namesrv.processor import NamesrvProcessor
from pocketmq.namesrv.routeinfo import RouteInfoManager
from pocketmq.remoting.connection import Connection
from pocketmq.remoting.metrics import Metrics, MetricsServer
from pocketmq.remoting.server import RemotingServer, ServerConfig

log = get_logger("pocketmq.namesrv.controller")


class NamesrvController:
    """Owns one name server: start it, read its address, stop it."""

    def __init__(self, config: NamesrvConfig, *, controller: ControllerConfig | None = None) -> None:
        if controller is not None:
            _host, _, port = controller.self_address.rpartition(":")
            config = dataclasses.replace(config, listen_port=int(port))  # peers reach it at its peer address
        self.config = config
        self.routes = RouteInfoManager()
        self.kv = KVConfigManager(config.kv_config_path)
        self.server = RemotingServer(
            ServerConfig(
                host=config.listen_host,
                port=config.listen_port,
                max_connections=config.max_connections,
                max_frame_length=config.max_frame_length,
                idle_timeout=config.server_channel_max_idle_time_seconds,
            ),
            name="namesrv",
        )
        processor = NamesrvProcessor(self.routes, self.kv, order_message_enable=config.order_message_enable)
        handlers = processor.handlers()
        handlers.update(NamesrvAdminProcessor(self.routes).handlers())
        self.controller: ControllerManager | None = None
        if controller is not None:
            self.controller = ControllerManager(controller)
            handlers.update(ControllerRequestProcessor(self.controller).handlers())
        # --- metrics ---
        self.metrics: Metrics | None = None
        self.metrics_server: MetricsServer | None = None
        if config.metrics_port is not None:
            self.metrics = self._define_metrics()
            if self.controller is not None:
                register_metrics(self.metrics, self.controller)
            self.metrics.instrument(handlers)
        # --- end metrics ---
        for code, handler in handlers.items():
            self.server.register(code, handler)
        self.server.on_connection_closed(self._on_connection_closed)
        self._scan = periodic("namesrv-scan", config.scan_not_active_broker_interval / 1000, self.scan_once)

    @property
    def addr(self) -> str:
        return self.server.addr

    async def start(self) -> None:
        await asyncio.to_thread(self.kv.load)
        await self.server.start()
        if self.controller is not None:
            await self.controller.start()
        if self.metrics is not None:
            self.metrics_server = MetricsServer(self.metrics, self.config.listen_host, self.config.metrics_port or 0)
            await self.metrics_server.start()
        self._scan.start()

    async def stop(self) -> None:
        await self._scan.stop()
        if self.controller is not None:
            await self.controller.stop()
        await self.server.stop(grace=2.0)
        if self.metrics_server is not None:
            await self.metrics_server.stop()

    def _on_connection_closed(self, conn: Connection) -> None:
        self.routes.on_channel_destroy(conn)
        if self.controller is not None:
            self.controller.on_connection_closed(conn)

    def scan_once(self) -> None:
        """Drop brokers silent for longer than the expiry and close their connections."""
        expired = self.routes.scan_not_active_broker(time.monotonic(),
                                                   self.config.broker_channel_expired_time / 1000)
        for channel in expired:
            if isinstance(channel, Connection):
                log.warning("broker_expired", peer=channel.remote_addr)
                channel.close()

    # -- metrics ------------------------------------------------------------------------------------------------

    def _define_metrics(self) -> Metrics:
        m = Metrics("namesrv")
        r = self.routes
        m.gauge("pocketmq_namesrv_brokers_registered", "Live broker registrations (addresses)", [],
                lambda: [((), len(r.broker_live_table))])
        m.gauge("pocketmq_namesrv_broker_registered", "Each registered broker (value 1)",
                ["cluster", "broker", "id", "addr"],
                lambda: [((bd.cluster, bd.broker_name, str(bid), addr), 1)
                         for bd in r.broker_addr_table.values() for bid, addr in bd.broker_addrs.items()])
        m.gauge("pocketmq_namesrv_topics", "Topics with a route", [], lambda: [((), len(r.topic_queue_table))])
        return m
    # --- end metrics ---
