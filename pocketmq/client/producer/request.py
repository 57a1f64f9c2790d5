"""The requests a producer waits on (RocketMQ's ``RequestFutureHolder`` table of ``RequestResponseFuture``).

:meth:`pocketmq.client.producer.producer.Producer.request` puts a future here under the request's
``CORRELATION_ID`` before the request is sent (a fast replier may answer before the send's own answer
arrives), then waits for it within the request's timeout and takes it out again whatever happens (reply,
timeout, failed send, cancellation), so the table holds only requests someone is waiting for. The client
instance hands each reply the broker pushes (PUSH_REPLY_MESSAGE_TO_CLIENT) to :meth:`RequestFutureTable.take`.

The table is bounded (``max_pending_requests``): a request beyond it fails at once with
:class:`~pocketmq.client.core.errors.RequestTableFullError` and is not sent.
"""

from __future__ import annotations

import asyncio

from pocketmq.client.core.errors import RequestTableFullError
from pocketmq.client.core.message_ext import MessageExt

__all__ = ["RequestFutureTable"]


class RequestFutureTable:
    """Correlation id → the future of its reply, at most ``max_size`` of them."""

    __slots__ = ("_futures", "max_size")

    def __init__(self, max_size: int) -> None:
        self.max_size = max_size
        self._futures: dict[str, asyncio.Future[MessageExt]] = {}

    def __len__(self) -> int:
        return len(self._futures)

    def add(self, correlation_id: str) -> asyncio.Future[MessageExt]:
        """A new future for the reply to ``correlation_id`` (raises RequestTableFullError when full)."""
        if len(self._futures) >= self.max_size:
            raise RequestTableFullError(
                f"{len(self._futures)} requests already wait for their reply (max_pending_requests)")
        future: asyncio.Future[MessageExt] = asyncio.get_running_loop().create_future()
        self._futures[correlation_id] = future
        return future

    def take(self, correlation_id: str, reply: MessageExt) -> bool:
        """Complete the request ``correlation_id`` with ``reply``; False when no request waits for it."""
        future = self._futures.pop(correlation_id, None)
        if future is None or future.done():
            return False
        future.set_result(reply)
        return True

    def discard(self, correlation_id: str) -> None:
        """Forget the request (answered, timed out, failed or cancelled)."""
        self._futures.pop(correlation_id, None)

    def fail_all(self, error: BaseException) -> None:
        """Fail every waiting request with ``error`` (the producer is shutting down)."""
        futures, self._futures = self._futures, {}
        for future in futures.values():
            if not future.done():
                future.set_exception(error)
