"""The lite pull consumer's pulling: :class:`PollBuffer`, where pulled batches wait for ``poll``, and
:class:`LitePullService`, the push consumer's pull service feeding it, with each queue's consumed position, paused
queues and seeks (:mod:`pocketmq.client.consumer.lite_pull` uses them)."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Iterable

from pocketmq.client.consumer.context import PushContext
from pocketmq.client.consumer.process_queue import ProcessQueue
from pocketmq.client.consumer.pull_service import PullService
from pocketmq.client.core.errors import MQClientError
from pocketmq.client.core.message import MessageQueue
from pocketmq.client.core.message_ext import MessageExt

__all__ = ["LitePullService", "PollBuffer"]

_Batch = tuple[MessageQueue, ProcessQueue, list[MessageExt]]


class PollBuffer:
    """Pulled batches waiting for ``poll`` (RocketMQ's ``consumeRequestCache``), in arrival order.

    ``count`` messages wait in the line; at ``limit`` or more the pull loops hold back (:attr:`full`). Batches of
    a paused queue that ``take`` meets are parked beside the line (in order) and go back to its front on
    ``resume``; they do not count against ``limit`` (their queue is not pulled while paused, so they are bounded by
    its own flow control).
    """

    __slots__ = ("_arrived", "_batches", "_closed", "_parked", "count", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.count = 0
        self._batches: collections.deque[_Batch] = collections.deque()
        self._parked: dict[MessageQueue, list[_Batch]] = {}
        self._arrived = asyncio.Event()
        self._closed = False

    @property
    def full(self) -> bool:
        return self.count >= self.limit

    def submit(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt], dispatch: bool = True) -> None:
        """A pull's messages (already put into ``pq``)."""
        self._batches.append((mq, pq, msgs))
        self.count += len(msgs)
        self._arrived.set()

    def take(self, paused: set[MessageQueue]) -> _Batch | None:
        """The oldest batch of a queue that is neither paused nor dropped (None: none waits)."""
        batches = self._batches
        while batches:
            batch = batches.popleft()
            mq, pq, msgs = batch
            if pq.dropped:
                self.count -= len(msgs)
                continue
            if mq in paused:
                self.count -= len(msgs)
                self._parked.setdefault(mq, []).append(batch)
                continue
            self.count -= len(msgs)
            return batch
        return None

    def resume(self, mq: MessageQueue) -> None:
        """``mq`` is polled again: its parked batches go back to the front of the line, oldest first."""
        parked = self._parked.pop(mq, None)
        if parked:
            for batch in reversed(parked):
                self._batches.appendleft(batch)
                self.count += len(batch[2])
            self._arrived.set()

    def drop(self, mq: MessageQueue) -> None:
        """Forget every batch of ``mq`` (it was taken away, or sought)."""
        self._parked.pop(mq, None)
        kept = [batch for batch in self._batches if batch[0] != mq]
        if len(kept) != len(self._batches):
            self._batches = collections.deque(kept)
            self.count = sum(len(batch[2]) for batch in kept)

    async def wait(self, timeout: float) -> None:
        """Until a batch arrives, the buffer closes, or ``timeout`` seconds pass."""
        if self._batches or self._closed:
            return
        self._arrived.clear()
        try:
            async with asyncio.timeout(timeout):
                await self._arrived.wait()
        except TimeoutError:
            pass

    def close(self) -> None:
        """Forget everything and wake the waiting polls (the consumer shuts down)."""
        self._closed = True
        self._batches.clear()
        self._parked.clear()
        self.count = 0
        self._arrived.set()

    @property
    def closed(self) -> bool:
        return self._closed


class LitePullService(PullService):
    """The push consumer's pull service feeding a :class:`PollBuffer`, with each queue's consumed position (the
    next offset to consume: one past what ``poll`` returned)."""

    def __init__(self, context: PushContext, buffer: PollBuffer, *, auto_commit: bool) -> None:
        super().__init__(context, buffer)
        self.buffer = buffer
        #: Queue → next offset to consume, moved by ``poll``; what a commit sends.
        self.positions: dict[MessageQueue, int] = {}
        self.paused: set[MessageQueue] = set()
        #: Commit a queue's position when it is taken away (auto commit).
        self.auto_commit = auto_commit
        #: Assigned queues sought before their pulls started: they start there instead.
        self.pending_seeks: dict[MessageQueue, int] = {}

    def start_pull(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        offset = self.pending_seeks.pop(mq, offset)
        self.positions[mq] = offset
        super().start_pull(mq, pq, offset)

    async def stop_pull(self, mq: MessageQueue) -> ProcessQueue | None:
        """The rebalance takes ``mq`` away: with auto commit its position becomes its offset to commit (the
        rebalance commits it next)."""
        pq = await super().stop_pull(mq)
        self.buffer.drop(mq)
        position = self.positions.pop(mq, None)
        if pq is not None and self.auto_commit and position is not None:
            self._ctx.offsets.update(mq, position)
        return pq

    async def restart(self, mq: MessageQueue, offset: int) -> None:
        """Pull ``mq`` again from ``offset`` with a fresh process queue; what was buffered is dropped."""
        pq = await PullService.stop_pull(self, mq)
        if pq is None:
            raise MQClientError(f"the message queue is no longer assigned: {mq}")
        pq.dropped = True
        self.buffer.drop(mq)
        self.start_pull(mq, self.new_process_queue(), offset)

    def held_back(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        return mq in self.paused or self.buffer.full or super().held_back(mq, pq)

    def passed_filtered(self, mq: MessageQueue, pq: ProcessQueue, next_offset: int) -> None:
        """Past filtered-out messages the position moves, once everything pulled of ``mq`` has been polled."""
        if not pq.msg_count and next_offset > self.positions.get(mq, -1):
            self.positions[mq] = next_offset

    async def _offset_moved(self, mq: MessageQueue, pq: ProcessQueue, offset: int, corrected: int) -> ProcessQueue:
        self.buffer.drop(mq)
        self.positions[mq] = corrected
        return await super()._offset_moved(mq, pq, offset, corrected)

    def commit_positions(self, queues: Iterable[MessageQueue]) -> None:
        """Make the positions of ``queues`` their offsets to commit (sent by the next persist)."""
        offsets = self._ctx.offsets
        for mq in queues:
            position = self.positions.get(mq)
            if position is not None and position >= 0:
                offsets.update(mq, position)
