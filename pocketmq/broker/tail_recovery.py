"""``TailRecovery``: after an abnormal start, a master takes back from its slave the commit-log tail it lost.

A power loss of a master with ASYNC_FLUSH takes whatever its page cache held: recovery ends the log at
``recovered_max``, although a slave may hold more, and with SYNC_MASTER every SEND_OK was answered once a
slave had its bytes. Before the master takes any write (before its HA port, the transaction bookkeeping, the
request handlers and serving), :meth:`TailRecovery.run` copies the range ``[recovered_max, slave's max)``
from the longest slave and appends it exactly as a slave appends replicated bytes (``commit_log_room`` /
``wait_commit_log_room``, ``append_to_commit_log(dispatch=False)``, ``dispatch_replicated`` and
``prepare_dispatch``: the same checked path, consume queues, index and file boundaries included), then moves
the store's ``recovered_max`` to the new end, so the HA connection's rewind (:mod:`pocketmq.ha.connection`) and the
pull rewind guard (:mod:`pocketmq.broker.rewind_guard`) measure from what the master now holds.

Decisions, and why:

* **Which slave.** The name servers know the group's members (GET_BROKER_CLUSTER_INFO, ids other than 0);
  the master has no other list (a slave connects to it, not the other way round), and at this point no slave
  can reach it. Every slave listed is asked at once and the longest one is taken: with SYNC_MASTER the one
  that acknowledged a SEND_OK holds it, and a longer log of the same master is a superset of a shorter one.
  No name server configured, or every name server answering with no slave: nothing to wait for, the start
  goes on at once.
* **How.** A PocketMQ-private request on the slave's broker port, ``GET_COMMIT_LOG_TAIL``
  (:data:`pocketmq.remoting.codes.RequestCode.GET_COMMIT_LOG_TAIL`, :mod:`pocketmq.broker.processors.commit_log_tail`):
  header ``offset`` and ``maxBytes``, answer the raw bytes from one file and the slave's ``maxOffset``. The HA
  port cannot serve it: on it the master is the server and a slave only reports offsets.
* **What is taken.** Only whole records, each one checked (size, magic, its PHYSICALOFFSET field equal to
  where it lands, a blank end-of-file marker ending exactly at its file's end) before anything is written:
  the first record at our max proves the two logs meet at a record boundary; a slave whose max is in the
  middle of a record (a transfer cut short) gives the whole records before it, and the partial one, never
  acknowledged, is left. ``dispatch_replicated`` checks again; when it refuses, the store keeps the valid
  records, the copy stops and is logged.
* **Bounded.** One total budget, ``haTailRecoveryTimeoutMs`` (default 10 s; 0 turns the step off), covers
  the name servers and the slave; each request has its own timeout within it (a frozen slave accepts TCP
  connections and never answers). When it runs out, the broker starts with what it has, and says loudly what
  may be lost (``tail_recovery_incomplete``): the slave is then cut back to the master's log when it
  reconnects, as before this step (:mod:`pocketmq.ha.client`), so the two never disagree at an offset.
* **A slave behind** the recovered end has nothing to give: normal catch-up follows.
* **ACL.** The answer is every topic's bytes, so the code is admin-only (``remoting.plain_acl.permission``); like
  the slave's copying of its master's metadata, the broker's own requests are not signed, so with
  ``aclEnable`` the brokers' addresses belong in ``globalWhiteRemoteAddresses``.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from pocketmq.common.logs import get_logger
from pocketmq.common.record import BLANK_MAGIC_CODE, INT64, MESSAGE_MAGIC_CODE, PHYSICAL_OFFSET_OFFSET, SIZE_AND_MAGIC
from pocketmq.remoting import route as rd
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import PocketMQError
from pocketmq.remoting.headers import CommandHeader
from pocketmq.store.errors import StoreError
from pocketmq.store.message_store import MessageStore

log = get_logger("pocketmq.broker.tail_recovery")

#: Bytes asked per request (a record bigger than this makes the next request ask for more, up to the cap).
CHUNK_BYTES = 1 << 20
#: The most one answer carries (a record is at most maxMessageSize, 4 MiB, plus its header; frames: 16 MiB).
MAX_CHUNK_BYTES = 8 << 20
#: Timeout of one request, within the total budget (s).
REQUEST_TIMEOUT = 3.0
#: Pause between two rounds when no name server or no slave answered (s).
RETRY_PAUSE = 0.2
#: What :meth:`TailRecovery._probe` says of a slave that answered an error.
REFUSED = -1
#: The smallest message record (91 bytes of fixed fields and a one-byte topic).
MIN_RECORD = 92


@dataclass(frozen=True, slots=True)
class CommitLogTailRequestHeader(CommandHeader):
    """GET_COMMIT_LOG_TAIL's request: raw commit-log bytes from ``offset``, at most ``max_bytes``."""

    offset: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class CommitLogTailResponseHeader(CommandHeader):
    """GET_COMMIT_LOG_TAIL's answer header: the slave's commit-log bounds."""

    max_offset: int
    min_offset: int


