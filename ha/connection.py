"""The master's end of one slave connection (RocketMQ's ``HAConnection``, reference §5.1-5.2).

:class:`HAConnection` is the asyncio protocol of one accepted socket. Its two halves keep RocketMQ's
names:

* :class:`ReadSocketService` turns the slave's offset reports into a **validated** acknowledgement. The
  first report is the slave's request (where to start). Every report must be at most the master's own
  max offset (apache/rocketmq#1155/#3015: any peer could otherwise fake acknowledgements and release
  SYNC_MASTER puts that no slave holds), later ones must never go backwards and never exceed what this
  connection has sent. A report that breaks a rule closes the connection, logged, before it can release
  anyone.
* :class:`WriteSocketService` is the task that streams the commit log: it starts where the slave asked
  (a slave reporting 0 joins at the beginning of the master's last file; a slave asking for bytes the
  master has already deleted is resynced from the oldest file still there, apache/rocketmq#3388; if
  retention deletes the next bytes while the slave lags, the connection is closed and the slave's
  reconnection gets the same treatment), sends
  ``header + up to ha_transfer_batch_size bytes`` from one file as one ``writelines`` of a zero-copy
  view of the mapped file, and sleeps on an event set by the commit log's growth listener, sending a
  heartbeat header when nothing was sent for ``ha_send_heartbeat_interval``. A put that leaves a whole
  transfer or more unsent (a batch) is sent from the growth listener itself, so the slave works on it while
  the master stores the rest of the read (SYNC_MASTER batches of 32: ~62k -> ~71-76k msg/s); smaller puts
  are left to the task, which coalesces those of one loop step. It stops sending while the
  transport's buffer is above its high-water mark (the slave is not reading), so what is queued per
  slave is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import TYPE_CHECKING, Any, cast

import structlog

from common.service import Service
from ha.errors import InvalidOffsetReportError
from ha.wire import TRANSFER_HEADER, OffsetReportDecoder

if TYPE_CHECKING:
    from ha.service import HAService

log = structlog.get_logger("pocketmq.ha")

_BURST = 16
"""Transfers sent back to back before yielding to the event loop (a slave catching up on a fast link
would otherwise keep the loop to itself)."""


def peer_name(transport: asyncio.BaseTransport) -> str:
    """``host:port`` of the other end of a socket transport."""
    peer = transport.get_extra_info("peername")
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer)


def set_nodelay(transport: asyncio.BaseTransport) -> None:
    """Disable Nagle: acknowledgements are 8 bytes and a SYNC_MASTER put waits for each one."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class ReadSocketService:
    """The read half of a slave connection: offset reports -> validated acknowledged offset."""

    def __init__(self, connection: HAConnection) -> None:
        self._connection = connection
        self._decoder = OffsetReportDecoder()
        #: the slave's first report (where it asked to start); -1 before it
        self.request_offset = -1
        #: the slave's last valid report; -1 before the first
        self.ack_offset = -1
        #: loop time of the last bytes read
        self.last_read_time = 0.0
        #: loop time the acknowledgement last reached the master's max offset (or of the first report)
        self.caught_up_time = 0.0

    def on_data(self, data: bytes) -> None:
        """Bytes read from the slave."""
        connection = self._connection
        now = connection.loop.time()
        self.last_read_time = now
        try:
            offset = self._decoder.feed(data)
        except InvalidOffsetReportError as exc:
            connection.close("invalid offset report", offset=exc.offset)
            return
        if offset is not None:
            self._on_report(offset, now)

    def _on_report(self, offset: int, now: float) -> None:
        connection = self._connection
        master_max = connection.service.store.max_phy_offset
        if offset > master_max:
            connection.close("slave acknowledged beyond the master's max offset", ack=offset, master_max=master_max)
            return
        if self.request_offset < 0:
            self.request_offset = self.ack_offset = offset
            self.caught_up_time = now
            connection.on_request(offset)
        else:
            if offset < self.ack_offset:
                connection.close("slave acknowledgement went backwards", ack=offset, previous=self.ack_offset)
                return
            sent = connection.write_service.sent_offset
            if offset > max(sent, self.request_offset):
                connection.close("slave acknowledged bytes never sent to it", ack=offset, sent=sent)
                return
            if offset == self.ack_offset:
                if offset >= master_max:
                    self.caught_up_time = now
                return
            self.ack_offset = offset
        if offset >= master_max:
            self.caught_up_time = now
        connection.service.on_ack(connection)


