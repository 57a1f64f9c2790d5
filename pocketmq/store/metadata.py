"""The broker's JSON metadata files in ``<store root>/config/``, as plain data managers
the broker owns: :class:`TopicConfigTable` (``topics.json``), :class:`ConsumerOffsetTable`
(``consumerOffset.json``), :class:`SubscriptionGroupTable` (``subscriptionGroup.json``) and
:class:`DelayOffsetTable` (``delayOffset.json``).

Formats are RocketMQ's (fastjson) so the files can be moved between the two::

    topics.json            {"dataVersion":{"counter":1,"timestamp":...},
                            "topicConfigTable":{"TBW102":{"order":false,"perm":7,"readQueueNums":8,
                            "topicFilterType":"SINGLE_TAG","topicName":"TBW102","topicSysFlag":0,
                            "writeQueueNums":8}}}
    consumerOffset.json    {"offsetTable":{"topic@group":{0:12,1:9}}}
    subscriptionGroup.json {"dataVersion":{...},"subscriptionGroupTable":{"group":{"brokerId":0,...}}}
    delayOffset.json       {"offsetTable":{1:0,2:3}}

fastjson writes integer map keys unquoted, which is not JSON; the writers here do the same (RocketMQ
reads them back), and the readers accept quoted and unquoted keys. ``TopicConfig`` and ``DataVersion`` are
the model's (:mod:`pocketmq.common.topic_config`), whose JSON form is the same on disk and on the wire.

Every write is atomic: the text goes to a temporary file in the same directory, is fsynced, renamed over
the old file, and the directory is fsynced, so a kill at any moment leaves the old file or the new one,
never an empty or half-written file. ``persist()`` blocks (call it in a thread);
``persist_async()`` takes the snapshot on the event loop and writes in a thread. A failed read of the
main file falls back to RocketMQ's ``.bak`` copy when there is one.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import json
import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from pocketmq.common.files import remove_stale_temporaries, write_atomically
from pocketmq.common.logs import get_logger
from pocketmq.common.topic import AUTO_CREATE_TOPIC_KEY_TOPIC
from pocketmq.common.topic_config import DataVersion, PermName, TopicConfig

log = get_logger("pocketmq.store.metadata")

_V = TypeVar("_V")

_INTEGER_KEY = re.compile(r'"(?:[^"\\]|\\.)*"|([{,]\s*)(-?\d+)(\s*:)')


def quote_integer_keys(text: str) -> str:
    """Turn fastjson's unquoted integer keys (``{0:12}``) into JSON (``{"0":12}``); strings are left as
    they are, so a key or value that merely contains digits is untouched."""
    def repl(match: re.Match[str]) -> str:
        if match.group(1) is None:
            return match.group(0)
        return f'{match.group(1)}"{match.group(2)}"{match.group(3)}'

    return _INTEGER_KEY.sub(repl, text)


def loads_fastjson(text: str) -> Any:
    """Parse JSON that may contain unquoted integer keys."""
    return json.loads(quote_integer_keys(text))


def _int_key_object(mapping: Mapping[int, int]) -> str:
    return "{" + ",".join(f"{int(k)}:{int(v)}" for k, v in sorted(mapping.items())) + "}"


class ConfigFile:
    """A JSON file under the store's ``config`` directory, loaded and persisted atomically."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._write_lock = threading.Lock()
        self._sequence = itertools.count(1)
        self._written = 0

    def encode(self) -> str:
        """The file's text (subclasses)."""
        raise NotImplementedError

    def decode(self, text: str) -> None:
        """Replace the contents from the file's text (subclasses); raise ValueError if unusable."""
        raise NotImplementedError

    def load(self) -> bool:
        """Read the file (or its ``.bak``). False when neither exists; ValueError when they exist but
        cannot be parsed (a broker must not start over silently with empty offsets). Leftover temporary
        files of interrupted writes are removed. Blocking."""
        remove_stale_temporaries(self.path)
        found = False
        errors = []
        for candidate in (self.path, self.path + ".bak"):
            try:
                with open(candidate, encoding="utf-8") as f:
                    text = f.read()
            except FileNotFoundError:
                continue
            found = True
            if not text.strip():
                errors.append(f"{candidate} is empty")
                continue
            try:
                self.decode(text)
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                errors.append(f"{candidate}: {exc}")
                continue
            return True
        if found:
            raise ValueError("; ".join(errors))
        return False

    def persist(self) -> None:
        """Write the current contents. Blocking."""
        self._write(next(self._sequence), self.encode().encode())

    async def persist_async(self, executor: concurrent.futures.Executor | None = None) -> None:
        """Snapshot on the loop, write in a thread; a snapshot older than one already written is skipped."""
        sequence = next(self._sequence)
        data = self.encode().encode()
        await asyncio.get_running_loop().run_in_executor(executor, self._write, sequence, data)

    def _write(self, sequence: int, data: bytes) -> None:
        with self._write_lock:
            if sequence < self._written:
                return
            write_atomically(self.path, data)
            self._written = sequence


