"""``LitePullConsumer``: the application polls batches of messages (RocketMQ's ``DefaultLitePullConsumer``).

Usage::

    consumer = LitePullConsumer("my-group", namesrv_addr="127.0.0.1:9876")
    consumer.subscribe("TopicTest", "TagA || TagB")      # or: consumer.assign(queues)
    async with consumer:
        while running:
            for msg in await consumer.poll(timeout=1.0):
                ...

Its keyword arguments are the fields of :class:`~pocketmq.client.consumer.config.LitePullConsumerConfig`
(RocketMQ's defaults: pulls of 10, ``auto_commit`` every 5 s, ``poll()`` waits 5 s, the broker holds a pull 20 s).

* **Queues.** ``subscribe`` shares the topics' queues within the group, rebalanced as the group changes: the push
  consumer's rebalance service (:mod:`pocketmq.client.consumer.rebalance`) runs unchanged. ``assign`` names the
  queues instead (no rebalance, no subscription in heartbeats, as RocketMQ's); the two are mutually exclusive.
  Either takes effect in the background once started. A queue starts at the group's committed offset, or by
  ``consume_from_where``.
* **Pulling** is the push consumer's pull service (:mod:`pocketmq.client.consumer.pull_service`, one long-polling
  loop per queue, flow control per queue), its messages going to a poll buffer instead of handlers
  (:mod:`pocketmq.client.consumer.lite_pull_service`). The
  buffer holds at most ``pull_threshold_for_all`` messages (RocketMQ's pullThresholdForAll): while it is full, and
  while a queue is paused, its pulls wait.
* **poll(timeout)** returns one pulled batch (up to ``pull_batch_size`` messages of one queue, in offset order),
  or ``[]`` when nothing came within ``timeout`` (default ``poll_timeout``). Batches of a paused queue are set
  aside until it is resumed.
* **Positions and commits.** What ``poll`` returned is consumed: the queue's position moves past it. Committing
  copies positions into the offset table the push consumer uses (:mod:`pocketmq.client.consumer.offset_store`),
  whose changed entries go to the brokers every ``persist_consumer_offset_interval``, when a queue is taken away,
  and at shutdown. With ``auto_commit`` (default) ``poll`` commits every ``auto_commit_interval``, as RocketMQ's
  does (so a queue taken away, or a shutdown, also commits what was polled); otherwise ``commit_sync()`` commits
  and waits for the brokers. A restart (or the queue's next owner) resumes from the committed offset.
* **seek** / **seek_to_begin** / **seek_to_end** restart a queue's pulls at an offset (within the queue's min and
  max), dropping what was buffered for it; the new position is committed with the next commit. An assigned queue
  whose pulls have not started yet starts there.

``shutdown()`` stops pulling, commits (auto commit) and persists the offsets, and unregisters the client.
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Unpack

from pocketmq.client.consumer import admin_requests
from pocketmq.client.consumer.broker_api import ConsumerAPI
from pocketmq.client.consumer.config import LitePullConsumerArgs, LitePullConsumerConfig
from pocketmq.client.consumer.context import PushContext
from pocketmq.client.consumer.lite_pull_service import LitePullService, PollBuffer
from pocketmq.client.consumer.offset_store import LocalOffsetStore, OffsetCommitter, OffsetTable, RemoteOffsetStore
from pocketmq.client.consumer.rebalance import RebalanceService, consume_timestamp
from pocketmq.client.consumer.selector import MessageSelector
from pocketmq.client.consumer.subscription import build_subscription, consumer_data_json
from pocketmq.client.consumer.types import ConsumeType
from pocketmq.client.core.errors import ConsumerStateError, MQClientError
from pocketmq.client.core.instance import MQClientInstance, join_instance
from pocketmq.client.core.member import ClientMember, State
from pocketmq.client.core.message import MessageQueue
from pocketmq.client.core.message_ext import MessageExt
from pocketmq.client.core.validators import check_topic
from pocketmq.common.logs import get_logger
from pocketmq.common.service import Service, on_demand, periodic
from pocketmq.common.subscription import ExpressionType, SubscriptionData
from pocketmq.remoting.errors import PocketMQError

if TYPE_CHECKING:
    from pocketmq.client.trace.hooks import ConsumeTracer, TraceSession

__all__ = ["MAX_PAUSED_QUEUES", "MAX_TOPICS", "LitePullConsumer"]

log = get_logger("pocketmq.client.pull_consumer")

#: Topics a consumer subscribes to (or is assigned queues of) at most.
MAX_TOPICS = 1024
#: Queues paused at once at most.
MAX_PAUSED_QUEUES = 65_536

class _Mode(enum.Enum):
    NONE = "none"
    SUBSCRIBE = "subscribe"
    ASSIGN = "assign"


@dataclass(frozen=True, slots=True)
class _Parts:
    """What a started lite pull consumer runs."""

    context: PushContext
    buffer: PollBuffer
    pulls: LitePullService
    rebalance: RebalanceService
    #: pulls, offset persisting, the assignment and (subscribe) the rebalance, stopped as one.
    services: Service
    #: Applies ``assign`` (on demand).
    assigner: Service


class LitePullConsumer(ClientMember):
    """An asyncio lite pull consumer; see the module docstring. Create it anywhere, start it on a loop."""

    kind = "consumer"
    state_error = ConsumerStateError
    config: LitePullConsumerConfig

    def __init__(self, group: str, **options: Unpack[LitePullConsumerArgs]) -> None:
        super().__init__(LitePullConsumerConfig(group=group, **options))
        self._mode = _Mode.NONE
        #: Topic → subscription the pulls use: subscribed topics, or the assigned queues' topics (all tags).
        self._topics: dict[str, SubscriptionData] = {}
        self._assigned: set[MessageQueue] = set()
        self._auto_commit = self.config.auto_commit
        self._next_auto_commit = 0.0
        self._parts: _Parts | None = None
        self._rebalancing = False
        self._started_ms = 0
        self._trace: TraceSession | None = None
        self._tracer: ConsumeTracer | None = None
        self._log = log.bind(group=self.group)

    # -- what to consume ---------------------------------------------------------------------------------

    def _set_mode(self, mode: _Mode) -> None:
        if self._mode is _Mode.NONE:
            self._mode = mode
        elif self._mode is not mode:
            raise MQClientError("Subscribe and assign are mutually exclusive.")

    def subscribe(self, topic: str, expression: str | MessageSelector | None = "*") -> None:
        """Consume ``topic``'s queues shared within the group (``"*"``, ``"tagA || tagB"`` or a
        :class:`MessageSelector`); after start the brokers hear of it at once and the queues are rebalanced."""
        check_topic(topic)
        if topic not in self._topics and len(self._topics) >= MAX_TOPICS:
            raise MQClientError(f"a consumer subscribes to at most {MAX_TOPICS} topics")
        self._set_mode(_Mode.SUBSCRIBE)
        self._topics[topic] = build_subscription(topic, expression)
        if self._parts is not None and self._state is State.RUNNING:
            self._subscription_changed(self._parts)

    def unsubscribe(self, topic: str) -> None:
        """Stop consuming ``topic`` (its queues are given up by a rebalance, triggered now)."""
        if self._mode is _Mode.SUBSCRIBE and self._topics.pop(topic, None) is not None and self._parts is not None:
            self._subscription_changed(self._parts)

    def _subscription_changed(self, parts: _Parts) -> None:
        instance = self.instance
        instance.request_heartbeat_all()
        for topic in self._topics:
            if instance.routes.subscribe_route(topic) is None:
                instance.refresher.request(topic, publish=False)
        self._ensure_rebalancing(parts)
        parts.rebalance.wakeup()

    def _ensure_rebalancing(self, parts: _Parts) -> None:
        """Subscribe mode: the rebalance service runs (started once, with the first subscription after start)."""
        if not self._rebalancing:
            self._rebalancing = True
            parts.services.add_child(parts.rebalance)

    def assign(self, queues: Iterable[MessageQueue]) -> None:
        """Consume exactly ``queues`` (no rebalance); queues assigned before are given up (their offsets
        committed). Applied in the background once started: :attr:`assigned_queues` shows the queues pulled."""
        chosen = list(dict.fromkeys(queues))
        if not chosen:
            raise ValueError("Message queues can not be null or empty.")
        topics = {mq.topic for mq in chosen}
        for topic in topics:
            check_topic(topic)
        if len(topics) > MAX_TOPICS:
            raise MQClientError(f"a consumer reads at most {MAX_TOPICS} topics")
        self._set_mode(_Mode.ASSIGN)
        self._assigned = set(chosen)
        for topic in [t for t in self._topics if t not in topics]:
            del self._topics[topic]
        for topic in topics:
            self._topics.setdefault(topic, build_subscription(topic, "*"))
        if self._parts is not None and self._state is State.RUNNING:
            self.instance.request_heartbeat_all()
            self._parts.assigner.trigger()

    async def _apply_assignment(self) -> None:
        """The assigner's run: queues no longer assigned are removed, new ones added (one run at a time)."""
        parts = self._parts
        if parts is None or self._state is not State.RUNNING:
            return
        by_topic: dict[str, list[MessageQueue]] = {}
        for mq in self._assigned:
            by_topic.setdefault(mq.topic, []).append(mq)
        for mq in [mq for mq in parts.pulls.pending_seeks if mq not in self._assigned]:
            del parts.pulls.pending_seeks[mq]
        for mq in [mq for mq in parts.pulls.process_queues if mq.topic not in by_topic]:
            await parts.rebalance.remove_queue(mq)
        for topic, queues in sorted(by_topic.items()):
            await parts.rebalance.update_process_queues(topic, queues)

    @property
    def assigned_queues(self) -> list[MessageQueue]:
        """The queues this consumer pulls right now, sorted."""
        return sorted(self._parts.pulls.process_queues) if self._parts is not None else []

    async def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic`` (asked of a name server now), e.g. to ``assign`` some of them."""
        check_topic(topic)
        return await self._running_parts.context.api.fetch_subscribe_queues(topic)

    # -- lifecycle --------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Join the loop's client instance, announce the group to every broker and start pulling the subscribed
        (rebalanced) or assigned queues."""
        if not self._may_start():
            return
        instance = await join_instance(self.config.client, lambda i: i.register_consumer(self.group, self))
        self._instance = instance
        try:
            await self._start_parts(instance)
        except BaseException:
            self._state = State.STOPPED
            if self._parts is not None:
                await self._parts.services.stop()
            await self._stop_trace()
            await instance.unregister_consumer(self.group)
            raise
        self._log.info("lite_pull_consumer_started", client_id=instance.client_id, mode=self._mode.value,
                       model=self.config.message_model.value, topics=sorted(self._topics))

    async def _start_parts(self, instance: MQClientInstance) -> None:
        config = self.config
        api = ConsumerAPI(instance, self.group, serialize_type=config.client.serialize_type,
                          timeout=config.namesrv_timeout)
        offsets = await self._offset_store(instance)
        await self._start_trace(instance)
        committer = OffsetCommitter(offsets, api, self._log)
        context = PushContext(config, self._topics, api, offsets, committer, self._log)
        buffer = PollBuffer(config.pull_threshold_for_all)
        pulls = LitePullService(context, buffer, auto_commit=self._auto_commit)
        rebalance = RebalanceService(context, pulls, consume_timestamp=consume_timestamp(self.config.consume_timestamp),
                                     is_running=lambda: self._state is State.RUNNING)
        services = Service(name=f"lite-pull-consumer-{self.group}")
        services.add_child(pulls)
        services.add_child(periodic(f"persist-offsets-{self.group}", config.persist_consumer_offset_interval,
                                    lambda: committer.commit_all(pulls.process_queues, final=False)))
        assigner = on_demand(f"assign-{self.group}", self._apply_assignment)
        parts = self._parts = _Parts(context, buffer, pulls, rebalance, services, assigner)
        admin_requests.install(instance)  # the broker's 220/221/307/309 on an administrator's behalf
        self._started_ms = time.time_ns() // 1_000_000
        self._next_auto_commit = time.monotonic() + config.auto_commit_interval
        self._state = State.RUNNING
        for topic in list(self._topics):
            try:
                await instance.refresher.refresh(topic, config.namesrv_timeout, publish=False)
            except PocketMQError as exc:
                self._log.warning("route_lookup_failed", topic=topic, error=str(exc))
        if self._mode is _Mode.SUBSCRIBE:
            for sub in list(self._topics.values()):
                if sub.expression_type == ExpressionType.SQL92:
                    await api.check_client_config(sub)  # a broker that cannot serve it fails the start
        await instance.send_heartbeat_to_all()
        services.add_child(assigner)
        services.start()
        if self._mode is _Mode.SUBSCRIBE:
            self._ensure_rebalancing(parts)
        elif self._mode is _Mode.ASSIGN:
            assigner.trigger()

    async def _offset_store(self, instance: MQClientInstance) -> OffsetTable:
        """CLUSTERING: offsets on the brokers; BROADCASTING: the local file, loaded."""
        if self.config.clustering:
            return RemoteOffsetStore()
        return await LocalOffsetStore.opened(instance.client_id, self.group, self.config.offset_store_dir)

    async def _start_trace(self, instance: MQClientInstance) -> None:
        """``enable_trace``: what ``poll`` returns is traced as consumed (:mod:`pocketmq.client.trace`)."""
        if not self.config.enable_trace:
            return
        from pocketmq.client.producer.producer import Producer
        from pocketmq.client.trace.hooks import ConsumeTracer, TraceSession

        args = self.config.client_args()
        self._trace = await TraceSession.start(lambda name: Producer(name, **args), self.group,
                                               self.config.trace_topic)
        self._tracer = ConsumeTracer(self._trace.dispatcher, self.group)

    async def _stop_trace(self) -> None:
        if self._trace is not None:
            trace, self._trace, self._tracer = self._trace, None, None
            await trace.stop()


    async def shutdown(self) -> None:
        """Stop pulling, commit (with auto commit, what was polled) and persist the offsets, unregister from
        every broker and release the client instance. A ``poll`` waiting meanwhile returns ``[]``."""
        if not self._may_stop():
            return
        parts = self._parts
        assert parts is not None  # running means started
        await parts.services.stop()
        queues = parts.pulls.process_queues
        if self._auto_commit:
            parts.pulls.commit_positions(queues)
        await parts.context.committer.commit_all(queues, final=True)
        for pq in queues.values():
            pq.dropped = True
        parts.buffer.close()
        await self._stop_trace()
        await self.instance.unregister_consumer(self.group)
        self._state = State.STOPPED
        self._log.info("lite_pull_consumer_stopped")

    @property
    def _running_parts(self) -> _Parts:
        if self._parts is None or self._state is not State.RUNNING:
            raise ConsumerStateError(f"the consumer is {self._state.value}, not running")
        return self._parts

    # -- polling ----------------------------------------------------------------------------------------

    async def poll(self, timeout: float | None = None) -> list[MessageExt]:
        """The next pulled batch (up to ``pull_batch_size`` messages of one queue, in offset order), waiting at
        most ``timeout`` seconds (default ``poll_timeout``) when none is buffered; ``[]`` when none came.
        With ``auto_commit``, first commits what earlier polls returned once ``auto_commit_interval`` has
        passed."""
        parts = self._running_parts
        if timeout is None:
            timeout = self.config.poll_timeout
        elif timeout < 0:
            raise ValueError("Timeout must not be negative")
        if self._auto_commit:
            self._maybe_auto_commit(parts)
        buffer, pulls = parts.buffer, parts.pulls
        if buffer.count:
            # A poll that finds a batch waiting would never suspend: let the loop read the pulls' answers first, or
            # an application working through the buffer starves its own pulls until the buffer is empty.
            await asyncio.sleep(0)
        batch = buffer.take(pulls.paused)
        if batch is None and timeout > 0:
            deadline = time.monotonic() + timeout
            while batch is None and not buffer.closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                await buffer.wait(left)
                batch = buffer.take(pulls.paused)
        if batch is None:
            return []
        mq, pq, msgs = batch
        offset = pq.remove(msgs)
        if offset >= 0:
            pulls.positions[mq] = offset
        if self._tracer is not None:
            self._tracer.record_polled(msgs)
        return msgs

    def _maybe_auto_commit(self, parts: _Parts) -> None:
        now = time.monotonic()
        if now >= self._next_auto_commit:
            parts.pulls.commit_positions(list(parts.pulls.process_queues))
            self._next_auto_commit = now + self.config.auto_commit_interval

    @property
    def auto_commit(self) -> bool:
        return self._auto_commit

    @auto_commit.setter
    def auto_commit(self, value: bool) -> None:
        self._auto_commit = value
        if self._parts is not None:
            self._parts.pulls.auto_commit = value

    # -- pause, seek --------------------------------------------------------------------------------------

    def pause(self, queues: Iterable[MessageQueue]) -> None:
        """Stop pulling ``queues`` and returning their messages from ``poll`` (what was buffered is kept)."""
        paused = self._running_parts.pulls.paused
        for mq in queues:
            if mq not in paused and len(paused) >= MAX_PAUSED_QUEUES:
                raise MQClientError(f"at most {MAX_PAUSED_QUEUES} queues are paused at once")
            paused.add(mq)

    def resume(self, queues: Iterable[MessageQueue]) -> None:
        """Pull and poll ``queues`` again, starting with what was buffered for them."""
        parts = self._running_parts
        for mq in queues:
            parts.pulls.paused.discard(mq)
            parts.buffer.resume(mq)

    @property
    def paused_queues(self) -> list[MessageQueue]:
        return sorted(self._parts.pulls.paused) if self._parts is not None else []

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """Consume ``mq`` from ``offset`` on (between its min and max offset): what was buffered for it is
        dropped, and the next commit commits ``offset``. An assigned queue not pulled yet starts there."""
        parts = self._running_parts
        pulls = parts.pulls
        if mq not in pulls.process_queues and not (self._mode is _Mode.ASSIGN and mq in self._assigned):
            rebalancing = ", may be rebalancing" if self._mode is _Mode.SUBSCRIBE else ""
            raise MQClientError(f"The message queue is not in assigned list{rebalancing}, message queue: {mq}")
        api = parts.context.api
        low, high = await api.min_offset(mq), await api.max_offset(mq)
        if not low <= offset <= high:
            raise MQClientError(f"Seek offset illegal, seek offset = {offset}, min offset = {low}, "
                                f"max offset = {high}")
        if mq in pulls.process_queues:
            await pulls.restart(mq, offset)
        elif self._mode is _Mode.ASSIGN and mq in self._assigned:
            pulls.pending_seeks[mq] = offset
        else:
            raise MQClientError(f"The message queue is not in assigned list, may be rebalancing, message queue: {mq}")

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        """Consume ``mq`` from its first offset."""
        await self.seek(mq, await self._running_parts.context.api.min_offset(mq))

    async def seek_to_end(self, mq: MessageQueue) -> None:
        """Consume only what ``mq`` gets from now on."""
        await self.seek(mq, await self._running_parts.context.api.max_offset(mq))

    async def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """The first offset of ``mq`` stored at or after ``timestamp_ms`` (epoch ms), e.g. to ``seek`` to."""
        return await self._running_parts.context.api.search_offset(mq, timestamp_ms)

    # -- commits ----------------------------------------------------------------------------------------

    async def commit_sync(self, queues: Iterable[MessageQueue] | None = None) -> None:
        """Commit what ``poll`` returned of ``queues`` (default: every assigned queue) and wait for the brokers
        (BROADCASTING: the local file). Raises :class:`MQClientError` naming the queues whose commit failed
        (they are retried by the next commit)."""
        parts = self._running_parts
        held = parts.pulls.process_queues
        targets = [mq for mq in (held if queues is None else queues) if mq in held]
        parts.pulls.commit_positions(targets)
        offsets = parts.context.offsets
        await parts.context.committer.commit_all(held, final=True)
        wanted = set(targets)
        left = sorted(mq for mq in offsets.snapshot() if mq in wanted)
        if left:
            raise MQClientError(f"the offsets of {len(left)} queues could not be committed: "
                                + ", ".join(f"{mq.broker_name}/{mq.topic}/{mq.queue_id}" for mq in left[:8]))

    async def committed(self, mq: MessageQueue) -> int:
        """The group's committed offset of ``mq``: the one held here, else the broker's; ``-1`` when none."""
        parts = self._running_parts
        held = parts.context.offsets.read(mq)
        if held >= 0 or not self.config.clustering:
            return held
        return await parts.context.api.query_consumer_offset(mq)

    def positions(self) -> dict[MessageQueue, int]:
        """Each assigned queue's next offset to consume (one past what ``poll`` returned)."""
        return dict(self._parts.pulls.positions) if self._parts is not None else {}

    # -- what the client instance asks (ConsumerRegistration) ---------------------------------------------

    def consumer_data(self) -> dict[str, Any]:
        subscriptions = list(self._topics.values()) if self._mode is _Mode.SUBSCRIBE else []
        return consumer_data_json(
            self.group, subscriptions, consume_type=ConsumeType.CONSUME_ACTIVELY,
            message_model=self.config.message_model, consume_from_where=self.config.consume_from_where,
        )

    def subscribed_topics(self) -> list[str]:
        return list(self._topics)

    def rebalance_soon(self) -> None:
        if self._parts is not None and self._mode is _Mode.SUBSCRIBE:
            self._parts.rebalance.wakeup()

    # -- what the broker asks for an administrator (admin_requests.AdminAnswering) -------------------------

    def running_info(self) -> dict[str, Any]:
        """RocketMQ's ``ConsumerRunningInfo`` body (maps keyed by queue: :class:`~pocketmq.remoting.fastjson.MQKey`)."""
        parts = self._running_parts
        held = parts.context.offsets.offsets()
        config = self.config
        properties = {
            "PROP_CONSUME_TYPE": ConsumeType.CONSUME_ACTIVELY.value, "PROP_CLIENT_VERSION": "V4_9_4",
            "PROP_CONSUMER_START_TIMESTAMP": str(self._started_ms), "messageModel": config.message_model.value,
            "consumeFromWhere": config.consume_from_where.value, "pullBatchSize": str(config.pull_batch_size),
            "consumerGroup": self.group, "autoCommit": str(self._auto_commit).lower(),
            "pullThresholdForAll": str(config.pull_threshold_for_all),
        }
        mq_table = admin_requests.mq_table(parts.pulls.process_queues, held)
        subscriptions = list(self._topics.values()) if self._mode is _Mode.SUBSCRIBE else []
        return {"mqTable": mq_table, "properties": properties, "statusTable": {},
                "subscriptionSet": [s.to_json_dict() for s in subscriptions]}

    def held_offsets(self, topic: str) -> dict[MessageQueue, int]:
        return self._parts.context.offsets.offsets(topic) if self._parts is not None else {}

    async def reset_offsets(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET: each held queue of ``offsets`` is pulled again from its new offset,
        which is committed at once."""
        parts = self._running_parts
        for mq, offset in offsets.items():
            if mq not in parts.pulls.process_queues:
                continue  # not ours: its owner resets it, or the broker already holds the new offset
            await parts.pulls.restart(mq, offset)
            parts.context.offsets.update(mq, offset)
            await parts.context.committer.commit_queue(mq)

    async def consume_directly(self, msg: MessageExt) -> str:
        """CONSUME_MESSAGE_DIRECTLY has nothing to call: the application polls."""
        raise MQClientError(f"the lite pull consumer of group {self.group} has no handler to consume a message "
                            "directly: its application polls")
