"""Subscription groups: UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200), DELETE_SUBSCRIPTIONGROUP (207) and
GET_SUBSCRIPTIONGROUP_CONFIG (352, one group, as RocketMQ 5's proxy reads it).

GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201, ``SubscriptionGroupWrapper``) is served by
:class:`~pocketmq.broker.processors.consumer_manage.ConsumerManageProcessor` (slaves copy it too). The table is
:class:`~pocketmq.broker.metadata.SubscriptionGroupManager`, persisted to ``config/subscriptionGroup.json`` by the
broker's 5 s metadata loop whenever its data version moved (and at stop).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from pocketmq.broker.metadata import ConsumerOffsetManager, SubscriptionGroupManager
from pocketmq.common.errors import FieldFormatError
from pocketmq.common.logs import get_logger
from pocketmq.common.topic import validate_topic
from pocketmq.remoting import route as rd
from pocketmq.remoting.admin_headers import (
    DeleteSubscriptionGroupRequestHeader,
    GetSubscriptionGroupConfigRequestHeader,
)
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection, Handler
from pocketmq.store.metadata import SubscriptionGroupConfig

log = get_logger("pocketmq.broker.admin_groups")

#: RocketMQ's bound on a group's retry queues and retry times (SubscriptionGroupConfig has none; these keep
#: a typo from creating thousands of queues).
MAX_RETRY_QUEUE_NUMS = 1024
MAX_RETRY_TIMES = 1024


def parse_group_config(raw: object) -> SubscriptionGroupConfig | str:
    """A ``SubscriptionGroupConfig`` body, or the reason it is refused."""
    if not isinstance(raw, dict):
        return "the body is not a SubscriptionGroupConfig object"
    try:
        config = SubscriptionGroupConfig.from_json(raw)
    except (TypeError, ValueError, FieldFormatError) as exc:
        return f"bad SubscriptionGroupConfig: {exc}"
    problem = validate_topic(config.group_name) if config.group_name else "groupName is empty"
    if problem is not None:
        return problem.replace("topic", "group")
    if not 0 <= config.retry_queue_nums <= MAX_RETRY_QUEUE_NUMS:
        return f"retryQueueNums must be between 0 and {MAX_RETRY_QUEUE_NUMS}"
    if not -1 <= config.retry_max_times <= MAX_RETRY_TIMES:
        return f"retryMaxTimes must be between -1 and {MAX_RETRY_TIMES}"
    return config


class AdminGroupsProcessor:
    def __init__(self, *, groups: SubscriptionGroupManager, offsets: ConsumerOffsetManager,
                 on_changed: Callable[[], Awaitable[object]] | None = None) -> None:
        self.groups = groups
        self.offsets = offsets
        #: awaited after a change, before the answer (controller mode: the in-sync slaves copy it first)
        self.on_changed = on_changed

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self.update_group,
            RequestCode.DELETE_SUBSCRIPTIONGROUP: self.delete_group,
            RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG: self.get_group,
        }

    def get_group(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        """GET_SUBSCRIPTIONGROUP_CONFIG (352): the group's config as JSON, SUBSCRIPTION_GROUP_NOT_EXIST if none."""
        h = GetSubscriptionGroupConfigRequestHeader.from_command(req)
        config = self.groups.table.get(h.group)
        if config is None:
            return req.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                f"The consumer group {h.group} does not exist")
        resp = req.response(ResponseCode.SUCCESS)
        resp.body = rd.encode_body(config.to_json(), req.serialize_type)
        return resp

    async def update_group(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        try:
            raw = rd.decode_body(bytes(req.body or b""), req.serialize_type)
        except rd.BodyDecodeError as exc:
            return req.response(ResponseCode.SYSTEM_ERROR, str(exc))
        config = parse_group_config(raw)
        if isinstance(config, str):
            return req.response(ResponseCode.SYSTEM_ERROR, config)
        try:
            self.groups.update(config)
        except OverflowError as exc:
            return req.response(ResponseCode.SYSTEM_ERROR, str(exc))
        log.info("subscription_group_updated", group=config.group_name, by=conn.remote_addr)
        if self.on_changed is not None:
            await self.on_changed()
        return req.response(ResponseCode.SUCCESS)

    async def delete_group(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = DeleteSubscriptionGroupRequestHeader.from_command(req)
        removed = self.groups.delete(h.group_name)
        if h.remove_offset:
            self.offsets.remove_group(h.group_name)
        log.info("subscription_group_deleted", group=h.group_name, existed=removed is not None,
                 offsets_removed=h.remove_offset, by=conn.remote_addr)
        if self.on_changed is not None:
            await self.on_changed()
        return req.response(ResponseCode.SUCCESS)
