"""A message made ready to send (:class:`Outgoing`): validated, given its ``UNIQ_KEY``, compressed and encoded
once by :class:`MessagePreparer`, then reused by every attempt (and by the accumulator, which may carry it
inside a coalesced batch).

Validation matches the broker's (topic, body, properties, delay level, size after compression). A reply
(``MSG_TYPE=reply``) gets the topic's reply template (SEND_REPLY_MESSAGE(_V2)) and is never coalesced. The request
of an attempt is one copy of the topic's :class:`~pocketmq.client.producer.headers.SendHeaderTemplate` with the
per-attempt fields filled in, and one :class:`~pocketmq.remoting.command.RemotingCommand`. Header templates are kept
for at most :data:`MAX_CACHED_TOPICS` topics.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

from pocketmq.client.core.compression import compress_body
from pocketmq.client.core.errors import InvalidMessageError
from pocketmq.client.core.message import Message, MessageBatch, MessageQueue, SendResult
from pocketmq.client.core.uniq import UniqIdGenerator
from pocketmq.client.core.validators import check_and_encode_properties, check_topic
from pocketmq.client.producer.config import ProducerConfig
from pocketmq.client.producer.headers import SendHeaderTemplate
from pocketmq.common.batch import BATCH_ENTRY_HEADER, BATCH_ENTRY_OVERHEAD
from pocketmq.common.message import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, MessageConst, encode_properties
from pocketmq.common.record import PROPERTIES_LENGTH
from pocketmq.common.topic import RETRY_GROUP_TOPIC_PREFIX
from pocketmq.remoting.command import Body, RemotingCommand, next_opaque

__all__ = ["MAX_CACHED_TOPICS", "MessagePreparer", "Outgoing"]

#: Topics whose header templates are cached; beyond it the oldest entry goes.
MAX_CACHED_TOPICS = 4096

_time_ns = time.time_ns
#: The request header properties of a coalesced batch (its messages carry their own).
_BATCH_HEADER_PROPERTIES = encode_properties({MessageConst.PROPERTY_WAIT_STORE_MSG_OK: "true"})

_WAIT = MessageConst.PROPERTY_WAIT_STORE_MSG_OK
_DELAY = MessageConst.PROPERTY_DELAY_TIME_LEVEL
_TIMER_DELIVER = MessageConst.PROPERTY_TIMER_DELIVER_MS
_TIMER_DELAY = MessageConst.PROPERTY_TIMER_DELAY_MS
_TIMER_DELAY_SEC = MessageConst.PROPERTY_TIMER_DELAY_SEC
_UNIQ_KEY = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_MSG_TYPE = MessageConst.PROPERTY_MESSAGE_TYPE
_REPLY = MessageConst.REPLY_MESSAGE_FLAG
_TRUE = "true"
#: The properties string of ``{WAIT: true, UNIQ_KEY: id}`` up to the id (the usual message's).
_WAIT_TRUE_UNIQ_KEY = _BATCH_HEADER_PROPERTIES + PROPERTY_SEPARATOR + _UNIQ_KEY + NAME_VALUE_SEPARATOR
_BODY_TYPES = (bytes, bytearray, memoryview)
_PACK_ENTRY_HEAD = BATCH_ENTRY_HEADER.pack
_PACK_PROPERTIES_LENGTH = PROPERTIES_LENGTH.pack


class TopicState:
    """Per-topic constants of a producer: the validated name and its header templates."""

    __slots__ = ("batch_template", "reply_template", "retry_topic", "template", "topic")

    def __init__(self, topic: str, template: SendHeaderTemplate, batch_template: SendHeaderTemplate,
                 reply_template: SendHeaderTemplate) -> None:
        self.topic = topic
        self.template = template
        self.batch_template = batch_template
        self.reply_template = reply_template
        self.retry_topic = topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


class Outgoing:
    """One message (or batch) ready to go: computed once, reused by every attempt."""

    __slots__ = ("batchable", "body", "budget", "flag", "future", "msg_id", "properties", "retry_fields", "sys_flag",
                 "template", "topic")

    #: Set by the accumulator while the send waits to be coalesced: the send's own future and time budget.
    future: asyncio.Future[SendResult]
    budget: float

    def __init__(
        self,
        topic: str,
        template: SendHeaderTemplate,
        body: Body,
        sys_flag: int,
        flag: int,
        properties: str,
        msg_id: str,
        retry_fields: tuple[str | None, str | None] | None = None,
        batchable: bool = False,
    ) -> None:
        self.topic = topic
        self.template = template
        self.body = body
        self.sys_flag = sys_flag
        self.flag = flag
        self.properties = properties
        self.msg_id = msg_id
        self.retry_fields = retry_fields
        #: May travel inside a coalesced SEND_BATCH_MESSAGE (RocketMQ's batch rules: no compression, delay,
        #: retry topic or WAIT=false; and no timer, which a batch cannot carry).
        self.batchable = batchable


class MessagePreparer:
    """Turns a producer's messages into :class:`Outgoing` and attempts into requests."""

    __slots__ = ("_topics", "_uniq", "auto_batch_max_bytes", "compress_level", "compress_over",
                 "default_topic_queue_nums", "group", "max_message_size", "send_smart_msg", "serialize_type")

    def __init__(self, config: ProducerConfig, uniq: UniqIdGenerator) -> None:
        self.group = config.group
        self.compress_over = config.compress_over
        self.compress_level = config.compress_level
        self.max_message_size = config.max_message_size
        self.auto_batch_max_bytes = config.auto_batch_max_bytes
        self.send_smart_msg = config.send_smart_msg
        self.default_topic_queue_nums = config.default_topic_queue_nums
        self.serialize_type = config.client.serialize_type
        self._uniq = uniq
        self._topics: dict[str, TopicState] = {}

    def topic_state(self, topic: str) -> TopicState:
        """The topic's templates, the topic validated when first seen."""
        state = self._topics.get(topic)
        if state is None:
            check_topic(topic)
            state = TopicState(
                topic,
                SendHeaderTemplate(self.group, topic, smart=self.send_smart_msg,
                                   default_topic_queue_nums=self.default_topic_queue_nums),
                SendHeaderTemplate(self.group, topic, batch=True,
                                   default_topic_queue_nums=self.default_topic_queue_nums),
                SendHeaderTemplate(self.group, topic, reply=True, smart=self.send_smart_msg,
                                   default_topic_queue_nums=self.default_topic_queue_nums),
            )
            if len(self._topics) >= MAX_CACHED_TOPICS:
                del self._topics[next(iter(self._topics))]
            self._topics[topic] = state
        return state

    def prepare(self, msg: Message) -> Outgoing:
        """Validate once and compute everything every attempt reuses (raises InvalidMessageError).

        The usual message (properties exactly ``WAIT=true``, as ``Message(topic, body)`` makes them, a body
        under the compression threshold, not a retry topic) takes a short path: its properties string is a
        constant followed by the new ``UNIQ_KEY`` (a hex id, nothing to check), byte for byte what the
        general encoder gives for ``{WAIT: true, UNIQ_KEY: id}``.
        """
        if not isinstance(msg, Message):
            raise InvalidMessageError(f"expected a Message, got {type(msg).__name__}")
        topic = msg.topic
        state = self._topics.get(topic) if isinstance(topic, str) else None
        if state is None:
            state = self.topic_state(topic)
        body = msg.body
        if not isinstance(body, _BODY_TYPES):
            raise InvalidMessageError(f"the message body must be bytes, not {type(body).__name__}")
        size = len(body)
        if not size:
            raise InvalidMessageError("the message body is empty")
        props = msg.properties
        if (len(props) == 1 and props.get(_WAIT) == _TRUE and size < self.compress_over
                and size <= self.auto_batch_max_bytes and not state.retry_topic):
            msg_id = props[_UNIQ_KEY] = self._uniq.next_id()
            return Outgoing(topic, state.template, body, 0, msg.flag, _WAIT_TRUE_UNIQ_KEY + msg_id, msg_id, None,
                            True)
        return self._prepare_general(msg, state, body, size, props)

    def _prepare_general(self, msg: Message, state: TopicState, body: Body, size: int,
                         props: dict[str, str]) -> Outgoing:
        """:meth:`prepare` for any message: delay level, user properties, compression, retry topics."""
        if _DELAY in props:
            _check_delay_level(props[_DELAY])
        msg_id = props.get(_UNIQ_KEY)
        if msg_id is None:
            msg_id = props[_UNIQ_KEY] = self._uniq.next_id()
        properties = check_and_encode_properties(props)
        sys_flag = 0
        if size >= self.compress_over:
            body, sys_flag = compress_body(body, compress_over=self.compress_over, level=self.compress_level)
            size = len(body)
        if size > self.max_message_size:
            raise InvalidMessageError(f"the message body is {size} bytes, over the maximum of {self.max_message_size}")
        retry_fields = None
        if state.retry_topic:
            retry_fields = (props.get(MessageConst.PROPERTY_RECONSUME_TIME),
                            props.get(MessageConst.PROPERTY_MAX_RECONSUME_TIMES))
        if props.get(_MSG_TYPE) == _REPLY:  # never coalesced: a batch would be stored, not pushed
            return Outgoing(state.topic, state.reply_template, body, sys_flag, msg.flag, properties, msg_id)
        batchable = (not sys_flag and retry_fields is None and _DELAY not in props
                     and props.get(_WAIT) != "false" and size <= self.auto_batch_max_bytes
                     and _TIMER_DELIVER not in props and _TIMER_DELAY not in props and _TIMER_DELAY_SEC not in props)
        return Outgoing(state.topic, state.template, body, sys_flag, msg.flag, properties, msg_id, retry_fields,
                        batchable)

    def prepare_batch(self, messages: Iterable[Message]) -> Outgoing:
        """An application's batch (``send_batch``): one SEND_BATCH_MESSAGE of messages of one topic."""
        try:
            batch = MessageBatch.of(messages, generator=self._uniq, max_size=self.max_message_size)
        except TypeError as exc:  # a property name or value that is not a str
            raise InvalidMessageError(f"a batch message has a non-str property: {exc}") from None
        state = self.topic_state(batch.topic)
        properties = check_and_encode_properties(batch.properties)
        return Outgoing(batch.topic, state.batch_template, batch.body, 0, 0, properties, batch.msg_id)

    def coalesce(self, outs: list[Outgoing]) -> Outgoing:
        """Prepared messages of one topic as one coalesced SEND_BATCH_MESSAGE (the accumulator's): the entries
        of :func:`pocketmq.common.batch.append_batch_entry`, built inline (once per message, so no call per entry)."""
        parts: list[bytes | bytearray | memoryview] = []
        add = parts.append
        pack_head = _PACK_ENTRY_HEAD
        pack_props_length = _PACK_PROPERTIES_LENGTH
        for out in outs:
            body = out.body
            props = out.properties.encode()
            body_length = len(body)
            add(pack_head(BATCH_ENTRY_OVERHEAD + body_length + len(props), 0, 0, out.flag, body_length))
            add(body)
            add(pack_props_length(len(props)))
            add(props)
        topic = outs[0].topic
        return Outgoing(topic, self.topic_state(topic).batch_template, b"".join(parts), 0, 0,
                        _BATCH_HEADER_PROPERTIES, ",".join([out.msg_id for out in outs]))

    def request(self, out: Outgoing, queue: MessageQueue) -> RemotingCommand:
        """The request of one attempt of ``out`` to ``queue``."""
        template = out.template
        ext = template.fields(queue.queue_id, out.sys_flag, _time_ns() // 1_000_000, out.flag, out.properties)
        if out.retry_fields is not None:
            template.set_reconsume(ext, *out.retry_fields)
        return RemotingCommand(template.code, opaque=next_opaque(), ext_fields=ext, body=out.body,
                               serialize_type=self.serialize_type)


def _check_delay_level(raw: str) -> None:
    try:
        level = int(raw)
    except ValueError:
        raise InvalidMessageError("the DELAY property is not an integer") from None
    if level < 0:
        raise InvalidMessageError(f"the delay level must not be negative: {level}")
