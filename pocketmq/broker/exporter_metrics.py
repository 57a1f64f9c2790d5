"""rocketmq-exporter's metric names and labels, served by the broker's own ``/metrics`` beside ``pocketmq_*``.

Grafana dashboards built for apache/rocketmq-exporter (its ``RMQMetricsCollector``) then work against
PocketMQ unchanged: the same names, the same label names, the same meaning, computed from this broker's
tables at scrape time (nothing on the hot path but the stats counters :class:`~pocketmq.broker.stats.BrokerStats`
keeps anyway). Each broker reports its own part; Prometheus sums across brokers as it does for the
exporter's per-broker series.

| name | labels | value |
|---|---|---|
| rocketmq_broker_tps / rocketmq_broker_qps | cluster, brokerIP, broker | messages put / got per second |
| rocketmq_producer_tps / rocketmq_producer_message_size | cluster, broker, topic | messages / bytes put per second |
| rocketmq_producer_offset | cluster, broker, topic | sum of the topic's queue max offsets |
| rocketmq_topic_retry_offset | cluster, broker, topic | same, for ``%RETRY%`` topics |
| rocketmq_topic_dlq_offset | cluster, broker, group | same, for ``%DLQ%<group>`` |
| rocketmq_consumer_tps / rocketmq_consumer_message_size | cluster, broker, topic, group | got per second |
| rocketmq_consumer_offset | cluster, broker, topic, group | sum of the group's consumer offsets |
| rocketmq_group_diff / _retrydiff / _dlqdiff | group, topic, countOfOnlineConsumers, msgModel | lag (messages) |
| rocketmq_group_get_latency_by_storetime | cluster, broker, topic, group | ms the oldest unconsumed message waits |
| rocketmq_brokeruntime_* | cluster, brokerIP, brokerHost, des, boottime, broker_version | runtime info |

``msgModel`` is the ordinal the exporter writes (``1`` = CLUSTERING, ``0`` = BROADCASTING). Diffs are
reported for clustering groups only, as the exporter does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Protocol

from pocketmq.broker.client_manager import ClientManager
from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.metadata import ConsumerOffsetManager
from pocketmq.broker.processors.admin import BROKER_VERSION_DESC
from pocketmq.broker.processors.admin_stats import AdminStatsProcessor
from pocketmq.broker.stats import (
    BROKER_GET_NUMS,
    BROKER_PUT_NUMS,
    GROUP_GET_NUMS,
    GROUP_GET_SIZE,
    TOPIC_PUT_NUMS,
    TOPIC_PUT_SIZE,
    BrokerStats,
)
from pocketmq.broker.topic_manager import TopicConfigManager
from pocketmq.common.consumer import MessageModel
from pocketmq.common.topic import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from pocketmq.remoting.metrics import Metrics
from pocketmq.store.message_store import MessageStore


class MetricsSource(Protocol):
    """What the gauges read: the broker controller's tables (attributes read at every scrape)."""

    config: BrokerConfig
    stats: BrokerStats
    store: MessageStore | None
    topics: TopicConfigManager
    offsets: ConsumerOffsetManager
    clients: ClientManager
    admin_stats: AdminStatsProcessor

    @property
    def addr(self) -> str: ...

Sample = tuple[tuple[str, ...], float]
RUNTIME_LABELS = ("cluster", "brokerIP", "brokerHost", "des", "boottime", "broker_version")
DIFF_LABELS = ("group", "topic", "countOfOnlineConsumers", "msgModel")
GROUP_LABELS = ("cluster", "broker", "topic", "group")
TOPIC_LABELS = ("cluster", "broker", "topic")
_GROUP_TOPIC_PREFIXES = (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)


