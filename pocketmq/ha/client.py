"""The slave's end of replication (RocketMQ's ``HAClient``).

:class:`HAClient` is a service whose loop keeps one connection to the master's HA address (configured,
set with :meth:`HAClient.update_master_address` when the broker learns it from the name server, or
asked from a provider before each attempt), reconnecting with capped exponential backoff.

On each connection the slave reports its max commit-log offset at once, at the end of every read that
appended bytes and within a read after every ``_REPORT_EVERY`` bytes appended (a read may carry several
batches, and the master can answer SYNC_MASTER puts as soon as their part is acknowledged; one report per
32 KiB transfer cost a system call here and a wake-up on the master for nothing, the master keeping only the
last report it reads), and every ``ha_send_heartbeat_interval`` otherwise; it drops a master
it has heard nothing from for ``ha_housekeeping_interval``. The socket reads straight into the
:class:`pocketmq.ha.wire.TransferDecoder`'s bounded buffer and each transfer body goes to the store's
``append_to_commit_log`` as a view of that buffer (one copy, socket buffer -> mapped file). The store is
seen through :class:`pocketmq.ha.ports.SlaveLog`: append, index, restart at a file boundary, and its bounds.

Nothing here blocks the event loop on the disk. Before a transfer is appended the store says whether its
bytes are reserved (``commit_log_room``); when the slave's window is behind (a master faster than the slave's
allocation thread, or a file still being made) the link stops reading from the socket and a task awaits the
store (``wait_commit_log_room``), so the master's sends back up in TCP instead; the dispatch likewise stops at
a record whose consume queue needs a file or room and awaits ``prepare_dispatch``. While the disk is full the
wait is retried every second, said once in the log, and nothing is written (no torn record); the link keeps
reporting its offset, so the master keeps it, and it catches up once space returns.

An acknowledgement means what it means in RocketMQ: the bytes are in the slave's commit log. The records
are checked and dispatched to the consume queues right after, once per read (``dispatch_replicated``), so
the master's wait does not include the slave's per-record work (docs/design/decisions.md has the figures). Bytes
that turn out
not to be valid records (damaged in transit) are cut and the slave reconnects from its last valid record;
the master still holds them and sends them again.

Every transfer must start at the slave's own max offset. Two exceptions are part of the protocol: a slave
with an empty log that reported 0 is sent the master's last file, and a slave that asked for bytes the
master has already deleted is sent the master's oldest file; in both cases the transfer starts at a
file boundary beyond the slave's max offset, and the slave restarts its commit log there with the store's
``reset_commit_log(offset)`` (logged loudly when that drops data). A third: a master that restarted
abnormally with a shorter log than ours (it lost an unflushed tail we hold) first takes that tail from us
(``broker.tail_recovery``: GET_COMMIT_LOG_TAIL on our broker port), so its log normally ends where ours does;
only when it could not (we did not answer within its ``haTailRecoveryTimeoutMs``) does it send from the end of
its recovered log, below our max offset; at a record we hold (at or past our min offset) our commit log and
consume queues are cut back there with the store's ``truncate_commit_log`` (``commit_log_truncated_to_master``,
logged loudly with the bytes dropped: records the master lost, at offsets it has since reused), reading
stopped meanwhile, and replication goes on. Any other mismatch closes the connection, and the next one
reports the slave's real offset.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any, cast

from pocketmq.common.logs import get_logger
from pocketmq.common.service import Service
from pocketmq.ha.config import HAConfig, parse_address
from pocketmq.ha.errors import HAProtocolError
from pocketmq.ha.ports import SlaveLog
from pocketmq.ha.sockets import peer_name, set_nodelay
from pocketmq.ha.wire import Transfer, TransferDecoder, encode_offset_report

log = get_logger("pocketmq.ha.client")

AddressProvider = Callable[[], str | None]
"""Returns the master's HA address (``host:port``) or None when there is no master now."""

_SPACE_RETRY_S = 1.0
"""While the slave's store cannot make room (a full disk), how often it tries again."""

_REPORT_EVERY = 256 * 1024
"""Within one read, report the offset again once this many bytes were appended since the last report (and
at the end of the read): a read of several SYNC_MASTER batches releases the first ones before the rest is
applied, while a batch sent as eight 32 KiB transfers costs one report (one system call here, one wake-up
and one acknowledgement on the master), not eight."""

_REPORT_BACKLOG_LIMIT = 64 * 1024
"""Skip an offset report while this much is already queued toward the master (it is not reading; the next
report supersedes this one anyway)."""


