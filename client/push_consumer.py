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

How it works (reference §8, §5.4):

* **Rebalance** (CLUSTERING), every ``rebalance_interval`` (20 s) and at once when a broker pushes
  NOTIFY_CONSUMER_IDS_CHANGED: for each subscribed topic (and ``%RETRY%<group>``, subscribed
  automatically), all readable queues of the route and all client ids of the group (GET_CONSUMER_LIST_BY_GROUP
  from one broker of the topic) are shared by ``allocate_strategy`` (average allocation). A queue taken
  away is dropped (its pulls stop, results of its in-flight messages are ignored) and its offset is
  committed; a queue added starts at the group's committed offset (QUERY_CONSUMER_OFFSET) or, without one,
  by ``consume_from_where`` (:func:`compute_pull_from_where`). BROADCASTING gives every consumer every queue
  and keeps offsets in a local file (:class:`~client.offset_store.LocalOffsetStore`).
* **Pulling**: one task per assigned queue long-polls the broker (SUSPEND, ``long_polling_timeout`` 15 s,
  RPC timeout ``pull_timeout`` 30 s) for ``pull_batch_size`` messages, waits 50 ms while the queue's
  process queue is over its thresholds (flow control), corrects its offset on OFFSET_ILLEGAL, and after an
  error waits :data:`PULL_DELAY_WHEN_EXCEPTION` (3 s). Pulls follow the broker's ``suggestWhichBrokerId``
  and fall back to any live member of the broker group (a slave while the master is down), without the
  COMMIT_OFFSET flag when they go to a slave.
* **Consuming**: :mod:`client.consume_service` (concurrent worker pool of ``consume_thread_max`` or orderly
  per queue).
* **Offsets** are committed every ``persist_consumer_offset_interval`` (5 s; oneway UPDATE_CONSUMER_OFFSET
  to the master, or to any member when there is none), when a queue is taken away, and at shutdown, only
  up to the lowest message still being processed.
