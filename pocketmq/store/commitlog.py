"""The commit log: every message of every topic, appended to one :class:`MappedFileQueue`.

Appends are synchronous and run on the event loop (no lock: the loop is the only writer). An append
packs the record straight into the mapped file (one ``struct.pack_into`` for the 15 fixed fields, three
slice copies for body, topic and properties), assigns the physical offset and, for messages that will be
dispatched, the next queue offset from ``topic_queue_table``. When a record does not fit in the current
file (``size + 8 > room``) an 8-byte blank marker claims the rest of the file and the record goes at the
start of the next one, which the allocator has normally created already. An append never
writes past the reserved window (:mod:`pocketmq.store.mapped_file`): one comparison with the file's ``limit``
covers both the room left in the file and the reservation; past it, an append the window does not cover
yet is NOT_RESERVED with nothing written, and the caller waits for the reservation (:meth:`CommitLog.wait_room`)
or makes it (:meth:`CommitLog.reserve_now`) and appends again.

Prepared and rolled-back transaction halves get queue offset 0 and no consume-queue entry, as in
RocketMQ. The record layout itself lives in the model (:mod:`pocketmq.common.record`); the hot path here is an
inlined copy of :func:`common.record_encoder.encode_record_into` (one fewer Python call per message), checked byte
for byte against it by the tests.
"""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Iterator

from pocketmq.common.batch import BATCH_ENTRY_OVERHEAD
from pocketmq.common.errors import RecordFormatError
from pocketmq.common.message import java_string_hash, tags_code_of_bytes
from pocketmq.common.record import (
    BLANK_MAGIC_CODE,
    END_FILE_MIN_BLANK_LENGTH,
    HEADER_STRUCTS,
    INT32,
    INT64,
    MAX_PROPERTIES_LENGTH,
    MAX_TOPIC_LENGTH,
    MESSAGE_MAGIC_CODE,
    PROPERTIES_LENGTH,
    SIZE_AND_MAGIC,
    SYS_FLAG_OFFSET,
    Blank,
    DispatchRequest,
    MessageRecord,
    check_record,
    decode_record,
    store_timestamp_offset,
)
from pocketmq.common.record_encoder import BatchUnits, count_batch_entries, encode_batch_records_into
from pocketmq.common.sysflag import MessageSysFlag
from pocketmq.store.config import StoreConfig
from pocketmq.store.mapped_file import MappedFile, MappedFileAllocator, MappedFileQueue, wait_shared
from pocketmq.store.message import MessageExtBatch, MessageExtBrokerInner
from pocketmq.store.results import AppendMessageResult, AppendMessageStatus

_PUT_OK = AppendMessageStatus.PUT_OK
# Hot-path copies of MessageSysFlag bits (locals and literals are cheaper than attribute lookups).
_HOST_BITS = MessageSysFlag.BORNHOST_V6 | MessageSysFlag.STOREHOST_V6
_BORN_V6 = MessageSysFlag.BORNHOST_V6
_STORE_V6 = MessageSysFlag.STOREHOST_V6
_TXN_MASK = MessageSysFlag.TRANSACTION_MASK
_TXN_COMMIT = MessageSysFlag.TRANSACTION_COMMIT_TYPE
_MAX_CACHED_TOPICS = 65_536

#: (physical offset, size, tags code) of each record of a batch, for dispatch.
BatchDispatch = BatchUnits


def _result(status: AppendMessageStatus) -> AppendMessageResult:
    return AppendMessageResult(status)


class BatchFormatError(ValueError):
    """A batch body whose entries do not add up (reported as MESSAGE_ILLEGAL)."""


