"""The broker's ``config/`` files, kept by the store's metadata tables (one atomic writer, one format).

* topics: :class:`~pocketmq.broker.topic_manager.TopicConfigManager` owns the live table of the model's
  :class:`~pocketmq.common.topic_config.TopicConfig`; :func:`load_topics` reads it through the store's
  :class:`~pocketmq.store.metadata.TopicConfigTable` (``topics.json``) and replays the changes journalled since
  (:mod:`pocketmq.broker.config_journal`, which writes both);
* subscription groups: the store's table, with bounds on what clients can create and the same journal;
* consumer offsets and delay offsets: the store's tables, extended here with the broker's needs (dirty
  tracking for the 5 s persist loop, bounds on what clients can create, merge by maximum for slaves).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from typing import Any

from pocketmq.broker.config_journal import JOURNAL_SUFFIX, OLD_SUFFIX, ConfigJournal, replay
from pocketmq.common.topic_config import DataVersion, TopicConfig
from pocketmq.remoting.route import TopicConfigSerializeWrapper
from pocketmq.store.metadata import (
    ConsumerOffsetTable,
    DelayOffsetTable,
    SubscriptionGroupConfig,
    SubscriptionGroupTable,
    TopicConfigTable,
)

#: Bounds on what clients can make the broker remember (every commit or pull may name a new key).
MAX_OFFSET_KEYS = 1_000_000
MAX_GROUPS = 100_000


@dataclass(slots=True)
class StoredTopics:
    topics: list[TopicConfig] = field(default_factory=list)
    data_version: DataVersion | None = None


def load_topics(path: str) -> StoredTopics:
    """Blocking: ``topics.json`` and the changes journalled since, as registration-shaped configs."""
    table = TopicConfigTable(path)
    found = table.load()
    changed = False
    for entry in replay(path, table.data_version if found else DataVersion(-1, 0), _topic_name):
        if entry.value is None:
            table.table.pop(entry.name, None)
        else:
            table.table[entry.name] = TopicConfig.from_json_dict(entry.value, entry.name)
        table.data_version = entry.version
        changed = True
    if not found and not changed:
        return StoredTopics()
    return StoredTopics(list(table.table.values()), table.data_version)


def save_topics(path: str, wrapper: TopicConfigSerializeWrapper) -> None:
    """Blocking: write ``topics.json`` whole, as the only truth (its journal, if any, goes): for offline tools that
    prepare a store; a running broker journals its changes instead."""
    table = TopicConfigTable(path)
    table.table = dict(wrapper.topic_config_table)
    table.data_version = wrapper.data_version.copy()
    table.persist()
    for stale in (path + JOURNAL_SUFFIX, path + OLD_SUFFIX):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(stale)


def _topic_name(value: dict[str, object]) -> str:
    return str(value.get("topicName"))


def _group_name(value: dict[str, object]) -> str:
    return str(value.get("groupName"))


class ConsumerOffsetManager(ConsumerOffsetTable):
    """Committed consumer offsets (``topic@group → {queue → offset}``) with change tracking."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.dirty = False

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        queues = self.offset_table.get(self.key(topic, group))
        if queues is None and len(self.offset_table) >= MAX_OFFSET_KEYS:
            raise OverflowError(f"more than {MAX_OFFSET_KEYS} topic@group offset keys")
        if queues is None or queues.get(queue_id) != offset:
            super().commit_offset(group, topic, queue_id, offset)
            self.dirty = True

    def remove_group(self, group: str) -> None:
        before = len(self.offset_table)
        super().remove_group(group)
        self.dirty = self.dirty or len(self.offset_table) != before

    def reset_offsets(self, group: str, topic: str, offsets: dict[int, int]) -> None:
        """Set a group's offsets in ``topic`` (an admin's reset: lower offsets are taken too)."""
        for queue_id, offset in offsets.items():
            super().commit_offset(group, topic, queue_id, offset)
        self.dirty = True

    def merge_max(self, other: dict[str, dict[int, int]]) -> None:
        """Take ``other``'s offsets where they are ahead (a slave that served consumers, apache/rocketmq#1094)."""
        for key, queues in other.items():
            mine = self.offset_table.setdefault(key, {})
            for queue_id, offset in queues.items():
                if offset > mine.get(queue_id, -1):
                    mine[queue_id] = offset
                    self.dirty = True


