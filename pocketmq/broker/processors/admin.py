"""``AdminBrokerProcessor``: topic administration, offsets by queue, message lookup, runtime info.

Topics are created one at a time (UPDATE_AND_CREATE_TOPIC, 17) or many at once (RocketMQ 5's
UPDATE_AND_CREATE_TOPIC_LIST, 18: an empty header and ``{"topicConfigList":[TopicConfig JSON, ...]}``, at most
:data:`MAX_TOPICS_PER_LIST`); both answer once the topics are registered with the name servers and journalled.
A list is checked whole first: one invalid topic refuses it all (RocketMQ answers SUCCESS at the first topic that
exists unchanged and leaves the rest uncreated; here unchanged topics are skipped and the others created).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable

from pocketmq.broker import disk_status
from pocketmq.broker.stats import BrokerStats
from pocketmq.broker.topic_manager import TopicConfigManager
from pocketmq.common.errors import FieldFormatError
from pocketmq.common.record import SIZE_AND_MAGIC
from pocketmq.common.topic import validate_topic
from pocketmq.common.topic_config import TopicConfig, apply_attribute_changes
from pocketmq.remoting import route as rd
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection, Handler
from pocketmq.remoting.headers import (
    CreateTopicRequestHeader,
    DeleteTopicRequestHeader,
    EarliestMsgStoretimeResponseHeader,
    OffsetResponseHeader,
    SearchOffsetRequestHeader,
    TopicQueueRequestHeader,
    ViewMessageRequestHeader,
)
from pocketmq.store.message_store import MessageStore

#: Topics one UPDATE_AND_CREATE_TOPIC_LIST may carry (``rmq-admin updateTopicList`` sends 1,000 a request).
MAX_TOPICS_PER_LIST = 10_000
BROKER_VERSION = 401
BROKER_VERSION_DESC = "V4_9_4 (PocketMQ)"


class AdminBrokerProcessor:
    def __init__(
        self,
        *,
        store: MessageStore,
        topics: TopicConfigManager,
        stats: BrokerStats,
        role: Callable[[], str],
        topics_settled: Callable[[], Awaitable[object]] | None = None,
        extra_runtime_info: Callable[[], dict[str, str]] | None = None,
        on_topic_created: Callable[[str], None] | None = None,
    ) -> None:
        self.store = store
        self.on_topic_created = on_topic_created
        self.topics = topics
        self.stats = stats
        self.role = role
        self.extra_runtime_info = extra_runtime_info
        self.topics_settled = topics_settled

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.UPDATE_AND_CREATE_TOPIC: self.update_and_create_topic,
            RequestCode.UPDATE_AND_CREATE_TOPIC_LIST: self.update_and_create_topic_list,
            RequestCode.DELETE_TOPIC_IN_BROKER: self.delete_topic,
            RequestCode.GET_ALL_TOPIC_CONFIG: self.get_all_topic_config,
            RequestCode.GET_MAX_OFFSET: self.get_max_offset,
            RequestCode.GET_MIN_OFFSET: self.get_min_offset,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: self.search_offset_by_timestamp,
            RequestCode.GET_EARLIEST_MSG_STORETIME: self.get_earliest_msg_storetime,
            RequestCode.VIEW_MESSAGE_BY_ID: self.view_message_by_id,
            RequestCode.GET_BROKER_RUNTIME_INFO: self.get_broker_runtime_info,
        }

    # -- topics --------------------------------------------------------------------------------------------

    async def update_and_create_topic(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = CreateTopicRequestHeader.from_command(req)
        if h.topic == h.default_topic and h.topic != "TBW102":
            remark = f"the topic[{h.topic}] is conflict with system reserved words."
            return req.response(ResponseCode.SYSTEM_ERROR, remark)
        if h.topic_filter_type not in ("SINGLE_TAG", "MULTI_TAG"):
            return req.response(ResponseCode.SYSTEM_ERROR, f"unknown topicFilterType {h.topic_filter_type!r}")
        existing = self.topics.get(h.topic)
        try:
            attributes = apply_attribute_changes(existing.attributes if existing is not None else {}, h.attributes)
        except FieldFormatError as exc:
            return req.response(ResponseCode.SYSTEM_ERROR, str(exc))
        config = TopicConfig(h.topic, h.read_queue_nums, h.write_queue_nums, h.perm, h.topic_filter_type,
                             h.topic_sys_flag or 0, h.order, attributes)
        problem = topic_config_problem(config)
        if problem is not None:
            return req.response(ResponseCode.SYSTEM_ERROR, problem)
        try:
            self.topics.update(config)
        except OverflowError as exc:
            return req.response(ResponseCode.SYSTEM_ERROR, str(exc))
        if self.on_topic_created is not None:
            self.on_topic_created(h.topic)
        if self.topics_settled is not None:
            await self.topics_settled()  # the route is visible once the admin call returns, as in RocketMQ
        return req.response(ResponseCode.SUCCESS)

    async def update_and_create_topic_list(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        configs = _topic_list(req)
        if isinstance(configs, str):
            return req.response(ResponseCode.SYSTEM_ERROR, configs)
        try:
            self.topics.update_many(configs)
        except OverflowError as exc:
            return req.response(ResponseCode.SYSTEM_ERROR, str(exc))
        if self.topics_settled is not None:
            await self.topics_settled()
        return req.response(ResponseCode.SUCCESS)

    async def delete_topic(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = DeleteTopicRequestHeader.from_command(req)
        self.topics.delete(h.topic)
        await self.store.delete_topic(h.topic)
        return req.response(ResponseCode.SUCCESS)

    def get_all_topic_config(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        body = rd.encode_body(self.topics.wrapper().to_json_dict(), req.serialize_type)
        return req.response(ResponseCode.SUCCESS, body=body)

    # -- offsets -------------------------------------------------------------------------------------------

    def get_max_offset(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = TopicQueueRequestHeader.from_command(req)
        offset = self.store.get_max_offset_in_queue(h.topic, h.queue_id)
        return req.response(ResponseCode.SUCCESS, ext_fields=OffsetResponseHeader(offset).to_fields())

    def get_min_offset(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = TopicQueueRequestHeader.from_command(req)
        offset = self.store.get_min_offset_in_queue(h.topic, h.queue_id)
        return req.response(ResponseCode.SUCCESS, ext_fields=OffsetResponseHeader(offset).to_fields())

    def search_offset_by_timestamp(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = SearchOffsetRequestHeader.from_command(req)
        offset = self.store.get_offset_in_queue_by_time(h.topic, h.queue_id, h.timestamp)
        return req.response(ResponseCode.SUCCESS, ext_fields=OffsetResponseHeader(offset).to_fields())

    def get_earliest_msg_storetime(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = TopicQueueRequestHeader.from_command(req)
        stamp = self.store.get_earliest_message_time(h.topic, h.queue_id)
        return req.response(ResponseCode.SUCCESS, ext_fields=EarliestMsgStoretimeResponseHeader(stamp).to_fields())

    # -- messages ------------------------------------------------------------------------------------------

    def view_message_by_id(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = ViewMessageRequestHeader.from_command(req)
        data = self.store.get_commit_log_data(h.offset) if h.offset >= 0 else None
        if data is None or len(data) < SIZE_AND_MAGIC.size:
            return req.response(ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {h.offset}")
        size, _magic = SIZE_AND_MAGIC.unpack_from(data, 0)
        if size <= 0 or size > len(data):
            return req.response(ResponseCode.SYSTEM_ERROR, f"no complete message at offset {h.offset}")
        return req.response(ResponseCode.SUCCESS, body=bytes(data[:size]))

    # -- runtime -------------------------------------------------------------------------------------------

    def _disk_info(self) -> dict[str, str]:
        """RocketMQ's disk keys (as of the store's last check: no statvfs here), whether sends are taken, and what
        is reclaimable and what holds the rest (:mod:`pocketmq.broker.disk_status`)."""
        store = self.store
        disk = store.disk
        info = {"diskFull": str(store.disk_full).lower(), "storeWritable": str(store.writable).lower()}
        if disk is not None:
            info["commitLogDiskRatio"] = str(round(disk.ratio, 4))
            info["commitLogDirCapacity"] = (f"Total : {disk.total / (1 << 30):.2f} GiB, "
                                            f"Free : {disk.available / (1 << 30):.2f} GiB.")
        reason = store.not_writable_reason
        if store.disk_full and reason is not None:
            info["diskFullReason"] = reason
        info.update(disk_status.runtime_keys(store))
        return info

    def _exporter_keys(self) -> dict[str, str]:
        """The rest of RocketMQ's runtime keys, which rocketmq-exporter and the dashboard parse (a missing one
        makes the exporter drop the broker's runtime metrics). Thread-pool queue sizes, capacities and waits
        are 0: an asyncio broker has no such pools. Counts are since start (the "morning" counts are 0)."""
        stats, store = self.stats, self.store
        tps = stats.get_tps()
        zero = ("sendThreadPoolQueueSize", "sendThreadPoolQueueCapacity", "sendThreadPoolQueueHeadWaitTimeMills",
                "pullThreadPoolQueueSize", "pullThreadPoolQueueCapacity", "pullThreadPoolQueueHeadWaitTimeMills",
                "queryThreadPoolQueueSize", "queryThreadPoolQueueCapacity", "queryThreadPoolQueueHeadWaitTimeMills",
                "msgPutTotalYesterdayMorning", "msgGetTotalYesterdayMorning", "msgPutTotalTodayMorning",
                "msgGetTotalTodayMorning", "dispatchMaxBuffer", "dispatchBehindBytes", "pageCacheLockTimeMills",
                "getMessageEntireTimeMax", "putMessageEntireTimeMax", "remainTransientStoreBufferNumbs",
                "earliestMessageTimeStamp")
        disk = store.disk
        keys = dict.fromkeys(zero, "0")
        keys.update({
            "getTotalTps": tps, "getFoundTps": tps, "getMissTps": " ".join(["0.00"] * len(stats.WINDOWS)),
            "putMessageDistributeTime": "null", "putMessageSizeTotal": str(stats.put_bytes),
            "putMessageTimesTotal": str(stats.put_messages),
            "putMessageAverageSize": str(stats.put_bytes / stats.put_messages if stats.put_messages else 0.0),
            "remainHowManyDataToFlush": f"{max(store.max_phy_offset - store.flushed_phy_offset, 0)} B",
            "consumeQueueDiskRatio": str(round(disk.ratio, 4)) if disk is not None else "0.0",
            "startAcceptSendRequestTimeStamp": str(stats.boot_timestamp_ms),
        })
        return keys

    def get_broker_runtime_info(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        table = {
            "brokerVersion": str(BROKER_VERSION),
            "brokerVersionDesc": BROKER_VERSION_DESC,
            "brokerRole": self.role(),
            "bootTimestamp": str(self.stats.boot_timestamp_ms),
            "runtime": self.stats.runtime(),
            "putTps": self.stats.put_tps(),
            "getTransferedTps": self.stats.get_tps(),
            "msgPutTotalTodayNow": str(self.stats.put_messages),
            "msgPutBytesTotal": str(self.stats.put_bytes),
            "msgGetTotalTodayNow": str(self.stats.get_messages),
            "commitLogMaxOffset": str(self.store.max_phy_offset),
            "commitLogMinOffset": str(self.store.min_phy_offset),
            "commitLogFlushedOffset": str(self.store.flushed_phy_offset),
            # Not in RocketMQ's table: lets a tool on this host check that the broker it asks owns a store.
            "storePathRootDir": os.path.abspath(self.store.config.store_path_root_dir),
            "topicCount": str(len(self.topics.table)),
            **self._disk_info(),
            **self._exporter_keys(),
            **{k: str(v) for k, v in (self.store.index.stats() if self.store.index is not None else {}).items()},
        }
        if self.extra_runtime_info is not None:
            table.update(self.extra_runtime_info())
        return req.response(ResponseCode.SUCCESS, body=rd.encode_body(rd.KVTable(table).to_json_dict(),
                                                                     req.serialize_type))




def topic_config_problem(config: TopicConfig) -> str | None:
    """Why a topic cannot be created as ``config`` says (the broker's wording), or None."""
    problem = validate_topic(config.topic_name)
    if problem is not None:
        return problem
    if not (0 < config.read_queue_nums <= 1024 and 0 < config.write_queue_nums <= 1024):
        return f"topic[{config.topic_name}]: queue nums must be between 1 and 1024"
    return None


def _topic_list(req: RemotingCommand) -> list[TopicConfig] | str:
    """The configs of an UPDATE_AND_CREATE_TOPIC_LIST body, or why it cannot be taken."""
    try:
        raw = rd.decode_body(bytes(req.body or b""), req.serialize_type)
    except rd.BodyDecodeError as exc:
        return str(exc)
    items = raw.get("topicConfigList") if isinstance(raw, dict) else None
    if not isinstance(items, list) or not items:
        return "topicConfigList must be a non-empty list of topic configs"
    if len(items) > MAX_TOPICS_PER_LIST:
        return f"topicConfigList holds {len(items)} topics, more than {MAX_TOPICS_PER_LIST} in one request"
    configs = []
    for item in items:
        try:
            config = TopicConfig.from_json_dict(item)
        except FieldFormatError as exc:
            return f"bad topic config: {exc}"
        problem = topic_config_problem(config)
        if problem is not None:
            return problem
        configs.append(config)
    return configs
