"""``rmq-namesrv``: run a name server until SIGTERM or SIGINT.

Prints exactly one readiness line on stderr once listening, ``NAMESRV READY <host>:<port>``, so that
scripts and tests can start it with ``--port 0`` and read the bound address.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

import uvloop

from namesrv.config import NamesrvConfig
from namesrv.controller import NamesrvController
from remoting.config import ConfigError, format_config, load_config, load_properties
from remoting.logs import configure_logging


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="rmq-namesrv", description="PocketMQ name server")
    p.add_argument("--listen", metavar="HOST", help="address to bind (default 0.0.0.0)")
    p.add_argument("--port", type=int, help="port to bind; 0 picks a free one (default 9876)")
    p.add_argument("-c", "--config", metavar="FILE", help="RocketMQ-style .properties file")
    p.add_argument("--kv-config-path", metavar="FILE", help="where KV config is persisted")
    p.add_argument("--log-format", choices=("json", "console"), default="console")
    p.add_argument("--log-level", default="INFO")
    p.add_argument("--print-config", action="store_true", help="print the effective config and exit")
    return p.parse_args(argv)


def build_config(args: argparse.Namespace) -> NamesrvConfig:
    props = load_properties(args.config) if args.config else {}
    return load_config(
        NamesrvConfig, props, listen_host=args.listen, listen_port=args.port, kv_config_path=args.kv_config_path
    )


async def serve(config: NamesrvConfig) -> None:
    controller = NamesrvController(config)
    await controller.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"NAMESRV READY {controller.addr}", file=sys.stderr, flush=True)
    await stop.wait()
    await controller.stop()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        config = build_config(args)
    except ConfigError as exc:
        print(f"rmq-namesrv: {exc}", file=sys.stderr)
        return 2
    if args.print_config:
        sys.stdout.write(format_config(config))
        return 0
    configure_logging(args.log_format, args.log_level)
    uvloop.run(serve(config))
    return 0


if __name__ == "__main__":
    sys.exit(main())