class CommitLog:
    """Appends, reads and scans of the commit log (RocketMQ's ``CommitLog`` minus flushing, which is
    :mod:`pocketmq.store.flush`, and dispatching, which is the message store's)."""

    def __init__(self, config: StoreConfig, allocator: MappedFileAllocator) -> None:
        self.file_size = config.mapped_file_size_commit_log
        self.queue = MappedFileQueue(config.commit_log_dir, self.file_size, allocator,
                                     warm=config.warm_mapped_file, window=config.reserve_window_commit_log,
                                     tail_margin=END_FILE_MIN_BLANK_LENGTH)
        self.store_host = config.store_host_bytes
        # A record must fit in an empty file with room for a blank marker after it.
        self.max_record_size = min(config.max_message_size, self.file_size - END_FILE_MIN_BLANK_LENGTH)
        #: topic -> queue id -> next queue offset (RocketMQ's topicQueueTable).
        self.topic_queue_table: dict[str, dict[int, int]] = {}
        #: store timestamp of the newest record (for the checkpoint).
        self.last_store_timestamp = 0
        self._topic_fields: dict[str, bytes] = {}
        self._tag_codes: dict[bytes, int] = {}
        #: (file, end) an append found not reserved yet, for :meth:`wait_room` / :meth:`reserve_now`
        self._wanted: tuple[MappedFile, int] | None = None

    # ------------------------------------------------------------------------------------- offsets

    @property
    def max_offset(self) -> int:
        """Offset just past the last record."""
        return self.queue.max_offset

    @property
    def min_offset(self) -> int:
        """Offset of the oldest byte still on disk."""
        return self.queue.min_offset

    @property
    def flushed_offset(self) -> int:
        """Everything before this offset is on disk."""
        return self.queue.flushed_where

    # -------------------------------------------------------------------------------------- append

    def _topic_field(self, topic: str) -> bytes | None:
        """TOPICLENGTH + topic bytes, cached per topic (b"" cached for a topic that cannot be stored)."""
        field = self._topic_fields.get(topic)
        if field is None:
            raw = topic.encode()
            field = bytes((len(raw),)) + raw if 0 < len(raw) <= MAX_TOPIC_LENGTH else b""
            if len(self._topic_fields) >= _MAX_CACHED_TOPICS:
                self._topic_fields.clear()
            self._topic_fields[topic] = field
        return field or None

    def _file_with_room(self, size: int) -> MappedFile | None:
        """The file to write ``size`` bytes into, rolling (after a blank marker) when the current one is
        too full; None (and nothing written) when the bytes are not reserved yet. Raises OSError when a
        new file cannot be created."""
        queue = self.queue
        mapped = queue.last
        if mapped is None:
            mapped = queue.roll()
        else:
            pos = mapped.wrote_position
            room = self.file_size - pos
            if size + END_FILE_MIN_BLANK_LENGTH > room:
                if room > 0:
                    if room >= END_FILE_MIN_BLANK_LENGTH:
                        if not queue.make_room(mapped, pos + END_FILE_MIN_BLANK_LENGTH):
                            self._wanted = (mapped, pos + END_FILE_MIN_BLANK_LENGTH)
                            return None
                        SIZE_AND_MAGIC.pack_into(mapped.view, pos, room, BLANK_MAGIC_CODE)
                    mapped.wrote_position = self.file_size
                mapped = queue.roll()
        end = mapped.wrote_position + size
        if not queue.make_room(mapped, end):
            self._wanted = (mapped, end)
            return None
        return mapped

    async def wait_room(self) -> None:
        """Wait until the bytes the last NOT_RESERVED append wanted are reserved (raises OSError). Every
        put turned away waits on the same reservation."""
        wanted = self._wanted
        if wanted is not None:
            await self.queue.wait_room(*wanted)
            if self._wanted is wanted:
                self._wanted = None

    def reserve_now(self) -> None:
        """Reserve what the last NOT_RESERVED append wanted in this thread (raises OSError). Blocking."""
        wanted, self._wanted = self._wanted, None
        if wanted is not None:
            self.queue.reserve_now(*wanted)

    def append_message(self, msg: MessageExtBrokerInner) -> AppendMessageResult:
        """Append one record. Statuses: PUT_OK; MESSAGE_SIZE_EXCEEDED (also an empty or over-long topic, a
        host field that is neither 8 nor 20 bytes); PROPERTIES_SIZE_EXCEEDED; UNKNOWN_ERROR when a new
        file could not be created, NOT_RESERVED when the window does not cover the record yet (nothing
        was written)."""
        topic = msg.topic
        tfield = self._topic_fields.get(topic) or self._topic_field(topic)
        props = msg.properties.encode()
        props_len = len(props)
        body = msg.body
        body_len = len(body)
        born_host = msg.born_host
        store_host = msg.store_host or self.store_host
        sys_flag = msg.sys_flag & ~_HOST_BITS
        born_len = len(born_host)
        store_len = len(store_host)
        if born_len != 8:
            sys_flag |= _BORN_V6
        if store_len != 8:
            sys_flag |= _STORE_V6
        header = HEADER_STRUCTS[sys_flag >> 4 & 3]
        if tfield is None or (born_len != 8 and born_len != 20) or (store_len != 8 and store_len != 20):
            return _result(AppendMessageStatus.MESSAGE_SIZE_EXCEEDED)
        if props_len > MAX_PROPERTIES_LENGTH:
            return _result(AppendMessageStatus.PROPERTIES_SIZE_EXCEEDED)
        total = header.size + 2 + body_len + len(tfield) + props_len
        if total > self.max_record_size:
            return _result(AppendMessageStatus.MESSAGE_SIZE_EXCEEDED)
        files = self.queue.files
        mapped = files[-1] if files else None
        if mapped is None or mapped.wrote_position + total > mapped.limit:
            try:
                mapped = self._file_with_room(total)
            except OSError:
                return _result(AppendMessageStatus.UNKNOWN_ERROR)
            if mapped is None:
                return _result(AppendMessageStatus.NOT_RESERVED)
        queue_id = msg.queue_id
        txn = sys_flag & _TXN_MASK
        queues: dict[int, int] | None = None
        queue_offset = 0
        if txn == 0 or txn == _TXN_COMMIT:
            queues = self.topic_queue_table.get(topic)
            if queues is None:
                queues = self.topic_queue_table[topic] = {}
            queue_offset = queues.get(queue_id, 0)
        pos = mapped.wrote_position
        phys = mapped.file_from_offset + pos
        now = time.time_ns() // 1_000_000
        view = mapped.view
        header.pack_into(view, pos, total, MESSAGE_MAGIC_CODE, zlib.crc32(body) & 0x7FFFFFFF, queue_id, msg.flag,
                         queue_offset, phys, sys_flag, msg.born_timestamp, born_host, now, store_host,
                         msg.reconsume_times, msg.prepared_transaction_offset, body_len)
        p = pos + header.size
        end = p + body_len
        view[p:end] = body
        p = end + len(tfield)
        view[end:p] = tfield
        PROPERTIES_LENGTH.pack_into(view, p, props_len)
        end = pos + total
        view[p + 2:end] = props
        mapped.wrote_position = end
        if queues is not None:
            queues[queue_id] = queue_offset + 1
        self.last_store_timestamp = now
        return AppendMessageResult(_PUT_OK, phys, total, now, queue_offset, 1, store_host)

    def append_batch(self, batch: MessageExtBatch) -> tuple[AppendMessageResult, BatchDispatch]:
        """Append every entry of a batch body as its own record, all in one file, with consecutive queue
        offsets; returns the result and (offset, size, tag code) of each record for the consume queue.

        A first pass only counts the entries, which bounds the size (each record is its entry plus a
        fixed overhead, plus the header properties); the second pass checks each entry and writes its
        record straight into the mapped file, copying the body and the properties (with their length
        field, unless header properties make them longer) from the request. A malformed body is
        MESSAGE_SIZE_EXCEEDED with nothing kept (the store reports MESSAGE_ILLEGAL)."""
        topic = batch.topic
        tfield = self._topic_field(topic)
        born_host = batch.born_host
        store_host = batch.store_host or self.store_host
        sys_flag = batch.sys_flag & ~_HOST_BITS
        born_len = len(born_host)
        store_len = len(store_host)
        if born_len != 8:
            sys_flag |= _BORN_V6
        if store_len != 8:
            sys_flag |= _STORE_V6
        header = HEADER_STRUCTS[sys_flag >> 4 & 3]
        if tfield is None or (born_len != 8 and born_len != 20) or (store_len != 8 and store_len != 20):
            return _result(AppendMessageStatus.MESSAGE_SIZE_EXCEEDED), []
        body = batch.body
        extra = batch.properties.encode()
        hsize = header.size
        per_record = hsize + 2 + len(tfield) - BATCH_ENTRY_OVERHEAD + (len(extra) + 1 if extra else 0)
        try:
            count = count_batch_entries(body)
        except RecordFormatError:
            return _result(AppendMessageStatus.MESSAGE_SIZE_EXCEEDED), []
        bound = len(body) + count * per_record
        if count == 0 or bound - count > self.max_record_size:
            return _result(AppendMessageStatus.MESSAGE_SIZE_EXCEEDED), []
        try:
            mapped = self._file_with_room(bound)
        except OSError:
            return _result(AppendMessageStatus.UNKNOWN_ERROR), []
        if mapped is None:
            return _result(AppendMessageStatus.NOT_RESERVED), []
        queues = self.topic_queue_table.get(topic)
        if queues is None:
            queues = self.topic_queue_table[topic] = {}
        queue_id = batch.queue_id
        first_queue_offset = queues.get(queue_id, 0)
        start = mapped.wrote_position
        now = time.time_ns() // 1_000_000
        try:
            end, units = self._write_batch(mapped, header, body, tfield, extra, sys_flag, queue_id,
                                           first_queue_offset, batch.born_timestamp, born_host, now, store_host)
        except BatchFormatError:
            mapped.view[start:min(start + bound, self.file_size)] = bytes(min(bound, self.file_size - start))
            return _result(AppendMessageStatus.MESSAGE_SIZE_EXCEEDED), []
        if end - start > self.max_record_size:
            mapped.view[start:end] = bytes(end - start)
            return _result(AppendMessageStatus.MESSAGE_SIZE_EXCEEDED), []
        mapped.wrote_position = end
        queues[queue_id] = first_queue_offset + count
        self.last_store_timestamp = now
        base = mapped.file_from_offset
        result = AppendMessageResult(_PUT_OK, base + start, end - start, now, first_queue_offset, count, store_host,
                                     [u[0] for u in units])
        return result, units

    def _write_batch(self, mapped: MappedFile, header: struct.Struct, body: bytes, tfield: bytes, extra: bytes,
                     sys_flag: int, queue_id: int, queue_offset: int, born_ts: int, born_host: bytes, now: int,
                     store_host: bytes) -> tuple[int, BatchDispatch]:
        """The second pass of :meth:`append_batch`: every entry's record written in one pass by
        :func:`pocketmq.common.record_encoder.encode_batch_records_into` (compiled); returns the file position after
        the last record and the records' units. BatchFormatError for entries that do not add up."""
        try:
            return encode_batch_records_into(mapped.view, mapped.wrote_position, mapped.file_from_offset, header,
                                             body, tfield, extra, sys_flag, queue_id, queue_offset, born_ts,
                                             born_host, now, store_host, self._tags_code_in)
        except RecordFormatError as exc:
            raise BatchFormatError(str(exc)) from None

    def _tags_code_in(self, props: bytes, value: bytes, plain: bool) -> int:
        """Tag code of ``props`` whose last ``TAGS\\x01`` is followed by ``value``; ``plain`` says that
        match is a key (at the start or after a separator), else the full parse decides."""
        if not plain:
            return tags_code_of_bytes(props)
        code = self._tag_codes.get(value)
        if code is None:
            code = java_string_hash(value.decode(errors="replace")) if value else 0
            if len(self._tag_codes) >= _MAX_CACHED_TOPICS:
                self._tag_codes.clear()
            self._tag_codes[value] = code
        return code

    def raw_room(self, offset: int, size: int) -> bool:
        """True when :meth:`append_raw` of ``size`` bytes at ``offset`` (a slave's transfer: it never crosses a
        file boundary) will neither create a file nor reserve in the caller's thread. Never blocks: it rolls
        to a next file that is already created, and asks the allocator's thread for a missing file or
        reservation (:meth:`wait_raw_room` waits for them)."""
        queue = self.queue
        mapped = queue.last
        if mapped is not None and mapped.is_full and offset == mapped.file_end_offset:
            created = queue.request_file(offset)
            if created is not None and not created.done():
                return False
            mapped = queue.roll()  # takes the file just created: no blocking
        if mapped is None or not mapped.file_from_offset <= offset < mapped.file_end_offset:
            if offset % self.file_size or offset < self.max_offset:
                return True  # no file starts there: append_raw (or the client's check) refuses the bytes
            # an empty log, or a restart at a file boundary: its first file is made in the allocator's thread
            created = queue.request_file(offset, reserve=offset % self.file_size + size + queue.window)
            return created is None or created.done()
        end = min(offset + size, mapped.file_end_offset) - mapped.file_from_offset
        return end <= mapped.limit or queue.make_room(mapped, end)

    async def wait_raw_room(self, offset: int, size: int) -> None:
        """Wait (without blocking the loop) until :meth:`raw_room` holds (raises OSError, e.g. ENOSPC)."""
        queue = self.queue
        while not self.raw_room(offset, size):
            mapped = queue.last
            if mapped is not None and mapped.file_from_offset <= offset < mapped.file_end_offset:
                await queue.wait_room(mapped, min(offset + size, mapped.file_end_offset) - mapped.file_from_offset)
                continue
            created = queue.request_file(offset)
            if created is not None:
                await wait_shared(created)

    def append_raw(self, offset: int, data: bytes | memoryview) -> bool:
        """Slave side: write bytes received from the master at exactly ``offset``, which must be the
        current max offset (or, on an empty log, the start of a file). False when it is not; the caller
        then drops the connection and reports its real offset. Raises OSError if a file cannot be made or
        reserved. The replication client makes sure of :meth:`raw_room` first, so that nothing here blocks;
        a caller that did not (tools, tests) gets the file or the reservation made in its thread."""
        view = memoryview(data)
        if not self.queue.files:
            if offset % self.file_size:
                return False
            self.queue.roll(offset)
        elif offset != self.max_offset:
            return False
        while view:
            mapped = self.queue.last
            assert mapped is not None
            if mapped.is_full:
                mapped = self.queue.roll()
            pos = mapped.wrote_position
            n = min(len(view), self.file_size - pos)
            self.queue.ensure_room(mapped, pos + n)
            mapped.view[pos:pos + n] = view[:n]
            mapped.wrote_position = pos + n
            view = view[n:]
        return True

    def truncate_written_tail(self, offset: int) -> list[MappedFile]:
        """Forget the written bytes from ``offset`` on (bad replicated data): zero them in the file that
        holds ``offset`` and return the later files for the caller to destroy."""
        holder = self.queue.find(offset)
        written = holder.wrote_position if holder is not None else 0
        removed = self.queue.truncate(offset)
        if holder is not None:
            start = offset - holder.file_from_offset
            if written > start:
                holder.view[start:written] = bytes(written - start)
        return removed

    # ---------------------------------------------------------------------------------------- reads

    def get_message(self, offset: int, size: int) -> memoryview | None:
        """Zero-copy view of the record at ``offset`` (``size`` bytes), None if gone or not written."""
        mapped = self.queue.find(offset)
        if mapped is None:
            return None
        return mapped.select(offset - mapped.file_from_offset, size)

    def get_data(self, offset: int, max_bytes: int | None = None) -> memoryview | None:
        """The written bytes from ``offset`` to the end of its file (replication reads), capped."""
        mapped = self.queue.find(offset)
        if mapped is None:
            return None
        pos = offset - mapped.file_from_offset
        size = mapped.wrote_position - pos
        if max_bytes is not None:
            size = min(size, max_bytes)
        return mapped.select(pos, size) if size > 0 else None

    def look_message(self, offset: int, size: int | None = None) -> MessageRecord | None:
        """Decode the record at ``offset``; None if there is no valid record there."""
        mapped = self.queue.find(offset)
        if mapped is None or offset - mapped.file_from_offset + 8 > mapped.wrote_position:
            return None
        pos = offset - mapped.file_from_offset
        limit = mapped.wrote_position if size is None else min(mapped.wrote_position, pos + size)
        try:
            record = decode_record(mapped.view, pos, limit=limit, check_crc=False, expected_offset=offset)
        except RecordFormatError:
            return None
        return record if isinstance(record, MessageRecord) else None

    def pickup_store_timestamp(self, offset: int, size: int) -> int:
        """STORETIMESTAMP of the record at ``offset``; -1 if it is gone."""
        view = self.get_message(offset, size)
        if view is None or size < SYS_FLAG_OFFSET + 4:
            return -1
        sys_flag = INT32.unpack_from(view, SYS_FLAG_OFFSET)[0]
        at = store_timestamp_offset(sys_flag)
        return int(INT64.unpack_from(view, at)[0]) if at + 8 <= size else -1

    def scan(self, start: int, *, check_crc: bool, written_only: bool) -> CommitLogScanner:
        """Walk the records from ``start`` (a record or file boundary); see :class:`CommitLogScanner`."""
        return CommitLogScanner(self.queue, start, check_crc=check_crc, written_only=written_only)


