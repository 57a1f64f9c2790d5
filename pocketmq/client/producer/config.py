"""``ProducerConfig``: every setting of a producer (RocketMQ's ``DefaultMQProducer`` fields), frozen and
validated once. ``Producer(group, **options)`` builds it from its keyword-only arguments
(:class:`ProducerArgs`); the defaults live here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pocketmq.client.core.compression import COMPRESS_LEVEL, COMPRESS_OVER
from pocketmq.client.core.config import DEFAULT_TOPIC_QUEUE_NUMS, ClientArgs, ClientOptions, check_positive
from pocketmq.client.core.message import MessageQueue
from pocketmq.client.core.uniq import UniqIdGenerator
from pocketmq.client.core.validators import DEFAULT_MAX_MESSAGE_SIZE, check_producer_group
from pocketmq.client.producer.fault import DEFAULT_LATENCY_MAX, DEFAULT_NOT_AVAILABLE_DURATION
from pocketmq.remoting.codes import SerializeType

__all__ = [
    "AUTO_BATCH_MAX_BYTES",
    "AUTO_BATCH_MAX_MESSAGES",
    "ProducerArgs",
    "ProducerConfig",
    "SendAttemptHook",
]

#: ``hook(queue, error, latency_ms)`` after every attempt of every send (``error`` is ``None`` when the broker
#: answered with a stored status): what RocketMQ's ``SendMessageHook`` is used for (metrics, tracing, tests).
SendAttemptHook = Callable[[MessageQueue, BaseException | None, float], object]

#: Auto-batching bounds: messages and encoded bytes per coalesced SEND_BATCH_MESSAGE. The best of the sizes
#: tried (docs/perf/history.md, "Auto-batching bounds").
AUTO_BATCH_MAX_MESSAGES = 256
AUTO_BATCH_MAX_BYTES = 256 * 1024

_SERIALIZE_TYPES = (SerializeType.JSON, SerializeType.ROCKETMQ, SerializeType.MSGPACK)


class ProducerArgs(ClientArgs, total=False):
    """The keyword arguments of :class:`~client.producer.producer.Producer` (fields of :class:`ProducerConfig`)."""

    send_msg_timeout: float
    retry_times_when_send_failed: int
    retry_times_when_send_async_failed: int
    retry_another_broker_when_not_store_ok: bool
    send_latency_fault_enable: bool
    latency_max: Sequence[int]
    not_available_duration: Sequence[int]
    compress_over: int
    compress_level: int
    max_message_size: int
    default_topic_queue_nums: int
    send_smart_msg: bool
    max_in_flight: int
    uniq_generator: UniqIdGenerator | None
    attempt_hook: SendAttemptHook | None
    auto_batch: bool
    auto_batch_max_messages: int
    auto_batch_max_bytes: int
    enable_trace: bool
    trace_topic: str
    max_pending_requests: int


@dataclass(frozen=True, kw_only=True)
class ProducerConfig(ClientOptions):
    """A producer's settings (see :class:`~pocketmq.client.producer.producer.Producer` for what they do)."""

    #: One send's overall budget, every attempt included (s).
    send_msg_timeout: float = 3.0
    retry_times_when_send_failed: int = 2
    retry_times_when_send_async_failed: int = 2
    retry_another_broker_when_not_store_ok: bool = False
    send_latency_fault_enable: bool = True
    latency_max: Sequence[int] = DEFAULT_LATENCY_MAX
    not_available_duration: Sequence[int] = DEFAULT_NOT_AVAILABLE_DURATION
    compress_over: int = COMPRESS_OVER
    compress_level: int = COMPRESS_LEVEL
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    default_topic_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS
    #: SEND_MESSAGE_V2 (short header keys) rather than SEND_MESSAGE.
    send_smart_msg: bool = True
    #: Sends (sync and async) outstanding at most.
    max_in_flight: int = 4096
    uniq_generator: UniqIdGenerator | None = None
    #: Called after every attempt (see :data:`SendAttemptHook`); exceptions it raises are logged.
    attempt_hook: SendAttemptHook | None = None
    auto_batch: bool = True
    auto_batch_max_messages: int = AUTO_BATCH_MAX_MESSAGES
    #: Clamped to ``max_message_size``.
    auto_batch_max_bytes: int = AUTO_BATCH_MAX_BYTES
    #: Write RocketMQ message traces of every stored message to ``trace_topic`` (see :mod:`pocketmq.client.trace`).
    enable_trace: bool = False
    trace_topic: str = "RMQ_SYS_TRACE_TOPIC"
    #: Requests (``request``) waiting for their reply at most; one more fails with RequestTableFullError.
    max_pending_requests: int = 10_000

    def __post_init__(self) -> None:
        check_producer_group(self.group)
        check_positive(send_msg_timeout=self.send_msg_timeout, max_in_flight=self.max_in_flight,
                       auto_batch_max_messages=self.auto_batch_max_messages,
                       auto_batch_max_bytes=self.auto_batch_max_bytes, max_message_size=self.max_message_size,
                       compress_over=self.compress_over, max_pending_requests=self.max_pending_requests)
        if self.retry_times_when_send_failed < 0 or self.retry_times_when_send_async_failed < 0:
            raise ValueError("retry times must not be negative")
        if self.serialize_type not in _SERIALIZE_TYPES:
            raise ValueError(f"unknown serialize type {self.serialize_type}")
        object.__setattr__(self, "auto_batch_max_bytes", min(self.auto_batch_max_bytes, self.max_message_size))
        super().__post_init__()

    def _default_topic_queue_nums(self) -> int:
        return self.default_topic_queue_nums
