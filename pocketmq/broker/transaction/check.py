"""``TransactionalMessageCheckService``: checks unresolved half messages back with their producers (masters only;
RocketMQ's ``TransactionalMessageCheckService`` and ``TransactionalMessageServiceImpl.check``).

Every ``transactionCheckInterval`` it reads the op records written since the last round, then walks the half
queue from its progress offset, in order:

* a half with an outcome, or superseded by a later copy of its transaction, is passed;
* one checked ``transactionCheckMax`` times already is discarded to ``TRANS_CHECK_MAX_TIME_TOPIC``;
* one younger than ``transactionTimeOut`` (or its ``CHECK_IMMUNITY_TIME_IN_SECONDS``) since it was born ends the
  round, as does a copy written in this round: the halves behind it are younger (RocketMQ stops there too);
* any other is copied to the end of the half queue with ``TRANSACTION_CHECK_TIMES`` + 1 and the copy is sent in a
  CHECK_TRANSACTION_STATE (39, oneway) to a live connection of its producer group (from heartbeats; none: the
  check still counts). The producer answers with END_TRANSACTION naming the copy.

A round reads at most ``max_per_round`` halves and ``max_ops_per_round`` op records, yields to the loop between
store reads and never touches the send path. The progress offsets are written to the consumer offsets
(``CID_SYS_RMQ_TRANS``) after each round and persisted with them.
"""

from __future__ import annotations

import asyncio
import random
import time

from pocketmq.broker.client_manager import ClientManager
from pocketmq.broker.topic_manager import TopicConfigManager
from pocketmq.broker.transaction.book import TransactionBook
from pocketmq.broker.transaction.bridge import check_times, real_destination, transaction_key
from pocketmq.broker.transaction.service import TransactionalMessageService
from pocketmq.common.logs import get_logger
from pocketmq.common.message import MessageConst, get_property
from pocketmq.common.record import MessageRecord
from pocketmq.common.service import PeriodicService
from pocketmq.common.topic import RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC
from pocketmq.common.topic_config import PermName
from pocketmq.remoting.codes import RequestCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection
from pocketmq.remoting.headers import CheckTransactionStateRequestHeader
from pocketmq.store.message import MessageExtBrokerInner
from pocketmq.store.results import PutMessageResult

log = get_logger("pocketmq.broker.transaction.check")

READ_CHUNK = 32
_IMMUNITY = MessageConst.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS
_UNIQ = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_PGROUP = MessageConst.PROPERTY_PRODUCER_GROUP


def immunity_ms(record: MessageRecord, timeout_ms: int) -> int:
    """How long after its birth a half message is left alone: ``CHECK_IMMUNITY_TIME_IN_SECONDS`` when it is a
    valid number of seconds (shorter or longer), else ``transactionTimeOut`` (RocketMQ's ``getImmunityTime``)."""
    raw = get_property(record.properties, _IMMUNITY)
    if raw is None or not raw.strip().isdigit():
        return timeout_ms
    return int(raw.strip()) * 1000


