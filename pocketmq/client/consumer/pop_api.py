"""A consumer's POP requests (RocketMQ 5's ``MQClientAPIImpl`` POP half): ``POP_MESSAGE``, ``NOTIFICATION``,
``ACK_MESSAGE``, ``BATCH_ACK_MESSAGE`` and ``CHANGE_MESSAGE_INVISIBLETIME`` to a broker group's master, and what
the Java client does with a pop response (:func:`popped_messages`): each message gets its ``POP_CK`` (the receipt
handle, built from ``startOffsetInfo``/``msgOffsetInfo``), a FIFO message its reconsume times from
``orderCountInfo``, and every message the consumed topic (a revived one is stored in the POP retry topic).
Shared by :class:`~pocketmq.client.consumer.simple.SimpleConsumer` and the push consumer's POP mode.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from pocketmq.client.consumer.pull_result import decode_body
from pocketmq.client.core.errors import BrokerNotFoundError, MQClientError
from pocketmq.client.core.instance import MQClientInstance
from pocketmq.client.core.message_ext import MessageExt, add_property_each
from pocketmq.common.message import MessageConst
from pocketmq.common.pop import (
    BatchAck,
    PopFormatError,
    ReceiptHandle,
    encode_batch_ack_body,
    info_key,
    parse_msg_offset_info,
    parse_order_count_info,
    parse_start_offset_info,
    queue_offset_key,
    retry_marker,
)
from pocketmq.common.subscription import SubscriptionData
from pocketmq.common.topic_config import PermName
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import error_for_response
from pocketmq.remoting.pop_headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    NotificationRequestHeader,
    NotificationResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from pocketmq.remoting.route import TopicRouteData

__all__ = ["PopAPI", "PopResponse", "popped_messages", "receipt_handle"]

_POP_CK = MessageConst.PROPERTY_POP_CK
_NO_HANDLE = ("", "", "")
#: A long-polled request waits this much longer than the broker may hold it (s).
RPC_MARGIN = 5.0
#: ``initMode`` of a group's first pop of a queue: its last message (RocketMQ 5's proxy uses MAX).
INIT_MODE_MAX = 1
_BORN_TIME = "bornTime"
#: pop headers (one per subscription and receive shape) and broker lists (one per topic) kept
_POP_FIELDS_CACHED = 64


class PopMessageError(MQClientError):
    """A pop response the client cannot read (its offset infos do not match its records)."""

    retriable = False


def receipt_handle(msg: MessageExt) -> ReceiptHandle:
    """The receipt handle of a popped message (its ``POP_CK``); :class:`MQClientError` for one not popped."""
    raw = msg.get_property(_POP_CK)
    if raw is None:
        raise MQClientError(f"message {msg.msg_id} was not popped: it has no receipt handle")
    try:
        return ReceiptHandle.decode(raw)
    except PopFormatError as exc:
        raise MQClientError(f"message {msg.msg_id} has a malformed receipt handle: {exc}") from None


AckGroup = tuple[str, str, list[int]]
"""(topic, receipt-handle prefix, offsets): messages of one check point (a pop of one queue) to ack."""
Run = tuple[str, str, int, int]
"""(topic, receipt-handle prefix, start, end): ``messages[start:end]`` of a pop response share a check point."""


@dataclass(slots=True)
class PopResponse:
    found: bool
    messages: list[MessageExt]
    rest_num: int = 0
    #: the runs of messages of one check point, in order (an ack of a slice reads no handle: :func:`ack_groups`)
    runs: list[Run] = field(default_factory=list)


def ack_groups(messages: list[MessageExt], runs: list[Run], start: int, end: int) -> list[AckGroup]:
    """What acking ``messages[start:end]`` of a pop response means, from its runs: the offsets of each check
    point, as their receipt handles say (a popped message's handle ends with its queue offset)."""
    return [(topic, prefix, [msg.queue_offset for msg in messages[max(first, start):min(last, end)]])
            for topic, prefix, first, last in runs if first < end and last > start]


def popped_messages(response: RemotingCommand, topic: str, broker_name: str, order: bool) -> PopResponse:
    """A pop response as ``processPopResponse`` makes it (see the module docstring); raises the broker's error
    for a code that is neither SUCCESS nor "nothing to pop"."""
    code = response.code
    if code in (ResponseCode.POLLING_TIMEOUT, ResponseCode.PULL_NOT_FOUND, ResponseCode.POLLING_FULL):
        rest = response.ext_fields.get("restNum", "0") if response.ext_fields else "0"
        return PopResponse(False, [], int(rest) if rest.isdigit() else 0)
    if code != ResponseCode.SUCCESS:
        raise error_for_response(code, response.remark)
    header = PopMessageResponseHeader.from_command(response)
    messages = decode_body(response.body or b"", broker_name=broker_name)
    try:
        starts = parse_start_offset_info(header.start_offset_info)
        listed = parse_msg_offset_info(header.msg_offset_info)
        counts = parse_order_count_info(header.order_count_info) if order else {}
    except PopFormatError as exc:
        raise PopMessageError(str(exc)) from None
    times = f"{header.pop_time} {header.invisible_time} {header.revive_qid}"
    runs = _give_handles(messages, topic, broker_name, times, starts, listed, counts if order else None)
    return PopResponse(True, messages, header.rest_num, runs)


def _give_handles(messages: list[MessageExt], topic: str, broker_name: str, times: str, starts: dict[str, int],
                  listed: dict[str, list[int]], counts: dict[str, int] | None) -> list[Run]:
    """Give each popped message its receipt handle (and, FIFO, its delivery count) and the consumed topic's name;
    returns the runs of messages of one check point."""
    # The handle of every message of one (stored topic, queue) differs only by its offset, and a pop's messages
    # come queue by queue: the prefix and the offsets listed for it are looked up once per run of a queue.
    queues: dict[tuple[str, int], tuple[str, set[int], str]] = {}
    handles: list[str] = []
    runs: list[Run] = []
    run_start = 0
    last_topic, last_queue = "", -1
    prefix, marker = "", ""
    offsets: set[int] = set()
    for index, msg in enumerate(messages):
        stored_topic, queue_id, offset = msg.topic, msg.queue_id, msg.queue_offset
        if queue_id != last_queue or stored_topic != last_topic:
            if index:
                runs.append((topic, prefix[:-1], run_start, index))
            run_start = index
            known = queues.get((stored_topic, queue_id))
            if known is None:
                known = queues[(stored_topic, queue_id)] = _queue_handle(stored_topic, queue_id, starts, listed,
                                                                         times, broker_name)
            prefix, offsets, marker = known
            last_topic, last_queue = stored_topic, queue_id
        if offset not in offsets:
            raise PopMessageError(f"the pop response lists no offset for {stored_topic} queue {queue_id} "
                                  f"offset {offset}")
        handles.append(prefix + str(offset))
        if counts is not None:
            count = counts.get(info_key(marker, queue_offset_key(queue_id, offset)),
                               counts.get(info_key(marker, queue_id)))
            if count:
                msg.reconsume_times = count
        msg.topic = topic
    if messages:
        runs.append((topic, prefix[:-1], run_start, len(messages)))
    add_property_each(messages, _POP_CK, handles)
    return runs


def _queue_handle(stored_topic: str, queue_id: int, starts: dict[str, int], listed: dict[str, list[int]],
                  times: str, broker_name: str) -> tuple[str, set[int], str]:
    """(handle prefix, offsets listed, retry marker) of one (stored topic, queue) of a pop response."""
    marker = retry_marker(stored_topic)
    key = info_key(marker, queue_id)
    if key not in starts:
        raise PopMessageError(f"the pop response has no start offset for {stored_topic} queue {queue_id}")
    return f"{starts[key]} {times} {marker} {broker_name} {queue_id} ", set(listed.get(key, ())), marker


class PopAPI:
    """POP requests of one consumer group over a client instance, to each broker group's master."""

    def __init__(self, instance: MQClientInstance, group: str, *, timeout: float) -> None:
        self.instance = instance
        self.group = group
        self.timeout = timeout
        #: the headers' encoding the rest of the client uses (msgpack by default: a pop answer's offset lists
        #: are long strings, cheaper to encode and decode than in JSON)
        self.serialize_type = instance.config.serialize_type
        self._pop_fields: dict[tuple[str, str, str, int, int, int, int, bool, str | None], dict[str, str]] = {}
        self._brokers: dict[str, tuple[TopicRouteData, list[str]]] = {}

    async def _master(self, topic: str, broker_name: str) -> str:
        addr = self.instance.routes.master_addr(broker_name)
        if addr is None:
            await self.instance.refresher.refresh(topic, self.timeout, publish=False)
            addr = self.instance.routes.master_addr(broker_name)
        if addr is None:
            raise BrokerNotFoundError(broker_name)
        return addr

    async def _invoke(self, topic: str, broker_name: str, request: RemotingCommand,
                      timeout: float) -> RemotingCommand:
        addr = await self._master(topic, broker_name)
        conn = await self.instance.connect(addr, timeout)
        return await conn.request(request, timeout)

    def brokers(self, topic: str) -> list[str]:
        """The broker groups with readable queues of ``topic`` (from the route held)."""
        route = self.instance.routes.subscribe_route(topic)
        if route is None:
            return []
        cached = self._brokers.get(topic)
        if cached is not None and cached[0] is route:  # a route is replaced, never changed, when it changes
            return cached[1]
        readable = (q for q in route.queue_datas if q.perm & PermName.PERM_READ and q.read_queue_nums > 0)
        brokers = sorted({q.broker_name for q in readable})
        if len(self._brokers) >= _POP_FIELDS_CACHED:
            self._brokers.clear()
        self._brokers[topic] = (route, brokers)
        return brokers

    async def pop(self, broker_name: str, subscription: SubscriptionData, *, max_nums: int, invisible_ms: int,
                  poll_ms: int, order: bool = False, attempt_id: str | None = None,
                  queue_id: int = -1) -> PopResponse:
        topic = subscription.topic
        key = (topic, subscription.expression_type, subscription.sub_string, queue_id, max_nums, invisible_ms,
               poll_ms, order, attempt_id)
        fields = self._pop_fields.get(key)
        if fields is None:
            if len(self._pop_fields) >= _POP_FIELDS_CACHED:
                self._pop_fields.clear()  # FIFO attempt ids vary: bounded, rebuilt as needed
            fields = self._pop_fields[key] = PopMessageRequestHeader(
                self.group, topic, queue_id, max_nums, invisible_ms, poll_ms, INIT_MODE_MAX, 0,
                subscription.expression_type, subscription.sub_string, order, attempt_id).to_fields()
        # Only bornTime differs between the pops of one receive loop: the rest of the header is built once.
        request = RemotingCommand.request(RequestCode.POP_MESSAGE, {**fields, _BORN_TIME: str(_now_ms())},
                                          serialize_type=self.serialize_type)
        response = await self._invoke(topic, broker_name, request, poll_ms / 1000 + self.timeout + RPC_MARGIN)
        return popped_messages(response, topic, broker_name, order)

    async def notification(self, broker_name: str, topic: str, *, poll_ms: int, order: bool = False) -> bool:
        """Whether the group has something to pop on that broker (long-polled up to ``poll_ms``)."""
        header = NotificationRequestHeader(self.group, topic, -1, poll_ms, _now_ms(), order)
        request = RemotingCommand.request(RequestCode.NOTIFICATION, header.to_fields(),
                                          serialize_type=self.serialize_type)
        response = await self._invoke(topic, broker_name, request, poll_ms / 1000 + self.timeout + RPC_MARGIN)
        if response.code != ResponseCode.SUCCESS:
            raise error_for_response(response.code, response.remark)
        return NotificationResponseHeader.from_command(response).has_msg

    async def ack(self, msg: MessageExt) -> None:
        handle = receipt_handle(msg)
        header = AckMessageRequestHeader(self.group, handle.real_topic(msg.topic, self.group), handle.queue_id,
                                         handle.extra_info(), handle.offset)
        response = await self._invoke(msg.topic, handle.broker_name,
                                      RemotingCommand.request(RequestCode.ACK_MESSAGE, header.to_fields(),
                                                              serialize_type=self.serialize_type),
                                      self.timeout)
        if response.code != ResponseCode.SUCCESS:
            raise error_for_response(response.code, response.remark)

    async def ack_batch(self, messages: Sequence[MessageExt]) -> None:
        """BATCH_ACK_MESSAGE, one request per broker group (the Java client's merge: one bit set per pop of a
        queue); raises the first broker's refusal."""
        groups: dict[tuple[str, str], list[int]] = {}
        last_topic = last_prefix = ""
        listed: list[int] = []
        for msg in messages:
            raw = msg.get_property(_POP_CK)
            prefix, _, offset = raw.rpartition(" ") if raw else _NO_HANDLE
            if prefix != last_prefix or msg.topic != last_topic:  # a pop's messages come together: one lookup
                if not prefix:
                    receipt_handle(msg)  # raises the clear error
                last_prefix, last_topic = prefix, msg.topic
                listed = groups.setdefault((last_topic, prefix), [])
            try:
                listed.append(int(offset))
            except ValueError:
                receipt_handle(msg)  # raises the clear error
                raise
        await self.ack_groups([(topic, prefix, offsets) for (topic, prefix), offsets in groups.items()])

    async def ack_groups(self, groups: Sequence[AckGroup]) -> None:
        """BATCH_ACK_MESSAGE of (topic, handle prefix, offsets) groups, one request per broker group, one bit set
        per check point; raises the first broker's refusal."""
        merged: dict[tuple[str, str], list[int]] = {}
        for topic, prefix, offsets in groups:
            if offsets:
                merged.setdefault((topic, prefix), []).extend(offsets)
        by_broker: dict[str, list[BatchAck]] = {}
        topics: dict[str, str] = {}
        for (topic, prefix), offsets in merged.items():
            try:
                h = ReceiptHandle.decode(f"{prefix} {offsets[0]}")
            except PopFormatError as exc:
                raise MQClientError(f"a malformed receipt handle: {exc}") from None
            topics[h.broker_name] = topic
            by_broker.setdefault(h.broker_name, []).append(BatchAck(
                self.group, topic, h.topic_type, h.start_offset, h.queue_id, h.revive_queue_id, h.retrieve_time,
                h.invisible_time, offsets))
        for broker, acks in by_broker.items():
            body = encode_batch_ack_body(broker, acks)
            response = await self._invoke(topics[broker], broker,
                                          RemotingCommand.request(RequestCode.BATCH_ACK_MESSAGE, None, body,
                                                                  serialize_type=self.serialize_type),
                                          self.timeout)
            if response.code != ResponseCode.SUCCESS:
                raise error_for_response(response.code, response.remark)

    async def change_invisible_time(self, msg: MessageExt, invisible_ms: int) -> None:
        """Make ``msg`` invisible for ``invisible_ms`` from now; its receipt handle is replaced by the new one
        (the Java client's: the message's own offset as the check-point offset, the answer's times)."""
        handle = receipt_handle(msg)
        header = ChangeInvisibleTimeRequestHeader(self.group, handle.real_topic(msg.topic, self.group),
                                                  handle.queue_id, handle.extra_info(), handle.offset, invisible_ms)
        response = await self._invoke(
            msg.topic, handle.broker_name,
            RemotingCommand.request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header.to_fields(),
                                    serialize_type=self.serialize_type), self.timeout)
        if response.code != ResponseCode.SUCCESS:
            raise error_for_response(response.code, response.remark)
        answer = ChangeInvisibleTimeResponseHeader.from_command(response)
        new = ReceiptHandle(handle.offset, answer.pop_time, answer.invisible_time, answer.revive_qid,
                            handle.topic_type, handle.broker_name, handle.queue_id, handle.offset)
        msg.add_property(_POP_CK, new.extra_info())


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