class SlaveRefused(Exception):
    """The slave answered with an error (its remark is logged)."""


@dataclass(frozen=True, slots=True)
class TailResult:
    """What :meth:`TailRecovery.run` did (for logs and tests)."""

    outcome: str
    bytes: int = 0
    records: int = 0
    slave: str | None = None
    slave_max: int | None = None


def complete_records(data: bytes | memoryview, offset: int, file_size: int) -> tuple[int, int] | None:
    """``(length, messages)`` of the longest prefix of ``data`` (commit-log bytes at ``offset``) made of whole,
    well-formed records; None when ``data`` does not start with a record that belongs at ``offset``."""
    pos, messages, end = 0, 0, len(data)
    while pos + 8 <= end:
        size, magic = SIZE_AND_MAGIC.unpack_from(data, pos)
        here = offset + pos
        room = file_size - here % file_size
        if magic == BLANK_MAGIC_CODE:
            ok = size == room
        elif magic == MESSAGE_MAGIC_CODE:
            ok = MIN_RECORD <= size <= room - 8 and (
                pos + PHYSICAL_OFFSET_OFFSET + 8 > end
                or INT64.unpack_from(data, pos + PHYSICAL_OFFSET_OFFSET)[0] == here)
        else:
            ok = False
        if not ok:
            return None if pos == 0 else (pos, messages)
        if pos + size > end:
            break
        pos += size
        messages += magic == MESSAGE_MAGIC_CODE
    return pos, messages


