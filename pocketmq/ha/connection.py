"""The master's end of one slave connection (RocketMQ's ``HAConnection``).

:class:`HAConnection` is the asyncio protocol of one accepted socket. It is given a
:class:`pocketmq.ha.ports.ReplicaHub` (to be registered, forgotten, and to report acknowledgements) and a read-only
:class:`pocketmq.ha.ports.CommitLogView`, never the service or the store. Its two halves keep RocketMQ's names:

* :class:`ReadSocketService` turns the slave's offset reports into a **validated** acknowledgement. The
  first report is the slave's request (where to start). Every report must be at most the master's own
  max offset (apache/rocketmq#1155, apache/rocketmq#3015: any peer could otherwise fake acknowledgements and release
  SYNC_MASTER puts that no slave holds), later ones must never go backwards and never exceed what this
  connection has sent. A report that breaks a rule closes the connection, logged, before it can release
  anyone. One exception: after an ABNORMAL start the master may have lost an unflushed tail that a slave
  still holds (power loss with ASYNC_FLUSH). Before serving, the broker takes that tail back from its
  longest slave (:mod:`pocketmq.broker.tail_recovery`) and moves the store's ``recovered_max`` (the max offset right
  after recovery) to the end it then holds; when that could not be done within ``haTailRecoveryTimeoutMs``
  (no slave answered), a slave whose first report is past ``recovered_max`` is sent from ``recovered_max``
  instead (``slave_ahead_of_master_recovery``): our slave cuts its log back there (:mod:`pocketmq.ha.client`) rather
  than keep records the master lost, at offsets it has since reused. Safe in every case, since the master holds
  every byte from ``recovered_max`` on; the cost, only after an abnormal start, is sending again what was
  written since the restart (bounded by that, and by retention) each time a slave that already had it
  reconnects: the master cannot tell such a slave from one still holding the lost tail. Until the slave
  has seen the rewind, a repeat of its old offset is ignored, not taken as an acknowledgement. A Java
  slave sees an offset mismatch and reconnects forever: it refuses instead of diverging. Without
  ``recovered_max`` (a clean start flushed everything) a report past the master's max still closes the
  connection (``ack_beyond_master_max``).
* :class:`WriteSocketService` is the task that streams the commit log: it starts where the slave asked
  (a slave reporting 0 joins at the beginning of the master's last file; a slave asking for bytes the
  master has already deleted is resynced from the oldest file still there, apache/rocketmq#3388; if
  retention deletes the next bytes while the slave lags, the connection is closed and the slave's
  reconnection gets the same treatment), sends
  transfers of ``header + up to ha_transfer_batch_size bytes`` from one file, zero-copy views of the mapped
  file, those of one burst (up to the high-water mark) in one ``writelines`` (one system call per SYNC
  batch instead of one per 32 KiB), and sleeps on an event set by the commit log's growth listener, sending a
  heartbeat header when nothing was sent for ``ha_send_heartbeat_interval``. A put that leaves a whole
  transfer or more unsent (a batch) is sent from the growth listener itself, so the slave works on it while
  the master stores the rest of the read (docs/design/decisions.md); smaller puts
  are left to the task, which coalesces those of one loop step. It stops sending while the
  transport's buffer is above its high-water mark (the slave is not reading), so what is queued per
  slave is bounded.

A connection ends one way, :meth:`HAConnection.close`, whichever side notices first (a rule broken, the
slave silent, the socket lost, the sender stopping, shutdown): the sender is woken to stop, the socket is
aborted, the hub forgets the connection, once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, cast

from pocketmq.common.logs import get_logger
from pocketmq.common.service import Service
from pocketmq.ha.config import HAConfig
from pocketmq.ha.errors import InvalidOffsetReportError
from pocketmq.ha.ports import CommitLogView, ReplicaHub
from pocketmq.ha.sockets import peer_name, set_nodelay
from pocketmq.ha.wire import TRANSFER_HEADER, OffsetReportDecoder

log = get_logger("pocketmq.ha.connection")

_BURST = 16
"""Transfers sent back to back before yielding to the event loop (a slave catching up on a fast link
would otherwise keep the loop to itself)."""


class ReadSocketService:
    """The read half of a slave connection: offset reports -> validated acknowledged offset."""

    def __init__(self, connection: HAConnection, commit_log: CommitLogView,
                 acknowledged: Callable[[int], None]) -> None:
        self._connection = connection
        self._commit_log = commit_log
        self._acknowledged = acknowledged
        self._decoder = OffsetReportDecoder()
        #: the slave's first report (where it asked to start); -1 before it
        self.request_offset = -1
        #: the slave's last valid report; -1 before the first
        self.ack_offset = -1
        #: loop time of the last bytes read
        self.last_read_time = 0.0
        #: loop time the acknowledgement last reached the master's max offset (or of the first report)
        self.caught_up_time = 0.0
        #: the slave's first report when it was past the master's recovery point: ignored until it changes
        self._stale_report = -1

    def on_data(self, data: bytes) -> None:
        """Bytes read from the slave."""
        connection = self._connection
        now = connection.loop.time()
        self.last_read_time = now
        try:
            offset = self._decoder.feed(data)
        except InvalidOffsetReportError as exc:
            connection.close("invalid_offset_report", fault=True, offset=exc.offset)
            return
        if offset is not None:
            self._on_report(offset, now)

    def _on_report(self, offset: int, now: float) -> None:
        connection = self._connection
        if offset == self._stale_report:
            return  # the slave has not yet seen the rewind to the master's recovery point
        self._stale_report = -1
        master_max = self._commit_log.max_phy_offset
        if self.request_offset < 0:
            recovered = self._commit_log.recovered_max
            if recovered is not None and offset > recovered:
                connection.log.warning("slave_ahead_of_master_recovery", reported=offset, recovered_max=recovered,
                                       master_max=master_max)
                self._stale_report, offset = offset, recovered
        if offset > master_max:
            connection.close("ack_beyond_master_max", fault=True, reported=offset, master_max=master_max)
            return
        if self.request_offset < 0:
            self.request_offset = self.ack_offset = offset
            self.caught_up_time = now
            connection.write_service.begin(offset, announce=self._stale_report >= 0)
        else:
            if offset < self.ack_offset:
                connection.close("ack_went_backwards", fault=True, reported=offset)
                return
            sent = connection.write_service.sent_offset
            if offset > max(sent, self.request_offset):
                connection.close("ack_beyond_sent", fault=True, reported=offset, sent=sent)
                return
            if offset == self.ack_offset:
                if offset >= master_max:
                    self.caught_up_time = now
                return
            self.ack_offset = offset
        if offset >= master_max:
            self.caught_up_time = now
        self._acknowledged(offset)


class WriteSocketService(Service):
    """The write half of a slave connection: the task streaming the commit log to it."""

    name = "ha-write"

    def __init__(self, connection: HAConnection, commit_log: CommitLogView, config: HAConfig) -> None:
        super().__init__()
        self._connection = connection
        self._commit_log = commit_log
        self._batch = config.ha_transfer_batch_size
        self._heartbeat = config.ha_send_heartbeat_interval
        self._file_size = commit_log.config.mapped_file_size_commit_log
        #: offset of the next byte to send (RocketMQ's ``nextTransferFromWhere``): everything before it was
        #: handed to the transport; -1 until the slave's first report
        self.sent_offset = -1
        self.last_write_time = 0.0
        #: send a heartbeat header at once when there is no data (the slave must learn of a rewind)
        self._announce = False
        self._started = asyncio.Event()
        self.wakeup = asyncio.Event()

    def begin(self, request_offset: int, *, announce: bool = False) -> int:
        """Choose where to start for a slave whose first report was ``request_offset`` (as RocketMQ's
        ``HAConnection`` does: 0 -> the beginning of the master's last file; otherwise that offset; before the
        master's oldest
        file -> that file, loudly). Returns the start offset. ``announce``: the slave is ahead of that
        start, so tell it at once (a heartbeat header when there is nothing to send yet)."""
        commit_log = self._commit_log
        if request_offset == 0:
            max_offset = commit_log.max_phy_offset
            start = max(0, max_offset - max_offset % self._file_size)
        else:
            start = request_offset
        min_offset = commit_log.min_phy_offset
        connection_log = self._connection.log
        if start < min_offset:
            # the slave drops its older data when it is sent the oldest file
            connection_log.error("slave_resynced_from_oldest_file", requested=request_offset, master_min=min_offset)
            start = min_offset
        self.sent_offset = start
        self._announce = announce
        connection_log.info("slave_attached", requested=request_offset, start=start,
                            master_max=commit_log.max_phy_offset)
        self._started.set()
        self.wakeup.set()
        return start

    def interrupt(self) -> None:
        """Wake the task whatever it waits for (the connection closed)."""
        self._started.set()
        self.wakeup.set()

    async def run(self) -> None:
        connection = self._connection
        reason = "sender_stopped"
        try:
            await self._stream()
        except asyncio.CancelledError:
            raise
        except Exception:
            connection.log.exception("replication_sender_failed")
            reason = "sender_failed"
        finally:
            connection.close(reason)  # nothing happens when the connection closed first

    def on_growth(self, max_offset: int) -> None:
        """The commit log grew to ``max_offset``. A put that leaves a whole transfer (or more) unsent is
        sent from here at once, so that the slave works on it while the master goes on with the next
        request; smaller growth is left to the task, which coalesces the puts of one loop step."""
        if 0 <= self.sent_offset <= max_offset - self._batch and self._can_send():
            self._send_available(_BURST)
        self.wakeup.set()

    def _can_send(self) -> bool:
        connection = self._connection
        transport = connection.transport
        return (not connection.closed and transport is not None and not transport.is_closing()
                and connection.writable.is_set())

    def _send_available(self, limit: int) -> int:
        """Send up to ``limit`` transfers of what the slave does not have yet, as one ``writelines`` (one
        system call for a whole batch rather than one per transfer), no more than the transport's high-water
        mark per call; returns how many were sent."""
        connection = self._connection
        transport = connection.transport
        assert transport is not None
        if not connection.writable.is_set():
            return 0
        read = self._commit_log.get_commit_log_data
        batch = self._batch
        pack_header = TRANSFER_HEADER.pack
        room = connection.high_water  # the transport pauses us above it: at most twice that is queued
        parts: list[bytes | memoryview] = []
        offset = self.sent_offset
        sent = 0
        while sent < limit and room > 0:
            view = read(offset, batch)
            if view is None:
                break
            size = len(view)
            parts.append(pack_header(offset, size))
            parts.append(view)
            offset += size
            room -= size
            sent += 1
        if sent:
            transport.writelines(parts)
            parts.clear()  # the transport keeps what it has not sent yet
            self.sent_offset = offset
            self.last_write_time = connection.loop.time()
        return sent

    async def _stream(self) -> None:
        connection = self._connection
        await self._started.wait()  # the first report, or the connection closing
        transport = connection.transport
        if connection.closed or transport is None:
            return
        commit_log = self._commit_log
        loop = connection.loop
        wakeup = self.wakeup
        self.last_write_time = loop.time() - (self._heartbeat if self._announce else 0.0)
        # is_closing() turns true as soon as a send fails, before connection_lost() is delivered
        while not connection.closed and not transport.is_closing():
            if not connection.writable.is_set():
                await connection.writable.wait()
                continue
            wakeup.clear()
            if self._send_available(_BURST):
                await asyncio.sleep(0)  # a slave catching up must not keep the loop to itself
                continue
            offset = self.sent_offset
            min_offset = commit_log.min_phy_offset
            if offset < min_offset:
                # Transfers on a connection are contiguous, so the jump needs a new connection: the slave
                # reconnects, reports its offset, and begin() starts it at the oldest file.
                connection.close("data_deleted_while_lagging", fault=True, offset=offset, master_min=min_offset)
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

    def __init__(self, hub: ReplicaHub[HAConnection], commit_log: CommitLogView, config: HAConfig) -> None:
        self._hub = hub
        self.high_water = config.write_buffer_high_water
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.address = "?"
        self.log: Any = log
        self.closed = False
        #: set while the transport accepts more data (cleared by pause_writing)
        self.writable = asyncio.Event()
        self.writable.set()
        self.read_service = ReadSocketService(self, commit_log, hub.acknowledged)
        self.write_service = WriteSocketService(self, commit_log, config)

    # ---------------------------------------------------------------------------------- protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it
        self.transport = tcp = cast(asyncio.Transport, transport)
        self.address = peer_name(tcp)
        self.log = log.bind(peer=self.address, role="master")
        self.read_service.last_read_time = self.loop.time()
        if not self._hub.register(self):
            self.close("refused")
            return
        set_nodelay(tcp)
        tcp.set_write_buffer_limits(high=self.high_water, low=self.high_water // 4)
        self.log.info("slave_connected")
        self.write_service.start()

    def data_received(self, data: bytes) -> None:
        if not self.closed:
            self.read_service.on_data(data)

    def eof_received(self) -> bool:
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.close("disconnected", error=str(exc) if exc else None)

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

    # ----------------------------------------------------------------------------------- closing

    def close(self, reason: str, *, fault: bool = False, **fields: Any) -> None:
        """End the connection (the one close path, see module docstring): the sender stops, the socket is
        aborted (unsent data is sent again from the slave's offset next time), the hub forgets it. Only the
        first call does anything; ``fault`` logs it as a warning (the slave broke a rule or went silent). The log
        line carries ``ack``, the last valid acknowledgement, next to ``fields``."""
        if self.closed:
            return
        self.closed = True
        self.writable.set()
        self.write_service.interrupt()
        if self.transport is not None:
            self.transport.abort()
        self._hub.forget(self)
        report = self.log.warning if fault else self.log.info
        report("slave_connection_closed", reason=reason, ack=self.read_service.ack_offset, **fields)

    async def shutdown(self) -> None:
        """Close (if still open) and wait until the sender task is gone."""
        self.close("shutdown")
        await self.write_service.stop()
