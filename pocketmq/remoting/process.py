"""Running one PocketMQ server process: start, announce readiness, stop cleanly on SIGTERM/SIGINT.

Shared by ``rmq-namesrv`` and ``rmq-broker``: the flags every server takes (:func:`add_server_arguments`)
and the run itself (:func:`run_main`). The readiness line (``<PREFIX> READY host:port`` on stderr) is
printed once the process serves requests, so scripts and tests can start it with port 0 and read the
address it bound. A start that fails is logged (``server_start_failed``, with the reason) and the process exits
with status 1 (a configuration error found at start: one line, status 2); a fatal signal (SIGBUS from a mapped
page the disk cannot back, SIGSEGV) prints the Python stack of every thread on stderr before the process dies
(``faulthandler``), so a death always says where it happened.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import gc
import signal
import sys
from collections.abc import Callable
from typing import Protocol, TypeVar

import uvloop

from pocketmq.common.config import ConfigError
from pocketmq.common.logs import LogFormat, configure_logging, get_logger

ConfigT = TypeVar("ConfigT")


log = get_logger("pocketmq.remoting.process")

GC_THRESHOLDS = (100_000, 50, 100)
"""The servers' cyclic-GC thresholds (young, middle, old), see :func:`serve`."""


class Controller(Protocol):
    @property
    def addr(self) -> str: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class StartFailed(Exception):
    """The controller's start raised (already logged)."""


async def serve(controller: Controller, ready_prefix: str) -> None:
    try:
        await controller.start()
    except ConfigError:
        raise  # the caller says it in one line
    except Exception as exc:
        log.error("server_start_failed", error=str(exc) or type(exc).__name__, error_type=type(exc).__name__,
                  exc_info=True)
        raise StartFailed from exc
    # Start-up objects live for the whole run: freeze them so full collections do not rescan them
    # (long pauses on the hot paths otherwise). Almost everything a request allocates is freed by
    # reference counting, so the cyclic collector runs far less often than Python's default (a young
    # collection every 700 allocations, i.e. every few sends); docs/design/decisions.md has the figures.
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # One write with its newline: print() writes the text and the newline apart, and a log line from another
    # thread (the store's executors log too) could land between them and break the readiness line.
    sys.stderr.write(f"{ready_prefix} READY {controller.addr}\n")
    sys.stderr.flush()
    await stop.wait()
    await controller.stop()


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the flags every server process takes after its own: metrics, logging, ``--print-config``."""
    parser.add_argument("--metrics-port", type=int, help="serve Prometheus metrics on this port (0 picks one)")
    parser.add_argument("--log-format", choices=("json", "console"), default="console")
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument("--print-config", action="store_true", help="print the effective config and exit")


def run_main(prog: str, args: argparse.Namespace, build: Callable[[argparse.Namespace], ConfigT],
             make: Callable[[ConfigT], Controller], *, ready_prefix: str,
             format_config: Callable[[ConfigT], str]) -> int:
    """Build the config from ``args`` (parsed with :func:`add_server_arguments`'s flags; exit 2 with a clear
    message when it is invalid), print it and exit for ``--print-config``, else serve until signalled."""
    try:
        config = build(args)
    except ConfigError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    if args.print_config:
        sys.stdout.write(format_config(config))
        return 0
    log_format: LogFormat = args.log_format
    configure_logging(log_format, args.log_level)
    faulthandler.enable()
    try:
        uvloop.run(serve(make(config), ready_prefix))
    except ConfigError as exc:  # found at start (an ACL file that is missing or invalid): no traceback
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    except StartFailed:
        return 1
    return 0
