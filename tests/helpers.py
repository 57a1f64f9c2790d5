"""Test helpers shared by every tier: waiting on conditions with deadlines, free ports, subprocesses."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable


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
