"""Name-server admin codes: WIPE_WRITE_PERM_OF_BROKER (205), ADD_WRITE_PERM_OF_BROKER (327) and
GET_SYSTEM_TOPIC_LIST_FROM_NS (304).

Wiping takes PERM_WRITE off every topic's queue data of the broker group in the routing table (the answer's
``wipeTopicCount`` says how many), so producers that refresh their routes stop sending there while consumers
keep reading: RocketMQ's way to drain a broker before maintenance. Adding puts it back. A later registration
whose topic config version changed rewrites the queue data from the broker's own topics, as in RocketMQ.
"""

from __future__ import annotations

from pocketmq.common.logs import get_logger
from pocketmq.namesrv.routeinfo import RouteInfoManager
from pocketmq.remoting import route as rd
from pocketmq.remoting.admin_headers import (
    AddWritePermOfBrokerRequestHeader,
    AddWritePermOfBrokerResponseHeader,
    WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
)
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection, Handler

log = get_logger("pocketmq.namesrv.admin")


class NamesrvAdminProcessor:
    def __init__(self, routes: RouteInfoManager) -> None:
        self.routes = routes

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: self.system_topics,
        }

    def wipe_write_perm(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = WipeWritePermOfBrokerRequestHeader.from_command(req)
        count = self.routes.set_write_perm(h.broker_name, writable=False)
        log.info("write_perm_wiped", broker=h.broker_name, topics=count, by=conn.remote_addr)
        return req.response(ResponseCode.SUCCESS, ext_fields=WipeWritePermOfBrokerResponseHeader(count).to_fields())

    def add_write_perm(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = AddWritePermOfBrokerRequestHeader.from_command(req)
        count = self.routes.set_write_perm(h.broker_name, writable=True)
        log.info("write_perm_added", broker=h.broker_name, topics=count, by=conn.remote_addr)
        return req.response(ResponseCode.SUCCESS, ext_fields=AddWritePermOfBrokerResponseHeader(count).to_fields())

    def system_topics(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        """RocketMQ's answer: every cluster name and broker name (each is a topic a broker creates), and
        one broker address to ask for more."""
        routes = self.routes
        names = sorted(set(routes.cluster_addr_table) | set(routes.broker_addr_table))
        addr = next((a for bd in routes.broker_addr_table.values() for _i, a in sorted(bd.broker_addrs.items())), None)
        body = rd.encode_body(rd.TopicList(names, addr).to_json_dict(), req.serialize_type)
        return req.response(ResponseCode.SUCCESS, body=body)
