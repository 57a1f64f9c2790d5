"""Blocking facades for code without an event loop: ``client.blocking.Producer``, ``PushConsumer``, ``PullConsumer``,
``LitePullConsumer``, ``SimpleConsumer``.

Each owns a uvloop event loop running on a daemon thread (:class:`_LoopThread`) and the asyncio member on it
(:class:`_Blocking`, the one facade they share); every method hands its work to that loop and waits for it
in the calling thread::

    with Producer("my-group", namesrv_addr="127.0.0.1:9876") as producer:
        result = producer.send(Message("TopicTest", b"hello"))
        future = producer.send_async(Message("TopicTest", b"later"))   # concurrent.futures.Future
        future.result()

Bounds: every blocking call waits at most its own timeout plus :data:`CALL_MARGIN` (the asyncio member
already enforces the timeout; the margin only covers a stuck loop, reported as :class:`TimeoutError`). At
most ``max_in_flight`` sends (``send``, ``send_batch``, ``send_async``) are outstanding; a caller waits for
a slot within its send timeout, else gets :class:`~pocketmq.remoting.errors.BufferFullError`.

Callbacks of ``send_async`` and the futures' done-callbacks run on the loop thread: keep them short. Calling
a blocking method from that thread would wait on itself, so it raises ``RuntimeError`` instead.
``shutdown()`` shuts the asyncio member down, stops the loop and joins the thread.

The module is longer than 600 lines because every facade lives beside the loop-thread runner they share, so that
``pocketmq.client.blocking`` stays the one import path of the blocking API.

``TransactionProducer`` is the blocking twin of :class:`pocketmq.client.producer.transaction.TransactionProducer`: its
listener's two methods are plain functions run in a pool of ``listener_threads`` threads (they may block on a
database), and ``send_message_in_transaction`` waits for the half message, the local transaction and the
END_TRANSACTION.

The consumers work the same way::

    def handle(msg: MessageExt) -> ConsumeResult:       # a plain function
        ...
        return ConsumeResult.SUCCESS

    with PushConsumer("my-group", namesrv_addr="127.0.0.1:9876") as consumer:   # started on __enter__
        ...

    consumer = PushConsumer("my-group", namesrv_addr="127.0.0.1:9876", start=False)
    consumer.subscribe("TopicTest", "TagA")
    consumer.register_handler(handle)
    consumer.start()

A lite pull consumer is polled from the caller's thread (``poll`` waits there, at most its timeout)::

    with LitePullConsumer("my-group", namesrv_addr="127.0.0.1:9876", start=False) as consumer:
        ...

    consumer = LitePullConsumer("my-group", namesrv_addr="127.0.0.1:9876")   # not started yet
    consumer.subscribe("TopicTest", "*")
    consumer.start()
    for msg in consumer.poll(timeout=1.0):
        ...

A push consumer's handler runs in a thread pool of ``consume_thread_max`` threads (default 20), never on
the loop thread, so a handler may block; the asyncio consumer never has more handlers in flight than that,
so the pool's queue stays empty. At shutdown, handlers still running after the grace period are abandoned
(their messages are not acknowledged and come again); their threads finish on their own.

The module is longer than 600 lines because it holds one thin facade per SDK member, side by side, so that the
one pattern they share (:class:`_Blocking`) is read once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine, Iterable
from types import TracebackType
from typing import Any, Generic, Protocol, Self, TypeVar, Unpack

import uvloop

from pocketmq.client.consumer.config import ConsumerArgs, LitePullConsumerArgs, PullConsumerArgs, SimpleConsumerArgs
from pocketmq.client.consumer.lite_pull import LitePullConsumer as AsyncLitePullConsumer
from pocketmq.client.consumer.pull import BROKER_SUSPEND_MAX, PULL_RPC_MARGIN
from pocketmq.client.consumer.pull import PullConsumer as AsyncPullConsumer
from pocketmq.client.consumer.pull_result import PullResult
from pocketmq.client.consumer.push import PushConsumer as AsyncPushConsumer
from pocketmq.client.consumer.selector import MessageSelector
from pocketmq.client.consumer.simple import SimpleConsumer as AsyncSimpleConsumer
from pocketmq.client.consumer.types import ConsumeResult
from pocketmq.client.core.errors import MQClientError, ProducerStateError
from pocketmq.client.core.member import ClientMember
from pocketmq.client.core.message import Message, MessageQueue, SendResult
from pocketmq.client.core.message_ext import MessageExt
from pocketmq.client.producer.config import ProducerArgs
from pocketmq.client.producer.producer import Producer as AsyncProducer
from pocketmq.client.producer.producer import SendCallback
from pocketmq.client.producer.send_loop import MessageQueueSelector
from pocketmq.client.producer.transaction import TransactionProducer as AsyncTransactionProducer
from pocketmq.client.producer.transaction import TransactionSendResult, TransactionState
from pocketmq.remoting.errors import BufferFullError

__all__ = [
    "CALL_MARGIN",
    "BlockingBatchHandler",
    "BlockingHandler",
    "BlockingTransactionListener",
    "LitePullConsumer",
    "Producer",
    "PullConsumer",
    "PushConsumer",
    "TransactionProducer",
]

#: A push consumer's handler for the blocking facade: a plain function (None counts as SUCCESS).
BlockingHandler = Callable[[MessageExt], ConsumeResult | None]
BlockingBatchHandler = Callable[[list[MessageExt]], ConsumeResult | None]

T = TypeVar("T")
M = TypeVar("M", bound=ClientMember)

#: Extra wait on top of a call's own timeout before the caller gives up on the loop thread.
CALL_MARGIN = 2.0
#: Longest wait for start (first connect happens on first send, so start itself is quick).
START_TIMEOUT = 10.0


class _LoopThread:
    """A uvloop event loop on a daemon thread, and blocking calls into it."""

    def __init__(self, member: ClientMember, name: str) -> None:
        self.loop = uvloop.new_event_loop()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._lock = threading.Lock()
        self._kind = member.kind
        self._error: type[MQClientError] = member.state_error
        self.started = False
        self.stopped = False

    def start(self) -> bool:
        """Start the thread; ``False`` when it was started already. Raises once stopped."""
        with self._lock:
            if self.stopped:
                raise self._error(f"the {self._kind} has been shut down; create a new one")
            if self.started:
                return False
            self.thread.start()
            self.started = True
            return True

    def begin_stop(self) -> bool:
        """Mark stopped; ``False`` when it already was (a second shutdown does nothing)."""
        with self._lock:
            if self.stopped:
                return False
            self.stopped = True
            return True

    def check_caller(self) -> None:
        """Blocking calls come from other threads, while the loop runs."""
        if threading.current_thread() is self.thread:
            kind = self._kind
            raise RuntimeError(f"blocking {kind} methods cannot be called from the {kind}'s own loop thread")
        if not self.started or self.loop.is_closed():
            raise self._error(f"the {self._kind} is not running")

    def call(self, coro: Coroutine[Any, Any, T], wait: float) -> T:
        """Run ``coro`` on the loop and wait for it at most ``wait`` seconds (then :class:`TimeoutError`)."""
        try:
            self.check_caller()
            future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        except BaseException:
            coro.close()
            raise
        try:
            return future.result(wait)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"the {self._kind}'s loop did not finish the call within {wait:.1f} s") from None

    def run(self, fn: Callable[[], T], wait: float) -> T:
        """Call a plain function on the loop and wait for its result."""
        return self.call(_value(fn), wait)

    def join(self, wait: float) -> None:
        """Stop the loop (or close it, never started) and join the thread within ``wait`` seconds."""
        if not self.started:
            self.loop.close()
            return
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(wait)
        if self.thread.is_alive():
            raise TimeoutError(f"the {self._kind}'s loop thread did not stop within {wait:.1f} s")

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


async def _value(fn: Callable[[], T]) -> T:
    return fn()


class _Blocking(Generic[M]):
    """The blocking twin of an asyncio member: its loop thread, ``start``, ``shutdown``, ``with``."""

    #: The thread's name: ``pocketmq-<role>-<group>``.
    _role = "member"

    def __init__(self, member: M, *, start: bool) -> None:
        self._member = member
        self.group = member.group
        self._runner = _LoopThread(member, f"pocketmq-{self._role}-{self.group}")
        if start:
            self.start()

    def start(self) -> None:
        """Start the loop thread and the member (idempotent)."""
        if not self._runner.start():
            return
        try:
            self._runner.call(self._member.start(), self._start_wait())
        except BaseException:
            self._runner.begin_stop()
            try:
                self._runner.join(START_TIMEOUT)
            finally:
                self._after_stop()
            raise

    def shutdown(self) -> None:
        """Shut the member down, stop the loop and join the thread."""
        self._shutdown(self._member.shutdown, self._call_wait())

    def _shutdown(self, stop: Callable[[], Coroutine[Any, Any, None]], wait: float) -> None:
        if not self._runner.begin_stop():
            return
        try:
            if self._runner.started:
                self._runner.call(stop(), wait)
        finally:
            try:
                self._runner.join(wait)
            finally:
                self._after_stop()

    def _start_wait(self) -> float:
        return START_TIMEOUT

    def _call_wait(self) -> float:
        return self._member.config.namesrv_timeout * 2 + CALL_MARGIN

    def _after_stop(self) -> None:
        """What the facade releases once the loop is gone."""

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.shutdown()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop the asyncio member runs on (use the member only from it)."""
        return self._runner.loop

    @property
    def thread(self) -> threading.Thread:
        """The thread that runs :attr:`loop`."""
        return self._runner.thread


