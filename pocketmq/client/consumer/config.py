"""``ConsumerConfig`` (push consumer), ``PullConsumerConfig`` and ``LitePullConsumerConfig``: every setting of a
consumer (RocketMQ's ``DefaultMQPushConsumer`` / ``DefaultMQPullConsumer`` / ``DefaultLitePullConsumer`` fields),
frozen and validated once. The consumers build them from their keyword-only arguments (:class:`ConsumerArgs`,
:class:`PullConsumerArgs`, :class:`LitePullConsumerArgs`); the defaults live here."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from pocketmq.client.consumer.allocate import AllocateStrategy, allocate_averagely
from pocketmq.client.consumer.types import (
    CONSUME_CONCURRENTLY_MAX_SPAN,
    DEFAULT_MAX_RECONSUME_TIMES,
    DEFAULT_POP_RETRY_DELAYS,
    PULL_BATCH_SIZE,
    PULL_THRESHOLD_FOR_QUEUE,
    PULL_THRESHOLD_SIZE_FOR_QUEUE,
    ConsumeFromWhere,
    MessageModel,
)
from pocketmq.client.core.config import ClientArgs, ClientOptions, check_positive
from pocketmq.client.core.validators import check_group

__all__ = [
    "ConsumerArgs",
    "ConsumerConfig",
    "LitePullConsumerArgs",
    "LitePullConsumerConfig",
    "PullConsumerArgs",
    "PullConsumerConfig",
    "SimpleConsumerArgs",
    "SimpleConsumerConfig",
]


class ConsumerArgs(ClientArgs, total=False):
    """The keyword arguments of :class:`~client.consumer.push.PushConsumer` (fields of :class:`ConsumerConfig`)."""

    message_model: MessageModel
    consume_from_where: ConsumeFromWhere
    consume_timestamp: int | None
    consume_thread_max: int
    consume_message_batch_max_size: int
    pull_batch_size: int
    pull_threshold_for_queue: int
    pull_threshold_size_for_queue: int
    consume_concurrently_max_span: int
    max_reconsume_times: int
    orderly: bool
    suspend_current_queue_time: float
    rebalance_interval: float
    persist_consumer_offset_interval: float
    pull_interval: float
    long_polling_timeout: float
    pull_timeout: float
    post_subscription_when_pull: bool
    shutdown_grace: float
    allocate_strategy: AllocateStrategy
    offset_store_dir: str | Path | None
    enable_trace: bool
    trace_topic: str
    pop: bool
    pop_invisible_time: float
    pop_retry_delays: tuple[float, ...]
    pop_receives: int


@dataclass(frozen=True, kw_only=True)
class ConsumerConfig(ClientOptions):
    """A push consumer's settings (see :class:`~pocketmq.client.consumer.push.PushConsumer` for what they do)."""

    message_model: MessageModel = MessageModel.CLUSTERING
    #: Where a queue the group has no offset for starts.
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.LAST_OFFSET
    #: For TIMESTAMP (epoch ms); default half an hour before start.
    consume_timestamp: int | None = None
    #: Handlers running at once, across all queues.
    consume_thread_max: int = 20
    consume_message_batch_max_size: int = 1
    pull_batch_size: int = PULL_BATCH_SIZE
    pull_threshold_for_queue: int = PULL_THRESHOLD_FOR_QUEUE
    pull_threshold_size_for_queue: int = PULL_THRESHOLD_SIZE_FOR_QUEUE
    consume_concurrently_max_span: int = CONSUME_CONCURRENTLY_MAX_SPAN
    #: -1 (stored as 16, RocketMQ's default) or more.
    max_reconsume_times: int = -1
    orderly: bool = False
    suspend_current_queue_time: float = 1.0
    rebalance_interval: float = 20.0
    persist_consumer_offset_interval: float = 5.0
    #: Pause between two pulls of a queue (s).
    pull_interval: float = 0.0
    #: How long the broker holds a pull with nothing to answer (s).
    long_polling_timeout: float = 15.0
    #: A pull's RPC timeout (s); longer than ``long_polling_timeout``.
    pull_timeout: float = 30.0
    post_subscription_when_pull: bool = False
    shutdown_grace: float = 10.0
    allocate_strategy: AllocateStrategy = allocate_averagely
    #: BROADCASTING offsets file base (default ``~/.rocketmq_offsets``).
    offset_store_dir: str | Path | None = None
    #: Write RocketMQ message traces of every handler call to ``trace_topic`` (see :mod:`pocketmq.client.trace`).
    enable_trace: bool = False
    trace_topic: str = "RMQ_SYS_TRACE_TOPIC"
    #: RocketMQ 5's POP mode (:mod:`pocketmq.client.consumer.pop_consume`): every consumer pops from every queue,
    #: no rebalance and no offsets; ``orderly`` pops FIFO.
    pop: bool = False
    #: POP mode: how long popped messages stay invisible to the group while the handler runs (s).
    pop_invisible_time: float = 60.0
    #: POP mode: how long a failed message waits before it is handed out again, by reconsume times (s).
    pop_retry_delays: tuple[float, ...] = DEFAULT_POP_RETRY_DELAYS
    #: POP mode: receives in flight at once (FIFO: one), so the broker pops while the handlers run.
    pop_receives: int = 4

    def __post_init__(self) -> None:
        check_group(self.group)
        if self.pop and (self.pop_invisible_time <= 0 or not self.pop_retry_delays
                         or min(self.pop_retry_delays) < 0):
            raise ValueError("POP mode needs pop_invisible_time > 0 and non-negative pop_retry_delays")
        check_positive(consume_thread_max=self.consume_thread_max, pop_receives=self.pop_receives,
                       pull_batch_size=self.pull_batch_size,
                       consume_message_batch_max_size=self.consume_message_batch_max_size,
                       pull_threshold_for_queue=self.pull_threshold_for_queue,
                       pull_threshold_size_for_queue=self.pull_threshold_size_for_queue,
                       consume_concurrently_max_span=self.consume_concurrently_max_span,
                       rebalance_interval=self.rebalance_interval,
                       persist_consumer_offset_interval=self.persist_consumer_offset_interval,
                       long_polling_timeout=self.long_polling_timeout, pull_timeout=self.pull_timeout,
                       suspend_current_queue_time=self.suspend_current_queue_time)
        if self.pull_timeout <= self.long_polling_timeout:
            raise ValueError("pull_timeout must be longer than long_polling_timeout")
        if self.pull_interval < 0 or self.shutdown_grace < 0:
            raise ValueError("pull_interval and shutdown_grace must not be negative")
        if self.max_reconsume_times < -1:
            raise ValueError("max_reconsume_times must be -1 (default 16) or more")
        if self.max_reconsume_times == -1:
            object.__setattr__(self, "max_reconsume_times", DEFAULT_MAX_RECONSUME_TIMES)
        super().__post_init__()

    @property
    def clustering(self) -> bool:
        return self.message_model is MessageModel.CLUSTERING


