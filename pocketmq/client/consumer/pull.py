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
(:class:`~pocketmq.client.consumer.broker_api.ConsumerAPI`), so a pull consumer keeps reading from the slave while the
master is down.

The group joins the client instance's heartbeats (``CONSUME_ACTIVELY``, each topic it has touched
subscribed with ``*``), as the Java pull consumer does. Offsets are the application's business:
:meth:`PullConsumer.fetch_consume_offset` reads the group's committed offset from the broker and
:meth:`PullConsumer.update_consume_offset` commits one (a request that waits for the broker's answer).
"""

from __future__ import annotations

from typing import Any, Unpack

from pocketmq.client.consumer.broker_api import ConsumerAPI
from pocketmq.client.consumer.config import PullConsumerArgs, PullConsumerConfig
from pocketmq.client.consumer.pull_result import PullResult
from pocketmq.client.consumer.selector import MessageSelector
from pocketmq.client.consumer.subscription import build_subscription, consumer_data_json
from pocketmq.client.consumer.types import ConsumeFromWhere, ConsumeType
from pocketmq.client.core.errors import ConsumerStateError
from pocketmq.client.core.instance import join_instance
from pocketmq.client.core.member import ClientMember, State
from pocketmq.client.core.message import MessageQueue
from pocketmq.client.core.message_ext import MessageExt
from pocketmq.client.core.validators import check_topic
from pocketmq.common.logs import get_logger
from pocketmq.common.subscription import SubscriptionData
from pocketmq.common.sysflag import pull_sys_flag

__all__ = ["BROKER_SUSPEND_MAX", "PULL_RPC_MARGIN", "PullConsumer"]

log = get_logger("pocketmq.client.pull_consumer")

#: How long a ``block=True`` pull lets the broker hold it when no ``timeout`` is given (s).
BROKER_SUSPEND_MAX = 20.0
#: A long-polled pull's RPC waits this much longer than the broker may hold it (s).
PULL_RPC_MARGIN = 10.0
#: Topics announced in heartbeats at most; parsed expressions cached at most.
MAX_TOPICS = 1024
_MAX_CACHED_EXPRESSIONS = 1024


class PullConsumer(ClientMember):
    """An asyncio pull consumer; see the module docstring. Create it anywhere, start it on a loop."""

    kind = "consumer"
    state_error = ConsumerStateError
    config: PullConsumerConfig

    def __init__(self, group: str, **options: Unpack[PullConsumerArgs]) -> None:
        super().__init__(PullConsumerConfig(group=group, **options))
        self._api: ConsumerAPI | None = None
        self._topics: dict[str, SubscriptionData] = {}
        self._expressions: dict[tuple[str, str | MessageSelector], SubscriptionData] = {}
        self._log = log.bind(group=self.group)

    # -- lifecycle --------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Join (or create) the loop's client instance and register the group. Idempotent while running."""
        if not self._may_start():
            return
        instance = await join_instance(self.config.client, lambda i: i.register_consumer(self.group, self))
        self._instance = instance
        self._api = ConsumerAPI(instance, self.group, serialize_type=self.config.client.serialize_type,
                                timeout=self.config.namesrv_timeout)
        self._state = State.RUNNING
        self._log.info("pull_consumer_started", client_id=instance.client_id)

    async def shutdown(self) -> None:
        """Unregister the group from every broker and release the client instance."""
        if not self._may_stop():
            return
        self._state = State.STOPPED
        await self.instance.unregister_consumer(self.group)
        self._log.info("pull_consumer_stopped")

    @property
    def api(self) -> ConsumerAPI:
        if self._api is None or self._state is not State.RUNNING:
            raise ConsumerStateError("the consumer is not running")
        return self._api

    # -- what the client instance asks (ConsumerRegistration) ---------------------------------------------

    def consumer_data(self) -> dict[str, Any]:
        return consumer_data_json(
            self.group, list(self._topics.values()), consume_type=ConsumeType.CONSUME_ACTIVELY,
            message_model=self.config.message_model, consume_from_where=ConsumeFromWhere.LAST_OFFSET,
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
        queues = await self.api.fetch_subscribe_queues(topic)
        self._touch(topic)
        return queues

    # -- pulling ----------------------------------------------------------------------------------------

    def _subscription(self, topic: str, expression: str | MessageSelector) -> SubscriptionData:
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
        subscription_expression: str | MessageSelector | None,
        offset: int,
        max_nums: int = 32,
        *,
        block: bool = False,
        timeout: float | None = None,
    ) -> PullResult:
        """Pull up to ``max_nums`` messages of ``mq`` from ``offset`` that match the expression (``"*"``,
        ``None``, ``"tagA || tagB"`` or a :class:`MessageSelector`, SQL92 included).

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
            suspend_ms, rpc_timeout = 0, self.config.pull_timeout if timeout is None else timeout
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
