"""``ConsumerConfig`` (push consumer) and ``PullConsumerConfig``: every setting of a consumer (RocketMQ's
``DefaultMQPushConsumer`` / ``DefaultMQPullConsumer`` fields), frozen and validated once. The consumers build
them from their keyword-only arguments (:class:`ConsumerArgs`, :class:`PullConsumerArgs`); the defaults live
here."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

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

__all__ = ["ConsumerArgs", "ConsumerConfig", "PullConsumerArgs", "PullConsumerConfig", "SimpleConsumerArgs",
           "SimpleConsumerConfig"]


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

    def __post_init__(self) -> None:
        check_group(self.group)
        if self.pop and (self.pop_invisible_time <= 0 or not self.pop_retry_delays
                         or min(self.pop_retry_delays) < 0):
            raise ValueError("POP mode needs pop_invisible_time > 0 and non-negative pop_retry_delays")
        check_positive(consume_thread_max=self.consume_thread_max, pull_batch_size=self.pull_batch_size,
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
