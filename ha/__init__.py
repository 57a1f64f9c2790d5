"""Master/slave commit-log replication (RocketMQ 4.x "DefaultHA", seed 000 §3, reference §5).

* :mod:`ha.wire` — the protocol, pure: 8-byte offset reports up, ``from_offset·size·bytes`` transfers down.
* :class:`HAService` — the master: accepts slaves, streams the commit log to each, validates their
  acknowledgements and completes SYNC_MASTER waits (:meth:`HAService.wait_for_replica`).
* :class:`HAClient` — the slave: connects to the master, appends what it is sent to its own store.
* :class:`HAConfig` — both ends' settings.

Imports point one way: ``ha`` uses only ``store``; the broker wires it in.
"""

from ha.client import HAClient
from ha.config import HAConfig
from ha.errors import (
    HAError,
    HAProtocolError,
    InvalidOffsetReportError,
    MalformedTransferError,
    ReadBufferFullError,
    TransferGapError,
    TransferTooLargeError,
)
from ha.group_transfer import GroupTransferService
from ha.service import HAService

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