# ----------------------------------------------------------------------------------------- topics


def default_topic_config(queue_nums: int = 8) -> TopicConfig:
    """TBW102: read, write and inherit (perm 7), 8 queues."""
    return TopicConfig(AUTO_CREATE_TOPIC_KEY_TOPIC, queue_nums, queue_nums,
                       PermName.PERM_INHERIT | PermName.PERM_READ | PermName.PERM_WRITE)


class VersionedConfigTable(ConfigFile, Generic[_V]):
    """A table of named configs under ``TABLE_KEY`` with a ``DataVersion`` bumped on every change (RocketMQ's
    config managers): ``topics.json`` and ``subscriptionGroup.json``."""

    TABLE_KEY: ClassVar[str]

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.table: dict[str, _V] = self._defaults()
        self.data_version = DataVersion.now()

    def _defaults(self) -> dict[str, _V]:
        """Entries the table always holds (added after the file's own when it lacks them)."""
        return {}

    def _name(self, value: _V) -> str:
        """The key of ``value`` in the table (subclasses)."""
        raise NotImplementedError

    def _to_json(self, value: _V) -> dict[str, Any]:
        """``value``'s fastjson form (subclasses)."""
        raise NotImplementedError

    def _from_json(self, name: str, value: Mapping[str, Any]) -> _V:
        """The config stored under ``name`` (subclasses)."""
        raise NotImplementedError

    def get(self, name: str) -> _V | None:
        """The config named ``name``."""
        return self.table.get(name)

    def put(self, value: _V) -> None:
        """Add or replace a config."""
        self.table[self._name(value)] = value
        self.data_version.next_version()

    def delete(self, name: str) -> _V | None:
        """Remove a config."""
        removed = self.table.pop(name, None)
        if removed is not None:
            self.data_version.next_version()
        return removed

    def encode(self) -> str:
        return json.dumps({"dataVersion": self.data_version.to_json_dict(),
                           self.TABLE_KEY: {k: self._to_json(v) for k, v in self.table.items()}}, indent="\t")

    def decode(self, text: str) -> None:
        data = loads_fastjson(text)
        table = {name: self._from_json(name, value) for name, value in data.get(self.TABLE_KEY, {}).items()}
        for name, value in self._defaults().items():
            table.setdefault(name, value)
        self.table = table
        self.data_version = DataVersion.from_json_dict(data.get("dataVersion"))


class TopicConfigTable(VersionedConfigTable[TopicConfig]):
    """``config/topics.json``; always holds TBW102."""

    TABLE_KEY = "topicConfigTable"

    def _defaults(self) -> dict[str, TopicConfig]:
        return {AUTO_CREATE_TOPIC_KEY_TOPIC: default_topic_config()}

    def _name(self, value: TopicConfig) -> str:
        return value.topic_name

    def _to_json(self, value: TopicConfig) -> dict[str, Any]:
        return value.to_json_dict()

    def _from_json(self, name: str, value: Mapping[str, Any]) -> TopicConfig:
        return TopicConfig.from_json_dict(value, name)


# ----------------------------------------------------------------------------------------- offsets