class Producer(_Blocking[AsyncProducer]):
    """Blocking twin of :class:`pocketmq.client.producer.producer.Producer`; takes the same keyword arguments.

    ``start`` (default true) starts the loop thread and the producer in the constructor.
    """

    _role = "producer"

    def __init__(self, group: str, *, start: bool = True, **options: Unpack[ProducerArgs]) -> None:
        producer = AsyncProducer(group, **options)
        self._slots = threading.BoundedSemaphore(producer.config.max_in_flight)
        self._outstanding_lock = threading.Lock()
        #: send_async futures not completed yet: failed at shutdown if the loop stopped before they ran.
        self._outstanding: set[concurrent.futures.Future[SendResult]] = set()
        super().__init__(producer, start=start)

    def shutdown(self, timeout: float | None = None) -> None:
        """Shut the producer down (in-flight sends get up to their timeout), stop the loop, join the thread."""
        config = self._member.config
        grace = config.send_msg_timeout if timeout is None else timeout
        # grace for in-flight sends, then UNREGISTER_CLIENT to the brokers in parallel (namesrv_timeout each)
        self._shutdown(lambda: self._member.shutdown(grace=grace), grace + config.namesrv_timeout + CALL_MARGIN)

    @property
    def async_producer(self) -> AsyncProducer:
        """The asyncio producer underneath (use it only from its loop: :attr:`loop`)."""
        return self._member

    # -- sending ----------------------------------------------------------------------------------------

    def send(
        self, msg: Message, *, timeout: float | None = None, selector: MessageQueueSelector | None = None,
        arg: Any = None,
    ) -> SendResult:
        """Blocking :meth:`pocketmq.client.producer.producer.Producer.send`."""
        budget = self._budget(timeout)
        self._acquire(budget)
        try:
            return self._runner.call(self._member.send(msg, timeout=budget, selector=selector, arg=arg),
                                     budget + CALL_MARGIN)
        finally:
            self._slots.release()

    def send_batch(self, messages: Iterable[Message], *, timeout: float | None = None) -> SendResult:
        """Blocking :meth:`pocketmq.client.producer.producer.Producer.send_batch`."""
        budget = self._budget(timeout)
        batch = list(messages)
        self._acquire(budget)
        try:
            return self._runner.call(self._member.send_batch(batch, timeout=budget), budget + CALL_MARGIN)
        finally:
            self._slots.release()

    def request(
        self, msg: Message, *, timeout: float | None = None, selector: MessageQueueSelector | None = None,
        arg: Any = None,
    ) -> MessageExt:
        """Blocking :meth:`pocketmq.client.producer.producer.Producer.request`: the reply, within ``timeout``."""
        budget = self._budget(timeout)
        self._acquire(budget)
        try:
            return self._runner.call(self._member.request(msg, timeout=budget, selector=selector, arg=arg),
                                     budget + CALL_MARGIN)
        finally:
            self._slots.release()

    def send_oneway(self, msg: Message) -> None:
        """Blocking :meth:`client.producer.producer.Producer.send_oneway` (returns once the request is written)."""
        self._runner.call(self._member.send_oneway(msg), self._member.config.send_msg_timeout + CALL_MARGIN)

    def send_async(
        self, msg: Message, *, callback: SendCallback | None = None, timeout: float | None = None
    ) -> concurrent.futures.Future[SendResult]:
        """Start a send and return a :class:`concurrent.futures.Future` of its result.

        Waits (at most the send timeout) only when ``max_in_flight`` sends are outstanding. Errors of any
        kind, validation included, complete the future (and reach ``callback(result, error)``).
        """
        budget = self._budget(timeout)
        self._runner.check_caller()
        self._acquire(budget)
        result: concurrent.futures.Future[SendResult] = concurrent.futures.Future()
        with self._outstanding_lock:
            self._outstanding.add(result)
        result.add_done_callback(self._async_finished)
        if callback is not None:
            result.add_done_callback(lambda f: _deliver(callback, f))

        def begin() -> None:
            try:
                inner = self._member.send_async(msg, timeout=budget)
            except BaseException as exc:  # validation, state, window: all go to the future
                result.set_exception(exc)
                return
            inner.add_done_callback(lambda f: _transfer(f, result))

        try:
            self._runner.loop.call_soon_threadsafe(begin)
        except RuntimeError:  # the loop is closed
            result.set_exception(ProducerStateError("the producer is shut down"))
        return result

    # -- internals --------------------------------------------------------------------------------------

    def _async_finished(self, future: concurrent.futures.Future[SendResult]) -> None:
        with self._outstanding_lock:
            self._outstanding.discard(future)
        self._slots.release()

    def _budget(self, timeout: float | None) -> float:
        if timeout is None:
            return self._member.config.send_msg_timeout
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        return timeout

    def _acquire(self, budget: float) -> None:
        self._runner.check_caller()
        if not self._slots.acquire(timeout=budget):
            raise BufferFullError(f"no send slot freed within {budget * 1000:.0f} ms "
                                  f"({self._member.config.max_in_flight} sends in flight)")

    def _after_stop(self) -> None:
        with self._outstanding_lock:
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


