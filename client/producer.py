"""``Producer``: the asyncio producer (RocketMQ's ``DefaultMQProducer``), networked.

Usage::

    async with Producer("my-group", namesrv_addr="127.0.0.1:9876") as producer:
        result = await producer.send(Message("TopicTest", b"hello", tags="TagA"))

Four ways to send (reference §7, seeds 001/003/004):

* ``await send(msg)`` — sync semantics: up to ``1 + retry_times_when_send_failed`` attempts, all inside one
  overall timeout (``send_msg_timeout``, 3 s). Each attempt gets what is left of the budget and none starts
  with less than :data:`MIN_ATTEMPT_BUDGET` left, so a slow first attempt ends the send with a clear
  "send timeout" instead of a doomed retry with 0 ms (apache/rocketmq #760, #1921). A retry picks a queue on
  another broker than the one that just failed. Retried: transport errors, retriable client errors, and the
  broker codes RocketMQ retries ({17, 14, 1, 16, 204, 205}; SYSTEM_BUSY 2 is not). Other broker codes are
  raised as they are (``except MessageIllegalError``). A stored-but-not-OK status (FLUSH_DISK_TIMEOUT,
  FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE) is returned, not retried, unless
  ``retry_another_broker_when_not_store_ok``. When every attempt fails: :class:`SendFailedError` (``errors``,
  ``brokers_tried``, ``timed_out``), chained to the last error.
* ``send(msg, selector=f, arg=a)`` — ordered messages: ``f(queues, msg, a)`` picks the queue; one attempt,
  never moved to another queue.
* ``send_async(msg, callback=cb)`` — returns a future at once; retries (``retry_times_when_send_async_failed``)
  only after transport failures, as RocketMQ does.
* ``await send_oneway(msg)`` — one request, no answer, no retry.
* ``await send_batch(msgs)`` — one SEND_BATCH_MESSAGE (320) with the same retry rules as ``send``.

After every attempt the broker's latency goes to the :class:`~client.fault.MQFaultStrategy` (a failure
isolates the broker, except a MESSAGE_ILLEGAL answer, which is the message's fault, not the broker's), and a
failure that suggests a stale route (connect error, closed connection, TOPIC_NOT_EXIST, unknown broker)
schedules a background route refresh of the topic.

Bounds: at most ``max_in_flight`` sends (sync and async) at once; ``send`` waits for a slot within its
timeout, ``send_async`` raises :class:`~remoting.errors.BufferFullError` at once. ``send_oneway`` yields to
the loop every :data:`ONEWAY_YIELD_EVERY` sends, so output is flushed and the connection's write
backpressure applies.

Auto-batching (``auto_batch``, on by default; RocketMQ 5's ``autoBatch`` idea, without its linger): a
``send`` or ``send_async`` issued while other sends of this producer are in flight does not leave at once; it
waits for the end of the current event-loop step, and every such send of the same topic (and kind) queued by
then leaves together as one SEND_BATCH_MESSAGE of at most ``auto_batch_max_messages`` (256) messages and
``auto_batch_max_bytes`` (256 KiB) — to one queue, stored as separate messages in order. Each send still gets
its own :class:`SendResult` (its ``UNIQ_KEY``, its broker id, its queue offset) and its own callback; a batch
that fails fails each of its sends with the same error after the same retries. A lone send (nothing else in
flight) goes at once, so sequential latency is unchanged; messages a batch cannot carry (compressed bodies,
delay levels, retry topics, ``WAIT=false``, ordered sends with a selector) always go alone. Why: under
concurrency one request per message spends most of both processes' CPU on per-request work (headers,
framing, syscalls), while a batch of 32 costs about as much as 3 single sends.

Hot path: the ext fields of a (group, topic) are precomputed (:class:`~client.headers.SendHeaderTemplate`);
a send is one dict copy, one :class:`~remoting.command.RemotingCommand`, one request on an existing
connection, and no logging.
"""

from __future__ import annotations

import asyncio
import collections
import enum
import time
from collections.abc import Callable, Iterable, Sequence
from types import TracebackType
from typing import Any

import structlog

from client.compression import COMPRESS_LEVEL, COMPRESS_OVER, compress_body
from client.errors import (
    BrokerNotFoundError,
    InvalidMessageError,
    MQClientError,
    ProducerStateError,
    SendFailedError,
    is_retriable_async_error,
    is_retriable_send_error,
)
from client.fault import DEFAULT_LATENCY_MAX, DEFAULT_NOT_AVAILABLE_DURATION, MQFaultStrategy
from client.headers import DEFAULT_TOPIC_QUEUE_NUMS, SendHeaderTemplate
from client.instance import ClientConfig, MQClientInstance, acquire_instance, parse_namesrv_addr
from client.message import (
    DEFAULT_REGION,
    Message,
    MessageBatch,
    MessageQueue,
    SendResult,
    SendStatus,
    send_result_from_response,
)
from client.topic_publish import TopicPublishInfo
from client.uniq import UniqIdGenerator, client_id, default_generator
from client.validators import (
    DEFAULT_MAX_MESSAGE_SIZE,
    check_and_encode_properties,
    check_producer_group,
    check_topic,
)
from common.batch import BATCH_ENTRY_OVERHEAD, append_batch_entry
from common.message import MessageConst, encode_properties
from common.topic import RETRY_GROUP_TOPIC_PREFIX
from remoting.codes import FLAG_ONEWAY, ResponseCode, SerializeType
from remoting.command import Body, RemotingCommand, next_opaque
from remoting.connection import Connection
from remoting.errors import BufferFullError, PocketMQError, ResponseError

