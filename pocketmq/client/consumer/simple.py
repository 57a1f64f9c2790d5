"""``SimpleConsumer``: RocketMQ 5's simple consumer over POP (remoting, straight to the brokers).

Usage::

    async with SimpleConsumer("my-group", namesrv_addr="127.0.0.1:9876", await_duration=10) as consumer:
        consumer.subscribe("TopicTest", "TagA || TagB")      # or MessageSelector.by_sql(...)
        for msg in await consumer.receive(16, invisible_duration=30):
            ...
            await consumer.ack(msg)                          # or change_invisible_duration(msg, 5) to retry later

A received message is invisible to the rest of the group for ``invisible_duration`` seconds; acked, it is done;
not acked in time, the broker hands it out again with its reconsume times + 1 (``msg.reconsume_times``; its
delivery attempt is that + 1), and after the group's ``retryMaxTimes`` it goes to ``%DLQ%<group>``. Any number
of consumers share every queue: there is no rebalance, and a slow consumer holds only its own messages.

:class:`PopReceiver` is how a receive finds messages across topics and broker groups: one pop that does not
wait per (topic, broker group), in rotating order, and when none had anything a ``NOTIFICATION`` long poll on
all of them at once, until one has something or ``await_duration`` passes. The push consumer's POP mode uses it
too. ``fifo=True`` receives in FIFO order (``order=true`` pops: a queue hands out its next messages only after
the previous ones are acked or their invisible time ran out).
"""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from collections.abc import Sequence
from typing import Any, Unpack

from pocketmq.client.consumer.config import SimpleConsumerArgs, SimpleConsumerConfig
from pocketmq.client.consumer.pop_api import PopAPI, PopResponse, receipt_handle
from pocketmq.client.consumer.selector import MessageSelector
from pocketmq.client.consumer.subscription import build_subscription, consumer_data_json, fetch_routes
from pocketmq.client.consumer.types import ConsumeFromWhere
from pocketmq.client.core.errors import ConsumerStateError, MQClientError, NoRouteError
from pocketmq.client.core.instance import join_instance
from pocketmq.client.core.member import ClientMember, State
from pocketmq.client.core.message_ext import MessageExt
from pocketmq.client.core.validators import check_topic
from pocketmq.common.consumer import ConsumeType, MessageModel
from pocketmq.common.logs import get_logger
from pocketmq.common.pop import POP_MAX_MSG_NUMS, ReceiptHandle
from pocketmq.common.subscription import SubscriptionData
from pocketmq.remoting.errors import PocketMQError

__all__ = ["PopReceiver", "SimpleConsumer", "receipt_handle"]

log = get_logger("pocketmq.client.simple_consumer")

MAX_SUBSCRIPTIONS = 1024


class PopReceiver:
    """Receives for one group from the broker groups of its subscriptions (see the module docstring)."""

    def __init__(self, api: PopAPI, subscriptions: dict[str, SubscriptionData], *, fifo: bool = False,
                 route_timeout: float = 3.0) -> None:
        self.api = api
        self.subscriptions = subscriptions
        self.fifo = fifo
        self.route_timeout = route_timeout
        self._turn = itertools.count()
        self._attempt: str | None = None

    async def _targets(self) -> list[tuple[SubscriptionData, str]]:
        targets: list[tuple[SubscriptionData, str]] = []
        for topic, sub in list(self.subscriptions.items()):
            brokers = self.api.brokers(topic)
            if not brokers:
                try:
                    await self.api.instance.refresher.refresh(topic, self.route_timeout, publish=False)
                except MQClientError as exc:
                    log.debug("route_lookup_failed", topic=topic, error=str(exc))
                brokers = self.api.brokers(topic)
            targets.extend((sub, broker) for broker in brokers)
        if not targets:
            raise NoRouteError(",".join(self.subscriptions) or "(no subscription)", "no readable queue")
        turn = next(self._turn) % len(targets)
        return targets[turn:] + targets[:turn]

    async def receive(self, max_nums: int, invisible_ms: int, await_s: float) -> list[MessageExt]:
        """Up to ``max_nums`` messages of one pop; ``[]`` when none came within ``await_s``."""
        return (await self.receive_response(max_nums, invisible_ms, await_s)).messages

    async def receive_response(self, max_nums: int, invisible_ms: int, await_s: float) -> PopResponse:
        """:meth:`receive`, with the pop's runs of messages of one check point (not found: no messages)."""
        deadline = time.monotonic() + await_s
        attempt: str | None = None
        if self.fifo:  # a FIFO retry of a failed receive repeats its attempt
            attempt = self._attempt = self._attempt or uuid.uuid4().hex
        while True:
            targets = await self._targets()
            last_error: PocketMQError | None = None
            for sub, broker in targets:
                try:
                    response = await self.api.pop(broker, sub, max_nums=max_nums, invisible_ms=invisible_ms,
                                                  poll_ms=0, order=self.fifo, attempt_id=attempt)
                except PocketMQError as exc:
                    log.info("pop_failed", broker=broker, topic=sub.topic, error=str(exc))
                    last_error = exc
                    continue
                if response.found:
                    self._attempt = None
                    return response
            if last_error is not None and len(targets) == 1:
                raise last_error
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not await self._any_has_message(targets, int(remaining * 1000)):
                self._attempt = None
                return PopResponse(False, [])

    async def _any_has_message(self, targets: Sequence[tuple[SubscriptionData, str]], poll_ms: int) -> bool:
        """NOTIFICATION long polls on every target at once: True as soon as one has something."""
        tasks = [asyncio.ensure_future(self.api.notification(broker, sub.topic, poll_ms=poll_ms, order=self.fifo))
                 for sub, broker in targets]
        waits = set(tasks)
        try:
            while waits:
                done, waits = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                if any(not t.cancelled() and t.exception() is None and t.result() for t in done):
                    return True
            return False
        finally:
            for task in waits:
                task.cancel()
            if waits:
                await asyncio.wait(waits)
            for task in tasks:  # a failed long poll (a broker down, a slave) only means "nothing there yet"
                if not task.cancelled():
                    task.exception()


