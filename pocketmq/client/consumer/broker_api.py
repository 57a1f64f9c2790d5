"""The broker requests of a consumer (RocketMQ's ``MQClientAPIImpl`` consumer half and ``PullAPIWrapper``), and
the JSON bodies of those that carry one (GET_CONSUMER_LIST_BY_GROUP, LOCK_BATCH_MQ / UNLOCK_BATCH_MQ).

:class:`ConsumerAPI` is shared by :class:`~pocketmq.client.consumer.pull.PullConsumer` and
:class:`~pocketmq.client.consumer.push.PushConsumer`. It finds the broker address for each request in the client
instance's broker tables (:class:`~pocketmq.client.core.route_table.RouteTable`):

* pulls go to the member the broker last suggested for that queue (``suggestWhichBrokerId``, remembered
  per queue), else that id + 1, else any member of the broker group; a member that refused the connection
  (or dropped it) is skipped for :data:`UNREACHABLE_SKIP` seconds and the next member is tried at once, so
  a consumer keeps reading from the slave while the master is down. A pull sent to a slave never carries
  the COMMIT_OFFSET flag (slaves do not store committed offsets from pulls);
* offset queries and commits go to the master, or to any member of the group when it has no master
  (commits then live on the slave, as in RocketMQ);
* queue locks (orderly consumers) and ``CONSUMER_SEND_MSG_BACK`` go to the master only.

Requests whose bodies are JSON (consumer list, locks) are sent with JSON headers as a Java client does,
so the broker answers with JSON bodies; the others use the client's serialize type.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Sequence
from typing import Any

from pocketmq.client.consumer.allocate import sort_queues
from pocketmq.client.consumer.pull_result import PullResult, pull_result_from_response
from pocketmq.client.core.errors import BrokerNotFoundError, MQClientError, NoRouteError
from pocketmq.client.core.instance import MQClientInstance
from pocketmq.client.core.message import MessageQueue
from pocketmq.client.core.message_ext import MessageExt
from pocketmq.client.core.route_table import FindBrokerResult
from pocketmq.common.logs import get_logger
from pocketmq.common.subscription import SubscriptionData
from pocketmq.common.sysflag import PullSysFlag
from pocketmq.common.topic_config import PermName
from pocketmq.remoting.codes import RequestCode, ResponseCode, SerializeType
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import (
    InvalidHeaderError,
    PocketMQError,
    RemotingClosedError,
    RemotingConnectError,
    error_for_response,
)
from pocketmq.remoting.fastjson import FastJsonDecodeError, dumps, loads
from pocketmq.remoting.headers import (
    ConsumerGroupRequestHeader,
    ConsumerSendMsgBackRequestHeader,
    OffsetResponseHeader,
    PullMessageRequestHeader,
    QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader,
    TopicQueueRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from pocketmq.remoting.route import MASTER_ID, TopicRouteData

__all__ = [
    "UNREACHABLE_SKIP",
    "ConsumerAPI",
    "RebalanceBodyError",
    "decode_consumer_id_list",
    "decode_lock_batch_response",
    "encode_lock_batch_request",
    "subscribe_queues",
]

log = get_logger("pocketmq.client.broker_api")

#: A broker address that refused or dropped a connection is passed over this long (s) while its group has
#: another member.
UNREACHABLE_SKIP = 5.0
#: Remembered unreachable addresses and per-queue suggestions at most (bounds, not caches).
_MAX_TRACKED = 65536


class RebalanceBodyError(MQClientError):
    """A consumer-list or lock response body is not the JSON shape RocketMQ defines."""

    retriable = False


def subscribe_queues(topic: str, route: TopicRouteData) -> list[MessageQueue]:
    """The queues a consumer may read (RocketMQ's ``topicRouteData2TopicSubscribeInfo``): ``readQueueNums``
    queues of every broker group whose queue data is readable, in Java's queue order."""
    queues = [
        MessageQueue(topic, data.broker_name, queue_id)
        for data in route.queue_datas
        if data.perm & PermName.PERM_READ
        for queue_id in range(data.read_queue_nums)
    ]
    return sort_queues(queues)


class ConsumerAPI:
    """Broker requests for one consumer group over a client instance (see the module docstring)."""

    def __init__(self, instance: MQClientInstance, group: str, *, serialize_type: int, timeout: float) -> None:
        self.instance = instance
        self.group = group
        self.serialize_type = serialize_type
        #: Budget of one non-pull request (offsets, locks, send-back).
        self.timeout = timeout
        self._suggested: dict[MessageQueue, int] = {}
        self._unreachable: dict[str, float] = {}

    # -- addresses --------------------------------------------------------------------------------------

    def _skipped(self) -> list[str]:
        if not self._unreachable:
            return []
        now = time.monotonic()
        for addr in [a for a, until in self._unreachable.items() if until <= now]:
            del self._unreachable[addr]
        return list(self._unreachable)

    def mark_unreachable(self, addr: str) -> None:
        if len(self._unreachable) >= _MAX_TRACKED:
            self._unreachable.clear()
        self._unreachable[addr] = time.monotonic() + UNREACHABLE_SKIP

    async def _member(self, mq: MessageQueue, broker_id: int = MASTER_ID) -> FindBrokerResult:
        """The member of ``mq``'s broker group to ask; the topic's route is fetched first when the group is
        unknown (a queue named by the application before any route was fetched)."""
        routes = self.instance.routes
        found = routes.find_broker_address_in_subscribe(mq.broker_name, broker_id, skip=self._skipped())
        if found is None:
            await self._refresh(mq.topic)
            found = routes.find_broker_address_in_subscribe(mq.broker_name, broker_id, skip=self._skipped())
        if found is None:
            raise BrokerNotFoundError(mq.broker_name)
        return found

    async def _master(self, mq: MessageQueue) -> str:
        addr = self.instance.routes.master_addr(mq.broker_name)
        if addr is None:
            await self._refresh(mq.topic)
            addr = self.instance.routes.master_addr(mq.broker_name)
        if addr is None:
            raise BrokerNotFoundError(mq.broker_name)
        return addr

    async def _refresh(self, topic: str) -> None:
        try:
            await self.instance.refresher.refresh(topic, self.timeout, publish=False)
        except MQClientError as exc:
            log.debug("route_refresh_failed", topic=topic, error=str(exc))

    async def fetch_subscribe_queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic``, asked of a name server now (raises :class:`NoRouteError` when it has
        none)."""
        await self.instance.refresher.refresh(topic, self.timeout, publish=False)
        route = self.instance.routes.subscribe_route(topic)
        queues = subscribe_queues(topic, route) if route is not None else []
        if not queues:
            raise NoRouteError(topic, "no readable queue")
        return queues

    def suggested_broker_id(self, mq: MessageQueue) -> int:
        """The member the broker last suggested for ``mq`` (0, the master, until one did)."""
        return self._suggested.get(mq, MASTER_ID)

    def forget_queue(self, mq: MessageQueue) -> None:
        self._suggested.pop(mq, None)

    async def _invoke(self, addr: str, request: RemotingCommand, timeout: float) -> RemotingCommand:
        try:
            conn = await self.instance.connect(addr, timeout)
            return await conn.request(request, timeout)
        except (RemotingConnectError, RemotingClosedError):
            self.mark_unreachable(addr)
            raise

    async def _call(self, addr: str, request: RemotingCommand,
                    ok: frozenset[int] = frozenset({ResponseCode.SUCCESS})) -> RemotingCommand:
        """:meth:`_invoke` with the consumer's timeout; an answer whose code is not in ``ok`` raises the
        error its code stands for."""
        response = await self._invoke(addr, request, self.timeout)
        if response.code not in ok:
            raise error_for_response(response.code, response.remark, addr)
        return response

    async def _oneway(self, addr: str, request: RemotingCommand) -> None:
        request.flag |= 2
        try:
            conn = await self.instance.connect(addr, self.timeout)
            await conn.oneway(request)
        except (RemotingConnectError, RemotingClosedError):
            self.mark_unreachable(addr)
            raise

    def _request(self, code: int, fields: dict[str, str] | None, body: bytes | None = None, *,
                 json: bool = False) -> RemotingCommand:
        serialize_type = SerializeType.JSON if json else self.serialize_type
        return RemotingCommand.request(code, fields, body, serialize_type=serialize_type)

    # -- pulling ----------------------------------------------------------------------------------------

    async def pull(
        self,
        mq: MessageQueue,
        subscription: SubscriptionData,
        offset: int,
        max_nums: int,
        *,
        sys_flag: int,
        commit_offset: int,
        suspend_timeout_ms: int,
        timeout: float,
        post_subscription: bool,
    ) -> PullResult:
        """One PULL_MESSAGE for ``mq`` from ``offset`` (see the module docstring for the member chosen).

        ``post_subscription`` sends the expression (SUBSCRIPTION flag) instead of relying on the one the
        group's heartbeat registered. The result's messages are decoded and filtered by tag string.
        Raises the broker's error for a non-pull answer, and transport errors when no member answered.
        """
        members = len(self.instance.routes.broker_addr_table.get(mq.broker_name, {})) or 1
        last_error: Exception | None = None
        for _ in range(members):
            found = await self._member(mq, self.suggested_broker_id(mq))
            header = PullMessageRequestHeader(
                self.group, mq.topic, mq.queue_id, offset, max_nums, _member_flag(sys_flag, found, post_subscription),
                commit_offset, suspend_timeout_ms, subscription.sub_version,
                subscription.sub_string if post_subscription else None, subscription.expression_type,
            )
            try:
                response = await self._invoke(found.addr, self._request(RequestCode.PULL_MESSAGE, header.to_fields()),
                                              timeout)
            except (RemotingConnectError, RemotingClosedError) as exc:
                # Try another member of the group now; the route is refreshed for the next rounds.
                log.info("pull_member_unreachable", group=self.group, topic=mq.topic, broker=mq.broker_name,
                         broker_id=found.broker_id, addr=found.addr, error=str(exc))
                last_error = exc
                self._suggested.pop(mq, None)
                self.instance.refresher.request(mq.topic, publish=False)
                continue
            return self._pull_result(mq, subscription, response, found.addr)
        assert last_error is not None
        raise last_error

    def _pull_result(
        self, mq: MessageQueue, subscription: SubscriptionData, response: RemotingCommand, addr: str
    ) -> PullResult:
        """A member's answer to a pull, decoded; its ``suggestWhichBrokerId`` is remembered for ``mq``."""
        try:
            result = pull_result_from_response(
                response.code, response.ext_fields, response.body, message_queue=mq, subscription=subscription,
                remark=response.remark, addr=addr,
            )
        except PocketMQError:
            # A member that refuses (a slave without the topic yet, say) is not asked again because of an old
            # suggestion: the next pull starts from the master.
            self._suggested.pop(mq, None)
            raise
        if len(self._suggested) >= _MAX_TRACKED:
            self._suggested.clear()
        self._suggested[mq] = result.suggest_which_broker_id
        return result

    # -- offsets ----------------------------------------------------------------------------------------

    async def query_consumer_offset(self, mq: MessageQueue) -> int:
        """The group's committed offset of ``mq`` on the broker, or ``-1`` when it has none (QUERY_NOT_FOUND)."""
        addr = (await self._member(mq)).addr
        header = QueryConsumerOffsetRequestHeader(self.group, mq.topic, mq.queue_id)
        response = await self._invoke(addr, self._request(RequestCode.QUERY_CONSUMER_OFFSET, header.to_fields()),
                                      self.timeout)
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return -1
        return _offset(response, addr)

    async def update_consumer_offset(self, mq: MessageQueue, offset: int, *, oneway: bool) -> None:
        """UPDATE_CONSUMER_OFFSET to the master (or any member when there is none)."""
        addr = (await self._member(mq)).addr
        header = UpdateConsumerOffsetRequestHeader(self.group, mq.topic, mq.queue_id, offset)
        request = self._request(RequestCode.UPDATE_CONSUMER_OFFSET, header.to_fields())
        if oneway:
            await self._oneway(addr, request)
            return
        await self._call(addr, request)

    async def _queue_offset(self, code: int, mq: MessageQueue, timestamp: int | None = None) -> int:
        addr = (await self._member(mq)).addr
        if timestamp is None:
            fields = TopicQueueRequestHeader(mq.topic, mq.queue_id).to_fields()
        else:
            fields = SearchOffsetRequestHeader(mq.topic, mq.queue_id, timestamp).to_fields()
        response = await self._invoke(addr, self._request(code, fields), self.timeout)
        return _offset(response, addr)

    async def max_offset(self, mq: MessageQueue) -> int:
        """GET_MAX_OFFSET: one past the last message of ``mq``."""
        return await self._queue_offset(RequestCode.GET_MAX_OFFSET, mq)

    async def min_offset(self, mq: MessageQueue) -> int:
        """GET_MIN_OFFSET: the first offset still stored."""
        return await self._queue_offset(RequestCode.GET_MIN_OFFSET, mq)

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP: the first offset stored at or after ``timestamp_ms``."""
        return await self._queue_offset(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, mq, timestamp_ms)

    async def check_client_config(self, subscription: SubscriptionData) -> None:
        """CHECK_CLIENT_CONFIG (46) to one broker of the topic, as a Java push consumer sends at start for each
        SQL92 subscription: raises the broker's refusal (``enablePropertyFilter=false``: SYSTEM_ERROR; an
        expression it cannot compile: SUBSCRIPTION_PARSE_FAILED). Without a route nothing is asked."""
        route = self.instance.routes.subscribe_route(subscription.topic)
        for broker in route.broker_datas if route is not None else ():
            addr = broker.master_addr() or broker.select_broker_addr()
            if addr is None:
                continue
            body = dumps({"clientId": self.instance.client_id, "group": self.group,
                          "subscriptionData": subscription.to_json_dict()})
            await self._call(addr, self._request(RequestCode.CHECK_CLIENT_CONFIG, None, body, json=True))
            return

    # -- membership and locks ---------------------------------------------------------------------------

    async def consumer_id_list(self, topic: str) -> list[str]:
        """The group's consumers: GET_CONSUMER_LIST_BY_GROUP to every broker group of ``topic`` at once (its
        master, else a live member), and the union of the answers; a broker that knows no consumer of the
        group (its SYSTEM_ERROR answer) adds none. Raises the last error when no broker answered.

        Every broker, not one: a broker that has just restarted knows only the consumers that have
        heartbeated it since, and one consumer that asked it alone took every queue while the others kept
        theirs (``rmq-chaos`` found four queues read twice for 20 s after a master restart)."""
        route = self.instance.routes.subscribe_route(topic)
        if route is None or not route.broker_datas:
            raise BrokerNotFoundError(f"(any broker of {topic})")
        addrs = [a for a in (b.master_addr() or b.select_broker_addr() for b in route.broker_datas) if a is not None]
        if not addrs:
            raise BrokerNotFoundError(f"(any broker of {topic})")
        answers = await asyncio.gather(*(self._consumer_ids_of(addr) for addr in addrs), return_exceptions=True)
        ids: set[str] = set()
        last_error: BaseException | None = None
        answered = False
        for answer in answers:
            if isinstance(answer, BaseException):
                if not isinstance(answer, PocketMQError):
                    raise answer
                last_error = answer
                continue
            answered = True
            ids.update(answer)
        if not answered and last_error is not None:
            raise last_error
        return sorted(ids)

    async def _consumer_ids_of(self, addr: str) -> list[str]:
        fields = ConsumerGroupRequestHeader(self.group).to_fields()
        response = await self._invoke(
            addr, self._request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, dict(fields), json=True), self.timeout)
        if response.code == ResponseCode.SUCCESS:
            return decode_consumer_id_list(response.body)
        if response.code == ResponseCode.SYSTEM_ERROR:
            return []
        raise error_for_response(response.code, response.remark, addr)

    async def lock_batch(self, mqs: Sequence[MessageQueue], client_id: str) -> set[MessageQueue]:
        """LOCK_BATCH_MQ for queues of one broker group, on its master: the queues this client now holds."""
        if not mqs:
            return set()
        return decode_lock_batch_response((await self._lock_request(RequestCode.LOCK_BATCH_MQ, mqs, client_id)).body)

    async def unlock_batch(self, mqs: Sequence[MessageQueue], client_id: str) -> None:
        """UNLOCK_BATCH_MQ for queues of one broker group, on its master."""
        if mqs:
            await self._lock_request(RequestCode.UNLOCK_BATCH_MQ, mqs, client_id)

    async def _lock_request(self, code: int, mqs: Sequence[MessageQueue], client_id: str) -> RemotingCommand:
        addr = await self._master(mqs[0])
        body = encode_lock_batch_request(self.group, client_id, mqs)
        return await self._call(addr, self._request(code, None, body, json=True))

    # -- retry ------------------------------------------------------------------------------------------

    async def send_back(self, msg: MessageExt, delay_level: int, max_reconsume_times: int) -> None:
        """CONSUMER_SEND_MSG_BACK (36) to the master of the message's broker: the broker finds the message by
        its commit-log offset and writes it to ``%RETRY%<group>`` (or ``%DLQ%<group>`` once
        ``max_reconsume_times`` is reached, or at once when ``delay_level`` is negative).

        The broker answers a send-back as it answers a send: FLUSH_DISK_TIMEOUT, SLAVE_NOT_AVAILABLE and
        FLUSH_SLAVE_TIMEOUT mean the retry message *is stored* (on the master) but not yet flushed or
        replicated. That counts as done here: producing it to ``%RETRY%`` again would store it twice."""
        addr = await self._master(MessageQueue(msg.topic, msg.broker_name, msg.queue_id))
        header = ConsumerSendMsgBackRequestHeader(
            msg.commit_log_offset, self.group, delay_level, origin_msg_id=msg.msg_id, origin_topic=msg.topic,
            unit_mode=False, max_reconsume_times=max_reconsume_times,
        )
        await self._call(addr, self._request(RequestCode.CONSUMER_SEND_MSG_BACK, header.to_fields()),
                         _SEND_BACK_STORED)


_SEND_BACK_STORED = frozenset({ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT,
                               ResponseCode.SLAVE_NOT_AVAILABLE, ResponseCode.FLUSH_SLAVE_TIMEOUT})
"""Send-back answers after which the retry message is in the broker's commit log."""


