"""PocketMQ's message store: RocketMQ 4.x's commit log, consume queues, flush, recovery and retention,
as a library with no networking (see ``DESIGN.md``, "The store").

The broker uses :class:`MessageStore` with a :class:`StoreConfig`; ``ha`` uses its replication entry points
and ``spark_jobs`` the model's record decoder (:func:`common.record.decode_record`) only.
"""

import common.compiled  # noqa: F401  (first: the switch between the compiled and the plain build)
from store.config import BrokerRole, FlushDiskType, StoreConfig
from store.errors import StoreError, StoreNotRunningError
from store.listeners import ArrivalListener, GrowthListener
from store.message import MessageExtBatch, MessageExtBrokerInner
from store.message_store import MessageStore
from store.put_path import PutOutcome, ReplicaWaiter
from store.reader import MessageFilter
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
    "PutOutcome",
    "ReplicaWaiter",
    "StoreConfig",
    "StoreError",
    "StoreNotRunningError",
]
