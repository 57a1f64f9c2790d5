"""What ``rmq-admin`` asks name servers and brokers, over the remoting protocol, as plain data.

:class:`AdminClient` turns each admin question into requests (name-server codes 105/106/206/216, broker
codes 17/28/30/31/33/208/215) and returns dataclasses or dicts; formatting is :mod:`pocketmq.admin.cli`'s job.
Every call has a timeout; a non-SUCCESS answer raises :class:`AdminError` with the broker's remark.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pocketmq.common.topic_config import TopicConfig
from pocketmq.remoting import fastjson
from pocketmq.remoting import route as rd
from pocketmq.remoting.acl import SessionCredentials
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import PocketMQError
from pocketmq.remoting.fastjson import MQKey
from pocketmq.remoting.headers import (
    CreateTopicRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    DeleteTopicRequestHeader,
    GetConsumeStatsRequestHeader,
    GetRouteInfoRequestHeader,
    OffsetResponseHeader,
    TopicQueueRequestHeader,
)

__all__ = ["AdminClient", "AdminError", "BrokerInfo", "QueueStatus", "queue_lag", "split_namesrv"]

#: Topics per UPDATE_AND_CREATE_TOPIC_LIST request (~130 KiB of JSON; a broker takes up to 10,000).
TOPIC_LIST_CHUNK = 1000
#: UPDATE_AND_CREATE_TOPIC requests in flight at once when a broker has no UPDATE_AND_CREATE_TOPIC_LIST.
_ONE_BY_ONE_CONCURRENCY = 16


class AdminError(Exception):
    """An admin request failed: the peer answered with an error code, or could not be reached."""


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """One broker as the name servers know it."""

    cluster: str
    broker_name: str
    broker_id: int
    addr: str


@dataclass(frozen=True, slots=True)
class QueueStatus:
    broker_name: str
    queue_id: int
    min_offset: int
    max_offset: int


def queue_lag(broker_offset: int, consumer_offset: int) -> int:
    """Messages of one queue a group has not consumed: the queue's max offset (the next offset to be written) less
    the group's committed offset (the next it will read), never below 0. A group with no committed offset (the
    broker reports 0, or -1 for RocketMQ's) counts from 0, as the broker's ``rocketmq_group_diff`` does."""
    return max(broker_offset - max(consumer_offset, 0), 0)


def split_namesrv(addrs: str) -> list[str]:
    """``"a:9876;b:9876"`` -> ``["a:9876", "b:9876"]``."""
    return [a.strip() for a in addrs.split(";") if a.strip()]


class AdminClient:
    """Admin requests against a set of name servers (the first that answers is used)."""

    def __init__(self, namesrv_addrs: list[str], *, timeout: float = 5.0,
                 credentials: SessionCredentials | None = None) -> None:
        if not namesrv_addrs:
            raise AdminError("no name server address given (use -n host:port or NAMESRV_ADDR)")
        self.namesrv_addrs = namesrv_addrs
        self.timeout = timeout
        #: ACL keys: every request is signed with them (brokers with aclEnable=true need it).
        self.credentials = credentials
        self.client = RemotingClient(connect_timeout=min(timeout, 3.0),
                                     before_request=credentials.sign if credentials is not None else None)

    async def close(self) -> None:
        await self.client.close()

    async def __aenter__(self) -> AdminClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- plumbing ------------------------------------------------------------------------------------------

    async def call(self, addr: str, code: int, fields: dict[str, str] | None = None, body: bytes | None = None,
                   *, ok: tuple[int, ...] = (ResponseCode.SUCCESS,)) -> RemotingCommand:
        try:
            resp = await self.client.invoke(addr, RemotingCommand.request(code, fields or {}, body), self.timeout)
        except (PocketMQError, OSError, TimeoutError) as exc:
            raise AdminError(f"{addr}: {type(exc).__name__}: {exc}") from None
        if resp.code not in ok:
            raise AdminError(f"{addr} answered code {resp.code} to request {code}: {resp.remark or ''}")
        return resp

    async def call_namesrv(self, code: int, fields: dict[str, str] | None = None,
                           *, ok: tuple[int, ...] = (ResponseCode.SUCCESS,)) -> RemotingCommand:
        """Ask the name servers in turn; the first that can be reached answers."""
        errors = []
        for addr in self.namesrv_addrs:
            try:
                return await self.call(addr, code, fields, ok=ok)
            except AdminError as exc:
                if "answered code" in str(exc):
                    raise
                errors.append(str(exc))
        raise AdminError("no name server answered: " + "; ".join(errors))

    @staticmethod
    def body(resp: RemotingCommand) -> Any:
        return rd.decode_body(bytes(resp.body or b"{}"), resp.serialize_type)

    # -- name server ---------------------------------------------------------------------------------------

    async def cluster_info(self, namesrv: str | None = None) -> rd.ClusterInfo:
        if namesrv is None:
            resp = await self.call_namesrv(RequestCode.GET_BROKER_CLUSTER_INFO)
        else:
            resp = await self.call(namesrv, RequestCode.GET_BROKER_CLUSTER_INFO)
        return rd.decode_cluster_info(bytes(resp.body or b"{}"), resp.serialize_type)

    async def brokers(self, cluster: str | None = None) -> list[BrokerInfo]:
        info = await self.cluster_info()
        out = []
        for cluster_name, names in sorted(info.cluster_addr_table.items()):
            if cluster is not None and cluster_name != cluster:
                continue
            for name in sorted(names):
                data = info.broker_addr_table.get(name)
                if data is None:
                    continue
                for broker_id, addr in sorted(data.broker_addrs.items()):
                    out.append(BrokerInfo(cluster_name, name, broker_id, addr))
        return out

    async def topic_list(self) -> list[str]:
        resp = await self.call_namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        return sorted(rd.TopicList.from_json_dict(self.body(resp)).topic_list)

    async def topic_route(self, topic: str) -> rd.TopicRouteData:
        fields = GetRouteInfoRequestHeader(topic, accept_standard_json_only=True).to_fields()
        resp = await self.call_namesrv(RequestCode.GET_ROUTEINFO_BY_TOPIC, fields)
        return rd.decode_route(bytes(resp.body or b"{}"), resp.serialize_type)

    # -- brokers -------------------------------------------------------------------------------------------

    async def all_topic_configs(self, broker_addr: str) -> dict[str, TopicConfig]:
        """GET_ALL_TOPIC_CONFIG: every topic of one broker, in one request."""
        resp = await self.call(broker_addr, RequestCode.GET_ALL_TOPIC_CONFIG)

        def decode() -> dict[str, TopicConfig]:  # thousands of topics: in a thread, the caller's loop keeps serving
            return rd.TopicConfigSerializeWrapper.from_json_dict(self.body(resp)).topic_config_table

        try:
            return await asyncio.to_thread(decode)
        except rd.BodyDecodeError as exc:
            raise AdminError(f"{broker_addr}: undecodable topic table: {exc}") from None

    async def runtime_info(self, broker_addr: str) -> dict[str, str]:
        resp = await self.call(broker_addr, RequestCode.GET_BROKER_RUNTIME_INFO)
        return rd.KVTable.from_json_dict(self.body(resp)).table

    async def queue_offsets(self, broker_addr: str, topic: str, queue_id: int) -> tuple[int, int]:
        fields = TopicQueueRequestHeader(topic, queue_id).to_fields()
        low = await self.call(broker_addr, RequestCode.GET_MIN_OFFSET, fields)
        high = await self.call(broker_addr, RequestCode.GET_MAX_OFFSET, fields)
        return (OffsetResponseHeader.from_command(low).offset, OffsetResponseHeader.from_command(high).offset)

    async def topic_status(self, topic: str) -> list[QueueStatus]:
        """Min and max offset of every queue of ``topic`` on each broker group's master."""
        route = await self.topic_route(topic)
        masters = {bd.broker_name: bd.broker_addrs.get(rd.MASTER_ID) for bd in route.broker_datas}
        out = []
        for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
            addr = masters.get(qd.broker_name)
            if addr is None:
                continue  # the master is down: its queues cannot be asked
            for queue_id in range(max(qd.read_queue_nums, qd.write_queue_nums)):
                low, high = await self.queue_offsets(addr, topic, queue_id)
                out.append(QueueStatus(qd.broker_name, queue_id, low, high))
        return out

    async def master_addrs(self, cluster: str | None = None, broker_addr: str | None = None) -> list[str]:
        if broker_addr is not None:
            return [broker_addr]
        return [b.addr for b in await self.brokers(cluster) if b.broker_id == rd.MASTER_ID]

    async def update_topic(self, topic: str, *, read_queues: int = 8, write_queues: int = 8, perm: int = 6,
                           cluster: str | None = None, broker_addr: str | None = None,
                           order: bool = False, attributes: str | None = None) -> list[str]:
        """Create or change ``topic`` on every master of ``cluster`` (or on ``broker_addr``); ``attributes`` are
        RocketMQ 5's changes (``+message.type=FIFO``)."""
        header = CreateTopicRequestHeader(topic, "TBW102", read_queues, write_queues, perm, "SINGLE_TAG", 0, order,
                                          attributes)
        addrs = await self.master_addrs(cluster, broker_addr)
        if not addrs:
            raise AdminError("no master broker found to create the topic on")
        for addr in addrs:
            await self.call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_fields())
        return addrs

    async def update_topic_list(self, configs: Sequence[TopicConfig], *, cluster: str | None = None,
                                broker_addr: str | None = None, chunk: int = TOPIC_LIST_CHUNK) -> list[str]:
        """Create or change ``configs`` on every master of ``cluster`` (or on ``broker_addr``) with RocketMQ 5's
        UPDATE_AND_CREATE_TOPIC_LIST, ``chunk`` topics a request; a broker without it (a RocketMQ 4 broker)
        gets one UPDATE_AND_CREATE_TOPIC per topic, a few at a time."""
        addrs = await self.master_addrs(cluster, broker_addr)
        if not addrs:
            raise AdminError("no master broker found to create the topics on")
        for addr in addrs:
            for start in range(0, len(configs), chunk):
                part = configs[start:start + chunk]
                body = rd.encode_body({"topicConfigList": [c.to_json_dict() for c in part]})
                resp = await self.call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC_LIST, body=body,
                                       ok=(ResponseCode.SUCCESS, ResponseCode.REQUEST_CODE_NOT_SUPPORTED))
                if resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
                    await self._update_topics_one_by_one(addr, configs[start:])
                    break
        return addrs

    async def _update_topics_one_by_one(self, addr: str, configs: Sequence[TopicConfig]) -> None:
        pending = list(configs)

        async def worker() -> None:
            while pending:
                c = pending.pop()
                header = CreateTopicRequestHeader(c.topic_name, "TBW102", c.read_queue_nums, c.write_queue_nums,
                                                  c.perm, c.topic_filter_type, c.topic_sys_flag, c.order)
                await self.call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_fields())

        await asyncio.gather(*(worker() for _ in range(min(_ONE_BY_ONE_CONCURRENCY, len(pending)))))

    async def delete_topic(self, topic: str, *, cluster: str | None = None) -> list[str]:
        """Delete ``topic`` on every master of ``cluster`` and then from every name server."""
        addrs = await self.master_addrs(cluster)
        for addr in addrs:
            await self.call(addr, RequestCode.DELETE_TOPIC_IN_BROKER, DeleteTopicRequestHeader(topic).to_fields())
        for ns in self.namesrv_addrs:
            fields = DeleteTopicFromNamesrvRequestHeader(topic).to_fields()
            await self.call(ns, RequestCode.DELETE_TOPIC_IN_NAMESRV, fields)
        return addrs

    async def consumer_progress(self, group: str, topic: str | None = None) -> dict[str, Any]:
        """GET_CONSUME_STATS from every master, merged: ``{"offsetTable": [...], "totalLag": n}`` (the
        brokers key ``offsetTable`` by MessageQueue objects, fastjson's form; entries here name their queue)."""
        fields = GetConsumeStatsRequestHeader(group, topic).to_fields()
        entries: list[dict[str, Any]] = []
        for addr in await self.master_addrs():
            resp = await self.call(addr, RequestCode.GET_CONSUME_STATS, fields,
                                   ok=(ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST))
            if resp.code != ResponseCode.SUCCESS:
                continue  # the topic is on other brokers
            try:
                body = fastjson.loads(bytes(resp.body or b"{}"))
            except ValueError as exc:
                raise AdminError(f"{addr}: undecodable ConsumeStats: {exc}") from None
            for key, wrapper in (body.get("offsetTable") or {}).items():
                if isinstance(key, MQKey) and isinstance(wrapper, dict):
                    lag = queue_lag(int(wrapper.get("brokerOffset", 0)), int(wrapper.get("consumerOffset", 0)))
                    entries.append({**key.to_json_dict(), **wrapper, "lag": lag})
        entries.sort(key=lambda e: (str(e.get("topic")), str(e.get("brokerName")), int(e.get("queueId", 0))))
        return {"group": group, "offsetTable": entries, "totalLag": sum(int(e.get("lag", 0)) for e in entries)}
