"""The push consumer's POP mode (``PushConsumer(..., pop=True)``, RocketMQ 5's POP push consumer): no rebalance, no
offsets; every consumer of the group pops from every queue (:class:`~pocketmq.client.consumer.simple.PopReceiver`)
and hands each message to the handler, then:

* SUCCESS: the message is acked (a batch handler's messages with one BATCH_ACK_MESSAGE);
* RECONSUME_LATER (or an exception): below ``max_reconsume_times`` its invisible time is changed to the retry
  delay of its reconsume times (``pop_retry_delays``, RocketMQ's 10 s, 30 s, 1 m ... 2 h) and the broker hands it
  out again then; at ``max_reconsume_times`` it is sent to ``%DLQ%<group>`` (CONSUMER_SEND_MSG_BACK, delay -1)
  and acked. A message whose ack was lost comes back after ``pop_invisible_time``: at least once.

``orderly=True`` pops FIFO (``order=true``): each queue's messages are handled one after the other in order;
a failure changes the invisible time of it and of the rest of its pop to ``suspend_current_queue_time``, so the
queue hands them out again, in order, after that.

Flow control: a pop asks for no more messages than there are free handler slots (``consume_thread_max``), so
at most that many messages are held. Stopping lets running handlers finish within the grace period; messages
received and not handled come back after their invisible time.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Callable

from pocketmq.client.consumer.pop_api import PopAPI
from pocketmq.client.consumer.simple import PopReceiver
from pocketmq.client.consumer.types import DEFAULT_POP_RETRY_DELAYS, ConsumeResult
from pocketmq.client.core.message_ext import MessageExt
from pocketmq.common.logs import get_logger
from pocketmq.common.pop import POP_MAX_MSG_NUMS
from pocketmq.common.service import Service
from pocketmq.common.subscription import SubscriptionData
from pocketmq.remoting.errors import PocketMQError

__all__ = ["PopConsumeService"]

log = get_logger("pocketmq.client.pop_consume")

#: A failing receive (no route, broker gone) is tried again after this long (s).
RECEIVE_RETRY_DELAY = 1.0

HandlerCall = Callable[[list[MessageExt]], Awaitable[ConsumeResult]]
SendBack = Callable[[MessageExt], Awaitable[bool]]


class PopConsumeService(Service):
    """Receives and hands to the handler (see the module docstring)."""

    def __init__(self, api: PopAPI, subscriptions: dict[str, SubscriptionData], call: HandlerCall, *,
                 dead_letter: SendBack, workers: int, batch_max_size: int, invisible_time: float,
                 await_duration: float, orderly: bool, max_reconsume_times: int, retry_delays: tuple[float, ...],
                 suspend_time: float) -> None:
        super().__init__(name=f"pop-consume-{api.group}")
        self.api = api
        self.receiver = PopReceiver(api, subscriptions, fifo=orderly)
        self.call = call
        self.dead_letter = dead_letter
        self.workers = workers
        self.batch_max_size = batch_max_size
        self.invisible_ms = int(invisible_time * 1000)
        self.await_duration = await_duration
        self.orderly = orderly
        self.max_reconsume_times = max_reconsume_times
        self.retry_delays = retry_delays or DEFAULT_POP_RETRY_DELAYS
        self.suspend_ms = int(suspend_time * 1000)
        self._busy = 0
        self._free = asyncio.Event()
        self._free.set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.consumed = 0

    async def run(self) -> None:
        while True:
            while self._busy >= self.workers:
                self._free.clear()
                await self._free.wait()
            want = min(POP_MAX_MSG_NUMS, (self.workers - self._busy) * self.batch_max_size)
            try:
                messages = await self.receiver.receive(want, self.invisible_ms, self.await_duration)
            except PocketMQError as exc:
                log.warning("pop_receive_failed", group=self.api.group, error=str(exc))
                await asyncio.sleep(RECEIVE_RETRY_DELAY)
                continue
            for work in self._split(messages):
                self._spawn(work)

    def _split(self, messages: list[MessageExt]) -> list[list[MessageExt]]:
        """FIFO: one piece per queue, in order; else handler batches of ``batch_max_size``."""
        if self.orderly:
            by_queue: dict[tuple[str, str, int], list[MessageExt]] = collections.defaultdict(list)
            for msg in messages:
                by_queue[(msg.topic, msg.broker_name, msg.queue_id)].append(msg)
            return list(by_queue.values())
        size = self.batch_max_size
        return [messages[i:i + size] for i in range(0, len(messages), size)]

    def _spawn(self, work: list[MessageExt]) -> None:
        self._busy += 1
        task = asyncio.get_running_loop().create_task(self._orderly(work) if self.orderly else self._handle(work))
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._busy -= 1
        self._free.set()

    async def _handle(self, batch: list[MessageExt]) -> None:
        result = await self.call(batch)
        self.consumed += 1
        try:
            if result is ConsumeResult.SUCCESS:
                await (self.api.ack(batch[0]) if len(batch) == 1 else self.api.ack_batch(batch))
                return
            for msg in batch:
                await self._retry_later(msg)
        except PocketMQError as exc:  # the broker will hand them out again after their invisible time
            log.warning("pop_settle_failed", group=self.api.group, error=str(exc))

    async def _retry_later(self, msg: MessageExt) -> None:
        if msg.reconsume_times >= self.max_reconsume_times:
            if await self.dead_letter(msg):
                await self.api.ack(msg)
            return
        delay = self.retry_delays[min(msg.reconsume_times, len(self.retry_delays) - 1)]
        await self.api.change_invisible_time(msg, int(delay * 1000))

    async def _orderly(self, messages: list[MessageExt]) -> None:
        for index, msg in enumerate(messages):
            result = await self.call([msg])
            self.consumed += 1
            try:
                if result is ConsumeResult.SUCCESS:
                    await self.api.ack(msg)
                    continue
                if msg.reconsume_times >= self.max_reconsume_times and await self.dead_letter(msg):
                    await self.api.ack(msg)
                    continue
                for later in messages[index:]:  # the queue hands them out again, in order, after the pause
                    await self.api.change_invisible_time(later, self.suspend_ms)
                return
            except PocketMQError as exc:
                log.warning("pop_settle_failed", group=self.api.group, error=str(exc))
                return

    async def drain(self, grace: float) -> None:
        """After :meth:`stop` (no more receives): let running handlers finish within ``grace``, then cancel them."""
        if self._tasks:
            _done, pending = await asyncio.wait(set(self._tasks), timeout=grace)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)
