"""The five workloads (docs/perf/method.md) and the pieces every broker's client code shares.

* W1 — produce ``count`` x 1 KiB messages, each acknowledged, up to ``in_flight`` (1,000) unacknowledged;
* W2 — the same with 128-byte messages;
* W3 — ``sequential`` (5,000) sends of 1 KiB, each awaited before the next: p50 / p99 / p999 latency;
* W4 — consume the W1 backlog (``count`` x 1 KiB) with acknowledgement or offset commit;
* W5 — batches of 32: PocketMQ's ``send_batch`` beside each peer's own batching or pipelining.

Every load loop is bounded in count (a shared :class:`Budget`) and in time (a monotonic deadline); a send
that hangs is bounded by the client's own timeout, and the whole measurement by ``asyncio.wait_for`` in
the runner. :func:`pipelined` runs ``workers`` coroutines, each awaiting one call at a time, which is how
"up to N in flight" is expressed for every client alike.
"""

from __future__ import annotations

import asyncio
import enum
import os
import time
from array import array
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field, replace

from pocketmq.bench.common import percentiles

ONE_CPU = "one-cpu"
"""Mode of the W3 runs with client and server on one CPU (the default W3 runs are unpinned)."""


class Workload(enum.StrEnum):
    W1 = "W1"
    W2 = "W2"
    W3 = "W3"
    W4 = "W4"
    W5 = "W5"


TITLES = {
    Workload.W1: "W1 — produce 1 KiB, acknowledged, up to 1,000 in flight",
    Workload.W2: "W2 — produce 128 B, acknowledged, up to 1,000 in flight",
    Workload.W3: "W3 — sequential sends of 1 KiB, each awaited (latency)",
    Workload.W4: "W4 — consume the 1 KiB backlog with acknowledgement / offset commit",
    Workload.W5: "W5 — batches of 32 (PocketMQ send_batch; each peer's own batching or pipelining)",
}


@dataclass(frozen=True)
class Tuning:
    """Each peer's batch sizes in its tuned (best-practice) rows, chosen by a short sweep (docs/perf/method.md,
    "Each peer is driven at its best"); ``rmq-bench compare --tune name=value`` overrides one.

    * Redis: ``XADD`` in pipelines of ``redis_pipeline`` commands on ``in_flight // redis_pipeline``
      connections (≤ ``in_flight`` outstanding); W4 reads ``XREADGROUP COUNT redis_read_count`` and sends the
      XACKs of one read in the same pipeline as the next read.
    * NATS: groups of ``nats_batch`` ``js.publish_async`` calls whose acks are awaited together,
      ``in_flight // nats_batch`` groups in flight; W4 fetches ``nats_fetch``.
    * RabbitMQ: ``in_flight // rabbit_confirm_batch`` coroutines, each publishing ``rabbit_confirm_batch``
      messages and awaiting their confirms together.
    """

    redis_pipeline: int = 500
    redis_read_count: int = 1000
    nats_batch: int = 100
    nats_fetch: int = 500
    rabbit_confirm_batch: int = 100

    def replace_from(self, assignments: list[str]) -> Tuning:
        """A copy with ``name=value`` assignments applied; a ValueError names a bad one."""
        changes: dict[str, int] = {}
        known = set(self.__dataclass_fields__)
        for assignment in assignments:
            name, sep, value = assignment.partition("=")
            if not sep or name.strip() not in known or not value.strip().isdigit() or int(value) < 1:
                raise ValueError(f"--tune {assignment!r}: expected NAME=POSITIVE_INT, NAME one of {sorted(known)}")
            changes[name.strip()] = int(value)
        return replace(self, **changes)


