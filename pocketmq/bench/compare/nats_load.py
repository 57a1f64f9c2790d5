"""The workloads against NATS JetStream through ``nats-py`` (file storage, publish with ack), in two styles.

Tuned (NATS's own high-throughput usage, the row "publish_async"):

* W1/W2: ``in_flight // Tuning.nats_batch`` coroutines, each issuing ``nats_batch`` ``js.publish_async``
  calls and then awaiting their PubAcks together (≤ ``in_flight`` outstanding). One coroutine keeping 1,000
  futures pending and refilling as each ack lands was several times slower (each refill flushed alone;
  docs/perf/method.md).
* W4: the pull consumer fetches ``Tuning.nats_fetch`` messages per request.

Naive (the row "naive client"):

* W1/W2: ``in_flight`` coroutines, each awaiting ``js.publish`` (the server's PubAck) in a loop.
* W4: fetches of 100.

Both (the naive row does not run W3 and W5: the same usage):

* W3: one ``js.publish`` at a time.
* W5: JetStream has no batch publish; its own pipelining is ``js.publish_async``: each of
  ``batch_workers`` coroutines issues ``batch`` publishes and awaits their acks together.
* W4: a durable pull consumer (deliver all); ``EACH`` acknowledges every message (``AckPolicy.EXPLICIT``,
  ``msg.ack()``), ``BATCH`` acknowledges every 100th and the last (``AckPolicy.ALL``).

Each stream is named after the run and holds one subject of the same name.
"""

from __future__ import annotations

import asyncio
import time

import nats
from nats.aio.client import Client as NatsConnection
from nats.js import JetStreamContext, api
from nats.js.errors import NotFoundError

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

PUBLISH_TIMEOUT = 10.0
FETCH_TIMEOUT = 1.0


class NatsClient(SendRuns):
    """W1-W5 against one nats-server."""

    consume_modes: tuple[ConsumeMode, ...] = (ConsumeMode.EACH, ConsumeMode.BATCH)
    refill_per_consume = False
    fill_workers = 32

    def __init__(self, url: str, *, tuned: bool = True) -> None:
        self.url = url
        self.tuned = tuned

    async def produce(self, name: str, size: int, plan: Plan) -> Measure:
        if not self.tuned:
            return await super().produce(name, size, plan)
        return await self.produce_in_groups(name, size, plan, plan.tuning.nats_batch)

    async def _connect(self, max_pending: int = 4000) -> tuple[NatsConnection, JetStreamContext]:
        connection = await nats.connect(self.url, connect_timeout=5, max_reconnect_attempts=0,
                                        allow_reconnect=False, pending_size=8 * 1024 * 1024)
        return connection, connection.jetstream(timeout=PUBLISH_TIMEOUT, publish_async_max_pending=max_pending)

    async def _stream(self, js: JetStreamContext, name: str) -> None:
        try:
            await js.stream_info(name)
        except NotFoundError:
            await js.add_stream(name=name, subjects=[name], storage=api.StorageType.FILE,
                                retention=api.RetentionPolicy.LIMITS)

    async def send_run(self, name: str, size: int, count: int, seconds: float, *, workers: int, per_call: int,
                       record_latency: bool) -> Measure:
        """``js.publish`` awaited for its ack; with ``per_call`` > 1, ``per_call`` ``publish_async`` calls and
        then their acks."""
        connection, js = await self._connect(max_pending=4000 if per_call == 1 else workers * per_call + 64)
        try:
            await self._stream(js, name)
            payload = body(size)

            async def one_batch() -> None:
                futures = [await js.publish_async(name, payload) for _ in range(per_call)]
                await asyncio.wait_for(asyncio.gather(*futures), PUBLISH_TIMEOUT)

            measure = Measure(capacity=count)
            await pipelined((lambda: js.publish(name, payload)) if per_call == 1 else one_batch, measure,
                            Budget(count, seconds), workers=workers, per_call=per_call, record_latency=record_latency)
            return measure
        finally:
            await connection.close()

    async def consume(self, name: str, count: int, mode: ConsumeMode, plan: Plan) -> Measure:
        connection, js = await self._connect()
        try:
            policy = api.AckPolicy.EXPLICIT if mode is ConsumeMode.EACH else api.AckPolicy.ALL
            config = api.ConsumerConfig(ack_policy=policy, deliver_policy=api.DeliverPolicy.ALL,
                                        max_ack_pending=100_000, ack_wait=60.0)
            progress = ConsumeProgress(count)
            start = time.perf_counter()
            fetch = plan.tuning.nats_fetch if self.tuned else ACK_EVERY
            subscription = await js.pull_subscribe(name, durable=f"{name}-{mode}", stream=name, config=config)
            deadline = time.monotonic() + plan.time_limit
            while not progress.finished.is_set() and time.monotonic() < deadline:
                if time.perf_counter() - progress.last > plan.consume_idle:
                    break
                try:
                    messages = await subscription.fetch(fetch, timeout=FETCH_TIMEOUT)
                except TimeoutError:
                    continue
                if mode is ConsumeMode.EACH:
                    for message in messages:
                        await message.ack()
                else:
                    for at, message in enumerate(messages, 1):
                        if at % ACK_EVERY == 0 or at == len(messages):
                            await message.ack()
                progress.add(len(messages))
            await connection.flush()
            return progress.measure(start)
        finally:
            await connection.close()

    async def drop(self, name: str) -> None:
        connection, js = await self._connect()
        try:
            await js.delete_stream(name)
        except NotFoundError:
            pass
        finally:
            await connection.close()

