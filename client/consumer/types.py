"""Consumer enums, defaults and delay levels (reference §8); the retry and DLQ topic names are the model's
(:mod:`common.topic`).

The enums' values are the Java enum names that HEART_BEAT bodies carry; :meth:`from_wire` also accepts the
ordinals some third-party clients send instead (reference §12).

Delay levels (``messageDelayLevel``): a space-separated list whose n-th item is the delay of level n, each
an integer followed by a unit ``s``, ``m``, ``h`` or ``d`` (RocketMQ's units) or ``ms`` (ours, for tests
with short levels). A retried message gets level ``3 + reconsume_times`` (10 s, 30 s, 1 m, ...).
"""

from __future__ import annotations

import enum
import re
from typing import Self

__all__ = [
    "CONSUME_CONCURRENTLY_MAX_SPAN",
    "DEFAULT_DELAY_LEVELS",
    "DEFAULT_MAX_RECONSUME_TIMES",
    "PULL_BATCH_SIZE",
    "PULL_THRESHOLD_FOR_QUEUE",
    "PULL_THRESHOLD_SIZE_FOR_QUEUE",
    "ConsumeFromWhere",
    "ConsumeResult",
    "ConsumeType",
    "DelayLevelError",
    "MessageModel",
    "delay_level_for_retry",
    "parse_delay_levels",
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

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"


class _WireEnum(enum.Enum):
    """An enum whose value is the Java name; ordinals follow Java's declaration order."""

    @classmethod
    def _ordinals(cls) -> dict[int, Self]:
        return {}

    @classmethod
    def from_wire(cls, raw: object) -> Self:
        """The member for a Java enum name or ordinal (``"CLUSTERING"`` or ``1``, ``"1"``)."""
        for member in cls:
            if raw == member.value or raw == member.name:
                return member
        try:
            return cls._ordinals()[int(str(raw))]
        except (KeyError, ValueError):
            raise ValueError(f"{raw!r} is not a {cls.__name__}") from None


class MessageModel(_WireEnum):
    """CLUSTERING shares a group's queues among its consumers; BROADCASTING gives every consumer all."""

    BROADCASTING = "BROADCASTING"
    CLUSTERING = "CLUSTERING"

    @classmethod
    def _ordinals(cls) -> dict[int, Self]:
        return {0: cls.BROADCASTING, 1: cls.CLUSTERING}


class ConsumeType(_WireEnum):
    """A pull consumer consumes ACTIVELY, a push consumer PASSIVELY."""

    CONSUME_ACTIVELY = "CONSUME_ACTIVELY"
    CONSUME_PASSIVELY = "CONSUME_PASSIVELY"

    @classmethod
    def _ordinals(cls) -> dict[int, Self]:
        return {0: cls.CONSUME_ACTIVELY, 1: cls.CONSUME_PASSIVELY}


class ConsumeFromWhere(_WireEnum):
    """Where a group with no committed offset for a queue starts.

    LAST_OFFSET: the queue's max offset (but see QUERY_CONSUMER_OFFSET's young-queue rule, reference §2.4;
    retry topics start at 0); FIRST_OFFSET: offset 0; TIMESTAMP: the offset found for the consumer's
    ``consume_timestamp``. Values are the Java names; :attr:`java_name` says so explicitly.
    """

    LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    TIMESTAMP = "CONSUME_FROM_TIMESTAMP"

    @property
    def java_name(self) -> str:
        return str(self.value)

    @classmethod
    def _ordinals(cls) -> dict[int, Self]:
        # Java: LAST_OFFSET 0, LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST 1, MIN_OFFSET 2, MAX_OFFSET 3 (all
        # deprecated, handled as LAST_OFFSET by 4.x), FIRST_OFFSET 4, TIMESTAMP 5.
        return {0: cls.LAST_OFFSET, 1: cls.LAST_OFFSET, 2: cls.LAST_OFFSET, 3: cls.LAST_OFFSET,
                4: cls.FIRST_OFFSET, 5: cls.TIMESTAMP}  # fmt: skip


class ConsumeResult(enum.Enum):
    """What a handler returns. An exception counts as RECONSUME_LATER. In orderly mode RECONSUME_LATER
    means Java's ``SUSPEND_CURRENT_QUEUE_A_MOMENT``: the same messages again after a pause."""

    SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


# -- delay levels ----------------------------------------------------------------------------------------


def delay_level_for_retry(reconsume_times: int) -> int:
    """The delay level the broker uses for a send-back with delay level 0 (``3 + reconsume_times``)."""
    return RETRY_DELAY_LEVEL_BASE + reconsume_times


class DelayLevelError(ValueError):
    """A ``messageDelayLevel`` string has an item that is not ``<integer><unit>``."""


_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_LEVEL_ITEM = re.compile(r"([0-9]+)(ms|s|m|h|d)")


def parse_delay_levels(text: str = DEFAULT_DELAY_LEVELS) -> list[int]:
    """Delays in ms, index 0 for level 1: ``"1s 5s 10s"`` → ``[1000, 5000, 10000]``.

    Raises :class:`DelayLevelError` for an empty string or an item that is not a non-negative integer
    followed by ``ms``, ``s``, ``m``, ``h`` or ``d``.
    """
    items = text.split()
    if not items:
        raise DelayLevelError("no delay level given")
    delays: list[int] = []
    for item in items:
        match = _LEVEL_ITEM.fullmatch(item)
        if match is None:
            raise DelayLevelError(f"delay level {item!r} is not <integer><ms|s|m|h|d>")
        delays.append(int(match.group(1)) * _UNIT_MS[match.group(2)])
    return delays