@dataclass(frozen=True)
class Plan:
    """Sizes and bounds of one comparison (``--quick`` shrinks the counts)."""

    count: int = 200_000
    sequential: int = 5_000
    in_flight: int = 1_000
    batch: int = 32
    batch_workers: int = 32
    runs: int = 3
    #: Longest measured phase, seconds; a broker slower than count/time_limit is measured on what it did.
    time_limit: float = 60.0
    #: A consume run stops after this many seconds without a new message.
    consume_idle: float = 10.0
    tuning: Tuning = field(default_factory=Tuning)

    def size(self, workload: Workload) -> int:
        return 128 if workload is Workload.W2 else 1024

    def quick(self) -> Plan:
        return Plan(count=20_000, sequential=1_000, in_flight=self.in_flight, batch=self.batch,
                    batch_workers=self.batch_workers, runs=1, time_limit=30.0, consume_idle=5.0,
                    tuning=self.tuning)


def body(size: int) -> bytes:
    """A body of ``size`` bytes that does not compress (hex of random bytes)."""
    return os.urandom(size // 2 + 1).hex().encode()[:size]


class Budget:
    """Messages left to send and the deadline; ``take(n)`` reserves ``n`` or says stop."""

    def __init__(self, count: int, seconds: float) -> None:
        self.left = count
        self.deadline = time.monotonic() + seconds

    def take(self, n: int) -> bool:
        if self.left < n or time.monotonic() >= self.deadline:
            return False
        self.left -= n
        return True

    def expired(self) -> bool:
        return time.monotonic() >= self.deadline


#: ``() -> (client CPU seconds, server CPU seconds)``, set by the runner around a phase; the load loops
#: sample it when their measured window opens and closes, so CPU shares leave connecting and closing out.
Meter = Callable[[], tuple[float, float]]
METER: ContextVar[Meter | None] = ContextVar("compare_meter", default=None)


def _sample() -> tuple[float, float] | None:
    meter = METER.get()
    return meter() if meter is not None else None


@dataclass
class Measure:
    """What one measured phase did: messages, seconds, failures, latencies (µs) when recorded, and the CPU
    seconds (client, server) spent inside the measured window when a :data:`METER` was set."""

    done: int = 0
    failed: int = 0
    seconds: float = 0.0
    first_error: str | None = None
    latencies_us: array[float] = field(default_factory=lambda: array("d"))
    #: Latencies kept at most; one per call (per batch in W5).
    capacity: int = 1_000_000
    cpu_seconds: tuple[float, float] | None = None
    _cpu_start: tuple[float, float] | None = None

    def open_window(self) -> None:
        self._cpu_start = _sample()

    def close_window(self) -> None:
        end = _sample()
        if end is not None and self._cpu_start is not None:
            self.cpu_seconds = (end[0] - self._cpu_start[0], end[1] - self._cpu_start[1])

    def ok(self, n: int, latency_s: float | None = None) -> None:
        self.done += n
        if latency_s is not None and len(self.latencies_us) < self.capacity:
            self.latencies_us.append(latency_s * 1e6)

    def fail(self, n: int, error: BaseException | str) -> None:
        self.failed += n
        if self.first_error is None:
            self.first_error = error if isinstance(error, str) else f"{type(error).__name__}: {error}"

    @property
    def rate(self) -> float:
        return self.done / self.seconds if self.seconds > 0 else 0.0

    def latency(self) -> dict[str, float]:
        return percentiles(self.latencies_us)


Call = Callable[[], Awaitable[object]]


class SendRuns:
    """W1, W2, W3, W5 and the W4 backlog of a client (:class:`pocketmq.bench.compare.target.Client`), all from its one
    :meth:`send_run`: ``count`` messages of ``size`` bytes sent by ``workers`` coroutines, each awaiting calls
    of ``per_call`` messages (one acknowledged send, or one batch) within ``seconds``."""

    #: Messages per call and concurrent calls when filling a backlog.
    fill_batch = 32
    fill_workers = 16

    async def send_run(self, name: str, size: int, count: int, seconds: float, *, workers: int, per_call: int,
                       record_latency: bool) -> Measure:
        raise NotImplementedError

    async def produce(self, name: str, size: int, plan: Plan) -> Measure:
        return await self.send_run(name, size, plan.count, plan.time_limit, workers=plan.in_flight, per_call=1,
                                   record_latency=False)

    async def produce_in_groups(self, name: str, size: int, plan: Plan, group: int) -> Measure:
        """W1/W2 as calls of ``group`` messages (a pipeline, a set of confirms), ``in_flight // group`` of them
        in flight, so at most ``in_flight`` messages are outstanding."""
        group = max(1, min(group, plan.in_flight))
        return await self.send_run(name, size, plan.count, plan.time_limit, workers=max(1, plan.in_flight // group),
                                   per_call=group, record_latency=False)

    async def sequential(self, name: str, plan: Plan) -> Measure:
        return await self.send_run(name, 1024, plan.sequential, plan.time_limit, workers=1, per_call=1,
                                   record_latency=True)

    async def batches(self, name: str, plan: Plan) -> Measure:
        return await self.send_run(name, 1024, plan.count, plan.time_limit, workers=plan.batch_workers,
                                   per_call=plan.batch, record_latency=True)

    async def fill(self, name: str, size: int, count: int) -> int:
        """Write a backlog of ``count`` messages (not measured): batches, then the remainder one by one."""
        batch = self.fill_batch
        done = 0
        if count >= batch:
            done = (await self.send_run(name, size, count - count % batch, 300.0, workers=self.fill_workers,
                                        per_call=batch, record_latency=False)).done
        if count % batch:
            done += (await self.send_run(name, size, count % batch, 60.0, workers=1, per_call=1,
                                         record_latency=False)).done
        return done


async def pipelined(call: Call, measure: Measure, budget: Budget, *, workers: int, per_call: int = 1,
                    record_latency: bool = False) -> None:
    """``workers`` coroutines, each awaiting ``call()`` in a loop while the budget allows ``per_call`` more
    messages; an exception counts ``per_call`` failures. ``measure.seconds`` is set to the elapsed time."""
    clock = time.perf_counter

    async def worker() -> None:
        while budget.take(per_call):
            begin = clock()
            try:
                await call()
            except Exception as exc:
                measure.fail(per_call, exc)
                continue
            measure.ok(per_call, clock() - begin if record_latency else None)

    measure.open_window()
    start = clock()
    await asyncio.gather(*(worker() for _ in range(workers)))
    measure.seconds = clock() - start
    measure.close_window()


class ConsumeMode(enum.StrEnum):
    """W4: acknowledge every message, or once per 100 (each peer's fastest documented mode)."""

    EACH = "each"
    BATCH = "batch"


#: Messages per acknowledgement in ``ConsumeMode.BATCH`` (Redis: one XACK of 100 ids).
ACK_EVERY = 100


class ConsumeProgress:
    """Counts consumed messages; ``finished`` is set at ``target`` messages; tracks the last arrival."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.count = 0
        self.last = time.perf_counter()
        self.finished = asyncio.Event()
        self._measure = Measure()
        self._measure.open_window()

    def add(self, n: int) -> None:
        self.count += n
        self.last = time.perf_counter()
        if self.count >= self.target and not self.finished.is_set():
            self._measure.close_window()
            self.finished.set()

    def measure(self, start: float) -> Measure:
        """The consumed count over ``start`` (``perf_counter``) to the last message."""
        measure = self._measure
        if measure.cpu_seconds is None:
            measure.close_window()
        measure.seconds = max(self.last - start, 1e-9)
        measure.ok(self.count)
        return measure

    async def wait(self, deadline: float, idle: float) -> None:
        """Until ``target`` messages, ``deadline`` (monotonic), or ``idle`` seconds without a message."""
        while not self.finished.is_set():
            left = deadline - time.monotonic()
            if left <= 0 or time.perf_counter() - self.last > idle:
                return
            try:
                await asyncio.wait_for(self.finished.wait(), min(left, 0.25))
            except TimeoutError:
                continue