class _MasterLink(asyncio.BufferedProtocol):
    """One connection to the master: the socket reads into the transfer decoder's buffer; each transfer is
    checked, appended and acknowledged, and what one read appended is indexed after."""

    def __init__(self, store: SlaveLog, config: HAConfig, address: str) -> None:
        self._store = store
        self._file_size = store.config.mapped_file_size_commit_log
        self.address = address
        self.loop = asyncio.get_running_loop()
        self.decoder = TransferDecoder(config.slave_read_buffer_size)
        self.transport: asyncio.Transport | None = None
        self.closed: asyncio.Future[None] = self.loop.create_future()
        self.last_read_time = self.loop.time()
        self.last_report_time = 0.0
        #: bytes appended on this connection
        self.appended = 0
        self.log: Any = log.bind(master=address, role="slave")
        #: reading stopped by ``HAClient.pause`` (the store's waits do not resume it)
        self.user_paused = False
        #: True while the store cannot make room (a full disk): logged once per episode
        self.waiting_for_space = False
        self._held: Transfer | None = None
        self._waiter: asyncio.Task[None] | None = None
        #: the cut of our log back to the master's offset, to await before the held transfer
        self._cut: Coroutine[Any, Any, None] | None = None

    @property
    def waiting(self) -> bool:
        """True while reading is stopped for the store to make room."""
        return self._waiter is not None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it
        self.transport = cast(asyncio.Transport, transport)
        self.address = peer_name(transport)
        set_nodelay(transport)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.decoder.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self.last_read_time = self.loop.time()
        try:
            self.decoder.buffer_updated(nbytes)
        except HAProtocolError as exc:
            self.log.error("bad_data_from_master", error=str(exc))
            self.close()
            return
        self._drain()

    def _drain(self) -> None:
        """Append (and acknowledge) every complete transfer received, then index what they appended. Where the
        store must first make a file or reserve room (its window is behind a fast master), reading stops and a
        task waits for the store's allocation thread; the master's sends then back up in TCP. Never blocks."""
        decoder = self.decoder
        appended = reported = self.appended
        try:
            while (transfer := self._held or decoder.next_transfer()) is not None:
                self._held = None
                applied = self._apply(transfer)
                if applied is None:
                    self._held = transfer  # a view of the decoder's buffer: valid while reading is paused
                    cut, self._cut = self._cut, None
                    self._wait(cut or self._store.wait_commit_log_room(transfer.from_offset, len(transfer.body)))
                    break
                if not applied:
                    self.close()
                    return
                if self.appended - reported >= _REPORT_EVERY:
                    reported = self.appended
                    self.report()
        except HAProtocolError as exc:
            self.log.error("bad_data_from_master", error=str(exc))
            self.close()
            return
        if self.appended != reported:
            self.report()
        if (self.appended != appended or self._store.dispatch_waiting) and not self._dispatch():
            self.close()
            return
        if self._store.dispatch_waiting and self._waiter is None:
            self._wait(self._store.prepare_dispatch())

    def _wait(self, waiting: Coroutine[Any, Any, None]) -> None:
        """Stop reading until ``waiting`` (the store making room) is done, then go on with what is buffered."""
        if self.transport is not None and not self.transport.is_closing():
            self.transport.pause_reading()
        if self._waiter is not None:  # already waiting (for the other kind of room): this one comes after
            waiting.close()
            return
        self._waiter = self.loop.create_task(self._resume_after(waiting))
        # A task cancelled before its first step (the link closing, the loop shutting down) never awaits
        # ``waiting``: close it then (a no-op once it ran), or Python warns it was never awaited.
        self._waiter.add_done_callback(lambda _task: waiting.close())

    async def _resume_after(self, waiting: Coroutine[Any, Any, None]) -> None:
        try:
            await self._store_room(waiting)
        except Exception:  # a bug rather than the disk: start over on a new connection
            self.log.exception("slave_store_wait_failed")
            self.close()
            return
        self._waiter = None
        if self.closed.done():
            return
        self.last_read_time = self.loop.time()  # we chose not to read: that was no silence of the master's
        self._drain()
        if self._waiter is None and not self.user_paused and self.transport is not None \
                and not self.transport.is_closing():
            self.transport.resume_reading()

    async def _store_room(self, waiting: Coroutine[Any, Any, None]) -> None:
        """Await the store's room, retrying while the disk is full."""
        while True:
            try:
                await waiting
                break
            except OSError as exc:
                # A full disk (or a file that cannot be made): nothing was written for these bytes. Said once;
                # the wait is retried until space returns, reporting our offset meanwhile so the master keeps us.
                if not self.waiting_for_space:
                    self.waiting_for_space = True
                    self.log.error("slave_store_cannot_reserve_replication_paused", error=str(exc),
                                   max_offset=self._store.max_phy_offset)
                await asyncio.sleep(_SPACE_RETRY_S)
                waiting = self._retry_wait()
        if self.waiting_for_space:
            self.waiting_for_space = False
            self.log.warning("slave_store_space_back_replication_resumed", max_offset=self._store.max_phy_offset)

    def _retry_wait(self) -> Coroutine[Any, Any, None]:
        held = self._held
        if held is not None:
            return self._store.wait_commit_log_room(held.from_offset, len(held.body))
        return self._store.prepare_dispatch()

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)

    def report(self) -> None:
        """Send the slave's max offset (skipped while the master is not reading)."""
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        self.last_report_time = self.loop.time()
        if transport.get_write_buffer_size() <= _REPORT_BACKLOG_LIMIT:
            transport.write(encode_offset_report(self._store.max_phy_offset))

    def close(self) -> None:
        """Close at once."""
        if self._waiter is not None:
            self._waiter.cancel()
            self._waiter = None
        if self.transport is not None:
            self.transport.abort()
        if not self.closed.done():
            self.closed.set_result(None)

    # ============================================================================ transfers

    def _apply(self, transfer: Transfer) -> bool | None:
        """Check and append one transfer; False closes the connection, None: the store must make room first
        (nothing done yet; the same transfer is applied again after)."""
        store = self._store
        offset = transfer.from_offset
        body = transfer.body
        if body and not store.commit_log_room(offset, len(body)):
            return None
        own = store.max_phy_offset
        if store.min_phy_offset <= offset < own:
            self._cut = self._truncate(offset, own)
            return None  # the same transfer is applied again once the log ends at ``offset``
        if offset != own:
            if not self._realign(offset, own):
                return False
            if body and not store.commit_log_room(offset, len(body)):
                return None  # the restarted log's first window
        if body:
            if not store.append_to_commit_log(offset, body, dispatch=False):
                self.log.error("replicated_data_refused", offset=offset, size=len(body),
                               max_offset=store.max_phy_offset)
                return False
            self.appended += len(body)
        return True

    def _dispatch(self) -> bool:
        """Check and index what the transfers of one read appended; False (reconnect) when it is not a valid
        commit log: the store keeps only the valid records, and the next connection reports that offset."""
        if self._store.dispatch_replicated():
            return True
        self.log.error("replicated_data_invalid", max_offset=self._store.max_phy_offset)
        return False

    async def _truncate(self, offset: int, own: int) -> None:
        """Cut our log back to ``offset`` where the master sends from (see the module docstring); the
        connection is closed when the store refuses (not a record start of ours) or fails."""
        try:
            done = await self._store.truncate_commit_log(offset)
        except OSError as exc:
            self.log.error("commit_log_truncation_failed", offset=offset, error=str(exc))
            done = False
        if not done:
            self.log.error("transfer_offset_mismatch", offset=offset, max_offset=own)
            self.close()
            return
        self.log.error("commit_log_truncated_to_master", offset=offset, max_offset=own, dropped_bytes=own - offset)

    def _realign(self, offset: int, own: int) -> bool:
        """The master sends from ``offset`` but our log ends at ``own``. Accept only a file boundary past
        our end (joining at the master's last file, or a resync after the master deleted the bytes we
        need), by restarting our commit log there."""
        store = self._store
        if offset < own or offset % self._file_size:
            self.log.error("transfer_offset_mismatch", offset=offset, max_offset=own)
            return False
        if own > store.min_phy_offset:
            # the master no longer has the bytes after ours: our log is discarded
            self.log.error("commit_log_resynced_from_master_oldest_file", offset=offset, max_offset=own,
                           min_offset=store.min_phy_offset)
        else:
            self.log.info("commit_log_joined_at_file_boundary", offset=offset)
        if not store.reset_commit_log(offset):
            self.log.error("commit_log_reset_failed", offset=offset)
            return False
        return store.max_phy_offset == offset


