"""What a chaos run records: sends, deliveries, faults and the stored records read back at the end.

Plain records with times in seconds since the run started (one monotonic clock: producers, consumers and
the nemesis run in one process). The checkers (:mod:`pocketmq.chaos.checkers`) are pure functions of a
:class:`History`, so they are tested with synthetic histories, and a run's history can be dumped to JSON.

Message ids are ``p<producer>-s<stream>-<seq>``: one *stream* sends one message at a time, so within a
stream a lower sequence number was answered before a higher one was sent (what the order checker uses).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["STORED_NOT_OK", "Delivery", "FaultEvent", "History", "PopDelivery", "SendEvent", "StoredRecord",
           "TimerDelivery", "TimerSend", "parse_id"]

SEND_OK = "SEND_OK"
#: Statuses of a put stored on the master whose flush or replication wait did not succeed.
STORED_NOT_OK = frozenset({"FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"})


def parse_id(msg_id: str) -> tuple[str, int]:
    """``p0-s1-42`` -> (``p0-s1``, 42): the stream and the sequence number."""
    stream, _, seq = msg_id.rpartition("-")
    return stream, int(seq)


@dataclass(frozen=True, slots=True)
class SendEvent:
    """One application-level send (the SDK's retries inside it): ``status`` is a :class:`SendStatus` name, or
    ``FAILED`` with ``error`` (``timed_out`` when the SDK gave up on time)."""

    msg_id: str
    start: float
    end: float
    status: str
    broker: str = ""
    queue_id: int = -1
    queue_offset: int = -1
    error: str = ""
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.status == SEND_OK

    @property
    def failed(self) -> bool:
        return self.status == "FAILED"


@dataclass(frozen=True, slots=True)
class Delivery:
    """One message handed to a consumer's handler."""

    at: float
    consumer: str
    msg_id: str
    broker: str
    queue_id: int
    queue_offset: int


@dataclass(slots=True)
class FaultEvent:
    """One injected fault: ``start`` when it was injected, ``end`` when it was healed (the process restarted or
    continued, the link restored); ``skipped`` holds why a fault that was drawn could not be injected."""

    kind: str
    target: str
    start: float
    end: float = -1.0
    note: str = ""
    skipped: str = ""

    @property
    def injected(self) -> bool:
        return not self.skipped


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """A message read back from one member (``member``: the process name, ``broker-a`` or ``broker-a-s``) of
    broker group ``broker``: its position and id."""

    broker: str
    member: str
    is_master: bool
    queue_id: int
    queue_offset: int
    msg_id: str


@dataclass(frozen=True, slots=True)
class PopDelivery:
    """One message a POP consumer received (and then acked): its reconsume times say it came back."""

    at: float
    consumer: str
    msg_id: str
    reconsume_times: int


@dataclass(frozen=True, slots=True)
class TimerSend:
    """One timer message sent: due at ``due_ms`` (epoch ms, the producer's clock: same host as the brokers)."""

    msg_id: str
    start: float
    due_ms: int
    status: str


@dataclass(frozen=True, slots=True)
class TimerDelivery:
    """One timer message delivered: ``stored_ms`` is when its broker stored it in its real topic (fired)."""

    msg_id: str
    due_ms: int
    stored_ms: int

    @property
    def lateness_ms(self) -> int:
        return self.stored_ms - self.due_ms


@dataclass(slots=True)
class History:
    """Everything the checkers look at."""

    sends: list[SendEvent] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)
    faults: list[FaultEvent] = field(default_factory=list)
    stored: list[StoredRecord] = field(default_factory=list)
    #: member name -> why it could not be read (a member that could not be read hides nothing silently).
    unread: dict[str, str] = field(default_factory=dict)
    duration: float = 0.0
    #: the POP consumer group's deliveries of the same topic (RocketMQ 5)
    pop_deliveries: list[PopDelivery] = field(default_factory=list)
    #: the timer workload (RocketMQ 5)
    timer_sends: list[TimerSend] = field(default_factory=list)
    timer_deliveries: list[TimerDelivery] = field(default_factory=list)

    def dump_lines(self) -> Iterator[str]:
        """The whole history as JSON lines (``{"sends": {...}}`` ...), for a look after the run."""
        for name, items in (("fault", self.faults), ("send", self.sends), ("delivery", self.deliveries),
                            ("stored", self.stored), ("pop_delivery", self.pop_deliveries),
                            ("timer_send", self.timer_sends), ("timer_delivery", self.timer_deliveries)):
            for item in items:
                yield json.dumps({name: asdict(item)}, separators=(",", ":"))

    def to_json(self) -> dict[str, Any]:
        return {"duration": self.duration, "faults": [asdict(f) for f in self.faults], "unread": self.unread,
                "sends": len(self.sends), "deliveries": len(self.deliveries), "stored": len(self.stored),
                "pop_deliveries": len(self.pop_deliveries), "timer_sends": len(self.timer_sends),
                "timer_deliveries": len(self.timer_deliveries)}