class CommitLogScanner:
    """Iterates the valid records of a commit log from a record boundary, following blank markers into
    the next file, and stops at the first thing that is not a valid record.

    After iteration ``end_offset`` is where the valid log ends and ``error`` says why it ended there
    (None at the end of the last file or of the written data). ``written_only`` limits each file to its
    ``wrote_position`` (a live log: a slave catching up), otherwise the whole file's data is examined
    (recovery, where positions are not known yet: past the file's last data page everything reads as zeros,
    and is not touched, see :meth:`MappedFile.data_ranges`); a record cut by the written limit ends the scan
    with ``incomplete`` set rather than as damage.
    """

    def __init__(self, queue: MappedFileQueue, start: int, *, check_crc: bool, written_only: bool) -> None:
        self.queue = queue
        self.end_offset = start
        self.check_crc = check_crc
        self.written_only = written_only
        self.error: RecordFormatError | None = None
        self.incomplete = False

    def __iter__(self) -> Iterator[DispatchRequest]:
        while True:
            mapped = self.queue.find(self.end_offset)
            if mapped is None:
                return
            base = mapped.file_from_offset
            view, limit = (mapped.view, mapped.wrote_position) if self.written_only else _data_of(mapped)
            pos = self.end_offset - base
            try:
                while pos < limit:
                    try:
                        item = check_record(view, pos, limit, base_offset=base, check_crc=self.check_crc)
                    except RecordFormatError as exc:
                        if not self.written_only and _blank_past_data(view, pos, limit, mapped.file_size):
                            pos = mapped.file_size
                            break
                        # In a live log the written limit can fall inside a record: that record is unfinished, not
                        # damaged, even when its first bytes so far are zeros (TOTALSIZE starts with zero bytes).
                        if self.written_only and (exc.reason == "truncated record"
                                                  or (exc.is_end_of_data and limit - pos < SIZE_AND_MAGIC.size)):
                            self.incomplete = True
                        else:
                            self.error = exc
                        return
                    if isinstance(item, Blank):
                        pos = mapped.file_size
                        break
                    yield item
                    pos += item.msg_size
                    self.end_offset = base + pos
            finally:
                if view is not mapped.view:  # a slice kept alive (an error's traceback holds this frame) pins the map
                    view.release()
            if pos < mapped.file_size:  # stopped at the written limit of a live file
                return
            self.end_offset = mapped.file_end_offset


def _data_of(mapped: MappedFile) -> tuple[memoryview, int]:
    """The part of a file recovery may read (its data, see :meth:`MappedFile.data_ranges`) and its end."""
    end = mapped.data_end()
    return (mapped.view, end) if end >= mapped.file_size else (mapped.view[:end], end)


def _blank_past_data(view: memoryview, pos: int, limit: int, file_size: int) -> bool:
    """True for a blank marker at ``pos`` whose claimed rest of the file runs past the data (holes, zeros):
    what ``check_record`` takes for a truncated record when it is given only the data."""
    if pos + SIZE_AND_MAGIC.size > limit:
        return False
    size, magic = SIZE_AND_MAGIC.unpack_from(view, pos)
    return bool(magic == BLANK_MAGIC_CODE and END_FILE_MIN_BLANK_LENGTH <= size <= file_size - pos)
