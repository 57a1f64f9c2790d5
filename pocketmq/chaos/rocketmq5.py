"""RocketMQ 5's features under chaos: a POP consumer group on the run's topic, and a timer workload.

* :class:`PopGroup`: ``consumers`` consumers of one POP group read the run's topic (beside the push consumer group)
  with a short invisible time, record each message, and ack it: the even ones are
  :class:`~pocketmq.client.SimpleConsumer` loops (``receive`` then ``ack_batch``), the odd ones push consumers in
  POP mode (receives in flight, merged acks). What a broker loses in a crash, or an ack it never stored, comes back
  after the invisible time; the checker wants every acknowledged send delivered to this group too.
* :class:`TimerWorkload`: one producer sends ``rate`` timer messages a second to :data:`TIMER_TOPIC`, each due
  ``delay_min`` to ``delay_max`` seconds later (``TIMER_DELIVER_MS``), and a push consumer group records when each
  was stored in the topic (fired). The checker wants none lost, none early, and reports how late.

Every list is bounded (:data:`~pocketmq.chaos.workload.MAX_EVENTS`).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time

from pocketmq.chaos.events import PopDelivery, TimerDelivery, TimerSend
from pocketmq.chaos.workload import MAX_EVENTS
from pocketmq.client import ConsumeFromWhere, ConsumeResult, Message, MessageExt, Producer, PushConsumer
from pocketmq.client.consumer.simple import SimpleConsumer
from pocketmq.client.core.errors import SendFailedError
from pocketmq.common.message import MessageConst
from pocketmq.remoting.errors import PocketMQError

__all__ = ["POP_GROUP", "TIMER_GROUP", "TIMER_TOPIC", "PopGroup", "TimerWorkload"]

POP_GROUP = "chaos-pop-cg"
TIMER_GROUP = "chaos-timer-cg"
TIMER_TOPIC = "ChaosTimer"
#: A POP consumer's messages are invisible this long: what a crash loses comes back within it.
POP_INVISIBLE_TIME = 5.0
_RETRY_AFTER = 0.5


class PopGroup:
    """The POP consumer group (see the module docstring)."""

    def __init__(self, namesrv_addr: str, topic: str, consumers: int, t0: float) -> None:
        self.namesrv_addr = namesrv_addr
        self.topic = topic
        self.count = consumers
        self.deliveries: list[PopDelivery] = []
        self.dropped_events = 0
        self._t0 = t0
        self._consumers: list[SimpleConsumer | PushConsumer] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._stop = asyncio.Event()

    async def start(self) -> None:
        for i in range(self.count):
            if i % 2:
                await self._start_push(f"pop{i}")
                continue
            consumer = SimpleConsumer(POP_GROUP, namesrv_addr=self.namesrv_addr, instance_name=f"chaos-pop{i}",
                                      await_duration=2.0, invisible_duration=POP_INVISIBLE_TIME)
            consumer.subscribe(self.topic)
            await consumer.start()
            self._consumers.append(consumer)
            self._tasks.append(asyncio.ensure_future(self._loop(consumer, f"pop{i}")))

    async def _start_push(self, name: str) -> None:
        consumer = PushConsumer(POP_GROUP, namesrv_addr=self.namesrv_addr, instance_name=f"chaos-{name}", pop=True,
                                pop_invisible_time=POP_INVISIBLE_TIME, consume_message_batch_max_size=16,
                                long_polling_timeout=2.0, pull_timeout=5.0, shutdown_grace=2.0)
        consumer.subscribe(self.topic, "*")

        async def handler(messages: list[MessageExt]) -> ConsumeResult:
            for msg in messages:
                self._record(name, msg)
            return ConsumeResult.SUCCESS

        consumer.register_batch_handler(handler)
        await consumer.start()
        self._consumers.append(consumer)

    async def _loop(self, consumer: SimpleConsumer, name: str) -> None:
        while not self._stop.is_set():
            try:
                messages = await consumer.receive(16)
                for msg in messages:
                    self._record(name, msg)
                if messages:
                    await consumer.ack_batch(messages)
            except (PocketMQError, OSError):  # a broker down: its messages come back after their invisible time
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), _RETRY_AFTER)

    def _record(self, name: str, msg: MessageExt) -> None:
        if len(self.deliveries) < MAX_EVENTS:
            self.deliveries.append(PopDelivery(time.monotonic() - self._t0, name, msg.body.decode(errors="replace"),
                                               msg.reconsume_times))
        else:
            self.dropped_events += 1

    async def drain(self, wanted: set[str], timeout: float) -> bool:
        """Until the group has received every id of ``wanted``, or ``timeout``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if wanted <= {d.msg_id for d in self.deliveries}:
                return True
            await asyncio.sleep(0.5)
        return False

    async def stop(self, timeout: float) -> bool:
        """Stop receiving and shut the consumers down; False when a receive loop did not end within ``timeout``."""
        self._stop.set()
        pending: set[asyncio.Task[None]] = set()
        if self._tasks:
            _done, pending = await asyncio.wait(set(self._tasks), timeout=timeout)
        for task in pending:
            task.cancel()
        for consumer in self._consumers:
            with contextlib.suppress(PocketMQError, OSError):
                await consumer.shutdown()
        self._consumers.clear()
        return not pending


