"""The workloads against Redis Streams through ``redis.asyncio`` (AOF ``everysec``), in two styles.

Tuned (what a Redis user who wants throughput writes, the row "pipelined"):

* W1/W2: ``XADD``s in pipelines of ``Tuning.redis_pipeline`` commands (no MULTI), ``in_flight // pipeline``
  pipelines in flight, each on its own connection (500 x 2 by default: ≤ 1,000 outstanding).
* W4: ``XREADGROUP … COUNT Tuning.redis_read_count``; the XACKs of one read travel in the same pipeline as
  the next read, so acknowledging costs no round trip of its own.

Naive (one awaited command per coroutine, the row "naive client"):

* W1/W2: ``in_flight`` coroutines, each awaiting ``XADD name * d <body>``. redis-py runs one command per
  connection at a time, so the coroutines share a blocking pool of :data:`POOL_CONNECTIONS` connections:
  up to that many commands are on the wire and the rest wait for a connection.
* W4: ``XREADGROUP COUNT 100``, then the XACKs, then the next read.

Both:

* W3: one ``XADD`` at a time (the naive row does not run it: it is the same usage).
* W5: Redis's own batching is a pipeline: each of ``batch_workers`` coroutines sends ``batch`` XADDs in
  one pipeline (no MULTI) and awaits the replies.
* W4 modes: ``EACH`` acknowledges every message with its own ``XACK`` (pipelined), ``BATCH`` sends one ``XACK``
  per 100 ids (the fast mode). Each mode reads the whole stream through a group of its own.
"""

from __future__ import annotations

import time
from typing import Any

import redis.asyncio as aioredis
from redis.typing import EncodableT, FieldT

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

#: Connections shared by the W1/W2 coroutines (see the module docstring).
POOL_CONNECTIONS = 64
SOCKET_TIMEOUT = 30.0
FIELD = b"d"


class RedisClient(SendRuns):
    """W1-W5 against one redis-server."""

    consume_modes: tuple[ConsumeMode, ...] = (ConsumeMode.EACH, ConsumeMode.BATCH)
    refill_per_consume = False
    fill_workers = 32

    def __init__(self, host: str, port: int, *, tuned: bool = True) -> None:
        self.host = host
        self.port = port
        self.tuned = tuned

    async def produce(self, name: str, size: int, plan: Plan) -> Measure:
        if not self.tuned:
            return await super().produce(name, size, plan)
        return await self.produce_in_groups(name, size, plan, plan.tuning.redis_pipeline)

    def _connect(self, connections: int) -> aioredis.Redis:
        pool = aioredis.BlockingConnectionPool(host=self.host, port=self.port, max_connections=connections,
                                               timeout=SOCKET_TIMEOUT, socket_timeout=SOCKET_TIMEOUT)
        return aioredis.Redis(connection_pool=pool)

    async def send_run(self, name: str, size: int, count: int, seconds: float, *, workers: int, per_call: int,
                       record_latency: bool) -> Measure:
        """``XADD`` awaited for its reply over a pool of at most :data:`POOL_CONNECTIONS`; with ``per_call`` > 1,
        a pipeline of ``per_call`` XADDs."""
        client = self._connect(min(POOL_CONNECTIONS, workers))
        try:
            payload: dict[FieldT, EncodableT] = {FIELD: body(size)}
            await client.ping()

            async def one_batch() -> None:
                pipe = client.pipeline(transaction=False)
                for _ in range(per_call):
                    pipe.xadd(name, payload)
                await pipe.execute()

            measure = Measure(capacity=count)
            await pipelined((lambda: client.xadd(name, payload)) if per_call == 1 else one_batch, measure,
                            Budget(count, seconds), workers=workers, per_call=per_call, record_latency=record_latency)
            return measure
        finally:
            await client.aclose()

    async def consume(self, name: str, count: int, mode: ConsumeMode, plan: Plan) -> Measure:
        client = self._connect(1)
        group = f"g-{mode}"
        read_count = plan.tuning.redis_read_count if self.tuned else ACK_EVERY
        try:
            progress = ConsumeProgress(count)
            start = time.perf_counter()
            await client.xgroup_create(name, group, id="0")
            deadline = time.monotonic() + plan.time_limit
            pending: list[bytes] = []
            while not progress.finished.is_set() and time.monotonic() < deadline:
                if time.perf_counter() - progress.last > plan.consume_idle:
                    break
                if self.tuned:  # the previous read's XACKs ride with this read
                    pipe = client.pipeline(transaction=False)
                    _acknowledge(pipe, name, group, pending, mode)
                    pipe.xreadgroup(group, "c1", {name: ">"}, count=read_count, block=1000)
                    pending = _ids((await pipe.execute())[-1])
                    progress.add(len(pending))
                    continue
                ids = _ids(await client.xreadgroup(group, "c1", {name: ">"}, count=read_count, block=1000))
                if ids:
                    ack = client.pipeline(transaction=False)
                    _acknowledge(ack, name, group, ids, mode)
                    await ack.execute()
                progress.add(len(ids))
            if pending:
                last = client.pipeline(transaction=False)
                _acknowledge(last, name, group, pending, mode)
                await last.execute()
            return progress.measure(start)
        finally:
            await client.aclose()

    async def drop(self, name: str) -> None:
        client = self._connect(1)
        try:
            await client.delete(name)
        finally:
            await client.aclose()


def _ids(reply: Any) -> list[bytes]:
    """The entry ids of one ``XREADGROUP`` reply (empty when it timed out)."""
    return [entry_id for entry_id, _fields in reply[0][1]] if reply else []


def _acknowledge(pipe: Any, name: str, group: str, ids: list[bytes], mode: ConsumeMode) -> None:
    """Queue the XACKs of ``ids`` on ``pipe``: one per id (``EACH``) or one per :data:`ACK_EVERY` ids."""
    if mode is ConsumeMode.EACH:
        for entry_id in ids:
            pipe.xack(name, group, entry_id)
        return
    for at in range(0, len(ids), ACK_EVERY):
        pipe.xack(name, group, *ids[at:at + ACK_EVERY])