class TailRecovery:
    """See the module docstring: ``await TailRecovery(...).run()`` once, right after the store started."""

    def __init__(self, store: MessageStore, client: RemotingClient, namesrv_addrs: list[str], *,
                 broker_name: str, timeout_ms: int) -> None:
        self._store = store
        self._client = client
        self._namesrv_addrs = list(namesrv_addrs)
        self._broker_name = broker_name
        self._timeout = timeout_ms / 1000
        self._deadline = 0.0
        self._file_size = store.config.mapped_file_size_commit_log

    def _left(self) -> float:
        return self._deadline - time.monotonic()

    async def run(self) -> TailResult:
        store = self._store
        start = store.recovered_max
        if start is None:
            return TailResult("clean_start")
        if self._timeout <= 0:
            log.warning("tail_recovery_disabled", recovered_max=start)
            return TailResult("disabled")
        self._deadline = time.monotonic() + self._timeout
        slaves = await self._find_slaves()
        if slaves is None:
            return self._incomplete(start, "no name server answered", None, None)
        if not slaves:
            log.info("tail_recovery_no_slave", recovered_max=start)
            return TailResult("no_slave")
        found = await self._longest(slaves)
        if found is None:
            return self._incomplete(start, "no slave answered", None, None)
        slave, slave_max = found
        if slave_max == REFUSED:
            log.error("tail_recovery_refused_by_every_slave", slaves=slaves, recovered_max=start)
            return TailResult("refused", slave=slave)
        if slave_max <= start:
            log.info("tail_recovery_slave_not_ahead", slave=slave, slave_max=slave_max, recovered_max=start)
            return TailResult("slave_not_ahead", slave=slave, slave_max=slave_max)
        result = await self._copy(slave, slave_max)
        store.recovered_max = store.max_phy_offset
        return result

    # -- the slaves -------------------------------------------------------------------------------------------

    async def _find_slaves(self) -> list[str] | None:
        """The group's slave addresses as the name servers list them; None when none answered in time."""
        if not self._namesrv_addrs:
            return []
        while True:
            answers = await asyncio.gather(*(self._slaves_from(ns) for ns in self._namesrv_addrs))
            known = [a for a in answers if a is not None]
            if known:
                return sorted({addr for addrs in known for addr in addrs})
            if self._left() <= RETRY_PAUSE:
                return None
            await asyncio.sleep(RETRY_PAUSE)

    async def _slaves_from(self, namesrv: str) -> list[str] | None:
        request = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO, {})
        response = await self._invoke(namesrv, request)
        if response is None or response.code != ResponseCode.SUCCESS:
            return None
        try:
            info = rd.decode_cluster_info(bytes(response.body or b"{}"), response.serialize_type)
        except PocketMQError as exc:
            log.warning("tail_recovery_bad_cluster_info", namesrv=namesrv, error=str(exc))
            return None
        data = info.broker_addr_table.get(self._broker_name)
        return [addr for bid, addr in data.broker_addrs.items() if bid != 0] if data is not None else []

    async def _longest(self, slaves: list[str]) -> tuple[str, int] | None:
        """The slave with the highest max offset, asked until one answers or the budget runs out; its max is
        :data:`REFUSED` when every slave that answered refused (none can give bytes from our max offset)."""
        offset = self._store.max_phy_offset
        while True:
            answers = await asyncio.gather(*(self._probe(slave, offset) for slave in slaves))
            known = [(a, slave) for slave, a in zip(slaves, answers, strict=True) if a is not None]
            if known and (len(known) == len(slaves) or max(known)[0] != REFUSED):
                slave_max, slave = max(known)
                return slave, slave_max
            if self._left() <= RETRY_PAUSE:
                return None
            await asyncio.sleep(RETRY_PAUSE)

    async def _probe(self, slave: str, offset: int) -> int | None:
        """The slave's max offset; None: no answer; :data:`REFUSED`: an error answer (it cannot give bytes from
        ``offset``: deleted there, or not a record start in its log)."""
        try:
            answer = await self._ask(slave, offset, 0)
        except SlaveRefused:
            return REFUSED
        return answer[0] if answer is not None else None

    # -- the copy ---------------------------------------------------------------------------------------------

    async def _copy(self, slave: str, slave_max: int) -> TailResult:
        store = self._store
        start = store.max_phy_offset
        records, want, outcome = 0, CHUNK_BYTES, "recovered"
        while store.max_phy_offset < slave_max:
            offset = store.max_phy_offset
            try:
                answer = await self._ask(slave, offset, want)
            except SlaveRefused:
                outcome = "refused"
                break
            if answer is None:
                if self._left() <= 0:
                    outcome = "timeout"
                    break
                continue
            slave_max, data = answer
            whole = complete_records(data, offset, self._file_size)
            if whole is None:
                log.error("tail_recovery_not_a_record_boundary", slave=slave, offset=offset)
                outcome = "diverged"
                break
            length, messages = whole
            if length == 0:
                if len(data) < want or want >= MAX_CHUNK_BYTES:
                    break  # the slave's last record is incomplete: never acknowledged, left there
                want = min(want * 2, MAX_CHUNK_BYTES)
                continue
            try:
                appended = await self._append(offset, memoryview(data)[:length])
            except OSError as exc:  # no room for a file or a consume-queue unit: keep what is indexed
                log.error("tail_recovery_store_failed", offset=offset, error=str(exc))
                await self._cut_unindexed()
                outcome = "store_error"
                break
            if not appended:
                outcome = "invalid"
                break
            records += messages
        taken = store.max_phy_offset - start
        if outcome == "recovered":
            log.warning("tail_recovered_from_slave", slave=slave, bytes=taken, records=records, from_offset=start,
                        max_offset=store.max_phy_offset, slave_max=slave_max)
            return TailResult(outcome, taken, records, slave, slave_max)
        if outcome == "timeout":
            return self._incomplete(start, "the slave stopped answering", slave, slave_max, taken, records)
        log.error("tail_recovery_stopped", reason=outcome, slave=slave, bytes=taken, records=records,
                  max_offset=store.max_phy_offset, slave_max=slave_max)
        return TailResult(outcome, taken, records, slave, slave_max)

    async def _append(self, offset: int, data: memoryview) -> bool:
        """Append one checked chunk as a slave appends a transfer, and index it; False when the store refuses
        (it keeps the valid records)."""
        store = self._store
        if not store.commit_log_room(offset, len(data)):
            await store.wait_commit_log_room(offset, len(data))
        if not store.append_to_commit_log(offset, data, dispatch=False):
            log.error("tail_recovery_append_refused", offset=offset, size=len(data), max_offset=store.max_phy_offset)
            return False
        while True:
            if not store.dispatch_replicated():
                log.error("tail_recovery_invalid_records", offset=offset, max_offset=store.max_phy_offset)
                return False
            if not store.dispatch_waiting:
                return True
            await store.prepare_dispatch()

    async def _cut_unindexed(self) -> None:
        """After a failed dispatch, cut the log back to the last record indexed, so that the master's puts never
        follow records its consume queues lack."""
        store = self._store
        behind = store.dispatch_behind_bytes
        if behind > 0 and not await store.truncate_commit_log(store.max_phy_offset - behind):
            raise StoreError("the commit log could not be cut back to its indexed end")

    async def _ask(self, slave: str, offset: int, max_bytes: int) -> tuple[int, bytes] | None:
        """One GET_COMMIT_LOG_TAIL: (the slave's max offset, the bytes); None when it did not answer (in time, or
        readably); raises :class:`SlaveRefused` when it answered an error."""
        header = CommitLogTailRequestHeader(offset, max_bytes).to_fields()
        response = await self._invoke(slave, RemotingCommand.request(RequestCode.GET_COMMIT_LOG_TAIL, header))
        if response is None:
            return None
        if response.code != ResponseCode.SUCCESS:
            log.warning("tail_recovery_refused", slave=slave, offset=offset, code=response.code,
                        remark=response.remark)
            raise SlaveRefused(response.remark or "")
        try:
            bounds = CommitLogTailResponseHeader.from_command(response)
        except PocketMQError as exc:
            log.warning("tail_recovery_bad_answer", slave=slave, error=str(exc))
            raise SlaveRefused(str(exc)) from None
        return bounds.max_offset, bytes(response.body or b"")

    async def _invoke(self, addr: str, request: RemotingCommand) -> RemotingCommand | None:
        left = self._left()
        if left <= 0:
            return None
        try:
            return await asyncio.wait_for(self._client.invoke(addr, request, min(left, REQUEST_TIMEOUT)),
                                          min(left, REQUEST_TIMEOUT) + 0.5)
        except (PocketMQError, OSError, TimeoutError) as exc:
            log.info("tail_recovery_request_failed", addr=addr, code=int(request.code),
                     error=str(exc) or type(exc).__name__)
            if self._left() > 0:
                await asyncio.sleep(min(RETRY_PAUSE, max(self._left(), 0)))
            return None

    def _incomplete(self, start: int, why: str, slave: str | None, slave_max: int | None, taken: int = 0,
                    records: int = 0) -> TailResult:
        store = self._store
        log.error("tail_recovery_incomplete", reason=why, timeout_ms=int(self._timeout * 1000), recovered_max=start,
                  max_offset=store.max_phy_offset, slave=slave, slave_max=slave_max, bytes=taken, records=records,
                  may_be_lost=("bytes past max_offset that a slave held: it is cut back to the master's log when it "
                               "reconnects"))
        return TailResult("timeout", taken, records, slave, slave_max)


__all__ = ["CommitLogTailRequestHeader", "CommitLogTailResponseHeader", "SlaveRefused", "TailRecovery", "TailResult",
           "complete_records"]
