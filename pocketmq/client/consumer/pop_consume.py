"""The push consumer's POP mode (``PushConsumer(..., pop=True)``, RocketMQ 5's POP push consumer): no rebalance, no
offsets; every consumer of the group pops from every queue (:class:`~pocketmq.client.consumer.simple.PopReceiver`)
and hands each message to the handler, then:

* SUCCESS: the message is acked with BATCH_ACK_MESSAGE. One ack request is in flight per broker group at a
  time; the handlers' acks that come meanwhile leave together, in one request, when it returns (a lone ack
  leaves at the end of its loop step). Under load this turns one ack request per pop into one per several, which
  is most of what POP costs beyond a pull on both sides (a request's headers, framing, syscalls); an idle
  consumer's acks wait for nothing;
* RECONSUME_LATER (or an exception): below ``max_reconsume_times`` its invisible time is changed to the retry
  delay of its reconsume times (``pop_retry_delays``, RocketMQ's 10 s, 30 s, 1 m ... 2 h) and the broker hands it
  out again then; at ``max_reconsume_times`` it is sent to ``%DLQ%<group>`` (CONSUMER_SEND_MSG_BACK, delay -1)
  and acked. A message whose ack was lost comes back after ``pop_invisible_time``: at least once.

``orderly=True`` pops FIFO (``order=true``): each queue's messages are handled one after the other in order;
a failure changes the invisible time of it and of the rest of its pop to ``suspend_current_queue_time``, so the
queue hands them out again, in order, after that.

Flow control: ``pop_receives`` receives are in flight at once (one for FIFO), and each asks for no more messages
than the handler slots (``consume_thread_max``) it reserved, so at most that many handler calls' messages are
held. Stopping lets running handlers finish within the grace period; messages received and not handled come back
after their invisible time.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from pocketmq.client.consumer.pop_api import AckGroup, PopAPI, PopResponse, ack_groups
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


class AckMerger:
    """The handlers' acks, one BATCH_ACK_MESSAGE in flight per broker group; those that come while it is out
    leave together when it returns. Waiting acks are bounded by the handler slots (each one holds its slot)."""

    def __init__(self, api: PopAPI) -> None:
        self.api = api
        self._waiting: dict[str, list[tuple[list[AckGroup], int, asyncio.Future[None]]]] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        #: messages acked since start
        self.acked = 0

    async def ack(self, broker: str, groups: list[AckGroup]) -> None:
        """Ack the groups of one broker group together with whatever else waits; raises the request's error."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(broker, []).append((groups, sum(len(g[2]) for g in groups), future))
        if broker not in self._tasks:
            self._tasks[broker] = asyncio.get_running_loop().create_task(self._send(broker))
        await future

    async def _send(self, broker: str) -> None:
        try:
            while waiting := self._waiting.pop(broker, None):
                live = [entry for entry in waiting if not entry[2].done()]
                if not live:
                    continue
                try:
                    await self.api.ack_groups([group for groups, _count, _future in live for group in groups])
                except Exception as exc:  # each handler logs it; the messages come back after their invisible time
                    _settle(live, exc)
                except BaseException:
                    for _groups, _count, future in live:
                        future.cancel()
                    raise
                else:
                    self.acked += sum(count for _groups, count, _future in live)
                    _settle(live, None)
        finally:
            del self._tasks[broker]
            for _groups, _count, future in self._waiting.pop(broker, []):  # cancelled (a stopping consumer)
                future.cancel()

    async def ack_alone(self, msg: MessageExt) -> None:
        """ACK_MESSAGE for one message now (FIFO, where the next message waits for this one's ack)."""
        await self.api.ack(msg)
        self.acked += 1

    async def close(self) -> None:
        """Cancel what is in flight (after the handlers were drained)."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)


def _settle(waiting: list[tuple[list[AckGroup], int, asyncio.Future[None]]], exc: Exception | None) -> None:
    for _groups, _count, future in waiting:
        if future.done():
            continue
        if exc is None:
            future.set_result(None)
        else:
            future.set_exception(exc)


class PopConsumeService(Service):
    """Receives and hands to the handler (see the module docstring)."""

    def __init__(self, api: PopAPI, subscriptions: dict[str, SubscriptionData], call: HandlerCall, *,
                 dead_letter: SendBack, workers: int, batch_max_size: int, invisible_time: float,
                 await_duration: float, orderly: bool, max_reconsume_times: int, retry_delays: tuple[float, ...],
                 suspend_time: float, receives: int) -> None:
        super().__init__(name=f"pop-consume-{api.group}")
        self.api = api
        self.receiver = PopReceiver(api, subscriptions, fifo=orderly)
        self.acks = AckMerger(api)
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
        self.receives = receives
        self._busy = 0
        self._reserved = 0
        self._free = asyncio.Event()
        self._free.set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.consumed = 0

    async def run(self) -> None:
        # Several receives in flight keep the broker popping while the handlers run; FIFO keeps one, whose
        # attempt id a retried receive repeats.
        async with asyncio.TaskGroup() as group:
            for _ in range(1 if self.orderly else self.receives):
                group.create_task(self._receive_loop())

    async def _receive_loop(self) -> None:
        per_slot = self.batch_max_size
        while True:
            slots = await self._reserve(-(-POP_MAX_MSG_NUMS // per_slot))
            response: PopResponse | None = None
            try:
                response = await self.receiver.receive_response(min(POP_MAX_MSG_NUMS, slots * per_slot),
                                                                self.invisible_ms, self.await_duration)
            except PocketMQError as exc:
                log.warning("pop_receive_failed", group=self.api.group, error=str(exc))
            finally:
                self._release(slots)
            if response is None:
                await asyncio.sleep(RECEIVE_RETRY_DELAY)
                continue
            self._dispatch(response)

    async def _reserve(self, most: int) -> int:
        """Up to ``most`` free handler slots for one receive (at least one), waited for."""
        while (free := self.workers - self._busy - self._reserved) <= 0:
            self._free.clear()
            await self._free.wait()
        slots = min(free, most)
        self._reserved += slots
        return slots

    def _release(self, slots: int) -> None:
        self._reserved -= slots
        self._free.set()

    def _dispatch(self, response: PopResponse) -> None:
        """FIFO: one handler task per queue, its messages in order; else one per ``batch_max_size`` messages,
        each with what acking them means (from the response's runs, not from each message's handle)."""
        messages = response.messages
        if self.orderly:
            by_queue: dict[tuple[str, str, int], list[MessageExt]] = collections.defaultdict(list)
            for msg in messages:
                by_queue[(msg.topic, msg.broker_name, msg.queue_id)].append(msg)
            for piece in by_queue.values():
                self._spawn(self._orderly(piece))
            return
        size = self.batch_max_size
        for start in range(0, len(messages), size):
            self._spawn(self._handle(messages[start:start + size], ack_groups(messages, response.runs, start,
                                                                              start + size)))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        self._busy += 1
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._busy -= 1
        self._free.set()

    async def _handle(self, batch: list[MessageExt], groups: list[AckGroup]) -> None:
        result = await self.call(batch)
        self.consumed += 1
        try:
            if result is ConsumeResult.SUCCESS:
                await self.acks.ack(batch[0].broker_name, groups)
                return
            for msg in batch:
                await self._retry_later(msg)
        except PocketMQError as exc:  # the broker will hand them out again after their invisible time
            log.warning("pop_settle_failed", group=self.api.group, error=str(exc))

    async def _retry_later(self, msg: MessageExt) -> None:
        if msg.reconsume_times >= self.max_reconsume_times:
            if await self.dead_letter(msg):
                await self.acks.ack_alone(msg)
            return
        delay = self.retry_delays[min(msg.reconsume_times, len(self.retry_delays) - 1)]
        await self.api.change_invisible_time(msg, int(delay * 1000))

    async def _orderly(self, messages: list[MessageExt]) -> None:
        for index, msg in enumerate(messages):
            result = await self.call([msg])
            self.consumed += 1
            try:
                if result is ConsumeResult.SUCCESS:
                    await self.acks.ack_alone(msg)
                    continue
                if msg.reconsume_times >= self.max_reconsume_times and await self.dead_letter(msg):
                    await self.acks.ack_alone(msg)
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
        await self.acks.close()
