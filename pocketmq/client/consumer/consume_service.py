"""How a push consumer runs its handler over pulled messages (RocketMQ's ``ConsumeMessageConcurrentlyService``
and ``ConsumeMessageOrderlyService``).

Concurrent (:class:`ConcurrentConsumeService`). A fixed pool of ``consume_thread_max`` worker tasks takes
work items (``consume_message_batch_max_size`` messages of one queue, in pull order) from one FIFO, so at
most that many handlers run at once, across all queues. The FIFO is bounded by flow control: a queue
stops being pulled while its :class:`~client.consumer.process_queue.ProcessQueue` holds more than its thresholds,
and every message in the FIFO is held by a process queue. After the handler:

* SUCCESS (or ``None``): the messages leave the process queue, and the offset it answers (the lowest one
  still in flight) becomes the queue's offset to commit, never moving back;
* RECONSUME_LATER or an exception: CLUSTERING sends each message back for a delayed retry
  (:meth:`ConsumeOwner.send_back`, which falls back to producing to ``%RETRY%<group>``); a message that
  could not be handed back either way stays in flight and is consumed again locally after
  :data:`RECONSUME_LATER_DELAY`. BROADCASTING drops failed messages (logged), as RocketMQ does.

A worker yields to the loop every :data:`YIELD_EVERY` items, so a handler that never awaits cannot starve
the pulls. Items of a queue that was taken away (dropped) are skipped; their results are ignored.

Orderly (:class:`OrderlyConsumeService`). One task per queue, started when messages arrive and none is
running, takes one batch at a time in offset order under the queue's ``consume_lock``; in CLUSTERING only
while the consumer holds the broker's lock on the queue. A failed batch is put back and consumed again
after ``suspend_current_queue_time``, up to ``max_reconsume_times`` attempts per message; then the message
goes to the DLQ (:meth:`ConsumeOwner.send_back` with ``to_dlq``) and the queue moves on. A semaphore keeps
the handlers running at once across queues within ``consume_thread_max``.

Stopping: queued items are dropped (their messages were never acknowledged, so they are consumed again
after a restart or by the queue's next owner), running handlers get a grace period, then are cancelled.
"""

from __future__ import annotations

import asyncio
import collections
import functools
from collections.abc import Awaitable, Callable
from typing import Protocol

from pocketmq.client.consumer.offset_store import OffsetTable
from pocketmq.client.consumer.process_queue import ProcessQueue
from pocketmq.client.consumer.types import ConsumeResult
from pocketmq.client.core.message import MessageQueue
from pocketmq.client.core.message_ext import MessageExt
from pocketmq.common.logs import get_logger

__all__ = [
    "RECONSUME_LATER_DELAY",
    "YIELD_EVERY",
    "ConcurrentConsumeService",
    "ConsumeOwner",
    "ConsumeService",
    "HandlerCall",
    "OrderlyConsumeService",
]

log = get_logger("pocketmq.client.consume_service")

#: Messages that could be neither sent back nor produced to the retry topic are consumed again locally
#: after this long (s), as RocketMQ's ``submitConsumeRequestLater``.
RECONSUME_LATER_DELAY = 5.0
#: A worker lets the event loop run after this many items, whatever the handler does.
YIELD_EVERY = 64
#: An orderly queue whose broker lock could not be taken is tried again after this long (s).
LOCK_RETRY_DELAY = 1.0

_SUCCESS = ConsumeResult.SUCCESS
_LATER = ConsumeResult.RECONSUME_LATER

#: Calls the application's handler with a batch; never raises (an exception is RECONSUME_LATER).
HandlerCall = Callable[[list[MessageExt]], Awaitable[ConsumeResult]]
_Item = tuple[MessageQueue, ProcessQueue, list[MessageExt]]


class ConsumeOwner(Protocol):
    """What a consume service needs from its push consumer."""

    @property
    def clustering(self) -> bool: ...

    async def send_back(self, msg: MessageExt, *, to_dlq: bool) -> bool:
        """Hand a failed message to the broker for retry (or to the DLQ); ``False`` when that failed."""
        ...

    async def lock_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        """Take (or renew) the broker's lock on ``mq`` for orderly consumption."""
        ...