class SimpleConsumer(ClientMember):
    """An asyncio simple consumer; see the module docstring. Create it anywhere, start it on a loop."""

    kind = "consumer"
    state_error = ConsumerStateError
    config: SimpleConsumerConfig

    def __init__(self, group: str, *, fifo: bool = False, **options: Unpack[SimpleConsumerArgs]) -> None:
        super().__init__(SimpleConsumerConfig(group=group, **options))
        self.fifo = fifo
        self._subscriptions: dict[str, SubscriptionData] = {}
        self._api: PopAPI | None = None
        self._receiver: PopReceiver | None = None
        self._log = log.bind(group=self.group)

    def subscribe(self, topic: str, expression: str | MessageSelector | None = "*") -> None:
        """Receive from ``topic`` the messages ``expression`` selects (tags or a :class:`MessageSelector`)."""
        check_topic(topic)
        if topic not in self._subscriptions and len(self._subscriptions) >= MAX_SUBSCRIPTIONS:
            raise MQClientError(f"a consumer subscribes to at most {MAX_SUBSCRIPTIONS} topics")
        self._subscriptions[topic] = build_subscription(topic, expression)
        if self._state is State.RUNNING:
            self.instance.request_heartbeat_all()

    def unsubscribe(self, topic: str) -> None:
        self._subscriptions.pop(topic, None)

    async def start(self) -> None:
        if not self._may_start():
            return
        instance = await join_instance(self.config.client, lambda i: i.register_consumer(self.group, self))
        self._instance = instance
        self._api = PopAPI(instance, self.group, timeout=self.config.request_timeout)
        self._receiver = PopReceiver(self._api, self._subscriptions, fifo=self.fifo,
                                     route_timeout=self.config.namesrv_timeout)
        self._state = State.RUNNING
        await fetch_routes(instance, self._subscriptions, self.config.namesrv_timeout, self._log)
        await instance.send_heartbeat_to_all()
        self._log.info("simple_consumer_started", client_id=instance.client_id, topics=sorted(self._subscriptions))

    async def shutdown(self) -> None:
        if not self._may_stop():
            return
        self._state = State.STOPPED
        await self.instance.unregister_consumer(self.group)
        self._log.info("simple_consumer_stopped")

    @property
    def api(self) -> PopAPI:
        if self._api is None or self._state is not State.RUNNING:
            raise ConsumerStateError("the consumer is not running")
        return self._api

    # -- receiving and acknowledging ----------------------------------------------------------------------

    async def receive(self, max_message_num: int = 16, invisible_duration: float | None = None) -> list[MessageExt]:
        """Up to ``max_message_num`` (1..32) messages, invisible to the group for ``invisible_duration`` seconds
        (default the consumer's); waits up to ``await_duration`` when there are none, then returns ``[]``."""
        if not 0 < max_message_num <= POP_MAX_MSG_NUMS:
            raise ValueError(f"max_message_num must be in [1, {POP_MAX_MSG_NUMS}]")
        if not self._subscriptions:
            raise ConsumerStateError("no subscription (subscribe first)")
        invisible = self.config.invisible_duration if invisible_duration is None else invisible_duration
        if invisible <= 0:
            raise ValueError("invisible_duration must be positive")
        api = self.api
        assert self._receiver is not None and api is not None
        return await self._receiver.receive(max_message_num, int(invisible * 1000), self.config.await_duration)

    async def ack(self, message: MessageExt) -> None:
        """The message is consumed: it never comes back. Raises the broker's refusal (an expired or unknown
        receipt handle: :class:`~pocketmq.remoting.errors.ResponseError` with code NO_MESSAGE)."""
        await self.api.ack(message)

    async def ack_batch(self, messages: Sequence[MessageExt]) -> None:
        """Ack several messages with one request per broker group (BATCH_ACK_MESSAGE)."""
        if messages:
            await self.api.ack_batch(messages)

    async def change_invisible_duration(self, message: MessageExt, invisible_duration: float) -> None:
        """Keep ``message`` invisible ``invisible_duration`` seconds from now (0: visible again at once, a nack);
        its receipt handle is replaced, so ack it (or change it again) with the same object."""
        if invisible_duration < 0:
            raise ValueError("invisible_duration must not be negative")
        await self.api.change_invisible_time(message, int(invisible_duration * 1000))

    @staticmethod
    def receipt_handle(message: MessageExt) -> ReceiptHandle:
        """The message's receipt handle (its ``POP_CK``)."""
        return receipt_handle(message)

    # -- what the client instance asks (ConsumerRegistration) ---------------------------------------------

    def consumer_data(self) -> dict[str, Any]:
        return consumer_data_json(
            self.group, list(self._subscriptions.values()), consume_type=ConsumeType.CONSUME_POP,
            message_model=MessageModel.CLUSTERING, consume_from_where=ConsumeFromWhere.LAST_OFFSET,
        )

    def subscribed_topics(self) -> list[str]:
        return list(self._subscriptions)

    def rebalance_soon(self) -> None:
        """POP has no rebalance: every consumer of the group pops from every queue."""
