"""Master/slave commit-log replication (RocketMQ 4.x "DefaultHA").

* :mod:`pocketmq.ha.wire` — the protocol, pure: 8-byte offset reports up, ``from_offset·size·bytes`` transfers down.
* :mod:`pocketmq.ha.ports` — the narrow interfaces each part is given: the master's commit log read-only, the slave's
  commit log, the replica hub a connection reports to.
* :class:`HAService` — the master and the hub: accepts slaves (:mod:`pocketmq.ha.connection`, one
  :class:`pocketmq.ha.connection.HAConnection` per slave, streaming the commit log and validating its
  acknowledgements), drops silent ones, and completes SYNC_MASTER waits (:meth:`HAService.wait_for_replica`,
  :mod:`pocketmq.ha.group_transfer`).
* :class:`HAClient` — the slave: connects to the master, appends what it is sent to its own store.
* :mod:`pocketmq.ha.sockets` — socket helpers both ends use; :class:`HAConfig` — both ends' settings.

Imports point one way: ``ha`` uses only ``store`` and ``common``; the broker wires it in. Inside, the import
graph has no circle: ``service`` -> ``connection`` -> ``ports``/``sockets``/``wire``, ``client`` ->
``ports``/``sockets``/``wire``.
"""

from pocketmq.ha.client import HAClient
from pocketmq.ha.config import HAConfig
from pocketmq.ha.errors import (
    HAError,
    HAProtocolError,
    InvalidOffsetReportError,
    MalformedTransferError,
    ReadBufferFullError,
    TransferGapError,
    TransferTooLargeError,
)
from pocketmq.ha.group_transfer import GroupTransferService
from pocketmq.ha.service import HAService

__all__ = [
    "GroupTransferService",
    "HAClient",
    "HAConfig",
    "HAError",
    "HAProtocolError",
    "HAService",
    "InvalidOffsetReportError",
    "MalformedTransferError",
    "ReadBufferFullError",
    "TransferGapError",
    "TransferTooLargeError",
]