class TransactionalMessageCheckService(PeriodicService):
    """The periodic check-back; see the module docstring."""

    name = "transaction-check"

    def __init__(self, service: TransactionalMessageService, clients: ClientManager, topics: TopicConfigManager,
                 *, interval_ms: int, timeout_ms: int, check_max: int, max_per_round: int = 2000,
                 max_ops_per_round: int = 20_000) -> None:
        super().__init__(interval_ms / 1000)
        self.service = service
        self.clients = clients
        self.topics = topics
        self.timeout_ms = timeout_ms
        self.check_max = check_max
        self.max_per_round = max_per_round
        self.max_ops_per_round = max_ops_per_round

    @property
    def book(self) -> TransactionBook:
        return self.service.book

    async def tick(self) -> None:
        await self.check_once()

    async def check_once(self) -> int:
        """One round; returns how many half messages were checked back."""
        service = self.service
        if not service.loaded:
            return 0
        try:
            if not await service.read_new_ops(self.max_ops_per_round):
                return 0  # more op records than a round reads: the halves wait for the next round
            return await self._scan(int(time.time() * 1000))
        finally:
            service.bridge.save_progress(self.book.half_progress, self.book.op_progress)

    async def _scan(self, started_ms: int) -> int:
        book, bridge = self.book, self.service.bridge
        book.skip_to(bridge.half_min_offset())
        end = bridge.half_max_offset()
        budget, checked = self.max_per_round, 0
        while book.half_progress < end and budget > 0:
            records, next_offset = bridge.read_halves(book.half_progress, READ_CHUNK)
            if not records:
                if next_offset > book.half_progress:
                    book.skip_to(next_offset)
                    continue
                break
            for record in records:
                budget -= 1
                verdict = await self._visit(record, started_ms)
                if verdict is None:
                    return checked
                checked += verdict
            await asyncio.sleep(0)
        return checked

    async def _visit(self, record: MessageRecord, started_ms: int) -> int | None:
        """Handle one half message; 1 when it was checked back, 0 when passed, None to end the round."""
        book, offset = self.book, record.queue_offset
        key = transaction_key(record.properties, offset)
        if book.settled(key, offset):
            book.passed(key, offset)
            return 0
        times = check_times(record)
        if times >= self.check_max or real_destination(record) is None:
            if not await self._discard(record):
                return None
            book.passed(key, offset)
            return 0
        if record.store_timestamp >= started_ms:
            return None  # a copy made in this round
        now = int(time.time() * 1000)
        if now - record.born_timestamp < immunity_ms(record, self.timeout_ms):
            return None
        copy = await self._put(self.service.bridge.copy_message(record, times + 1))
        if copy is None or copy.append_result is None:
            return None
        copied = self.service.bridge.look_half(copy.append_result.wrote_offset)
        if copied is None:
            return None
        dest = real_destination(record)
        book.track(key, copied.queue_offset, dest[0] if dest else "", get_property(record.properties, _PGROUP) or "")
        book.passed(key, offset)
        if book.resolved(key):
            return 0  # END_TRANSACTION arrived while the copy was written: nothing to ask
        self.service.counters.checked += 1
        self._send_check(copied)
        return 1

    async def _put(self, msg: MessageExtBrokerInner) -> PutMessageResult | None:
        stored = self.service.store.put(msg)
        result = stored if isinstance(stored, PutMessageResult) else await stored
        if not result.status.is_stored:
            log.warning("transaction_check_put_failed", topic=msg.topic, status=result.status.name)
            return None
        return result

    async def _discard(self, record: MessageRecord) -> bool:
        self.topics.create_system_topic(RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, 1, PermName.PERM_READ | PermName.PERM_WRITE)
        if await self._put(self.service.bridge.discard_message(record)) is None:
            return False
        self.service.counters.discarded += 1
        log.warning("transaction_half_discarded", half_offset=record.queue_offset, check_times=check_times(record),
                    group=get_property(record.properties, _PGROUP), uniq_key=get_property(record.properties, _UNIQ))
        return True

    def _send_check(self, record: MessageRecord) -> None:
        group = get_property(record.properties, _PGROUP) or ""
        conn = self.producer_connection(group)
        if conn is None:
            log.warning("transaction_check_no_producer", group=group, half_offset=record.queue_offset)
            return
        uniq = get_property(record.properties, _UNIQ)
        header = CheckTransactionStateRequestHeader(
            tran_state_table_offset=record.queue_offset, commit_log_offset=record.physical_offset,
            msg_id=uniq, transaction_id=uniq, offset_msg_id=record.msg_id,
            topic=get_property(record.properties, MessageConst.PROPERTY_REAL_TOPIC),
        )
        request = RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, header.to_fields(),
                                          self.service.bridge.check_body(record), oneway=True)
        try:
            conn.send(request)
        except Exception as exc:  # a connection closing under us: the next round checks again
            log.warning("transaction_check_send_failed", group=group, peer=conn.remote_addr, error=str(exc))

    def producer_connection(self, group: str) -> Connection | None:
        """A live connection of a producer of ``group`` (heartbeats register them), chosen at random."""
        channels = [ch.connection for ch in self.clients.producers.get(group, {}).values()
                    if not ch.connection.is_closed]
        return random.choice(channels) if channels else None
