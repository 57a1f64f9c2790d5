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
from collections.abc import Awaitable, Callable
from typing import Any

from client.core.message import SendResult
from client.producer.outgoing import MessagePreparer, Outgoing
from common.batch import BATCH_ENTRY_OVERHEAD

__all__ = ["Accumulator", "split_batch_result"]

#: ``send(out, budget, is_async)``: every attempt of one prepared message or batch.
SendOutgoing = Callable[[Outgoing, float, bool], Awaitable[SendResult]]


class _Pending:
    """A send waiting to be coalesced: its prepared message, its future and its time budget."""

    __slots__ = ("budget", "future", "out")

    def __init__(self, out: Outgoing, future: asyncio.Future[SendResult], budget: float) -> None:
        self.out = out
        self.future = future
        self.budget = budget


class Accumulator:
    """Sends waiting for the end of this loop step, by (topic, async?), and the batches they leave in."""

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
        self._pending: dict[tuple[str, bool], list[_Pending]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def add(self, out: Outgoing, budget: float, is_async: bool) -> asyncio.Future[SendResult]:
        """Queue a send until the end of this loop step; returns the send's own future. An async send's
        slot is released when its batch is done (a sync send releases its own when its ``await`` returns)."""
        loop = self._loop
        assert loop is not None
        future: asyncio.Future[SendResult] = loop.create_future()
        key = (out.topic, is_async)
        pending = self._pending.get(key)
        if pending is None:
            pending = self._pending[key] = []
            loop.call_soon(self._flush, key)
        pending.append(_Pending(out, future, budget))
        return future

    def _flush(self, key: tuple[str, bool]) -> None:
        """Split a topic's queued sends into batches within the size bounds and start one task per batch."""
        pending = self._pending.pop(key, None)
        if not pending:
            return
        max_count, max_bytes = self.max_messages, self.max_bytes
        chunk: list[_Pending] = []
        size = 0
        for item in pending:
            entry = len(item.out.body) + len(item.out.properties) + BATCH_ENTRY_OVERHEAD
            if chunk and (len(chunk) >= max_count or size + entry > max_bytes):
                self._start_chunk(chunk, key[1])
                chunk, size = [], 0
            chunk.append(item)
            size += entry
        self._start_chunk(chunk, key[1])

    def _start_chunk(self, chunk: list[_Pending], is_async: bool) -> None:
        assert self._loop is not None
        task = self._loop.create_task(self._send_chunk(chunk, is_async))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send_chunk(self, chunk: list[_Pending], is_async: bool) -> None:
        """Send one coalesced batch and settle every send's future."""
        try:
            live = [item for item in chunk if not item.future.done()]  # some may have been cancelled meanwhile
            if live:
                await self._settle(live, is_async)
        finally:
            if is_async:
                for _ in chunk:
                    self._release_slot()

    async def _settle(self, chunk: list[_Pending], is_async: bool) -> None:
        outs = [item.out for item in chunk]
        out = outs[0] if len(outs) == 1 else self._preparer.coalesce(outs)
        budget = min(item.budget for item in chunk)
        try:
            result = await self._send(out, budget, is_async)
        except BaseException as exc:
            for item in chunk:
                if not item.future.done():
                    item.future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        results = [result] if len(chunk) == 1 else split_batch_result(result, outs)
        for item, own in zip(chunk, results, strict=True):
            if not item.future.done():
                item.future.set_result(own)


def split_batch_result(result: SendResult, outs: list[Outgoing]) -> list[SendResult]:
    """One coalesced batch's answer as each message's own result: its ``UNIQ_KEY``, its broker id (the
    broker joins them with commas, in order) and its queue offset (the batch's first offset + its index)."""
    offset_ids = result.offset_msg_id.split(",")
    if len(offset_ids) != len(outs):
        offset_ids = [result.offset_msg_id] * len(outs)
    base = result.queue_offset
    return [SendResult(result.status, out.msg_id, offset_ids[i], result.message_queue, base + i, result.region_id,
                       result.trace_on, result.transaction_id) for i, out in enumerate(outs)]