def _member_flag(sys_flag: int, member: FindBrokerResult, post_subscription: bool) -> int:
    """The pull's sysFlag for this member: never COMMIT_OFFSET to a slave; SUBSCRIPTION as asked."""
    flag = sys_flag
    if member.slave:
        flag &= ~PullSysFlag.COMMIT_OFFSET
    if post_subscription:
        flag |= PullSysFlag.SUBSCRIPTION
    else:
        flag &= ~PullSysFlag.SUBSCRIPTION
    return int(flag)


def _offset(response: RemotingCommand, addr: str) -> int:
    if response.code != ResponseCode.SUCCESS:
        raise error_for_response(response.code, response.remark, addr)
    try:
        return OffsetResponseHeader.from_command(response).offset
    except InvalidHeaderError as exc:
        raise InvalidHeaderError(f"offset response from {addr}: {exc}") from None


# -- bodies ----------------------------------------------------------------------------------------------


def _queue_json(mq: MessageQueue) -> dict[str, Any]:
    return {"brokerName": mq.broker_name, "queueId": mq.queue_id, "topic": mq.topic}


def _queue_from_json(item: Any) -> MessageQueue:
    if not isinstance(item, dict):
        raise RebalanceBodyError(f"a message queue must be an object, got {item!r}")
    try:
        return MessageQueue(str(item["topic"]), str(item["brokerName"]), int(item["queueId"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise RebalanceBodyError(f"bad message queue {item!r}: {exc}") from None


def _load_object(body: bytes | bytearray | memoryview | None, what: str) -> dict[Any, Any]:
    if not body:
        raise RebalanceBodyError(f"{what} response has no body")
    try:
        data = loads(body)
    except FastJsonDecodeError as exc:
        raise RebalanceBodyError(f"{what} body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise RebalanceBodyError(f"{what} body is not a JSON object")
    return data


def decode_consumer_id_list(body: bytes | bytearray | memoryview | None) -> list[str]:
    """The ids in a GET_CONSUMER_LIST_BY_GROUP response: ``{"consumerIdList":["ip@pid",...]}``."""
    ids = _load_object(body, "consumer list").get("consumerIdList")
    if ids is None:
        return []
    if not isinstance(ids, list):
        raise RebalanceBodyError("consumerIdList is not a list")
    return [str(cid) for cid in ids]


def encode_lock_batch_request(consumer_group: str, client_id: str, mqs: Iterable[MessageQueue]) -> bytes:
    """The body of LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42)."""
    return dumps(
        {
            "consumerGroup": consumer_group,
            "clientId": client_id,
            "mqSet": [_queue_json(mq) for mq in sort_queues(mqs)],
        }
    )


def decode_lock_batch_response(body: bytes | bytearray | memoryview | None) -> set[MessageQueue]:
    """The queues a LOCK_BATCH_MQ response says this client now holds: ``{"lockOKMQSet":[...]}``."""
    items = _load_object(body, "lock batch").get("lockOKMQSet")
    if items is None:
        return set()
    if not isinstance(items, list):
        raise RebalanceBodyError("lockOKMQSet is not a list")
    return {_queue_from_json(item) for item in items}
