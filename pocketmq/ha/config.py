"""Replication settings: one frozen dataclass with RocketMQ's defaults.

Intervals here are seconds (RocketMQ's properties are milliseconds; :meth:`HAConfig.from_properties`
converts). The same object configures both ends: a master uses the listen, transfer and waiter settings,
a slave the address, buffer, heartbeat and reconnect ones.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pocketmq.common.config import from_named_properties
from pocketmq.ha.wire import DEFAULT_READ_BUFFER_SIZE, TRANSFER_HEADER_SIZE


@dataclass(frozen=True, slots=True, kw_only=True)
class HAConfig:
    """Everything the replication package can be told."""

    ha_listen_host: str = field(
        default="0.0.0.0", metadata={"default": "brokerIP1, or listenHost when brokerIP1 is not an address here"})
    """Address the master's HA server binds to (``haListenHost``; the broker defaults it to its own address).
    The 4.x replication protocol carries no authentication: whoever reaches this port can read the commit log
    (as a slave does), so it should be reachable by the slaves only."""
    ha_listen_port: int = field(default=10912, metadata={"default": "listenPort + 1"})
    """Master's HA port (RocketMQ forces ``listenPort + 1``; the broker decides). 0 picks a free port."""
    ha_master_address: str = ""
    """Slave: the master's HA address ``host:port`` when configured rather than learned from the name
    server (RocketMQ's ``haMasterAddress``)."""
    ha_transfer_batch_size: int = 32 * 1024
    """Most commit-log bytes in one transfer (always within one file)."""
    ha_send_heartbeat_interval: float = 5.0
    """Master: heartbeat header after this long with nothing sent. Slave: offset report after this long
    with nothing reported."""
    ha_housekeeping_interval: float = 20.0
    """Either end drops a peer it has heard nothing from for this long."""
    ha_slave_fallbehind_max: int = field(default=256 * 1024 * 1024, metadata={"unit": "bytes"})
    """A SYNC_MASTER put whose end offset is further than this beyond the best acknowledgement gets
    SLAVE_NOT_AVAILABLE at once instead of waiting."""
    slave_timeout: float = 3.0
    """How long a SYNC_MASTER put waits for a slave's acknowledgement (RocketMQ 4.9.3+ ``slaveTimeout``)."""
    max_connections: int = 16
    """Slaves the master serves at once; further connections are closed when accepted."""
    max_waiters: int = 65_536
    """Puts waiting for a replica at once; see :meth:`pocketmq.ha.service.HAService.has_room`."""
    slave_read_buffer_size: int = DEFAULT_READ_BUFFER_SIZE
    """Slave's read buffer; a transfer must fit in it."""
    write_buffer_high_water: int = 1024 * 1024
    """Master: bytes queued in a connection's transport before the sender waits for the slave to read."""
    connect_timeout: float = 3.0
    """Slave: time allowed to open the connection to the master."""
    reconnect_backoff_initial: float = 0.1
    """Slave: first pause before reconnecting; doubles after each attempt that made no progress."""
    reconnect_backoff_max: float = 5.0
    """Slave: cap on that pause (RocketMQ retries every 5 s)."""

    def __post_init__(self) -> None:
        _check(0 <= self.ha_listen_port <= 65535, "ha_listen_port must be a TCP port")
        _check(0 < self.ha_transfer_batch_size <= self.slave_read_buffer_size - TRANSFER_HEADER_SIZE,
               "ha_transfer_batch_size must be positive and fit in the slave's read buffer")
        for name in ("ha_send_heartbeat_interval", "ha_housekeeping_interval", "slave_timeout", "connect_timeout",
                     "reconnect_backoff_initial", "reconnect_backoff_max"):
            _check(getattr(self, name) > 0, f"{name} must be positive")
        _check(self.reconnect_backoff_max >= self.reconnect_backoff_initial,
               "reconnect_backoff_max must be at least reconnect_backoff_initial")
        for name in ("ha_slave_fallbehind_max", "max_connections", "max_waiters", "write_buffer_high_water"):
            _check(getattr(self, name) > 0, f"{name} must be positive")
        if self.ha_master_address:
            parse_address(self.ha_master_address)

    @classmethod
    def from_properties(cls, properties: Mapping[str, str], **overrides: Any) -> HAConfig:
        """Build from RocketMQ property names (:data:`PROPERTY_NAMES`; other keys are ignored here, the
        broker decides what an unknown key means). Millisecond properties become seconds. ``overrides``
        use field names and win."""
        names = {key: name for key, (name, _kind) in PROPERTY_NAMES.items()}
        millis = frozenset(name for name, kind in PROPERTY_NAMES.values() if kind == "ms")
        return from_named_properties(cls, properties, names, overrides, millis_to_seconds=millis)

    def replace(self, **changes: Any) -> HAConfig:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)


PROPERTY_NAMES: dict[str, tuple[str, str]] = {
    "haListenHost": ("ha_listen_host", "str"),
    "haListenPort": ("ha_listen_port", "int"),
    "haMasterAddress": ("ha_master_address", "str"),
    "haTransferBatchSize": ("ha_transfer_batch_size", "int"),
    "haSendHeartbeatInterval": ("ha_send_heartbeat_interval", "ms"),
    "haHousekeepingInterval": ("ha_housekeeping_interval", "ms"),
    "haSlaveFallbehindMax": ("ha_slave_fallbehind_max", "int"),
    "slaveTimeout": ("slave_timeout", "ms"),
}
"""RocketMQ property name -> (HAConfig field, kind: ``int``, ``str`` or ``ms`` for milliseconds)."""


def parse_address(address: str) -> tuple[str, int]:
    """``"host:port"`` (or ``"[v6]:port"``) -> (host, port); ValueError when it is not one."""
    host, sep, port = address.strip().rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
        raise ValueError(f"bad HA address {address!r}: expected host:port")
    return host, int(port)


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)
