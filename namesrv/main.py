"""``rmq-namesrv``: run a name server until SIGTERM or SIGINT.

Prints exactly one readiness line on stderr once listening, ``NAMESRV READY <host>:<port>``, so that
scripts and tests can start it with ``--port 0`` and read the bound address.
"""

from __future__ import annotations

import argparse
import sys

from namesrv.config import NamesrvConfig
from namesrv.controller import NamesrvController
from remoting.config import format_config, load_config, load_properties
from remoting.process import run_main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="rmq-namesrv", description="PocketMQ name server")
    p.add_argument("--listen", metavar="HOST", help="address to bind (default 0.0.0.0)")
    p.add_argument("--port", type=int, help="port to bind; 0 picks a free one (default 9876)")
    p.add_argument("-c", "--config", metavar="FILE", help="RocketMQ-style .properties file")
    p.add_argument("--kv-config-path", metavar="FILE", help="where KV config is persisted")
    p.add_argument("--metrics-port", type=int, help="serve Prometheus metrics on this port (0 picks one)")
    p.add_argument("--log-format", choices=("json", "console"), default="console")
    p.add_argument("--log-level", default="INFO")
    p.add_argument("--print-config", action="store_true", help="print the effective config and exit")
    return p.parse_args(argv)


def build_config(args: argparse.Namespace) -> NamesrvConfig:
    props = load_properties(args.config) if args.config else {}
    return load_config(
        NamesrvConfig, props, listen_host=args.listen, listen_port=args.port, kv_config_path=args.kv_config_path,
        metrics_port=args.metrics_port,
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return run_main(
        "rmq-namesrv", lambda: build_config(args), lambda config: NamesrvController(config),
        ready_prefix="NAMESRV", print_config=format_config if args.print_config else None,
        log_format=args.log_format, log_level=args.log_level,
    )


if __name__ == "__main__":
    sys.exit(main())
