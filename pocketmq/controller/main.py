"""``rmq-controller``: a standalone controller (RocketMQ 5's ``mqcontroller``) until SIGTERM or SIGINT.

It listens on its own address in ``controllerDLegerPeers`` (``--listen`` changes only the interface it binds) and
prints ``CONTROLLER READY <host>:<port>`` on stderr once it serves. Brokers name every controller in
``controllerAddr``. The same controller runs inside the name servers with ``enableControllerInNamesrv=true``.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from pocketmq.common.config import format_config, load_config, load_properties
from pocketmq.controller.config import ControllerConfig
from pocketmq.controller.manager import ControllerManager, register_metrics
from pocketmq.controller.processor import ControllerRequestProcessor
from pocketmq.remoting.metrics import Metrics, MetricsServer
from pocketmq.remoting.process import add_server_arguments, run_main
from pocketmq.remoting.server import RemotingServer, ServerConfig


@dataclass(frozen=True, slots=True)
class ControllerStartup:
    controller: ControllerConfig
    listen_host: str | None = None
    metrics_port: int | None = None


class ControllerProcess:
    """The standalone controller's composition root: a remoting server carrying one :class:`ControllerManager`."""

    def __init__(self, startup: ControllerStartup) -> None:
        self.startup = startup
        host, _, port = startup.controller.self_address.rpartition(":")
        self.server = RemotingServer(ServerConfig(host=startup.listen_host or host, port=int(port)),
                                     name="controller")
        self.manager = ControllerManager(startup.controller)
        handlers = ControllerRequestProcessor(self.manager).handlers()
        self.metrics: Metrics | None = None
        self.metrics_server: MetricsServer | None = None
        if startup.metrics_port is not None:
            self.metrics = Metrics("controller")
            register_metrics(self.metrics, self.manager)
            self.metrics.instrument(handlers)
        for code, handler in handlers.items():
            self.server.register(code, handler)
        self.server.on_connection_closed(self.manager.on_connection_closed)

    @property
    def addr(self) -> str:
        return self.server.addr

    async def start(self) -> None:
        await self.server.start()
        await self.manager.start()
        if self.metrics is not None:
            self.metrics_server = MetricsServer(self.metrics, self.startup.listen_host or "0.0.0.0",
                                                self.startup.metrics_port or 0)
            await self.metrics_server.start()

    async def stop(self) -> None:
        await self.manager.stop()
        await self.server.stop(grace=2.0)
        if self.metrics_server is not None:
            await self.metrics_server.stop()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="rmq-controller", description="PocketMQ controller (controller mode, RIP-44)")
    p.add_argument("-c", "--config", metavar="FILE", help="RocketMQ-style .properties file (controllerDLeger*...)")
    p.add_argument("--listen", metavar="HOST", help="interface to bind (default: the host of this controller's peer "
                   "address)")
    p.add_argument("--store-path", metavar="DIR", help="controllerStorePath")
    add_server_arguments(p)
    return p.parse_args(argv)


def build_config(args: argparse.Namespace) -> ControllerStartup:
    props = load_properties(args.config) if args.config else {}
    controller = load_config(ControllerConfig, props, controller_store_path=args.store_path)
    return ControllerStartup(controller, args.listen, args.metrics_port)


def main(argv: list[str] | None = None) -> int:
    return run_main("rmq-controller", parse_args(argv), build_config, ControllerProcess, ready_prefix="CONTROLLER",
                    format_config=lambda s: format_config(s.controller))


if __name__ == "__main__":
    sys.exit(main())
