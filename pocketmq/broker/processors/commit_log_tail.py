"""``CommitLogTailProcessor``: GET_COMMIT_LOG_TAIL (9001, PocketMQ-private), a slave's answer to its master.

After a power loss a master may restart with a shorter commit log than its slave's; before it takes any write
it asks the slave for the missing tail (:mod:`pocketmq.broker.tail_recovery`). The answer is the raw commit-log bytes
from ``offset`` to the end of the file that holds it, at most ``maxBytes`` (capped at
:data:`~pocketmq.broker.tail_recovery.MAX_CHUNK_BYTES`; 0 asks only for the bounds), with the slave's ``maxOffset`` and
``minOffset``. An ``offset`` at or past the slave's max is answered with no bytes (the slave is not ahead).
Clear errors, with the reason as the remark: a master (it never holds bytes its slave lacks: only a slave
serves this), a negative ``offset`` or ``maxBytes``, an ``offset`` already deleted, or one that is not the
start of a record in the slave's log (the two logs do not meet there). It reads the mapped file and copies at
most one answer's bytes; it never writes.
"""

from __future__ import annotations

from collections.abc import Callable

from pocketmq.broker.tail_recovery import (
    MAX_CHUNK_BYTES,
    CommitLogTailRequestHeader,
    CommitLogTailResponseHeader,
    complete_records,
)
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection, Handler
from pocketmq.store.message_store import MessageStore

#: Bytes read to check that ``offset`` starts a record when the request asks for none (a record's fixed
#: fields up to its PHYSICALOFFSET).
_PROBE_BYTES = 36


class CommitLogTailProcessor:
    """GET_COMMIT_LOG_TAIL against one store (see the module docstring); ``role`` names the broker's role."""

    def __init__(self, *, store: MessageStore, role: Callable[[], str]) -> None:
        self.store = store
        self.role = role

    def handlers(self) -> dict[int, Handler]:
        return {RequestCode.GET_COMMIT_LOG_TAIL: self.get_tail}

    def get_tail(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        role = self.role()
        if role != "SLAVE":
            return req.response(ResponseCode.SYSTEM_ERROR, f"GET_COMMIT_LOG_TAIL is served by a slave only; this "
                                                           f"broker is a {role}")
        h = CommitLogTailRequestHeader.from_command(req)
        store = self.store
        max_offset, min_offset = store.max_phy_offset, store.min_phy_offset
        fields = CommitLogTailResponseHeader(max_offset, min_offset).to_fields()
        if h.offset < 0 or h.max_bytes < 0:
            return req.response(ResponseCode.SYSTEM_ERROR, f"offset and maxBytes must be >= 0, got offset={h.offset} "
                                                           f"maxBytes={h.max_bytes}", ext_fields=fields)
        if h.offset >= max_offset:
            return req.response(ResponseCode.SUCCESS, ext_fields=fields)
        data = store.get_commit_log_data(h.offset, min(max(h.max_bytes, _PROBE_BYTES), MAX_CHUNK_BYTES))
        if h.offset < min_offset or data is None:
            return req.response(ResponseCode.SYSTEM_ERROR, f"offset {h.offset} is no longer in this slave's commit "
                                                           f"log (min offset {min_offset})", ext_fields=fields)
        if complete_records(data, h.offset, store.config.mapped_file_size_commit_log) is None:
            return req.response(ResponseCode.SYSTEM_ERROR, f"offset {h.offset} is not the start of a record in "
                                                           f"this slave's commit log", ext_fields=fields)
        return req.response(ResponseCode.SUCCESS, ext_fields=fields, body=bytes(data[:h.max_bytes]))
