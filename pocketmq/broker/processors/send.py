"""``SendMessageProcessor``: SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320).

The checks are RocketMQ's (``msgCheck`` and friends), each answering with a clear code and remark before
anything is stored. Puts go through the store's one put path (:meth:`pocketmq.store.message_store.MessageStore.put`,
which also waits for a SYNC_MASTER's replica). The hot path is synchronous: with ASYNC_FLUSH on an
ASYNC_MASTER the store returns the result itself and the send is answered inside the connection's
``data_received`` with no task; only a put that must wait (SYNC_FLUSH, a SYNC_MASTER's replica, a
consume-queue file to create) becomes a coroutine.
"""

from __future__ import annotations

import contextlib
import random
import time
import weakref
from collections.abc import Awaitable, Callable

from pocketmq.broker.metadata import SubscriptionGroupManager
from pocketmq.broker.status import put_status_to_response
from pocketmq.broker.topic_manager import TopicConfigManager
from pocketmq.broker.transaction.bridge import to_half_message
from pocketmq.broker.transaction.service import TransactionalMessageService
from pocketmq.common.batch import decode_batch_body
from pocketmq.common.message import MessageConst, get_property, join_properties
from pocketmq.common.recall import RecallHandle
from pocketmq.common.record import MAX_PROPERTIES_LENGTH, encode_host
from pocketmq.common.sysflag import MessageSysFlag
from pocketmq.common.topic import (
    NOT_ALLOWED_SEND_TOPIC_SET,
    RETRY_GROUP_TOPIC_PREFIX,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_WHEEL_TIMER_TOPIC,
    dlq_topic,
    is_retry_topic,
    validate_topic,
)
from pocketmq.common.topic_config import PermName
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection, Handler
from pocketmq.remoting.errors import InvalidHeaderError
from pocketmq.remoting.headers import SendMessageRequestHeader, SendMessageRequestHeaderV2
from pocketmq.store.message import MessageExtBatch, MessageExtBrokerInner
from pocketmq.store.message_store import MessageStore
from pocketmq.store.results import PutMessageResult, PutMessageStatus
from pocketmq.store.timer import TIMER_MARKER, TimerIllegal, check_timer, delay_level_wins, is_timer_candidate

SendHeader = SendMessageRequestHeader | SendMessageRequestHeaderV2

_TXN_MASK = MessageSysFlag.TRANSACTION_MASK
_TXN_PREPARED = MessageSysFlag.TRANSACTION_PREPARED_TYPE
_MAX_CHECKED_TOPICS = 10_000
_SAFE_PROPERTIES_CHARS = MAX_PROPERTIES_LENGTH // 4
"""Properties of at most this many characters cannot exceed the byte limit (UTF-8: at most 4 bytes each)."""
_WAIT_MARKER = MessageConst.PROPERTY_WAIT_STORE_MSG_OK + "\x01"
_WAIT_TRUE = _WAIT_MARKER + "true"
_WAIT_FALSE = _WAIT_MARKER + "false"
_TRAN_MARKER = MessageConst.PROPERTY_TRANSACTION_PREPARED + "\x01true"


def strip_property(properties: str, name: str) -> str:
    """``properties`` without the property ``name``."""
    marker = name + "\x01"
    if marker not in properties:
        return properties
    return "\x02".join(p for p in properties.split("\x02") if p and not p.startswith(marker))


def strip_wait(properties: str) -> tuple[str, bool]:
    """Remove the producer's WAIT property (RocketMQ does not store it); return (properties, wait)."""
    at = properties.find(_WAIT_MARKER)
    if at < 0:
        return properties, True
    end = properties.find("\x02", at)
    if (at == 0 and 0 < end < len(properties) - 1 and _WAIT_MARKER not in properties[end:]
            and "\x02\x02" not in properties and properties[-1] != "\x02"):
        # What every client sends (WAIT first, as RocketMQ's Message puts it): one slice, same result.
        return properties[end + 1:], _WAIT_FALSE not in properties
    wait = _WAIT_FALSE not in properties
    parts = [p for p in properties.split("\x02") if p and not p.startswith(_WAIT_MARKER)]
    return "\x02".join(parts), wait


