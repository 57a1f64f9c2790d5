"""``PushConsumer``: the broker's messages delivered to a handler (RocketMQ's ``DefaultMQPushConsumer``).

Usage::

    async def handle(msg: MessageExt) -> ConsumeResult:
        ...
        return ConsumeResult.SUCCESS          # None counts as SUCCESS, an exception as RECONSUME_LATER

    consumer = PushConsumer("my-group", namesrv_addr="127.0.0.1:9876")
    consumer.subscribe("TopicTest", "TagA || TagB")
    consumer.register_handler(handle)          # or register_batch_handler(f(list[MessageExt]))
    async with consumer:
        ...                                     # consumes until shutdown

Its keyword arguments are the fields of :class:`~pocketmq.client.consumer.config.ConsumerConfig`. How it works,
one module per part:

* **Rebalance** (:mod:`pocketmq.client.consumer.rebalance`): which queues this consumer reads, every
  ``rebalance_interval`` (20 s) and at once when the group or a route changes; a route that lacks a master
  it had is asked for again every second, so a restarted master is read again at once. BROADCASTING gives every
  consumer every queue and keeps offsets in a local file
  (:class:`~pocketmq.client.consumer.offset_store.LocalOffsetStore`).
* **Pulling** (:mod:`pocketmq.client.consumer.pull_service`): one long-polling loop per assigned queue, with flow
  control; it follows the broker's ``suggestWhichBrokerId`` and falls back to any live member of the broker
  group (a slave while the master is down).
* **Consuming** (:mod:`pocketmq.client.consumer.consume_service`): a worker pool of ``consume_thread_max``, or orderly
  per queue.
* **Offsets** (:class:`~pocketmq.client.consumer.offset_store.OffsetCommitter`) are committed every
  ``persist_consumer_offset_interval`` (5 s), when a queue is taken away, and at shutdown, only up to the
  lowest message still being processed.
* **Retry** (:meth:`PushConsumer.send_back`): a failed message goes back with CONSUMER_SEND_MSG_BACK (its
  commit-log offset, delay level 0 = the broker's ``3 + reconsume times``, ``max_reconsume_times``); when that
  fails it is produced to ``%RETRY%<group>`` by an internal producer with RETRY_TOPIC / RECONSUME_TIME /
  MAX_RECONSUME_TIMES. A message read back from the retry topic gets its original topic again (RETRY_TOPIC).
* **Orderly** mode consumes one batch at a time per queue in offset order, and in CLUSTERING only queues
  whose broker lock (LOCK_BATCH_MQ, renewed every 20 s) it holds; they are unlocked when taken away and at
  shutdown.

**POP mode** (``pop=True``, RocketMQ 5): no rebalance, pulls or offsets; every consumer of the group pops from
every queue, acks what its handler consumed and makes what failed visible again after a back-off
(:mod:`pocketmq.client.consumer.pop_consume`); with ``orderly`` it pops FIFO.

``shutdown()`` stops the rebalance and pulls, lets running handlers finish within ``shutdown_grace``, commits
the offsets (waiting for the brokers' answers), unlocks orderly queues, unregisters the client from every
broker (so the rest of the group rebalances at once), and persists local offsets.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Unpack

from pocketmq.client.consumer import admin_requests
from pocketmq.client.consumer.broker_api import ConsumerAPI
from pocketmq.client.consumer.config import ConsumerArgs, ConsumerConfig
from pocketmq.client.consumer.consume_service import ConcurrentConsumeService, ConsumeService, OrderlyConsumeService
from pocketmq.client.consumer.context import PushContext
from pocketmq.client.consumer.offset_store import LocalOffsetStore, OffsetCommitter, OffsetTable, RemoteOffsetStore
from pocketmq.client.consumer.pop_api import PopAPI
from pocketmq.client.consumer.pop_consume import PopConsumeService
from pocketmq.client.consumer.process_queue import REBALANCE_LOCK_INTERVAL, ProcessQueue
from pocketmq.client.consumer.pull_service import PullService
from pocketmq.client.consumer.rebalance import RebalanceService, consume_timestamp
from pocketmq.client.consumer.selector import MessageSelector
from pocketmq.client.consumer.subscription import build_subscription, consumer_data_json, fetch_routes
from pocketmq.client.consumer.types import ConsumeResult, ConsumeType, delay_level_for_retry
from pocketmq.client.core.errors import ConsumerStateError, MQClientError
from pocketmq.client.core.instance import MQClientInstance, join_instance
from pocketmq.client.core.member import ClientMember, State
from pocketmq.client.core.message import Message, MessageQueue
from pocketmq.client.core.message_ext import MessageExt
from pocketmq.client.core.validators import check_topic
from pocketmq.client.producer.producer import Producer
from pocketmq.common.logs import get_logger
from pocketmq.common.message import MessageConst
from pocketmq.common.service import Service, periodic
from pocketmq.common.subscription import ExpressionType, SubscriptionData
from pocketmq.common.topic import retry_topic

__all__ = ["BatchMessageHandler", "MessageHandler", "PushConsumer", "build_retry_message"]


if TYPE_CHECKING:
    from pocketmq.client.trace.hooks import TraceSession

log = get_logger("pocketmq.client.push_consumer")

#: ``async handler(msg) -> ConsumeResult | None`` (None = SUCCESS; an exception = RECONSUME_LATER).
MessageHandler = Callable[[MessageExt], Awaitable[ConsumeResult | None]]
#: ``async handler(msgs) -> ConsumeResult | None`` for up to ``consume_message_batch_max_size`` messages.
BatchMessageHandler = Callable[[list[MessageExt]], Awaitable[ConsumeResult | None]]

#: Topics a consumer may subscribe to.
MAX_SUBSCRIPTIONS = 1024


@dataclass(frozen=True, slots=True)
class _Parts:
    """What a started push consumer runs."""

    context: PushContext
    consume: ConsumeService
    pulls: PullService
    rebalance: RebalanceService
    #: pulls, rebalance, offset persisting and lock renewal, stopped as one.
    services: Service


class PushConsumer(ClientMember):
    """An asyncio push consumer; see the module docstring. Create it anywhere, start it on a loop."""

    kind = "consumer"
    state_error = ConsumerStateError
    config: ConsumerConfig

    def __init__(self, group: str, **options: Unpack[ConsumerArgs]) -> None:
        super().__init__(ConsumerConfig(group=group, **options))
        # The internal producer (retry fallback) takes the same client options, so it joins this consumer's
        # client instance.
        self._inner_producer = Producer(_inner_producer_group(self.group), **self.config.client_args())
        self._subscriptions: dict[str, SubscriptionData] = {}
        self._handler: MessageHandler | BatchMessageHandler | None = None
        self._single = True
        self._batch_max_size = self.config.consume_message_batch_max_size
        self._parts: _Parts | None = None
        self._started_ms = 0
        self._trace: TraceSession | None = None
        #: POP mode's receive loop and send-back requests (None otherwise)
        self._pop: PopConsumeService | None = None
        self._send_back_api: ConsumerAPI | None = None
        self._log = log.bind(group=self.group)

    # -- configuration ----------------------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str | MessageSelector | None = "*") -> None:
        """Subscribe to ``topic`` with ``"*"``, ``"tagA || tagB"`` or a :class:`MessageSelector` (tags or SQL92)
        (replacing an earlier expression).
        After start the brokers hear of it at once and the queues are rebalanced."""
        check_topic(topic)
        if topic not in self._subscriptions and len(self._subscriptions) >= MAX_SUBSCRIPTIONS:
            raise MQClientError(f"a consumer subscribes to at most {MAX_SUBSCRIPTIONS} topics")
        self._subscriptions[topic] = build_subscription(topic, expression)
        if self._state is State.RUNNING:
            self._subscription_changed()

    def unsubscribe(self, topic: str) -> None:
        """Stop consuming ``topic`` (its queues are given up at the next rebalance, triggered now)."""
        if self._subscriptions.pop(topic, None) is not None and self._state is State.RUNNING:
            self._subscription_changed()

    def _subscription_changed(self) -> None:
        instance = self.instance
        instance.request_heartbeat_all()
        for topic in self._subscriptions:
            if instance.routes.subscribe_route(topic) is None:
                instance.refresher.request(topic, publish=False)
        self.rebalance_soon()

    def register_handler(self, handler: MessageHandler) -> None:
        """Consume one message per call (``consume_message_batch_max_size`` is then 1)."""
        self._set_handler(handler, single=True)
        self._batch_max_size = 1

    def register_batch_handler(self, handler: BatchMessageHandler) -> None:
        """Consume up to ``consume_message_batch_max_size`` messages of one queue per call."""
        self._set_handler(handler, single=False)
        self._batch_max_size = self.config.consume_message_batch_max_size

    def _set_handler(self, handler: MessageHandler | BatchMessageHandler, *, single: bool) -> None:
        if self._state is not State.CREATED:
            raise ConsumerStateError("register the handler before start")
        self._handler = handler
        self._single = single

    @property
    def subscriptions(self) -> dict[str, SubscriptionData]:
        """Topic → subscription, the automatic retry subscription included once started."""
        return dict(self._subscriptions)

    @property
    def clustering(self) -> bool:
        return self.config.clustering

    # -- lifecycle --------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Join the loop's client instance, announce the group to every broker, and start rebalancing,
        pulling and consuming. Raises :class:`ConsumerStateError` without a handler or a subscription."""
        if not self._may_start():
            return
        if self._handler is None:
            raise ConsumerStateError("no handler registered (register_handler / register_batch_handler)")
        if not self._subscriptions:
            raise ConsumerStateError("no subscription (subscribe before start)")
        if self.clustering and not self.config.pop:  # POP's retries come back on the consumed topic
            retry = retry_topic(self.group)
            self._subscriptions.setdefault(retry, build_subscription(retry, "*"))
        instance = await join_instance(self.config.client, lambda i: i.register_consumer(self.group, self))
        self._instance = instance
        try:
            await self._start_parts(instance)
        except BaseException:
            self._state = State.STOPPED
            await self._stop_parts(0.0)
            await self._stop_trace()
            if self._inner_producer.running:
                await self._inner_producer.shutdown()
            await instance.unregister_consumer(self.group)
            raise
        self._log.info("push_consumer_started", client_id=instance.client_id, model=self.config.message_model.value,
                       orderly=self.config.orderly, topics=sorted(self._subscriptions))

    async def _start_parts(self, instance: MQClientInstance) -> None:
        config = self.config
        api = ConsumerAPI(instance, self.group, serialize_type=config.client.serialize_type,
                          timeout=config.namesrv_timeout)
        if config.pop:
            await self._start_pop(instance, api)
            return
        offsets = await self._offset_store(instance)
        await self._start_trace()
        committer = OffsetCommitter(offsets, api, self._log)
        context = PushContext(config, self._subscriptions, api, offsets, committer, self._log)
        consume = self._consume_service(offsets)
        pulls = PullService(context, consume)
        rebalance = RebalanceService(context, pulls, consume_timestamp=consume_timestamp(self.config.consume_timestamp),
                                     is_running=lambda: self._state is State.RUNNING)
        services = Service()
        services.name = f"push-consumer-{self.group}"
        services.add_child(pulls)
        services.add_child(rebalance)
        services.add_child(periodic(f"persist-offsets-{self.group}", config.persist_consumer_offset_interval,
                                    lambda: committer.commit_all(pulls.process_queues, final=False)))
        if config.orderly and config.clustering:
            services.add_child(periodic(f"lock-queues-{self.group}", REBALANCE_LOCK_INTERVAL, rebalance.lock_all))
        self._parts = _Parts(context, consume, pulls, rebalance, services)
        admin_requests.install(instance)  # the broker's 220/221/307/309 on an administrator's behalf
        consume.start()
        await self._running_with_routes(instance)
        for sub in list(self._subscriptions.values()):
            if sub.expression_type == ExpressionType.SQL92:
                await api.check_client_config(sub)  # a broker that cannot serve it fails the start, as in Java
        await instance.send_heartbeat_to_all()
        services.start()

    async def _start_pop(self, instance: MQClientInstance, api: ConsumerAPI) -> None:
        """POP mode (:mod:`pocketmq.client.consumer.pop_consume`): a receive loop instead of rebalance, pulls and
        offsets; the internal producer is the send-back fallback, as in the other modes."""
        config = self.config
        self._send_back_api = api
        await self._inner_producer.start()
        await self._start_trace()
        call = self._wrapped_call()
        self._pop = PopConsumeService(
            PopAPI(instance, self.group, timeout=config.namesrv_timeout), self._subscriptions, call,
            dead_letter=lambda msg: self.send_back(msg, to_dlq=True), workers=config.consume_thread_max,
            batch_max_size=self._batch_max_size, invisible_time=config.pop_invisible_time,
            await_duration=config.long_polling_timeout, orderly=config.orderly,
            max_reconsume_times=config.max_reconsume_times, retry_delays=config.pop_retry_delays,
            suspend_time=config.suspend_current_queue_time, receives=config.pop_receives)
        await self._running_with_routes(instance)
        await instance.send_heartbeat_to_all()
        self._pop.start()

    async def _running_with_routes(self, instance: MQClientInstance) -> None:
        """Mark the consumer running and fetch the routes of its topics (a failure is logged, not fatal)."""
        self._started_ms = time.time_ns() // 1_000_000
        self._state = State.RUNNING
        await fetch_routes(instance, self._subscriptions, self.config.namesrv_timeout, self._log)

    async def _offset_store(self, instance: MQClientInstance) -> OffsetTable:
        """CLUSTERING: offsets on the brokers (and the retry fallback's producer started); BROADCASTING: the
        local file, loaded."""
        if self.clustering:
            await self._inner_producer.start()
            return RemoteOffsetStore()
        return await LocalOffsetStore.opened(instance.client_id, self.group, self.config.offset_store_dir)

    async def _start_trace(self) -> None:
        """``enable_trace`` (client.trace): the handler call is wrapped, nothing else changes."""
        config = self.config
        if config.enable_trace:
            from pocketmq.client.trace.hooks import TraceSession

            args = config.client_args()
            self._trace = await TraceSession.start(lambda name: Producer(name, **args), self.group,
                                                   config.trace_topic)

    def _wrapped_call(self) -> Callable[[list[MessageExt]], Awaitable[ConsumeResult]]:
        """The handler as the consume services call it, traced when tracing is on."""
        assert self._handler is not None
        call = _handler_call(self._handler, self._single, self._log)
        if self._trace is not None:
            from pocketmq.client.trace.hooks import ConsumeTracer

            call = ConsumeTracer(self._trace.dispatcher, self.group).wrap(call)
        return call

    def _consume_service(self, offsets: OffsetTable) -> ConsumeService:
        config = self.config
        call = self._wrapped_call()
        if config.orderly:
            return OrderlyConsumeService(
                self, call, offsets, concurrency=config.consume_thread_max, batch_max_size=self._batch_max_size,
                max_reconsume_times=config.max_reconsume_times, suspend_time=config.suspend_current_queue_time)
        return ConcurrentConsumeService(self, call, offsets, workers=config.consume_thread_max,
                                        batch_max_size=self._batch_max_size)


    async def shutdown(self, grace: float | None = None) -> None:
        """Stop pulling, let running handlers finish (at most ``grace``, default ``shutdown_grace``), commit
        offsets, unlock orderly queues, unregister from every broker and release the client instance."""
        if not self._may_stop():
            return
        if self._pop is not None:
            await self._stop_parts(self.config.shutdown_grace if grace is None else grace)
            await self._finish_shutdown()
            return
        parts = self._running_parts
        await self._stop_parts(self.config.shutdown_grace if grace is None else grace)
        queues = parts.pulls.process_queues
        await parts.context.committer.commit_all(queues, final=True)
        if self.config.orderly and self.clustering:
            await parts.rebalance.unlock_all()
        for pq in queues.values():
            pq.dropped = True
        queues.clear()
        await self._finish_shutdown()

    async def _finish_shutdown(self) -> None:
        """What every mode's shutdown ends with: tracing, the internal producer, the instance."""
        await self._stop_trace()
        if self._inner_producer.running:
            await self._inner_producer.shutdown()
        await self.instance.unregister_consumer(self.group)
        self._state = State.STOPPED
        self._log.info("push_consumer_stopped")

    async def _stop_trace(self) -> None:
        if self._trace is not None:
            trace, self._trace = self._trace, None
            await trace.stop()

    async def _stop_parts(self, grace: float) -> None:
        """Stop the services and the pulls, then the consume service (running handlers get ``grace``)."""
        if self._parts is not None:
            await self._parts.services.stop()
            await self._parts.consume.stop(grace)
        if self._pop is not None:
            await self._pop.stop()
            await self._pop.drain(grace)

    @property
    def _running_parts(self) -> _Parts:
        if self._parts is None:
            raise ConsumerStateError("the consumer has not been started")
        return self._parts

    @property
    def api(self) -> ConsumerAPI:
        """The consumer's broker requests; only once started."""
        if self._send_back_api is not None:
            return self._send_back_api
        return self._running_parts.context.api

    @property
    def assigned_queues(self) -> list[MessageQueue]:
        """The queues this consumer pulls right now, sorted."""
        return sorted(self._parts.pulls.process_queues) if self._parts is not None else []

    def process_queue(self, mq: MessageQueue) -> ProcessQueue | None:
        return self._parts.pulls.process_queues.get(mq) if self._parts is not None else None

    def committed_offsets(self) -> dict[MessageQueue, int]:
        """The offsets held for committing (next offset to consume per queue)."""
        return self._parts.context.offsets.offsets() if self._parts is not None else {}

    @property
    def consumed_count(self) -> int:
        """Handler calls finished since start."""
        if self._pop is not None:
            return self._pop.consumed
        return self._parts.consume.consumed if self._parts is not None else 0

    @property
    def acked_count(self) -> int:
        """POP mode: messages acked since start (the other modes commit offsets instead: 0)."""
        return self._pop.acks.acked if self._pop is not None else 0

    @property
    def rebalance_count(self) -> int:
        """Rebalances done since start."""
        return self._parts.rebalance.count if self._parts is not None else 0

    async def rebalance(self) -> None:
        """Rebalance every subscribed topic now (what the rebalance service does)."""
        await self._running_parts.rebalance.rebalance()

    async def persist_offsets(self) -> None:
        """Commit the offsets that moved now (what the persist service does every few seconds), waiting for
        the brokers' answers."""
        parts = self._running_parts
        await parts.context.committer.commit_all(parts.pulls.process_queues, final=True)

    # -- what the client instance asks (ConsumerRegistration) ---------------------------------------------

    def consumer_data(self) -> dict[str, Any]:
        return consumer_data_json(
            self.group, list(self._subscriptions.values()),
            consume_type=ConsumeType.CONSUME_POP if self.config.pop else ConsumeType.CONSUME_PASSIVELY,
            message_model=self.config.message_model, consume_from_where=self.config.consume_from_where,
        )

    def subscribed_topics(self) -> list[str]:
        return list(self._subscriptions)

    def rebalance_soon(self) -> None:
        if self._parts is not None:
            self._parts.rebalance.wakeup()

    # -- what the broker asks for an administrator (admin_requests.AdminAnswering) -------------------------

    def running_info(self) -> dict[str, Any]:
        """RocketMQ's ``ConsumerRunningInfo`` body (maps keyed by queue: :class:`~pocketmq.remoting.fastjson.MQKey`)."""
        parts = self._running_parts
        held = parts.context.offsets.offsets()
        config = self.config
        properties = {
            "PROP_CONSUME_TYPE": ConsumeType.CONSUME_PASSIVELY.value,
            "PROP_CONSUMEORDERLY": str(config.orderly).lower(),
            "PROP_THREADPOOL_CORE_SIZE": str(config.consume_thread_max), "PROP_CLIENT_VERSION": "V4_9_4",
            "PROP_CONSUMER_START_TIMESTAMP": str(self._started_ms), "messageModel": config.message_model.value,
            "consumeFromWhere": config.consume_from_where.value, "pullBatchSize": str(config.pull_batch_size),
            "consumerGroup": self.group,
        }
        mq_table = admin_requests.mq_table(parts.pulls.process_queues, held)
        status = {topic: {"consumeFailedMsgs": 0, "consumeFailedTPS": 0.0, "consumeOKTPS": 0.0, "consumeRT": 0.0,
                          "pullRT": 0.0, "pullTPS": 0.0} for topic in sorted(self._subscriptions)}
        return {"mqTable": mq_table, "properties": properties, "statusTable": status,
                "subscriptionSet": [s.to_json_dict() for s in self._subscriptions.values()]}

    def held_offsets(self, topic: str) -> dict[MessageQueue, int]:
        return self._parts.context.offsets.offsets(topic) if self._parts is not None else {}

    async def reset_offsets(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET: each held queue of ``offsets`` stops, drops what it cached, commits
        the new offset and is added again by an immediate rebalance (which reads that offset back)."""
        parts = self._running_parts
        for mq, offset in offsets.items():
            pq = await parts.pulls.stop_pull(mq)
            if pq is None:
                continue  # not ours: its owner resets it, or the broker already holds the new offset
            pq.dropped = True
            parts.context.offsets.update(mq, offset)
            await parts.context.committer.commit_queue(mq)
            if self.clustering:
                parts.context.offsets.remove(mq)  # re-added from the broker's (reset) offset
        parts.rebalance.wakeup()

    async def consume_directly(self, msg: MessageExt) -> str:
        """CONSUME_MESSAGE_DIRECTLY: the handler once, outside the queues; ``CR_SUCCESS`` or ``CR_LATER``."""
        assert self._handler is not None
        call = _handler_call(self._handler, self._single, self._log)
        return admin_requests.consume_result_name(await call([msg]) is ConsumeResult.SUCCESS)

    # -- what the consume services ask (ConsumeOwner) ----------------------------------------------------

    async def lock_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        """Take (or renew) the broker's lock on one queue; marks ``pq`` locked when granted."""
        return await self._running_parts.rebalance.lock_queue(mq, pq)

    async def send_back(self, msg: MessageExt, *, to_dlq: bool) -> bool:
        """Hand a failed message to the broker: CONSUMER_SEND_MSG_BACK (delay level 0, or -1 for the DLQ),
        else produce it to ``%RETRY%<group>`` ourselves. ``False`` when both failed."""
        max_times = self.config.max_reconsume_times
        try:
            await self.api.send_back(msg, -1 if to_dlq else 0, max_times)
            return True
        except Exception as exc:  # whatever went wrong, the fallback below may still work
            self._log.warning("send_back_failed", topic=msg.topic, msg_id=msg.msg_id, error=str(exc) or repr(exc))
        retry = build_retry_message(msg, group=self.group, max_reconsume_times=max_times, to_dlq=to_dlq)
        try:
            await self._inner_producer.send(retry)
            return True
        except Exception as exc:
            self._log.warning("send_to_retry_topic_failed", topic=msg.topic, msg_id=msg.msg_id,
                              error=str(exc) or repr(exc))
            return False


def build_retry_message(msg: MessageExt, *, group: str, max_reconsume_times: int, to_dlq: bool) -> Message:
    """The message RocketMQ's client produces to ``%RETRY%<group>`` when send-back fails. The broker moves it
    to the DLQ when RECONSUME_TIME reaches MAX_RECONSUME_TIMES."""
    props = dict(msg.properties)
    for name in (MessageConst.PROPERTY_MIN_OFFSET, MessageConst.PROPERTY_MAX_OFFSET,
                 MessageConst.PROPERTY_DELAY_TIME_LEVEL):
        props.pop(name, None)
    props.setdefault(MessageConst.PROPERTY_RETRY_TOPIC, msg.topic)
    props.setdefault(MessageConst.PROPERTY_ORIGIN_MESSAGE_ID, msg.msg_id)
    props[MessageConst.PROPERTY_RECONSUME_TIME] = str(max_reconsume_times if to_dlq else msg.reconsume_times + 1)
    props[MessageConst.PROPERTY_MAX_RECONSUME_TIMES] = str(max_reconsume_times)
    return Message(retry_topic(group), msg.body, properties=props, flag=msg.flag,
                   delay_level=delay_level_for_retry(msg.reconsume_times))


def _inner_producer_group(group: str) -> str:
    name = "CLIENT_INNER_PRODUCER_" + group
    if len(name) <= 255:
        return name
    return "CLIENT_INNER_PRODUCER_" + hashlib.sha1(group.encode()).hexdigest()


def _handler_call(
    handler: MessageHandler | BatchMessageHandler, single: bool, logger: Any
) -> Callable[[list[MessageExt]], Awaitable[ConsumeResult]]:
    """The application's handler as the consume services call it: never raising, always a ConsumeResult."""
    success, later = ConsumeResult.SUCCESS, ConsumeResult.RECONSUME_LATER

    async def call(msgs: list[MessageExt]) -> ConsumeResult:
        try:
            # One call per message on the hot path: no adapter coroutine in between.
            result = await (handler(msgs[0]) if single else handler(msgs))  # type: ignore[arg-type]
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.warning("consume_handler_failed", topic=msgs[0].topic, queue_id=msgs[0].queue_id,
                           msg_ids=[m.msg_id for m in msgs[:8]], error=repr(exc))
            return later
        if result is None or result is success:
            return success
        if result is later:
            return later
        logger.warning("consume_handler_bad_result", result=repr(result))
        return later

    return call
