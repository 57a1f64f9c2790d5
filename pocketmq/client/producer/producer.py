"""``Producer``: the asyncio producer (RocketMQ's ``DefaultMQProducer``), networked.

Usage::

    async with Producer("my-group", namesrv_addr="127.0.0.1:9876") as producer:
        result = await producer.send(Message("TopicTest", b"hello", tags="TagA"))

Its keyword arguments are the fields of :class:`~pocketmq.client.producer.config.ProducerConfig`. Four ways to send, as
RocketMQ's ``DefaultMQProducer`` has them:

* ``await send(msg)`` — sync semantics: up to ``1 + retry_times_when_send_failed`` attempts, all inside one
  overall timeout (``send_msg_timeout``, 3 s), a retry on another broker than the one that just failed.
  Retried: transport errors, retriable client errors, and the broker codes RocketMQ retries ({17, 14, 1, 16,
  204, 205}; SYSTEM_BUSY 2 is not). Other broker codes are raised as they are (``except
  MessageIllegalError``). A stored-but-not-OK status is returned, not retried, unless
  ``retry_another_broker_when_not_store_ok``. When every attempt fails:
  :class:`~pocketmq.client.core.errors.SendFailedError` (``errors``, ``brokers_tried``, ``timed_out``). The rules of
  the attempts are in :mod:`pocketmq.client.producer.send_loop`.
* ``send(msg, selector=f, arg=a)`` — ordered messages: ``f(queues, msg, a)`` picks the queue; one attempt,
  never moved to another queue. A message with a ``message_group`` (RocketMQ 5 FIFO) is sent this way, to its
  group's queue (:mod:`pocketmq.client.producer.message_group`), by ``send`` and ``send_async`` alike.
* ``send_async(msg, callback=cb)`` — returns a future at once; retries (``retry_times_when_send_async_failed``)
  only after transport failures, as RocketMQ does.
* ``await send_oneway(msg)`` — one request, no answer, no retry.
* ``await send_batch(msgs)`` — one SEND_BATCH_MESSAGE (320) with the same retry rules as ``send``.
* ``await request(msg, timeout=t)`` — request-reply: send ``msg`` as a request (``CORRELATION_ID``,
  ``REPLY_TO_CLIENT``, ``TTL``) and return the reply a consumer sends back
  (:func:`~pocketmq.client.core.reply.create_reply_message`, then any producer's ``send``, which sends a reply
  with SEND_REPLY_MESSAGE_V2); :class:`~pocketmq.client.core.errors.RequestTimeoutError` when none comes within
  ``t``. At most ``max_pending_requests`` wait at once (:mod:`pocketmq.client.producer.request`).

Bounds: at most ``max_in_flight`` sends (sync and async) at once; ``send`` waits for a slot within its
timeout, ``send_async`` raises :class:`~pocketmq.remoting.errors.BufferFullError` at once. ``send_oneway`` yields to
the loop every :data:`ONEWAY_YIELD_EVERY` sends, so output is flushed and the connection's write
backpressure applies.

Under concurrency, ``send`` and ``send_async`` are coalesced into batches (``auto_batch``, on by default;
:mod:`pocketmq.client.producer.accumulator`).

A broker isolated because it did not answer is probed every second and used again as soon as it answers;
meanwhile the routes that name it are refreshed every ``min_refresh_interval``, and a route that brings its
master back ends its isolation (:mod:`pocketmq.client.producer.probe`).

Each producer keeps its own publish info per topic (:class:`~pocketmq.client.producer.topic_publish.TopicPublishInfo`),
rebuilt whenever its client instance applies a changed route (:meth:`Producer.update_topic_route`).

Hot path: a message is validated and encoded once (:mod:`pocketmq.client.producer.outgoing`, with the ext fields of a
(group, topic) precomputed); a send is one dict copy, one :class:`~pocketmq.remoting.command.RemotingCommand`, one
request on an existing connection, and no logging.
"""

from __future__ import annotations

import asyncio
import collections
import time
import uuid
from collections.abc import Callable, Coroutine, Iterable
from typing import TYPE_CHECKING, Any, Unpack

