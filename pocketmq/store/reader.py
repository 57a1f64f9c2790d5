"""``MessageReader``: the store's read side (RocketMQ's ``DefaultMessageStore.getMessage`` and the queue-offset
queries): a pull's messages from one consume queue, and a queue's min/max offsets, offset by time and store
times.

A pull reads within one consume-queue file and scans a bounded number of units (at most
``max(16000, 20 * max_count)``, for filters that reject a lot), as RocketMQ does. On a slave, an offset out of
range is answered with the consumer's own offset as the next one (RocketMQ's ``nextOffsetCorrection``: a
slave never moves a consumer). Reads return views of the mapped files, never copies.

Filtering is two stages, as in RocketMQ's ``MessageFilter``: the tag code in the consume-queue unit first (no
commit-log read for a unit it rejects), then, for what passed, the stored record itself (a SQL92 subscription
evaluated on its properties). Units either stage rejects are skipped: the next begin offset moves past them.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from pocketmq.store.commitlog import CommitLog
from pocketmq.store.config import BrokerRole, StoreConfig
from pocketmq.store.consume_queue import BLANK_UNIT_SIZE, CQ_UNIT, UNIT_SIZE, ConsumeQueue
from pocketmq.store.mapped_file import MappedFile
from pocketmq.store.queue_table import ConsumeQueueTable
from pocketmq.store.results import GetMessageResult, GetMessageStatus

MessageFilter = Callable[[int], bool]
"""Accepts a consume-queue tag code; None in its place means accept everything."""
RecordFilter = Callable[[memoryview], bool]
"""Accepts a stored record (a view of it, valid during the call) whose tag code passed; a SQL92 subscription's
property check. None: accept everything."""

_MIN_FILTER_SCAN = 16_000


def _total_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 << 30


class MessageReader:
    """Reads of one store (see the module docstring); the store checks that it runs before a pull."""

    def __init__(self, config: StoreConfig, commit_log: CommitLog, queues: ConsumeQueueTable) -> None:
        self._commit_log = commit_log
        self._find = queues.find
        #: a slave never moves a consumer's offset (the store changes it when controller mode switches roles)
        self.is_slave = config.broker_role is BrokerRole.SLAVE
        #: records ending past this commit-log offset are not read yet (controller mode's confirm offset: what every
        #: in-sync replica holds, so a consumer never sees a record a new master may not have)
        self.read_fence = NO_FENCE
        self._max_transfer_count = config.max_transfer_count_on_message_in_memory
        self._max_transfer_bytes = config.max_transfer_bytes_on_message_in_memory
        self._memory_for_hot_data = _total_memory() * config.access_message_in_memory_max_ratio // 100

    def _correct(self, old: int, new: int) -> int:
        """RocketMQ's nextOffsetCorrection: a slave never moves a consumer's offset."""
        return old if self.is_slave else new

    def get_messages(self, topic: str, queue_id: int, offset: int, max_count: int, max_bytes: int | None,
                     message_filter: MessageFilter | None,
                     record_filter: RecordFilter | None = None) -> GetMessageResult:
        """Up to ``max_count`` messages (capped at ``max_transfer_count_on_message_in_memory``) and ``max_bytes``
        (capped at ``max_transfer_bytes_on_message_in_memory``; at least one message whatever its size) from
        queue offset ``offset``; ``message_filter`` sees each tag code, ``record_filter`` each record that passed it."""
        cq = self._find(topic, queue_id)
        if cq is None:
            status = GetMessageStatus.NO_MATCHED_LOGIC_QUEUE if queue_id < 0 else GetMessageStatus.NO_MESSAGE_IN_QUEUE
            return GetMessageResult(status, self._correct(offset, 0), 0, 0)
        min_offset, max_offset = cq.min_offset, cq.max_offset
        if max_offset == 0:
            return GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, self._correct(offset, 0), min_offset,
                                    max_offset)
        if offset < min_offset:
            return GetMessageResult(GetMessageStatus.OFFSET_TOO_SMALL, self._correct(offset, min_offset),
                                    min_offset, max_offset)
        if offset == max_offset:
            return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_ONE, offset, min_offset, max_offset)
        if offset > max_offset:
            return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_BADLY, self._correct(offset, max_offset),
                                    min_offset, max_offset)
        return self._read_queue(cq, offset, min_offset, max_offset, max_count, max_bytes, message_filter,
                                record_filter)

    def _read_queue(self, cq: ConsumeQueue, offset: int, min_offset: int, max_offset: int, max_count: int,
                    max_bytes: int | None, message_filter: MessageFilter | None,
                    record_filter: RecordFilter | None) -> GetMessageResult:
        """Scan units from ``offset`` within one consume-queue file (see the module docstring)."""
        count_limit = max(1, min(max_count, self._max_transfer_count))
        bytes_limit = self._max_transfer_bytes if max_bytes is None else min(max_bytes, self._max_transfer_bytes)
        result = GetMessageResult(GetMessageStatus.NO_MATCHED_MESSAGE, offset, min_offset, max_offset)
        units = cq.get_units(offset, min(max_offset - offset, max(_MIN_FILTER_SCAN, max_count * 20)))
        if units is None:
            result.status = GetMessageStatus.OFFSET_FOUND_NULL
            result.next_begin_offset = self._correct(offset, _next_cq_file_index(cq, offset))
            return result
        buffers, queue_offsets, tags_codes = result.message_buffers, result.message_queue_offsets, result.tags_codes
        find_file = self._commit_log.queue.find
        cl_min = self._commit_log.min_offset
        # The commit-log file of the record before: a pull's records are nearly always in one file, so the file
        # is looked up once per pull, not once per record (CommitLog.get_message's find + select).
        mapped: MappedFile | None = None
        file_from = file_end = 0
        index = offset
        total = 0
        removed = False
        last_phys = -1
        fence = self.read_fence
        for phys, size, tags in CQ_UNIT.iter_unpack(units):
            if size == BLANK_UNIT_SIZE or phys < cl_min:
                removed = removed or size != BLANK_UNIT_SIZE
                index += 1
                continue
            if phys + size > fence:
                result.fenced_at = phys
                break
            if buffers and total + size > bytes_limit:
                break
            if message_filter is not None and not message_filter(tags):
                index += 1
                continue
            if not file_from <= phys < file_end:
                mapped = find_file(phys)
                file_from, file_end = (mapped.file_from_offset, mapped.file_end_offset) if mapped else (0, 0)
            view = mapped.select(phys - file_from, size) if mapped is not None else None
            if view is None:
                removed = True
                index += 1
                continue
            if record_filter is not None and not record_filter(view):
                view.release()
                index += 1
                continue
            buffers.append(view)
            queue_offsets.append(index)
            tags_codes.append(tags)
            total += size
            last_phys = phys
            index += 1
            if len(buffers) >= count_limit:
                break
        if buffers:
            result.status = GetMessageStatus.FOUND
            result.suggest_pulling_from_slave = self._commit_log.max_offset - last_phys > self._memory_for_hot_data
        elif result.fenced_at >= 0:
            result.status = GetMessageStatus.OFFSET_OVERFLOW_ONE  # nothing readable yet: a long poll waits
        elif removed:
            result.status = GetMessageStatus.MESSAGE_WAS_REMOVING
        result.next_begin_offset = index
        result.buffer_total_size = total
        return result

    def max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """Next queue offset to be written (0 for an unknown queue)."""
        cq = self._find(topic, queue_id)
        return cq.max_offset if cq else 0

    def min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """First readable queue offset (0 for an unknown queue)."""
        cq = self._find(topic, queue_id)
        return cq.min_offset if cq else 0

    def offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        """First queue offset stored at or after ``timestamp`` ms (see ConsumeQueue)."""
        cq = self._find(topic, queue_id)
        return cq.get_offset_in_queue_by_time(timestamp, self._commit_log.pickup_store_timestamp) if cq else 0

    def earliest_message_time(self, topic: str, queue_id: int) -> int:
        """Store time of the oldest readable message of the queue; -1 if none."""
        cq = self._find(topic, queue_id)
        return cq.get_earliest_message_time(self._commit_log.pickup_store_timestamp) if cq else -1

    def message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int:
        """Store time of the message at queue offset ``offset``; -1 if none."""
        cq = self._find(topic, queue_id)
        unit = cq.get_unit(offset) if cq and cq.min_offset <= offset < cq.max_offset else None
        return -1 if unit is None else self._commit_log.pickup_store_timestamp(unit[0], unit[1])


NO_FENCE = 1 << 62
"""The read fence when there is none."""


def _next_cq_file_index(cq: ConsumeQueue, index: int) -> int:
    """The first queue offset of the consume-queue file after the one holding ``index``."""
    per_file = cq.file_size // UNIT_SIZE
    return index + per_file - index % per_file
