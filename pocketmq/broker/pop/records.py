"""The records POP keeps in the revive topic ``rmq_sys_REVIVE_LOG_<cluster>`` (RocketMQ's ``PopCheckPoint``,
``AckMsg`` and ``BatchAckMsg``), and the POP state snapshot. Each is one message of the commit log whose body is
fastjson-style JSON (compact, keys sorted) under RocketMQ's short keys; the message's ``TAGS`` says which.

Check point (tag ``ck``), one per queue a pop read from::

    {"bn":broker,"c":group,"d":[0,1,3],"it":invisibleMs,"n":3,"pt":popTimeMs,"q":queueId,"so":startOffset,
     "t":topic}            (+ "o":1 for a FIFO pop; "d" are the popped offsets minus startOffset)

Ack (tag ``ack``) and batch ack (tag ``bAck``; ``"aol":[offsets]`` instead of ``"ao"``)::

    {"ao":offset,"bn":broker,"c":group,"pt":popTimeMs,"q":queueId,"so":startOffset,"t":topic}

An ack names its check point by (topic, group, queue, startOffset, popTime). Unlike RocketMQ, PocketMQ writes
these records at once (not as timer messages delivered near the deadline), and a change of invisible time
writes only the new check point: a later check point for a message takes it over (``broker.pop.state``).

State snapshot (tag ``snapshot``, in queue 0 of ``rmq_sys_POP_STATE_<cluster>``)::

    {"po":{"topic@group":{"queueId":popOffset}},"ro":[reviveOffset per revive queue],"t":timeMs}

Pure: no I/O. The keys RocketMQ spells in full (``ackOffset``, ``startOffset``...) are read as well.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from json.encoder import encode_basestring
from typing import Any

from pocketmq.common.pop import ACK_TAG, BATCH_ACK_TAG, CK_TAG, PopFormatError

SNAPSHOT_TAG = "snapshot"
POP_STATE_TOPIC_PREFIX = "rmq_sys_POP_STATE_"


def pop_state_topic(cluster_name: str) -> str:
    """The topic of the POP state snapshots of a cluster's brokers (one queue)."""
    return POP_STATE_TOPIC_PREFIX + cluster_name


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()


def _get(d: dict[str, Any], short: str, long: str, default: Any = None) -> Any:
    if short in d:
        return d[short]
    if long in d:
        return d[long]
    if default is not None:
        return default
    raise KeyError(short)


@dataclass(slots=True)
class PopCheckPoint:
    """The messages one pop handed out from one queue (see the module docstring)."""

    topic: str
    group: str
    queue_id: int
    start_offset: int
    pop_time: int
    invisible_time: int
    broker_name: str
    offsets: list[int]
    order: bool = False

    @property
    def deadline(self) -> int:
        """When the messages become visible again unless acked (RocketMQ's ``reviveTime``)."""
        return self.pop_time + self.invisible_time

    @property
    def key(self) -> tuple[str, str, int, int, int]:
        """What an ack names it by."""
        return self.topic, self.group, self.queue_id, self.start_offset, self.pop_time

    def encode(self) -> bytes:
        # Written once per pop: formatted directly, the bytes json.dumps(sort_keys=True) gives (tested).
        start = self.start_offset
        diffs = ",".join([str(o - start) for o in self.offsets])
        order = '"o":1,' if self.order else ""
        return (f'{{"bn":{encode_basestring(self.broker_name)},"c":{encode_basestring(self.group)},'
                f'"d":[{diffs}],"it":{self.invisible_time},"n":{len(self.offsets)},{order}"pt":{self.pop_time},'
                f'"q":{self.queue_id},"so":{start},"t":{encode_basestring(self.topic)}}}').encode()

    @classmethod
    def decode(cls, raw: bytes | str) -> PopCheckPoint:
        d = _object(raw, "check point")
        try:
            start = int(_get(d, "so", "startOffset"))
            diffs = d.get("d", d.get("queueOffsetDiff"))
            if diffs:
                offsets = [start + int(x) for x in diffs]
            else:  # RocketMQ's check points before the offset diffs: num consecutive messages
                offsets = [start + i for i in range(int(_get(d, "n", "num", 0)))]
            return cls(str(_get(d, "t", "topic")), str(_get(d, "c", "cid")), int(_get(d, "q", "queueId")), start,
                       int(_get(d, "pt", "popTime")), int(_get(d, "it", "invisibleTime")),
                       str(_get(d, "bn", "brokerName", "")), offsets, bool(d.get("o", 0)))
        except (KeyError, TypeError, ValueError) as exc:
            raise PopFormatError(f"bad check point {d!r}: {exc}") from None