* **Retry**: a failed message goes back with CONSUMER_SEND_MSG_BACK (its commit-log offset, delay level 0 =
  the broker's ``3 + reconsume times``, ``max_reconsume_times``); when that fails it is produced to
  ``%RETRY%<group>`` by an internal producer with RETRY_TOPIC / RECONSUME_TIME / MAX_RECONSUME_TIMES. A
  message read back from the retry topic gets its original topic again (RETRY_TOPIC).
* **Orderly** mode consumes one batch at a time per queue in offset order, and in CLUSTERING only queues
  whose broker lock (LOCK_BATCH_MQ, renewed every 20 s) it holds; they are unlocked when taken away and at
  shutdown.

``shutdown()`` stops the rebalance and pulls, lets running handlers finish within ``shutdown_grace``, commits
the offsets (waiting for the brokers' answers), unlocks orderly queues, unregisters the client from every
broker (so the rest of the group rebalances at once), and persists local offsets.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import hashlib
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any

import structlog

from client.consume_pull import PullStatus
from client.consume_service import ConcurrentConsumeService, OrderlyConsumeService
from client.consume_types import (
    CONSUME_CONCURRENTLY_MAX_SPAN,
    DEFAULT_MAX_RECONSUME_TIMES,
    PULL_BATCH_SIZE,
    PULL_THRESHOLD_FOR_QUEUE,
    PULL_THRESHOLD_SIZE_FOR_QUEUE,
    ConsumeFromWhere,
    ConsumeResult,
    ConsumeType,
    MessageModel,
    delay_level_for_retry,
)
from client.consumer_api import ConsumerAPI, ConsumerStateError, subscribe_queues
from client.errors import MQClientError
from client.instance import MQClientInstance, acquire_instance
from client.message import Message, MessageQueue
from client.offset_store import LocalOffsetStore, OffsetTable, RemoteOffsetStore
from client.process_queue import REBALANCE_LOCK_INTERVAL, ProcessQueue
from client.producer import Producer
from client.pull_decode import MessageExt, restore_retry_topics
from client.rebalance import AllocateStrategy, allocate_averagely, plan_rebalance
from client.subscription import build_subscription, consumer_data_json
from client.validators import check_group, check_topic
from common.message import MessageConst
from common.subscription import SubscriptionData
from common.sysflag import pull_sys_flag
from common.topic import is_retry_topic, retry_topic
from remoting.codes import ResponseCode, SerializeType
from remoting.errors import PocketMQError, ResponseError

__all__ = [
    "BatchMessageHandler",
    "MessageHandler",
    "PushConsumer",
    "compute_pull_from_where",
]

log = structlog.get_logger("client.push_consumer")

#: ``async handler(msg) -> ConsumeResult | None`` (None = SUCCESS; an exception = RECONSUME_LATER).
MessageHandler = Callable[[MessageExt], Awaitable[ConsumeResult | None]]
#: ``async handler(msgs) -> ConsumeResult | None`` for up to ``consume_message_batch_max_size`` messages.
BatchMessageHandler = Callable[[list[MessageExt]], Awaitable[ConsumeResult | None]]

#: After a pull error (broker down, refused, timeout) the queue is pulled again after this long (s).
PULL_DELAY_WHEN_EXCEPTION = 3.0
#: While a queue is over its flow-control thresholds it is checked again after this long (s).
PULL_DELAY_WHEN_FLOW_CONTROL = 0.05
#: An orderly queue not locked yet is checked again after this long (s).
PULL_DELAY_WHEN_NOT_LOCKED = 1.0
#: An empty answer without progress faster than this (s) was not long-polled (the broker's hold was full, a
#: slave would not correct the offset): wait this long before the next pull instead of spinning.
PULL_MIN_EMPTY_ROUND = 0.05
#: Java's default ``consumeTimestamp``: half an hour before the consumer starts.
DEFAULT_CONSUME_TIMESTAMP_BACK = 30 * 60 * 1000
#: How long a rebalance waits for an orderly queue's consume lock before giving the queue up anyway (s).
ORDERLY_REMOVE_LOCK_WAIT = 1.0
#: Topics a consumer may subscribe to.
MAX_SUBSCRIPTIONS = 1024
#: Broker codes after which the broker does not know our group: it gets a heartbeat at once.
_UNKNOWN_GROUP_CODES = frozenset({ResponseCode.SUBSCRIPTION_NOT_EXIST, ResponseCode.SUBSCRIPTION_NOT_LATEST,
                                  ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST})


class _State(enum.Enum):
    CREATED = "created"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"


async def compute_pull_from_where(
    mq: MessageQueue,
    last_offset: int,
    where: ConsumeFromWhere,
    *,
    timestamp_ms: int,
    max_offset: Callable[[MessageQueue], Awaitable[int]],
    search_offset: Callable[[MessageQueue, int], Awaitable[int]],
) -> int:
    """Where a newly assigned queue starts (RocketMQ's ``computePullFromWhere``).

    ``last_offset`` is the group's committed offset (``-1``: none). With none: LAST_OFFSET starts at the
    queue's max offset (retry topics at 0), FIRST_OFFSET at 0, TIMESTAMP at the offset found for
    ``timestamp_ms`` (retry topics at their max offset). Remember that a broker answers QUERY_CONSUMER_OFFSET
    for a new group with 0 while the queue still starts at 0 (reference §2.4), so on a young queue every
    rule starts at 0.
    """
    if last_offset >= 0:
        return last_offset
    retry = is_retry_topic(mq.topic)
    if where is ConsumeFromWhere.FIRST_OFFSET:
        return 0
    if where is ConsumeFromWhere.TIMESTAMP:
        if retry:
            return await max_offset(mq)
        return await search_offset(mq, timestamp_ms)
    return 0 if retry else await max_offset(mq)


def _inner_producer_group(group: str) -> str:
    name = "CLIENT_INNER_PRODUCER_" + group
    if len(name) <= 255:
        return name
    return "CLIENT_INNER_PRODUCER_" + hashlib.sha1(group.encode()).hexdigest()


class PushConsumer:
    """An asyncio push consumer; see the module docstring. Create it anywhere, start it on a loop."""

    def __init__(
        self,
        group: str,
        *,
        namesrv_addr: str | Iterable[str] | None = None,
        instance_name: str | None = None,
        client_ip: str | None = None,
        message_model: MessageModel = MessageModel.CLUSTERING,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.LAST_OFFSET,
        consume_timestamp: int | None = None,
        consume_thread_max: int = 20,
        consume_message_batch_max_size: int = 1,
        pull_batch_size: int = PULL_BATCH_SIZE,
        pull_threshold_for_queue: int = PULL_THRESHOLD_FOR_QUEUE,
        pull_threshold_size_for_queue: int = PULL_THRESHOLD_SIZE_FOR_QUEUE,
        consume_concurrently_max_span: int = CONSUME_CONCURRENTLY_MAX_SPAN,
        max_reconsume_times: int = -1,
        orderly: bool = False,
        suspend_current_queue_time: float = 1.0,
        rebalance_interval: float = 20.0,
        persist_consumer_offset_interval: float = 5.0,
        pull_interval: float = 0.0,
        long_polling_timeout: float = 15.0,
        pull_timeout: float = 30.0,
        post_subscription_when_pull: bool = False,
        shutdown_grace: float = 10.0,
        allocate_strategy: AllocateStrategy = allocate_averagely,
        offset_store_dir: str | Path | None = None,
        poll_name_server_interval: float = 30.0,
        heartbeat_broker_interval: float = 30.0,
        namesrv_timeout: float = 3.0,
        connect_timeout: float = 3.0,
        serialize_type: int = SerializeType.MSGPACK,
    ) -> None:
        self.group = check_group(group)
        _check_positive(consume_thread_max=consume_thread_max, pull_batch_size=pull_batch_size,
                        consume_message_batch_max_size=consume_message_batch_max_size,
                        pull_threshold_for_queue=pull_threshold_for_queue,
                        pull_threshold_size_for_queue=pull_threshold_size_for_queue,
                        consume_concurrently_max_span=consume_concurrently_max_span,
                        rebalance_interval=rebalance_interval,
                        persist_consumer_offset_interval=persist_consumer_offset_interval,
                        long_polling_timeout=long_polling_timeout, pull_timeout=pull_timeout,
                        suspend_current_queue_time=suspend_current_queue_time)
        if pull_timeout <= long_polling_timeout:
            raise ValueError("pull_timeout must be longer than long_polling_timeout")
        if pull_interval < 0 or shutdown_grace < 0:
            raise ValueError("pull_interval and shutdown_grace must not be negative")
        if max_reconsume_times < -1:
            raise ValueError("max_reconsume_times must be -1 (default 16) or more")
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        self.consume_timestamp = consume_timestamp
        self.consume_thread_max = consume_thread_max
        self.consume_message_batch_max_size = consume_message_batch_max_size
        self.pull_batch_size = pull_batch_size
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.pull_threshold_size_for_queue = pull_threshold_size_for_queue
        self.consume_concurrently_max_span = consume_concurrently_max_span
        self.max_reconsume_times = DEFAULT_MAX_RECONSUME_TIMES if max_reconsume_times == -1 else max_reconsume_times
        self.orderly = orderly
        self.suspend_current_queue_time = suspend_current_queue_time
        self.rebalance_interval = rebalance_interval
        self.persist_consumer_offset_interval = persist_consumer_offset_interval
        self.pull_interval = pull_interval
        self.long_polling_timeout = long_polling_timeout
        self.pull_timeout = pull_timeout
        self.post_subscription_when_pull = post_subscription_when_pull
        self.shutdown_grace = shutdown_grace
        self.allocate_strategy = allocate_strategy
        self.offset_store_dir = offset_store_dir
        # The internal producer (retry fallback) is built with the same client settings, so it shares
        # this consumer's client instance; its ClientConfig is the consumer's.
        self._inner_producer = Producer(
            _inner_producer_group(self.group), namesrv_addr=namesrv_addr, instance_name=instance_name,
            client_ip=client_ip, poll_name_server_interval=poll_name_server_interval,
            heartbeat_broker_interval=heartbeat_broker_interval, namesrv_timeout=namesrv_timeout,
            connect_timeout=connect_timeout, serialize_type=serialize_type,
        )
        self.client_config = self._inner_producer.client_config
        self._subscriptions: dict[str, SubscriptionData] = {}
        self._handler: MessageHandler | BatchMessageHandler | None = None
        self._single = True
        self._state = _State.CREATED
        self._instance: MQClientInstance | None = None
        self._api: ConsumerAPI | None = None
        self._offsets: OffsetTable = RemoteOffsetStore()
        self._process_queues: dict[MessageQueue, ProcessQueue] = {}
        self._pull_tasks: dict[MessageQueue, asyncio.Task[None]] = {}
        self._services: list[asyncio.Task[None]] = []
        self._consume: ConcurrentConsumeService | OrderlyConsumeService | None = None
        self._rebalance_wakeup: asyncio.Event | None = None
        self._rebalance_lock: asyncio.Lock | None = None
        self._log = log.bind(group=self.group)
        #: Rebalances done and their allocation changes, for monitoring and tests.
        self.rebalance_count = 0

    # -- configuration ----------------------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str | None = "*") -> None:
        """Subscribe to ``topic`` with ``"*"`` or ``"tagA || tagB"`` (replacing an earlier expression).
        After start the brokers hear of it at once and the queues are rebalanced."""
        check_topic(topic)
        if topic not in self._subscriptions and len(self._subscriptions) >= MAX_SUBSCRIPTIONS:
            raise MQClientError(f"a consumer subscribes to at most {MAX_SUBSCRIPTIONS} topics")
        self._subscriptions[topic] = build_subscription(topic, expression)
        if self._state is _State.RUNNING:
            self._subscription_changed()

    def unsubscribe(self, topic: str) -> None:
        """Stop consuming ``topic`` (its queues are given up at the next rebalance, triggered now)."""
        if self._subscriptions.pop(topic, None) is not None and self._state is _State.RUNNING:
            self._subscription_changed()

    def _subscription_changed(self) -> None:
        assert self._instance is not None
        self._instance.request_heartbeat_all()
        for topic in self._subscriptions:
            if self._instance.subscribe_route(topic) is None:
                self._instance.request_refresh_subscribed(topic)
        self.rebalance_soon()

    def register_handler(self, handler: MessageHandler) -> None:
        """Consume one message per call (``consume_message_batch_max_size`` is then 1)."""
        self._set_handler(handler, single=True)
        self.consume_message_batch_max_size = 1

    def register_batch_handler(self, handler: BatchMessageHandler) -> None:
        """Consume up to ``consume_message_batch_max_size`` messages of one queue per call."""
        self._set_handler(handler, single=False)

    def _set_handler(self, handler: MessageHandler | BatchMessageHandler, *, single: bool) -> None:
        if self._state is not _State.CREATED:
            raise ConsumerStateError("register the handler before start")
        self._handler = handler
        self._single = single

    @property
    def subscriptions(self) -> dict[str, SubscriptionData]:
        """Topic → subscription, the automatic retry subscription included once started."""
        return dict(self._subscriptions)

    @property
    def clustering(self) -> bool:
        return self.message_model is MessageModel.CLUSTERING

    # -- lifecycle --------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Join the loop's client instance, announce the group to every broker, and start rebalancing,
        pulling and consuming. Raises :class:`ConsumerStateError` without a handler or a subscription."""
        if self._state is _State.RUNNING:
            return
        if self._state is not _State.CREATED:
            raise ConsumerStateError(f"the consumer is {self._state.value}; create a new one")
        if self._handler is None:
            raise ConsumerStateError("no handler registered (register_handler / register_batch_handler)")
        if not self._subscriptions:
            raise ConsumerStateError("no subscription (subscribe before start)")
        if self.clustering:
            retry = retry_topic(self.group)
            self._subscriptions.setdefault(retry, build_subscription(retry, "*"))
        if self.consume_timestamp is None:
            self.consume_timestamp = time.time_ns() // 1_000_000 - DEFAULT_CONSUME_TIMESTAMP_BACK
        instance = acquire_instance(self.client_config)
        try:
            instance.register_consumer(self.group, self)
        except MQClientError:
            if not instance.producer_groups and not instance.consumer_groups:
                await instance.shutdown()
            raise
        self._instance = instance
        self._api = ConsumerAPI(instance, self.group, serialize_type=self.client_config.serialize_type,
                                timeout=self.client_config.namesrv_timeout)
        try:
            await self._start_services(instance)
        except BaseException:
            self._state = _State.STOPPED
            await self._stop_services()
            if self._inner_producer.running:
                await self._inner_producer.shutdown()
            await instance.unregister_consumer(self.group)
            raise
        self._log.info("push_consumer_started", client_id=instance.client_id, model=self.message_model.value,
                       orderly=self.orderly, topics=sorted(self._subscriptions))

    async def _start_services(self, instance: MQClientInstance) -> None:
        if self.clustering:
            await self._inner_producer.start()
            self._offsets = RemoteOffsetStore()
        else:
            local = LocalOffsetStore.for_client(instance.client_id, self.group, self.offset_store_dir)
            await asyncio.to_thread(local.load)
            self._offsets = local
        assert self._handler is not None
        call = _handler_call(self._handler, self._single, self._log)
        if self.orderly:
            self._consume = OrderlyConsumeService(
                self, call, self._offsets, concurrency=self.consume_thread_max,
                batch_max_size=self.consume_message_batch_max_size, max_reconsume_times=self.max_reconsume_times,
                suspend_time=self.suspend_current_queue_time)
        else:
            self._consume = ConcurrentConsumeService(
                self, call, self._offsets, workers=self.consume_thread_max,
                batch_max_size=self.consume_message_batch_max_size)
        self._consume.start()
        self._state = _State.RUNNING
        for topic in list(self._subscriptions):
            try:
                await instance.refresh_subscribed_topic(topic, self.client_config.namesrv_timeout)
            except PocketMQError as exc:
                self._log.warning("route_lookup_failed", topic=topic, error=str(exc))
        await instance.send_heartbeat_to_all()
        loop = asyncio.get_running_loop()
        self._rebalance_wakeup = asyncio.Event()
        self._rebalance_lock = asyncio.Lock()
        self._services = [
            loop.create_task(self._rebalance_service(), name=f"rebalance-{self.group}"),
            loop.create_task(self._persist_service(), name=f"persist-offsets-{self.group}"),
        ]
        if self.orderly and self.clustering:
            self._services.append(loop.create_task(self._lock_service(), name=f"lock-queues-{self.group}"))

    async def shutdown(self, grace: float | None = None) -> None:
        """Stop pulling, let running handlers finish (at most ``grace``, default ``shutdown_grace``), commit
        offsets, unlock orderly queues, unregister from every broker and release the client instance."""
        if self._state is _State.CREATED:
            self._state = _State.STOPPED
            return
        if self._state is not _State.RUNNING:
            return
        self._state = _State.STOPPING
        await self._stop_services(self.shutdown_grace if grace is None else grace)
        await self._commit_all(final=True)
        if self.orderly and self.clustering:
            await self._unlock_all()
        for pq in self._process_queues.values():
            pq.dropped = True
        self._process_queues.clear()
        if self._inner_producer.running:
            await self._inner_producer.shutdown()
        assert self._instance is not None
        await self._instance.unregister_consumer(self.group)
        self._state = _State.STOPPED
        self._log.info("push_consumer_stopped")

    async def _stop_services(self, grace: float = 0.0) -> None:
        tasks = [*self._services, *self._pull_tasks.values()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._services = []
        self._pull_tasks.clear()
        if self._consume is not None:
            await self._consume.stop(grace)

    async def __aenter__(self) -> PushConsumer:
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
        if self._instance is None:
            raise ConsumerStateError("the consumer has not been started")
        return self._instance

    @property
    def assigned_queues(self) -> list[MessageQueue]:
        """The queues this consumer pulls right now, sorted."""
        return sorted(self._process_queues)

    def process_queue(self, mq: MessageQueue) -> ProcessQueue | None:
        return self._process_queues.get(mq)

    def committed_offsets(self) -> dict[MessageQueue, int]:
        """The offsets held for committing (next offset to consume per queue)."""
        return self._offsets.offsets()

    @property
    def consumed_count(self) -> int:
        """Handler calls finished since start."""
        return self._consume.consumed if self._consume is not None else 0

    # -- what the client instance asks (ConsumerRegistration) ---------------------------------------------

    def consumer_data(self) -> dict[str, Any]:
        return consumer_data_json(
            self.group, list(self._subscriptions.values()), consume_type=ConsumeType.CONSUME_PASSIVELY,
            message_model=self.message_model, consume_from_where=self.consume_from_where,
        )

    def subscribed_topics(self) -> list[str]:
        return list(self._subscriptions)

    def rebalance_soon(self) -> None:
        if self._rebalance_wakeup is not None:
            self._rebalance_wakeup.set()

    # -- rebalance --------------------------------------------------------------------------------------

    async def _rebalance_service(self) -> None:
        assert self._rebalance_wakeup is not None
        wakeup = self._rebalance_wakeup
        while True:
            wakeup.clear()
            try:
                await self.rebalance()
            except Exception:
                self._log.exception("rebalance_failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wakeup.wait(), self.rebalance_interval)

    async def rebalance(self) -> None:
        """Rebalance every subscribed topic now (what the rebalance service does)."""
        assert self._rebalance_lock is not None
        async with self._rebalance_lock:
            self.rebalance_count += 1
            subscribed = set(self._subscriptions)
            for topic in list(subscribed):
                try:
                    await self._rebalance_topic(topic)
                except PocketMQError as exc:
                    self._log.warning("rebalance_topic_failed", topic=topic, error=str(exc))
            for mq in [mq for mq in self._process_queues if mq.topic not in subscribed]:
                await self._remove_queue(mq)

    async def _rebalance_topic(self, topic: str) -> None:
        instance = self.instance
        api = self._require_api()
        route = instance.subscribe_route(topic)
        if route is None:
            instance.request_refresh_subscribed(topic)
            self._log.debug("rebalance_no_route", topic=topic)
            return
        mq_all = subscribe_queues(topic, route)
        if self.clustering:
            cid_all = await api.consumer_id_list(topic)
            if not cid_all:
                self._log.warning("rebalance_no_consumer_ids", topic=topic)
                return
            allocated = self.allocate_strategy(self.group, instance.client_id, mq_all, cid_all)
        else:
            allocated = mq_all
        await self._update_process_queues(topic, allocated)

    async def _update_process_queues(self, topic: str, allocated: list[MessageQueue]) -> None:
        current = [mq for mq in self._process_queues if mq.topic == topic]
        plan = plan_rebalance(current, allocated)
        for mq in plan.removed:
            await self._remove_queue(mq)
        for mq in plan.kept:  # a pull task that died (it should not) is restarted at its offset
            task = self._pull_tasks.get(mq)
            if task is None or task.done():
                await self._remove_queue(mq)
                await self._add_queue(mq)
        added = [mq for mq in plan.added if await self._add_queue(mq)]
        if plan.removed or added:
            self._log.info("rebalance_changed", topic=topic, added=[q.queue_id for q in added],
                           added_brokers=sorted({q.broker_name for q in added}),
                           removed=[q.queue_id for q in plan.removed], assigned=len(allocated))

    async def _add_queue(self, mq: MessageQueue) -> bool:
        if self._state is not _State.RUNNING:
            return False
        api = self._require_api()
        pq = ProcessQueue(
            pull_threshold_for_queue=self.pull_threshold_for_queue,
            pull_threshold_size_for_queue=self.pull_threshold_size_for_queue,
            consume_concurrently_max_span=self.consume_concurrently_max_span,
        )
        if self.orderly and self.clustering and not await self.lock_queue(mq, pq):
            return False  # another consumer still holds it; the next rebalance tries again
        if self.clustering:
            self._offsets.remove(mq)  # whatever we held from an earlier assignment is stale
        try:
            last = await api.query_consumer_offset(mq) if self.clustering else self._offsets.read(mq)
            offset = await compute_pull_from_where(
                mq, last, self.consume_from_where, timestamp_ms=self.consume_timestamp or 0,
                max_offset=api.max_offset, search_offset=api.search_offset,
            )
        except PocketMQError as exc:
            self._log.warning("compute_pull_offset_failed", topic=mq.topic, broker=mq.broker_name,
                              queue_id=mq.queue_id, error=str(exc))
            if self.orderly and self.clustering:
                await self._unlock(mq)
            return False
        if self._state is not _State.RUNNING:
            return False
        # Held (and committed with the others) from the start: a restart before the first message resumes
        # here rather than applying consume_from_where again.
        self._offsets.update(mq, offset, increase_only=True)
        self._process_queues[mq] = pq
        self._start_pull(mq, pq, offset)
        self._log.debug("queue_added", topic=mq.topic, broker=mq.broker_name, queue_id=mq.queue_id, offset=offset)
        return True

    async def _remove_queue(self, mq: MessageQueue) -> None:
        pq = self._process_queues.pop(mq, None)
        task = self._pull_tasks.pop(mq, None)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if pq is None:
            return
        pq.dropped = True
        if self.orderly and self.clustering:
            # Wait (briefly) for the batch being consumed, so that its offset is committed before the
            # queue's lock is released to the next owner.
            try:
                await asyncio.wait_for(pq.consume_lock.acquire(), ORDERLY_REMOVE_LOCK_WAIT)
            except TimeoutError:
                self._log.warning("orderly_queue_removed_while_consuming", topic=mq.topic, queue_id=mq.queue_id)
            else:
                try:
                    await self._commit_queue(mq)
                    await self._unlock(mq)
                finally:
                    pq.consume_lock.release()
        else:
            await self._commit_queue(mq)
        if self.clustering:
            self._offsets.remove(mq)
        self._require_api().forget_queue(mq)
        self._log.debug("queue_removed", topic=mq.topic, broker=mq.broker_name, queue_id=mq.queue_id)

    def _require_api(self) -> ConsumerAPI:
        if self._api is None:
            raise ConsumerStateError("the consumer has not been started")
        return self._api

    # -- pulling ----------------------------------------------------------------------------------------

    def _start_pull(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        task = asyncio.get_running_loop().create_task(self._pull_loop(mq, pq, offset),
                                                      name=f"pull-{mq.topic}-{mq.broker_name}-{mq.queue_id}")
        self._pull_tasks[mq] = task

    async def _pull_loop(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        """Long-poll ``mq`` until its process queue is dropped (see the module docstring)."""
        api = self._require_api()
        consume = self._consume
        assert consume is not None
        instance = self.instance
        orderly, clustering = self.orderly, self.clustering
        batch = self.pull_batch_size
        suspend_ms = int(self.long_polling_timeout * 1000)
        flow_logged = 0
        while not pq.dropped:
            if orderly and clustering and not pq.locked:
                await asyncio.sleep(PULL_DELAY_WHEN_NOT_LOCKED)
                continue
            if pq.flow_control(orderly=orderly) is not None:
                flow_logged += 1
                if flow_logged % 1000 == 1:
                    self._log.debug("pull_flow_control", topic=mq.topic, queue_id=mq.queue_id,
                                    count=pq.msg_count, size=pq.msg_size, span=pq.max_span)
                await asyncio.sleep(PULL_DELAY_WHEN_FLOW_CONTROL)
                continue
            sub = self._subscriptions.get(mq.topic)
            if sub is None:
                await asyncio.sleep(PULL_DELAY_WHEN_EXCEPTION)
                continue
            commit_offset = self._offsets.read(mq) if clustering else 0
            flag = pull_sys_flag(commit_offset=commit_offset > 0, suspend=True,
                                 subscription=self.post_subscription_when_pull)
            started = time.monotonic()
            try:
                result = await api.pull(
                    mq, sub, offset, batch, sys_flag=flag, commit_offset=max(commit_offset, 0),
                    suspend_timeout_ms=suspend_ms, timeout=self.pull_timeout,
                    post_subscription=self.post_subscription_when_pull,
                )
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if isinstance(exc, ResponseError) and exc.response_code in _UNKNOWN_GROUP_CODES and exc.addr:
                    instance.request_heartbeat(exc.addr)
                if isinstance(exc, PocketMQError) and exc.refresh_route:
                    instance.request_refresh_subscribed(mq.topic)
                self._log.warning("pull_failed", topic=mq.topic, broker=mq.broker_name, queue_id=mq.queue_id,
                                  offset=offset, error=str(exc) or type(exc).__name__)
                await asyncio.sleep(PULL_DELAY_WHEN_EXCEPTION)
                continue
            if pq.dropped:
                return
            pq.mark_pulled()
            status = result.status
            if status is PullStatus.FOUND:
                offset = result.next_begin_offset
                msgs = result.messages
                if msgs:
                    restore_retry_topics(msgs, self.group)
                    dispatch = pq.put(msgs)
                    # Offsets up to next_begin that were not delivered were filtered out (by tag): once the
                    # delivered ones are done, the queue's offset may move past them.
                    if offset - 1 > pq.queue_offset_max:
                        pq.queue_offset_max = offset - 1
                    consume.submit(mq, pq, msgs, dispatch)
                elif not pq.msg_count:
                    self._offsets.update(mq, offset, increase_only=True)
            elif status is PullStatus.OFFSET_ILLEGAL:
                pq = await self._offset_moved(mq, pq, offset, result.next_begin_offset)
                offset = result.next_begin_offset
            else:  # NO_NEW_MSG, NO_MATCHED_MSG: move the committed offset past filtered-out messages
                stuck = result.next_begin_offset == offset
                offset = result.next_begin_offset
                if not pq.msg_count:
                    self._offsets.update(mq, offset, increase_only=True)
                if stuck and time.monotonic() - started < PULL_MIN_EMPTY_ROUND:
                    # Answered at once without progress (a slave that will not correct an offset, a full hold
                    # service): pause instead of spinning.
                    await asyncio.sleep(PULL_MIN_EMPTY_ROUND)
            if self.pull_interval:
                await asyncio.sleep(self.pull_interval)

    async def _offset_moved(self, mq: MessageQueue, pq: ProcessQueue, offset: int, corrected: int) -> ProcessQueue:
        """OFFSET_ILLEGAL: the queue's messages in flight belong to a range the broker no longer has (or
        never had). Drop the process queue (their results are ignored), commit the broker's offset, and go on
        with a fresh process queue from there."""
        self._log.warning("pull_offset_moved", topic=mq.topic, broker=mq.broker_name, queue_id=mq.queue_id,
                          offset=offset, corrected=corrected)
        pq.dropped = True
        fresh = ProcessQueue(
            pull_threshold_for_queue=self.pull_threshold_for_queue,
            pull_threshold_size_for_queue=self.pull_threshold_size_for_queue,
            consume_concurrently_max_span=self.consume_concurrently_max_span,
        )
        if pq.locked:
            fresh.mark_locked()
        if self._process_queues.get(mq) is pq:
            self._process_queues[mq] = fresh
        self._offsets.update(mq, corrected)
        await self._commit_queue(mq)
        return fresh

    # -- offsets ----------------------------------------------------------------------------------------

    async def _persist_service(self) -> None:
        while True:
            await asyncio.sleep(self.persist_consumer_offset_interval)
            try:
                await self._commit_all(final=False)
            except Exception:
                self._log.exception("persist_offsets_failed")

    async def persist_offsets(self) -> None:
        """Commit the offsets that moved now (what the persist service does every few seconds), waiting for
        the brokers' answers."""
        await self._commit_all(final=True)

    async def _commit_all(self, *, final: bool) -> None:
        if isinstance(self._offsets, LocalOffsetStore):
            try:
                await asyncio.to_thread(self._offsets.persist)
            except PocketMQError as exc:
                self._log.warning("persist_local_offsets_failed", error=str(exc))
            return
        snapshot = self._offsets.snapshot()
        assigned = self._process_queues
        for mq in [mq for mq in snapshot if mq not in assigned]:
            del snapshot[mq]  # committed when the queue was taken away
        if not snapshot:
            return
        results = await asyncio.gather(*(self._commit(mq, offset, oneway=not final)
                                         for mq, offset in snapshot.items()))
        self._offsets.mark_committed({mq: off for (mq, off), ok in zip(snapshot.items(), results, strict=True) if ok})

    async def _commit_queue(self, mq: MessageQueue) -> None:
        """Commit one queue's offset now (it is being taken away, or its offset was corrected)."""
        if isinstance(self._offsets, LocalOffsetStore):
            return  # persisted with the whole file
        offset = self._offsets.read(mq)
        if offset >= 0 and await self._commit(mq, offset, oneway=True):
            self._offsets.mark_committed({mq: offset})

    async def _commit(self, mq: MessageQueue, offset: int, *, oneway: bool) -> bool:
        try:
            await self._require_api().update_consumer_offset(mq, offset, oneway=oneway)
        except PocketMQError as exc:
            self._log.warning("commit_offset_failed", topic=mq.topic, broker=mq.broker_name, queue_id=mq.queue_id,
                              offset=offset, error=str(exc))
            return False
        return True

    # -- orderly locks ----------------------------------------------------------------------------------

    async def lock_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        """Take (or renew) the broker's lock on one queue; marks ``pq`` locked when granted."""
        try:
            locked = await self._require_api().lock_batch([mq], self.instance.client_id)
        except PocketMQError as exc:
            self._log.warning("lock_queue_failed", topic=mq.topic, broker=mq.broker_name, queue_id=mq.queue_id,
                              error=str(exc))
            return False
        if mq in locked:
            pq.mark_locked()
            return True
        pq.locked = False
        return False

    async def _lock_service(self) -> None:
        while True:
            await asyncio.sleep(REBALANCE_LOCK_INTERVAL)
            await self._lock_all()

    async def _lock_all(self) -> None:
        """Renew the locks of every assigned queue, one LOCK_BATCH_MQ per broker group."""
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in self._process_queues:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        api = self._require_api()
        for broker_name, mqs in by_broker.items():
            try:
                locked = await api.lock_batch(mqs, self.instance.client_id)
            except PocketMQError as exc:
                self._log.warning("lock_batch_failed", broker=broker_name, error=str(exc))
                continue
            for mq in mqs:
                pq = self._process_queues.get(mq)
                if pq is None:
                    continue
                if mq in locked:
                    pq.mark_locked()
                else:
                    pq.locked = False

    async def _unlock(self, mq: MessageQueue) -> None:
        try:
            await self._require_api().unlock_batch([mq], self.instance.client_id)
        except PocketMQError as exc:
            self._log.warning("unlock_queue_failed", topic=mq.topic, queue_id=mq.queue_id, error=str(exc))

    async def _unlock_all(self) -> None:
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in self._process_queues:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        api = self._require_api()
        for broker_name, mqs in by_broker.items():
            try:
                await api.unlock_batch(mqs, self.instance.client_id)
            except PocketMQError as exc:
                self._log.warning("unlock_batch_failed", broker=broker_name, error=str(exc))

    # -- retry ------------------------------------------------------------------------------------------

    async def send_back(self, msg: MessageExt, *, to_dlq: bool) -> bool:
        """Hand a failed message to the broker: CONSUMER_SEND_MSG_BACK (delay level 0, or -1 for the DLQ),
        else produce it to ``%RETRY%<group>`` ourselves. ``False`` when both failed."""
        api = self._require_api()
        delay_level = -1 if to_dlq else 0
        try:
            await api.send_back(msg, delay_level, self.max_reconsume_times)
            return True
        except Exception as exc:  # whatever went wrong, the fallback below may still work
            self._log.warning("send_back_failed", topic=msg.topic, msg_id=msg.msg_id, error=str(exc) or repr(exc))
        try:
            await self._inner_producer.send(self._retry_message(msg, to_dlq=to_dlq))
            return True
        except Exception as exc:
            self._log.warning("send_to_retry_topic_failed", topic=msg.topic, msg_id=msg.msg_id,
                              error=str(exc) or repr(exc))
            return False

    def _retry_message(self, msg: MessageExt, *, to_dlq: bool) -> Message:
        """The message RocketMQ's client produces to ``%RETRY%<group>`` when send-back fails. The broker moves
        it to the DLQ when RECONSUME_TIME reaches MAX_RECONSUME_TIMES."""
        props = dict(msg.properties)
        for name in (MessageConst.PROPERTY_MIN_OFFSET, MessageConst.PROPERTY_MAX_OFFSET,
                     MessageConst.PROPERTY_DELAY_TIME_LEVEL):
            props.pop(name, None)
        props.setdefault(MessageConst.PROPERTY_RETRY_TOPIC, msg.topic)
        props.setdefault(MessageConst.PROPERTY_ORIGIN_MESSAGE_ID, msg.msg_id)
        reconsume = self.max_reconsume_times if to_dlq else msg.reconsume_times + 1
        props[MessageConst.PROPERTY_RECONSUME_TIME] = str(reconsume)
        props[MessageConst.PROPERTY_MAX_RECONSUME_TIMES] = str(self.max_reconsume_times)
        return Message(retry_topic(self.group), msg.body, properties=props, flag=msg.flag,
                       delay_level=delay_level_for_retry(msg.reconsume_times))


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


def _check_positive(**values: float) -> None:
    for name, value in values.items():
        if value <= 0:
            raise ValueError(f"{name} must be positive")
