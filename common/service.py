"""Background work that has an owner (STYLE habit 7): the one base every loop of every process runs on.

* :class:`Service` runs one loop (:meth:`Service.run`) as a task it owns; :meth:`Service.stop` cancels it and
  waits until it is gone. A crash of the loop is logged and the loop is restarted after a pause, so a transient
  failure (a full disk during a flush) never silently ends a flush, retention or registration loop.
* :class:`PeriodicService` is a service whose loop is "wait ``interval``, call :meth:`PeriodicService.tick`";
  a failing tick is logged and the next one runs on schedule. :func:`periodic` builds one from a function,
  for owners (controllers, clients) whose timers are a method each.
* A service may own child services (:meth:`Service.add_child`): they start after it and stop before it, in
  reverse order, so an owner stops everything it started with one call.

No fire-and-forget tasks: everything a process runs in the background is a service someone stops.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from common.logs import get_logger

log = get_logger("common.service")

_RESTART_DELAY_S = 0.1

Tick = Callable[[], Awaitable[object] | object]
"""What a periodic service calls: a plain function or a coroutine function."""


class Service:
    """Owner of one background task and, optionally, of child services."""

    name = "service"

    def __init__(self) -> None:
        self._task: asyncio.Task[None] | None = None
        self._children: list[Service] = []

    @property
    def running(self) -> bool:
        """True between start() and stop()."""
        return self._task is not None and not self._task.done()

    def add_child(self, child: Service) -> Service:
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
    pile up). A tick that raises is logged and does not end the service.
    """

    def __init__(self, interval: float, *, initial_delay: float | None = None, name: str | None = None) -> None:
        super().__init__()
        if interval <= 0:
            raise ValueError(f"interval must be positive, got {interval}")
        self.interval = interval
        self.initial_delay = interval if initial_delay is None else initial_delay
        if name is not None:
            self.name = name

    async def tick(self) -> None:
        """One round of the work (subclasses)."""
        raise NotImplementedError

    async def run(self) -> None:
        await asyncio.sleep(self.initial_delay)
        while True:
            try:
                await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("tick_failed", service=self.name)
            await asyncio.sleep(self.interval)


class _FunctionService(PeriodicService):
    def __init__(self, name: str, interval: float, function: Tick, initial_delay: float | None) -> None:
        super().__init__(interval, initial_delay=initial_delay, name=name)
        self._function = function

    async def tick(self) -> None:
        result = self._function()
        if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
            await result


def periodic(name: str, interval: float, function: Tick, *, initial_delay: float | None = None) -> PeriodicService:
    """A :class:`PeriodicService` that calls ``function`` (plain or async) every ``interval`` seconds."""
    return _FunctionService(name, interval, function, initial_delay)
