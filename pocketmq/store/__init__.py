"""PocketMQ's message store: RocketMQ 4.x's commit log, consume queues, flush, recovery and retention,
as a library with no networking (see docs/design/store.md).

The broker uses :class:`MessageStore` with a :class:`StoreConfig`; ``ha`` uses its replication entry points
and ``spark_jobs`` the model's record decoder (:func:`pocketmq.common.record.decode_record`) only.
"""

from pocketmq.store.config import BrokerRole, FlushDiskType, StoreConfig
from pocketmq.store.errors import StoreError, StoreNotRunningError
from pocketmq.store.listeners import ArrivalListener, GrowthListener
from pocketmq.store.message import MessageExtBatch, MessageExtBrokerInner
from pocketmq.store.message_store import MessageStore
from pocketmq.store.put_path import PutOutcome, ReplicaWaiter
from pocketmq.store.reader import MessageFilter
from pocketmq.store.results import (
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
    "PutOutcome",
    "ReplicaWaiter",
    "StoreConfig",
    "StoreError",
    "StoreNotRunningError",
]
