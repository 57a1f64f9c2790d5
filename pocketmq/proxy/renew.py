"""Receipt handles the proxy keeps alive (RocketMQ's ``DefaultReceiptHandleManager``): a push consumer receives with
``auto_renew`` and holds messages as long as its listener runs, so the proxy pops them with
``defaultInvisibleTimeMills`` and, while the client is connected and has not acked, changes their invisible time again
``renewAheadTimeMillis`` before it runs out, for at most ``renewMaxTimeMillis``.

The client acks or nacks with the handle it was given, which a renewal made stale: :meth:`ReceiptHandles.take` gives
the current one instead. When the client goes away its messages get ``invisibleTimeMillisWhenClear`` so they come
back soon. This is the one piece of per-client state that lives in a proxy (a client talks to one proxy); losing it
(a proxy restart) only means its messages come back at their deadline.

Bound: ``maxRenewedHandles`` handles in all; beyond it a message is not renewed (it comes back at its deadline).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from pocketmq.common.logs import get_logger
from pocketmq.common.pop import ReceiptHandle
from pocketmq.common.service import PeriodicService, periodic
from pocketmq.proxy.backend import Backend
from pocketmq.proxy.errors import ProxyError

log = get_logger("pocketmq.proxy.renew")


@dataclass(slots=True)
class Held:
    """One message a client holds: its current handle, and until when it may be renewed (monotonic ms)."""

    group: str
    topic: str
    handle: ReceiptHandle
    renew_until: float


def _now_ms() -> float:
    return time.monotonic() * 1000


class ReceiptHandles:
    """The handles being renewed, by (client id, group, message id)."""

    def __init__(self, backend: Backend, *, invisible_ms: int, ahead_ms: int, max_ms: int, clear_ms: int,
                 period_s: float, limit: int) -> None:
        self.backend = backend
        self.invisible_ms = invisible_ms
        self.ahead_ms = ahead_ms
        self.max_ms = max_ms
        self.clear_ms = clear_ms
        self.limit = limit
        self.held: dict[tuple[str, str, str], Held] = {}
        self.renewals = 0
        self.service: PeriodicService = periodic("proxy-receipt-renew", period_s, self.renew_due)

    def add(self, client_id: str, group: str, topic: str, message_id: str, handle: ReceiptHandle) -> bool:
        if len(self.held) >= self.limit:
            return False
        self.held[(client_id, group, message_id)] = Held(group, topic, handle, _now_ms() + self.max_ms)
        return True

    def take(self, client_id: str, group: str, message_id: str) -> ReceiptHandle | None:
        """The current handle of a held message (and stop renewing it), None when it is not held."""
        held = self.held.pop((client_id, group, message_id), None)
        return held.handle if held is not None else None

    async def renew_due(self) -> int:
        """Renew every handle within ``ahead_ms`` of its deadline; drop those held too long. Returns how many."""
        wall = time.time() * 1000
        now = _now_ms()
        renewed = 0
        for key, held in list(self.held.items()):
            if held.handle.next_visible_time - wall > self.ahead_ms:
                continue
            if now >= held.renew_until:
                self.held.pop(key, None)
                continue
            try:
                fresh = await self.backend.change_invisible(held.group, held.topic, held.handle, self.invisible_ms)
            except ProxyError as exc:
                log.info("receipt_renew_failed", group=held.group, topic=held.topic, error=exc.message)
                self.held.pop(key, None)
                continue
            if self.held.get(key) is held:  # not acked meanwhile
                held.handle = fresh
            renewed += 1
        self.renewals += renewed
        return renewed

    async def release(self, client_id: str) -> None:
        """A client went away: its held messages come back after ``clear_ms``."""
        keys = [key for key in self.held if key[0] == client_id]
        calls = []
        for key in keys:
            held = self.held.pop(key)
            calls.append(self.backend.change_invisible(held.group, held.topic, held.handle, self.clear_ms))
        if calls:
            await asyncio.gather(*calls, return_exceptions=True)