from pocketmq.client.core.errors import (
    MQClientError,
    ProducerStateError,
    RequestTimeoutError,
    is_retriable_async_error,
    is_retriable_send_error,
)
from pocketmq.client.core.instance import MQClientInstance, join_instance
from pocketmq.client.core.member import ClientMember, State
from pocketmq.client.core.message import Message, MessageQueue, SendResult
from pocketmq.client.core.message_ext import MessageExt
from pocketmq.client.core.query import querier_for
from pocketmq.client.core.uniq import default_generator
from pocketmq.client.core.validators import check_topic
from pocketmq.client.producer.accumulator import Accumulator
from pocketmq.client.producer.config import ProducerArgs, ProducerConfig, SendAttemptHook
from pocketmq.client.producer.fault import MQFaultStrategy
from pocketmq.client.producer.message_group import select_by_message_group
from pocketmq.client.producer.outgoing import MessagePreparer, Outgoing
from pocketmq.client.producer.probe import PROBE_INTERVAL, FaultProbe
from pocketmq.client.producer.request import RequestFutureTable
from pocketmq.client.producer.send_loop import MessageQueueSelector, RetryPolicy, SendLoop
from pocketmq.client.producer.topic_publish import TopicPublishInfo
from pocketmq.common.logs import get_logger
from pocketmq.common.message import MessageConst
from pocketmq.common.recall import RecallHandle
from pocketmq.common.service import periodic
from pocketmq.common.topic import reply_topic
from pocketmq.remoting.codes import FLAG_ONEWAY, RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import BufferFullError, PocketMQError, error_for_response
from pocketmq.remoting.headers import RecallMessageRequestHeader, RecallMessageResponseHeader
from pocketmq.remoting.route import MASTER_ID, TopicRouteData

if TYPE_CHECKING:
    from pocketmq.client.trace.hooks import TraceSession

__all__ = ["MAX_SLOT_WAITERS", "ONEWAY_YIELD_EVERY", "Producer", "SendCallback"]

log = get_logger("pocketmq.client.producer")

#: ``callback(result, error)`` of :meth:`Producer.send_async`: exactly one of the two is ``None``.
SendCallback = Callable[[SendResult | None, BaseException | None], object]

#: ``send_oneway`` lets the loop run (flush, apply write backpressure) after this many sends.
ONEWAY_YIELD_EVERY = 64
#: Callers waiting for a send slot at most; beyond it ``send`` fails at once with BufferFullError.
MAX_SLOT_WAITERS = 65536

_monotonic = time.monotonic
_SHARDING_KEY = MessageConst.PROPERTY_SHARDING_KEY
_RUNNING = State.RUNNING