class ExporterMetrics:
    """Registers the exporter-named gauges on ``metrics``; every value is read from ``broker`` at scrape."""

    def __init__(self, broker: MetricsSource) -> None:
        self.b = broker

    def register(self, m: Metrics) -> None:
        c = self.b.config
        gauges: list[tuple[str, str, tuple[str, ...], Callable[[], list[Sample]]]] = [
            ("rocketmq_broker_tps", "Messages put per second (last minute)", ("cluster", "brokerIP", "broker"),
             lambda: [((c.broker_cluster_name, self.b.addr, c.broker_name),
                       self.b.stats.minute_tps(BROKER_PUT_NUMS, c.broker_cluster_name))]),
            ("rocketmq_broker_qps", "Messages got per second (last minute)", ("cluster", "brokerIP", "broker"),
             lambda: [((c.broker_cluster_name, self.b.addr, c.broker_name),
                       self.b.stats.minute_tps(BROKER_GET_NUMS, c.broker_cluster_name))]),
            ("rocketmq_producer_tps", "Messages put per second, by topic", TOPIC_LABELS,
             lambda: self._per_topic_rate(TOPIC_PUT_NUMS)),
            ("rocketmq_producer_message_size", "Bytes put per second, by topic", TOPIC_LABELS,
             lambda: self._per_topic_rate(TOPIC_PUT_SIZE)),
            ("rocketmq_producer_offset", "Sum of the topic's queue max offsets", TOPIC_LABELS,
             lambda: self._topic_offsets(lambda t: not t.startswith(_GROUP_TOPIC_PREFIXES))),
            ("rocketmq_topic_retry_offset", "Sum of a retry topic's queue max offsets", TOPIC_LABELS,
             lambda: self._topic_offsets(lambda t: t.startswith(RETRY_GROUP_TOPIC_PREFIX))),
            ("rocketmq_topic_dlq_offset", "Sum of a dead-letter topic's queue max offsets",
             ("cluster", "broker", "group"), self._dlq_offsets),
            ("rocketmq_consumer_tps", "Messages got per second, by topic and group", GROUP_LABELS,
             lambda: self._per_group_rate(GROUP_GET_NUMS)),
            ("rocketmq_consumer_message_size", "Bytes got per second, by topic and group", GROUP_LABELS,
             lambda: self._per_group_rate(GROUP_GET_SIZE)),
            ("rocketmq_consumer_offset", "Sum of the group's consumer offsets in the topic", GROUP_LABELS,
             self._consumer_offsets),
            ("rocketmq_group_diff", "Messages not consumed yet", DIFF_LABELS, lambda: self._diffs("")),
            ("rocketmq_group_retrydiff", "Retry messages not consumed yet", DIFF_LABELS,
             lambda: self._diffs(RETRY_GROUP_TOPIC_PREFIX)),
            ("rocketmq_group_dlqdiff", "Dead letters of the group", DIFF_LABELS,
             lambda: self._diffs(DLQ_GROUP_TOPIC_PREFIX)),
            ("rocketmq_group_get_latency_by_storetime", "ms since the oldest unconsumed message was stored",
             GROUP_LABELS, self._latency_by_storetime),
        ]
        for name, doc, labels, source in gauges:
            m.gauge(name, doc, labels, source)
        for name, doc, read in self._runtime_gauges():
            m.gauge(name, doc, RUNTIME_LABELS, self._runtime(read))

    # -- pieces --------------------------------------------------------------------------------------------

    def _identity(self) -> tuple[str, str]:
        return self.b.config.broker_cluster_name, self.b.config.broker_name

    def _per_topic_rate(self, name: str) -> list[Sample]:
        cluster, broker = self._identity()
        return [((cluster, broker, topic), self.b.stats.minute_tps(name, topic))
                for topic in sorted(self.b.stats.items[name])]

    def _per_group_rate(self, name: str) -> list[Sample]:
        cluster, broker = self._identity()
        out: list[Sample] = []
        for key in sorted(self.b.stats.items[name]):
            topic, _, group = key.rpartition("@")
            out.append(((cluster, broker, topic, group), self.b.stats.minute_tps(name, key)))
        return out

    def _topic_sum(self, topic: str) -> int:
        store = self.b.store
        config = self.b.topics.get(topic)
        if store is None or config is None:
            return 0
        return sum(max(store.get_max_offset_in_queue(topic, q), 0) for q in range(config.write_queue_nums))

    def _topic_offsets(self, keep: Callable[[str], bool]) -> list[Sample]:
        cluster, broker = self._identity()
        return [((cluster, broker, t), self._topic_sum(t)) for t in sorted(self.b.topics.table) if keep(t)]

    def _dlq_offsets(self) -> list[Sample]:
        cluster, broker = self._identity()
        return [((cluster, broker, t[len(DLQ_GROUP_TOPIC_PREFIX):]), self._topic_sum(t))
                for t in sorted(self.b.topics.table) if t.startswith(DLQ_GROUP_TOPIC_PREFIX)]

    def _pairs(self) -> Iterator[tuple[str, str]]:
        """(topic, group) of every committed offset, plus each group's dead-letter topic that exists."""
        seen = set()
        for key in sorted(self.b.offsets.offset_table):
            topic, _, group = key.rpartition("@")
            seen.add(group)
            yield topic, group
        for topic in sorted(self.b.topics.table):
            if topic.startswith(DLQ_GROUP_TOPIC_PREFIX) and topic[len(DLQ_GROUP_TOPIC_PREFIX):] in seen:
                yield topic, topic[len(DLQ_GROUP_TOPIC_PREFIX):]

    def _consumer_offsets(self) -> list[Sample]:
        cluster, broker = self._identity()
        offsets = self.b.offsets
        return [((cluster, broker, topic, group), sum(max(o, 0) for o in offsets.query_offsets(group, topic).values()))
                for topic, group in self._pairs() if not topic.startswith(DLQ_GROUP_TOPIC_PREFIX)]

    def _diffs(self, prefix: str) -> list[Sample]:
        out: list[Sample] = []
        for topic, group in self._pairs():
            kind = (RETRY_GROUP_TOPIC_PREFIX if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) else
                    DLQ_GROUP_TOPIC_PREFIX if topic.startswith(DLQ_GROUP_TOPIC_PREFIX) else "")
            if kind != prefix:
                continue
            info = self.b.clients.consumers.get(group)
            if info is not None and info.message_model is not MessageModel.CLUSTERING:
                continue
            online = len(info.channels) if info is not None else 0
            table = self.b.admin_stats.consume_stats(group, topic)["offsetTable"]
            diff = sum(max(w["brokerOffset"] - w["consumerOffset"], 0) for w in table.values())
            out.append(((group, topic, str(online), "1"), float(diff)))
        return out

    def _latency_by_storetime(self) -> list[Sample]:
        cluster, broker = self._identity()
        store = self.b.store
        if store is None:
            return []
        now = time.time() * 1000
        out: list[Sample] = []
        for topic, group in self._pairs():
            if topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
                continue
            worst = 0.0
            for mq, w in self.b.admin_stats.consume_stats(group, topic)["offsetTable"].items():
                if w["consumerOffset"] < w["brokerOffset"]:
                    stored = store.get_message_store_timestamp(topic, mq.queue_id, w["consumerOffset"])
                    if stored > 0:
                        worst = max(worst, now - stored)
            out.append(((cluster, broker, topic, group), worst))
        return out

    # -- runtime -------------------------------------------------------------------------------------------

    def _runtime_labels(self) -> tuple[str, ...]:
        c = self.b.config
        return (c.broker_cluster_name, self.b.addr, c.broker_ip1, c.broker_name,
                str(self.b.stats.boot_timestamp_ms), BROKER_VERSION_DESC)

    def _runtime(self, read: Callable[[], float]) -> Callable[[], list[Sample]]:
        return lambda: [(self._runtime_labels(), read())] if self.b.store is not None else []

    def _runtime_gauges(self) -> list[tuple[str, str, Callable[[], float]]]:
        stats = self.b.stats

        def store_value(attr: str) -> Callable[[], float]:
            return lambda: float(getattr(self.b.store, attr, 0))

        def rate(window: int, index: int) -> Callable[[], float]:
            return lambda: float(stats.rate(window, index))

        gauges: list[tuple[str, str, Callable[[], float]]] = [
            ("rocketmq_brokeruntime_msg_put_total_today_now", "Messages put since start", lambda: stats.put_messages),
            ("rocketmq_brokeruntime_msg_gettotal_today_now", "Messages got since start", lambda: stats.get_messages),
            ("rocketmq_brokeruntime_put_message_size_total", "Bytes put since start", lambda: stats.put_bytes),
            ("rocketmq_brokeruntime_commitlog_maxoffset", "Commit-log max offset", store_value("max_phy_offset")),
            ("rocketmq_brokeruntime_commitlog_minoffset", "Commit-log min offset", store_value("min_phy_offset")),
            ("rocketmq_brokeruntime_commitlog_disk_ratio", "Used fraction of the store's disk", self._disk_ratio),
        ]
        for window in stats.WINDOWS:
            gauges.append((f"rocketmq_brokeruntime_put_tps{window}", f"Puts per second over {window} s",
                           rate(window, 1)))
            gauges.append((f"rocketmq_brokeruntime_gettransfered_tps{window}",
                           f"Messages got per second over {window} s", rate(window, 2)))
        return gauges

    def _disk_ratio(self) -> float:
        disk = self.b.store.disk if self.b.store is not None else None
        return float(disk.ratio) if disk is not None else 0.0
