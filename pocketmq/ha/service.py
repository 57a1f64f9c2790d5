"""The master's replication service (RocketMQ's ``HAService``).

:class:`HAService` is the :class:`pocketmq.ha.ports.ReplicaHub` of the master's slave connections and composes

* :class:`AcceptSocketService` — the HA server socket; each accepted slave becomes a
  :class:`pocketmq.ha.connection.HAConnection` (at most ``max_connections`` at once), given this hub and the
  commit log as a read-only :class:`pocketmq.ha.ports.CommitLogView`;
* housekeeping — a periodic service that drops a slave nothing was read from for
  ``ha_housekeeping_interval``;
* :class:`pocketmq.ha.group_transfer.GroupTransferService` — the SYNC_MASTER waiters.

One commit-log growth listener wakes every connection's sender, so senders sleep until there is data.

The replicated watermark is the best acknowledgement among the **live, attached** connections, each
already validated by its connection (never beyond the master's max offset, never backwards, never beyond
what that connection was sent). One slave at the offset is enough, as in RocketMQ. When a connection
closes the watermark is recomputed from the others, so a slave that went away cannot make later puts
succeed; waits already completed stay completed (their data did reach a slave).

Typical use by a SYNC_MASTER broker::

    result = store.append(msg)                                   # after has_room() checks
    waits = [store.wait_for_flush(end)] if store.needs_flush_wait() else []
    waits.append(ha_service.wait_for_replica(end))
    statuses = await asyncio.gather(*waits)                      # never raises; timeouts are statuses
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from pocketmq.common.logs import get_logger
from pocketmq.common.service import periodic
from pocketmq.ha.config import HAConfig
from pocketmq.ha.connection import HAConnection
from pocketmq.ha.group_transfer import GroupTransferService
from pocketmq.ha.ports import MasterLog, ReplicaHub
from pocketmq.store import PutMessageStatus

log = get_logger("pocketmq.ha.service")

_NOT_AVAILABLE = PutMessageStatus.SLAVE_NOT_AVAILABLE


class AcceptSocketService:
    """The HA server socket: accepts slaves and hands each to a protocol made by ``new_connection``."""

    def __init__(self, new_connection: Callable[[], asyncio.Protocol], host: str, port: int) -> None:
        self._new_connection = new_connection
        self._host = host
        self._port = port
        self._server: asyncio.Server | None = None
        #: (host, port) actually bound; port 0 in the config becomes the real one here
        self.address: tuple[str, int] | None = None

    async def start(self) -> None:
        """Bind and listen. Raises OSError when the address is in use."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._new_connection, self._host, self._port, reuse_address=True)
        sockname = self._server.sockets[0].getsockname()
        self.address = (str(sockname[0]), int(sockname[1]))

    async def stop(self) -> None:
        """Stop accepting (existing connections are the service's to close)."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 1.0)


class HAService(ReplicaHub[HAConnection]):
    """Master side of replication (see module docstring). Start with ``await start()``, stop with
    ``await stop()`` before the store shuts down."""

    def __init__(self, commit_log: MasterLog, config: HAConfig) -> None:
        self._commit_log = commit_log
        self.config = config
        self._accept = AcceptSocketService(lambda: HAConnection(self, commit_log, config),
                                           config.ha_listen_host, config.ha_listen_port)
        limit = config.ha_housekeeping_interval
        self._housekeeping = periodic("ha-housekeeping", min(1.0, limit / 4), self._drop_silent_slaves)
        self._group_transfer = GroupTransferService(timeout=config.slave_timeout, max_waiters=config.max_waiters)
        #: open connections (attached or not); a connection leaves it when it closes
        self.connections: set[HAConnection] = set()
        self._best_ack = -1
        self._running = False
        self._listening = False
        self._log = log.bind(role="master")

    # ================================================================================= lifecycle

    async def start(self) -> None:
        """Listen on the HA port and start housekeeping. Raises OSError if the port cannot be bound."""
        if self._running:
            return
        if not self._listening:
            # The store has no way to remove a listener, so it is added once and checks _running.
            self._commit_log.add_commitlog_growth_listener(self._on_growth)
            self._listening = True
        await self._accept.start()
        self._housekeeping.start()
        self._running = True
        host, port = self.address
        self._log.info("ha_service_started", host=host, port=port, batch=self.config.ha_transfer_batch_size,
                       slave_timeout_s=self.config.slave_timeout)

    async def stop(self) -> None:
        """Stop accepting, close every slave connection and wait for their senders, and complete the
        waiting puts with FLUSH_SLAVE_TIMEOUT (replication not confirmed)."""
        if not self._running:
            return
        self._running = False
        await self._accept.stop()
        for connection in list(self.connections):
            await connection.shutdown()
        await self._housekeeping.stop()
        self._group_transfer.release_all()
        self._log.info("ha_service_stopped")

    @property
    def address(self) -> tuple[str, int]:
        """(host, port) the HA server listens on (the real port when configured with 0)."""
        if self._accept.address is None:
            raise RuntimeError("the HA service is not started")
        return self._accept.address

    @property
    def port(self) -> int:
        """The HA port actually bound."""
        return self.address[1]

    # ==================================================================== the hub (ReplicaHub)

    def register(self, connection: HAConnection) -> bool:
        """A slave connected; False (it is then closed) when stopping or over ``max_connections``."""
        if not self._running:
            return False
        if len(self.connections) >= self.config.max_connections:
            self._log.warning("slave_refused", peer=connection.address, max_connections=self.config.max_connections)
            return False
        self.connections.add(connection)
        return True

    def forget(self, connection: HAConnection) -> None:
        """The connection closed: recompute the watermark without it."""
        self.connections.discard(connection)
        self._best_ack = max((c.ack_offset for c in self.connections if c.is_attached), default=-1)

    def acknowledged(self, offset: int) -> None:
        """A connection's validated acknowledgement advanced to ``offset``: maybe release waiters."""
        if offset > self._best_ack:
            self._best_ack = offset
            self._group_transfer.notify_transfer(offset)

    def _drop_silent_slaves(self) -> None:
        """Housekeeping: close the connections of slaves silent for longer than ``ha_housekeeping_interval``
        (a live slave reports at least every heartbeat interval)."""
        now = asyncio.get_running_loop().time()
        limit = self.config.ha_housekeeping_interval
        for connection in list(self.connections):
            silent = now - connection.read_service.last_read_time
            if silent > limit:
                connection.close("slave_silent", fault=True, silent_s=round(silent, 3))

    def _on_growth(self, max_offset: int) -> None:
        if self._running:
            for connection in self.connections:
                connection.write_service.on_growth(max_offset)

    @property
    def attached_slaves(self) -> list[HAConnection]:
        """Open connections whose slave has reported."""
        return [c for c in self.connections if c.is_attached]

    @property
    def connection_count(self) -> int:
        """Slaves attached now."""
        return sum(1 for c in self.connections if c.is_attached)

    @property
    def push_to_slave_max_offset(self) -> int:
        """The best validated acknowledgement of a live slave; -1 with none (RocketMQ's
        ``push2SlaveMaxOffset``, but per live connection rather than ever-seen)."""
        return self._best_ack

    # =================================================================================== waits

    def is_slave_ok(self, end_offset: int) -> bool:
        """A slave is attached and no further than ``ha_slave_fallbehind_max`` behind ``end_offset``."""
        return self._running and self._best_ack >= 0 and end_offset - self._best_ack <= \
            self.config.ha_slave_fallbehind_max

    def has_room(self) -> bool:
        """False when ``max_waiters`` puts already wait for a replica: the broker should refuse the put
        (OS_PAGECACHE_BUSY, nothing stored) instead of appending."""
        return self._group_transfer.has_room()

    @property
    def pending_waiters(self) -> int:
        """Puts waiting for a replica now."""
        return self._group_transfer.pending

    def wait_for_replica(self, end_offset: int) -> asyncio.Future[PutMessageStatus]:
        """A future of the replica status of a put ending at ``end_offset``: PUT_OK once a live slave has
        acknowledged it; SLAVE_NOT_AVAILABLE at once when no slave is attached or the best one is more
        than ``ha_slave_fallbehind_max`` behind; FLUSH_SLAVE_TIMEOUT after ``slave_timeout`` (or at once
        when ``max_waiters`` are already waiting). Never raises."""
        if not self.is_slave_ok(end_offset):
            future: asyncio.Future[PutMessageStatus] = asyncio.get_running_loop().create_future()
            future.set_result(_NOT_AVAILABLE)
            return future
        return self._group_transfer.wait_for(end_offset, self._best_ack)

    # ============================================================================ runtime info

    def runtime_info(self) -> dict[str, str]:
        """HA state for GET_BROKER_RUNTIME_INFO: the master's max offset, the best acknowledgement and how
        far behind it is, and per attached slave (``haSlave0``, ``haSlave1``, ...) its address, acknowledged
        offset, lag in bytes and in milliseconds (time since its acknowledgement last reached the master's
        max offset), plus waiter counters."""
        max_offset = self._commit_log.max_phy_offset
        now = asyncio.get_running_loop().time()
        slaves = sorted(self.attached_slaves, key=lambda c: c.address)
        info = {
            "haMasterMaxOffset": str(max_offset),
            "haConnectionCount": str(len(slaves)),
            "haPush2SlaveMaxOffset": str(self._best_ack),
            "slaveFallBehindMuch": str(max_offset - self._best_ack if self._best_ack >= 0 else 0),
            "haReplicaWaiters": str(self._group_transfer.pending),
            "haReplicaTimeouts": str(self._group_transfer.timeouts),
            "haReplicaWaitsRefused": str(self._group_transfer.refused),
        }
        for index, connection in enumerate(slaves):
            read = connection.read_service
            lag_bytes = max(0, max_offset - read.ack_offset)
            lag_ms = 0 if lag_bytes == 0 else int((now - read.caught_up_time) * 1000)
            info[f"haSlave{index}"] = (f"addr={connection.address},ackOffset={read.ack_offset},lagBytes={lag_bytes},"
                                       f"lagMs={lag_ms},sentOffset={connection.write_service.sent_offset}")
        return info