class ConsumerOffsetTable(ConfigFile):
    """``config/consumerOffset.json``: ``topic@group -> queue id -> committed offset``."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.offset_table: dict[str, dict[int, int]] = {}

    @staticmethod
    def key(topic: str, group: str) -> str:
        """RocketMQ's ``topic@group`` key."""
        return f"{topic}@{group}"

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Remember a consumer group's offset in a queue."""
        self.offset_table.setdefault(self.key(topic, group), {})[queue_id] = offset

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, -1 if none."""
        return self.offset_table.get(self.key(topic, group), {}).get(queue_id, -1)

    def query_offsets(self, group: str, topic: str) -> dict[int, int]:
        """All committed offsets of a group in a topic."""
        return dict(self.offset_table.get(self.key(topic, group), {}))

    def topics_of_group(self, group: str) -> set[str]:
        """Topics a group has offsets in."""
        return {k.rpartition("@")[0] for k in self.offset_table if k.rpartition("@")[2] == group}

    def groups_of_topic(self, topic: str) -> set[str]:
        """Groups with offsets in a topic."""
        return {k.rpartition("@")[2] for k in self.offset_table if k.rpartition("@")[0] == topic}

    def remove_group(self, group: str) -> None:
        """Forget a group everywhere."""
        for key in [k for k in self.offset_table if k.rpartition("@")[2] == group]:
            del self.offset_table[key]

    def remove_topic(self, topic: str) -> None:
        """Forget a topic for every group."""
        for key in [k for k in self.offset_table if k.rpartition("@")[0] == topic]:
            del self.offset_table[key]

    def encode(self) -> str:
        items = ",".join(f"{json.dumps(k)}:{_int_key_object(v)}" for k, v in self.offset_table.items())
        return '{"offsetTable":{' + items + "}}"

    def decode(self, text: str) -> None:
        data = loads_fastjson(text)
        self.offset_table = {str(key): {int(q): int(o) for q, o in queues.items()}
                             for key, queues in data.get("offsetTable", {}).items()}


class DelayOffsetTable(ConfigFile):
    """``config/delayOffset.json``: delay level -> progress in SCHEDULE_TOPIC_XXXX's queue ``level-1``."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.offset_table: dict[int, int] = {}

    def encode(self) -> str:
        return '{"offsetTable":' + _int_key_object(self.offset_table) + "}"

    def decode(self, text: str) -> None:
        data = loads_fastjson(text)
        self.offset_table = {int(k): int(v) for k, v in data.get("offsetTable", {}).items()}


# ----------------------------------------------------------------------------- subscription groups


@dataclass(slots=True)
class SubscriptionGroupConfig:
    """A consumer group's settings with RocketMQ's defaults."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    #: RocketMQ 5: the group consumes in order (FIFO message groups; 5.x clients learn it from the proxy).
    consume_message_orderly: bool = False

    _FIELDS: ClassVar[tuple[tuple[str, str, type], ...]] = (
        ("group_name", "groupName", str), ("consume_enable", "consumeEnable", bool),
        ("consume_from_min_enable", "consumeFromMinEnable", bool),
        ("consume_broadcast_enable", "consumeBroadcastEnable", bool),
        ("retry_queue_nums", "retryQueueNums", int), ("retry_max_times", "retryMaxTimes", int),
        ("broker_id", "brokerId", int), ("which_broker_when_consume_slowly", "whichBrokerWhenConsumeSlowly", int),
        ("notify_consumer_ids_changed_enable", "notifyConsumerIdsChangedEnable", bool),
        ("consume_message_orderly", "consumeMessageOrderly", bool),
    )

    def to_json(self) -> dict[str, Any]:
        """fastjson form (sorted keys); ``consumeMessageOrderly`` only when set, so 4.x readers see the 4.x form."""
        return dict(sorted((name, getattr(self, attr)) for attr, name, _t in self._FIELDS
                           if attr != "consume_message_orderly" or self.consume_message_orderly))

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SubscriptionGroupConfig:
        """Parse; missing fields take the defaults, unknown ones are ignored."""
        kwargs: dict[str, Any] = {attr: kind(data[name]) for attr, name, kind in cls._FIELDS if name in data}
        return cls(**kwargs)


class SubscriptionGroupTable(VersionedConfigTable[SubscriptionGroupConfig]):
    """``config/subscriptionGroup.json``."""

    TABLE_KEY = "subscriptionGroupTable"

    def _name(self, value: SubscriptionGroupConfig) -> str:
        return value.group_name

    def _to_json(self, value: SubscriptionGroupConfig) -> dict[str, Any]:
        return value.to_json()

    def _from_json(self, name: str, value: Mapping[str, Any]) -> SubscriptionGroupConfig:
        return SubscriptionGroupConfig.from_json(value)

    def get_or_create(self, group: str) -> SubscriptionGroupConfig:
        """A group's config, created with the defaults (``autoCreateSubscriptionGroup``)."""
        config = self.table.get(group)
        if config is None:
            config = self.table[group] = SubscriptionGroupConfig(group)
            self.data_version.next_version()
        return config


def config_paths(config_dir: str) -> dict[str, str]:
    """The standard file names under a store's ``config`` directory."""
    return {name: os.path.join(config_dir, name)
            for name in ("topics.json", "consumerOffset.json", "subscriptionGroup.json", "delayOffset.json")}
