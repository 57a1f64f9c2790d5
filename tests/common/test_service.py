"""The ``Service`` base: periodic timing (fixed delay and fixed rate), triggers, on-demand services, children."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from pocketmq.common.service import PeriodicService, Service, on_demand, periodic
from tests.helpers import eventually


class Recorder(PeriodicService):
    """Records the loop time of each tick; each tick takes ``work`` seconds; the ``fail``-th tick raises."""

    def __init__(self, interval: float, *, initial_delay: float | None = None, fixed_rate: bool = False,
                 work: float = 0.0, fail: int | None = None) -> None:
        super().__init__(interval, initial_delay=initial_delay, fixed_rate=fixed_rate)
        self.work = work
        self.fail = fail
        self.ticks: list[float] = []

    async def tick(self) -> None:
        self.ticks.append(asyncio.get_running_loop().time())
        if len(self.ticks) == self.fail:
            raise RuntimeError("tick failed on purpose")
        await asyncio.sleep(self.work)


def gaps(ticks: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(ticks)]


async def test_first_tick_after_initial_delay_then_every_interval() -> None:
    now = Recorder(10.0, initial_delay=0)
    later = Recorder(10.0)
    now.start()
    later.start()
    await eventually(lambda: len(now.ticks) == 1, timeout=2.0)
    await asyncio.sleep(0.05)
    assert len(now.ticks) == 1 and later.ticks == []
    await now.stop()
    await later.stop()
    every = Recorder(0.05, initial_delay=0)
    every.start()
    await eventually(lambda: len(every.ticks) >= 3)
    await every.stop()
    assert all(gap >= 0.045 for gap in gaps(every.ticks))


async def test_fixed_delay_counts_from_the_end_of_a_tick_fixed_rate_from_its_start() -> None:
    delay = Recorder(0.1, work=0.08, initial_delay=0)
    rate = Recorder(0.1, work=0.08, initial_delay=0, fixed_rate=True)
    delay.start()
    rate.start()
    await eventually(lambda: len(delay.ticks) >= 4 and len(rate.ticks) >= 4)
    await delay.stop()
    await rate.stop()
    assert min(gaps(delay.ticks)) >= 0.175  # interval + work
    ticks = rate.ticks[:4]
    assert (ticks[-1] - ticks[0]) / 3 < 0.14  # one interval apiece (a late tick is caught up by the next)


async def test_a_failing_tick_is_logged_and_the_next_runs() -> None:
    service = Recorder(0.01, initial_delay=0, fail=1)
    service.start()
    await eventually(lambda: len(service.ticks) >= 3)
    assert service.running
    await service.stop()
    assert not service.running


async def test_trigger_runs_the_next_tick_now_and_the_interval_restarts() -> None:
    service = Recorder(30.0)
    service.start()
    await asyncio.sleep(0.01)
    assert service.ticks == []
    service.trigger()
    await eventually(lambda: len(service.ticks) == 1, timeout=1.0)
    await asyncio.sleep(0.05)
    assert len(service.ticks) == 1
    await service.stop()


async def test_a_trigger_before_start_or_during_a_tick_gives_one_more_tick_at_once() -> None:
    service = Recorder(30.0, work=0.05)
    service.trigger()
    service.start()
    await eventually(lambda: len(service.ticks) == 1, timeout=1.0)
    service.trigger()
    service.trigger()  # folded into the same next tick
    await eventually(lambda: len(service.ticks) == 2, timeout=1.0)
    await asyncio.sleep(0.1)
    assert len(service.ticks) == 2
    await service.stop()


async def test_on_demand_runs_only_when_triggered_never_twice_at_once() -> None:
    calls: list[int] = []
    running = 0

    async def work() -> None:
        nonlocal running
        running += 1
        assert running == 1
        calls.append(len(calls))
        await asyncio.sleep(0.03)
        running -= 1

    service = on_demand("work", work)
    service.start()
    await asyncio.sleep(0.02)
    assert calls == []
    service.trigger()
    await eventually(lambda: len(calls) == 1, timeout=1.0)
    for _ in range(5):
        service.trigger()  # all while the first call runs: one more call
    await asyncio.sleep(0.15)
    assert len(calls) == 2
    await service.stop()


async def test_children_start_with_the_owner_and_stop_before_it_last_first() -> None:
    stopped: list[str] = []

    class Child(Service):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

        async def stop(self) -> None:
            stopped.append(self.name)
            await super().stop()

    owner = Service()
    first = owner.add_child(Child("first"))
    owner.add_child(Child("second"))
    assert not first.running
    owner.start()
    assert first.running
    late = owner.add_child(periodic("late", 1.0, lambda: None))
    assert late.running  # added to a running owner: started at once
    await owner.stop()
    assert stopped == ["second", "first"]
    assert not (first.running or late.running or owner.running)


def test_interval_must_be_positive() -> None:
    with pytest.raises(ValueError):
        periodic("never", 0, lambda: None)
