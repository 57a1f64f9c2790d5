"""Request processors of the name server: one handler per request code, over the routing tables.

Handlers are synchronous (the tables live on the event loop; nothing here blocks) except KV writes,
whose file persistence runs in a thread.
"""

from __future__ import annotations

import asyncio

from pocketmq.common.logs import get_logger
from pocketmq.namesrv.kvconfig import KVConfigManager
from pocketmq.namesrv.routeinfo import RouteInfoManager
from pocketmq.remoting import route as rd
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection, Handler
from pocketmq.remoting.headers import (
    DeleteKVConfigRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    GetKVConfigRequestHeader,
    GetKVConfigResponseHeader,
    GetKVListByNamespaceRequestHeader,
    GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader,
    PutKVConfigRequestHeader,
    QueryDataVersionRequestHeader,
    QueryDataVersionResponseHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnregisterBrokerRequestHeader,
)

log = get_logger("pocketmq.namesrv.processor")

ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"
#: Clients at or above RocketMQ 4.9.4's version ordinal get standard JSON (quoted integer keys).
STANDARD_JSON_SINCE_VERSION = 401


class NamesrvProcessor:
    """RocketMQ's DefaultRequestProcessor: the name server's request handlers."""

    def __init__(self, routes: RouteInfoManager, kv: KVConfigManager, *, order_message_enable: bool) -> None:
        self.routes = routes
        self.kv = kv
        self.order_message_enable = order_message_enable

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.get_route_info,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.get_cluster_info,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_all_topics,
            RequestCode.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic,
            RequestCode.QUERY_DATA_VERSION: self.query_data_version,
            RequestCode.PUT_KV_CONFIG: self.put_kv,
            RequestCode.GET_KV_CONFIG: self.get_kv,
            RequestCode.DELETE_KV_CONFIG: self.delete_kv,
            RequestCode.GET_KVLIST_BY_NAMESPACE: self.get_kv_list,
        }

    # -- brokers ----------------------------------------------------------------------------------------

    def register_broker(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        header = RegisterBrokerRequestHeader.from_command(req)
        body = bytes(req.body or b"")
        if header.body_crc32 != 0 and rd.body_crc32(body) != header.body_crc32:
            return req.response(ResponseCode.SYSTEM_ERROR, "crc32 not match")
        wrapper = self._unchanged(header, req.version, body)
        filter_servers: list[str] | None = None if wrapper is not None else []
        if body and wrapper is None:
            decoded = rd.decode_register_body(
                body, compressed=header.compressed, version=req.version, serialize_type=req.serialize_type
            )
            wrapper = decoded.topic_config_wrapper
            filter_servers = decoded.filter_server_list
        result = self.routes.register_broker(
            header.cluster_name,
            header.broker_addr,
            header.broker_name,
            header.broker_id,
            header.ha_server_addr,
            wrapper,
            filter_servers,
            conn,
        )
        log.debug("broker_registered", broker=header.broker_name, addr=header.broker_addr, id=header.broker_id)
        fields = RegisterBrokerResponseHeader(result.ha_server_addr, result.master_addr).to_fields()
        table = self.kv.get_kv_list_by_namespace(ORDER_TOPIC_CONFIG)
        out_body = rd.encode_body(rd.KVTable(table).to_json_dict(), req.serialize_type) if table else None
        return req.response(ResponseCode.SUCCESS, ext_fields=fields, body=out_body)

    def _unchanged(self, header: RegisterBrokerRequestHeader, version: int,
                   body: bytes) -> rd.TopicConfigSerializeWrapper | None:
        """For a compressed body whose DataVersion this name server already holds from the broker: an empty table
        with that version (nothing more to decode; filter servers are left as they are). None otherwise."""
        if not body or not header.compressed or version < rd.REGISTER_BODY_MIN_VERSION:
            return None
        data_version = rd.peek_compressed_data_version(body)
        if self.routes.needs_topic_config(header.broker_name, header.broker_id, header.broker_addr, data_version):
            return None
        return rd.TopicConfigSerializeWrapper({}, data_version)

    def unregister_broker(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = UnregisterBrokerRequestHeader.from_command(req)
        self.routes.unregister_broker(h.cluster_name, h.broker_addr, h.broker_name, h.broker_id)
        log.info("broker_unregistered", broker=h.broker_name, addr=h.broker_addr, id=h.broker_id)
        return req.response(ResponseCode.SUCCESS)

    def query_data_version(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = QueryDataVersionRequestHeader.from_command(req)
        theirs = rd.decode_data_version(req.body, req.serialize_type)
        changed = self.routes.is_broker_topic_config_changed(h.broker_addr, theirs)
        if not changed:
            self.routes.update_broker_info_update_timestamp(h.broker_addr)
        ours = self.routes.query_broker_topic_config(h.broker_addr)
        body = rd.encode_body(ours.to_json_dict(), req.serialize_type) if ours is not None else None
        return req.response(ResponseCode.SUCCESS, ext_fields=QueryDataVersionResponseHeader(changed).to_fields(),
                            body=body)

    # -- routes -----------------------------------------------------------------------------------------

    def get_route_info(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = GetRouteInfoRequestHeader.from_command(req)
        route = self.routes.pickup_topic_route_data(h.topic)
        if route is None:
            return req.response(
                ResponseCode.TOPIC_NOT_EXIST, f"No topic route info in name server for the topic: {h.topic}"
            )
        if self.order_message_enable:
            route.order_topic_conf = self.kv.get(ORDER_TOPIC_CONFIG, h.topic)
        standard = bool(h.accept_standard_json_only) or req.version >= STANDARD_JSON_SINCE_VERSION
        body = rd.encode_route(route, standard_json=standard, serialize_type=req.serialize_type)
        return req.response(ResponseCode.SUCCESS, body=body)

    def get_cluster_info(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        info = self.routes.get_all_cluster_info()
        return req.response(ResponseCode.SUCCESS, body=rd.encode_cluster_info(info, serialize_type=req.serialize_type))

    def get_all_topics(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        topics = self.routes.get_all_topic_list()
        body = rd.encode_body(rd.TopicList(topics).to_json_dict(), req.serialize_type)
        return req.response(ResponseCode.SUCCESS, body=body)

    def get_topics_by_cluster(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = GetTopicsByClusterRequestHeader.from_command(req)
        topics = self.routes.get_topics_by_cluster(h.cluster)
        body = rd.encode_body(rd.TopicList(topics).to_json_dict(), req.serialize_type)
        return req.response(ResponseCode.SUCCESS, body=body)

    def delete_topic(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = DeleteTopicFromNamesrvRequestHeader.from_command(req)
        self.routes.delete_topic(h.topic)
        return req.response(ResponseCode.SUCCESS)

    # -- KV config --------------------------------------------------------------------------------------

    async def put_kv(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = PutKVConfigRequestHeader.from_command(req)
        self.kv.put(h.namespace, h.key, h.value)
        await asyncio.to_thread(self.kv.persist)
        return req.response(ResponseCode.SUCCESS)

    def get_kv(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = GetKVConfigRequestHeader.from_command(req)
        value = self.kv.get(h.namespace, h.key)
        if value is None:
            remark = f"No config item, Namespace: {h.namespace} Key: {h.key}"
            return req.response(ResponseCode.QUERY_NOT_FOUND, remark)
        return req.response(ResponseCode.SUCCESS, ext_fields=GetKVConfigResponseHeader(value).to_fields())

    async def delete_kv(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = DeleteKVConfigRequestHeader.from_command(req)
        self.kv.delete(h.namespace, h.key)
        await asyncio.to_thread(self.kv.persist)
        return req.response(ResponseCode.SUCCESS)

    def get_kv_list(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = GetKVListByNamespaceRequestHeader.from_command(req)
        table = self.kv.get_kv_list_by_namespace(h.namespace)
        if not table:
            return req.response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {h.namespace}")
        body = rd.encode_body(rd.KVTable(table).to_json_dict(), req.serialize_type)
        return req.response(ResponseCode.SUCCESS, body=body)
