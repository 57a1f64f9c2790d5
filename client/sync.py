"""A blocking producer for code without an event loop: ``client.sync.Producer``.

It owns a uvloop event loop running on a daemon thread and an asyncio :class:`client.producer.Producer` on
it; every method hands its work to that loop and waits for it in the calling thread::

    with Producer("my-group", namesrv_addr="127.0.0.1:9876") as producer:
        result = producer.send(Message("TopicTest", b"hello"))
        future = producer.send_async(Message("TopicTest", b"later"))   # concurrent.futures.Future
        future.result()

Bounds: every blocking call waits at most its send timeout plus :data:`CALL_MARGIN` (the asyncio producer
already enforces the timeout; the margin only covers a stuck loop, reported as :class:`TimeoutError`). At
most ``max_in_flight`` sends (``send``, ``send_batch``, ``send_async``) are outstanding; a caller waits for
a slot within its send timeout, else gets :class:`~remoting.errors.BufferFullError`.

Callbacks of ``send_async`` and the futures' done-callbacks run on the producer's loop thread: keep them
short. Calling a blocking method of the producer from that thread would wait on itself, so it raises
``RuntimeError`` instead. ``shutdown()`` shuts the asyncio producer down, stops the loop and joins the thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine, Iterable
from types import TracebackType
from typing import Any, TypeVar

import uvloop

from client.errors import ProducerStateError
from client.message import Message, SendResult
from client.producer import MessageQueueSelector, SendCallback
from client.producer import Producer as AsyncProducer
from remoting.errors import BufferFullError

__all__ = ["CALL_MARGIN", "Producer"]

T = TypeVar("T")

#: Extra wait on top of a call's own timeout before the caller gives up on the loop thread.
CALL_MARGIN = 2.0
#: Longest wait for start (first connect happens on first send, so start itself is quick).
START_TIMEOUT = 10.0


class Producer:
    """Blocking twin of :class:`client.producer.Producer`; takes the same keyword arguments.

    ``start`` (default true) starts the loop thread and the producer in the constructor.
    """

    def __init__(self, group: str, *, start: bool = True, **kwargs: Any) -> None:
        self._producer = AsyncProducer(group, **kwargs)
        self.group = self._producer.group
        self._slots = threading.BoundedSemaphore(self._producer.max_in_flight)
        self._loop = uvloop.new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, name=f"pocketmq-producer-{group}", daemon=True)
        self._lock = threading.Lock()
        #: send_async futures not completed yet: failed at shutdown if the loop stopped before they ran.
        self._outstanding: set[concurrent.futures.Future[SendResult]] = set()
        self._started = False
        self._stopped = False
        if start:
            self.start()

    # -- lifecycle --------------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the loop thread and the producer (idempotent)."""
        with self._lock:
            if self._stopped:
                raise ProducerStateError("the producer has been shut down; create a new one")
            if self._started:
                return
            self._thread.start()
            self._started = True
        try:
            self._call(self._producer.start(), START_TIMEOUT)
        except BaseException:
            with self._lock:
                self._stopped = True
            self._stop_loop(START_TIMEOUT)
            raise

    def shutdown(self, timeout: float | None = None) -> None:
        """Shut the producer down (in-flight sends get up to their timeout), stop the loop, join the thread."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            started = self._started
        if not started:
            self._loop.close()
            return
        grace = self._producer.send_msg_timeout if timeout is None else timeout
        # grace for in-flight sends, then UNREGISTER_CLIENT to the brokers in parallel (namesrv_timeout each)
        wait = grace + self._producer.client_config.namesrv_timeout + CALL_MARGIN
        try:
            self._call(self._producer.shutdown(grace=grace), wait)
        finally:
            self._stop_loop(wait)

    def __enter__(self) -> Producer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.shutdown()

    @property
    def async_producer(self) -> AsyncProducer:
        """The asyncio producer underneath (use it only from its loop: :attr:`loop`)."""
        return self._producer

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    # -- sending ----------------------------------------------------------------------------------------

    def send(
        self, msg: Message, *, timeout: float | None = None, selector: MessageQueueSelector | None = None,
        arg: Any = None,
    ) -> SendResult:
        """Blocking :meth:`client.producer.Producer.send`."""
        budget = self._budget(timeout)
        self._acquire(budget)
        try:
            return self._call(self._producer.send(msg, timeout=budget, selector=selector, arg=arg),
                              budget + CALL_MARGIN)
        finally:
            self._slots.release()

    def send_batch(self, messages: Iterable[Message], *, timeout: float | None = None) -> SendResult:
        """Blocking :meth:`client.producer.Producer.send_batch`."""
        budget = self._budget(timeout)
        batch = list(messages)
        self._acquire(budget)
        try:
            return self._call(self._producer.send_batch(batch, timeout=budget), budget + CALL_MARGIN)
        finally:
            self._slots.release()

    def send_oneway(self, msg: Message) -> None:
        """Blocking :meth:`client.producer.Producer.send_oneway` (returns once the request is written)."""
        self._call(self._producer.send_oneway(msg), self._producer.send_msg_timeout + CALL_MARGIN)

    def send_async(
        self, msg: Message, *, callback: SendCallback | None = None, timeout: float | None = None
    ) -> concurrent.futures.Future[SendResult]:
        """Start a send and return a :class:`concurrent.futures.Future` of its result.

        Waits (at most the send timeout) only when ``max_in_flight`` sends are outstanding. Errors of any
        kind, validation included, complete the future (and reach ``callback(result, error)``).
        """
        budget = self._budget(timeout)
        self._check_thread()
        self._acquire(budget)
        result: concurrent.futures.Future[SendResult] = concurrent.futures.Future()
        with self._lock:
            self._outstanding.add(result)
        result.add_done_callback(self._async_finished)
        if callback is not None:
            result.add_done_callback(lambda f: _deliver(callback, f))

        def begin() -> None:
            try:
                inner = self._producer.send_async(msg, timeout=budget)
            except BaseException as exc:  # validation, state, window: all go to the future
                result.set_exception(exc)
                return
            inner.add_done_callback(lambda f: _transfer(f, result))

        try:
            self._loop.call_soon_threadsafe(begin)
        except RuntimeError:  # the loop is closed
            result.set_exception(ProducerStateError("the producer is shut down"))
        return result

    # -- internals --------------------------------------------------------------------------------------

    def _async_finished(self, future: concurrent.futures.Future[SendResult]) -> None:
        with self._lock:
            self._outstanding.discard(future)
        self._slots.release()

    def _budget(self, timeout: float | None) -> float:
        if timeout is None:
            return self._producer.send_msg_timeout
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        return timeout

    def _check_thread(self) -> None:
        if threading.current_thread() is self._thread:
            raise RuntimeError("blocking producer methods cannot be called from the producer's own loop thread")
        if not self._started or self._loop.is_closed():
            raise ProducerStateError("the producer is not running")

    def _acquire(self, budget: float) -> None:
        self._check_thread()
        if not self._slots.acquire(timeout=budget):
            raise BufferFullError(f"no send slot freed within {budget * 1000:.0f} ms "
                                  f"({self._producer.max_in_flight} sends in flight)")

    def _call(self, coro: Coroutine[Any, Any, T], wait: float) -> T:
        try:
            self._check_thread()
            future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        except BaseException:
            coro.close()
            raise
        try:
            return future.result(wait)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"the producer's loop did not finish the call within {wait:.1f} s") from None

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            pending = [t for t in asyncio.all_tasks(self._loop) if not t.done()]
            for task in pending:
                task.cancel()
            if pending:
                self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()

    def _stop_loop(self, wait: float) -> None:
        if self._loop.is_closed():
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(wait)
        if self._thread.is_alive():
            raise TimeoutError(f"the producer's loop thread did not stop within {wait:.1f} s")
        with self._lock:
            stranded = list(self._outstanding)
        for future in stranded:  # handed to the loop too late to run
            if not future.done():
                future.set_exception(ProducerStateError("the producer was shut down before the send started"))


def _transfer(source: asyncio.Future[SendResult], target: concurrent.futures.Future[SendResult]) -> None:
    if target.done():
        return
    if source.cancelled():
        target.cancel()
        return
    exc = source.exception()
    if exc is not None:
        target.set_exception(exc)
    else:
        target.set_result(source.result())


def _deliver(callback: SendCallback, future: concurrent.futures.Future[SendResult]) -> None:
    if future.cancelled():
        callback(None, concurrent.futures.CancelledError())
        return
    exc = future.exception()
    callback(None, exc) if exc is not None else callback(future.result(), None)
