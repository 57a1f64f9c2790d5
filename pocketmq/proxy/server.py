"""``ProxyServer``: the gRPC endpoint (``grpc.aio`` on the running event loop, uvloop in every PocketMQ process),
composed of the cluster backend, the client registry and the messaging service. ``rmq-proxy`` runs one alone; a
broker with ``enableGrpcProxy=true`` runs one in its own process ("local mode"), composing it as it composes its
other parts. Plaintext by default; TLS with ``tlsCertPath``/``tlsKeyPath``.

Start: the cluster client, then the client registry's heartbeats, then the port. Stop: the port stops taking calls
and calls in flight get ``GRACE`` seconds, then clients are unregistered from the brokers and connections closed.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import grpc
from grpc import aio

from pocketmq.common.config import ConfigError, load_config, load_properties
from pocketmq.common.logs import get_logger
from pocketmq.proxy.auth import Authenticator
from pocketmq.proxy.backend import Backend
from pocketmq.proxy.clients import ClientRegistry
from pocketmq.proxy.config import ProxyConfig
from pocketmq.proxy.local import LocalBroker
from pocketmq.proxy.metrics import CallMetrics
from pocketmq.proxy.service import MessagingService
from pocketmq.remoting.metrics import Metrics, MetricsServer
from pocketmq.remoting.plain_acl.service import PlainAclService

log = get_logger("pocketmq.proxy.server")

GRACE = 2.0
"""Seconds calls in flight get to finish at stop (a receive still long polling is cut)."""
MAX_INBOUND = 130 * 1024 * 1024
"""Largest gRPC message accepted (RocketMQ's ``grpcMaxInboundMessageSize``); the body limit is checked after."""

SERVER_OPTIONS = [("grpc.max_receive_message_length", MAX_INBOUND), ("grpc.max_send_message_length", -1),
                  ("grpc.so_reuseport", 0)]
"""The gRPC server's channel arguments."""


async def start_local_proxy(namesrv_addr: str, host: str, port: int, config_file: str,
                            metrics: Metrics | None, local: LocalBroker | None = None) -> ProxyServer:
    """A broker's endpoint ("local mode"): the keys of ``config_file`` (``rmq-proxy``'s), with the broker's name
    servers, host and ``grpcServerPort``; its metrics in the broker's registry; requests to the broker itself
    served in-process by ``local``. Started."""
    props = load_properties(config_file) if config_file else {}
    config = load_config(ProxyConfig, props, namesrv_addr=namesrv_addr, grpc_server_host=host, grpc_server_port=port)
    server = ProxyServer(config, metrics=metrics, local=local)
    await server.start()
    return server


class ProxyServer:
    """One gRPC endpoint of ``apache.rocketmq.v2.MessagingService`` (module docstring)."""

    def __init__(self, config: ProxyConfig, *, metrics: Metrics | None = None,
                 local: LocalBroker | None = None) -> None:
        self.config = config
        self.client_id = f"{socket.gethostname()}@proxy@{os.getpid()}@{id(self):x}"
        self.backend = Backend(config, self.client_id, local)
        self.clients = ClientRegistry(self.backend, max_clients=config.max_clients,
                                      idle_timeout=config.grpc_client_idle_time_mills / 1000,
                                      heartbeat_interval=config.heartbeat_broker_interval_mills / 1000)
        self._own_metrics = metrics is None and config.metrics_port is not None
        self.metrics = metrics or Metrics("proxy")
        self.call_metrics = CallMetrics(self.metrics)
        self.call_metrics.clients_gauge(lambda: [c["type"] for c in self.clients.snapshot()])
        self.acl: PlainAclService | None = PlainAclService(config.plain_acl_file) if config.acl_enable else None
        self.service = MessagingService(config, self.backend, self.clients, self.call_metrics,
                                        Authenticator(self.acl) if self.acl is not None else None)
        self._server: aio.Server | None = None
        self._metrics_server: MetricsServer | None = None
        self.port = 0

    @property
    def addr(self) -> str:
        host = self.config.grpc_server_host
        return f"{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{self.port}"

    def _credentials(self) -> grpc.ServerCredentials:
        try:
            key = Path(self.config.tls_key_path).read_bytes()
            chain = Path(self.config.tls_cert_path).read_bytes()
        except OSError as exc:
            raise ConfigError(f"cannot read the TLS key or certificate: {exc}") from None
        return grpc.ssl_server_credentials([(key, chain)])

    async def start(self) -> None:
        if self.acl is not None:
            await self.acl.load()
        await self.backend.start()
        self.clients.service.start()
        if self.acl is not None:
            self.clients.service.add_child(self.acl.reloader)
        server = aio.server(options=SERVER_OPTIONS)
        server.add_generic_rpc_handlers((self.service.handler(),))
        target = f"{self.config.grpc_server_host}:{self.config.grpc_server_port}"
        if self.config.tls:
            self.port = server.add_secure_port(target, self._credentials())
        else:
            self.port = server.add_insecure_port(target)
        if not self.port:
            raise ConfigError(f"cannot bind the gRPC endpoint to {target}")
        await server.start()
        self._server = server
        if self._own_metrics and self.config.metrics_port is not None:
            self._metrics_server = MetricsServer(self.metrics, self.config.grpc_server_host, self.config.metrics_port)
            await self._metrics_server.start()
        log.info("proxy_started", addr=self.addr, tls=self.config.tls, namesrv=self.config.namesrv_addr,
                 acl=self.acl is not None)

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(GRACE)
            self._server = None
        await self.service.stop()
        await self.clients.stop()
        if self._metrics_server is not None:
            await self._metrics_server.stop()
        await self.backend.stop()
        log.info("proxy_stopped", addr=self.addr)