class PushConsumer(_Blocking[AsyncPushConsumer]):
    """Blocking twin of :class:`pocketmq.client.consumer.push.PushConsumer`; takes the same keyword arguments.

    ``start`` (default false here, since a handler and subscriptions come first) starts it in the
    constructor; ``with PushConsumer(...) as c`` starts it on entry. Handlers are plain functions run in a
    pool of ``consume_thread_max`` threads (see the module docstring).
    """

    _role = "push-consumer"

    def __init__(self, group: str, *, start: bool = False, **options: Unpack[ConsumerArgs]) -> None:
        consumer = AsyncPushConsumer(group, **options)
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=consumer.config.consume_thread_max, thread_name_prefix=f"pocketmq-consume-{group}")
        super().__init__(consumer, start=start)

    def subscribe(self, topic: str, expression: str | MessageSelector | None = "*") -> None:
        """As :meth:`pocketmq.client.consumer.push.PushConsumer.subscribe` (before or after start)."""
        self._configure(lambda: self._member.subscribe(topic, expression))

    def unsubscribe(self, topic: str) -> None:
        self._configure(lambda: self._member.unsubscribe(topic))

    def _configure(self, change: Callable[[], None]) -> None:
        if self._runner.started and not self._runner.stopped:
            self._runner.run(change, CALL_MARGIN)
        else:
            change()

    def register_handler(self, handler: BlockingHandler) -> None:
        """A plain function called with one message, in the handler thread pool."""
        executor = self._executor

        async def run(msg: MessageExt) -> ConsumeResult | None:
            return await asyncio.get_running_loop().run_in_executor(executor, handler, msg)

        self._member.register_handler(run)

    def register_batch_handler(self, handler: BlockingBatchHandler) -> None:
        """A plain function called with up to ``consume_message_batch_max_size`` messages of one queue."""
        executor = self._executor

        async def run(msgs: list[MessageExt]) -> ConsumeResult | None:
            return await asyncio.get_running_loop().run_in_executor(executor, handler, msgs)

        self._member.register_batch_handler(run)

    def shutdown(self, grace: float | None = None) -> None:
        """Shut the consumer down (running handlers get ``grace``, default ``shutdown_grace``), stop the loop
        and the handler pool (without waiting for abandoned handlers)."""
        config = self._member.config
        grace_s = config.shutdown_grace if grace is None else grace
        # grace for handlers, then commits and UNREGISTER_CLIENT (namesrv_timeout each, in parallel)
        self._shutdown(lambda: self._member.shutdown(grace_s), grace_s + 3 * config.namesrv_timeout + CALL_MARGIN)

    def _start_wait(self) -> float:
        return START_TIMEOUT + self._member.config.namesrv_timeout

    def _after_stop(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    @property
    def async_consumer(self) -> AsyncPushConsumer:
        """The asyncio consumer underneath (use it only from its loop: :attr:`loop`)."""
        return self._member

    @property
    def assigned_queues(self) -> list[MessageQueue]:
        return self._runner.run(lambda: self._member.assigned_queues, CALL_MARGIN)


class PullConsumer(_Blocking[AsyncPullConsumer]):
    """Blocking twin of :class:`pocketmq.client.consumer.pull.PullConsumer`; takes the same keyword arguments.

    ``start`` (default true) starts the loop thread and the consumer in the constructor. Every call waits
    at most its own timeout plus :data:`CALL_MARGIN`.
    """

    _role = "pull-consumer"

    def __init__(self, group: str, *, start: bool = True, **options: Unpack[PullConsumerArgs]) -> None:
        super().__init__(AsyncPullConsumer(group, **options), start=start)

    @property
    def async_consumer(self) -> AsyncPullConsumer:
        return self._member

    def fetch_subscribe_message_queues(self, topic: str) -> list[MessageQueue]:
        return self._runner.call(self._member.fetch_subscribe_message_queues(topic), self._call_wait())

    def pull(self, mq: MessageQueue, subscription_expression: str | MessageSelector | None, offset: int,
             max_nums: int = 32, *,
             block: bool = False, timeout: float | None = None) -> PullResult:
        """Blocking :meth:`pocketmq.client.consumer.pull.PullConsumer.pull`."""
        if block:
            budget = (BROKER_SUSPEND_MAX if timeout is None else timeout) + PULL_RPC_MARGIN
        else:
            budget = self._member.config.pull_timeout if timeout is None else timeout
        return self._runner.call(
            self._member.pull(mq, subscription_expression, offset, max_nums, block=block, timeout=timeout),
            budget + self._call_wait())

    def fetch_consume_offset(self, mq: MessageQueue) -> int:
        return self._runner.call(self._member.fetch_consume_offset(mq), self._call_wait())

    def update_consume_offset(self, mq: MessageQueue, offset: int) -> None:
        self._runner.call(self._member.update_consume_offset(mq, offset), self._call_wait())

    def min_offset(self, mq: MessageQueue) -> int:
        return self._runner.call(self._member.min_offset(mq), self._call_wait())

    def max_offset(self, mq: MessageQueue) -> int:
        return self._runner.call(self._member.max_offset(mq), self._call_wait())

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return self._runner.call(self._member.search_offset(mq, timestamp_ms), self._call_wait())

    def send_message_back(self, msg: MessageExt, delay_level: int = 0, *, max_reconsume_times: int = 16) -> None:
        self._runner.call(self._member.send_message_back(msg, delay_level, max_reconsume_times=max_reconsume_times),
                          self._call_wait())


class SimpleConsumer(_Blocking[AsyncSimpleConsumer]):
    """Blocking twin of :class:`pocketmq.client.consumer.simple.SimpleConsumer`; takes the same keyword arguments.
    Subscribe before ``start`` (pass ``start=False``) or after: a running consumer takes new subscriptions."""

    _role = "simple-consumer"

    def __init__(self, group: str, *, start: bool = True, fifo: bool = False,
                 **options: Unpack[SimpleConsumerArgs]) -> None:
        super().__init__(AsyncSimpleConsumer(group, fifo=fifo, **options), start=start)

    @property
    def async_consumer(self) -> AsyncSimpleConsumer:
        return self._member

    def subscribe(self, topic: str, expression: str | MessageSelector | None = "*") -> None:
        self._member.subscribe(topic, expression)

    def receive(self, max_message_num: int = 16, invisible_duration: float | None = None) -> list[MessageExt]:
        """Blocking :meth:`~pocketmq.client.consumer.simple.SimpleConsumer.receive` (waits ``await_duration`` at most,
        plus the request's time)."""
        config = self._member.config
        return self._runner.call(self._member.receive(max_message_num, invisible_duration),
                                 config.await_duration + config.request_timeout + self._call_wait())

    def ack(self, message: MessageExt) -> None:
        self._runner.call(self._member.ack(message), self._call_wait())

    def ack_batch(self, messages: list[MessageExt]) -> None:
        self._runner.call(self._member.ack_batch(messages), self._call_wait())

    def change_invisible_duration(self, message: MessageExt, invisible_duration: float) -> None:
        self._runner.call(self._member.change_invisible_duration(message, invisible_duration), self._call_wait())


class LitePullConsumer(_Blocking[AsyncLitePullConsumer]):
    """Blocking twin of :class:`pocketmq.client.consumer.lite_pull.LitePullConsumer`; takes the same keyword
    arguments. ``start`` (default false, since subscriptions or queues come first) starts it in the constructor;
    ``with LitePullConsumer(...) as c`` starts it on entry."""

    _role = "lite-pull-consumer"

    def __init__(self, group: str, *, start: bool = False, **options: Unpack[LitePullConsumerArgs]) -> None:
        super().__init__(AsyncLitePullConsumer(group, **options), start=start)

    @property
    def async_consumer(self) -> AsyncLitePullConsumer:
        """The asyncio consumer underneath (use it only from its loop: :attr:`loop`)."""
        return self._member

    def _call_now(self, fn: Callable[[], T]) -> T:
        """``fn`` on the loop when it runs (the member is the loop's from then on), else here."""
        if self._runner.started and not self._runner.stopped:
            return self._runner.run(fn, CALL_MARGIN)
        return fn()

    def subscribe(self, topic: str, expression: str | MessageSelector | None = "*") -> None:
        self._call_now(lambda: self._member.subscribe(topic, expression))

    def unsubscribe(self, topic: str) -> None:
        self._call_now(lambda: self._member.unsubscribe(topic))

    def assign(self, queues: Iterable[MessageQueue]) -> None:
        chosen = list(queues)
        self._call_now(lambda: self._member.assign(chosen))

    def poll(self, timeout: float | None = None) -> list[MessageExt]:
        """Blocking :meth:`~pocketmq.client.consumer.lite_pull.LitePullConsumer.poll`."""
        wait = self._member.config.poll_timeout if timeout is None else timeout
        return self._runner.call(self._member.poll(timeout), max(wait, 0.0) + CALL_MARGIN)

    def seek(self, mq: MessageQueue, offset: int) -> None:
        self._runner.call(self._member.seek(mq, offset), self._call_wait())

    def seek_to_begin(self, mq: MessageQueue) -> None:
        self._runner.call(self._member.seek_to_begin(mq), self._call_wait())

    def seek_to_end(self, mq: MessageQueue) -> None:
        self._runner.call(self._member.seek_to_end(mq), self._call_wait())

    def pause(self, queues: Iterable[MessageQueue]) -> None:
        chosen = list(queues)
        self._runner.run(lambda: self._member.pause(chosen), CALL_MARGIN)

    def resume(self, queues: Iterable[MessageQueue]) -> None:
        chosen = list(queues)
        self._runner.run(lambda: self._member.resume(chosen), CALL_MARGIN)

    def commit_sync(self, queues: Iterable[MessageQueue] | None = None) -> None:
        chosen = None if queues is None else list(queues)
        self._runner.call(self._member.commit_sync(chosen), self._call_wait())

    def committed(self, mq: MessageQueue) -> int:
        return self._runner.call(self._member.committed(mq), self._call_wait())

    def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        return self._runner.call(self._member.fetch_message_queues(topic), self._call_wait())

    def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return self._runner.call(self._member.offset_for_timestamp(mq, timestamp_ms), self._call_wait())

    @property
    def assigned_queues(self) -> list[MessageQueue]:
        return self._runner.run(lambda: self._member.assigned_queues, CALL_MARGIN)

    def shutdown(self) -> None:
        """Commit and persist the offsets, unregister, stop the loop and join the thread."""
        self._shutdown(self._member.shutdown, 3 * self._member.config.namesrv_timeout + CALL_MARGIN)

    def _start_wait(self) -> float:
        return START_TIMEOUT + 2 * self._member.config.namesrv_timeout


class BlockingTransactionListener(Protocol):
    """The blocking facade's :class:`~pocketmq.client.producer.transaction.TransactionListener`: plain methods."""

    def execute_local_transaction(self, msg: Message, arg: Any) -> TransactionState:
        ...

    def check_local_transaction(self, msg: MessageExt) -> TransactionState:
        ...


class _ThreadedListener:
    """A blocking listener run in a thread pool, seen by the asyncio producer as an async one."""

    def __init__(self, listener: BlockingTransactionListener, executor: concurrent.futures.ThreadPoolExecutor) -> None:
        self.listener = listener
        self.executor = executor

    async def execute_local_transaction(self, msg: Message, arg: Any) -> TransactionState:
        return await asyncio.get_running_loop().run_in_executor(
            self.executor, self.listener.execute_local_transaction, msg, arg)

    async def check_local_transaction(self, msg: MessageExt) -> TransactionState:
        return await asyncio.get_running_loop().run_in_executor(
            self.executor, self.listener.check_local_transaction, msg)


class TransactionProducer(_Blocking[AsyncTransactionProducer]):
    """Blocking twin of :class:`pocketmq.client.producer.transaction.TransactionProducer` (module docstring)."""

    _role = "tx-producer"

    def __init__(self, group: str, listener: BlockingTransactionListener, *, start: bool = True,
                 listener_threads: int = 4, local_transaction_timeout: float = 60.0,
                 **options: Unpack[ProducerArgs]) -> None:
        #: longest wait for ``execute_local_transaction`` on top of the send's own timeout
        self.local_transaction_timeout = local_transaction_timeout
        self._executor = concurrent.futures.ThreadPoolExecutor(listener_threads,
                                                               thread_name_prefix=f"pocketmq-tx-{group}")
        super().__init__(AsyncTransactionProducer(group, _ThreadedListener(listener, self._executor), **options),
                         start=start)

    @property
    def async_producer(self) -> AsyncTransactionProducer:
        """The asyncio producer underneath (use it only from its loop: :attr:`loop`)."""
        return self._member

    def send_message_in_transaction(self, msg: Message, arg: Any = None, *,
                                    timeout: float | None = None) -> TransactionSendResult:
        """Blocking :meth:`client.producer.transaction.TransactionProducer.send_message_in_transaction`; waits at
        most the send timeout plus ``local_transaction_timeout`` (then :class:`TimeoutError`: the call is cancelled,
        no END_TRANSACTION is sent, and the broker checks the transaction back)."""
        budget = self._member.config.send_msg_timeout if timeout is None else timeout
        return self._runner.call(self._member.send_message_in_transaction(msg, arg, timeout=timeout),
                                 budget + self.local_transaction_timeout + CALL_MARGIN)

    def shutdown(self, timeout: float | None = None) -> None:
        config = self._member.config
        grace = config.send_msg_timeout if timeout is None else timeout
        self._shutdown(lambda: self._member.shutdown(grace=grace), grace + config.namesrv_timeout + CALL_MARGIN)

    def _after_stop(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