__all__ = [
    "MIN_ATTEMPT_BUDGET",
    "ONEWAY_YIELD_EVERY",
    "MessageQueueSelector",
    "Producer",
    "SendAttemptHook",
    "SendCallback",
]

log = structlog.get_logger("client.producer")

#: ``selector(queues, message, arg) -> queue`` for ordered messages.
MessageQueueSelector = Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]
#: ``callback(result, error)`` of :meth:`Producer.send_async`: exactly one of the two is ``None``.
SendCallback = Callable[[SendResult | None, BaseException | None], object]
#: ``hook(queue, error, latency_ms)`` after every attempt of every send (``error`` is ``None`` when the broker
#: answered with a stored status): what RocketMQ's ``SendMessageHook`` is used for (metrics, tracing, tests).
SendAttemptHook = Callable[[MessageQueue, BaseException | None, float], object]

#: A retry is not started with less than this left of the send's budget (seconds).
MIN_ATTEMPT_BUDGET = 0.005
#: ``send_oneway`` lets the loop run (flush, apply write backpressure) after this many sends.
ONEWAY_YIELD_EVERY = 64
#: Topics whose header templates are cached; beyond it the oldest entry goes.
MAX_CACHED_TOPICS = 4096
#: Callers waiting for a send slot at most; beyond it ``send`` fails at once with BufferFullError.
MAX_SLOT_WAITERS = 65536
#: Broker answers that blame the message, not the broker: no isolation for them.
_NO_ISOLATION_CODES = frozenset({ResponseCode.MESSAGE_ILLEGAL})
#: Auto-batching bounds: messages and encoded bytes per coalesced SEND_BATCH_MESSAGE. With 1,000 sends of 1 KiB
#: in flight, 256 / 256 KiB gave ~69k msg/s against ~52k for 64 and ~36-54k for 1,024 / 1 MiB (load 2.5).
AUTO_BATCH_MAX_MESSAGES = 256
AUTO_BATCH_MAX_BYTES = 256 * 1024

_monotonic = time.monotonic
_time_ns = time.time_ns
_SEND_OK = SendStatus.SEND_OK
#: The request header properties of a coalesced batch (its messages carry their own).
_BATCH_HEADER_PROPERTIES = encode_properties({MessageConst.PROPERTY_WAIT_STORE_MSG_OK: "true"})


class _State(enum.Enum):
    CREATED = "created"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"


class _TopicState:
    """Per-topic constants of this producer: the validated name and its header templates."""

    __slots__ = ("batch_template", "retry_topic", "template", "topic")

    def __init__(self, topic: str, template: SendHeaderTemplate, batch_template: SendHeaderTemplate) -> None:
        self.topic = topic
        self.template = template
        self.batch_template = batch_template
        self.retry_topic = topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


class _Outgoing:
    """One message (or batch) ready to go: computed once, reused by every attempt."""

    __slots__ = ("batchable", "body", "flag", "msg_id", "properties", "retry_fields", "sys_flag", "template",
                 "topic")

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
        #: retry topic or WAIT=false).
        self.batchable = batchable


class _Pending:
    """A send waiting to be coalesced: its prepared message, its future and its time budget."""

    __slots__ = ("budget", "future", "out")

    def __init__(self, out: _Outgoing, future: asyncio.Future[SendResult], budget: float) -> None:
        self.out = out
        self.future = future
        self.budget = budget


def _isolates(error: BaseException) -> bool:
    return not (isinstance(error, ResponseError) and error.response_code in _NO_ISOLATION_CODES)


