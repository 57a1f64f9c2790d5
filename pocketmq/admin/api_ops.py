"""The operations half of ``rmq-admin``'s remoting calls: subscription groups, client connections, consumer
status and offset resets, statistics, broker configuration, write permission and reading queues.

Functions take an :class:`~pocketmq.admin.api.AdminClient` (which holds the name servers, the timeout and the
connections) and return plain data; bodies whose maps are keyed by ``MessageQueue`` (fastjson's object-key
form) are decoded with :mod:`pocketmq.remoting.fastjson` and flattened into lists of entries that name their queue.
Any non-SUCCESS answer raises :class:`~pocketmq.admin.api.AdminError` with the peer's remark.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from pocketmq.admin.api import AdminClient, AdminError, queue_lag
from pocketmq.client.core.message import Message
from pocketmq.client.core.message_ext import MessageExt, decode_messages
from pocketmq.common.message import MessageConst
from pocketmq.common.sysflag import PullSysFlag
from pocketmq.common.topic import is_dlq_topic, is_retry_topic, retry_topic
from pocketmq.remoting import fastjson
from pocketmq.remoting import route as rd
from pocketmq.remoting.admin_headers import (
    AddWritePermOfBrokerRequestHeader,
    AddWritePermOfBrokerResponseHeader,
    DeleteSubscriptionGroupRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumeStatsInBrokerHeader,
    GetProducerConnectionListRequestHeader,
    GetTopicStatsInfoRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
    ResetOffsetRequestHeader,
    ViewBrokerStatsDataRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
)
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.fastjson import MQKey
from pocketmq.remoting.headers import (
    ConsumerGroupRequestHeader,
    GetConsumeStatsRequestHeader,
    OffsetResponseHeader,
    PullMessageRequestHeader,
    SearchOffsetRequestHeader,
)

#: The group mqadmin reads messages as (printMsg): its pulls commit nothing.
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
#: Most messages one printMsg reads from one queue.
MAX_PRINT_PER_QUEUE = 10_000


def mq_body(resp: Any) -> Any:
    """A body in fastjson's dialect, MessageQueue object keys included."""
    return mq_body_of(bytes(resp.body or b"{}"))


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