class Producer(ClientMember):
    """An asyncio RocketMQ producer; see the module docstring. Create it anywhere, start it on a loop."""

    kind = "producer"
    state_error = ProducerStateError
    config: ProducerConfig

    def __init__(self, group: str, **options: Unpack[ProducerArgs]) -> None:
        config = ProducerConfig(group=group, **options)
        super().__init__(config)
        self.fault_strategy = MQFaultStrategy(send_latency_fault_enable=config.send_latency_fault_enable,
                                              latency_max=config.latency_max,
                                              not_available_duration=config.not_available_duration)
        self._log = log.bind(group=self.group)
        self._preparer = MessagePreparer(config, config.uniq_generator or default_generator())
        #: topic → publish info, from the routes the instance hands over; read directly on the hot path.
        self._publish: dict[str, TopicPublishInfo] = {}
        self._sender = SendLoop(self.fault_strategy, self._publish, self._preparer.request, config.attempt_hook,
                                self._log)
        self._sync_policy = RetryPolicy(1 + config.retry_times_when_send_failed, is_retriable_send_error,
                                        config.retry_another_broker_when_not_store_ok)
        self._async_policy = RetryPolicy(1 + config.retry_times_when_send_async_failed, is_retriable_async_error,
                                         False)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._accumulator = Accumulator(self._preparer, self._send_outgoing, self._release_slot, self._tasks,
                                        max_messages=config.auto_batch_max_messages,
                                        max_bytes=config.auto_batch_max_bytes)
        # The send window; its bounds are copied out of the config because the hot path reads them per send.
        self._in_flight = 0
        self._max_in_flight = config.max_in_flight
        self._timeout = config.send_msg_timeout
        self._auto_batch = config.auto_batch
        self._slot_waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._idle: asyncio.Future[None] | None = None
        self._oneway_count = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._trace: TraceSession | None = None
        probe = FaultProbe(self.fault_strategy, lambda: self.instance.routes.master_table,
                           lambda addr: self.instance.probe_broker(addr), self._refresh_routes_of, self._log)
        self._probe = periodic("producer-fault-probe", PROBE_INTERVAL, probe.tick)
        self._requests = RequestFutureTable(config.max_pending_requests)
        #: Reply topics whose brokers this producer's client has been announced to (see _prepare_request).
        self._reply_topics: set[str] = set()

    # -- lifecycle --------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Join (or create) the loop's client instance and register the group. Idempotent while running."""
        if not self._may_start():
            return
        self._loop = asyncio.get_running_loop()
        instance = await join_instance(self.config.client, lambda i: i.register_producer(self.group, self))
        self._instance = instance
        self._sender.attach(instance)
        self._accumulator.start(self._loop)
        self._probe.start()
        self._state = State.RUNNING
        if self.config.enable_trace:
            await self._start_tracing(instance)
        self._log.info("producer_started", client_id=instance.client_id,
                       namesrv=";".join(self.config.client.namesrv_addrs))

    async def shutdown(self, grace: float | None = None) -> None:
        """Stop taking sends, let in-flight ones finish (at most ``grace``, default ``send_msg_timeout``),
        unregister the group from every broker and release the client instance."""
        if not self._may_stop():
            return
        self._requests.fail_all(ProducerStateError("the producer is shutting down"))
        await self._drain(self._timeout if grace is None else grace)
        if self._trace is not None:
            await self._trace.stop()
        await self._probe.stop()
        await self.instance.unregister_producer(self.group)
        self._state = State.STOPPED
        self._log.info("producer_stopped")

    async def _drain(self, grace: float) -> None:
        """Fail the sends waiting for a slot, wait for those in flight, cancel what is left."""
        while self._slot_waiters:
            waiter = self._slot_waiters.popleft()
            if not waiter.done():
                waiter.set_exception(ProducerStateError("the producer is shutting down"))
        if self._in_flight:
            assert self._loop is not None
            self._idle = self._loop.create_future()
            await asyncio.wait({self._idle}, timeout=grace)
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=1.0)

    @property
    def in_flight(self) -> int:
        """Sends (sync and async) waiting for an answer right now."""
        return self._in_flight

    @property
    def attempt_hook(self) -> SendAttemptHook | None:
        """Called after every attempt (see :data:`~pocketmq.client.producer.config.SendAttemptHook`); may be replaced
        at any time; exceptions it raises are logged."""
        return self._sender.attempt_hook

    @attempt_hook.setter
    def attempt_hook(self, hook: SendAttemptHook | None) -> None:
        self._sender.attempt_hook = hook

    def publish_info(self, topic: str) -> TopicPublishInfo | None:
        """The topic's publish info as this producer holds it (``None`` before its route is known)."""
        return self._publish.get(topic)

    def update_topic_route(self, topic: str, route: TopicRouteData | None) -> None:
        """From the instance: the topic's route changed (``None``: forgotten). Publish info is rebuilt, so
        routes and queues are never changed in place (apache/rocketmq#7779)."""
        if route is None:
            self._publish.pop(topic, None)
            return
        old = self._publish.get(topic)
        info = self._publish[topic] = TopicPublishInfo.from_route(topic, route)
        if old is not None and len(self.fault_strategy.latency_fault_tolerance):
            self._restore_returned_masters(old, info)

    def _restore_returned_masters(self, old: TopicPublishInfo, new: TopicPublishInfo) -> None:
        """A broker whose master the route brings back, or names anew, is a new process: its isolation
        (earned by the one that failed) ends."""
        table = self.fault_strategy.latency_fault_tolerance
        for name in new.broker_names:
            addr = new.master_addr(name)
            if table.get(name) is not None and addr is not None and addr != old.master_addr(name):
                table.remove(name)
                self._log.info("broker_restored", broker=name, addr=addr, reason="new_master_in_route")

    def _refresh_routes_of(self, broker_names: Iterable[str]) -> None:
        """Ask for fresh routes (rate-limited by the instance) of the topics whose routes name a broker of
        ``broker_names``."""
        instance = self._instance
        if instance is None:
            return
        names = set(broker_names)
        routes = instance.routes.route_table
        for topic in list(self._publish):
            route = routes.get(topic)
            if route is not None and any(b.broker_name in names for b in route.broker_datas):
                instance.refresher.request(topic, publish=True)

    # -- sending ----------------------------------------------------------------------------------------

    async def send(
        self, msg: Message, *, timeout: float | None = None, selector: MessageQueueSelector | None = None,
        arg: Any = None,
    ) -> SendResult:
        """Send and wait for the broker's answer (rules in the module docstring)."""
        if self._state is not _RUNNING:
            self._raise_not_running()
        out = self._preparer.prepare(msg)
        if selector is None and _SHARDING_KEY in msg.properties:
            selector = select_by_message_group  # a FIFO message group: always its queue, one attempt
        if selector is not None:
            return await self._send_sync(out, timeout, msg, selector, arg)
        # Fast path: route known, a slot free. Anything else takes the general path.
        info = self._publish.get(out.topic)
        in_flight = self._in_flight
        if info is None or not info.message_queues or in_flight >= self._max_in_flight:
            return await self._send_sync(out, timeout, None, None, None)
        budget = self._timeout if timeout is None else self._budget(timeout)
        self._in_flight = in_flight + 1
        try:
            if in_flight and out.batchable and self._auto_batch:
                # Others are in flight: join this loop step's batch (its queue is chosen when it leaves).
                return await self._accumulator.add(out, budget, False)
            return await self._sender.send(out, budget, self._sync_policy, info)
        finally:
            if self._slot_waiters or self._in_flight == 1:
                self._release_slot()
            else:
                self._in_flight -= 1  # what _release_slot does when nobody waits and others are in flight

    async def send_batch(self, messages: Iterable[Message], *, timeout: float | None = None) -> SendResult:
        """Send messages of one topic as one SEND_BATCH_MESSAGE, with ``send``'s retry rules.

        The result's ``msg_id`` and ``offset_msg_id`` are comma-joined, one id per message, in order.
        """
        if self._state is not State.RUNNING:
            self._raise_not_running()
        out = self._preparer.prepare_batch(messages)
        return await self._send_sync(out, timeout, None, None, None)

    def send_async(
        self, msg: Message, *, callback: SendCallback | None = None, timeout: float | None = None
    ) -> asyncio.Future[SendResult]:
        """Start a send and return its future at once (call from the producer's loop).

        Validation and state errors, and a full in-flight window (:class:`BufferFullError`), are raised here;
        everything after (route, network, broker) completes the future and calls ``callback(result, error)``.
        """
        if self._state is not State.RUNNING:
            self._raise_not_running()
        out = self._preparer.prepare(msg)
        if self._in_flight >= self._max_in_flight:
            raise BufferFullError(f"{self._in_flight} sends in flight, the limit (max_in_flight) is reached")
        budget = self._budget(timeout)
        self._in_flight += 1
        future: asyncio.Future[SendResult]
        if _SHARDING_KEY in msg.properties:
            assert self._loop is not None
            future = task = self._loop.create_task(self._send_grouped(out, budget, msg))
            self._tasks.add(task)
            task.add_done_callback(self._async_done)
        elif self._in_flight > 1 and out.batchable and self._auto_batch:
            future = self._accumulator.add(out, budget, True)
        else:
            assert self._loop is not None
            future = task = self._loop.create_task(self._send_outgoing(out, budget, True))
            self._tasks.add(task)
            task.add_done_callback(self._async_done)
        if callback is not None:
            future.add_done_callback(lambda f: _run_callback(callback, f))
        return future

    async def send_oneway(self, msg: Message) -> None:
        """Send without waiting for (or getting) an answer: one attempt, no retry."""
        if self._state is not State.RUNNING:
            self._raise_not_running()
        out = self._preparer.prepare(msg)
        deadline = _monotonic() + self._timeout
        info = self._publish.get(out.topic)
        if info is None or not info.ok:
            info = await self._sender.find_publish_info(out.topic, self._timeout)
        queue = self.fault_strategy.select_one_message_queue(info, None)
        conn = self._sender.live_connection(queue.broker_name)
        if conn is None:
            conn = await self._sender.connect_master(queue.broker_name, deadline - _monotonic())
        request = self._preparer.request(out, queue)
        request.flag = FLAG_ONEWAY
        await conn.oneway(request)
        self._oneway_count += 1
        if self._oneway_count >= ONEWAY_YIELD_EVERY:
            self._oneway_count = 0
            await asyncio.sleep(0)

    # -- request-reply ----------------------------------------------------------------------------------

    async def request(
        self, msg: Message, *, timeout: float | None = None, selector: MessageQueueSelector | None = None,
        arg: Any = None,
    ) -> MessageExt:
        """Send ``msg`` as a request and return its reply (RocketMQ's ``DefaultMQProducer.request``).

        ``msg`` gets ``CORRELATION_ID`` (a new UUID), ``REPLY_TO_CLIENT`` (this client's id) and ``TTL``
        (``timeout`` in ms), and is sent as ``send`` sends it (``selector``/``arg``: an ordered send); the whole
        call, send included, takes at most ``timeout`` (default ``send_msg_timeout``). Raises what ``send`` raises
        when the request cannot be sent, :class:`~pocketmq.client.core.errors.RequestTimeoutError` when it was sent
        but no reply came in time, and :class:`~pocketmq.client.core.errors.RequestTableFullError` at once when
        ``max_pending_requests`` requests already wait.
        """
        if self._state is not _RUNNING:
            self._raise_not_running()
        budget = self._budget(timeout)
        deadline = _monotonic() + budget
        correlation_id = str(uuid.uuid4())
        props = msg.properties
        props[MessageConst.PROPERTY_CORRELATION_ID] = correlation_id
        props[MessageConst.PROPERTY_MESSAGE_REPLY_TO_CLIENT] = self.instance.client_id
        props[MessageConst.PROPERTY_MESSAGE_TTL] = str(int(budget * 1000))
        future = self._requests.add(correlation_id)
        try:
            await self._prepare_request(msg.topic, deadline)
            await self.send(msg, timeout=max(deadline - _monotonic(), 0.001), selector=selector, arg=arg)
            try:
                async with asyncio.timeout(max(deadline - _monotonic(), 0.0)):
                    return await future
            except TimeoutError:
                raise RequestTimeoutError(msg.topic, correlation_id, budget) from None
        finally:
            self._requests.discard(correlation_id)

    async def _prepare_request(self, topic: str, deadline: float) -> None:
        """Make sure every broker a reply may reach knows this client before the first request of a cluster
        (RocketMQ's ``prepareSendRequest``): the reply goes to ``<cluster>_REPLY_TOPIC`` on any broker of the
        request topic's clusters, and a broker finds the requester by its heartbeat. Their route is fetched once,
        then every broker is heartbeated and the answers awaited."""
        await self._sender.find_publish_info(topic, max(deadline - _monotonic(), 0.001))
        route = self.instance.routes.route_table.get(topic)
        topics = {reply_topic(b.cluster) for b in route.broker_datas} if route is not None else set()
        fresh = topics - self._reply_topics
        if not fresh:
            return
        for name in sorted(fresh):
            try:
                await self.instance.refresher.refresh(name, max(deadline - _monotonic(), 0.001), publish=False)
            except PocketMQError as exc:  # a broker without a reply topic: its own brokers are heartbeated anyway
                self._log.warning("reply_topic_route_failed", topic=name, error=str(exc))
        self._reply_topics.update(fresh)
        await self.instance.send_heartbeat_to_all()

    def take_reply(self, correlation_id: str, reply: MessageExt) -> bool:
        """From the client instance: a reply the broker pushed; False when no request of this producer waits
        for ``correlation_id``."""
        return self._requests.take(correlation_id, reply)

    @property
    def pending_requests(self) -> int:
        """Requests waiting for their reply right now."""
        return len(self._requests)

    async def fetch_publish_message_queues(self, topic: str, *, timeout: float | None = None) -> list[MessageQueue]:
        """The topic's writable queues as this producer sees them (looked up if not known yet)."""
        if self._state is not State.RUNNING:
            self._raise_not_running()
        check_topic(topic)
        info = await self._sender.find_publish_info(topic, self._budget(timeout))
        return list(info.message_queues)

    # -- internals --------------------------------------------------------------------------------------

    def _budget(self, timeout: float | None) -> float:
        if timeout is None:
            return self._timeout
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        return timeout

    async def _send_grouped(self, out: Outgoing, budget: float, msg: Message) -> SendResult:
        """``send_async`` of a message with a message group: the one attempt on its group's queue."""
        begin = _monotonic()
        deadline = begin + budget
        info = await self._sender.find_publish_info(out.topic, budget)
        return await self._sender.send_selected(out, info, select_by_message_group, msg, None, begin, deadline,
                                                self._async_policy)

    def _send_outgoing(self, out: Outgoing, budget: float, is_async: bool) -> Coroutine[Any, Any, SendResult]:
        """Every attempt of ``send``'s or ``send_async``'s kind for a prepared message or coalesced batch."""
        return self._sender.send(out, budget, self._async_policy if is_async else self._sync_policy)

    async def _send_sync(
        self, out: Outgoing, timeout: float | None, msg: Message | None, selector: MessageQueueSelector | None,
        arg: Any,
    ) -> SendResult:
        """``send`` and ``send_batch`` off the fast path: a slot (waited for), the route (looked up), then
        the attempts, or the one attempt of an ordered send."""
        budget = self._budget(timeout)
        begin = _monotonic()
        deadline = begin + budget
        if self._in_flight < self._max_in_flight:
            self._in_flight += 1
        else:
            await self._acquire_slot(deadline)
        try:
            info = await self._sender.find_publish_info(out.topic, max(deadline - _monotonic(), 0.0))
            if selector is not None:
                assert msg is not None
                return await self._sender.send_selected(out, info, selector, msg, arg, begin, deadline,
                                                        self._sync_policy)
            return await self._sender.with_retries(out, info, begin, deadline, self._sync_policy)
        finally:
            self._release_slot()

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
                f"no send slot freed within the send timeout ({self._max_in_flight} sends in flight)"
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

    def _async_done(self, task: asyncio.Task[SendResult]) -> None:
        self._tasks.discard(task)
        self._release_slot()

    async def _start_tracing(self, instance: MQClientInstance) -> None:
        """``enable_trace``: trace every stored message (:mod:`pocketmq.client.trace`). ``send`` and ``send_async`` are
        replaced on this producer only, so a producer without tracing runs its own methods untouched."""
        from pocketmq.client.trace.hooks import SendTracer, TraceSession

        args = self.config.client_args()
        self._trace = await TraceSession.start(lambda name: Producer(name, **args), self.group,
                                               self.config.trace_topic)
        tracer = SendTracer(self._trace.dispatcher, self.group, instance.routes.master_table.get)
        self.send = tracer.wrap_send(self.send)  # type: ignore[method-assign,assignment]
        self.send_async = tracer.wrap_send_async(self.send_async)  # type: ignore[method-assign]

    # -- finding messages (client.core.query) -----------------------------------------------------------

    async def query_message(self, topic: str, key: str, max_num: int, begin: int, end: int) -> list[MessageExt]:
        """The stored messages of ``topic`` with ``key`` in their KEYS, stored in ``[begin, end]`` (epoch
        ms), newest first, from every broker of the topic (RocketMQ's ``queryMessage``)."""
        return await querier_for(self.instance, self._timeout).query_message(topic, key, max_num, begin, end)

    async def view_message(self, topic: str, msg_id: str) -> MessageExt:
        """The stored message named by an offset message id or a client unique id (``SendResult.msg_id``)."""
        return await querier_for(self.instance, self._timeout).view_message(topic, msg_id)

    async def recall_message(self, topic: str, recall_handle: str, *, timeout: float | None = None) -> str:
        """Recall a timer message before it is due, by the ``SendResult.recall_handle`` its send answered
        (RocketMQ 5.3's ``recallMessage``): the recalled message's id. The broker must have
        ``recallMessageEnable=true``; a recall that comes after the delivery succeeds and changes nothing.
        ValueError for a handle that does not decode, the broker's refusal as its error."""
        if self._state is not State.RUNNING:
            self._raise_not_running()
        check_topic(topic)
        handle = RecallHandle.decode(recall_handle)
        budget = self._budget(timeout)
        route = await self.instance.refresher.fetch_route(topic, budget)
        addr = next((b.broker_addrs.get(MASTER_ID) for b in (route.broker_datas if route else ())
                     if b.broker_name == handle.broker_name), None)
        if addr is None:
            raise MQClientError(f"no master of {handle.broker_name} serves {topic}")
        header = RecallMessageRequestHeader(self.group, topic, recall_handle, handle.broker_name)
        answer = await self.instance.remoting.invoke(
            addr, RemotingCommand.request(RequestCode.RECALL_MESSAGE, header.to_fields()), budget)
        if answer.code != ResponseCode.SUCCESS:
            raise error_for_response(answer.code, answer.remark, addr)
        return RecallMessageResponseHeader.from_command(answer).msg_id


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
