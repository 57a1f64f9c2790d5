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

The consumers work the same way: ``client.sync.PushConsumer`` and ``client.sync.PullConsumer`` each own a
loop thread running the asyncio consumer::

    def handle(msg: MessageExt) -> ConsumeResult:       # a plain function
        ...
        return ConsumeResult.SUCCESS

    with PushConsumer("my-group", namesrv_addr="127.0.0.1:9876") as consumer:   # started on __enter__
        ...

    consumer = PushConsumer("my-group", namesrv_addr="127.0.0.1:9876", start=False)
    consumer.subscribe("TopicTest", "TagA")
    consumer.register_handler(handle)
    consumer.start()

A push consumer's handler runs in a thread pool of ``consume_thread_max`` threads (default 20), never on
the loop thread, so a handler may block; the asyncio consumer never has more handlers in flight than that,
so the pool's queue stays empty. At shutdown, handlers still running after the grace period are abandoned
(their messages are not acknowledged and come again); their threads finish on their own.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine, Iterable
from types import TracebackType
from typing import Any, TypeVar

import uvloop

from client.consume_pull import PullResult
from client.consume_types import ConsumeResult
from client.consumer_api import ConsumerStateError
from client.errors import ProducerStateError
from client.message import Message, MessageQueue, SendResult
from client.producer import MessageQueueSelector, SendCallback
from client.producer import Producer as AsyncProducer
from client.pull_consumer import BROKER_SUSPEND_MAX, PULL_RPC_MARGIN
from client.pull_consumer import PullConsumer as AsyncPullConsumer
from client.pull_decode import MessageExt
from client.push_consumer import PushConsumer as AsyncPushConsumer
from remoting.errors import BufferFullError

__all__ = ["CALL_MARGIN", "BlockingBatchHandler", "BlockingHandler", "Producer", "PullConsumer", "PushConsumer"]

#: A push consumer's handler for the blocking facade: a plain function (None counts as SUCCESS).
BlockingHandler = Callable[[MessageExt], ConsumeResult | None]
BlockingBatchHandler = Callable[[list[MessageExt]], ConsumeResult | None]

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


# -- consumers ------------------------------------------------------------------------------------------------


class _LoopThread:
    """A uvloop event loop on a daemon thread, and blocking calls into it (what the consumer facades share)."""

    def __init__(self, name: str) -> None:
        self.loop = uvloop.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._lock = threading.Lock()
        self.started = False
        self.stopped = False

    def start(self) -> None:
        with self._lock:
            if self.stopped:
                raise ConsumerStateError("the consumer has been shut down; create a new one")
            if self.started:
                return
            self._thread.start()
            self.started = True

    def call(self, coro: Coroutine[Any, Any, T], wait: float) -> T:
        """Run ``coro`` on the loop and wait for it at most ``wait`` seconds (then :class:`TimeoutError`)."""
        try:
            if threading.current_thread() is self._thread:
                raise RuntimeError("blocking consumer methods cannot be called from the consumer's own loop thread")
            if not self.started or self.loop.is_closed():
                raise ConsumerStateError("the consumer is not running")
            future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        except BaseException:
            coro.close()
            raise
        try:
            return future.result(wait)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"the consumer's loop did not finish the call within {wait:.1f} s") from None

    def stop(self, wait: float) -> None:
        with self._lock:
            self.stopped = True
            started = self.started
        if not started:
            self.loop.close()
            return
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(wait)
        if self._thread.is_alive():
            raise TimeoutError(f"the consumer's loop thread did not stop within {wait:.1f} s")

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            pending = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
            for task in pending:
                task.cancel()
            if pending:
                self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()


