"""Topic and consumer statistics for mqadmin, the dashboard and the exporter.

Codes: GET_TOPIC_STATS_INFO (202, ``TopicStatsTable``), GET_TOPIC_CONFIG (351), GET_CONSUME_STATS (208,
``ConsumeStats``), GET_BROKER_CONSUME_STATS (317, ``ConsumeStatsList``), QUERY_TOPIC_CONSUME_BY_WHO (300,
``GroupList``), QUERY_CONSUME_TIME_SPAN (303, ``QueryConsumeTimeSpanBody``) and VIEW_BROKER_STATS_DATA (315,
``BrokerStatsData``). Maps keyed by ``MessageQueue`` are written in fastjson's object-key form
(:mod:`pocketmq.remoting.fastjson`), which is what the Java tools parse. :meth:`AdminStatsProcessor.consume_stats` is
also what the exporter-named gauges read.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pocketmq.broker.client_manager import ClientManager
from pocketmq.broker.metadata import ConsumerOffsetManager, SubscriptionGroupManager
from pocketmq.broker.stats import GROUP_GET_NUMS, BrokerStats
from pocketmq.broker.topic_manager import TopicConfigManager
from pocketmq.remoting import fastjson
from pocketmq.remoting import route as rd
from pocketmq.remoting.admin_headers import (
    GetConsumeStatsInBrokerHeader,
    GetTopicStatsInfoRequestHeader,
    QueryConsumeTimeSpanRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
    ViewBrokerStatsDataRequestHeader,
)
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection, Handler
from pocketmq.remoting.fastjson import MQKey
from pocketmq.remoting.headers import GetConsumeStatsRequestHeader
from pocketmq.store.message_store import MessageStore


def _now_ms() -> int:
    return int(time.time() * 1000)


class AdminStatsProcessor:
    def __init__(self, *, store: MessageStore, topics: TopicConfigManager, offsets: ConsumerOffsetManager,
                 groups: SubscriptionGroupManager, clients: ClientManager, stats: BrokerStats, broker_name: str,
                 broker_addr: Callable[[], str]) -> None:
        self.store = store
        self.topics = topics
        self.offsets = offsets
        self.groups = groups
        self.clients = clients
        self.stats = stats
        self.broker_name = broker_name
        self.broker_addr = broker_addr

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.GET_TOPIC_STATS_INFO: self.topic_stats,
            RequestCode.GET_TOPIC_CONFIG: self.topic_config,
            RequestCode.GET_CONSUME_STATS: self.get_consume_stats,
            RequestCode.GET_BROKER_CONSUME_STATS: self.broker_consume_stats,
            RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: self.consume_by_who,
            RequestCode.QUERY_CONSUME_TIME_SPAN: self.consume_time_span,
            RequestCode.VIEW_BROKER_STATS_DATA: self.view_stats,
        }

    # -- helpers -------------------------------------------------------------------------------------------

    def _store_time(self, topic: str, queue_id: int, offset: int) -> int:
        """Store timestamp of the message at ``offset`` (0 when there is none)."""
        return self.store.get_message_store_timestamp(topic, queue_id, offset) if offset >= 0 else 0

    def _ok(self, req: RemotingCommand, body: bytes) -> RemotingCommand:
        return req.response(ResponseCode.SUCCESS, body=body)

    # -- topics --------------------------------------------------------------------------------------------

    def topic_stats(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = GetTopicStatsInfoRequestHeader.from_command(req)
        config = self.topics.get(h.topic)
        if config is None:
            return req.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist")
        table: dict[Any, Any] = {}
        for queue_id in range(config.write_queue_nums):
            low = max(self.store.get_min_offset_in_queue(h.topic, queue_id), 0)
            high = max(self.store.get_max_offset_in_queue(h.topic, queue_id), 0)
            last = self._store_time(h.topic, queue_id, high - 1) if high > 0 else 0
            table[MQKey(h.topic, self.broker_name, queue_id)] = {
                "lastUpdateTimestamp": last, "maxOffset": high, "minOffset": low}
        return self._ok(req, fastjson.dumps({"offsetTable": table}))

    def topic_config(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = GetTopicStatsInfoRequestHeader.from_command(req)
        config = self.topics.get(h.topic)
        if config is None:
            return req.response(ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {h.topic}")
        return self._ok(req, rd.encode_body(config.to_json_dict(), req.serialize_type))

    # -- consumers -----------------------------------------------------------------------------------------

    def consume_stats(self, group: str, topic: str | None) -> dict[str, Any]:
        """RocketMQ's ``ConsumeStats`` of ``group`` on this broker (all its topics when ``topic`` is None)."""
        topics = [topic] if topic else sorted(self.offsets.topics_of_group(group))
        table: dict[Any, Any] = {}
        tps = 0.0
        for name in topics:
            config = self.topics.get(name)
            if config is None:
                continue
            for queue_id in range(config.write_queue_nums):
                broker_offset = max(self.store.get_max_offset_in_queue(name, queue_id), 0)
                consumer_offset = max(self.offsets.query_offset(group, name, queue_id), 0)
                last = self._store_time(name, queue_id, consumer_offset - 1) if consumer_offset > 0 else 0
                table[MQKey(name, self.broker_name, queue_id)] = {
                    "brokerOffset": broker_offset, "consumerOffset": consumer_offset, "lastTimestamp": last}
            tps += self.stats.minute_tps(GROUP_GET_NUMS, f"{name}@{group}")
        return {"consumeTps": tps, "offsetTable": table}

    def get_consume_stats(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = GetConsumeStatsRequestHeader.from_command(req)
        if h.topic and self.topics.get(h.topic) is None:
            return req.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist")
        return self._ok(req, fastjson.dumps(self.consume_stats(h.consumer_group, h.topic)))

    def broker_consume_stats(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        """Every group with offsets here: ``{consumeStatsList:[{group:[ConsumeStats per topic]}], brokerAddr,
        totalDiff}``. ``isOrder`` keeps only groups whose online consumers consume orderly (none, as PocketMQ
        does not record that; RocketMQ checks the same heartbeat flag)."""
        h = GetConsumeStatsInBrokerHeader.from_command(req)
        entries: list[dict[str, Any]] = []
        total_diff = 0
        # One pass over the offset table (asking topics_of_group per group would scan it once per group).
        topics_by_group: dict[str, set[str]] = {}
        for key in () if h.is_order else self.offsets.offset_table:
            topic_name, _, group_name = key.rpartition("@")
            topics_by_group.setdefault(group_name, set()).add(topic_name)
        for group in sorted(topics_by_group):
            per_topic = []
            for topic in sorted(topics_by_group[group]):
                stats = self.consume_stats(group, topic)
                if stats["offsetTable"]:
                    per_topic.append(stats)
                    total_diff += sum(max(w["brokerOffset"] - w["consumerOffset"], 0)
                                      for w in stats["offsetTable"].values())
            if per_topic:
                entries.append({group: per_topic})
        body = {"brokerAddr": self.broker_addr(), "consumeStatsList": entries, "totalDiff": total_diff}
        return self._ok(req, fastjson.dumps(body))

    def consume_by_who(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = QueryTopicConsumeByWhoRequestHeader.from_command(req)
        groups = set(self.clients.groups_consuming(h.topic)) | self.offsets.groups_of_topic(h.topic)
        return self._ok(req, rd.encode_body({"groupList": sorted(groups)}, req.serialize_type))

    def consume_time_span(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = QueryConsumeTimeSpanRequestHeader.from_command(req)
        config = self.topics.get(h.topic)
        if config is None:
            return req.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist")
        spans = []
        now = _now_ms()
        for queue_id in range(config.write_queue_nums):
            min_time = max(self.store.get_earliest_message_time(h.topic, queue_id), 0)
            high = self.store.get_max_offset_in_queue(h.topic, queue_id)
            max_time = self._store_time(h.topic, queue_id, high - 1) if high > 0 else 0
            consumer_offset = self.offsets.query_offset(h.group, h.topic, queue_id)
            consume_time = (self._store_time(h.topic, queue_id, consumer_offset - 1) if consumer_offset > 0
                            else min_time)
            delay = 0
            if 0 <= consumer_offset < high:
                next_time = self._store_time(h.topic, queue_id, consumer_offset)
                delay = max(now - next_time, 0) if next_time > 0 else 0
            spans.append({"consumeTimeStamp": consume_time, "delayTime": delay, "maxTimeStamp": max_time,
                          "messageQueue": MQKey(h.topic, self.broker_name, queue_id).to_json_dict(),
                          "minTimeStamp": max(min_time, 0)})
        return self._ok(req, rd.encode_body({"consumeTimeSpanSet": spans}, req.serialize_type))

    # -- broker stats --------------------------------------------------------------------------------------

    def view_stats(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = ViewBrokerStatsDataRequestHeader.from_command(req)
        data = self.stats.view(h.stats_name, h.stats_key)
        if data is None:
            return req.response(ResponseCode.SYSTEM_ERROR, f"The stats <{h.stats_name}> <{h.stats_key}> not exist")
        return self._ok(req, rd.encode_body(data, req.serialize_type))
