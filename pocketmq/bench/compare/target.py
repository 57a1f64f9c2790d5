"""What the runner needs from each broker: a way to start its servers, and a client for the workloads.

A :class:`Target` starts a :class:`Server` (one or more processes we own, measured by PID) in a working
directory; the server hands out a :class:`Client` whose coroutines each run one measured phase on a fresh
event loop, connecting and disconnecting inside it. A target that cannot be used raises
:class:`Unavailable` with the reason the report prints ("not installed: …", "failed to start: …").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pocketmq.bench.compare.workload import ConsumeMode, Measure, Plan, Workload


class Unavailable(Exception):
    """A broker that cannot be benchmarked here; ``state`` is 'not installed' or 'failed to start'."""

    def __init__(self, state: str, detail: str) -> None:
        super().__init__(f"{state}: {detail}")
        self.state = state
        self.detail = detail


class Client(Protocol):
    """One broker's workloads. ``name`` is the stream / topic / queue of one run."""

    #: W4 modes this broker offers (per-message acknowledgement, and one ack per 100 where it has one).
    consume_modes: tuple[ConsumeMode, ...]
    #: True when consuming removes the backlog (a queue), so every consume mode needs a fresh fill.
    refill_per_consume: bool

    async def produce(self, name: str, size: int, plan: Plan) -> Measure: ...

    async def sequential(self, name: str, plan: Plan) -> Measure: ...

    async def batches(self, name: str, plan: Plan) -> Measure: ...

    async def fill(self, name: str, size: int, count: int) -> int: ...

    async def consume(self, name: str, count: int, mode: ConsumeMode, plan: Plan) -> Measure: ...

    async def drop(self, name: str) -> None: ...


class Server(Protocol):
    """Running server processes of one target."""

    def pids(self) -> list[int]: ...

    def floating_pids(self) -> list[int]:
        """Those of :meth:`pids` the placement leaves to the scheduler instead of the servers' CPU (a
        slave, which in production has a machine of its own)."""
        ...

    def client(self) -> Client: ...

    def log_tail(self) -> str:
        """The last lines the server processes logged, shown when a run has failures."""
        ...

    def stop(self) -> None: ...


@dataclass(frozen=True)
class Target:
    """A broker to compare: ``key`` for ``--peers``, ``label`` for the tables, ``peer`` False for PocketMQ;
    ``only`` limits the workloads it runs (a peer's naive-client row runs only those where its naive usage
    differs from its tuned one), None for all."""

    key: str
    label: str
    peer: bool
    start: Callable[[Path], Server]
    version: Callable[[], str]
    only: frozenset[Workload] | None = None

    def runs(self, workload: Workload) -> bool:
        return self.only is None or workload in self.only