class WriteSocketService(Service):
    """The write half of a slave connection: the task streaming the commit log to it."""

    name = "ha-write"

    def __init__(self, connection: HAConnection) -> None:
        super().__init__()
        self._connection = connection
        service = connection.service
        self._store = service.store
        self._batch = service.config.ha_transfer_batch_size
        self._heartbeat = service.config.ha_send_heartbeat_interval
        self._file_size = service.store.config.mapped_file_size_commit_log
        #: offset of the next byte to send; -1 until the slave's first report
        self.next_transfer_from = -1
        #: everything before this was handed to the transport; -1 until the first report
        self.sent_offset = -1
        self.last_write_time = 0.0
        self._started = asyncio.Event()
        self.wakeup = asyncio.Event()

    def begin(self, request_offset: int) -> int:
        """Choose where to start for a slave whose first report was ``request_offset`` (seed 000 §3:
        0 -> the beginning of the master's last file; otherwise that offset; before the master's oldest
        file -> that file, loudly). Returns the start offset."""
        store = self._store
        if request_offset == 0:
            max_offset = store.max_phy_offset
            start = max(0, max_offset - max_offset % self._file_size)
        else:
            start = request_offset
        min_offset = store.min_phy_offset
        if start < min_offset:
            self._connection.log.error("slave asked for commit-log data the master has deleted; resyncing it "
                                       "from the oldest file (it will drop its older data)",
                                       requested=request_offset, master_min=min_offset)
            start = min_offset
        self.next_transfer_from = self.sent_offset = start
        self._connection.log.info("slave attached", requested=request_offset, start=start,
                                  master_max=store.max_phy_offset)
        self._started.set()
        self.wakeup.set()
        return start

    def interrupt(self) -> None:
        """Wake the task whatever it waits for (the connection closed)."""
        self._started.set()
        self.wakeup.set()

    async def run(self) -> None:
        connection = self._connection
        try:
            await self._stream()
        except asyncio.CancelledError:
            raise
        except Exception:
            connection.log.exception("replication sender failed")
        finally:
            connection.abort()
            connection.service.forget(connection)

    def on_growth(self, max_offset: int) -> None:
        """The commit log grew to ``max_offset``. A put that leaves a whole transfer (or more) unsent is
        sent from here at once, so that the slave works on it while the master goes on with the next
        request; smaller growth is left to the task, which coalesces the puts of one loop step."""
        if 0 <= self.next_transfer_from <= max_offset - self._batch and self._can_send():
            self._send_available(_BURST)
        self.wakeup.set()

    def _can_send(self) -> bool:
        connection = self._connection
        transport = connection.transport
        return (not connection.closed and transport is not None and not transport.is_closing()
                and connection.writable.is_set())

    def _send_available(self, limit: int) -> int:
        """Send up to ``limit`` transfers of what the slave does not have yet, stopping early when the
        transport pauses; returns how many were sent."""
        connection = self._connection
        transport = connection.transport
        assert transport is not None
        store = self._store
        batch = self._batch
        pack_header = TRANSFER_HEADER.pack
        writable = connection.writable
        sent = 0
        while sent < limit and writable.is_set():
            offset = self.next_transfer_from
            view = store.get_commit_log_data(offset, batch)
            if view is None:
                break
            size = len(view)
            transport.writelines((pack_header(offset, size), view))
            del view  # the transport keeps what it has not sent yet
            self.next_transfer_from = self.sent_offset = offset + size
            sent += 1
        if sent:
            self.last_write_time = connection.loop.time()
        return sent

    async def _stream(self) -> None:
        connection = self._connection
        await self._started.wait()  # the first report, or the connection closing
        transport = connection.transport
        if connection.closed or transport is None:
            return
        store = self._store
        loop = connection.loop
        wakeup = self.wakeup
        self.last_write_time = loop.time()
        # is_closing() turns true as soon as a send fails, before connection_lost() is delivered
        while not connection.closed and not transport.is_closing():
            if not connection.writable.is_set():
                await connection.writable.wait()
                continue
            wakeup.clear()
            if self._send_available(_BURST):
                await asyncio.sleep(0)  # a slave catching up must not keep the loop to itself
                continue
            offset = self.next_transfer_from
            min_offset = store.min_phy_offset
            if offset < min_offset:
                # Transfers on a connection are contiguous, so the jump needs a new connection: the slave
                # reconnects, reports its offset, and begin() starts it at the oldest file.
                connection.close("commit-log data for this slave was deleted while it lagged; it is resynced "
                                 "from the oldest file when it reconnects", offset=offset, master_min=min_offset)
                return
            deadline = self.last_write_time + self._heartbeat
            if loop.time() >= deadline:
                transport.write(TRANSFER_HEADER.pack(offset, 0))
                self.last_write_time = loop.time()
                continue
            try:
                async with asyncio.timeout_at(deadline):
                    await wakeup.wait()
            except TimeoutError:
                pass


