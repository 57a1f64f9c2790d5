"""A broker's topic configuration (RocketMQ's ``TopicConfig``, ``PermName``, ``TopicFilterType`` and
``DataVersion``): one definition for ``topics.json`` on disk and for the wire (registration with name
servers, GET_ALL_TOPIC_CONFIG, a slave's copy of its master's table).

JSON form (fastjson's: keys in alphabetical order), the same in ``topics.json`` and in request bodies::

    TopicConfig   {"order":false,"perm":6,"readQueueNums":8,"topicFilterType":"SINGLE_TAG","topicName":"T",
                   "topicSysFlag":0,"writeQueueNums":8}
    DataVersion   {"counter":1,"timestamp":1700000000000}

Reading is tolerant (:mod:`pocketmq.common.fields`): ``topicSynFlag`` (the spelling before 4.9.0, still the Go
client's), ``topicFilterType`` as a name or an ordinal, numbers as strings, a missing ``topicName`` taken
from the table key. A value that cannot be read raises :class:`~pocketmq.common.errors.FieldFormatError`.

RocketMQ 5's ``attributes`` (``{"message.type":"FIFO"}``) are kept; only ``message.type`` is known
(:data:`TOPIC_ATTRIBUTES`), set with UPDATE_AND_CREATE_TOPIC's ``attributes`` header (``+message.type=FIFO``, ``-key``
to remove: :func:`apply_attribute_changes`). The JSON carries ``attributes`` only when a topic has some, so 4.x
readers see the 4.x form.

The compact line of a compressed REGISTER_BROKER body (Java's ``TopicConfig.encode``) is
``"name read write perm filterType"``; it carries neither ``topicSysFlag`` nor ``order``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pocketmq.common.errors import FieldFormatError
from pocketmq.common.fields import as_bool, as_dict, as_int, as_str, pick


class PermName:
    """Permission bits of a topic and of a broker (``brokerPermission``)."""

    PERM_PRIORITY = 0x8
    PERM_READ = 0x4
    PERM_WRITE = 0x2
    PERM_INHERIT = 0x1


class TopicFilterType:
    """How a topic's messages carry tags (Java's enum; only its name travels, or its ordinal)."""

    SINGLE_TAG = "SINGLE_TAG"
    MULTI_TAG = "MULTI_TAG"
    #: In Java's declaration order, so that an ordinal indexes it.
    NAMES = (SINGLE_TAG, MULTI_TAG)

    @classmethod
    def parse(cls, value: Any) -> str:
        """The name for a name or an ordinal; ``None`` reads as ``SINGLE_TAG``."""
        if value is None:
            return cls.SINGLE_TAG
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(cls.NAMES):
            return cls.NAMES[value]
        if isinstance(value, str) and value in cls.NAMES:
            return value
        raise FieldFormatError(f"topicFilterType: unknown value {value!r:.40}")


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class DataVersion:
    """Version of a broker's topic (or subscription-group) table: a counter plus the time (ms) it last
    changed. Name servers and slaves compare versions to notice a change."""

    counter: int = 0
    timestamp: int = 0

    @classmethod
    def now(cls) -> DataVersion:
        """Counter 0 stamped with the current time: what Java's ``new DataVersion()`` makes."""
        return cls(0, _now_ms())

    def next_version(self, now_ms: int | None = None) -> DataVersion:
        """Advance in place (as Java's ``nextVersion``) and return ``self``."""
        self.timestamp = _now_ms() if now_ms is None else now_ms
        self.counter += 1
        return self

    def copy(self) -> DataVersion:
        return DataVersion(self.counter, self.timestamp)

    def to_json_dict(self) -> dict[str, Any]:
        return {"counter": self.counter, "timestamp": self.timestamp}

    @classmethod
    def from_json_dict(cls, d: Mapping[str, Any] | None) -> DataVersion:
        """Missing fields (or a missing object) read as 0; 5.x's ``stateVersion`` is ignored."""
        d = as_dict(d, "dataVersion")
        return cls(
            counter=as_int(d.get("counter"), "dataVersion.counter", 0),
            timestamp=as_int(d.get("timestamp"), "dataVersion.timestamp", 0),
        )


