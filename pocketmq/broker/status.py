"""The one place where store statuses become response codes: put statuses for every write
(send, batch, send-back) and get statuses for pulls."""

from __future__ import annotations

from pocketmq.remoting.codes import ResponseCode
from pocketmq.store.results import GetMessageResult, GetMessageStatus, PutMessageStatus

_PUT_CODES: dict[PutMessageStatus, tuple[int, str | None]] = {
    PutMessageStatus.PUT_OK: (ResponseCode.SUCCESS, None),
    PutMessageStatus.FLUSH_DISK_TIMEOUT: (ResponseCode.FLUSH_DISK_TIMEOUT, "flush disk timeout"),
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: (ResponseCode.FLUSH_SLAVE_TIMEOUT, "wait slave ack timeout"),
    PutMessageStatus.SLAVE_NOT_AVAILABLE: (ResponseCode.SLAVE_NOT_AVAILABLE, "slave not available"),
    PutMessageStatus.SERVICE_NOT_AVAILABLE: (
        ResponseCode.SERVICE_NOT_AVAILABLE, "service not available now: the store is not writable"),
    PutMessageStatus.MESSAGE_ILLEGAL: (ResponseCode.MESSAGE_ILLEGAL, "the message is illegal (size or content)"),
    PutMessageStatus.PROPERTIES_SIZE_EXCEEDED: (
        ResponseCode.MESSAGE_ILLEGAL, "the message properties are longer than 32767 bytes"),
    PutMessageStatus.CREATE_MAPEDFILE_FAILED: (ResponseCode.SYSTEM_ERROR, "create mapped file failed"),
    # The store's bound on puts waiting for the disk or a replica: nothing was stored, and the producer
    # should not retry at once (SYSTEM_BUSY is not in the SDK's retried codes).
    PutMessageStatus.OS_PAGECACHE_BUSY: (
        ResponseCode.SYSTEM_BUSY, "[PC_SYNCHRONIZED]broker busy: too many writers wait on disk"),
    PutMessageStatus.UNKNOWN_ERROR: (ResponseCode.SYSTEM_ERROR, "unknown store error"),
    PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL: (
        ResponseCode.MESSAGE_ILLEGAL, "timer message illegal, the delivery time is not a number or beyond the max "
                                      "delay (timerMaxDelaySec)"),
}

_FOUND = GetMessageStatus.FOUND
# Tuples, not sets: ``in`` on a tuple compares identity first, while hashing an Enum member calls Python code.
_RETRY_NOW = (GetMessageStatus.NO_MATCHED_MESSAGE, GetMessageStatus.MESSAGE_WAS_REMOVING)
_NOT_FOUND = (GetMessageStatus.OFFSET_OVERFLOW_ONE, GetMessageStatus.OFFSET_FOUND_NULL)
_EMPTY_QUEUE = (GetMessageStatus.NO_MESSAGE_IN_QUEUE, GetMessageStatus.NO_MATCHED_LOGIC_QUEUE)


def put_status_to_response(status: PutMessageStatus) -> tuple[int, str | None]:
    """Response code and remark for a put's status. Codes 0, 10, 11, 12 mean "stored"."""
    return _PUT_CODES[status]


def get_status_to_response(result: GetMessageResult, requested_offset: int, is_master: bool) -> tuple[int, int]:
    """Pull response code and the offset the consumer should pull next, for a read from
    ``requested_offset`` that gave ``result``. An empty queue pulled at 0 is "not
    found" (nothing yet), elsewhere "offset moved". A slave does not correct offsets (RocketMQ's
    offsetCheckInSlave=false): where a master would answer "offset moved" it lets the client retry."""
    status = result.status
    next_offset = result.next_begin_offset
    if status is _FOUND:
        return ResponseCode.SUCCESS, next_offset
    if status in _RETRY_NOW:
        return ResponseCode.PULL_RETRY_IMMEDIATELY, next_offset
    if status in _NOT_FOUND:
        return ResponseCode.PULL_NOT_FOUND, next_offset
    if status in _EMPTY_QUEUE and requested_offset == 0:
        return ResponseCode.PULL_NOT_FOUND, next_offset
    # OFFSET_TOO_SMALL, OFFSET_OVERFLOW_BADLY, or an empty queue pulled past 0
    if not is_master:
        return ResponseCode.PULL_RETRY_IMMEDIATELY, requested_offset
    return ResponseCode.PULL_OFFSET_MOVED, next_offset
