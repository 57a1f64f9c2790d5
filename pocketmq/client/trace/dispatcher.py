"""``TraceDispatcher``: RocketMQ's ``AsyncTraceDispatcher``, bounded and asynchronous.

Traced sends and consumptions hand their contexts to :meth:`TraceDispatcher.append`, which never waits: a
full buffer (``capacity`` contexts) drops the context and counts it (:attr:`TraceDispatcher.dropped`), so
tracing can lose trace data but never slows or fails the messages it traces. The dispatcher's loop wakes
every ``interval`` (or when ``batch_size`` contexts wait), encodes up to ``batch_size`` contexts into trace
messages of at most ``max_msg_size`` bytes, each keyed by the message ids and keys of its contexts (see
:mod:`pocketmq.client.trace.data`), and sends them with ``send`` (a producer of its own, built by
:mod:`pocketmq.client.trace.hooks`). A failed send drops its contexts (counted in :attr:`TraceDispatcher.failed`):
trace data is never retried at the cost of newer data.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Callable

from pocketmq.client.trace.data import TraceContext, encode_context
from pocketmq.common.logs import get_logger
from pocketmq.common.service import Service

log = get_logger("pocketmq.client.trace")

SendTrace = Callable[[str, bytes, str], Awaitable[object]]
"""``send(topic, body, keys)``: send one trace message (keys space-separated)."""

DEFAULT_CAPACITY = 2048
DEFAULT_BATCH_SIZE = 100
DEFAULT_MAX_MSG_SIZE = 128_000
DEFAULT_INTERVAL_S = 0.1


class TraceDispatcher(Service):
    """See the module docstring. Start it on the loop of the client it traces; :meth:`close` sends what is
    left (within ``close_timeout``) and stops."""

    name = "trace-dispatcher"

    def __init__(self, send: SendTrace, *, topic: str, capacity: int = DEFAULT_CAPACITY,
                 batch_size: int = DEFAULT_BATCH_SIZE, max_msg_size: int = DEFAULT_MAX_MSG_SIZE,
                 interval: float = DEFAULT_INTERVAL_S) -> None:
        super().__init__()
        if capacity <= 0 or batch_size <= 0 or max_msg_size <= 0:
            raise ValueError("capacity, batch_size and max_msg_size must be positive")
        self.topic = topic
        self._send = send
        self._capacity = capacity
        self._batch_size = batch_size
        self._max_msg_size = max_msg_size
        self._interval = interval
        self._pending: collections.deque[TraceContext] = collections.deque()
        #: contexts dropped because the buffer was full
        self.dropped = 0
        #: contexts lost because their trace message could not be sent
        self.failed = 0
        #: contexts sent
        self.sent = 0

    @property
    def pending(self) -> int:
        """Contexts waiting to be sent."""
        return len(self._pending)

    def append(self, ctx: TraceContext) -> bool:
        """Queue a context; False (and counted) when the buffer is full. Never waits."""
        pending = self._pending
        if len(pending) >= self._capacity:
            self.dropped += 1
            return False
        pending.append(ctx)
        if len(pending) >= self._batch_size:
            self.trigger()
        return True

    async def run(self) -> None:
        while True:
            await self._sleep_or_trigger(self._interval)
            await self.flush()

    async def flush(self) -> None:
        """Send everything queued now, a batch at a time."""
        pending = self._pending
        while pending:
            batch = [pending.popleft() for _ in range(min(self._batch_size, len(pending)))]
            for body, keys, count in self._messages(batch):
                try:
                    await self._send(self.topic, body, " ".join(keys))
                except Exception as exc:  # trace data is best effort, whatever went wrong
                    self.failed += count
                    log.warning("trace_send_failed", topic=self.topic, contexts=count, error=str(exc))
                else:
                    self.sent += count

    def _messages(self, batch: list[TraceContext]) -> list[tuple[bytes, list[str], int]]:
        """Trace messages of at most ``max_msg_size`` bytes: (body, keys, contexts in it)."""
        out: list[tuple[bytes, list[str], int]] = []
        data: list[bytes] = []
        keys: dict[str, None] = {}
        size = count = 0
        for ctx in batch:
            text, ctx_keys = encode_context(ctx)
            raw = text.encode()
            if data and size + len(raw) > self._max_msg_size:
                out.append((b"".join(data), list(keys), count))
                data, keys, size, count = [], {}, 0, 0
            data.append(raw)
            keys.update(dict.fromkeys(k for k in ctx_keys if k))
            size += len(raw)
            count += 1
        if data:
            out.append((b"".join(data), list(keys), count))
        return out

    async def close(self, close_timeout: float = 3.0) -> None:
        """Stop the loop and send what is left (what cannot be sent within ``close_timeout`` is dropped)."""
        await self.stop()
        try:
            await asyncio.wait_for(self.flush(), close_timeout)
        except TimeoutError:
            self.failed += len(self._pending)
            self._pending.clear()