class SubscriptionGroupManager(SubscriptionGroupTable):
    """Consumer group configs, auto-created with RocketMQ's defaults when enabled. Every change goes to
    :attr:`journal` (``subscriptionGroup.json`` and its journal, :mod:`pocketmq.broker.config_journal`)."""

    def __init__(self, path: str, *, auto_create: bool) -> None:
        super().__init__(path)
        self.auto_create = auto_create
        self.journal: ConfigJournal[SubscriptionGroupConfig] = ConfigJournal(
            path, self.TABLE_KEY, table=lambda: self.table, version=lambda: self.data_version,
            to_json=SubscriptionGroupConfig.to_json)

    def load(self) -> bool:
        """``subscriptionGroup.json`` and the changes journalled since. Blocking."""
        found = super().load()
        for entry in replay(self.path, self.data_version if found else DataVersion(-1, 0), _group_name):
            if entry.value is None:
                self.table.pop(entry.name, None)
            else:
                self.table[entry.name] = SubscriptionGroupConfig.from_json(entry.value)
            self.data_version = entry.version
            found = True
        return found

    def put(self, value: SubscriptionGroupConfig) -> None:
        super().put(value)
        self.journal.put(self.data_version, value.group_name, value)

    def delete(self, name: str) -> SubscriptionGroupConfig | None:
        removed = super().delete(name)
        if removed is not None:
            self.journal.delete(self.data_version, name)
        return removed

    def replace_from(self, text: str) -> None:
        """A slave takes its master's table (GET_ALL_SUBSCRIPTIONGROUP_CONFIG's body) when its version moved."""
        before = (self.data_version.counter, self.data_version.timestamp)
        self.decode(text)
        if (self.data_version.counter, self.data_version.timestamp) != before:
            self.journal.rewrite()

    def update(self, config: SubscriptionGroupConfig) -> None:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: create or replace (journalled: the version moves)."""
        if config.group_name not in self.table and len(self.table) >= MAX_GROUPS:
            raise OverflowError(f"more than {MAX_GROUPS} subscription groups")
        self.put(config)

    def find_or_create(self, group: str) -> SubscriptionGroupConfig | None:
        config = self.get(group)
        if config is None and self.auto_create and len(self.table) < MAX_GROUPS:
            config = SubscriptionGroupConfig(group)
            self.put(config)
        return config


class DelayOffsets(DelayOffsetTable):
    """Progress of the schedule service per delay level, with change tracking."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.dirty = False

    def advance(self, level: int, offset: int) -> None:
        if self.offset_table.get(level) != offset:
            self.offset_table[level] = offset
            self.dirty = True


class OffsetFiles:
    """Writes the changed offset tables. A file the disk will not take (full) stays changed for the next round,
    and the others are still written: the failure is logged once, and again when the file is written."""

    def __init__(self, log: Any, *tables: ConsumerOffsetManager | DelayOffsets) -> None:
        self.log = log
        self.tables = tables
        self.failing: set[str] = set()

    def persist(self, force: bool = False) -> None:
        """Blocking: run it in a thread."""
        for table in self.tables:
            if force or table.dirty:
                table.dirty = False  # a change made while the file is written marks it again
                self._write(table)

    def _write(self, table: ConsumerOffsetManager | DelayOffsets) -> None:
        try:
            table.persist()
        except OSError as exc:
            table.dirty = True
            if table.path not in self.failing:
                self.failing.add(table.path)
                self.log.error("offsets_not_persisted", path=table.path, error=str(exc))
            return
        if table.path in self.failing:
            self.failing.discard(table.path)
            self.log.info("offsets_persisted_again", path=table.path)


def config_path(config_dir: str, name: str) -> str:
    return os.path.join(config_dir, name)
