"""``TopicConfigManager``: the broker's topics, their auto-creation, versioning and persistence.

Topics live in memory as the model's :class:`~pocketmq.common.topic_config.TopicConfig` (the shape registered with
name servers, and written to topics.json); every change bumps the :class:`~pocketmq.common.topic_config.DataVersion`,
goes to :attr:`TopicConfigManager.journal` (one line, :mod:`pocketmq.broker.config_journal`) and, for a created or
changed topic (and a table replaced as a whole), to ``on_change``, which the controller wires to "register with
every name server": that topic alone, or the whole table. A deletion is not registered (RocketMQ neither: an
administrator deletes the topic from the name servers too). A config in the table is never changed in place (a
change puts a new one), so a shallow copy of the table is a snapshot. Auto-creation follows
RocketMQ: a send to an unknown topic names a default topic (``TBW102``) whose perm has the
INHERIT bit; the new topic gets ``min(client queue nums, default write queue nums)`` queues and the
default's perm without INHERIT.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

from pocketmq.broker.config_journal import ConfigJournal
from pocketmq.common.logs import get_logger
from pocketmq.common.topic import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    RMQ_SYS_OFFSET_MOVED_EVENT,
    RMQ_SYS_SCHEDULE_TOPIC,
    RMQ_SYS_SELF_TEST_TOPIC,
    is_retry_topic,
    reply_topic,
)
from pocketmq.common.topic_config import DataVersion, PermName, TopicConfig
from pocketmq.remoting.route import TopicConfigSerializeWrapper

log = get_logger("pocketmq.broker.topic_manager")

#: A broker that accepted topics without limit from the network could be made to exhaust memory and disk.
MAX_TOPICS = 100_000
_READ_WRITE = PermName.PERM_READ | PermName.PERM_WRITE


class TopicConfigManager:
    """Topic configs of one broker; ``on_change(config)`` runs after a topic is created or changed,
    ``on_change(None)`` after the whole table was replaced. ``path`` is ``topics.json`` (the journal writes it)."""

    def __init__(
        self,
        *,
        cluster_name: str,
        broker_name: str,
        default_topic_queue_nums: int,
        auto_create_topic_enable: bool,
        schedule_queue_nums: int,
        on_change: Callable[[TopicConfig | None], None] | None = None,
        path: str = "topics.json",
    ) -> None:
        self.auto_create_topic_enable = auto_create_topic_enable
        self.on_change = on_change
        self.data_version = DataVersion()
        self.table: dict[str, TopicConfig] = {}
        self.journal: ConfigJournal[TopicConfig] = ConfigJournal(
            path, "topicConfigTable", table=lambda: self.table, version=lambda: self.data_version,
            to_json=TopicConfig.to_json_dict)
        self._system = self._system_topics(cluster_name, broker_name, default_topic_queue_nums, schedule_queue_nums)

    def _system_topics(self, cluster: str, broker: str, default_nums: int, schedule_nums: int) -> list[TopicConfig]:
        rw = _READ_WRITE
        inherit = PermName.PERM_INHERIT
        topics = [
            TopicConfig(RMQ_SYS_SELF_TEST_TOPIC, 1, 1, rw),
            TopicConfig(RMQ_SYS_OFFSET_MOVED_EVENT, 1, 1, rw),
            TopicConfig(RMQ_SYS_SCHEDULE_TOPIC, schedule_nums, schedule_nums, rw),
            TopicConfig(cluster, 16, 16, rw | inherit),
            TopicConfig(broker, 1, 1, rw | inherit),
            TopicConfig(reply_topic(cluster), 1, 1, rw),  # where replies are sent (request-reply)
        ]
        if self.auto_create_topic_enable:
            topics.append(TopicConfig(AUTO_CREATE_TOPIC_KEY_TOPIC, default_nums, default_nums, rw | inherit))
        return topics

    def load(self, stored: Iterable[TopicConfig], version: DataVersion | None) -> None:
        """Install topics read from topics.json, then the system topics that are missing."""
        for config in stored:
            self.table[config.topic_name] = config
        for config in self._system:
            self.table.setdefault(config.topic_name, config)
        if version is not None:
            self.data_version = version

    # -- queries -------------------------------------------------------------------------------------------

    def get(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def wrapper(self) -> TopicConfigSerializeWrapper:
        """A snapshot to register with name servers (a shallow copy: the configs are shared, never changed)."""
        return TopicConfigSerializeWrapper(dict(self.table), self.data_version.copy())

    # -- changes -------------------------------------------------------------------------------------------

    def select_or_create_for_send(self, topic: str, default_topic: str, client_queue_nums: int,
                                  remote_addr: str) -> TopicConfig | None:
        """The topic's config, auto-creating it from ``default_topic`` when RocketMQ would."""
        config = self.table.get(topic)
        if config is not None:
            return config
        if is_retry_topic(topic):
            return self.create_system_topic(topic, 1, _READ_WRITE)
        default = self.table.get(default_topic)
        if default is None or not default.perm & PermName.PERM_INHERIT:
            return None
        if default_topic == AUTO_CREATE_TOPIC_KEY_TOPIC and not self.auto_create_topic_enable:
            return None
        nums = max(1, min(client_queue_nums, default.write_queue_nums))
        config = TopicConfig(topic, nums, nums, default.perm & ~PermName.PERM_INHERIT)
        log.info("topic_auto_created", topic=topic, queues=nums, by=remote_addr, default_topic=default_topic)
        return self._put(config)

    def create_system_topic(self, topic: str, queue_nums: int, perm: int) -> TopicConfig:
        """Retry and DLQ topics: created on demand with a fixed shape."""
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        return self._put(TopicConfig(topic, queue_nums, queue_nums, perm))

    def update(self, config: TopicConfig) -> TopicConfig:
        """UPDATE_AND_CREATE_TOPIC: create or replace a topic (the same config again changes nothing)."""
        if self.table.get(config.topic_name) == config:
            return config
        log.info("topic_updated", topic=config.topic_name, read=config.read_queue_nums,
                 write=config.write_queue_nums, perm=config.perm)
        return self._put(config)

    def update_many(self, configs: list[TopicConfig]) -> None:
        """UPDATE_AND_CREATE_TOPIC_LIST: create or replace every topic of ``configs``, or none of them when they
        would take the broker past :data:`MAX_TOPICS`."""
        new = {c.topic_name for c in configs} - self.table.keys()
        if len(self.table) + len(new) > MAX_TOPICS:
            raise OverflowError(f"the broker already holds {len(self.table)} topics; {len(new)} more would take it "
                                f"past the maximum of {MAX_TOPICS}")
        for config in configs:
            self.update(config)

    def replace_all(self, wrapper: TopicConfigSerializeWrapper) -> None:
        """A slave takes its master's topics as they are (when the master's data version moved)."""
        if (wrapper.data_version.counter, wrapper.data_version.timestamp) == (
                self.data_version.counter, self.data_version.timestamp):
            return
        self.table = {name: dataclasses.replace(cfg) for name, cfg in wrapper.topic_config_table.items()}
        self.data_version = wrapper.data_version.copy()
        self.journal.rewrite()
        if self.on_change is not None:
            self.on_change(None)

    def delete(self, topic: str) -> bool:
        if self.table.pop(topic, None) is None:
            return False
        self.data_version.next_version()
        self.journal.delete(self.data_version, topic)
        return True

    def _put(self, config: TopicConfig) -> TopicConfig:
        if config.topic_name not in self.table and len(self.table) >= MAX_TOPICS:
            raise OverflowError(f"the broker already holds the maximum of {MAX_TOPICS} topics")
        self.table[config.topic_name] = config
        self.data_version.next_version()
        self.journal.put(self.data_version, config.topic_name, config)
        if self.on_change is not None:
            self.on_change(config)
        return config