class HAClient(Service):
    """Slave side of replication (see module docstring). ``start()`` it after the store is started and
    ``await stop()`` it before the store shuts down."""

    name = "ha-client"

    def __init__(self, store: SlaveLog, config: HAConfig, *,
                 master_address: str | AddressProvider | None = None) -> None:
        super().__init__()
        self._store = store
        self.config = config
        self._provider: AddressProvider | None = None
        self._address: str | None = config.ha_master_address or None
        if callable(master_address):
            self._provider = master_address
        elif master_address:
            self._address = master_address
        if self._address:
            parse_address(self._address)
        self._changed = asyncio.Event()
        self._link: _MasterLink | None = None
        self._paused = False
        self._log = log.bind(role="slave")
        #: connections made so far (for runtime info and tests)
        self.connect_count = 0

    # ================================================================================ public API

    @property
    def master_address(self) -> str | None:
        """The master's HA address in use (None: no master known)."""
        return self._address

    @property
    def connected(self) -> bool:
        """True while a connection to the master is open."""
        link = self._link
        return link is not None and not link.closed.done()

    def update_master_address(self, address: str | None) -> None:
        """Use ``address`` (``host:port``; None or "" for no master) from now on; a connection to another
        address is closed. Cheap when nothing changed (call it after every name-server registration)."""
        address = address or None
        if address == self._address:
            return
        if address is not None:
            parse_address(address)
        self._log.info("master_address_changed", old=self._address, new=address)
        self._address = address
        if self._link is not None:
            self._link.close()
        self._changed.set()

    def pause(self) -> None:
        """Stop reading from the master (its sender then stalls once the socket buffers fill). Offset
        reports continue, so the master keeps the connection. For maintenance and fault tests."""
        self._paused = True
        link = self._link
        if link is not None:
            link.user_paused = True
        if link is not None and link.transport is not None and not link.transport.is_closing():
            link.transport.pause_reading()

    def resume(self) -> None:
        """Undo :meth:`pause`."""
        self._paused = False
        link = self._link
        if link is not None:
            link.user_paused = False
        if link is not None and not link.waiting and link.transport is not None and not link.transport.is_closing():
            link.transport.resume_reading()

    async def stop(self) -> None:
        """Close the connection and stop the loop."""
        if self._link is not None:
            self._link.close()
        await super().stop()

    def runtime_info(self) -> dict[str, str]:
        """Slave HA state for GET_BROKER_RUNTIME_INFO."""
        link = self._link
        now = asyncio.get_running_loop().time()
        return {
            "haMasterAddress": self._address or "",
            "haMasterConnected": str(self.connected).lower(),
            "haSlaveMaxOffset": str(self._store.max_phy_offset),
            "haMasterSilentMs": str(int((now - link.last_read_time) * 1000)) if self.connected and link else "-1",
            "haConnectCount": str(self.connect_count),
        }

    # ================================================================================ the loop

    def _current_address(self) -> str | None:
        if self._provider is not None:
            try:
                provided = self._provider() or None
            except Exception:
                self._log.exception("master_address_provider_failed")
                provided = self._address
            if provided != self._address:
                try:
                    self.update_master_address(provided)
                except ValueError as exc:
                    self._log.error("bad_master_address", error=str(exc))
        return self._address

    async def run(self) -> None:
        cfg = self.config
        backoff = cfg.reconnect_backoff_initial
        while True:
            self._changed.clear()
            address = self._current_address()
            if address is None:
                await self._pause_for(cfg.reconnect_backoff_max if self._provider else None)
                continue
            link = await self._connect(address)
            if link is not None:
                started = asyncio.get_running_loop().time()
                try:
                    await self._session(link)
                finally:
                    link.close()
                    self._link = None
                healthy = link.appended > 0 or asyncio.get_running_loop().time() - started >= \
                    cfg.ha_send_heartbeat_interval
                if healthy:
                    backoff = cfg.reconnect_backoff_initial
            if self._changed.is_set():
                continue
            await self._pause_for(backoff)
            backoff = min(backoff * 2, cfg.reconnect_backoff_max)

    async def _pause_for(self, seconds: float | None) -> None:
        """Sleep ``seconds`` (forever if None), cut short by an address change."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._changed.wait()

    async def _connect(self, address: str) -> _MasterLink | None:
        host, port = parse_address(address)
        loop = asyncio.get_running_loop()
        store, config = self._store, self.config
        try:
            async with asyncio.timeout(config.connect_timeout):
                _transport, link = await loop.create_connection(lambda: _MasterLink(store, config, address), host, port)
        except (OSError, TimeoutError) as exc:
            self._log.warning("master_connect_failed", master=address, error=str(exc) or type(exc).__name__)
            return None
        if address != self._address:  # changed while connecting
            link.close()
            return None
        self.connect_count += 1
        self._link = link
        if self._paused and link.transport is not None:
            link.user_paused = True
            link.transport.pause_reading()
        link.log.info("master_connected", max_offset=self._store.max_phy_offset)
        return link

    async def _session(self, link: _MasterLink) -> None:
        cfg = self.config
        loop = asyncio.get_running_loop()
        link.report()  # the first report is the request: where to start
        while not link.closed.done():
            now = loop.time()
            silent = now - link.last_read_time
            if silent > cfg.ha_housekeeping_interval and not link.waiting:
                link.log.warning("master_silent", silent_s=round(silent, 3))
                return
            if now - link.last_report_time >= cfg.ha_send_heartbeat_interval:
                link.report()
            deadline = min(link.last_report_time + cfg.ha_send_heartbeat_interval,
                           link.last_read_time + cfg.ha_housekeeping_interval)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout_at(max(deadline, loop.time()) + 0.001):
                    await asyncio.shield(link.closed)
        link.log.info("master_disconnected", max_offset=self._store.max_phy_offset)
