"""The workloads against Redis Streams through ``redis.asyncio`` (AOF ``everysec``).

* W1/W2: ``in_flight`` coroutines, each awaiting ``XADD name * d <body>``. redis-py runs one command per
  connection at a time, so the coroutines share a blocking pool of :data:`POOL_CONNECTIONS` connections:
  up to that many commands are on the wire and the rest wait for a connection (more connections were
  slower here: each is another socket for the single-threaded client to serve).
* W3: one ``XADD`` at a time.
* W5: Redis's own batching is a pipeline: each of ``batch_workers`` coroutines sends ``batch`` XADDs in
  one pipeline (no MULTI) and awaits the replies.
* W4: a consumer group read with ``XREADGROUP … COUNT 100 … >``; ``EACH`` acknowledges every message with
  its own ``XACK`` (the 100 XACKs pipelined), ``BATCH`` sends one ``XACK`` with the 100 ids (the fast mode
  the issue mentions). Each mode reads the whole stream through a group of its own.
"""

from __future__ import annotations

import time
from typing import Any

import redis.asyncio as aioredis
from redis.typing import EncodableT, FieldT

from benchmarks.compare.workload import (
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

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port

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
        try:
            progress = ConsumeProgress(count)
            start = time.perf_counter()
            await client.xgroup_create(name, group, id="0")
            deadline = time.monotonic() + plan.time_limit
            while not progress.finished.is_set() and time.monotonic() < deadline:
                if time.perf_counter() - progress.last > plan.consume_idle:
                    break
                reply: Any = await client.xreadgroup(group, "c1", {name: ">"}, count=ACK_EVERY, block=1000)
                if not reply:
                    continue
                ids: list[bytes] = [entry_id for entry_id, _fields in reply[0][1]]
                if mode is ConsumeMode.EACH:
                    pipe = client.pipeline(transaction=False)
                    for entry_id in ids:
                        pipe.xack(name, group, entry_id)
                    await pipe.execute()
                else:
                    await client.xack(name, group, *ids)
                progress.add(len(ids))
            return progress.measure(start)
        finally:
            await client.aclose()

    async def drop(self, name: str) -> None:
        client = self._connect(1)
        try:
            await client.delete(name)
        finally:
            await client.aclose()