class PullConsumerArgs(ClientArgs, total=False):
    """The keyword arguments of :class:`~pocketmq.client.consumer.pull.PullConsumer`."""

    message_model: MessageModel
    pull_timeout: float


@dataclass(frozen=True, kw_only=True)
class PullConsumerConfig(ClientOptions):
    """A pull consumer's settings."""

    message_model: MessageModel = MessageModel.CLUSTERING
    #: Budget of a non-blocking pull (s).
    pull_timeout: float = 10.0

    def __post_init__(self) -> None:
        check_group(self.group)
        check_positive(pull_timeout=self.pull_timeout)
        super().__post_init__()


class SimpleConsumerArgs(ClientArgs, total=False):
    """The keyword arguments of :class:`~pocketmq.client.consumer.simple.SimpleConsumer`."""

    await_duration: float
    invisible_duration: float
    request_timeout: float


@dataclass(frozen=True, kw_only=True)
class SimpleConsumerConfig(ClientOptions):
    """A simple (POP) consumer's settings, named as RocketMQ 5's ``SimpleConsumer`` names them."""

    #: How long a ``receive`` waits for a message when there is none (long polling, s).
    await_duration: float = 15.0
    #: How long received messages stay invisible to the group unless acked or changed (s).
    invisible_duration: float = 60.0
    #: Budget of an ack or change of invisible duration (s).
    request_timeout: float = 3.0

    def __post_init__(self) -> None:
        check_group(self.group)
        check_positive(invisible_duration=self.invisible_duration, request_timeout=self.request_timeout)
        if self.await_duration < 0:
            raise ValueError("await_duration must not be negative")
        super().__post_init__()


class LitePullConsumerArgs(ClientArgs, total=False):
    """The keyword arguments of :class:`~pocketmq.client.consumer.lite_pull.LitePullConsumer`."""

    message_model: MessageModel
    consume_from_where: ConsumeFromWhere
    consume_timestamp: int | None
    pull_batch_size: int
    pull_threshold_for_all: int
    pull_threshold_for_queue: int
    pull_threshold_size_for_queue: int
    consume_max_span: int
    auto_commit: bool
    auto_commit_interval: float
    poll_timeout: float
    rebalance_interval: float
    persist_consumer_offset_interval: float
    long_polling_timeout: float
    pull_timeout: float
    allocate_strategy: AllocateStrategy
    offset_store_dir: str | Path | None
    enable_trace: bool
    trace_topic: str


