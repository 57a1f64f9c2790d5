"""Consumer management: offsets (14, 15, 43), group membership (38, 40, 203), subscription groups (201),
queue locks for orderly consumers (41, 42), and send-back for retry / dead letters (36)."""

from __future__ import annotations

import random
import time
from typing import Any

from pocketmq.broker.client_manager import ClientManager
from pocketmq.broker.metadata import ConsumerOffsetManager, DelayOffsets, SubscriptionGroupManager
from pocketmq.broker.processors.admin_clients import connection_json
from pocketmq.broker.redeliver import mark_dead_letter, origin_message_id, redelivered
from pocketmq.broker.status import put_status_to_response
from pocketmq.broker.topic_manager import TopicConfigManager
from pocketmq.common.logs import get_logger
from pocketmq.common.message import MessageConst, parse_properties
from pocketmq.common.topic import dlq_topic, retry_topic
from pocketmq.common.topic_config import PermName
from pocketmq.remoting import route as rd
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection, Handler
from pocketmq.remoting.errors import InvalidHeaderError
from pocketmq.remoting.headers import (
    ConsumerGroupRequestHeader,
    ConsumerSendMsgBackRequestHeader,
    OffsetResponseHeader,
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from pocketmq.store.message_store import MessageStore

log = get_logger("pocketmq.broker.consumer_manage")

#: An orderly consumer's queue lock lives this long without renewal (RocketMQ: 60 s).
LOCK_MAX_LIVE_SECONDS = 60.0


def _mq_key(mq: Any) -> tuple[str, str, int]:
    if not isinstance(mq, dict):
        raise InvalidHeaderError("message queue must be an object")
    return str(mq.get("topic")), str(mq.get("brokerName")), int(mq.get("queueId", -1))


def _mq_dict(key: tuple[str, str, int]) -> dict[str, Any]:
    return {"brokerName": key[1], "queueId": key[2], "topic": key[0]}


class ConsumerManageProcessor:
    def __init__(
        self,
        *,
        store: MessageStore,
        topics: TopicConfigManager,
        clients: ClientManager,
        offsets: ConsumerOffsetManager,
        groups: SubscriptionGroupManager,
        broker_name: str,
        is_master: bool,
        delay_offsets: DelayOffsets | None = None,
    ) -> None:
        self.store = store
        self.topics = topics
        self.clients = clients
        self.offsets = offsets
        self.groups = groups
        self.broker_name = broker_name
        self.is_master = is_master
        self.delay_offsets = delay_offsets
        self.locks: dict[str, dict[tuple[str, str, int], tuple[str, float]]] = {}

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.QUERY_CONSUMER_OFFSET: self.query_offset,
            RequestCode.UPDATE_CONSUMER_OFFSET: self.update_offset,
            RequestCode.GET_ALL_CONSUMER_OFFSET: self.get_all_offsets,
            RequestCode.GET_CONSUMER_LIST_BY_GROUP: self.consumer_list,
            RequestCode.GET_CONSUMER_CONNECTION_LIST: self.connection_list,
            RequestCode.LOCK_BATCH_MQ: self.lock_batch,
            RequestCode.UNLOCK_BATCH_MQ: self.unlock_batch,
            RequestCode.CONSUMER_SEND_MSG_BACK: self.send_back,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self.all_groups,
            RequestCode.GET_ALL_DELAY_OFFSET: self.all_delay_offsets,
        }

    # -- offsets -------------------------------------------------------------------------------------------

    def query_offset(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = QueryConsumerOffsetRequestHeader.from_command(req)
        offset = self.offsets.query_offset(h.consumer_group, h.topic, h.queue_id)
        if offset < 0:
            # A new group on a queue that still starts at 0 begins at 0 (Java 4.x rule).
            if self.store.get_min_offset_in_queue(h.topic, h.queue_id) > 0:
                return req.response(ResponseCode.QUERY_NOT_FOUND,
                                    "Not found, maybe this group consumer boot first")
            offset = 0
        return req.response(ResponseCode.SUCCESS, ext_fields=OffsetResponseHeader(offset).to_fields())

    def update_offset(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = UpdateConsumerOffsetRequestHeader.from_command(req)
        if h.commit_offset >= 0:  # negative = "no offset"
            self.offsets.commit_offset(h.consumer_group, h.topic, h.queue_id, h.commit_offset)
        return req.response(ResponseCode.SUCCESS)

    def get_all_offsets(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        return req.response(ResponseCode.SUCCESS, body=self.offsets.encode().encode())

    def all_delay_offsets(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        body = self.delay_offsets.encode().encode() if self.delay_offsets is not None else b'{"offsetTable":{}}'
        return req.response(ResponseCode.SUCCESS, body=body)

    def all_groups(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        return req.response(ResponseCode.SUCCESS, body=self.groups.encode().encode())

    # -- membership ----------------------------------------------------------------------------------------

    def consumer_list(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = ConsumerGroupRequestHeader.from_command(req)
        info = self.clients.consumers.get(h.consumer_group)
        ids = info.client_ids() if info is not None else []
        if not ids:
            return req.response(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {h.consumer_group}")
        return req.response(ResponseCode.SUCCESS, body=rd.encode_body({"consumerIdList": ids}, req.serialize_type))

    def connection_list(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = ConsumerGroupRequestHeader.from_command(req)
        info = self.clients.consumers.get(h.consumer_group)
        if info is None or not info.channels:
            return req.response(ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{h.consumer_group}] not online")
        body = {
            "connectionSet": [connection_json(ch) for _cid, ch in sorted(info.channels.items())],
            "consumeType": info.consume_type.value, "messageModel": info.message_model.value,
            "consumeFromWhere": info.consume_from_where.value,
            "subscriptionTable": {t: s.to_json_dict() for t, s in info.subscriptions.items()},
        }
        return req.response(ResponseCode.SUCCESS, body=rd.encode_body(body, req.serialize_type))

    # -- orderly locks -------------------------------------------------------------------------------------

    def lock_batch(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        body = rd.decode_body(bytes(req.body or b"{}"), req.serialize_type)
        group, client_id = str(body.get("consumerGroup")), str(body.get("clientId"))
        table = self.locks.setdefault(group, {})
        now = time.monotonic()
        locked = []
        for mq in body.get("mqSet") or []:
            key = _mq_key(mq)
            holder = table.get(key)
            if holder is None or holder[0] == client_id or now - holder[1] > LOCK_MAX_LIVE_SECONDS:
                table[key] = (client_id, now)
                locked.append(_mq_dict(key))
        return req.response(ResponseCode.SUCCESS, body=rd.encode_body({"lockOKMQSet": locked}, req.serialize_type))

    def unlock_batch(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        body = rd.decode_body(bytes(req.body or b"{}"), req.serialize_type)
        group, client_id = str(body.get("consumerGroup")), str(body.get("clientId"))
        table = self.locks.get(group, {})
        for mq in body.get("mqSet") or []:
            key = _mq_key(mq)
            if table.get(key, ("",))[0] == client_id:
                del table[key]
        return req.response(ResponseCode.SUCCESS)

    # -- retry and dead letters ----------------------------------------------------------------------------

    async def send_back(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        """Write the message found at ``offset`` to ``%RETRY%<group>`` (with a delay level) or ``%DLQ%<group>``
        through the store's one put path, so on a SYNC_MASTER the answer waits for a slave as a send's does,
        and comes with the same code: SUCCESS only once flushed and replicated as configured, else
        FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE (stored, not confirmed; the consumer
        then sends the message to the retry topic itself) or the refusal's code."""
        h = ConsumerSendMsgBackRequestHeader.from_command(req)
        group = self.groups.find_or_create(h.group)
        if group is None:
            return req.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {h.group}")
        record = self.store.look_message_by_offset(h.offset)
        if record is None:
            return req.response(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {h.offset}")
        props = parse_properties(record.properties)
        props.setdefault(MessageConst.PROPERTY_RETRY_TOPIC, record.topic)
        props.pop(MessageConst.PROPERTY_DELAY_TIME_LEVEL, None)
        props.setdefault(MessageConst.PROPERTY_ORIGIN_MESSAGE_ID, h.origin_msg_id or origin_message_id(record, props))
        max_times = h.max_reconsume_times if h.max_reconsume_times is not None else group.retry_max_times
        if record.reconsume_times >= max_times or h.delay_level < 0:
            topic = dlq_topic(h.group)
            self.topics.create_system_topic(topic, 1, PermName.PERM_READ | PermName.PERM_WRITE)
            mark_dead_letter(props, record, h.origin_topic or record.topic)
        else:
            topic = retry_topic(h.group)
            self.topics.create_system_topic(topic, group.retry_queue_nums, PermName.PERM_READ | PermName.PERM_WRITE)
            level = h.delay_level if h.delay_level > 0 else 3 + record.reconsume_times
            props[MessageConst.PROPERTY_DELAY_TIME_LEVEL] = str(level)
        msg = redelivered(record, topic=topic, queue_id=random.randrange(max(group.retry_queue_nums, 1)),
                          properties=props, reconsume_times=record.reconsume_times + 1)
        result = await self.store.put_message(msg)
        return req.response(*put_status_to_response(result.status))


