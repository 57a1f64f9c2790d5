"""FIFO message groups on the producer side: every message of a group goes to one queue, chosen as RocketMQ 5's
proxy chooses it (``SendMessageActivity.SendMessageQueueSelector``): Guava's ``Hashing.consistentHash`` of the
group's Java ``String.hashCode()`` over the topic's writable queues sorted by (topic, broker name, queue id). So a
group keeps its queue while the queues do not change, and moves to as few other queues as possible when they do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pocketmq.client.core.message import Message, MessageQueue
from pocketmq.common.message import MessageConst, java_hash

__all__ = ["consistent_hash", "message_group_queue", "select_by_message_group"]

_MASK64 = (1 << 64) - 1
_LCG_MULTIPLIER = 2862933555777941757
_TWO_TO_31 = float(1 << 31)


def consistent_hash(value: int, buckets: int) -> int:
    """Guava's ``Hashing.consistentHash(long, int)`` (Lamping and Veach's jump hash with its linear congruential
    generator), bit for bit: ``value`` is a Java long (a negative int sign-extended)."""
    if buckets <= 0:
        raise ValueError("buckets must be positive")
    state = value & _MASK64
    candidate = 0
    while True:
        state = (_LCG_MULTIPLIER * state + 1) & _MASK64
        jump = ((state >> 33) + 1) / _TWO_TO_31
        following = int((candidate + 1) / jump)
        if 0 <= following < buckets:
            candidate = following
        else:
            return candidate


def message_group_queue(queues: Sequence[MessageQueue], group: str) -> MessageQueue:
    """The queue of a message group among ``queues`` (the topic's writable queues, any order)."""
    ordered = sorted(queues)
    return ordered[consistent_hash(java_hash(group), len(ordered))]


def select_by_message_group(queues: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    """A :data:`~pocketmq.client.producer.send_loop.MessageQueueSelector` for messages with a message group."""
    return message_group_queue(queues, msg.properties[MessageConst.PROPERTY_SHARDING_KEY])
