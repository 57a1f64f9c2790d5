"""Tracing a producer's sends and a push consumer's handler calls (RocketMQ's ``SendMessageTraceHookImpl``
and ``ConsumeMessageTraceHookImpl``).

Only a client with ``enable_trace=True`` builds these, when it starts: :class:`TraceSession` holds a
:class:`~pocketmq.client.trace.dispatcher.TraceDispatcher` with a producer of its own (group
``_INNER_TRACE_PRODUCER-<group>``, never traced itself); :class:`SendTracer` wraps the producer's ``send`` and
``send_async`` (a ``Pub`` context per stored message); :class:`ConsumeTracer` wraps the consume service's
handler call (a ``SubBefore`` context per message before the handler, a ``SubAfter`` after it). A client
without tracing keeps its own methods and calls: tracing off costs nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from pocketmq.client.consumer.types import ConsumeResult
from pocketmq.client.core.message import Message, SendResult, SendStatus
from pocketmq.client.core.message_ext import MessageExt
from pocketmq.client.core.uniq import next_uniq_id
from pocketmq.client.trace.data import ConsumeReturnType, MessageType, TraceBean, TraceContext, TraceType
from pocketmq.client.trace.dispatcher import TraceDispatcher
from pocketmq.common.message import MessageConst

INNER_TRACE_PRODUCER_PREFIX = "_INNER_TRACE_PRODUCER-"
DEFAULT_REGION = "DefaultRegion"
_REGION = MessageConst.PROPERTY_MSG_REGION

Send = Callable[..., Awaitable[SendResult]]
SendAsync = Callable[..., "asyncio.Future[SendResult]"]
HandlerCall = Callable[[list[MessageExt]], Awaitable[ConsumeResult]]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class TraceProducer(Protocol):
    """What tracing needs of the producer that sends trace messages (a :class:`pocketmq.client.Producer`)."""

    async def start(self) -> None: ...

    async def send(self, msg: Message) -> SendResult: ...

    async def shutdown(self) -> None: ...


class TraceSession:
    """A client's tracing: the dispatcher and the producer that sends its trace messages."""

    def __init__(self, dispatcher: TraceDispatcher, producer: TraceProducer) -> None:
        self.dispatcher = dispatcher
        self.producer = producer

    @classmethod
    async def start(cls, make_producer: Callable[[str], TraceProducer], group: str, topic: str) -> TraceSession:
        """A started dispatcher sending to ``topic`` with a started producer of its own, made by
        ``make_producer(group name)`` (a traced client passes its own producer class, untraced)."""
        producer = make_producer(INNER_TRACE_PRODUCER_PREFIX + group)
        await producer.start()

        async def send(trace_topic: str, body: bytes, keys: str) -> None:
            await producer.send(Message(trace_topic, body, keys=keys or None))

        dispatcher = TraceDispatcher(send, topic=topic)
        dispatcher.start()
        return cls(dispatcher, producer)

    async def stop(self) -> None:
        """Send what is left, then stop the producer."""
        await self.dispatcher.close()
        await self.producer.shutdown()


class SendTracer:
    """``Pub`` contexts for a producer's stored messages. ``broker_addr(broker_name)`` gives the address a
    message was stored at."""

    def __init__(self, dispatcher: TraceDispatcher, group: str, broker_addr: Callable[[str], str | None]) -> None:
        self.dispatcher = dispatcher
        self.group = group
        self._broker_addr = broker_addr

    def wrap_send(self, send: Send) -> Send:
        """``send`` that also traces what it stored."""

        async def traced(msg: Message, **kwargs: Any) -> SendResult:
            started = _now_ms()
            result = await send(msg, **kwargs)
            self.record(msg, result, started)
            return result

        return traced

    def wrap_send_async(self, send_async: SendAsync) -> SendAsync:
        """``send_async`` that also traces what it stored."""

        def traced(msg: Message, **kwargs: Any) -> asyncio.Future[SendResult]:
            started = _now_ms()
            future = send_async(msg, **kwargs)
            future.add_done_callback(lambda f: self._done(msg, f, started))
            return future

        return traced

    def _done(self, msg: Message, future: asyncio.Future[SendResult], started: int) -> None:
        if not future.cancelled() and future.exception() is None:
            self.record(msg, future.result(), started)

    def record(self, msg: Message, result: SendResult, started: int) -> None:
        """Queue the ``Pub`` context of one stored message (batches, with comma-joined ids, are not traced,
        as in RocketMQ)."""
        if msg.topic == self.dispatcher.topic or "," in result.msg_id:
            return
        bean = TraceBean(msg_id=result.msg_id, topic=msg.topic, tags=msg.tags, keys=msg.keys,
                         store_host=self._broker_addr(result.message_queue.broker_name) or "",
                         body_length=len(msg.body),
                         msg_type=MessageType.Delay_Msg if msg.delay_level > 0 else MessageType.Normal_Msg,
                         offset_msg_id=result.offset_msg_id)
        self.dispatcher.append(TraceContext(TraceType.Pub, timestamp=started, region_id=result.region_id,
                                            group_name=self.group, cost_time=_now_ms() - started,
                                            success=result.status is SendStatus.SEND_OK, beans=[bean]))


class ConsumeTracer:
    """``SubBefore``/``SubAfter`` contexts around a push consumer's handler calls."""

    def __init__(self, dispatcher: TraceDispatcher, group: str) -> None:
        self.dispatcher = dispatcher
        self.group = group

    def wrap(self, call: HandlerCall) -> HandlerCall:
        """``call`` that also traces each batch."""

        async def traced(msgs: list[MessageExt]) -> ConsumeResult:
            before = self._before(msgs)
            if before is None:
                return await call(msgs)
            result = await call(msgs)
            self._after(before, result is ConsumeResult.SUCCESS)
            return result

        return traced

    def record_polled(self, msgs: list[MessageExt]) -> None:
        """A lite pull consumer's ``poll`` returned ``msgs``: traced as consumed at once, as RocketMQ's lite pull
        consumer traces each pull."""
        before = self._before(msgs)
        if before is not None:
            self._after(before, True)

    def _before(self, msgs: list[MessageExt]) -> tuple[int, str, str, list[TraceBean]] | None:
        """Queue the ``SubBefore`` context of ``msgs`` (those not of the trace topic); None when none is traced."""
        traced_msgs = [m for m in msgs if m.topic != self.dispatcher.topic]
        if not traced_msgs:
            return None
        started = _now_ms()
        request_id = next_uniq_id()
        beans = [TraceBean(msg_id=m.msg_id, topic=m.topic, tags=m.tags, keys=m.keys,
                           store_host=m.store_host, body_length=len(m.body), retry_times=m.reconsume_times,
                           offset_msg_id=m.offset_msg_id) for m in traced_msgs]
        region = traced_msgs[0].get_property(_REGION) or DEFAULT_REGION
        self.dispatcher.append(TraceContext(TraceType.SubBefore, timestamp=started, region_id=region,
                                            group_name=self.group, request_id=request_id, beans=beans))
        return started, request_id, region, beans

    def _after(self, before: tuple[int, str, str, list[TraceBean]], ok: bool) -> None:
        started, request_id, region, beans = before
        ended = _now_ms()
        self.dispatcher.append(TraceContext(
            TraceType.SubAfter, timestamp=ended, region_id=region, group_name=self.group,
            request_id=request_id, cost_time=(ended - started) // len(beans), success=ok,
            context_code=ConsumeReturnType.SUCCESS if ok else ConsumeReturnType.FAILED, beans=beans))