@dataclass(slots=True)
class TopicConfig:
    """A broker's configuration of one topic."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PermName.PERM_READ | PermName.PERM_WRITE
    topic_filter_type: str = TopicFilterType.SINGLE_TAG
    topic_sys_flag: int = 0
    order: bool = False
    attributes: dict[str, str] = field(default_factory=dict)

    def to_json_dict(self) -> dict[str, Any]:
        head = {"attributes": dict(sorted(self.attributes.items()))} if self.attributes else {}
        return {
            **head,
            "order": self.order,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicFilterType": self.topic_filter_type,
            "topicName": self.topic_name,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_json_dict(cls, d: Mapping[str, Any], name: str | None = None) -> TopicConfig:
        """``name`` (the table key) stands in for a missing ``topicName``."""
        d = as_dict(d, "topicConfig")
        return cls(
            topic_name=as_str(pick(d, "topicName") or name, "topicConfig.topicName"),
            read_queue_nums=as_int(d.get("readQueueNums"), "topicConfig.readQueueNums", 16),
            write_queue_nums=as_int(d.get("writeQueueNums"), "topicConfig.writeQueueNums", 16),
            perm=as_int(d.get("perm"), "topicConfig.perm", PermName.PERM_READ | PermName.PERM_WRITE),
            topic_filter_type=TopicFilterType.parse(d.get("topicFilterType")),
            topic_sys_flag=as_int(pick(d, "topicSysFlag", "topicSynFlag"), "topicConfig.topicSysFlag", 0),
            order=as_bool(d.get("order"), "topicConfig.order"),
            attributes={str(k): str(v)
                        for k, v in as_dict(d.get("attributes") or {}, "topicConfig.attributes").items()},
        )

    def encode_compact(self) -> str:
        """The compressed-register line ``"name read write perm filterType"``."""
        if not self.topic_name or any(c.isspace() for c in self.topic_name):
            raise ValueError(f"topic name {self.topic_name!r} cannot be written in the compressed form")
        return (
            f"{self.topic_name} {self.read_queue_nums} {self.write_queue_nums} {self.perm} "
            f"{self.topic_filter_type}"
        )

    @classmethod
    def decode_compact(cls, line: str) -> TopicConfig:
        """Parse :meth:`encode_compact` output; fields after the fifth (5.x attributes) are ignored."""
        fields = line.split(" ")
        if len(fields) < 5 or not fields[0]:
            raise FieldFormatError(f"compressed topic config: expected 5 fields, got {line!r:.80}")
        return cls(
            topic_name=fields[0],
            read_queue_nums=as_int(fields[1], "topic readQueueNums"),
            write_queue_nums=as_int(fields[2], "topic writeQueueNums"),
            perm=as_int(fields[3], "topic perm"),
            topic_filter_type=TopicFilterType.parse(fields[4]),
        )


TOPIC_ATTRIBUTES: dict[str, frozenset[str]] = {
    "message.type": frozenset({"UNSPECIFIED", "NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED"}),
}
"""Topic attributes a broker accepts and their values (RocketMQ 5's ``TopicAttributes``; NORMAL when unset)."""


def apply_attribute_changes(current: Mapping[str, str], changes: str | None) -> dict[str, str]:
    """``current`` with RocketMQ's ``AttributeParser`` changes applied: ``+key=value`` sets, ``-key`` removes, items
    comma-separated. Raises :class:`~pocketmq.common.errors.FieldFormatError` for an unknown key or value."""
    result = dict(current)
    for item in (changes or "").split(","):
        item = item.strip()
        if not item:
            continue
        sign, body = item[0], item[1:]
        key, sep, value = body.partition("=")
        if sign not in "+-" or not key or (sign == "+") != bool(sep):
            raise FieldFormatError(f"attribute {item!r}: expected +key=value or -key")
        if key not in TOPIC_ATTRIBUTES:
            raise FieldFormatError(f"unsupported key: {key}")
        if sign == "-":
            result.pop(key, None)
        elif value not in TOPIC_ATTRIBUTES[key]:
            raise FieldFormatError(f"value {value!r} of {key} is not one of {', '.join(sorted(TOPIC_ATTRIBUTES[key]))}")
        else:
            result[key] = value
    return result
