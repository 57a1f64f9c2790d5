"""The proxy's side of the cluster: a remoting client of the name servers and brokers, as a RocketMQ 5 proxy in
cluster mode is (``ClusterMessageService``, ``ClusterTopicRouteService``, ``ClusterMetadataService``).

It holds nothing a client needs to come back to the same proxy: routes come from the name servers (through the
SDK's :class:`~pocketmq.client.core.instance.MQClientInstance`, refreshed every 30 s and after a failure), topic
attributes and group settings from the brokers (cached for ``metadataCacheTtlMills``), receipt handles and
transaction ids carry where their message is. So any number of proxies can serve the same clients.

Sends pick a queue as the Java proxy does (a message group hashed to its queue, otherwise round-robin with the
SDK's latency fault tolerance, so a broker that failed is avoided) and make one attempt; a send that could not
even connect is tried once more on another broker, since nothing was delivered. The 5.x clients retry the rest.
"""

from __future__ import annotations

import contextlib
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from pocketmq.client.consumer.pop_api import popped_messages
from pocketmq.client.core.config import ClientConfig
from pocketmq.client.core.instance import MQClientInstance
from pocketmq.client.core.message import MessageQueue
from pocketmq.client.core.message_ext import MessageExt
from pocketmq.client.producer.fault import MQFaultStrategy
from pocketmq.client.producer.headers import SendHeaderTemplate
from pocketmq.client.producer.message_group import message_group_queue
from pocketmq.client.producer.topic_publish import TopicPublishInfo
from pocketmq.common.logs import get_logger
from pocketmq.common.message import encode_properties
from pocketmq.common.pop import ReceiptHandle
from pocketmq.common.record import decode_message_id
from pocketmq.common.subscription import SubscriptionData
from pocketmq.common.topic_config import PermName
from pocketmq.proxy.config import ProxyConfig
from pocketmq.proxy.convert import Outgoing
from pocketmq.proxy.errors import Code, ProxyError, broker_error
from pocketmq.proxy.local import LocalBroker
from pocketmq.remoting import route as rd
from pocketmq.remoting.acl import SessionCredentials
from pocketmq.remoting.admin_headers import GetSubscriptionGroupConfigRequestHeader, GetTopicStatsInfoRequestHeader
from pocketmq.remoting.codes import RequestCode, ResponseCode, SerializeType
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection
from pocketmq.remoting.errors import PocketMQError, RemotingConnectError
from pocketmq.remoting.headers import (
    ConsumerSendMsgBackRequestHeader,
    EndTransactionRequestHeader,
    RecallMessageRequestHeader,
    RecallMessageResponseHeader,
    SendMessageResponseHeader,
)
from pocketmq.remoting.pop_headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader,
)
from pocketmq.remoting.route import TopicRouteData

log = get_logger("pocketmq.proxy.backend")

INIT_MODE_MAX = 1
"""``ConsumeInitMode.MAX``: a group's first pop of a queue starts at its end, as RocketMQ's proxy asks."""
POP_RPC_MARGIN = 3.0
"""A pop's remoting request waits this much longer than the broker may hold it (s)."""
MAX_CACHED = 20_000
"""Topics, groups and send templates cached at most (RocketMQ's ``topicConfigCacheMaxNum``)."""
_SEND_OK = (ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT, ResponseCode.FLUSH_SLAVE_TIMEOUT,
            ResponseCode.SLAVE_NOT_AVAILABLE)


@dataclass(frozen=True, slots=True)
class SendOutcome:
    """A broker's answer to a send that reached it: ``code`` is a remoting response code in ``_SEND_OK``."""

    code: int
    queue: MessageQueue
    msg_id: str
    queue_offset: int
    recall_handle: str = ""

    @property
    def commit_log_offset(self) -> int:
        """The record's commit-log offset, from its offset message id (only a transaction's id needs it)."""
        return decode_message_id(self.msg_id)[2]


@dataclass(frozen=True, slots=True)
class PopResult:
    """Messages popped (each with its ``POP_CK``); ``polling_full`` when the broker parked too many pops."""

    messages: list[MessageExt]
    polling_full: bool = False


@dataclass(frozen=True, slots=True)
class GroupSettings:
    fifo: bool
    max_delivery_attempts: int


