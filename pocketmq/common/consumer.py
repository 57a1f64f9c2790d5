"""The consumer vocabulary that HEART_BEAT bodies carry (RocketMQ's ``common.protocol.heartbeat.MessageModel`` and
``ConsumeType``, and ``common.consumer.ConsumeFromWhere``), shared by the SDK that sends it and the broker that
reads it.

A member's value is its Java enum name; members are declared in Java's order, so a member's position is its
Java ordinal (what the C++ client sends instead of the name). :meth:`WireEnum.from_wire` reads
either strictly; the broker, which must accept whatever a client sends, falls back to a default instead
(``broker.client_manager``).
"""

from __future__ import annotations

import enum
from typing import Self

__all__ = ["ConsumeFromWhere", "ConsumeType", "MessageModel", "WireEnum"]


class WireEnum(enum.Enum):
    """An enum whose value is the Java name, declared in Java's order (position = ordinal)."""

    @classmethod
    def from_ordinal(cls, ordinal: int) -> Self | None:
        """The member at Java ordinal ``ordinal``; None out of range."""
        members = list(cls)
        return members[ordinal] if 0 <= ordinal < len(members) else None

    @classmethod
    def from_wire(cls, raw: object) -> Self:
        """The member for a Java enum name, a member name or an ordinal (``"CLUSTERING"``, ``1``, ``"1"``);
        ``ValueError`` for anything else."""
        for member in cls:
            if raw == member.value or raw == member.name:
                return member
        try:
            member_at = cls.from_ordinal(int(str(raw)))
        except ValueError:
            member_at = None
        if member_at is None:
            raise ValueError(f"{raw!r} is not a {cls.__name__}")
        return member_at


class MessageModel(WireEnum):
    """CLUSTERING shares a group's queues among its consumers; BROADCASTING gives every consumer all."""

    BROADCASTING = "BROADCASTING"
    CLUSTERING = "CLUSTERING"


class ConsumeType(WireEnum):
    """A pull consumer consumes ACTIVELY, a push consumer PASSIVELY."""

    CONSUME_ACTIVELY = "CONSUME_ACTIVELY"
    CONSUME_PASSIVELY = "CONSUME_PASSIVELY"
    #: RocketMQ 5: a consumer that pops (``SimpleConsumer``, a push consumer in POP mode).
    CONSUME_POP = "CONSUME_POP"


class ConsumeFromWhere(WireEnum):
    """Where a group with no committed offset for a queue starts.

    LAST_OFFSET: the queue's max offset (but see QUERY_CONSUMER_OFFSET's young-queue rule;
    retry topics start at 0); FIRST_OFFSET: offset 0; TIMESTAMP: the offset found for the consumer's
    ``consume_timestamp``. The three members between them are deprecated in Java and handled as LAST_OFFSET
    by 4.x; they exist so that their names and ordinals read back as the client sent them.
    """

    LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST"
    MIN_OFFSET = "CONSUME_FROM_MIN_OFFSET"
    MAX_OFFSET = "CONSUME_FROM_MAX_OFFSET"
    FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    TIMESTAMP = "CONSUME_FROM_TIMESTAMP"

    @property
    def java_name(self) -> str:
        """The Java enum name (the value)."""
        return str(self.value)
