"""Background work that has an owner: the one base every loop of every process runs on.

* :class:`Service` runs one loop (:meth:`Service.run`) as a task it owns; :meth:`Service.stop` cancels it and
  waits until it is gone. A crash of the loop is logged and the loop is restarted after a pause, so a transient
  failure (a full disk during a flush) never silently ends a flush, retention or registration loop.
* :class:`PeriodicService` is a service whose loop is "wait ``interval``, call :meth:`PeriodicService.tick`";
  a failing tick is logged and the next one runs on schedule. The interval runs from the end of a tick, or
  from its start (``fixed_rate``, RocketMQ's ``scheduleAtFixedRate``). :func:`periodic` builds one from a
  function, for owners (controllers, clients) whose timers are a method each.
* :meth:`Service.trigger` cuts a service's wait short: a periodic service ticks at once (a broker
  re-registers the moment a topic changes), and :func:`on_demand` builds a service that runs a function
  only when triggered (write the topics file after a change), never twice at once, folding the triggers that
  come while it runs into one more run.
* A service may own child services (:meth:`Service.add_child`): they start after it and stop before it, in
  reverse order, so an owner stops everything it started with one call.

No fire-and-forget tasks: everything a process runs in the background is a service someone stops.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TypeVar

from pocketmq.common.logs import get_logger

log = get_logger("pocketmq.common.service")

_RESTART_DELAY_S = 0.1

Tick = Callable[[], Awaitable[object] | object]
"""What a periodic or on-demand service calls: a plain function or a coroutine function."""

ServiceT = TypeVar("ServiceT", bound="Service")


async def _call(function: Tick) -> None:
    result = function()
    if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
        await result


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class Service:
    """Owner of one background task and, optionally, of child services. ``name`` names the task and the
    service in logs (subclasses usually set it as a class attribute)."""

    name = "service"

    def __init__(self, *, name: str | None = None) -> None:
        if name is not None:
            self.name = name
        self._task: asyncio.Task[None] | None = None
        self._children: list[Service] = []
        self._triggered = False
        self._trigger_waiter: asyncio.Future[None] | None = None

    @property
    def running(self) -> bool:
        """True between start() and stop()."""
        return self._task is not None and not self._task.done()

    def add_child(self, child: ServiceT) -> ServiceT:
        """Own ``child``: started by :meth:`start` (or at once when this service already runs), stopped by
        :meth:`stop`. Returns ``child``."""
        self._children.append(child)
        if self._task is not None:
            child.start()
        return child

    def start(self) -> None:
        """Start the loop as a task of the running event loop, then the children."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._guarded(), name=self.name)
            for child in self._children:
                child.start()

    async def stop(self) -> None:
        """Stop the children (last started first), then cancel the loop and wait for it to finish."""
        for child in reversed(self._children):
            await child.stop()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def run(self) -> None:
        """The loop; runs until cancelled. A service that only groups children waits forever."""
        await asyncio.Event().wait()

    def trigger(self) -> None:
        """End the loop's current :meth:`_sleep_or_trigger` now; when the loop is not waiting there (it is
        busy, or not started yet), its next wait returns at once. Plain (non-async) code on the event loop may
        call it."""
        self._triggered = True
        if self._trigger_waiter is not None:
            _resolve(self._trigger_waiter)

    async def _sleep_or_trigger(self, delay: float | None) -> None:
        """Sleep ``delay`` seconds (for None: no time limit) or until :meth:`trigger`, whichever comes first."""
        if self._triggered:
            self._triggered = False
            return
        loop = asyncio.get_running_loop()
        waiter = self._trigger_waiter = loop.create_future()
        timer = None if delay is None else loop.call_later(delay, _resolve, waiter)
        try:
            await waiter
        finally:
            self._trigger_waiter = None
            self._triggered = False
            if timer is not None:
                timer.cancel()

    async def _guarded(self) -> None:
        while True:
            try:
                await self.run()
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("service_failed", service=self.name)
                await asyncio.sleep(_RESTART_DELAY_S)


class PeriodicService(Service):
    """Calls :meth:`tick` every ``interval`` seconds (after ``initial_delay``, default one interval).

    The interval is measured from the end of one tick to the start of the next (a slow tick never makes ticks
    pile up); with ``fixed_rate`` from the start of one tick to the start of the next (a tick that took longer
    than the interval is followed by the next at once). :meth:`trigger` runs the next tick now, and the
    interval counts from that tick. A tick that raises is logged and does not end the service.
    """

    def __init__(self, interval: float, *, initial_delay: float | None = None, fixed_rate: bool = False,
                 name: str | None = None) -> None:
        super().__init__(name=name)
        if interval <= 0:
            raise ValueError(f"interval must be positive, got {interval}")
        self.interval = interval
        self.initial_delay = interval if initial_delay is None else initial_delay
        self.fixed_rate = fixed_rate

    async def tick(self) -> None:
        """One round of the work (subclasses)."""
        raise NotImplementedError

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        delay = self.initial_delay
        while True:
            await self._sleep_or_trigger(delay)
            started = loop.time()
            try:
                await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("tick_failed", service=self.name)
            delay = max(self.interval - (loop.time() - started), 0.0) if self.fixed_rate else self.interval


class _FunctionService(PeriodicService):
    def __init__(self, name: str, interval: float, function: Tick, initial_delay: float | None,
                 fixed_rate: bool) -> None:
        super().__init__(interval, initial_delay=initial_delay, fixed_rate=fixed_rate, name=name)
        self._function = function

    async def tick(self) -> None:
        await _call(self._function)


def periodic(name: str, interval: float, function: Tick, *, initial_delay: float | None = None,
             fixed_rate: bool = False) -> PeriodicService:
    """A :class:`PeriodicService` that calls ``function`` (plain or async) every ``interval`` seconds."""
    return _FunctionService(name, interval, function, initial_delay, fixed_rate)


class _OnDemandService(Service):
    def __init__(self, name: str, function: Tick) -> None:
        super().__init__(name=name)
        self._function = function

    async def run(self) -> None:
        while True:
            await self._sleep_or_trigger(None)
            try:
                await _call(self._function)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("run_failed", service=self.name)


def on_demand(name: str, function: Tick) -> Service:
    """A service that calls ``function`` (plain or async) once after :meth:`Service.trigger`: never two calls at
    once, and the triggers that come while a call runs (or waits to run) give one more call, not one each."""
    return _OnDemandService(name, function)