@dataclass(slots=True)
class AckMsg:
    """Acked offsets of one check point (one for ``ack``, several for ``bAck``)."""

    topic: str
    group: str
    queue_id: int
    start_offset: int
    pop_time: int
    broker_name: str
    offsets: list[int] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str, int, int, int]:
        return self.topic, self.group, self.queue_id, self.start_offset, self.pop_time

    @property
    def tag(self) -> str:
        return ACK_TAG if len(self.offsets) == 1 else BATCH_ACK_TAG

    def encode(self) -> bytes:
        # Written once per ack: formatted directly, the bytes json.dumps(sort_keys=True) gives (tested).
        acked = (f'"ao":{self.offsets[0]}' if len(self.offsets) == 1
                 else f'"aol":[{",".join([str(o) for o in self.offsets])}]')
        return (f'{{{acked},"bn":{encode_basestring(self.broker_name)},"c":{encode_basestring(self.group)},'
                f'"pt":{self.pop_time},"q":{self.queue_id},"so":{self.start_offset},'
                f'"t":{encode_basestring(self.topic)}}}').encode()

    @classmethod
    def decode(cls, raw: bytes | str) -> AckMsg:
        d = _object(raw, "ack")
        try:
            listed = d.get("aol", d.get("ackOffsetList"))
            offsets = [int(o) for o in listed] if listed is not None else [int(_get(d, "ao", "ackOffset"))]
            return cls(str(_get(d, "t", "topic")), str(_get(d, "c", "consumerGroup")),
                       int(_get(d, "q", "queueId")), int(_get(d, "so", "startOffset")),
                       int(_get(d, "pt", "popTime")), str(_get(d, "bn", "brokerName", "")), offsets)
        except (KeyError, TypeError, ValueError) as exc:
            raise PopFormatError(f"bad ack {d!r}: {exc}") from None


@dataclass(slots=True)
class PopSnapshot:
    """Where replay starts: per revive queue the first record still needed, per (topic, group) queue the pop
    offset below which every message is settled or covered by a record after those."""

    revive_offsets: list[int]
    pop_offsets: dict[tuple[str, str, int], int]
    time: int = 0

    def encode(self) -> bytes:
        grouped: dict[str, dict[str, int]] = {}
        for (topic, group, queue_id), offset in self.pop_offsets.items():
            grouped.setdefault(f"{topic}@{group}", {})[str(queue_id)] = offset
        return _dumps({"po": grouped, "ro": list(self.revive_offsets), "t": self.time})

    @classmethod
    def decode(cls, raw: bytes | str) -> PopSnapshot:
        d = _object(raw, "snapshot")
        try:
            pop_offsets = {}
            for key, queues in d["po"].items():
                topic, _, group = str(key).rpartition("@")
                for queue_id, offset in queues.items():
                    pop_offsets[(topic, group, int(queue_id))] = int(offset)
            return cls([int(o) for o in d["ro"]], pop_offsets, int(d.get("t", 0)))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise PopFormatError(f"bad POP snapshot: {exc}") from None


def _object(raw: bytes | str, what: str) -> dict[str, Any]:
    try:
        d = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise PopFormatError(f"a {what} record is not JSON: {exc}") from None
    if not isinstance(d, dict):
        raise PopFormatError(f"a {what} record is not an object")
    return d


RECORD_TAGS = (CK_TAG, ACK_TAG, BATCH_ACK_TAG)
