"""The operations half of ``rmq-admin``'s remoting calls: subscription groups, client connections, consumer
status and offset resets, statistics, broker configuration, write permission and reading queues.

Functions take an :class:`~pocketmq.admin.api.AdminClient` (which holds the name servers, the timeout and the
connections) and return plain data; bodies whose maps are keyed by ``MessageQueue`` (fastjson's object-key
form) are decoded with :mod:`pocketmq.remoting.fastjson` and flattened into lists of entries that name their queue.
Any non-SUCCESS answer raises :class:`~pocketmq.admin.api.AdminError` with the peer's remark.
"""

from __future__ import annotations

import json
from typing import Any

from pocketmq.admin.api import AdminClient, AdminError
from pocketmq.client.core.message_ext import MessageExt, decode_messages
from pocketmq.common.sysflag import PullSysFlag
from pocketmq.remoting import fastjson
from pocketmq.remoting import route as rd
from pocketmq.remoting.admin_headers import (
    AddWritePermOfBrokerRequestHeader,
    AddWritePermOfBrokerResponseHeader,
    DeleteSubscriptionGroupRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetProducerConnectionListRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
    ResetOffsetRequestHeader,
    ViewBrokerStatsDataRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
)
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.fastjson import MQKey
from pocketmq.remoting.headers import ConsumerGroupRequestHeader, GetConsumeStatsRequestHeader, PullMessageRequestHeader

#: The group mqadmin reads messages as (printMsg): its pulls commit nothing.
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
#: Most messages one printMsg reads from one queue.
MAX_PRINT_PER_QUEUE = 10_000


def mq_body(resp: Any) -> Any:
    """A body in fastjson's dialect, MessageQueue object keys included."""
    try:
        return fastjson.loads(bytes(resp.body or b"{}"))
    except ValueError as exc:
        raise AdminError(f"undecodable body: {exc}") from None


def mq_entries(table: Any, **extra: Any) -> list[dict[str, Any]]:
    """``{MQKey: {...}}`` as ``[{"topic", "brokerName", "queueId", ...}]`` sorted by queue."""
    out = []
    if isinstance(table, dict):
        for key, value in table.items():
            if isinstance(key, MQKey):
                fields = value if isinstance(value, dict) else {"offset": value}
                out.append({**key.to_json_dict(), **fields, **extra})
    return sorted(out, key=lambda e: (e["topic"], e["brokerName"], e["queueId"]))


async def targets(admin: AdminClient, broker: str | None, cluster: str | None) -> list[str]:
    addrs = await admin.master_addrs(cluster, broker)
    if not addrs:
        raise AdminError("no master broker found" + (f" in cluster {cluster}" if cluster else ""))
    return addrs


# -- subscription groups ------------------------------------------------------------------------------------


async def update_sub_group(admin: AdminClient, config: dict[str, Any], addrs: list[str]) -> None:
    body = json.dumps(config, separators=(",", ":")).encode()
    for addr in addrs:
        await admin.call(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)


async def delete_sub_group(admin: AdminClient, group: str, addrs: list[str], *, remove_offset: bool) -> None:
    fields = DeleteSubscriptionGroupRequestHeader(group, remove_offset).to_fields()
    for addr in addrs:
        await admin.call(addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, fields)


async def sub_groups(admin: AdminClient, addr: str) -> dict[str, dict[str, Any]]:
    """``subscriptionGroupTable`` of one broker (GET_ALL_SUBSCRIPTIONGROUP_CONFIG)."""
    body = admin.body(await admin.call(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))
    table = body.get("subscriptionGroupTable") if isinstance(body, dict) else None
    return dict(table) if isinstance(table, dict) else {}


# -- clients ------------------------------------------------------------------------------------------------


async def consumer_connection(admin: AdminClient, group: str, addrs: list[str]) -> dict[str, Any]:
    """The first broker's ``ConsumerConnection`` that knows the group online."""
    fields = ConsumerGroupRequestHeader(group).to_fields()
    for addr in addrs:
        resp = await admin.call(addr, RequestCode.GET_CONSUMER_CONNECTION_LIST, fields,
                                ok=(ResponseCode.SUCCESS, ResponseCode.CONSUMER_NOT_ONLINE))
        if resp.code == ResponseCode.SUCCESS:
            return dict(admin.body(resp))
    raise AdminError(f"the consumer group[{group}] not online")


async def producer_connection(admin: AdminClient, group: str, addrs: list[str]) -> list[dict[str, Any]]:
    fields = GetProducerConnectionListRequestHeader(group).to_fields()
    seen: dict[str, dict[str, Any]] = {}
    for addr in addrs:
        resp = await admin.call(addr, RequestCode.GET_PRODUCER_CONNECTION_LIST, fields,
                                ok=(ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR))
        if resp.code == ResponseCode.SUCCESS:
            for conn in admin.body(resp).get("connectionSet") or []:
                seen[str(conn.get("clientId"))] = dict(conn)
    if not seen:
        raise AdminError(f"the producer group[{group}] not online")
    return [seen[k] for k in sorted(seen)]


async def consumer_running_info(admin: AdminClient, addr: str, group: str, client_id: str,
                                jstack: bool = False) -> dict[str, Any]:
    fields = GetConsumerRunningInfoRequestHeader(group, client_id, jstack).to_fields()
    info = mq_body(await admin.call(addr, RequestCode.GET_CONSUMER_RUNNING_INFO, fields))
    if not isinstance(info, dict):
        raise AdminError("ConsumerRunningInfo is not an object")
    info["mqTable"] = mq_entries(info.get("mqTable"))
    return info


