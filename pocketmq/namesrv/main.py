"""``rmq-namesrv``: run a name server until SIGTERM or SIGINT.

Prints exactly one readiness line on stderr once listening, ``NAMESRV READY <host>:<port>``, so that
scripts and tests can start it with ``--port 0`` and read the bound address.
"""

from __future__ import annotations

import argparse
import sys

from pocketmq.common.config import format_config, load_config, load_properties
from pocketmq.namesrv.config import NamesrvConfig
from pocketmq.namesrv.controller import NamesrvController
from pocketmq.remoting.process import add_server_arguments, run_main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="rmq-namesrv", description="PocketMQ name server")
    p.add_argument("--listen", metavar="HOST", help="address to bind (default 0.0.0.0)")
    p.add_argument("--port", type=int, help="port to bind; 0 picks a free one (default 9876)")
    p.add_argument("-c", "--config", metavar="FILE", help="RocketMQ-style .properties file")
    p.add_argument("--kv-config-path", metavar="FILE", help="where KV config is persisted")
    add_server_arguments(p)
    return p.parse_args(argv)


def build_config(args: argparse.Namespace) -> NamesrvConfig:
    props = load_properties(args.config) if args.config else {}
    return load_config(
        NamesrvConfig, props, listen_host=args.listen, listen_port=args.port, kv_config_path=args.kv_config_path,
        metrics_port=args.metrics_port,
    )


def main(argv: list[str] | None = None) -> int:
    return run_main("rmq-namesrv", parse_args(argv), build_config, NamesrvController, ready_prefix="NAMESRV",
                    format_config=format_config)


if __name__ == "__main__":
    sys.exit(main())
