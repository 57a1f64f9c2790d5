"""Shared pieces of the gRPC proxy tests: an in-process cluster (name server, brokers) with a proxy in the test's
loop, topics with a ``message.type``, FIFO consumer groups, and the official client's scenarios."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pocketmq.admin import api_ops
from pocketmq.admin.api import AdminClient
from pocketmq.common.config import camel
from pocketmq.proxy.config import ProxyConfig
from pocketmq.proxy.server import ProxyServer
from tests.client.consumer.consumer_support import Cluster, cluster
from tests.grpc import node, official

#: Brokers that revive fast and check transactions back within a second or two.
BROKER_PROPS = {"reviveInterval": "100", "transactionCheckInterval": "1000", "transactionTimeOut": "1000",
                "enablePropertyFilter": "true"}
_homes = itertools.count()
#: Long polls the tests' clients are given (ProxyConfig fields): an empty receive ends within seconds, and so does
#: a consumer's shutdown when it waits for its last long poll to end (the Node.js client does).
SHORT_POLLS: dict[str, Any] = {"grpc_client_consumer_min_long_polling_timeout_millis": 500,
                               "grpc_client_consumer_max_long_polling_timeout_millis": 3000}
#: The official RocketMQ 5 clients the tests drive, each running the same scenarios.
SDKS = {"python": official.run, "node": node.run}


@dataclass
class ProxyCluster:
    cluster: Cluster
    proxy: ProxyServer
    tmp: Path
    sdk: str = "python"
    """The official client :meth:`client` runs when not told (a key of :data:`SDKS`)."""

    @property
    def endpoints(self) -> str:
        return self.proxy.addr

    @property
    def namesrv_addr(self) -> str:
        return self.cluster.namesrv_addr

    async def client(self, scenario: str, timeout: float = 60.0, *, sdk: str | None = None,
                     **args: Any) -> dict[str, Any]:
        """One scenario of an official client (``sdk``, else :attr:`sdk`) against this proxy."""
        args.setdefault("endpoints", self.endpoints)
        home = self.tmp / f"client-{next(_homes)}"
        return await SDKS[sdk or self.sdk](scenario, args, home=home, timeout=timeout)

    async def topic(self, name: str, message_type: str = "NORMAL", queues: int = 4) -> None:
        await create_topic(self.namesrv_addr, name, message_type, queues)

    async def fifo_group(self, group: str) -> None:
        admin = AdminClient([self.namesrv_addr])
        await api_ops.update_sub_group(admin, {"groupName": group, "consumeMessageOrderly": True},
                                       await admin.master_addrs())


def born_near(born_ms: int, sent_ms: int) -> bool:
    """Whether a message's born time is its client's, taken around the send at ``sent_ms``: the Python client keeps
    whole seconds (up to 1 s before), the Node.js client the time it builds the request (a little after)."""
    return sent_ms - 1000 < born_ms <= sent_ms + 10_000


async def create_topic(namesrv: str, name: str, message_type: str = "NORMAL", queues: int = 4) -> None:
    """UPDATE_AND_CREATE_TOPIC with ``+message.type=<type>`` on every master (routed when it returns)."""
    admin = AdminClient([namesrv])
    await admin.update_topic(name, read_queues=queues, write_queues=queues, attributes=f"+message.type={message_type}")


@contextlib.asynccontextmanager
async def local_proxy_cluster(tmp: Path, props: dict[str, str] | None = None,
                              **proxy: Any) -> AsyncIterator[ProxyCluster]:
    """One broker serving the gRPC endpoint itself (``enableGrpcProxy=true``, local mode); ``proxy``'s settings
    (ProxyConfig field names) reach it through ``proxyConfigFile``, as a user would give them."""
    config_file = tmp / "local-proxy.properties"
    config_file.write_text("".join(f"{camel(key)}={value}\n" for key, value in proxy.items()))
    local = {"enableGrpcProxy": "true", "grpcServerPort": "0", "proxyConfigFile": str(config_file)}
    async with cluster(tmp, ("broker-a",), {**BROKER_PROPS, **local, **(props or {})}) as c:
        server = c.brokers["broker-a"].proxy
        assert server is not None and server.backend.local is not None
        yield ProxyCluster(c, server, tmp)


@contextlib.asynccontextmanager
async def proxy_cluster(tmp: Path, brokers: Sequence[str] = ("broker-a",), props: dict[str, str] | None = None,
                        **proxy: Any) -> AsyncIterator[ProxyCluster]:
    async with cluster(tmp, brokers, {**BROKER_PROPS, **(props or {})}) as c:
        server = ProxyServer(ProxyConfig(namesrv_addr=c.namesrv_addr, grpc_server_host="127.0.0.1",
                                         grpc_server_port=0, **proxy))
        await server.start()
        try:
            yield ProxyCluster(c, server, tmp)
        finally:
            await server.stop()
