"""``PullConsumer``: the application chooses queues and offsets and pulls itself (RocketMQ's
``DefaultMQPullConsumer``).

Usage::

    async with PullConsumer("my-group", namesrv_addr="127.0.0.1:9876") as consumer:
        for mq in await consumer.fetch_subscribe_message_queues("TopicTest"):
            offset = max(await consumer.fetch_consume_offset(mq), 0)
            result = await consumer.pull(mq, "TagA || TagB", offset, 32)
            for msg in result.messages:
                ...
            await consumer.update_consume_offset(mq, result.next_begin_offset)

``pull(..., block=True)`` is a long poll: the broker holds the request (SUSPEND flag) until a message
arrives on the queue or ``timeout`` passes, and answers ``NO_NEW_MSG`` then. Every pull carries its
expression (SUBSCRIPTION flag), so the broker filters by tag hash code and this client again by tag string.
Pulls follow the broker's ``suggestWhichBrokerId`` and fall back to any live member of the broker group
(:class:`~client.consumer_api.ConsumerAPI`), so a pull consumer keeps reading from the slave while the
master is down.

The group joins the client instance's heartbeats (``CONSUME_ACTIVELY``, each topic it has touched
subscribed with ``*``), as the Java pull consumer does. Offsets are the application's business:
:meth:`PullConsumer.fetch_consume_offset` reads the group's committed offset from the broker and
:meth:`PullConsumer.update_consume_offset` commits one (a request that waits for the broker's answer).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from types import TracebackType
from typing import Any

import structlog

from client.consume_pull import PullResult
from client.consume_types import ConsumeFromWhere, ConsumeType, MessageModel
from client.consumer_api import ConsumerAPI, ConsumerStateError, subscribe_queues
from client.errors import MQClientError, NoRouteError
from client.instance import ClientConfig, MQClientInstance, acquire_instance, parse_namesrv_addr
from client.message import MessageQueue
from client.pull_decode import MessageExt
from client.subscription import build_subscription, consumer_data_json
from client.uniq import client_id
from client.validators import check_group, check_topic
from common.subscription import SubscriptionData
from common.sysflag import pull_sys_flag
from remoting.codes import SerializeType

__all__ = ["BROKER_SUSPEND_MAX", "PULL_RPC_MARGIN", "PullConsumer"]

log = structlog.get_logger("client.pull_consumer")

#: How long a ``block=True`` pull lets the broker hold it when no ``timeout`` is given (s).
BROKER_SUSPEND_MAX = 20.0
#: A long-polled pull's RPC waits this much longer than the broker may hold it (s).
PULL_RPC_MARGIN = 10.0
#: Topics announced in heartbeats at most; parsed expressions cached at most.
MAX_TOPICS = 1024
_MAX_CACHED_EXPRESSIONS = 1024


class _State(enum.Enum):
    CREATED = "created"
    RUNNING = "running"
    STOPPED = "stopped"


class PullConsumer:
    """An asyncio pull consumer; see the module docstring. Create it anywhere, start it on a loop."""

    def __init__(
        self,
        group: str,
        *,
        namesrv_addr: str | Iterable[str] | None = None,
        instance_name: str | None = None,
        client_ip: str | None = None,
        message_model: MessageModel = MessageModel.CLUSTERING,
        pull_timeout: float = 10.0,
        poll_name_server_interval: float = 30.0,
        heartbeat_broker_interval: float = 30.0,
        namesrv_timeout: float = 3.0,
        connect_timeout: float = 3.0,
        serialize_type: int = SerializeType.MSGPACK,
    ) -> None:
        self.group = check_group(group)
        if pull_timeout <= 0:
            raise ValueError("pull_timeout must be positive")
        self.message_model = message_model
        self.pull_timeout = pull_timeout
        self.client_config = ClientConfig(
            namesrv_addrs=parse_namesrv_addr(namesrv_addr),
            client_id=client_id(ip=client_ip, instance_name=instance_name),
            serialize_type=int(serialize_type),
            poll_name_server_interval=poll_name_server_interval,
            heartbeat_broker_interval=heartbeat_broker_interval,
            namesrv_timeout=namesrv_timeout,
            connect_timeout=connect_timeout,
        )
        self._state = _State.CREATED
        self._instance: MQClientInstance | None = None
        self._api: ConsumerAPI | None = None
        self._topics: dict[str, SubscriptionData] = {}
        self._expressions: dict[tuple[str, str], SubscriptionData] = {}
        self._log = log.bind(group=self.group)

    # -- lifecycle --------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Join (or create) the loop's client instance and register the group. Idempotent while running."""
        if self._state is _State.RUNNING:
            return
        if self._state is not _State.CREATED:
            raise ConsumerStateError("the consumer has been shut down; create a new one")
        instance = acquire_instance(self.client_config)
        try:
            instance.register_consumer(self.group, self)
        except MQClientError:
            if not instance.producer_groups and not instance.consumer_groups:
                await instance.shutdown()
            raise
        self._instance = instance
        self._api = ConsumerAPI(instance, self.group, serialize_type=self.client_config.serialize_type,
                                timeout=self.client_config.namesrv_timeout)
        self._state = _State.RUNNING
        self._log.info("pull_consumer_started", client_id=instance.client_id)

    async def shutdown(self) -> None:
        """Unregister the group from every broker and release the client instance."""
        if self._state is _State.CREATED:
            self._state = _State.STOPPED
            return
        if self._state is not _State.RUNNING:
            return
        self._state = _State.STOPPED
        assert self._instance is not None
        await self._instance.unregister_consumer(self.group)
        self._log.info("pull_consumer_stopped")

    async def __aenter__(self) -> PullConsumer:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.shutdown()

    @property
    def running(self) -> bool:
        return self._state is _State.RUNNING

    @property
    def instance(self) -> MQClientInstance:
        """The shared client instance; only while started."""
        if self._instance is None:
            raise ConsumerStateError("the consumer has not been started")
        return self._instance

    @property
    def api(self) -> ConsumerAPI:
        if self._api is None or self._state is not _State.RUNNING:
            raise ConsumerStateError("the consumer is not running")
        return self._api

    # -- what the client instance asks (ConsumerRegistration) ---------------------------------------------

    def consumer_data(self) -> dict[str, Any]:
        return consumer_data_json(
            self.group, list(self._topics.values()), consume_type=ConsumeType.CONSUME_ACTIVELY,
            message_model=self.message_model, consume_from_where=ConsumeFromWhere.LAST_OFFSET,
        )

    def subscribed_topics(self) -> list[str]:
        return list(self._topics)

    def rebalance_soon(self) -> None:
        """A pull consumer has no rebalance: the application owns its queues."""

    # -- queues -----------------------------------------------------------------------------------------

    def _touch(self, topic: str) -> None:
        if topic not in self._topics and len(self._topics) < MAX_TOPICS:
            self._topics[topic] = build_subscription(topic, "*")

    async def fetch_subscribe_message_queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic``, asked of a name server now (raises :class:`NoRouteError` when
        it has none)."""
        check_topic(topic)
        instance = self.api.instance
        await instance.refresh_subscribed_topic(topic, self.client_config.namesrv_timeout)
        route = instance.subscribe_route(topic)
        queues = subscribe_queues(topic, route) if route is not None else []
        if not queues:
            raise NoRouteError(topic, "no readable queue")
        self._touch(topic)
        return queues

    # -- pulling ----------------------------------------------------------------------------------------

    def _subscription(self, topic: str, expression: str) -> SubscriptionData:
        key = (topic, expression)
        sub = self._expressions.get(key)
        if sub is None:
            sub = build_subscription(topic, expression)
            if len(self._expressions) >= _MAX_CACHED_EXPRESSIONS:
                self._expressions.clear()
            self._expressions[key] = sub
        return sub

    async def pull(
        self,
        mq: MessageQueue,
        subscription_expression: str | None,
        offset: int,
        max_nums: int = 32,
        *,
        block: bool = False,
        timeout: float | None = None,
    ) -> PullResult:
        """Pull up to ``max_nums`` messages of ``mq`` from ``offset`` that match the expression (``"*"``,
        ``None`` or ``"tagA || tagB"``).

        ``block=False``: one request, answered at once (``timeout`` is its budget, default
        ``pull_timeout``). ``block=True``: a long poll; the broker holds the request up to ``timeout``
        (default :data:`BROKER_SUSPEND_MAX`) until a message arrives, then answers ``NO_NEW_MSG``.
        Raises the broker's error for answers other than the four pull statuses.
        """
        if offset < 0:
            raise ValueError("offset must not be negative")
        if max_nums < 1:
            raise ValueError("max_nums must be at least 1")
        if timeout is not None and timeout <= 0:
            raise ValueError("timeout must be positive")
        api = self.api
        sub = self._subscription(mq.topic, subscription_expression or "*")
        self._touch(mq.topic)
        if block:
            hold = BROKER_SUSPEND_MAX if timeout is None else timeout
            suspend_ms, rpc_timeout = max(int(hold * 1000), 1), hold + PULL_RPC_MARGIN
        else:
            suspend_ms, rpc_timeout = 0, self.pull_timeout if timeout is None else timeout
        flag = pull_sys_flag(commit_offset=False, suspend=block, subscription=True)
        return await api.pull(mq, sub, offset, max_nums, sys_flag=flag, commit_offset=0,
                              suspend_timeout_ms=suspend_ms, timeout=rpc_timeout, post_subscription=True)

    # -- offsets ----------------------------------------------------------------------------------------

    async def fetch_consume_offset(self, mq: MessageQueue) -> int:
        """The group's committed offset of ``mq`` on the broker, ``-1`` when there is none."""
        return await self.api.query_consumer_offset(mq)

    async def update_consume_offset(self, mq: MessageQueue, offset: int) -> None:
        """Commit ``offset`` (the next one to consume) for the group on the broker, and wait for it."""
        if offset < 0:
            raise ValueError("offset must not be negative")
        await self.api.update_consumer_offset(mq, offset, oneway=False)

    async def min_offset(self, mq: MessageQueue) -> int:
        return await self.api.min_offset(mq)

    async def max_offset(self, mq: MessageQueue) -> int:
        return await self.api.max_offset(mq)

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """The first offset of ``mq`` stored at or after ``timestamp_ms`` (epoch ms)."""
        return await self.api.search_offset(mq, timestamp_ms)

    async def send_message_back(self, msg: MessageExt, delay_level: int = 0, *,
                                max_reconsume_times: int = 16) -> None:
        """Hand a message that failed back to the broker for a later retry (``%RETRY%<group>``, delay level
        ``3 + reconsume times`` when ``delay_level`` is 0), or to ``%DLQ%<group>`` once it has been retried
        ``max_reconsume_times`` times or ``delay_level`` is negative."""
        await self.api.send_back(msg, delay_level, max_reconsume_times)