class PushConsumer:
    """Blocking twin of :class:`client.push_consumer.PushConsumer`; takes the same keyword arguments.

    ``start`` (default false here, since a handler and subscriptions come first) starts it in the
    constructor; ``with PushConsumer(...) as c`` starts it on entry. Handlers are plain functions run in a
    pool of ``consume_thread_max`` threads (see the module docstring).
    """

    def __init__(self, group: str, *, start: bool = False, **kwargs: Any) -> None:
        self._consumer = AsyncPushConsumer(group, **kwargs)
        self.group = self._consumer.group
        self._runner = _LoopThread(f"pocketmq-push-consumer-{group}")
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=self._consumer.consume_thread_max, thread_name_prefix=f"pocketmq-consume-{group}")
        if start:
            self.start()

    def subscribe(self, topic: str, expression: str | None = "*") -> None:
        """As :meth:`client.push_consumer.PushConsumer.subscribe` (before or after start)."""
        if self._runner.started and not self._runner.stopped:
            self._runner.call(self._in_loop(self._consumer.subscribe, topic, expression), CALL_MARGIN)
        else:
            self._consumer.subscribe(topic, expression)

    def unsubscribe(self, topic: str) -> None:
        if self._runner.started and not self._runner.stopped:
            self._runner.call(self._in_loop(self._consumer.unsubscribe, topic), CALL_MARGIN)
        else:
            self._consumer.unsubscribe(topic)

    @staticmethod
    async def _in_loop(fn: Callable[..., None], *args: Any) -> None:
        fn(*args)

    def register_handler(self, handler: BlockingHandler) -> None:
        """A plain function called with one message, in the handler thread pool."""
        executor = self._executor

        async def run(msg: MessageExt) -> ConsumeResult | None:
            return await asyncio.get_running_loop().run_in_executor(executor, handler, msg)

        self._consumer.register_handler(run)

    def register_batch_handler(self, handler: BlockingBatchHandler) -> None:
        """A plain function called with up to ``consume_message_batch_max_size`` messages of one queue."""
        executor = self._executor

        async def run(msgs: list[MessageExt]) -> ConsumeResult | None:
            return await asyncio.get_running_loop().run_in_executor(executor, handler, msgs)

        self._consumer.register_batch_handler(run)

    def start(self) -> None:
        """Start the loop thread and the consumer (idempotent)."""
        if self._runner.stopped:
            raise ConsumerStateError("the consumer has been shut down; create a new one")
        if self._runner.started:
            return
        self._runner.start()
        try:
            self._runner.call(self._consumer.start(), START_TIMEOUT + self._consumer.client_config.namesrv_timeout)
        except BaseException:
            self._runner.stop(START_TIMEOUT)
            self._executor.shutdown(wait=False, cancel_futures=True)
            raise

    def shutdown(self, grace: float | None = None) -> None:
        """Shut the consumer down (running handlers get ``grace``, default ``shutdown_grace``), stop the loop
        and the handler pool (without waiting for abandoned handlers)."""
        if self._runner.stopped:
            return
        if not self._runner.started:
            self._runner.stop(0)
            self._executor.shutdown(wait=False, cancel_futures=True)
            return
        grace_s = self._consumer.shutdown_grace if grace is None else grace
        # grace for handlers, then commits and UNREGISTER_CLIENT (namesrv_timeout each, in parallel)
        wait = grace_s + 3 * self._consumer.client_config.namesrv_timeout + CALL_MARGIN
        try:
            self._runner.call(self._consumer.shutdown(grace_s), wait)
        finally:
            self._runner.stop(wait)
            self._executor.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> PushConsumer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.shutdown()

    @property
    def async_consumer(self) -> AsyncPushConsumer:
        """The asyncio consumer underneath (use it only from its loop: :attr:`loop`)."""
        return self._consumer

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._runner.loop

    @property
    def assigned_queues(self) -> list[MessageQueue]:
        return self._runner.call(self._in_loop_value(lambda: self._consumer.assigned_queues), CALL_MARGIN)

    @staticmethod
    async def _in_loop_value(fn: Callable[[], T]) -> T:
        return fn()


class PullConsumer:
    """Blocking twin of :class:`client.pull_consumer.PullConsumer`; takes the same keyword arguments.

    ``start`` (default true) starts the loop thread and the consumer in the constructor. Every call waits
    at most its own timeout plus :data:`CALL_MARGIN`.
    """

    def __init__(self, group: str, *, start: bool = True, **kwargs: Any) -> None:
        self._consumer = AsyncPullConsumer(group, **kwargs)
        self.group = self._consumer.group
        self._runner = _LoopThread(f"pocketmq-pull-consumer-{group}")
        if start:
            self.start()

    @property
    def _wait(self) -> float:
        return self._consumer.client_config.namesrv_timeout * 2 + CALL_MARGIN

    def start(self) -> None:
        if self._runner.stopped:
            raise ConsumerStateError("the consumer has been shut down; create a new one")
        if self._runner.started:
            return
        self._runner.start()
        try:
            self._runner.call(self._consumer.start(), START_TIMEOUT)
        except BaseException:
            self._runner.stop(START_TIMEOUT)
            raise

    def shutdown(self) -> None:
        if self._runner.stopped:
            return
        if not self._runner.started:
            self._runner.stop(0)
            return
        try:
            self._runner.call(self._consumer.shutdown(), self._wait)
        finally:
            self._runner.stop(self._wait)

    def __enter__(self) -> PullConsumer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.shutdown()

    @property
    def async_consumer(self) -> AsyncPullConsumer:
        return self._consumer

    def fetch_subscribe_message_queues(self, topic: str) -> list[MessageQueue]:
        return self._runner.call(self._consumer.fetch_subscribe_message_queues(topic), self._wait)

    def pull(self, mq: MessageQueue, subscription_expression: str | None, offset: int, max_nums: int = 32, *,
             block: bool = False, timeout: float | None = None) -> PullResult:
        """Blocking :meth:`client.pull_consumer.PullConsumer.pull`."""
        if block:
            budget = (BROKER_SUSPEND_MAX if timeout is None else timeout) + PULL_RPC_MARGIN
        else:
            budget = self._consumer.pull_timeout if timeout is None else timeout
        return self._runner.call(
            self._consumer.pull(mq, subscription_expression, offset, max_nums, block=block, timeout=timeout),
            budget + self._wait)

    def fetch_consume_offset(self, mq: MessageQueue) -> int:
        return self._runner.call(self._consumer.fetch_consume_offset(mq), self._wait)

    def update_consume_offset(self, mq: MessageQueue, offset: int) -> None:
        self._runner.call(self._consumer.update_consume_offset(mq, offset), self._wait)

    def min_offset(self, mq: MessageQueue) -> int:
        return self._runner.call(self._consumer.min_offset(mq), self._wait)

    def max_offset(self, mq: MessageQueue) -> int:
        return self._runner.call(self._consumer.max_offset(mq), self._wait)

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return self._runner.call(self._consumer.search_offset(mq, timestamp_ms), self._wait)

    def send_message_back(self, msg: MessageExt, delay_level: int = 0, *, max_reconsume_times: int = 16) -> None:
        self._runner.call(self._consumer.send_message_back(msg, delay_level, max_reconsume_times=max_reconsume_times),
                          self._wait)
