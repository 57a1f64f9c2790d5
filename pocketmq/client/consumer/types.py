"""The push consumer's defaults, what a handler returns (:class:`ConsumeResult`) and the retry delay rule.

The heartbeat vocabulary (:class:`MessageModel`, :class:`ConsumeType`, :class:`ConsumeFromWhere`) is the model's
(:mod:`common.consumer`), and so are the retry and DLQ topic names (:mod:`pocketmq.common.topic`) and the delay levels'
parser (:func:`pocketmq.common.config.parse_delay_levels`). A retried message gets level ``3 + reconsume_times``
(10 s, 30 s, 1 m, ...).
"""

from __future__ import annotations

import enum

from pocketmq.common.consumer import ConsumeFromWhere, ConsumeType, MessageModel

__all__ = [
    "CONSUME_CONCURRENTLY_MAX_SPAN",
    "DEFAULT_MAX_RECONSUME_TIMES",
    "PULL_BATCH_SIZE",
    "PULL_THRESHOLD_FOR_QUEUE",
    "PULL_THRESHOLD_SIZE_FOR_QUEUE",
    "ConsumeFromWhere",
    "ConsumeResult",
    "ConsumeType",
    "MessageModel",
    "delay_level_for_retry",
]

# Push consumer defaults (DefaultMQPushConsumer).
PULL_BATCH_SIZE = 32
PULL_THRESHOLD_FOR_QUEUE = 1000
PULL_THRESHOLD_SIZE_FOR_QUEUE = 100 * 1024 * 1024
CONSUME_CONCURRENTLY_MAX_SPAN = 2000
#: ``maxReconsumeTimes = -1`` means this many for a concurrent consumer.
DEFAULT_MAX_RECONSUME_TIMES = 16
#: The delay level a first retry gets is ``RETRY_DELAY_LEVEL_BASE + reconsume_times`` (level 3 = 10 s).
RETRY_DELAY_LEVEL_BASE = 3



class ConsumeResult(enum.Enum):
    """What a handler returns. An exception counts as RECONSUME_LATER. In orderly mode RECONSUME_LATER
    means Java's ``SUSPEND_CURRENT_QUEUE_A_MOMENT``: the same messages again after a pause."""

    SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


# -- delay levels ----------------------------------------------------------------------------------------


DEFAULT_POP_RETRY_DELAYS = (10.0, 30.0, 60.0, 120.0, 180.0, 240.0, 300.0, 360.0, 420.0, 480.0, 540.0, 600.0,
                            1200.0, 1800.0, 3600.0, 7200.0)
"""A POP consumer's retry schedule (RocketMQ's delay levels 3 to 18, s): retry n waits ``delays[min(n, 15)]``."""


def delay_level_for_retry(reconsume_times: int) -> int:
    """The delay level the broker uses for a send-back with delay level 0 (``3 + reconsume_times``)."""
    return RETRY_DELAY_LEVEL_BASE + reconsume_times