class ConcurrentConsumeService:
    """Worker pool for concurrent consumption (see the module docstring)."""

    def __init__(
        self,
        owner: ConsumeOwner,
        call: HandlerCall,
        offsets: OffsetTable,
        *,
        workers: int,
        batch_max_size: int,
        reconsume_later_delay: float = RECONSUME_LATER_DELAY,
    ) -> None:
        self.owner = owner
        self.call = call
        self.offsets = offsets
        self.workers = workers
        self.batch_max_size = batch_max_size
        self.reconsume_later_delay = reconsume_later_delay
        self._work: collections.deque[_Item] = collections.deque()
        self._idle: collections.deque[asyncio.Future[None]] = collections.deque()
        self._tasks: list[asyncio.Task[None]] = []
        self._later: set[asyncio.Task[None]] = set()
        self._quiet: asyncio.Future[None] | None = None
        self._closing = False
        #: Handlers running right now.
        self.busy = 0
        #: Handler calls finished (any result), for statistics and tests.
        self.consumed = 0

    @property
    def queued(self) -> int:
        """Work items waiting for a worker."""
        return len(self._work)

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._worker(), name=f"consume-worker-{i}") for i in range(self.workers)]

    def submit(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt], dispatch: bool = True) -> None:
        """Queue freshly pulled messages of ``mq`` (already put into ``pq``; ``dispatch`` is the orderly
        service's business)."""
        if self._closing:
            return
        work = self._work
        size = self.batch_max_size
        if size == 1:
            for msg in msgs:
                work.append((mq, pq, [msg]))
            count = len(msgs)
        else:
            count = 0
            for start in range(0, len(msgs), size):
                work.append((mq, pq, msgs[start : start + size]))
                count += 1
        idle = self._idle
        while count and idle:
            waiter = idle.popleft()
            if not waiter.done():
                waiter.set_result(None)
                count -= 1

    async def _worker(self) -> None:
        work = self._work
        loop = asyncio.get_running_loop()
        call = self.call
        offsets = self.offsets
        done = 0
        while True:
            if not work:
                waiter: asyncio.Future[None] = loop.create_future()
                self._idle.append(waiter)
                await waiter
                continue
            mq, pq, msgs = work.popleft()
            if pq.dropped:
                continue
            self.busy += 1
            try:
                result = await call(msgs)
                if result is _SUCCESS:
                    offset = pq.remove(msgs)
                else:
                    offset = await self._failed(mq, pq, msgs)
                if offset >= 0 and not pq.dropped:
                    offsets.update(mq, offset, increase_only=True)
            except Exception:  # a bug of ours: keep the worker, and the messages, alive
                log.exception("consume_worker_failed", topic=mq.topic, queue_id=mq.queue_id)
                self._consume_later(mq, pq, msgs)
            finally:
                self.busy -= 1
                self.consumed += 1
                if not self.busy and self._quiet is not None and not self._quiet.done():
                    self._quiet.set_result(None)
            done += 1
            if done >= YIELD_EVERY:
                done = 0
                await asyncio.sleep(0)

    async def _failed(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt]) -> int:
        """RECONSUME_LATER: send back (CLUSTERING) or drop (BROADCASTING); returns the offset to commit."""
        if not self.owner.clustering:
            for msg in msgs:
                log.warning("broadcast_consume_failed_dropped", topic=msg.topic, queue_id=msg.queue_id,
                            queue_offset=msg.queue_offset, msg_id=msg.msg_id)
            return pq.remove(msgs)
        handed: list[MessageExt] = []
        kept: list[MessageExt] = []
        for msg in msgs:
            if await self.owner.send_back(msg, to_dlq=False):
                handed.append(msg)
            else:
                msg.reconsume_times += 1
                kept.append(msg)
        if kept:
            self._consume_later(mq, pq, kept)
        return pq.remove(handed) if handed else -1

    def _consume_later(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        if self._closing:
            return

        async def later() -> None:
            await asyncio.sleep(self.reconsume_later_delay)
            if not pq.dropped:
                self.submit(mq, pq, msgs)

        task = asyncio.get_running_loop().create_task(later())
        self._later.add(task)
        task.add_done_callback(self._later.discard)

    async def stop(self, grace: float) -> None:
        """Drop queued items, give running handlers ``grace`` seconds, then cancel the workers."""
        self._closing = True
        self._work.clear()
        if self.busy:
            self._quiet = asyncio.get_running_loop().create_future()
            await asyncio.wait({self._quiet}, timeout=grace)
            if self.busy:
                log.warning("consume_handlers_cancelled", running=self.busy, grace=grace)
        tasks = [*self._tasks, *self._later]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks = []


class OrderlyConsumeService:
    """One consume task per queue, in offset order (see the module docstring)."""

    def __init__(
        self,
        owner: ConsumeOwner,
        call: HandlerCall,
        offsets: OffsetTable,
        *,
        concurrency: int,
        batch_max_size: int,
        max_reconsume_times: int,
        suspend_time: float,
    ) -> None:
        self.owner = owner
        self.call = call
        self.offsets = offsets
        self.batch_max_size = batch_max_size
        self.max_reconsume_times = max_reconsume_times
        self.suspend_time = suspend_time
        self._limit = asyncio.Semaphore(concurrency)
        self._tasks: dict[MessageQueue, asyncio.Task[None]] = {}
        self._closing = False
        self.busy = 0
        self.consumed = 0

    @property
    def queued(self) -> int:
        return 0

    def start(self) -> None:
        """Nothing to start: consume tasks are created as messages arrive."""

    def submit(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt], dispatch: bool) -> None:
        """Messages were put into ``pq``; start its consume task when ``put`` asked for one."""
        if self._closing or not dispatch:
            return
        running = self._tasks.get(mq)
        if running is not None and not running.done():
            return  # it takes the new messages before it ends
        task = asyncio.get_running_loop().create_task(self._consume(mq, pq), name=f"consume-orderly-{mq.queue_id}")
        self._tasks[mq] = task
        task.add_done_callback(functools.partial(self._forget, mq))

    def _forget(self, mq: MessageQueue, task: asyncio.Task[None]) -> None:
        if self._tasks.get(mq) is task:
            del self._tasks[mq]
        if not task.cancelled() and task.exception() is not None:
            log.error("orderly_consume_task_failed", topic=mq.topic, queue_id=mq.queue_id,
                      error=repr(task.exception()))

    async def _consume(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        try:
            while not pq.dropped and not self._closing:
                unlocked = self.owner.clustering and (not pq.locked or pq.is_lock_expired())
                if unlocked and not await self.owner.lock_queue(mq, pq):
                    await asyncio.sleep(LOCK_RETRY_DELAY)
                    continue
                try:
                    suspend = await self._consume_batch(mq, pq)
                except Exception:  # a bug of ours: the queue must not stall, so retry after a pause
                    log.exception("orderly_consume_failed", topic=mq.topic, queue_id=mq.queue_id)
                    pq.rollback()
                    suspend = True
                if suspend is None:
                    return  # nothing left: the next put starts a new task
                if suspend:
                    await asyncio.sleep(self.suspend_time)
        finally:
            if pq.dropped or self._closing:
                pq.consuming = False

    async def _consume_batch(self, mq: MessageQueue, pq: ProcessQueue) -> bool | None:
        """One batch under the queue's consume lock: ``None`` when there was nothing to take, else whether
        the queue must pause before the next batch."""
        async with pq.consume_lock:
            if pq.dropped:
                return False
            msgs = pq.take_messages(self.batch_max_size)
            if not msgs:
                return None
            async with self._limit:
                self.busy += 1
                try:
                    result = await self.call(msgs)
                finally:
                    self.busy -= 1
                    self.consumed += 1
            if pq.dropped:
                return False  # the queue has a new owner; it consumes these again
            suspend = False
            if result is not _SUCCESS:
                suspend = await self._check_reconsume_times(msgs)
            if suspend:
                pq.make_message_to_consume_again(msgs)
                return True
            offset = pq.commit()
            if offset >= 0:
                self.offsets.update(mq, offset)
            return False

    async def _check_reconsume_times(self, msgs: list[MessageExt]) -> bool:
        """After a failure: whether to retry the batch locally (``True``), or move on because every message
        that used up its attempts went to the DLQ."""
        suspend = False
        for msg in msgs:
            if msg.reconsume_times >= self.max_reconsume_times:
                if not await self.owner.send_back(msg, to_dlq=True):
                    suspend = True  # could not hand it to the DLQ: keep trying it here
                    msg.reconsume_times += 1
            else:
                suspend = True
                msg.reconsume_times += 1
        return suspend

    async def stop(self, grace: float) -> None:
        """Let running batches finish within ``grace``, then cancel the consume tasks."""
        self._closing = True
        tasks = list(self._tasks.values())
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=grace)
            for task in pending:
                task.cancel()
            if pending:
                log.warning("orderly_consume_cancelled", queues=len(pending), grace=grace)
                await asyncio.gather(*pending, return_exceptions=True)
        self._tasks.clear()


#: Either consume service: what the pull service hands pulled messages to.
ConsumeService = ConcurrentConsumeService | OrderlyConsumeService
