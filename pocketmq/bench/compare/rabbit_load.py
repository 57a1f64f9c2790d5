"""The workloads against RabbitMQ through ``aio-pika``: a durable quorum queue, persistent messages,
publisher confirms.

* W1/W2, tuned (the row "confirms in batches"): ``in_flight // Tuning.rabbit_confirm_batch`` coroutines on
  one confirming channel, each publishing ``rabbit_confirm_batch`` messages and awaiting their confirms
  together (≤ ``in_flight`` unconfirmed).
* W1/W2, naive (the row "naive client", which runs only W1 and W2: the rest is the same usage):
  ``in_flight`` coroutines, each awaiting its publish's confirm.
* W3: one publish at a time, each confirm awaited.
* W5: AMQP has no batch publish; RabbitMQ's own pipelining is confirms in flight: each of
  ``batch_workers`` coroutines publishes ``batch`` messages and awaits their confirms together.
* W4: ``basic.consume`` with a prefetch of :data:`PREFETCH`; ``EACH`` acknowledges every message,
  ``BATCH`` every 100th with ``multiple=True``. Consuming empties the queue, so each mode gets a fresh fill.
"""

from __future__ import annotations

import asyncio
import time

import aio_pika
from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractIncomingMessage
from pamqp.common import FieldTable

from pocketmq.bench.compare.workload import (
    ACK_EVERY,
    Budget,
    ConsumeMode,
    ConsumeProgress,
    Measure,
    Plan,
    SendRuns,
    body,
    pipelined,
)

CONFIRM_TIMEOUT = 30.0
PREFETCH = 1000
QUEUE_ARGUMENTS: FieldTable = {"x-queue-type": "quorum"}


class RabbitClient(SendRuns):
    """W1-W5 against one RabbitMQ node."""

    consume_modes: tuple[ConsumeMode, ...] = (ConsumeMode.EACH, ConsumeMode.BATCH)
    refill_per_consume = True

    def __init__(self, url: str, *, tuned: bool = True) -> None:
        self.url = url
        self.tuned = tuned

    async def produce(self, name: str, size: int, plan: Plan) -> Measure:
        if not self.tuned:
            return await super().produce(name, size, plan)
        return await self.produce_in_groups(name, size, plan, plan.tuning.rabbit_confirm_batch)

    async def _open(self, name: str) -> tuple[AbstractConnection, AbstractChannel]:
        connection = await aio_pika.connect(self.url, timeout=10)
        channel = await connection.channel(publisher_confirms=True)
        await channel.declare_queue(name, durable=True, arguments=QUEUE_ARGUMENTS)
        return connection, channel

    async def send_run(self, name: str, size: int, count: int, seconds: float, *, workers: int,
                       per_call: int, record_latency: bool) -> Measure:
        connection, channel = await self._open(name)
        try:
            exchange = channel.default_exchange
            payload = body(size)

            def message() -> aio_pika.Message:
                return aio_pika.Message(payload, delivery_mode=aio_pika.DeliveryMode.PERSISTENT)

            async def publish_one() -> None:
                await exchange.publish(message(), routing_key=name, timeout=CONFIRM_TIMEOUT)

            async def publish_batch() -> None:
                await asyncio.gather(*(exchange.publish(message(), routing_key=name, timeout=CONFIRM_TIMEOUT)
                                       for _ in range(per_call)))

            measure = Measure(capacity=count)
            await pipelined(publish_one if per_call == 1 else publish_batch, measure, Budget(count, seconds),
                            workers=workers, per_call=per_call, record_latency=record_latency)
            return measure
        finally:
            await connection.close()

    async def fill(self, name: str, size: int, count: int) -> int:
        measure = await self.send_run(name, size, count, 600.0, workers=1000, per_call=1, record_latency=False)
        return measure.done

    async def consume(self, name: str, count: int, mode: ConsumeMode, plan: Plan) -> Measure:
        progress = ConsumeProgress(count)
        start = time.perf_counter()
        connection, channel = await self._open(name)
        try:
            await channel.set_qos(prefetch_count=PREFETCH)
            queue = await channel.get_queue(name)
            unacked = 0

            async def on_message(message: AbstractIncomingMessage) -> None:
                nonlocal unacked
                if progress.finished.is_set():
                    return
                if mode is ConsumeMode.EACH:
                    await message.ack()
                else:
                    unacked += 1
                    if unacked >= ACK_EVERY or progress.count + 1 >= count:
                        await message.ack(multiple=True)
                        unacked = 0
                progress.add(1)

            tag = await queue.consume(on_message)
            await progress.wait(time.monotonic() + plan.time_limit, plan.consume_idle)
            await queue.cancel(tag)
            return progress.measure(start)
        finally:
            await connection.close()

    async def drop(self, name: str) -> None:
        connection = await aio_pika.connect(self.url, timeout=10)
        try:
            channel = await connection.channel()
            await channel.queue_delete(name)
        finally:
            await connection.close()