class TimerWorkload:
    """The timer producer and its consumer group (see the module docstring)."""

    def __init__(self, namesrv_addr: str, rate: float, t0: float, *, delay_min: float = 1.0, delay_max: float = 4.0,
                 seed: int = 1, send_timeout: float = 3.0) -> None:
        self.namesrv_addr = namesrv_addr
        self.rate = rate
        self.delay_min, self.delay_max = delay_min, delay_max
        self.send_timeout = send_timeout
        self.sends: list[TimerSend] = []
        self.deliveries: list[TimerDelivery] = []
        self.dropped_events = 0
        self._random = random.Random(seed)
        self._t0 = t0
        self._producer: Producer | None = None
        self._consumer: PushConsumer | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    async def start_consumer(self) -> None:
        consumer = PushConsumer(TIMER_GROUP, namesrv_addr=self.namesrv_addr, instance_name="chaos-timer-c",
                                consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
        consumer.subscribe(TIMER_TOPIC, "*")
        consumer.register_handler(self._handle)
        await consumer.start()
        self._consumer = consumer

    async def _handle(self, msg: MessageExt) -> ConsumeResult:
        due = msg.get_property(MessageConst.PROPERTY_TIMER_OUT_MS) or msg.get_property(
            MessageConst.PROPERTY_TIMER_DELIVER_MS) or "0"
        if len(self.deliveries) < MAX_EVENTS:
            self.deliveries.append(TimerDelivery(msg.body.decode(errors="replace"), int(due), msg.store_timestamp))
        else:
            self.dropped_events += 1
        return ConsumeResult.SUCCESS

    async def start_producer(self, max_seconds: float) -> None:
        self._producer = Producer("chaos-timer-pg", namesrv_addr=self.namesrv_addr, instance_name="chaos-timer-p",
                                  send_msg_timeout=self.send_timeout)
        await self._producer.start()
        self._task = asyncio.ensure_future(self._stream(self._producer, max_seconds))

    async def _stream(self, producer: Producer, max_seconds: float) -> None:
        interval = 1.0 / self.rate
        deadline = time.monotonic() + max_seconds
        seq = 0
        while not self._stop.is_set() and time.monotonic() < deadline:
            msg_id = f"t-{seq}"
            seq += 1
            due = int(time.time() * 1000 + self._random.uniform(self.delay_min, self.delay_max) * 1000)
            start = time.monotonic() - self._t0
            try:
                result = await producer.send(Message(TIMER_TOPIC, msg_id.encode(), deliver_at=due))
                status = result.status.name
            except (SendFailedError, PocketMQError, OSError):
                status = "FAILED"
            if len(self.sends) < MAX_EVENTS:
                self.sends.append(TimerSend(msg_id, start, due, status))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), interval)

    async def stop_producer(self) -> None:
        self._stop.set()
        if self._task is not None:
            await asyncio.wait_for(self._task, 30)
        if self._producer is not None:
            await self._producer.shutdown()

    async def drain(self, timeout: float) -> bool:
        """Until every acknowledged timer was delivered, or ``timeout`` (counted from the last one's due time)."""
        wanted = {s.msg_id for s in self.sends if s.status == "SEND_OK"}
        last_due = max((s.due_ms for s in self.sends), default=0) / 1000
        deadline = time.monotonic() + max(0.0, last_due - time.time()) + timeout
        while time.monotonic() < deadline:
            if wanted <= {d.msg_id for d in self.deliveries}:
                return True
            await asyncio.sleep(0.5)
        return False

    async def stop_consumer(self) -> None:
        if self._consumer is not None:
            with contextlib.suppress(PocketMQError, OSError):
                await self._consumer.shutdown()
