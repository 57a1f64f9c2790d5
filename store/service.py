"""A small base for background work that has an owner (STYLE habit 7).

A :class:`Service` runs one loop (:meth:`Service.run`) as a task it owns; :meth:`Service.stop` cancels
it and waits until it is gone. A crash of the loop is logged and the loop is restarted after a pause,
so a transient failure (a full disk during a flush) never silently ends a flush or retention service.
"""

from __future__ import annotations

import asyncio
import contextlib

import structlog

log = structlog.get_logger("pocketmq.store")

_RESTART_DELAY_S = 0.1


class Service:
    """Owner of one background task."""

    name = "service"

    def __init__(self) -> None:
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        """True between start() and stop()."""
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Start the loop as a task of the running event loop."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._guarded(), name=self.name)

    async def stop(self) -> None:
        """Cancel the loop and wait for it to finish."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def run(self) -> None:
        """The loop; runs until cancelled."""
        raise NotImplementedError

    async def _guarded(self) -> None:
        while True:
            try:
                await self.run()
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("service loop failed, restarting", service=self.name)
                await asyncio.sleep(_RESTART_DELAY_S)
