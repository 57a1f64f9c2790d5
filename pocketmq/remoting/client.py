"""``RemotingClient``: one reused connection per address, requests matched by ``opaque``.

* A connection is made on first use and shared by every caller; concurrent first callers share one
  connect attempt. When it drops, its pending requests fail with ``RemotingClosedError`` and the next
  call reconnects.
* Every request has its own timeout (``RemotingTimeoutError``); oneway requests are never answered.
* Requests the peer sends us (``NOTIFY_CONSUMER_IDS_CHANGED`` from a broker) go to handlers registered
  with :meth:`RemotingClient.register`, exactly as on a server.
* ``before_request`` (an ACL signer) sees every request sent on every connection, just before it is written.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection, Handler
from pocketmq.remoting.errors import RemotingConnectError
from pocketmq.remoting.frame import DEFAULT_MAX_FRAME_LENGTH

MAX_LOST = 1024
"""Addresses remembered as lost at once (for :meth:`RemotingClient.silent_peers`)."""
#: Seconds before a peer that answered "not serving" is noted again (:meth:`RemotingClient.note_refusal`).
REFUSAL_RENEW = 30.0


def split_addr(addr: str) -> tuple[str, int]:
    """``"host:port"`` (or ``"[v6]:port"``) to ``(host, port)``."""
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"bad address {addr!r}: expected host:port")
    return host.strip("[]"), int(port)


class RemotingClient:
    """A pool of one connection per peer address."""

    def __init__(
        self,
        *,
        connect_timeout: float = 3.0,
        max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
        max_pending_per_connection: int = 65536,
        before_request: Callable[[RemotingCommand], None] | None = None,
    ) -> None:
        self.connect_timeout = connect_timeout
        self.before_request = before_request
        self.max_frame_length = max_frame_length
        self.max_pending_per_connection = max_pending_per_connection
        self._handlers: dict[int, Handler] = {}
        self._connections: dict[str, Connection] = {}
        self._connecting: dict[str, asyncio.Future[Connection]] = {}
        #: address -> when its connection closed, or could not be made (bounded: :data:`MAX_LOST`)
        self._lost: dict[str, float] = {}
        #: address -> when it last answered that it is not serving (bounded: :data:`MAX_LOST`)
        self._refusing: dict[str, float] = {}
        self._closed = False

    def register(self, code: int, handler: Handler) -> None:
        """Serve requests the peer sends us with ``code``."""
        self._handlers[int(code)] = handler

    async def invoke(self, addr: str, request: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        """Send ``request`` to ``addr`` and wait for its response."""
        conn = self._connections.get(addr)
        if conn is None or conn.is_closed:
            conn = await self.connection(addr)
        return await conn.request(request, timeout)

    async def invoke_oneway(self, addr: str, request: RemotingCommand) -> None:
        """Send a oneway request (flag bit 1 set): no response is expected or sent."""
        request.flag |= 2
        conn = self._connections.get(addr)
        if conn is None or conn.is_closed:
            conn = await self.connection(addr)
        await conn.oneway(request)

    async def connection(self, addr: str) -> Connection:
        """The live connection to ``addr``, connecting (once, shared by concurrent callers) if needed."""
        if self._closed:
            raise RemotingConnectError("client is closed")
        conn = self._connections.get(addr)
        if conn is not None and not conn.is_closed:
            return conn
        pending = self._connecting.get(addr)
        if pending is None:
            pending = asyncio.ensure_future(self._connect(addr))
            self._connecting[addr] = pending
            pending.add_done_callback(lambda _f: self._connecting.pop(addr, None))
        return await asyncio.shield(pending)

    def close_connection(self, addr: str) -> None:
        conn = self._connections.pop(addr, None)
        if conn is not None:
            conn.close()

    @property
    def addresses(self) -> list[str]:
        return [a for a, c in self._connections.items() if not c.is_closed]

    def silent_peers(self, threshold: float, lost_within: float = 0.0) -> set[str]:
        """Addresses that have left a request of ours unanswered, saying nothing at all, for over ``threshold``
        seconds (a frozen or cut-off peer; see :meth:`Connection.unanswered_for`), and those whose connection closed
        or could not be made, or that answered they are not serving (:meth:`note_refusal`), less than
        ``lost_within`` seconds ago."""
        silent = {a for a, c in self._connections.items() if not c.is_closed and c.unanswered_for() > threshold}
        if lost_within > 0 and (self._lost or self._refusing):
            now = time.monotonic()
            silent.update(a for a, at in self._lost.items() if now - at < lost_within and a not in self._connections)
            silent.update(a for a, at in self._refusing.items() if now - at < lost_within)
        return silent

    def note_refusal(self, addr: str) -> None:
        """``addr`` answered SERVICE_NOT_AVAILABLE: a slave, or a master of controller mode that stepped down or is
        fenced. It answers, so neither the wait nor the connection gives it away, but a route naming it as a master
        is stale: another replica has registered, or is about to, as the master of a newer epoch. A peer that keeps
        refusing (a full disk) is noted again only :data:`REFUSAL_RENEW` seconds after, so what asks again because of
        it stops after a while instead of asking as long as it refuses."""
        at = self._refusing.get(addr)
        if at is None or time.monotonic() - at >= REFUSAL_RENEW:
            _note(self._refusing, addr)

    def _note_lost(self, addr: str) -> None:
        _note(self._lost, addr)

    async def close(self) -> None:
        self._closed = True
        conns = list(self._connections.values())
        self._connections.clear()
        for conn in conns:
            conn.close()
        for conn in conns:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(conn.wait_closed(), 1.0)

    async def _connect(self, addr: str) -> Connection:
        try:
            host, port = split_addr(addr)
        except ValueError as exc:
            raise RemotingConnectError(str(exc)) from None
        loop = asyncio.get_running_loop()

        def factory() -> Connection:
            conn = Connection(
                self._handlers,
                max_frame_length=self.max_frame_length,
                max_pending=self.max_pending_per_connection,
                on_close=lambda c: self._forget(addr, c),
            )
            conn.before_request = self.before_request
            conn.on_not_serving = lambda: self.note_refusal(addr)
            return conn

        try:
            _, conn = await asyncio.wait_for(loop.create_connection(factory, host, port), self.connect_timeout)
            # uvloop may return before connection_made has run: wait for it.
            await asyncio.wait_for(conn.made, self.connect_timeout)
        except (TimeoutError, OSError) as exc:
            self._note_lost(addr)
            raise RemotingConnectError(f"cannot connect to {addr}: {exc or 'timeout'}") from None
        self._connections[addr] = conn
        return conn

    def _forget(self, addr: str, conn: Connection) -> None:
        if self._connections.get(addr) is conn:
            del self._connections[addr]
            if not self._closed:
                self._note_lost(addr)


def _note(table: dict[str, float], addr: str) -> None:
    """``table[addr]`` = now, the table bounded by :data:`MAX_LOST` (its oldest half dropped when full)."""
    if len(table) >= MAX_LOST:
        for old in sorted(table, key=table.__getitem__)[:MAX_LOST // 2]:
            del table[old]
    table[addr] = time.monotonic()
