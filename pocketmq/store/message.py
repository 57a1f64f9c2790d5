"""What the broker hands to the store: one message (:class:`MessageExtBrokerInner`) or a batch
(:class:`MessageExtBatch`), named after RocketMQ's classes for the same things.

Both are plain slotted objects the broker fills from a send request; the store never mutates them. Hosts
are pre-encoded address fields (``ip bytes + port int32``, see :func:`pocketmq.common.record.encode_host`) so the
append path packs them without conversion; the broker encodes a connection's address once.
"""

from __future__ import annotations

from dataclasses import dataclass

from pocketmq.common.record import encode_host

LOCALHOST = encode_host("127.0.0.1", 0)


@dataclass(slots=True)
class MessageExtBrokerInner:
    """One message to append.

    ``tags_code`` is the consume-queue tag code; ``None`` lets the store hash the TAGS property itself
    (the broker usually knows the tags already and can pass the code). ``store_host`` ``None`` means the
    store's own address (``StoreConfig.store_host``). ``wait_store_msg_ok`` is the producer's WAIT
    property: ``False`` skips the SYNC_FLUSH wait.
    """

    topic: str
    body: bytes
    queue_id: int = 0
    flag: int = 0
    properties: str = ""
    tags_code: int | None = None
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: bytes = LOCALHOST
    store_host: bytes | None = None
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    wait_store_msg_ok: bool = True


@dataclass(slots=True)
class MessageExtBatch:
    """A SEND_BATCH_MESSAGE: ``body`` is the batch body (see
    :func:`pocketmq.common.batch.decode_batch_body`); ``properties`` (the request header's) are appended to every
    entry's own properties. All entries go to ``topic``/``queue_id`` with consecutive queue offsets."""

    topic: str
    body: bytes
    queue_id: int = 0
    properties: str = ""
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: bytes = LOCALHOST
    store_host: bytes | None = None
    wait_store_msg_ok: bool = True