class HAConnection(asyncio.Protocol):
    """One slave connection on the master (see module docstring)."""

    def __init__(self, service: HAService) -> None:
        self.service = service
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.address = "?"
        self.log: Any = log
        self.closed = False
        self.connected_time = 0.0
        #: set while the transport accepts more data (cleared by pause_writing)
        self.writable = asyncio.Event()
        self.writable.set()
        self.read_service = ReadSocketService(self)
        self.write_service = WriteSocketService(self)

    # ---------------------------------------------------------------------------------- protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it
        self.transport = tcp = cast(asyncio.Transport, transport)
        self.address = peer_name(tcp)
        self.log = log.bind(peer=self.address, role="master")
        self.connected_time = self.read_service.last_read_time = self.loop.time()
        if not self.service.register(self):
            self.closed = True
            self.write_service.interrupt()
            tcp.abort()
            return
        set_nodelay(tcp)
        high = self.service.config.write_buffer_high_water
        tcp.set_write_buffer_limits(high=high, low=high // 4)
        self.log.info("slave connected")
        self.write_service.start()

    def data_received(self, data: bytes) -> None:
        if not self.closed:
            self.read_service.on_data(data)

    def eof_received(self) -> bool:
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        was_open = not self.closed
        self.closed = True
        self.writable.set()
        self.write_service.interrupt()
        if was_open:
            self.log.info("slave disconnected", error=str(exc) if exc else None,
                          ack=self.read_service.ack_offset)
        self.service.on_connection_closed(self)

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()

    # ------------------------------------------------------------------------------------- state

    @property
    def ack_offset(self) -> int:
        """The slave's last validated acknowledgement (-1 before its first report)."""
        return self.read_service.ack_offset

    @property
    def is_attached(self) -> bool:
        """Open and the slave has reported at least once: its acknowledgements count."""
        return not self.closed and self.read_service.request_offset >= 0

    def on_request(self, offset: int) -> None:
        """The slave's first report arrived: start streaming."""
        self.write_service.begin(offset)

    def wake(self) -> None:
        """New commit-log data: let the sender look."""
        self.write_service.wakeup.set()

    def close(self, reason: str, **fields: Any) -> None:
        """Drop the connection because of a protocol or liveness violation (logged)."""
        if not self.closed:
            self.log.warning("closing slave connection: " + reason, **fields)
            self.abort()

    def abort(self) -> None:
        """Close at once, discarding unsent data (it is resent from the slave's offset next time)."""
        was_open = not self.closed
        self.closed = True
        self.writable.set()
        self.write_service.interrupt()
        if self.transport is not None:
            self.transport.abort()
        if was_open:
            self.service.on_connection_closed(self)