class SendMessageProcessor:
    """Serves the three send codes for one broker."""

    def __init__(
        self,
        *,
        store: MessageStore,
        topics: TopicConfigManager,
        broker_name: str,
        cluster_name: str,
        broker_addr: Callable[[], str],
        is_slave: bool,
        broker_permission: Callable[[], int],
        region_id: str,
        trace_on: bool,
        groups: SubscriptionGroupManager | None = None,
        on_stored: Callable[[str, int, int], None] | None = None,
        transactions: TransactionalMessageService | None = None,
    ) -> None:
        self.store = store
        self.topics = topics
        self.broker_name = broker_name
        self.broker_addr = broker_addr
        self.is_slave = is_slave
        self.broker_permission = broker_permission
        self.groups = groups
        self.on_stored = on_stored
        #: prepared messages become half messages here; None refuses them (NO_PERMISSION)
        self.transactions = transactions
        self._cluster_property = f"{MessageConst.PROPERTY_CLUSTER}\x01{cluster_name}"
        self._extra_fields = {"MSG_REGION": region_id, "TRACE_ON": "true" if trace_on else "false"}
        self._born_hosts: weakref.WeakKeyDictionary[Connection, bytes] = weakref.WeakKeyDictionary()
        #: topic names that passed the name checks (a send checks its topic by one set lookup)
        self._checked_topics: set[str] = set()

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.SEND_MESSAGE: self.send_message,
            RequestCode.SEND_MESSAGE_V2: self.send_message,
            RequestCode.SEND_BATCH_MESSAGE: self.send_message,
        }

    # -- entry point ------------------------------------------------------------------------------------

    def send_message(self, req: RemotingCommand, conn: Connection) -> RemotingCommand | Awaitable[RemotingCommand]:
        header = self._decode_header(req)
        refusal = self.check(req, header, conn)
        if refusal is not None:
            return refusal
        topic = header.topic
        dead_letter = self._is_dead_letter(header)
        if dead_letter:
            topic = dlq_topic(header.topic[len(RETRY_GROUP_TOPIC_PREFIX):])
            self.topics.create_system_topic(topic, 1, PermName.PERM_READ | PermName.PERM_WRITE)
        queue_id = self.destination_queue(req, header, topic, 0 if dead_letter else header.queue_id, conn)
        if isinstance(queue_id, RemotingCommand):
            return queue_id
        body = bytes(req.body or b"")
        if not body:
            return req.response(ResponseCode.MESSAGE_ILLEGAL, "the message body is empty")
        properties, wait = strip_wait(header.properties or "")
        timed = TIMER_MARKER in properties
        if timed or (req.code == RequestCode.SEND_BATCH_MESSAGE and b"TIMER_" in body):
            refusal = self._check_timer(req, properties, body)
            if refusal is not None:
                return refusal
        if dead_letter:
            properties = strip_property(properties, "DELAY")  # a dead letter is not rescheduled
        if header.sys_flag & _TXN_MASK == _TXN_PREPARED or _TRAN_MARKER in properties:
            return self._put_half(req, header, topic, body, queue_id, properties, wait, conn)
        if req.code == RequestCode.SEND_BATCH_MESSAGE or header.batch:
            return self._put_batch(req, header, body, queue_id, properties, wait, conn)
        properties = join_properties(properties, self._cluster_property)
        if len(properties) > _SAFE_PROPERTIES_CHARS and len(properties.encode()) > MAX_PROPERTIES_LENGTH:
            return req.response(ResponseCode.MESSAGE_ILLEGAL, "the message properties are longer than 32767 bytes")
        msg = MessageExtBrokerInner(
            topic=topic, body=body, queue_id=queue_id, flag=header.flag, properties=properties,
            sys_flag=header.sys_flag, born_timestamp=header.born_timestamp, born_host=self.born_host(conn),
            reconsume_times=header.reconsume_times or 0, wait_store_msg_ok=wait,
        )
        stored = self.store.put(msg)
        timer = properties if timed and not dead_letter else None
        if isinstance(stored, PutMessageResult):
            return self.respond(req, stored, queue_id, timer_properties=timer)
        return self._respond_when_stored(req, stored, queue_id, timer_properties=timer)

    # -- checks -------------------------------------------------------------------------------------------

    def destination_queue(self, req: RemotingCommand, header: SendHeader, topic: str, queue_id: int,
                          conn: Connection) -> int | RemotingCommand:
        """The queue of ``topic`` a send (or a reply) goes to, or the refusal: the topic must exist (it is
        auto-created when RocketMQ would) and be writable, ``queue_id`` in range (negative: a random one)."""
        topic_config = self.topics.select_or_create_for_send(
            topic, header.default_topic, header.default_topic_queue_nums, conn.remote_addr
        )
        if topic_config is None:
            return req.response(ResponseCode.TOPIC_NOT_EXIST,
                                f"topic[{header.topic}] not exist, apply first please!")
        if not topic_config.perm & PermName.PERM_WRITE:
            return req.response(ResponseCode.NO_PERMISSION, f"the topic[{header.topic}] sending message is forbidden")
        limit = max(topic_config.write_queue_nums, topic_config.read_queue_nums)
        if queue_id >= limit:
            return req.response(ResponseCode.SYSTEM_ERROR,
                                f"request queueId[{queue_id}] is illegal, topic {header.topic} has {limit} queues")
        if queue_id < 0:
            queue_id = random.randrange(topic_config.write_queue_nums)
        return queue_id

    @staticmethod
    def _decode_header(req: RemotingCommand) -> SendHeader:
        if req.code == RequestCode.SEND_MESSAGE:
            return SendMessageRequestHeader.from_command(req)
        return SendMessageRequestHeaderV2.from_command(req)

    def check(self, req: RemotingCommand, header: SendHeader, conn: Connection) -> RemotingCommand | None:
        """RocketMQ's ``msgCheck`` before the topic is looked up: the broker takes writes, the topic's name is
        legal and not a system topic; None when the send may go on."""
        if self.is_slave:
            return req.response(ResponseCode.SERVICE_NOT_AVAILABLE,
                                f"the broker[{self.broker_name}, {self.broker_addr()}] is a slave: sending is refused")
        if not self.broker_permission() & PermName.PERM_WRITE:
            return req.response(ResponseCode.NO_PERMISSION,
                                f"the broker[{self.broker_name}, {self.broker_addr()}] sending message is forbidden")
        topic = header.topic
        if topic not in self._checked_topics:
            problem = validate_topic(topic)
            if problem is not None:
                return req.response(ResponseCode.MESSAGE_ILLEGAL, problem)
            if topic in NOT_ALLOWED_SEND_TOPIC_SET or topic == RMQ_SYS_WHEEL_TIMER_TOPIC:  # timers only by the store
                return req.response(ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden.")
            if len(self._checked_topics) >= _MAX_CHECKED_TOPICS:
                self._checked_topics.clear()
            self._checked_topics.add(topic)
        return None

    def _check_timer(self, req: RemotingCommand, properties: str, body: bytes) -> RemotingCommand | None:
        """A timer message beyond ``timerMaxDelaySec`` or with a malformed time is refused with RocketMQ's code
        and remark; a batch may not carry timers (they would be delivered at once)."""
        max_delay_ms = self.store.config.timer_max_delay_sec * 1000
        if req.code == RequestCode.SEND_BATCH_MESSAGE:
            with contextlib.suppress(ValueError):
                if any(is_timer_candidate(entry.properties)
                       for entry in decode_batch_body(body)):
                    return req.response(ResponseCode.MESSAGE_ILLEGAL, "timer messages cannot be sent in a batch")
        try:
            check_timer(properties, int(time.time() * 1000), max_delay_ms)
        except TimerIllegal as exc:
            return req.response(ResponseCode.MESSAGE_ILLEGAL,
                                "timer message illegal, the delay time should not be bigger than the max delay "
                                f"{max_delay_ms}ms; or if set del msg, the delay time should be bigger than the "
                                f"current time ({exc})")
        return None

    def _is_dead_letter(self, header: SendHeader) -> bool:
        """A message produced to ``%RETRY%<group>`` that has been reconsumed its group's maximum number of
        times goes to ``%DLQ%<group>`` instead (RocketMQ's handleRetryAndDLQ; the SDK's fallback path when
        CONSUMER_SEND_MSG_BACK fails relies on it)."""
        if not is_retry_topic(header.topic):
            return False
        max_times = header.max_reconsume_times
        if max_times is None:
            group = self.groups.find_or_create(header.topic[len(RETRY_GROUP_TOPIC_PREFIX):]) if self.groups else None
            max_times = group.retry_max_times if group is not None else 16
        return (header.reconsume_times or 0) >= max_times

    def born_host(self, conn: Connection) -> bytes:
        """The sender's address as a record's born host (cached per connection)."""
        host = self._born_hosts.get(conn)
        if host is None:
            ip, _, port = conn.remote_addr.rpartition(":")
            try:
                host = encode_host(ip.strip("[]"), int(port))
            except (ValueError, OSError):
                host = encode_host("127.0.0.1", 0)
            self._born_hosts[conn] = host
        return host

    def _recall_handle(self, req: RemotingCommand, properties: str) -> str | None:
        """A stored timer message's recall handle (:mod:`pocketmq.common.recall`). Read after the put: the time it
        names (due + 1 ms) is then never before the store's own due, which a relative delay counts from its put."""
        topic = req.field("b") or req.field("topic") or ""
        uniq = get_property(properties, MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if not uniq or is_retry_topic(topic) or delay_level_wins(properties):
            return None
        try:
            due = check_timer(properties, int(time.time() * 1000), self.store.config.timer_max_delay_sec * 1000)
        except TimerIllegal:
            return None
        return RecallHandle(topic, self.broker_name, str(due + 1), uniq).encode() if due is not None else None

    # -- puts ---------------------------------------------------------------------------------------------

    def _put_half(self, req: RemotingCommand, header: SendHeader, topic: str, body: bytes, queue_id: int,
                  properties: str, wait: bool, conn: Connection) -> RemotingCommand | Awaitable[RemotingCommand]:
        """A prepared message (sys flag 4, or ``TRAN_MSG=true``): stored as a half message in
        ``RMQ_SYS_TRANS_HALF_TOPIC`` (:mod:`broker.transaction`), answered as a send with the transaction id."""
        if self.transactions is None:
            return req.response(ResponseCode.NO_PERMISSION,
                                f"the broker[{self.broker_name}, {self.broker_addr()}] sending transaction message "
                                "is forbidden")
        if req.code == RequestCode.SEND_BATCH_MESSAGE or header.batch:
            return req.response(ResponseCode.MESSAGE_ILLEGAL, "batch messages cannot be transactional")
        delay = get_property(properties, MessageConst.PROPERTY_DELAY_TIME_LEVEL)
        if delay and delay != "0":
            return req.response(ResponseCode.MESSAGE_ILLEGAL, "transactional messages cannot be delayed")
        properties = join_properties(properties, self._cluster_property)
        msg = MessageExtBrokerInner(
            topic=topic, body=body, queue_id=queue_id, flag=header.flag, properties=properties,
            sys_flag=header.sys_flag, born_timestamp=header.born_timestamp, born_host=self.born_host(conn),
            reconsume_times=header.reconsume_times or 0, wait_store_msg_ok=wait,
        )
        to_half_message(msg)
        if len(msg.properties.encode()) > MAX_PROPERTIES_LENGTH:
            return req.response(ResponseCode.MESSAGE_ILLEGAL, "the message properties are longer than 32767 bytes")
        stored = self.store.put(msg)
        if isinstance(stored, PutMessageResult):
            return self._respond_half(req, stored, queue_id, topic, msg.properties)
        return self._respond_half_when_stored(req, stored, queue_id, topic, msg.properties)

    async def _respond_half_when_stored(self, req: RemotingCommand, stored: Awaitable[PutMessageResult],
                                        queue_id: int, topic: str, properties: str) -> RemotingCommand:
        return self._respond_half(req, await stored, queue_id, topic, properties)

    def _respond_half(self, req: RemotingCommand, result: PutMessageResult, queue_id: int, topic: str,
                      properties: str) -> RemotingCommand:
        response = self.respond(req, result, queue_id, stored_topic=RMQ_SYS_TRANS_HALF_TOPIC)
        append = result.append_result
        if result.status.is_stored and append is not None and self.transactions is not None:
            self.transactions.half_stored(properties, append.queue_offset, topic)
            uniq = get_property(properties, MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            if uniq and response.ext_fields is not None:
                response.ext_fields["transactionId"] = uniq
        return response

    def _put_batch(self, req: RemotingCommand, header: SendHeader, body: bytes, queue_id: int, properties: str,
                   wait: bool, conn: Connection) -> RemotingCommand | Awaitable[RemotingCommand]:
        if is_retry_topic(header.topic):
            raise InvalidHeaderError("batch messages cannot be sent to a retry topic")
        batch = MessageExtBatch(
            topic=header.topic, body=body, queue_id=queue_id,
            properties=join_properties(properties, self._cluster_property), sys_flag=header.sys_flag,
            born_timestamp=header.born_timestamp, born_host=self.born_host(conn), wait_store_msg_ok=wait,
        )
        stored = self.store.put_batch(batch)
        if isinstance(stored, PutMessageResult):
            return self.respond(req, stored, queue_id, batch=True)
        return self._respond_when_stored(req, stored, queue_id, batch=True)

    async def _respond_when_stored(self, req: RemotingCommand, stored: Awaitable[PutMessageResult], queue_id: int,
                                   batch: bool = False, timer_properties: str | None = None) -> RemotingCommand:
        return self.respond(req, await stored, queue_id, batch, timer_properties=timer_properties)

    def respond(self, req: RemotingCommand, result: PutMessageResult, queue_id: int,
                batch: bool = False, stored_topic: str | None = None,
                timer_properties: str | None = None) -> RemotingCommand:
        """The send's answer for a put's result (msgId, queueId, queueOffset, region and trace switch when stored;
        a timer message's recall handle when ``timer_properties`` are a timer's)."""
        code, remark = put_status_to_response(result.status)
        append = result.append_result
        if not result.status.is_stored or append is None:
            if result.status is PutMessageStatus.SERVICE_NOT_AVAILABLE:
                remark = f"service not available now: {self.store.not_writable_reason or 'the store is not writable'}"
            return req.response(code, remark)
        msg_id = ",".join(append.msg_ids) if batch else append.msg_id
        fields = {"msgId": msg_id, "queueId": str(queue_id), "queueOffset": str(append.queue_offset),
                  **self._extra_fields}
        if timer_properties is not None:
            handle = self._recall_handle(req, timer_properties)
            if handle is not None:
                fields["recallHandle"] = handle
        if self.on_stored is not None:
            self.on_stored(stored_topic or req.field("b") or req.field("topic") or "", append.msg_num,
                           append.wrote_bytes)
        return req.response(code, remark, ext_fields=fields)
