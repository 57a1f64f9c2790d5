"""The consumer calls of the proxy (``ReceiveMessageActivity``, ``AckMessageActivity``,
``ChangeInvisibleDurationActivity``, ``ForwardMessageToDLQActivity``): receives are POPs of one broker group with
long polling inside the call's deadline; receipt handles are RocketMQ 5's (``POP_CK`` and the commit-log offset),
so any proxy can ack, change or dead-letter a message another proxy handed out."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

from grpc import aio

from pocketmq.client.core.message_ext import MessageExt
from pocketmq.common.logs import get_logger
from pocketmq.common.message import MessageConst
from pocketmq.common.pop import PopFormatError, ReceiptHandle
from pocketmq.common.subscription import ExpressionType, SubscriptionData
from pocketmq.proxy import convert
from pocketmq.proxy.apis import service_pb2 as spb
from pocketmq.proxy.auth import CallIdentity
from pocketmq.proxy.backend import Backend, PopResult
from pocketmq.proxy.checks import aggregate, check_group, check_topic, duration_ms, subscription_of
from pocketmq.proxy.clients import ClientRegistry
from pocketmq.proxy.config import ProxyConfig
from pocketmq.proxy.errors import OK_STATUS, Code, ProxyError, status
from pocketmq.proxy.renew import ReceiptHandles

log = get_logger("pocketmq.proxy.consume")

POP_MAX_NUMS = 32
"""A receive pops at most this many messages (``ProxyUtils.MAX_MSG_NUMS_FOR_POP_REQUEST``)."""
NACK_INVISIBLE_MS = 1000
"""Popped messages a client could not be given become visible again after this long."""


class ConsumeCalls:
    """ReceiveMessage, AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue."""

    def __init__(self, config: ProxyConfig, backend: Backend, clients: ClientRegistry,
                 renew: ReceiptHandles | None) -> None:
        self.config = config
        self.backend = backend
        self.clients = clients
        self.renew = renew
        self._tasks: set[asyncio.Task[None]] = set()

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)


    def _polling_ms(self, request: spb.ReceiveMessageRequest, context: aio.ServicerContext[Any, Any]) -> int:
        """``ReceiveMessageActivity``'s polling time: asked for, bounded, and inside the call's deadline."""
        remaining = context.time_remaining()
        remaining_ms = int(remaining * 1000) if remaining is not None else 3_600_000
        remaining_ms -= self.config.long_polling_reserve_time_in_millis
        low = self.config.grpc_client_consumer_min_long_polling_timeout_millis
        high = self.config.grpc_client_consumer_max_long_polling_timeout_millis
        if request.HasField("long_polling_timeout"):
            polling = duration_ms(request.long_polling_timeout)
        else:
            polling = remaining_ms - 1500
        polling = min(max(polling, low), high)
        if polling > remaining_ms:
            if remaining_ms < low:
                raise ProxyError(Code.ILLEGAL_POLLING_TIME, "The deadline time remaining is not enough for polling, "
                                                            "please check network condition")
            polling = remaining_ms
        return polling

    async def receive_message(self, request: spb.ReceiveMessageRequest, identity: CallIdentity,
                              context: aio.ServicerContext[Any, Any]) -> AsyncIterator[spb.ReceiveMessageResponse]:
        polling_ms = self._polling_ms(request, context)
        topic, group = request.message_queue.topic.name, request.group.name
        check_topic(topic)
        check_group(group)
        client = self.clients.touch(identity.client_id, identity.language, identity.version, identity.remote)
        settings = await self.backend.group_settings(group, self.config.default_max_delivery_attempts)
        fifo = client.settings.subscription.fifo if client.settings is not None and \
            client.settings.HasField("subscription") else settings.fifo
        renew = self.renew if request.auto_renew and self.renew is not None else None
        if renew is not None:
            invisible_ms = self.config.default_invisible_time_mills
        else:
            invisible_ms = duration_ms(request.invisible_duration)
            self._check_invisible(invisible_ms, self.config.min_invisible_time_mills_for_recv)
        subscription = subscription_of(topic, request.filter_expression)
        route = await self.backend.route(topic)
        brokers = self.backend.readable_brokers(route)
        broker = request.message_queue.broker.name
        if broker not in brokers:
            if not brokers:
                raise ProxyError(Code.FORBIDDEN, "no readable queue")
            broker = brokers[int(time.monotonic() * 1000) % len(brokers)]
        batch = min(max(request.batch_size, 1), POP_MAX_NUMS)
        popped = await self._pop(broker, group, subscription, batch=batch, invisible_ms=invisible_ms,
                                 poll_ms=polling_ms, fifo=fifo,
                                 attempt_id=request.attempt_id if request.HasField("attempt_id") else None)
        if popped.polling_full:
            yield spb.ReceiveMessageResponse(status=status(Code.TOO_MANY_REQUESTS, "polling full"))
        elif not popped.messages:
            yield spb.ReceiveMessageResponse(status=status(Code.MESSAGE_NOT_FOUND, "no new message"))
        else:
            deliver = await self._filter(popped.messages, group, topic, subscription, settings.max_delivery_attempts)
            if not deliver:
                yield spb.ReceiveMessageResponse(status=status(Code.MESSAGE_NOT_FOUND, "no match message"))
            else:
                if renew is not None:
                    for msg, handle in deliver:
                        renew.add(identity.client_id, group, topic, msg.uniq_key or msg.msg_id, handle)
                async for item in self._deliver(deliver, group, topic):
                    yield item
        stamp = spb.ReceiveMessageResponse()
        stamp.delivery_timestamp.GetCurrentTime()
        yield stamp

    async def _pop(self, broker: str, group: str, subscription: SubscriptionData, *, batch: int, invisible_ms: int,
                   poll_ms: int, fifo: bool, attempt_id: str | None) -> PopResult:
        """The pop, shielded: a client that cancels its receive while the broker long-polls does not leave what the
        pop then takes invisible until its deadline (those messages are made visible again at once)."""
        task = asyncio.ensure_future(self.backend.pop(broker, group, subscription, max_nums=batch,
                                                      invisible_ms=invisible_ms, poll_ms=poll_ms, fifo=fifo,
                                                      attempt_id=attempt_id))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            def orphaned(done: asyncio.Future[PopResult]) -> None:
                if done.cancelled() or done.exception() is not None:
                    return
                handles = [_handle_of(m) for m in done.result().messages]
                if handles:
                    self._nack_later(handles, group, subscription.topic)

            task.add_done_callback(orphaned)
            raise

    async def _filter(self, messages: list[MessageExt], group: str, topic: str, subscription: SubscriptionData,
                      max_attempts: int) -> list[tuple[MessageExt, ReceiptHandle]]:
        """``PopMessageResultFilterImpl``: a tag the subscription does not take is acked, a message past its
        attempts goes to the DLQ, the rest is delivered."""
        deliver = []
        for msg in messages:
            handle = _handle_of(msg)
            try:
                if subscription.expression_type == ExpressionType.TAG and not subscription.matches(msg.tags):
                    await self.backend.ack(group, topic, handle)
                    continue
                if msg.reconsume_times >= max_attempts:
                    await self.backend.send_to_dlq(group, topic, handle, msg.uniq_key or msg.msg_id)
                    continue
            except ProxyError as exc:
                log.warning("receive_filter_failed", group=group, topic=topic, error=exc.message)
            deliver.append((msg, handle))
        return deliver

    async def _deliver(self, messages: list[tuple[MessageExt, ReceiptHandle]], group: str,
                       topic: str) -> AsyncIterator[spb.ReceiveMessageResponse]:
        sent = 0
        try:
            yield spb.ReceiveMessageResponse(status=OK_STATUS)
            for msg, handle in messages:
                yield spb.ReceiveMessageResponse(message=convert.incoming(msg, topic=topic,
                                                                          receipt_handle=handle.encode()))
                sent += 1
        finally:
            if sent < len(messages):
                self._nack_later([h for _m, h in messages[sent:]], group, topic)

    def _nack_later(self, handles: list[ReceiptHandle], group: str, topic: str) -> None:
        """Messages popped for a client that went away: visible again soon instead of at their deadline."""
        async def nack() -> None:
            for handle in handles:
                with contextlib.suppress(ProxyError):
                    await self.backend.change_invisible(group, topic, handle, NACK_INVISIBLE_MS)

        task = asyncio.get_running_loop().create_task(nack())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _check_invisible(self, invisible_ms: int, minimum: int) -> None:
        if invisible_ms < minimum:
            raise ProxyError(Code.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too small. min is {minimum}")
        maximum = self.config.max_invisible_time_mills
        if 0 < maximum < invisible_ms:
            raise ProxyError(Code.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too large. max is {maximum}")

    @staticmethod
    def _handle(text: str) -> ReceiptHandle:
        try:
            handle = ReceiptHandle.decode(text)
        except PopFormatError as exc:
            raise ProxyError(Code.INVALID_RECEIPT_HANDLE, str(exc)) from None
        if handle.next_visible_time <= time.time() * 1000:
            raise ProxyError(Code.INVALID_RECEIPT_HANDLE, "receipt handle is expired")
        return handle

    def _current(self, identity: CallIdentity, group: str, message_id: str, text: str) -> ReceiptHandle:
        """The handle to use: the renewed one of a message this proxy keeps alive, else the client's."""
        if self.renew is not None:
            renewed = self.renew.take(identity.client_id, group, message_id)
            if renewed is not None:
                return renewed
        return self._handle(text)

    async def ack_message(self, request: spb.AckMessageRequest, identity: CallIdentity,
                          context: aio.ServicerContext[Any, Any]) -> spb.AckMessageResponse:
        topic, group = request.topic.name, request.group.name
        check_topic(topic)
        check_group(group)
        entries = []
        codes: set[int] = set()
        for entry in request.entries:
            try:
                await self.backend.ack(group, topic, self._current(identity, group, entry.message_id,
                                                                   entry.receipt_handle))
                result = OK_STATUS
            except ProxyError as exc:
                result = exc.status()
            codes.add(result.code)
            entries.append(spb.AckMessageResultEntry(message_id=entry.message_id,
                                                     receipt_handle=entry.receipt_handle, status=result))
        return spb.AckMessageResponse(status=aggregate(codes), entries=entries)

    async def change_invisible_duration(self, request: spb.ChangeInvisibleDurationRequest, identity: CallIdentity,
                                        context: aio.ServicerContext[Any, Any]
                                        ) -> spb.ChangeInvisibleDurationResponse:
        topic, group = request.topic.name, request.group.name
        check_topic(topic)
        check_group(group)
        invisible_ms = duration_ms(request.invisible_duration)
        self._check_invisible(invisible_ms, 0)
        handle = await self.backend.change_invisible(
            group, topic, self._current(identity, group, request.message_id, request.receipt_handle), invisible_ms)
        return spb.ChangeInvisibleDurationResponse(status=OK_STATUS, receipt_handle=handle.encode())

    async def forward_to_dlq(self, request: spb.ForwardMessageToDeadLetterQueueRequest, identity: CallIdentity,
                             context: aio.ServicerContext[Any, Any]
                             ) -> spb.ForwardMessageToDeadLetterQueueResponse:
        topic, group = request.topic.name, request.group.name
        check_topic(topic)
        check_group(group)
        await self.backend.send_to_dlq(
            group, topic, self._current(identity, group, request.message_id, request.receipt_handle),
            request.message_id)
        return spb.ForwardMessageToDeadLetterQueueResponse(status=OK_STATUS)


def _handle_of(msg: MessageExt) -> ReceiptHandle:
    """A popped message's handle as the Java proxy hands it out: ``POP_CK`` and the commit-log offset."""
    handle = ReceiptHandle.decode(msg.get_property(MessageConst.PROPERTY_POP_CK) or "")
    return ReceiptHandle(handle.start_offset, handle.retrieve_time, handle.invisible_time, handle.revive_queue_id,
                         handle.topic_type, handle.broker_name, handle.queue_id, handle.offset, msg.commit_log_offset)