def with_lag(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``OffsetWrapper`` entries with their ``lag`` (:func:`~pocketmq.admin.api.queue_lag`)."""
    for e in entries:
        e["lag"] = queue_lag(int(e.get("brokerOffset", 0)), int(e.get("consumerOffset", 0)))
    return entries


async def broker_consume_stats(admin: AdminClient, addr: str) -> dict[str, dict[str, Any]]:
    """GET_BROKER_CONSUME_STATS: every group with offsets on one broker, in one request, as
    ``{group: {"consumeTps": tps, "offsetTable": [entries with lag]}}``. The body (about 100 bytes a queue) is
    decoded in a thread, so a console's loop keeps serving pages meanwhile."""
    fields = GetConsumeStatsInBrokerHeader(False).to_fields()
    resp = await admin.call(addr, RequestCode.GET_BROKER_CONSUME_STATS, fields)
    return await asyncio.to_thread(lambda: _group_stats(mq_body_of(bytes(resp.body or b"{}"))))


def mq_body_of(data: bytes) -> Any:
    """:func:`mq_body` of raw bytes."""
    try:
        return fastjson.loads(data)
    except ValueError as exc:
        raise AdminError(f"undecodable body: {exc}") from None


def _group_stats(body: Any) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for item in (body.get("consumeStatsList") if isinstance(body, dict) else None) or []:
        if not isinstance(item, dict):
            continue
        for group, per_topic in item.items():
            merged = out.setdefault(str(group), {"consumeTps": 0.0, "offsetTable": []})
            for stats in per_topic if isinstance(per_topic, list) else []:
                if isinstance(stats, dict):
                    merged["consumeTps"] += float(stats.get("consumeTps") or 0.0)
                    merged["offsetTable"].extend(with_lag(mq_entries(stats.get("offsetTable"))))
    return out


async def topic_stats(admin: AdminClient, addr: str, topic: str) -> list[dict[str, Any]]:
    """GET_TOPIC_STATS_INFO: min and max offset and last store time of each queue on one broker (none when the
    broker does not have the topic)."""
    resp = await admin.call(addr, RequestCode.GET_TOPIC_STATS_INFO, GetTopicStatsInfoRequestHeader(topic).to_fields(),
                            ok=(ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST))
    if resp.code != ResponseCode.SUCCESS:
        return []
    body = mq_body(resp)
    return mq_entries(body.get("offsetTable") if isinstance(body, dict) else None)


async def search_offset(admin: AdminClient, addr: str, topic: str, queue_id: int, stamp: int) -> int:
    """SEARCH_OFFSET_BY_TIMESTAMP: the first offset of the queue stored at or after ``stamp`` (ms)."""
    fields = SearchOffsetRequestHeader(topic, queue_id, stamp).to_fields()
    return OffsetResponseHeader.from_command(
        await admin.call(addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, fields)).offset


async def reset_preview(admin: AdminClient, group: str, topic: str, timestamp: int,
                        addrs: list[str]) -> list[dict[str, Any]]:
    """What ``resetOffsetByTime`` (forced) or, with ``timestamp`` -1, ``skipAccumulatedMessage`` would do, changing
    nothing: per queue the committed offset, the offset it would move to, and by how many messages (negative:
    consumed again). The broker computes the same targets (the first offset stored at or after the time, or the
    queue's end) when the reset is applied."""
    out: list[dict[str, Any]] = []
    for addr in addrs:
        for e in with_lag(await consume_stats(admin, addr, group, topic)):
            current = int(e.get("consumerOffset", 0))
            target = int(e.get("brokerOffset", 0)) if timestamp == -1 else await search_offset(
                admin, addr, topic, int(e["queueId"]), timestamp)
            out.append({"topic": e["topic"], "brokerName": e["brokerName"], "queueId": e["queueId"],
                        "consumerOffset": current, "brokerOffset": e.get("brokerOffset", 0), "newOffset": target,
                        "move": target - current, "lagAfter": queue_lag(int(e.get("brokerOffset", 0)), target)})
    return out


async def pop_inflight(admin: AdminClient, addr: str, group: str, topic: str | None = None) -> dict[str, Any] | None:
    """GET_POP_INFLIGHT_STATS: POP messages of ``group`` handed out and not acknowledged, ``{"inflightTable":
    [{"topic", "queueId", "inflight"}], "total": n}``; None when the broker does not serve POP."""
    resp = await admin.call(addr, RequestCode.GET_POP_INFLIGHT_STATS, GetConsumeStatsRequestHeader(group, topic)
                            .to_fields(), ok=(ResponseCode.SUCCESS, ResponseCode.REQUEST_CODE_NOT_SUPPORTED))
    if resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
        return None
    body = admin.body(resp)
    if not isinstance(body, dict):
        raise AdminError(f"{addr}: POP in-flight stats are not an object")
    return body


async def timer_metrics(admin: AdminClient, addr: str) -> dict[str, int] | None:
    """GET_TIMER_METRICS: timer messages waiting, per topic; None when the broker has no timer wheel."""
    resp = await admin.call(addr, RequestCode.GET_TIMER_METRICS,
                            ok=(ResponseCode.SUCCESS, ResponseCode.REQUEST_CODE_NOT_SUPPORTED))
    if resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
        return None
    body = admin.body(resp)
    table = body.get("timingCount") if isinstance(body, dict) else None
    out: dict[str, int] = {}
    for topic, metric in (table or {}).items():
        count = metric.get("count", 0) if isinstance(metric, dict) else metric
        out[str(topic)] = int(count or 0)
    return out


async def ensure_retry_topic(admin: AdminClient, group: str) -> None:
    """Create ``%RETRY%<group>`` (one queue, as a broker makes it for a group's first send-back) on every master
    when no name server has a route for it yet, so a resend finds its queues."""
    try:
        if (await admin.topic_route(retry_topic(group))).queue_datas:
            return
    except AdminError:
        pass  # no route: create it
    await admin.update_topic(retry_topic(group), read_queues=1, write_queues=1)


def retry_copy(message: MessageExt, group: str) -> Message:
    """A copy of a stored message for ``group`` to consume again: produced to ``%RETRY%<group>`` (which every
    clustering consumer of the group reads, online or later), with its original topic in RETRY_TOPIC (a dead
    letter keeps the topic it failed in), a fresh retry count and the source id in ORIGIN_MESSAGE_ID. Only that
    group sees it; other groups of the topic are not disturbed."""
    props = dict(message.properties)
    for name in (MessageConst.PROPERTY_MIN_OFFSET, MessageConst.PROPERTY_MAX_OFFSET,
                 MessageConst.PROPERTY_DELAY_TIME_LEVEL, MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
                 MessageConst.PROPERTY_TRANSACTION_PREPARED, MessageConst.PROPERTY_REAL_TOPIC,
                 MessageConst.PROPERTY_REAL_QUEUE_ID):
        props.pop(name, None)
    if not (is_dlq_topic(message.topic) or is_retry_topic(message.topic)):
        props[MessageConst.PROPERTY_RETRY_TOPIC] = message.topic
    props[MessageConst.PROPERTY_ORIGIN_MESSAGE_ID] = message.msg_id
    props[MessageConst.PROPERTY_RECONSUME_TIME] = "0"
    return Message(retry_topic(group), message.body, properties=props, flag=message.flag)


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
