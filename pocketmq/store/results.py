"""Status enums and results of the store's operations.

Expected outcomes are statuses, never exceptions; the broker maps each status to a
response code in one function (:mod:`pocketmq.broker.status`).
"""

from __future__ import annotations

import enum

from pocketmq.common.record import message_id
from pocketmq.common.record_encoder import joined_message_ids


class PutMessageStatus(enum.Enum):
    """Outcome of a put. The first four mean the message IS stored."""

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPEDFILE_FAILED = "CREATE_MAPEDFILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGECACHE_BUSY = "OS_PAGECACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"
    #: A timer message whose delivery time is not a number or beyond ``timerMaxDelaySec`` (nothing stored).
    WHEEL_TIMER_MSG_ILLEGAL = "WHEEL_TIMER_MSG_ILLEGAL"

    @property
    def is_stored(self) -> bool:
        """True when the message was appended (whatever happened to the flush or replica wait)."""
        return self in _STORED


_STORED = frozenset({
    PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT, PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
    PutMessageStatus.SLAVE_NOT_AVAILABLE,
})


class AppendMessageStatus(enum.Enum):
    """Outcome of writing into the commit log's current file."""

    PUT_OK = "PUT_OK"
    END_OF_FILE = "END_OF_FILE"
    MESSAGE_SIZE_EXCEEDED = "MESSAGE_SIZE_EXCEEDED"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"
    NOT_RESERVED = "NOT_RESERVED"
    """PocketMQ's own: the reserved window does not cover the record yet; nothing was written (the put
    path waits for the reservation and appends again)."""


class GetMessageStatus(enum.Enum):
    """Outcome of a read from a consume queue (the broker maps each to a pull response)."""

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


class AppendMessageResult:
    """Where an append landed.

    ``wrote_offset``/``wrote_bytes`` cover the whole append (all records of a batch); ``end_offset`` is
    what a flush or replica wait is keyed by. ``logics_offset`` is the first queue offset, ``msg_num`` the
    number of records. Message ids are computed on demand: most callers never ask for them.
    """

    __slots__ = ("_record_offsets", "_store_host", "logics_offset", "msg_num", "status", "store_timestamp",
                 "wrote_bytes", "wrote_offset")

    def __init__(
        self,
        status: AppendMessageStatus,
        wrote_offset: int = 0,
        wrote_bytes: int = 0,
        store_timestamp: int = 0,
        logics_offset: int = 0,
        msg_num: int = 1,
        store_host: bytes = b"",
        record_offsets: list[int] | None = None,
    ) -> None:
        self.status = status
        self.wrote_offset = wrote_offset
        self.wrote_bytes = wrote_bytes
        self.store_timestamp = store_timestamp
        self.logics_offset = logics_offset
        self.msg_num = msg_num
        self._store_host = store_host
        self._record_offsets = record_offsets

    @property
    def end_offset(self) -> int:
        """Commit-log offset just past the appended bytes."""
        return self.wrote_offset + self.wrote_bytes

    @property
    def queue_offset(self) -> int:
        """Queue offset of the (first) message."""
        return self.logics_offset

    @property
    def record_offsets(self) -> list[int]:
        """Physical offset of each record."""
        return self._record_offsets if self._record_offsets is not None else [self.wrote_offset]

    @property
    def msg_ids(self) -> list[str]:
        """Offset message id of each record."""
        joined = joined_message_ids(self._store_host, self.record_offsets)
        return joined.split(",") if joined else []

    @property
    def msg_id(self) -> str:
        """Offset message id(s), comma-separated for a batch (what RocketMQ's send response carries)."""
        if self._record_offsets is None:
            return message_id(self._store_host, self.wrote_offset)  # one record: no list on the hot path
        return joined_message_ids(self._store_host, self._record_offsets)

    def __repr__(self) -> str:
        return (f"AppendMessageResult({self.status.name}, wrote_offset={self.wrote_offset}, "
                f"wrote_bytes={self.wrote_bytes}, logics_offset={self.logics_offset}, msg_num={self.msg_num})")


class PutMessageResult:
    """A put's status plus, when something was appended, where (``append_result``)."""

    __slots__ = ("append_result", "status")

    def __init__(self, status: PutMessageStatus, append_result: AppendMessageResult | None = None) -> None:
        self.status = status
        self.append_result = append_result

    @property
    def is_ok(self) -> bool:
        """PUT_OK."""
        return self.status is PutMessageStatus.PUT_OK

    def __repr__(self) -> str:
        return f"PutMessageResult({self.status.name}, {self.append_result!r})"


class GetMessageResult:
    """Records read from one consume queue.

    ``message_buffers`` are zero-copy views of the stored records, byte for byte as the pull response
    body carries them (concatenate, or write them one after another). ``next_begin_offset`` is where the
    consumer should read next; ``min_offset``/``max_offset`` are the queue's bounds at read time.
    """

    __slots__ = ("buffer_total_size", "max_offset", "message_buffers", "message_queue_offsets", "min_offset",
                 "next_begin_offset", "status", "suggest_pulling_from_slave", "tags_codes")

    def __init__(self, status: GetMessageStatus, next_begin_offset: int, min_offset: int, max_offset: int) -> None:
        self.status = status
        self.next_begin_offset = next_begin_offset
        self.min_offset = min_offset
        self.max_offset = max_offset
        self.message_buffers: list[memoryview] = []
        self.message_queue_offsets: list[int] = []
        self.tags_codes: list[int] = []
        self.buffer_total_size = 0
        self.suggest_pulling_from_slave = False

    @property
    def message_count(self) -> int:
        """Number of records returned."""
        return len(self.message_buffers)

    def body(self) -> bytes:
        """All records concatenated (one copy; for tests and small responses)."""
        return b"".join(self.message_buffers)

    def release(self) -> None:
        """Drop the views early so the files they point into can be closed at once."""
        for view in self.message_buffers:
            view.release()
        self.message_buffers = []

    def __repr__(self) -> str:
        return (f"GetMessageResult({self.status.name}, count={self.message_count}, "
                f"next={self.next_begin_offset}, min={self.min_offset}, max={self.max_offset})")
