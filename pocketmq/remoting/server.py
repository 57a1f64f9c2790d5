"""``RemotingServer``: accepts connections and serves registered request processors.

What a process gets from it: a handler table keyed by request code (unknown codes answered with
REQUEST_CODE_NOT_SUPPORTED), bounded connections (a connection over ``max_connections`` is closed at
once) and bounded in-flight requests per connection (answered SYSTEM_BUSY beyond it), idle connections
closed after ``idle_timeout`` by one periodic scan rather than a timer per connection, callbacks when a
connection closes (the name server forgets a broker, the broker forgets a client), and a graceful stop:
stop accepting, let in-flight requests finish within a grace period, then close.

A pre-dispatch hook (:meth:`RemotingServer.set_request_hook`, the broker's ACL) sees every request to a
registered code before its handler and may answer it instead. Without one the handler table is the handlers
themselves: the hook costs nothing when it is not set.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from pocketmq.common.logs import get_logger
from pocketmq.common.service import periodic
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection, Handler, HandlerResult
from pocketmq.remoting.frame import DEFAULT_MAX_FRAME_LENGTH

log = get_logger("pocketmq.remoting.server")

RequestHook = Callable[[RemotingCommand, Connection], RemotingCommand | None]
"""Called before a request's handler: None lets the handler run, a command is the answer instead."""


@dataclass(frozen=True, slots=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 0
    max_connections: int = 4096
    max_in_flight_per_connection: int = 4096
    max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH
    #: Connections silent for this long are closed (RocketMQ's serverChannelMaxIdleTimeSeconds).
    idle_timeout: float = 120.0


class RemotingServer:
    """An asyncio TCP server speaking the remoting protocol."""

    def __init__(self, config: ServerConfig, *, name: str = "remoting") -> None:
        self.config = config
        self.name = name
        self._handlers: dict[int, Handler] = {}
        self._raw_handlers: dict[int, Handler] = {}
        self._hook: RequestHook | None = None
        self._close_callbacks: list[Callable[[Connection], None]] = []
        self._connections: set[Connection] = set()
        self._server: asyncio.Server | None = None
        self._idle_scan = periodic(f"{name}-idle-scan", min(10.0, max(config.idle_timeout / 4, 0.05)),
                                   self._close_idle)
        self._address: tuple[str, int] | None = None

    # -- configuration --------------------------------------------------------------------------------

    def register(self, code: int, handler: Handler) -> None:
        """Serve request ``code`` with ``handler`` (replacing any earlier one)."""
        self._raw_handlers[int(code)] = handler
        self._handlers[int(code)] = handler if self._hook is None else _hooked(self._hook, handler)

    def set_request_hook(self, hook: RequestHook | None) -> None:
        """Run ``hook`` before every registered handler (None: remove it). The table connections share is
        updated in place, so it applies to connections already open too."""
        self._hook = hook
        for code, handler in self._raw_handlers.items():
            self._handlers[code] = handler if hook is None else _hooked(hook, handler)

    def on_connection_closed(self, callback: Callable[[Connection], None]) -> None:
        self._close_callbacks.append(callback)

    # -- lifecycle ------------------------------------------------------------------------------------

    async def start(self, *, serve: bool = True) -> None:
        """Bind (so :attr:`address` is known) and, unless ``serve`` is False, accept connections.

        A broker binds first to learn its port (for port 0), builds its store with that address, registers
        its processors, and only then calls :meth:`start_serving`.
        """
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._make_connection, self.config.host, self.config.port, reuse_address=True, start_serving=serve
        )
        sock = self._server.sockets[0]
        host, port = sock.getsockname()[:2]
        self._address = (host, port)
        self._idle_scan.start()
        log.info("server_listening", server=self.name, addr=self.addr)

    async def start_serving(self) -> None:
        if self._server is None:
            raise RuntimeError("server not bound: call start() first")
        await self._server.start_serving()

    @property
    def address(self) -> tuple[str, int]:
        if self._address is None:
            raise RuntimeError("server not started")
        return self._address

    @property
    def addr(self) -> str:
        host, port = self.address
        return f"{host}:{port}"

    @property
    def connections(self) -> frozenset[Connection]:
        return frozenset(self._connections)

    async def stop(self, grace: float = 5.0) -> None:
        """Stop accepting, let in-flight requests finish (at most ``grace`` s), close every connection."""
        if self._server is None:
            return
        self._server.close()
        await self._idle_scan.stop()
        conns = list(self._connections)
        for conn in conns:
            conn.release_parked()
        if conns:
            await asyncio.gather(*(c.wait_handlers(grace) for c in conns))
        for conn in conns:
            conn.cancel_handlers()
            conn.close()
        if conns:
            await asyncio.wait([asyncio.ensure_future(c.wait_closed()) for c in conns], timeout=grace)
        await self._server.wait_closed()
        self._server = None
        log.info("server_stopped", server=self.name)

    # -- internals ------------------------------------------------------------------------------------

    def _make_connection(self) -> Connection:
        conn = Connection(
            self._handlers,
            max_frame_length=self.config.max_frame_length,
            max_in_flight=self.config.max_in_flight_per_connection,
            on_close=self._closed,
        )
        if len(self._connections) >= self.config.max_connections:
            log.warning("connection_refused", server=self.name, reason="max_connections")
            conn.refuse = True
        self._connections.add(conn)
        return conn

    def _closed(self, conn: Connection) -> None:
        self._connections.discard(conn)
        for callback in self._close_callbacks:
            try:
                callback(conn)
            except Exception:
                log.exception("close_callback_failed", server=self.name, peer=conn.remote_addr)

    def _close_idle(self) -> None:
        """Close the connections silent for longer than ``idle_timeout`` (every quarter of it, at most 10 s)."""
        deadline = asyncio.get_running_loop().time() - self.config.idle_timeout
        for conn in list(self._connections):
            if conn.last_activity < deadline:
                log.info("idle_connection_closed", server=self.name, peer=conn.remote_addr)
                conn.close()


def _hooked(hook: RequestHook, handler: Handler) -> Handler:
    def guarded(request: RemotingCommand, conn: Connection) -> HandlerResult:
        answer = hook(request, conn)
        return handler(request, conn) if answer is None else answer

    return guarded
