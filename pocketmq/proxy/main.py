"""``rmq-proxy``: serve RocketMQ 5's gRPC ``MessagingService`` in front of a PocketMQ cluster until SIGTERM/SIGINT.

Prints one readiness line on stderr once serving, ``PROXY READY <host>:<port>``, so scripts and tests can start it
with ``--port 0`` and read the port it bound.
"""

from __future__ import annotations

import argparse
import sys

from pocketmq.common.config import format_config, load_config, load_properties
from pocketmq.proxy.config import ProxyConfig
from pocketmq.proxy.server import ProxyServer
from pocketmq.remoting.process import add_server_arguments, run_main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="rmq-proxy", description="PocketMQ gRPC proxy (RocketMQ 5 clients)")
    p.add_argument("-n", "--namesrv-addr", metavar="ADDR", help="name servers, 'host:port;host:port'")
    p.add_argument("--listen", metavar="HOST", help="address to bind (default 0.0.0.0)")
    p.add_argument("--port", type=int, help="gRPC port; 0 picks a free one (default 8081)")
    p.add_argument("-c", "--config", metavar="FILE", help="RocketMQ-style .properties file (ProxyConfig keys)")
    add_server_arguments(p)
    return p.parse_args(argv)


def build_config(args: argparse.Namespace) -> ProxyConfig:
    props = load_properties(args.config) if args.config else {}
    return load_config(ProxyConfig, props, namesrv_addr=args.namesrv_addr, grpc_server_host=args.listen,
                       grpc_server_port=args.port, metrics_port=args.metrics_port)


def main(argv: list[str] | None = None) -> int:
    return run_main("rmq-proxy", parse_args(argv), build_config, ProxyServer, ready_prefix="PROXY",
                    format_config=format_config)


if __name__ == "__main__":
    sys.exit(main())