#: RocketMQ's ``DefaultLitePullConsumer`` defaults: pulls of 10, 10,000 messages buffered for ``poll`` at most,
#: an automatic commit every 5 s, ``poll()`` waits 5 s, the broker holds a pull 20 s.
LITE_PULL_BATCH_SIZE = 10
LITE_PULL_THRESHOLD_FOR_ALL = 10_000
#: RocketMQ's ``MIN_AUTOCOMMIT_INTERVAL_MILLIS`` (s).
MIN_AUTO_COMMIT_INTERVAL = 1.0


@dataclass(frozen=True, kw_only=True)
class LitePullConsumerConfig(ClientOptions):
    """A lite pull consumer's settings (see :class:`~pocketmq.client.consumer.lite_pull.LitePullConsumer`). The pull
    and rebalance services it shares with the push consumer read the same names (``orderly`` and the others
    below are fixed for it)."""

    message_model: MessageModel = MessageModel.CLUSTERING
    #: Where a queue the group has no offset for starts.
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.LAST_OFFSET
    #: For TIMESTAMP (epoch ms); default half an hour before start.
    consume_timestamp: int | None = None
    pull_batch_size: int = LITE_PULL_BATCH_SIZE
    #: Messages pulled and waiting for ``poll`` at most, all queues together (RocketMQ's pullThresholdForAll).
    pull_threshold_for_all: int = LITE_PULL_THRESHOLD_FOR_ALL
    pull_threshold_for_queue: int = PULL_THRESHOLD_FOR_QUEUE
    #: Bytes of bodies per queue (RocketMQ counts this one in MiB: 100 MiB).
    pull_threshold_size_for_queue: int = PULL_THRESHOLD_SIZE_FOR_QUEUE
    #: A queue stops being pulled while its buffered offsets span more than this (RocketMQ's consumeMaxSpan).
    consume_max_span: int = CONSUME_CONCURRENTLY_MAX_SPAN
    #: ``poll`` commits what the previous polls returned every ``auto_commit_interval``; false: ``commit_sync``.
    auto_commit: bool = True
    #: At least :data:`MIN_AUTO_COMMIT_INTERVAL` (s).
    auto_commit_interval: float = 5.0
    #: How long ``poll()`` waits for messages when none are buffered (s).
    poll_timeout: float = 5.0
    rebalance_interval: float = 20.0
    #: How often committed offsets are sent to the brokers (s).
    persist_consumer_offset_interval: float = 5.0
    #: How long the broker holds a pull with nothing to answer (s; RocketMQ's brokerSuspendMaxTimeMillis).
    long_polling_timeout: float = 20.0
    #: A pull's RPC timeout (s; RocketMQ's consumerTimeoutMillisWhenSuspend); longer than ``long_polling_timeout``.
    pull_timeout: float = 30.0
    allocate_strategy: AllocateStrategy = allocate_averagely
    #: BROADCASTING offsets file base (default ``~/.rocketmq_offsets``).
    offset_store_dir: str | Path | None = None
    #: Write RocketMQ message traces of what ``poll`` returns to ``trace_topic``.
    enable_trace: bool = False
    trace_topic: str = "RMQ_SYS_TRACE_TOPIC"

    #: What the shared pull loop reads: never orderly, no pause between pulls, the subscription in every pull
    #: (a lite consumer in assign mode announces none in its heartbeats, as RocketMQ's).
    orderly: ClassVar[bool] = False
    pull_interval: ClassVar[float] = 0.0
    post_subscription_when_pull: ClassVar[bool] = True

    def __post_init__(self) -> None:
        check_group(self.group)
        check_positive(pull_batch_size=self.pull_batch_size, pull_threshold_for_all=self.pull_threshold_for_all,
                       pull_threshold_for_queue=self.pull_threshold_for_queue,
                       pull_threshold_size_for_queue=self.pull_threshold_size_for_queue,
                       consume_max_span=self.consume_max_span, rebalance_interval=self.rebalance_interval,
                       persist_consumer_offset_interval=self.persist_consumer_offset_interval,
                       long_polling_timeout=self.long_polling_timeout, pull_timeout=self.pull_timeout)
        if self.pull_timeout <= self.long_polling_timeout:
            raise ValueError("pull_timeout must be longer than long_polling_timeout")
        if self.auto_commit_interval < MIN_AUTO_COMMIT_INTERVAL:
            raise ValueError(f"auto_commit_interval must be at least {MIN_AUTO_COMMIT_INTERVAL} s")
        if self.poll_timeout < 0:
            raise ValueError("poll_timeout must not be negative")
        super().__post_init__()

    @property
    def clustering(self) -> bool:
        return self.message_model is MessageModel.CLUSTERING

    @property
    def consume_concurrently_max_span(self) -> int:
        """The push consumer's name for :attr:`consume_max_span` (the shared process queue reads it)."""
        return self.consume_max_span
