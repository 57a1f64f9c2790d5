"""Running one PocketMQ server process: start, announce readiness, stop cleanly on SIGTERM/SIGINT.

Shared by ``rmq-namesrv`` and ``rmq-broker``. The readiness line (``<PREFIX> READY host:port`` on stderr)
is printed once the process serves requests, so scripts and tests can start it with port 0 and read the
address it bound.
"""

from __future__ import annotations

import asyncio
import gc
import signal
import sys
from collections.abc import Callable
from typing import Protocol, TypeVar

import uvloop

from remoting.config import ConfigError
from remoting.logs import LogFormat, configure_logging

ConfigT = TypeVar("ConfigT")


class Controller(Protocol):
    @property
    def addr(self) -> str: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


async def serve(controller: Controller, ready_prefix: str) -> None:
    await controller.start()
    # Start-up objects live for the whole run: freeze them so full collections do not rescan them
    # (10-30 ms pauses on the hot paths otherwise).
    gc.collect()
    gc.freeze()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"{ready_prefix} READY {controller.addr}", file=sys.stderr, flush=True)
    await stop.wait()
    await controller.stop()


def run_main(prog: str, build: Callable[[], ConfigT], make: Callable[[ConfigT], Controller], *, ready_prefix: str,
             print_config: Callable[[ConfigT], str] | None, log_format: LogFormat, log_level: str) -> int:
    """Build the config (exit 2 with a clear message when it is invalid), print it and exit when
    ``print_config`` is given, else serve until signalled."""
    try:
        config = build()
    except ConfigError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    if print_config is not None:
        sys.stdout.write(print_config(config))
        return 0
    configure_logging(log_format, log_level)
    uvloop.run(serve(make(config), ready_prefix))
    return 0
