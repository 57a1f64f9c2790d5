"""Test helpers shared by every tier: waiting on conditions with deadlines, free ports, subprocesses."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


async def eventually(
    condition: Callable[[], bool | Awaitable[bool]],
    timeout: float = 10.0,
    interval: float = 0.02,
    message: str = "condition",
) -> None:
    """Poll ``condition`` until it is true; fail the test with ``message`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if not isinstance(result, bool):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{message} not reached within {timeout}s")
        await asyncio.sleep(interval)


def wait_until(condition: Callable[[], bool], timeout: float = 10.0, interval: float = 0.02,
               message: str = "condition") -> None:
    """Blocking twin of :func:`eventually` for synchronous tests."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{message} not reached within {timeout}s")
        time.sleep(interval)


class LoopThread:
    """An event loop running in a thread; :meth:`run` waits for a coroutine on it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="test-loop", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()
