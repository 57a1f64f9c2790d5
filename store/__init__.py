"""PocketMQ's message store: RocketMQ 4.x's commit log, consume queues, flush, recovery and retention,
as a library with no networking (see ``DESIGN.md``, "The store").

The broker uses :class:`MessageStore` with a :class:`StoreConfig`; ``ha`` uses its replication entry points
and ``spark_jobs`` only :func:`store.record.decode_record`.
"""

from store.config import BrokerRole, FlushDiskType, StoreConfig
from store.errors import RecordFormatError, StoreError, StoreNotRunningError
from store.message import MessageExtBatch, MessageExtBrokerInner
from store.message_store import ArrivalListener, GrowthListener, MessageFilter, MessageStore
from store.results import (
    AppendMessageResult,
    AppendMessageStatus,
    GetMessageResult,
    GetMessageStatus,
    PutMessageResult,
    PutMessageStatus,
)

__all__ = [
    "AppendMessageResult",
    "AppendMessageStatus",
    "ArrivalListener",
    "BrokerRole",
    "FlushDiskType",
    "GetMessageResult",
    "GetMessageStatus",
    "GrowthListener",
    "MessageExtBatch",
    "MessageExtBrokerInner",
    "MessageFilter",
    "MessageStore",
    "PutMessageResult",
    "PutMessageStatus",
    "RecordFormatError",
    "StoreConfig",
    "StoreError",
    "StoreNotRunningError",
]