# -- offsets ------------------------------------------------------------------------------------------------


async def reset_offset(admin: AdminClient, group: str, topic: str, timestamp: int, *, force: bool,
                       addrs: list[str]) -> list[dict[str, Any]]:
    """INVOKE_BROKER_TO_RESET_OFFSET on every master of the topic: the new offset per queue."""
    fields = ResetOffsetRequestHeader(topic, group, timestamp, force).to_fields()
    out: list[dict[str, Any]] = []
    for addr in addrs:
        body = mq_body(await admin.call(addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields))
        out.extend(mq_entries(body.get("offsetTable") if isinstance(body, dict) else None))
    return out


async def topic_masters(admin: AdminClient, topic: str) -> list[str]:
    route = await admin.topic_route(topic)
    names = {q.broker_name for q in route.queue_datas}
    addrs = [bd.broker_addrs[rd.MASTER_ID] for bd in route.broker_datas
             if bd.broker_name in names and rd.MASTER_ID in bd.broker_addrs]
    if not addrs:
        raise AdminError(f"no master broker serves topic {topic}")
    return sorted(addrs)


async def consume_stats(admin: AdminClient, addr: str, group: str, topic: str | None) -> list[dict[str, Any]]:
    fields = GetConsumeStatsRequestHeader(group, topic).to_fields()
    body = mq_body(await admin.call(addr, RequestCode.GET_CONSUME_STATS, fields))
    return mq_entries(body.get("offsetTable") if isinstance(body, dict) else None)


# -- stats --------------------------------------------------------------------------------------------------


async def broker_stats(admin: AdminClient, addr: str, name: str, key: str) -> dict[str, Any] | None:
    """VIEW_BROKER_STATS_DATA; None when the broker has not counted that item."""
    fields = ViewBrokerStatsDataRequestHeader(name, key).to_fields()
    resp = await admin.call(addr, RequestCode.VIEW_BROKER_STATS_DATA, fields,
                            ok=(ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR))
    return dict(admin.body(resp)) if resp.code == ResponseCode.SUCCESS else None


async def consumed_by(admin: AdminClient, addr: str, topic: str) -> list[str]:
    fields = QueryTopicConsumeByWhoRequestHeader(topic).to_fields()
    return sorted(admin.body(await admin.call(addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, fields))
                  .get("groupList") or [])


# -- broker config and write permission ---------------------------------------------------------------------


async def broker_config(admin: AdminClient, addr: str) -> dict[str, str]:
    resp = await admin.call(addr, RequestCode.GET_BROKER_CONFIG)
    out: dict[str, str] = {}
    for line in bytes(resp.body or b"").decode("utf-8", "replace").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and not key.lstrip().startswith("#"):
            out[key.strip()] = value.strip()
    return out


async def update_broker_config(admin: AdminClient, addrs: list[str], key: str, value: str) -> None:
    for addr in addrs:
        await admin.call(addr, RequestCode.UPDATE_BROKER_CONFIG, body=f"{key}={value}\n".encode())


async def write_perm(admin: AdminClient, broker_name: str, *, writable: bool) -> dict[str, int]:
    """WIPE_ / ADD_WRITE_PERM_OF_BROKER on every name server: topics changed per name server."""
    out = {}
    for ns in admin.namesrv_addrs:
        if writable:
            resp = await admin.call(ns, RequestCode.ADD_WRITE_PERM_OF_BROKER,
                                    AddWritePermOfBrokerRequestHeader(broker_name).to_fields())
            out[ns] = AddWritePermOfBrokerResponseHeader.from_command(resp).add_topic_count
        else:
            resp = await admin.call(ns, RequestCode.WIPE_WRITE_PERM_OF_BROKER,
                                    WipeWritePermOfBrokerRequestHeader(broker_name).to_fields())
            out[ns] = WipeWritePermOfBrokerResponseHeader.from_command(resp).wipe_topic_count
    return out


# -- reading a queue ----------------------------------------------------------------------------------------


async def read_queue(admin: AdminClient, addr: str, topic: str, queue_id: int, begin: int, end: int,
                     broker_name: str = "") -> list[MessageExt]:
    """Messages of one queue from offset ``begin`` up to (not including) ``end``, with pulls that commit
    nothing (TOOLS_CONSUMER, a ``*`` subscription), at most :data:`MAX_PRINT_PER_QUEUE`."""
    out: list[MessageExt] = []
    offset = begin
    end = min(end, begin + MAX_PRINT_PER_QUEUE)
    while offset < end:
        header = PullMessageRequestHeader(
            consumer_group=TOOLS_CONSUMER_GROUP, topic=topic, queue_id=queue_id, queue_offset=offset,
            max_msg_nums=min(32, end - offset), sys_flag=PullSysFlag.SUBSCRIPTION, commit_offset=0,
            suspend_timeout_millis=0, sub_version=0, subscription="*", expression_type="TAG")
        resp = await admin.call(addr, RequestCode.PULL_MESSAGE, header.to_fields(),
                                ok=(ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND,
                                    ResponseCode.PULL_OFFSET_MOVED, ResponseCode.PULL_RETRY_IMMEDIATELY))
        if resp.code != ResponseCode.SUCCESS or not resp.body:
            break
        batch = decode_messages(bytes(resp.body), broker_name=broker_name)
        out.extend(m for m in batch if m.queue_offset < end)
        if not batch:
            break
        offset = batch[-1].queue_offset + 1
    return out