class Producer:
    """An asyncio RocketMQ producer; see the module docstring. Create it anywhere, start it on a loop."""

    def __init__(
        self,
        group: str,
        *,
        namesrv_addr: str | Iterable[str] | None = None,
        instance_name: str | None = None,
        client_ip: str | None = None,
        send_msg_timeout: float = 3.0,
        retry_times_when_send_failed: int = 2,
        retry_times_when_send_async_failed: int = 2,
        retry_another_broker_when_not_store_ok: bool = False,
        send_latency_fault_enable: bool = True,
        latency_max: Sequence[int] = DEFAULT_LATENCY_MAX,
        not_available_duration: Sequence[int] = DEFAULT_NOT_AVAILABLE_DURATION,
        compress_over: int = COMPRESS_OVER,
        compress_level: int = COMPRESS_LEVEL,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        default_topic_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS,
        poll_name_server_interval: float = 30.0,
        heartbeat_broker_interval: float = 30.0,
        namesrv_timeout: float = 3.0,
        connect_timeout: float = 3.0,
        serialize_type: int = SerializeType.MSGPACK,
        send_smart_msg: bool = True,
        max_in_flight: int = 4096,
        uniq_generator: UniqIdGenerator | None = None,
        attempt_hook: SendAttemptHook | None = None,
        auto_batch: bool = True,
        auto_batch_max_messages: int = AUTO_BATCH_MAX_MESSAGES,
        auto_batch_max_bytes: int = AUTO_BATCH_MAX_BYTES,
    ) -> None:
        self.group = check_producer_group(group)
        if send_msg_timeout <= 0:
            raise ValueError("send_msg_timeout must be positive")
        if retry_times_when_send_failed < 0 or retry_times_when_send_async_failed < 0:
            raise ValueError("retry times must not be negative")
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        if auto_batch_max_messages < 1 or auto_batch_max_bytes < 1:
            raise ValueError("auto_batch_max_messages and auto_batch_max_bytes must be positive")
        if max_message_size < 1 or compress_over < 1:
            raise ValueError("max_message_size and compress_over must be positive")
        if serialize_type not in (SerializeType.JSON, SerializeType.ROCKETMQ, SerializeType.MSGPACK):
            raise ValueError(f"unknown serialize type {serialize_type}")
        self.send_msg_timeout = send_msg_timeout
        self.retry_times_when_send_failed = retry_times_when_send_failed
        self.retry_times_when_send_async_failed = retry_times_when_send_async_failed
        self.retry_another_broker_when_not_store_ok = retry_another_broker_when_not_store_ok
        self.compress_over = compress_over
        self.compress_level = compress_level
        self.max_message_size = max_message_size
        self.default_topic_queue_nums = default_topic_queue_nums
        self.serialize_type = int(serialize_type)
        self.send_smart_msg = send_smart_msg
        self.max_in_flight = max_in_flight
        self.auto_batch = auto_batch
        self.auto_batch_max_messages = auto_batch_max_messages
        self.auto_batch_max_bytes = min(auto_batch_max_bytes, max_message_size)
        self.client_config = ClientConfig(
            namesrv_addrs=parse_namesrv_addr(namesrv_addr),
            client_id=client_id(ip=client_ip, instance_name=instance_name),
            serialize_type=self.serialize_type,
            poll_name_server_interval=poll_name_server_interval,
            heartbeat_broker_interval=heartbeat_broker_interval,
            namesrv_timeout=namesrv_timeout,
            connect_timeout=connect_timeout,
            default_topic_queue_nums=default_topic_queue_nums,
        )
        self.fault_strategy = MQFaultStrategy(
            send_latency_fault_enable=send_latency_fault_enable,
            latency_max=latency_max,
            not_available_duration=not_available_duration,
        )
        self._uniq = uniq_generator or default_generator()
        #: Called after every attempt (see :data:`SendAttemptHook`); exceptions it raises are logged.
        self.attempt_hook = attempt_hook
        self._state = _State.CREATED
        self._instance: MQClientInstance | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # The instance's tables, read directly on the hot path (set at start).
        self._publish: dict[str, TopicPublishInfo] = {}
        self._masters: dict[str, str] = {}
        self._conns: dict[str, Connection] = {}
        self._topics: dict[str, _TopicState] = {}
        self._in_flight = 0
        self._slot_waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._idle: asyncio.Future[None] | None = None
        self._async_tasks: set[asyncio.Task[Any]] = set()
        # Auto-batching: sends waiting for the end of this loop step, by (topic, async?).
        self._pending: dict[tuple[str, bool], list[_Pending]] = {}
        self._oneway_count = 0
        self._log = log.bind(group=self.group)

    # -- lifecycle --------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Join (or create) the loop's client instance and register the group. Idempotent while running."""
        if self._state is _State.RUNNING:
            return
        if self._state is not _State.CREATED:
            raise ProducerStateError(f"the producer is {self._state.value}; create a new one")
        self._loop = asyncio.get_running_loop()
        instance = acquire_instance(self.client_config)
        try:
            instance.register_producer(self.group, self)
        except MQClientError:
            if not instance.producer_groups:
                await instance.shutdown()
            raise
        self._instance = instance
        self._publish = instance.publish_table
        self._masters = instance.master_table
        self._conns = instance.connections
        self._state = _State.RUNNING
        self._log.info("producer_started", client_id=instance.client_id,
                       namesrv=";".join(self.client_config.namesrv_addrs))

    async def shutdown(self, grace: float | None = None) -> None:
        """Stop taking sends, let in-flight ones finish (at most ``grace``, default ``send_msg_timeout``),
        unregister the group from every broker and release the client instance."""
        if self._state is _State.CREATED:
            self._state = _State.STOPPED
            return
        if self._state is not _State.RUNNING:
            return
        self._state = _State.STOPPING
        while self._slot_waiters:
            waiter = self._slot_waiters.popleft()
            if not waiter.done():
                waiter.set_exception(ProducerStateError("the producer is shutting down"))
        if self._in_flight:
            assert self._loop is not None
            self._idle = self._loop.create_future()
            await asyncio.wait({self._idle}, timeout=self.send_msg_timeout if grace is None else grace)
        for task in list(self._async_tasks):
            task.cancel()
        if self._async_tasks:
            await asyncio.wait(set(self._async_tasks), timeout=1.0)
        assert self._instance is not None
        await self._instance.unregister_producer(self.group)
        self._state = _State.STOPPED
        self._log.info("producer_stopped")

    async def __aenter__(self) -> Producer:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.shutdown()

    @property
    def running(self) -> bool:
        return self._state is _State.RUNNING

    @property
    def instance(self) -> MQClientInstance:
        """The shared client instance (routes, connections, heartbeats); only while started."""
        if self._instance is None:
            raise ProducerStateError("the producer has not been started")
        return self._instance

    @property
    def in_flight(self) -> int:
        """Sends (sync and async) waiting for an answer right now."""
        return self._in_flight

    # -- sending ----------------------------------------------------------------------------------------

    async def send(
        self,
        msg: Message,
        *,
        timeout: float | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
    ) -> SendResult:
        """Send and wait for the broker's answer (rules in the module docstring)."""
        if self._state is not _State.RUNNING:
            self._raise_not_running()
        out = self._prepare(msg)
        if selector is not None:
            return await self._send_sync(out, timeout, msg, selector, arg)
        # Fast path: route known, connection up, a slot free. Anything else takes the general path.
        info = self._publish.get(out.topic)
        if info is None or not info.ok or self._in_flight >= self.max_in_flight:
            return await self._send_sync(out, timeout, None, None, None)
        budget = self.send_msg_timeout if timeout is None else self._budget(timeout)
        if self._in_flight and out.batchable and self.auto_batch:
            # Others are in flight: join this loop step's batch (its queue is chosen when it leaves).
            self._in_flight += 1
            try:
                return await self._coalesce(out, budget, False)
            finally:
                self._release_slot()
        queue = self.fault_strategy.select_one_message_queue(info, None)
        addr = self._masters.get(queue.broker_name)
        conn = self._conns.get(addr) if addr is not None else None
        if addr is None or conn is None or conn.is_closed:
            return await self._send_sync(out, timeout, None, None, None)
        self._in_flight += 1
        try:
            return await self._first_attempt(out, info, queue, addr, conn, budget,
                                             1 + self.retry_times_when_send_failed, is_retriable_send_error,
                                             self.retry_another_broker_when_not_store_ok)
        finally:
            self._release_slot()

    async def send_batch(self, messages: Iterable[Message], *, timeout: float | None = None) -> SendResult:
        """Send messages of one topic as one SEND_BATCH_MESSAGE, with ``send``'s retry rules.

        The result's ``msg_id`` and ``offset_msg_id`` are comma-joined, one id per message, in order.
        """
        if self._state is not _State.RUNNING:
            self._raise_not_running()
        try:
            batch = MessageBatch.of(messages, generator=self._uniq, max_size=self.max_message_size)
        except TypeError as exc:  # a property name or value that is not a str
            raise InvalidMessageError(f"a batch message has a non-str property: {exc}") from None
        state = self._topic_state(batch.topic)
        properties = check_and_encode_properties(batch.properties)
        out = _Outgoing(batch.topic, state.batch_template, batch.body, 0, 0, properties, batch.msg_id)
        return await self._send_sync(out, timeout, None, None, None)

    def send_async(
        self, msg: Message, *, callback: SendCallback | None = None, timeout: float | None = None
    ) -> asyncio.Future[SendResult]:
        """Start a send and return its future at once (call from the producer's loop).

        Validation and state errors, and a full in-flight window (:class:`BufferFullError`), are raised here;
        everything after (route, network, broker) completes the future and calls ``callback(result, error)``.
        """
        if self._state is not _State.RUNNING:
            self._raise_not_running()
        out = self._prepare(msg)
        if self._in_flight >= self.max_in_flight:
            raise BufferFullError(f"{self._in_flight} sends in flight, the limit (max_in_flight) is reached")
        budget = self._budget(timeout)
        self._in_flight += 1
        if self._in_flight > 1 and out.batchable and self.auto_batch:
            future = self._coalesce(out, budget, True)
            if callback is not None:
                future.add_done_callback(lambda f: _run_callback(callback, f))
            return future
        assert self._loop is not None
        task = self._loop.create_task(self._send_async(out, budget))
        self._async_tasks.add(task)
        task.add_done_callback(self._async_done)
        if callback is not None:
            task.add_done_callback(lambda t: _run_callback(callback, t))
        return task

    async def send_oneway(self, msg: Message) -> None:
        """Send without waiting for (or getting) an answer: one attempt, no retry."""
        if self._state is not _State.RUNNING:
            self._raise_not_running()
        out = self._prepare(msg)
        deadline = _monotonic() + self.send_msg_timeout
        info = self._publish.get(out.topic)
        if info is None or not info.ok:
            info = await self.instance.find_publish_info(out.topic, self.send_msg_timeout)
        queue = self.fault_strategy.select_one_message_queue(info, None)
        addr = self._masters.get(queue.broker_name)
        if addr is None:
            raise BrokerNotFoundError(queue.broker_name)
        conn = self._conns.get(addr)
        if conn is None or conn.is_closed:
            conn = await self.instance.connect(addr, deadline - _monotonic())
        request = self._request(out, queue)
        request.flag = FLAG_ONEWAY
        await conn.oneway(request)
        self._oneway_count += 1
        if self._oneway_count >= ONEWAY_YIELD_EVERY:
            self._oneway_count = 0
            await asyncio.sleep(0)

    async def fetch_publish_message_queues(self, topic: str, *, timeout: float | None = None) -> list[MessageQueue]:
        """The topic's writable queues as this producer sees them (looked up if not known yet)."""
        if self._state is not _State.RUNNING:
            self._raise_not_running()
        check_topic(topic)
        info = await self.instance.find_publish_info(topic, self._budget(timeout))
        return list(info.message_queues)

    # -- internals: preparation -------------------------------------------------------------------------

    def _budget(self, timeout: float | None) -> float:
        if timeout is None:
            return self.send_msg_timeout
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        return timeout

    def _raise_not_running(self) -> None:
        raise ProducerStateError(f"the producer is {self._state.value}, not running")

    def _topic_state(self, topic: str) -> _TopicState:
        state = self._topics.get(topic)
        if state is None:
            check_topic(topic)
            state = _TopicState(
                topic,
                SendHeaderTemplate(self.group, topic, smart=self.send_smart_msg,
                                   default_topic_queue_nums=self.default_topic_queue_nums),
                SendHeaderTemplate(self.group, topic, batch=True,
                                   default_topic_queue_nums=self.default_topic_queue_nums),
            )
            if len(self._topics) >= MAX_CACHED_TOPICS:
                del self._topics[next(iter(self._topics))]
            self._topics[topic] = state
        return state

    def _prepare(self, msg: Message) -> _Outgoing:
        """Validate once and compute everything every attempt reuses (raises InvalidMessageError)."""
        if not isinstance(msg, Message):
            raise InvalidMessageError(f"expected a Message, got {type(msg).__name__}")
        topic = msg.topic
        state = self._topics.get(topic) if isinstance(topic, str) else None
        if state is None:
            state = self._topic_state(topic)
        body = msg.body
        if not isinstance(body, bytes | bytearray | memoryview):
            raise InvalidMessageError(f"the message body must be bytes, not {type(body).__name__}")
        size = len(body)
        if not size:
            raise InvalidMessageError("the message body is empty")
        props = msg.properties
        if MessageConst.PROPERTY_DELAY_TIME_LEVEL in props:
            _check_delay_level(props[MessageConst.PROPERTY_DELAY_TIME_LEVEL])
        msg_id = props.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if msg_id is None:
            msg_id = props[MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = self._uniq.next_id()
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
        batchable = (not sys_flag and retry_fields is None and MessageConst.PROPERTY_DELAY_TIME_LEVEL not in props
                     and props.get(MessageConst.PROPERTY_WAIT_STORE_MSG_OK) != "false"
                     and size <= self.auto_batch_max_bytes)
        return _Outgoing(topic, state.template, body, sys_flag, msg.flag, properties, msg_id, retry_fields, batchable)

    def _request(self, out: _Outgoing, queue: MessageQueue) -> RemotingCommand:
        template = out.template
        ext = template.fields(queue.queue_id, out.sys_flag, _time_ns() // 1_000_000, out.flag, out.properties)
        if out.retry_fields is not None:
            template.set_reconsume(ext, *out.retry_fields)
        return RemotingCommand(template.code, opaque=next_opaque(), ext_fields=ext, body=out.body,
                               serialize_type=self.serialize_type)

    # -- internals: slots -------------------------------------------------------------------------------

    async def _acquire_slot(self, deadline: float) -> None:
        if len(self._slot_waiters) >= MAX_SLOT_WAITERS:
            raise BufferFullError(f"{len(self._slot_waiters)} sends already wait for a slot")
        assert self._loop is not None
        waiter: asyncio.Future[None] = self._loop.create_future()
        self._slot_waiters.append(waiter)
        try:
            async with asyncio.timeout(max(deadline - _monotonic(), 0.0)):
                await waiter
        except TimeoutError:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                return  # the slot was handed over just as the time ran out: keep it
            raise BufferFullError(
                f"no send slot freed within the send timeout ({self.max_in_flight} sends in flight)"
            ) from None

    def _release_slot(self) -> None:
        waiters = self._slot_waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot passes to the waiter: the count does not change
                return
        self._in_flight -= 1
        if not self._in_flight and self._idle is not None and not self._idle.done():
            self._idle.set_result(None)

    # -- internals: the send loops ----------------------------------------------------------------------

    async def _send_sync(
        self,
        out: _Outgoing,
        timeout: float | None,
        msg: Message | None,
        selector: MessageQueueSelector | None,
        arg: Any,
    ) -> SendResult:
        budget = self.send_msg_timeout if timeout is None else self._budget(timeout)
        begin = _monotonic()
        deadline = begin + budget
        if self._in_flight < self.max_in_flight:
            self._in_flight += 1
        else:
            await self._acquire_slot(deadline)
        try:
            info = self._publish.get(out.topic)
            if info is None or not info.ok:
                info = await self.instance.find_publish_info(out.topic, max(deadline - _monotonic(), 0.0))
            if selector is not None:
                assert msg is not None
                return await self._send_selected(out, info, selector, msg, arg, begin, deadline)
            return await self._send_with_retries(
                out, info, begin, deadline, 1 + self.retry_times_when_send_failed, is_retriable_send_error,
                self.retry_another_broker_when_not_store_ok,
            )
        finally:
            self._release_slot()

    async def _send_async(self, out: _Outgoing, budget: float) -> SendResult:
        return await self._send_outgoing(out, budget, True)

    def _async_done(self, task: asyncio.Task[SendResult]) -> None:
        self._async_tasks.discard(task)
        self._release_slot()

    # -- internals: auto-batching -----------------------------------------------------------------------

    def _coalesce(self, out: _Outgoing, budget: float, is_async: bool) -> asyncio.Future[SendResult]:
        """Queue a send until the end of this loop step; all sends of a topic queued by then leave together
        as one SEND_BATCH_MESSAGE (see the module docstring). Returns the send's own future."""
        assert self._loop is not None
        future: asyncio.Future[SendResult] = self._loop.create_future()
        key = (out.topic, is_async)
        pending = self._pending.get(key)
        if pending is None:
            pending = self._pending[key] = []
            self._loop.call_soon(self._flush_pending, key)
        pending.append(_Pending(out, future, budget))
        return future

    def _flush_pending(self, key: tuple[str, bool]) -> None:
        """Split a topic's queued sends into batches within the size bounds and start one task per batch."""
        pending = self._pending.pop(key, None)
        if not pending:
            return
        assert self._loop is not None
        max_count, max_bytes = self.auto_batch_max_messages, self.auto_batch_max_bytes
        chunk: list[_Pending] = []
        size = 0
        for item in pending:
            entry = len(item.out.body) + len(item.out.properties) + BATCH_ENTRY_OVERHEAD
            if chunk and (len(chunk) >= max_count or size + entry > max_bytes):
                self._start_chunk(chunk, key[1])
                chunk, size = [], 0
            chunk.append(item)
            size += entry
        self._start_chunk(chunk, key[1])

    def _start_chunk(self, chunk: list[_Pending], is_async: bool) -> None:
        assert self._loop is not None
        task = self._loop.create_task(self._send_chunk(chunk, is_async))
        self._async_tasks.add(task)
        task.add_done_callback(self._async_tasks.discard)

    async def _send_chunk(self, chunk: list[_Pending], is_async: bool) -> None:
        """Send one coalesced batch and settle every send's future; an async send's slot is freed here (a
        sync send frees its own when its ``await`` returns)."""
        try:
            live = [item for item in chunk if not item.future.done()]  # some may have been cancelled meanwhile
            if live:
                await self._settle(live, is_async)
        finally:
            if is_async:
                for _ in chunk:
                    self._release_slot()

    async def _settle(self, chunk: list[_Pending], is_async: bool) -> None:
        out = chunk[0].out if len(chunk) == 1 else self._batch_outgoing(chunk)
        budget = min(item.budget for item in chunk)
        try:
            result = await self._send_outgoing(out, budget, is_async)
        except BaseException as exc:
            for item in chunk:
                if not item.future.done():
                    item.future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        results = [result] if len(chunk) == 1 else _split_batch_result(result, [item.out for item in chunk])
        for item, own in zip(chunk, results, strict=True):
            if not item.future.done():
                item.future.set_result(own)

    def _batch_outgoing(self, chunk: list[_Pending]) -> _Outgoing:
        first = chunk[0].out
        parts: list[bytes | bytearray | memoryview] = []
        for item in chunk:
            append_batch_entry(parts, item.out.body, item.out.flag, item.out.properties.encode())
        state = self._topic_state(first.topic)
        return _Outgoing(first.topic, state.batch_template, b"".join(parts), 0, 0, _BATCH_HEADER_PROPERTIES,
                         ",".join(item.out.msg_id for item in chunk))

    async def _send_outgoing(self, out: _Outgoing, budget: float, is_async: bool) -> SendResult:
        """``send``'s or ``send_async``'s attempts for a prepared message, whatever the route's state."""
        if is_async:
            attempts, retriable, retry_not_ok = (1 + self.retry_times_when_send_async_failed,
                                                 is_retriable_async_error, False)
        else:
            attempts, retriable, retry_not_ok = (1 + self.retry_times_when_send_failed, is_retriable_send_error,
                                                 self.retry_another_broker_when_not_store_ok)
        info = self._publish.get(out.topic)
        if info is not None and info.ok:
            queue = self.fault_strategy.select_one_message_queue(info, None)
            addr = self._masters.get(queue.broker_name)
            conn = self._conns.get(addr) if addr is not None else None
            if addr is not None and conn is not None and not conn.is_closed:
                return await self._first_attempt(out, info, queue, addr, conn, budget, attempts, retriable,
                                                 retry_not_ok)
        begin = _monotonic()
        if info is None or not info.ok:
            info = await self.instance.find_publish_info(out.topic, budget)
        return await self._send_with_retries(out, info, begin, begin + budget, attempts, retriable, retry_not_ok)

    async def _first_attempt(
        self,
        out: _Outgoing,
        info: TopicPublishInfo,
        queue: MessageQueue,
        addr: str,
        conn: Connection,
        budget: float,
        attempts: int,
        retriable: Callable[[BaseException], bool],
        retry_not_ok: bool,
    ) -> SendResult:
        """Attempt 1 on a known route and live connection; hands over to :meth:`_send_with_retries` after."""
        start = _monotonic()
        try:
            response = await conn.request(self._request(out, queue), budget)
            result = _send_result(response, queue, out.msg_id, addr)
        except PocketMQError as exc:
            self._attempt_failed(out.topic, queue, start, exc)
            if not retriable(exc):
                raise
            return await self._send_with_retries(
                out, info, start, start + budget, attempts, retriable, retry_not_ok,
                first_attempt=1, errors=[exc], brokers=[queue.broker_name], last_broker=queue.broker_name,
            )
        self._attempt_ok(queue, start)
        if result.status is _SEND_OK or not retry_not_ok:
            return result
        return await self._send_with_retries(
            out, info, start, start + budget, attempts, retriable, retry_not_ok,
            first_attempt=1, brokers=[queue.broker_name], last_broker=queue.broker_name, result=result,
        )

    async def _send_with_retries(
        self,
        out: _Outgoing,
        info: TopicPublishInfo,
        begin: float,
        deadline: float,
        attempts: int,
        retriable: Callable[[BaseException], bool],
        retry_not_ok: bool,
        *,
        first_attempt: int = 0,
        errors: list[BaseException] | None = None,
        brokers: list[str] | None = None,
        last_broker: str | None = None,
        result: SendResult | None = None,
    ) -> SendResult:
        """Attempts ``first_attempt + 1`` .. ``attempts``, continuing from the state the caller passes in."""
        fault = self.fault_strategy
        errors = [] if errors is None else errors
        brokers = [] if brokers is None else brokers
        timed_out = False
        for attempt in range(first_attempt, attempts):
            if attempt:
                fresh = self._publish.get(out.topic)  # a background refresh may have replaced it
                if fresh is not None and fresh.ok:
                    info = fresh
            queue = fault.select_one_message_queue(info, last_broker)
            start = _monotonic()
            if start >= deadline or (attempt and deadline - start < MIN_ATTEMPT_BUDGET):
                timed_out = True
                break
            brokers.append(queue.broker_name)
            try:
                result = await self._invoke(out, queue, deadline)
            except PocketMQError as exc:
                self._attempt_failed(out.topic, queue, start, exc)
                if not retriable(exc):
                    if result is not None:
                        return result  # an earlier attempt stored the message (not-OK status)
                    raise
                errors.append(exc)
                last_broker = queue.broker_name
                continue
            self._attempt_ok(queue, start)
            if result.status is _SEND_OK or not retry_not_ok:
                return result
            last_broker = queue.broker_name
        if result is not None:
            return result
        error = SendFailedError(out.topic, errors=errors, brokers_tried=brokers,
                                elapsed_ms=(_monotonic() - begin) * 1000.0, timed_out=timed_out)
        raise error from (errors[-1] if errors else None)

    async def _send_selected(
        self,
        out: _Outgoing,
        info: TopicPublishInfo,
        selector: MessageQueueSelector,
        msg: Message,
        arg: Any,
        begin: float,
        deadline: float,
    ) -> SendResult:
        queue = selector(info.message_queues, msg, arg)
        if not isinstance(queue, MessageQueue):
            raise MQClientError(f"the queue selector returned {type(queue).__name__}, not a MessageQueue")
        if queue.topic != out.topic:
            raise MQClientError(f"the queue selector returned a queue of topic {queue.topic}, not {out.topic}")
        start = _monotonic()
        try:
            result = await self._invoke(out, queue, deadline)
        except PocketMQError as exc:
            self._attempt_failed(out.topic, queue, start, exc)
            if not is_retriable_send_error(exc):
                raise
            error = SendFailedError(out.topic, errors=[exc], brokers_tried=[queue.broker_name],
                                    elapsed_ms=(_monotonic() - begin) * 1000.0)
            raise error from exc
        self._attempt_ok(queue, start)
        return result

    def _attempt_ok(self, queue: MessageQueue, start: float) -> None:
        latency = (_monotonic() - start) * 1000.0
        self.fault_strategy.update_fault_item(queue.broker_name, latency, False)
        if self.attempt_hook is not None:
            self._call_hook(queue, None, latency)

    def _call_hook(self, queue: MessageQueue, error: BaseException | None, latency: float) -> None:
        assert self.attempt_hook is not None
        try:
            self.attempt_hook(queue, error, latency)
        except Exception:
            self._log.exception("send_attempt_hook_failed")

    def _attempt_failed(self, topic: str, queue: MessageQueue, start: float, exc: PocketMQError) -> None:
        latency = (_monotonic() - start) * 1000.0
        self.fault_strategy.update_fault_item(queue.broker_name, latency, _isolates(exc))
        if self.attempt_hook is not None:
            self._call_hook(queue, exc, latency)
        if exc.refresh_route and self._instance is not None:
            self._instance.request_refresh(topic)
        self._log.debug("send_attempt_failed", topic=topic, broker=queue.broker_name, queue_id=queue.queue_id,
                        latency_ms=round(latency, 3), error=str(exc))

    async def _invoke(self, out: _Outgoing, queue: MessageQueue, deadline: float) -> SendResult:
        """One request to the queue's master: the only network round trip of an attempt."""
        addr = self._masters.get(queue.broker_name)
        if addr is None:
            raise BrokerNotFoundError(queue.broker_name)
        conn = self._conns.get(addr)
        if conn is None or conn.is_closed:
            conn = await self.instance.connect(addr, deadline - _monotonic())
        response = await conn.request(self._request(out, queue), deadline - _monotonic())
        return _send_result(response, queue, out.msg_id, addr)


def _send_result(response: RemotingCommand, queue: MessageQueue, msg_id: str, addr: str) -> SendResult:
    """:func:`~client.message.send_result_from_response`, with the common case (SUCCESS and well-formed
    fields) built directly: it runs once per message, and the general function is ~2 µs slower."""
    ext = response.ext_fields
    if response.code == ResponseCode.SUCCESS and ext is not None:
        try:
            offset_msg_id = ext["msgId"]
            queue_id = int(ext["queueId"])
            queue_offset = int(ext["queueOffset"])
        except (KeyError, ValueError):
            pass  # malformed: the general function names what is wrong
        else:
            if queue_id != queue.queue_id:
                queue = MessageQueue(queue.topic, queue.broker_name, queue_id)
            return SendResult(_SEND_OK, msg_id, offset_msg_id, queue, queue_offset,
                              ext.get(MessageConst.PROPERTY_MSG_REGION) or DEFAULT_REGION,
                              ext.get(MessageConst.PROPERTY_TRACE_SWITCH) != "false",
                              ext.get("transactionId"))
    return send_result_from_response(response.code, ext, message_queue=queue, msg_id=msg_id,
                                     remark=response.remark, addr=addr)


def _split_batch_result(result: SendResult, outs: list[_Outgoing]) -> list[SendResult]:
    """One coalesced batch's answer as each message's own result: its ``UNIQ_KEY``, its broker id (the
    broker joins them with commas, in order) and its queue offset (the batch's first offset + its index)."""
    offset_ids = result.offset_msg_id.split(",")
    if len(offset_ids) != len(outs):
        offset_ids = [result.offset_msg_id] * len(outs)
    base = result.queue_offset
    return [SendResult(result.status, out.msg_id, offset_ids[i], result.message_queue, base + i, result.region_id,
                       result.trace_on, result.transaction_id) for i, out in enumerate(outs)]


def _check_delay_level(raw: str) -> None:
    try:
        level = int(raw)
    except ValueError:
        raise InvalidMessageError("the DELAY property is not an integer") from None
    if level < 0:
        raise InvalidMessageError(f"the delay level must not be negative: {level}")


def _run_callback(callback: SendCallback, task: asyncio.Future[SendResult]) -> None:
    try:
        if task.cancelled():
            callback(None, asyncio.CancelledError())
        elif task.exception() is not None:
            callback(None, task.exception())
        else:
            callback(task.result(), None)
    except Exception:
        log.exception("send_callback_failed")