class _TtlCache:
    """A bounded map whose entries are read again after ``ttl`` seconds (oldest dropped when full)."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._items: OrderedDict[str, tuple[float, Any]] = OrderedDict()

    def get(self, key: str) -> Any | None:
        item = self._items.get(key)
        if item is None or item[0] < time.monotonic():
            return None
        return item[1]

    def put(self, key: str, value: Any) -> None:
        self._items[key] = (time.monotonic() + self.ttl, value)
        self._items.move_to_end(key)
        while len(self._items) > MAX_CACHED:
            self._items.popitem(last=False)


class _Routes:
    """The instance's member that receives every route change: publish infos are rebuilt from them."""

    def __init__(self) -> None:
        self.publish: dict[str, TopicPublishInfo] = {}

    def update_topic_route(self, topic: str, route: TopicRouteData | None) -> None:
        if route is None:
            self.publish.pop(topic, None)
        else:
            self.publish[topic] = TopicPublishInfo.from_route(topic, route)


class Backend:
    """Remoting calls to the cluster on behalf of gRPC clients (see the module docstring)."""

    def __init__(self, config: ProxyConfig, client_id: str, local: LocalBroker | None = None) -> None:
        self.config = config
        #: local mode: the broker this proxy runs in, whose handlers serve its requests in-process
        self.local = local
        credentials = (SessionCredentials(config.proxy_access_key, config.proxy_secret_key)
                       if config.proxy_access_key else None)
        self.client = ClientConfig(namesrv_addrs=tuple(a for a in config.namesrv_addr.split(";") if a),
                                   client_id=client_id, serialize_type=SerializeType.MSGPACK,
                                   credentials=credentials)
        self.instance = MQClientInstance(self.client)
        self.timeout = config.broker_request_timeout_mills / 1000
        self._routes = _Routes()
        self.instance.register_producer(f"PROXY_{client_id}", self._routes)
        self.fault = MQFaultStrategy()
        self._templates: OrderedDict[str, SendHeaderTemplate] = OrderedDict()
        ttl = config.metadata_cache_ttl_mills / 1000
        self._attributes = _TtlCache(ttl)
        self._groups = _TtlCache(ttl)

    async def start(self) -> None:
        self.instance.start()

    async def stop(self) -> None:
        if self.local is not None:
            self.local.close()
        await self.instance.shutdown()

    def on_request(self, code: int, handler: Callable[[RemotingCommand, Connection], Any]) -> None:
        """Serve a request code brokers push to the proxy (CHECK_TRANSACTION_STATE)."""
        self.instance.remoting.register(code, handler)

    # -- routes ------------------------------------------------------------------------------------------

    async def route(self, topic: str) -> TopicRouteData:
        """The topic's route from the name servers; TOPIC_NOT_FOUND when none knows it."""
        route = self.instance.routes.route_table.get(topic)
        if route is not None:
            return route
        try:
            await self.instance.refresher.refresh(topic, self.timeout, publish=False)
        except PocketMQError as exc:
            raise ProxyError(Code.PROXY_TIMEOUT, f"no name server answered the route of {topic}: {exc}") from None
        route = self.instance.routes.route_table.get(topic)
        if route is None:
            raise ProxyError(Code.TOPIC_NOT_FOUND, f"topic {topic} does not exist")
        return route

    def master_addr(self, broker_name: str) -> str:
        addr = self.instance.routes.master_addr(broker_name)
        if addr is None:
            raise ProxyError(Code.BAD_REQUEST, f"no master of broker {broker_name} is known")
        return addr

    async def invoke(self, addr: str, request: RemotingCommand, timeout: float | None = None) -> RemotingCommand:
        """One request to a broker; PROXY_TIMEOUT / INTERNAL_SERVER_ERROR for a transport failure."""
        wait = self.timeout if timeout is None else timeout
        if self.local is not None and self.local.serves(addr, request.code):
            return await self._local_request(self.local, addr, request, wait)
        try:
            conn = await self.instance.connect(addr, self.timeout)
            return await conn.request(request, wait)
        except RemotingConnectError as exc:
            raise ProxyError(Code.INTERNAL_SERVER_ERROR, f"cannot reach broker {addr}: {exc}") from None
        except PocketMQError as exc:
            raise ProxyError(Code.PROXY_TIMEOUT, f"broker {addr} did not answer: {exc}") from None

    @staticmethod
    async def _local_request(local: LocalBroker, addr: str, request: RemotingCommand,
                             timeout: float) -> RemotingCommand:
        """``request`` served by the broker this proxy runs in; PROXY_TIMEOUT past ``timeout``."""
        try:
            response = await local.request(request, timeout)
        except TimeoutError:
            raise ProxyError(Code.PROXY_TIMEOUT, f"broker {addr} did not answer in {timeout:g} s") from None
        if response is None:  # a oneway request: nothing to answer
            return request.response(ResponseCode.SUCCESS)
        return response

    def _request(self, code: int, fields: dict[str, str], body: bytes | None = None) -> RemotingCommand:
        return RemotingCommand.request(code, fields, body, serialize_type=self.client.serialize_type)

    # -- metadata ----------------------------------------------------------------------------------------

    async def topic_attributes(self, topic: str) -> Mapping[str, str]:
        """The topic's attributes (``message.type``) from a master that serves it; cached (read-only, shared)."""
        cached = self._attributes.get(topic)
        if cached is not None:
            return cached  # type: ignore[no-any-return]
        route = await self.route(topic)
        attributes: dict[str, str] = {}
        for broker in sorted(route.broker_datas, key=lambda b: b.broker_name):
            addr = broker.broker_addrs.get(0)
            if addr is None:
                continue
            request = self._request(RequestCode.GET_TOPIC_CONFIG, GetTopicStatsInfoRequestHeader(topic).to_fields())
            try:
                response = await self.invoke(addr, request)
            except ProxyError:
                continue
            if response.code == ResponseCode.SUCCESS and response.body:
                raw = rd.decode_body(bytes(response.body), response.serialize_type)
                found = raw.get("attributes") if isinstance(raw, dict) else None
                if isinstance(found, dict):
                    attributes = {str(k): str(v) for k, v in found.items()}
                break
        frozen = MappingProxyType(attributes)
        self._attributes.put(topic, frozen)
        return frozen

    async def group_settings(self, group: str, default_attempts: int) -> GroupSettings:
        """Whether ``group`` consumes in order (``consumeMessageOrderly``) and its ``retryMaxTimes`` + 1; cached.
        A group no broker knows gets the defaults (brokers create it on first use)."""
        cached = self._groups.get(group)
        if cached is not None:
            assert isinstance(cached, GroupSettings)
            return cached
        settings = GroupSettings(False, default_attempts)
        for addr in sorted(set(self.instance.routes.master_table.values())):
            request = self._request(RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG,
                                    GetSubscriptionGroupConfigRequestHeader(group).to_fields())
            try:
                response = await self.invoke(addr, request)
            except ProxyError:
                continue
            if response.code == ResponseCode.SUCCESS and response.body:
                raw = rd.decode_body(bytes(response.body), response.serialize_type)
                if isinstance(raw, dict):
                    settings = GroupSettings(bool(raw.get("consumeMessageOrderly", False)),
                                             int(raw.get("retryMaxTimes", default_attempts - 1)) + 1)
                break
        self._groups.put(group, settings)
        return settings

    # -- send --------------------------------------------------------------------------------------------

    async def publish_info(self, topic: str) -> TopicPublishInfo:
        await self.route(topic)
        info = self._routes.publish.get(topic)
        if info is None or not info.ok:
            raise ProxyError(Code.FORBIDDEN, "no writable queue")
        return info

    def _template(self, topic: str) -> SendHeaderTemplate:
        template = self._templates.get(topic)
        if template is None:
            template = self._templates[topic] = SendHeaderTemplate(topic, topic)
            while len(self._templates) > MAX_CACHED:
                self._templates.popitem(last=False)
        return template

    async def send(self, out: Outgoing) -> SendOutcome:
        """Store ``out`` on one queue (see the module docstring); ProxyError when no broker took it."""
        info = await self.publish_info(out.topic)
        if out.message_group:
            queue = message_group_queue(info.message_queues, out.message_group)
            return await self._send_to(out, info, queue)
        queue = self.fault.select_one_message_queue(info)
        try:
            return await self._send_to(out, info, queue)
        except _Unreachable:
            return await self._send_to(out, info, self.fault.select_one_message_queue(info, queue.broker_name))

    async def _send_to(self, out: Outgoing, info: TopicPublishInfo, queue: MessageQueue) -> SendOutcome:
        addr = info.master_addr(queue.broker_name)
        if addr is None:
            raise ProxyError(Code.FORBIDDEN, f"no master of {queue.broker_name}")
        fields = self._template(out.topic).fields(queue.queue_id, out.sys_flag, out.born_timestamp, 0,
                                                  encode_properties(out.properties))
        request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, fields, out.body,
                                          serialize_type=self.client.serialize_type)
        started = time.monotonic()
        if self.local is not None and self.local.serves(addr, RequestCode.SEND_MESSAGE_V2):
            response = await self._local_request(self.local, addr, request, self.timeout)
        else:
            response = await self._remote_send(out, queue, addr, request, started)
        self.fault.update_fault_item(queue.broker_name, (time.monotonic() - started) * 1000, False)
        if response.code not in _SEND_OK:
            raise broker_error(response.code, response.remark)
        header = SendMessageResponseHeader.from_command(response)
        return SendOutcome(response.code, queue, header.msg_id, header.queue_offset, header.recall_handle or "")

    async def _remote_send(self, out: Outgoing, queue: MessageQueue, addr: str, request: RemotingCommand,
                           started: float) -> RemotingCommand:
        try:
            conn = await self.instance.connect(addr, self.timeout)
        except PocketMQError as exc:
            self.fault.update_fault_item(queue.broker_name, 0, True, answered=False)
            self.instance.refresher.request(out.topic, publish=False)
            raise _Unreachable(Code.INTERNAL_SERVER_ERROR, f"cannot reach {queue.broker_name}: {exc}") from None
        try:
            return await conn.request(request, self.timeout)
        except PocketMQError as exc:
            self.fault.update_fault_item(queue.broker_name, (time.monotonic() - started) * 1000, True,
                                         answered=False)
            self.instance.refresher.request(out.topic, publish=False)
            raise ProxyError(Code.PROXY_TIMEOUT, f"{queue.broker_name} did not answer the send: {exc}") from None

    async def end_transaction(self, header: EndTransactionRequestHeader, broker_name: str) -> None:
        """END_TRANSACTION (oneway, as every RocketMQ producer sends it) to the half message's master."""
        addr = self.master_addr(broker_name)
        request = RemotingCommand.request(RequestCode.END_TRANSACTION, header.to_fields(), oneway=True,
                                          serialize_type=self.client.serialize_type)
        if self.local is not None and self.local.serves(addr, RequestCode.END_TRANSACTION):
            await self._local_request(self.local, addr, request, self.timeout)
            return
        try:
            conn = await self.instance.connect(addr, self.timeout)
            await conn.oneway(request)
        except PocketMQError as exc:
            raise ProxyError(Code.INTERNAL_SERVER_ERROR, f"cannot reach {broker_name}: {exc}") from None

    async def recall(self, topic: str, handle: str, broker_name: str) -> str:
        """RECALL_MESSAGE to ``broker_name``'s master: the recalled message's id; ProxyError for a refusal."""
        await self.route(topic)
        header = RecallMessageRequestHeader(topic, topic, handle, broker_name)
        response = await self.invoke(self.master_addr(broker_name),
                                     self._request(RequestCode.RECALL_MESSAGE, header.to_fields()))
        if response.code != ResponseCode.SUCCESS:
            raise broker_error(response.code, response.remark)
        return RecallMessageResponseHeader.from_command(response).msg_id

    # -- consume -----------------------------------------------------------------------------------------

    def readable_brokers(self, route: TopicRouteData) -> list[str]:
        names = {q.broker_name for q in route.queue_datas
                 if q.perm & PermName.PERM_READ and q.read_queue_nums > 0}
        return sorted(b.broker_name for b in route.broker_datas if b.broker_name in names and 0 in b.broker_addrs)

    async def pop(self, broker_name: str, group: str, subscription: SubscriptionData, *, max_nums: int,
                  invisible_ms: int, poll_ms: int, fifo: bool, attempt_id: str | None) -> PopResult:
        header = PopMessageRequestHeader(group, subscription.topic, -1, max_nums, invisible_ms, poll_ms,
                                         INIT_MODE_MAX, int(time.time() * 1000), subscription.expression_type,
                                         subscription.sub_string, fifo, attempt_id)
        request = self._request(RequestCode.POP_MESSAGE, header.to_fields())
        response = await self.invoke(self.master_addr(broker_name), request, poll_ms / 1000 + POP_RPC_MARGIN)
        if response.code == ResponseCode.POLLING_FULL:
            return PopResult([], polling_full=True)
        try:
            return PopResult(popped_messages(response, subscription.topic, broker_name, fifo).messages)
        except PocketMQError as exc:
            raise broker_error(getattr(exc, "code", ResponseCode.SYSTEM_ERROR), str(exc)) from None

    async def ack(self, group: str, topic: str, handle: ReceiptHandle) -> None:
        header = AckMessageRequestHeader(group, handle.real_topic(topic, group), handle.queue_id,
                                         handle.extra_info(), handle.offset)
        response = await self.invoke(self.master_addr(handle.broker_name),
                                     self._request(RequestCode.ACK_MESSAGE, header.to_fields()))
        if response.code != ResponseCode.SUCCESS:
            raise _handle_error(response)

    async def change_invisible(self, group: str, topic: str, handle: ReceiptHandle, invisible_ms: int) -> ReceiptHandle:
        """The new handle (same message, new pop time and invisible time)."""
        header = ChangeInvisibleTimeRequestHeader(group, handle.real_topic(topic, group), handle.queue_id,
                                                  handle.extra_info(), handle.offset, invisible_ms)
        response = await self.invoke(self.master_addr(handle.broker_name),
                                     self._request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header.to_fields()))
        if response.code != ResponseCode.SUCCESS:
            raise _handle_error(response)
        answer = ChangeInvisibleTimeResponseHeader.from_command(response)
        return ReceiptHandle(handle.start_offset, answer.pop_time, answer.invisible_time, answer.revive_qid,
                             handle.topic_type, handle.broker_name, handle.queue_id, handle.offset,
                             handle.commit_log_offset)

    async def send_to_dlq(self, group: str, topic: str, handle: ReceiptHandle, message_id: str) -> None:
        """CONSUMER_SEND_MSG_BACK with delay level -1 (straight to ``%DLQ%<group>``), then the ack."""
        if handle.commit_log_offset < 0:
            raise ProxyError(Code.INVALID_RECEIPT_HANDLE, "commit log offset is empty")
        header = ConsumerSendMsgBackRequestHeader(handle.commit_log_offset, group, -1, message_id,
                                                  handle.real_topic(topic, group), False, 0)
        response = await self.invoke(self.master_addr(handle.broker_name),
                                     self._request(RequestCode.CONSUMER_SEND_MSG_BACK, header.to_fields()))
        if response.code != ResponseCode.SUCCESS:
            raise broker_error(response.code, response.remark)
        await self.ack(group, topic, handle)

    # -- client registrations ----------------------------------------------------------------------------

    async def heartbeat(self, addr: str, body: bytes, language: int) -> bool:
        request = RemotingCommand.request(RequestCode.HEART_BEAT, None, body, serialize_type=SerializeType.JSON)
        request.language = language
        try:
            response = await self.invoke(addr, request)
        except ProxyError:
            return False
        return response.code == ResponseCode.SUCCESS

    async def unregister(self, addr: str, fields: dict[str, str]) -> None:
        with contextlib.suppress(ProxyError):
            await self.invoke(addr, self._request(RequestCode.UNREGISTER_CLIENT, fields))

    def broker_addrs(self, *, masters_only: bool) -> list[str]:
        if masters_only:
            return sorted(set(self.instance.routes.master_table.values()))
        return self.instance.routes.all_broker_addrs()


class _Unreachable(ProxyError):
    """A send that could not connect to its broker: nothing was delivered, another broker may take it."""


def _handle_error(response: RemotingCommand) -> ProxyError:
    """An ack or change of invisible time the broker refused: a handle it does not know (NO_MESSAGE,
    INVALID_PARAMETER) is INVALID_RECEIPT_HANDLE, as the Java proxy reports an expired or unknown handle."""
    if response.code in (ResponseCode.NO_MESSAGE, ResponseCode.INVALID_PARAMETER):
        return ProxyError(Code.INVALID_RECEIPT_HANDLE, response.remark or "the receipt handle is not valid")
    return broker_error(response.code, response.remark)
