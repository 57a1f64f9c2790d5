"""Auto-batching (RocketMQ 5's ``autoBatch`` idea, without its linger): sends of one producer issued while
others are in flight are coalesced into SEND_BATCH_MESSAGE requests.

A ``send`` or ``send_async`` issued while other sends of the producer are in flight does not leave at once;
it waits for the end of the current event-loop step, and every such send of the same topic (and kind) queued
by then leaves together as one SEND_BATCH_MESSAGE of at most ``auto_batch_max_messages`` (256) messages and
``auto_batch_max_bytes`` (256 KiB) — to one queue, stored as separate messages in order. Each send still gets
its own :class:`~client.core.message.SendResult` (its ``UNIQ_KEY``, its broker id, its queue offset) and its own
callback; a batch that fails fails each of its sends with the same error after the same retries. A lone send
(nothing else in flight) goes at once, so sequential latency is unchanged; messages a batch cannot carry
(compressed bodies, delay levels, retry topics, ``WAIT=false``, ordered sends with a selector) always go
alone. Why: under concurrency one request per message spends most of both processes' CPU on per-request work
(headers, framing, syscalls), while a batch of 32 costs about as much as 3 single sends.
"""

from __future__ import annotations

import asyncio
import operator
from collections.abc import Awaitable, Callable
from typing import Any

from pocketmq.client.core.message import SendResult
from pocketmq.client.producer.outgoing import MessagePreparer, Outgoing
from pocketmq.common.batch import BATCH_ENTRY_OVERHEAD

__all__ = ["Accumulator", "split_batch_result"]

_budget_of = operator.attrgetter("budget")

#: ``send(out, budget, is_async)``: every attempt of one prepared message or batch.
SendOutgoing = Callable[[Outgoing, float, bool], Awaitable[SendResult]]


class Accumulator:
    """Sends waiting for the end of this loop step, by topic and kind (sync, async), and the batches they
    leave in. A waiting send is its :class:`Outgoing`, carrying its own future and budget (no other object
    per send)."""

    def __init__(
        self,
        preparer: MessagePreparer,
        send: SendOutgoing,
        release_slot: Callable[[], None],
        tasks: set[asyncio.Task[Any]],
        *,
        max_messages: int,
        max_bytes: int,
    ) -> None:
        self._preparer = preparer
        self._send = send
        self._release_slot = release_slot
        #: The owner's background tasks (it cancels them at shutdown); each batch in flight is one.
        self._tasks = tasks
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        #: topic → waiting sends, one table per kind (sync sends, async sends).
        self._pending: tuple[dict[str, list[Outgoing]], dict[str, list[Outgoing]]] = ({}, {})
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def add(self, out: Outgoing, budget: float, is_async: bool) -> asyncio.Future[SendResult]:
        """Queue a send until the end of this loop step; returns the send's own future. An async send's
        slot is released when its batch is done (a sync send releases its own when its ``await`` returns)."""
        loop = self._loop
        assert loop is not None
        future: asyncio.Future[SendResult] = loop.create_future()
        out.future = future
        out.budget = budget
        table = self._pending[is_async]
        pending = table.get(out.topic)
        if pending is None:
            pending = table[out.topic] = []
            loop.call_soon(self._flush, out.topic, is_async)
        pending.append(out)
        return future

    def _flush(self, topic: str, is_async: bool) -> None:
        """Split a topic's queued sends into batches within the size bounds and start one task per batch."""
        pending = self._pending[is_async].pop(topic, None)
        if not pending:
            return
        max_count, max_bytes = self.max_messages, self.max_bytes
        start = size = 0
        for index, out in enumerate(pending):
            entry = len(out.body) + len(out.properties) + BATCH_ENTRY_OVERHEAD
            if index > start and (index - start >= max_count or size + entry > max_bytes):
                self._start_chunk(pending[start:index], is_async)
                start, size = index, 0
            size += entry
        self._start_chunk(pending if not start else pending[start:], is_async)

    def _start_chunk(self, chunk: list[Outgoing], is_async: bool) -> None:
        assert self._loop is not None
        task = self._loop.create_task(self._send_chunk(chunk, is_async))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send_chunk(self, chunk: list[Outgoing], is_async: bool) -> None:
        """Send one coalesced batch and settle every send's future."""
        try:
            live = [out for out in chunk if not out.future.done()]  # some may have been cancelled meanwhile
            if live:
                await self._settle(live, is_async)
        finally:
            if is_async:
                for _ in chunk:
                    self._release_slot()

    async def _settle(self, outs: list[Outgoing], is_async: bool) -> None:
        if len(outs) == 1:
            out = outs[0]
            budget = out.budget
        else:
            out = self._preparer.coalesce(outs)
            budget = min(map(_budget_of, outs))
        try:
            result = await self._send(out, budget, is_async)
        except BaseException as exc:
            for item in outs:
                if not item.future.done():
                    item.future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        if len(outs) == 1:
            if not out.future.done():
                out.future.set_result(result)
            return
        _settle_each(result, outs)


def _settle_each(result: SendResult, outs: list[Outgoing]) -> None:
    """Each coalesced send's future gets its own result (:func:`split_batch_result`, without the list)."""
    status, queue, region, trace_on, transaction_id = (result.status, result.message_queue, result.region_id,
                                                       result.trace_on, result.transaction_id)
    offset = result.queue_offset
    for out, offset_id in zip(outs, _offset_ids(result, len(outs)), strict=True):
        future = out.future
        if not future.done():
            future.set_result(SendResult(status, out.msg_id, offset_id, queue, offset, region, trace_on,
                                         transaction_id))
        offset += 1


def _offset_ids(result: SendResult, count: int) -> list[str]:
    """The broker's id of each message of a coalesced batch (it joins them with commas, in order); the whole
    field for each when the count does not match."""
    offset_ids = result.offset_msg_id.split(",")
    return offset_ids if len(offset_ids) == count else [result.offset_msg_id] * count


def split_batch_result(result: SendResult, outs: list[Outgoing]) -> list[SendResult]:
    """One coalesced batch's answer as each message's own result: its ``UNIQ_KEY``, its broker id (the
    broker joins them with commas, in order) and its queue offset (the batch's first offset + its index)."""
    offset_ids = _offset_ids(result, len(outs))
    base = result.queue_offset
    return [SendResult(result.status, out.msg_id, offset_ids[i], result.message_queue, base + i, result.region_id,
                       result.trace_on, result.transaction_id) for i, out in enumerate(outs)]
