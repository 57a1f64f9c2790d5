"""The attempts of one send (RocketMQ's ``sendDefaultImpl``): queue selection with latency fault tolerance,
retries within one overall budget, and what each attempt reports.

* Up to :attr:`RetryPolicy.attempts` attempts, all inside the send's budget. Each attempt gets what is left
  of it and none starts with less than :data:`MIN_ATTEMPT_BUDGET` left, so a slow first attempt ends the send
  with a clear "send timeout" instead of a doomed retry with 0 ms (apache/rocketmq#760, apache/rocketmq#1921). A
  retry picks
  a queue on another broker than the one that just failed. Which errors are retried is the policy's rule
  (:func:`~pocketmq.client.core.errors.is_retriable_send_error` for ``send``, transport errors only for
  ``send_async``); other errors are raised as they are. A stored-but-not-OK status (FLUSH_DISK_TIMEOUT,
  FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE) is returned, not retried, unless ``retry_not_ok``. When every
  attempt fails: :class:`~pocketmq.client.core.errors.SendFailedError`, chained to the last error.
* Each attempt's request may wait for its answer :data:`ANSWER_GRACE` past the send's budget (no attempt
  *starts* after it). A broker's own waits end with an answer that says the message is stored — a
  SYNC_MASTER answers FLUSH_SLAVE_TIMEOUT after ``slaveTimeout`` (3 s), FLUSH_DISK_TIMEOUT after
  ``syncFlushTimeout`` — and with RocketMQ's defaults (3 s send timeout) that answer arrived just after the
  client had given up: the application saw a failure for a stored message, and a retry stored a duplicate.
  The grace is on the client because the RocketMQ 4.x send header carries no deadline a broker could honour,
  and the SDK is then right against any broker (RocketMQ's too). The cost: a send to a broker that never
  answers fails after budget + grace.
* An ordered send (:meth:`SendLoop.send_selected`) makes one attempt on the queue its selector picks.
* After every attempt the broker's latency goes to the :class:`~pocketmq.client.producer.fault.MQFaultStrategy` (a
  failure isolates the broker, except a MESSAGE_ILLEGAL answer, which is the message's fault, not the
  broker's; a failure without an answer marks it unreachable, to be probed) and to the attempt hook, and a
  failure that suggests a stale route (connect error, closed connection, TOPIC_NOT_EXIST, unknown broker)
  schedules a background route refresh of the topic.

Hot path: with the route known and a live connection to the queue's master, :meth:`SendLoop.send` goes
straight to the first attempt (no lookup, no connect, no logging); the general path looks the route up
first.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pocketmq.client.core.errors import BrokerNotFoundError, MQClientError, NoRouteError, SendFailedError
from pocketmq.client.core.instance import MQClientInstance
from pocketmq.client.core.message import (
    DEFAULT_REGION,
    Message,
    MessageQueue,
    SendResult,
    SendStatus,
    send_result_from_response,
)
from pocketmq.client.producer.config import SendAttemptHook
from pocketmq.client.producer.fault import MQFaultStrategy
from pocketmq.client.producer.outgoing import Outgoing
from pocketmq.client.producer.topic_publish import TopicPublishInfo
from pocketmq.common.message import MessageConst
from pocketmq.remoting.codes import ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection
from pocketmq.remoting.errors import PocketMQError, ResponseError

__all__ = ["ANSWER_GRACE", "MIN_ATTEMPT_BUDGET", "MessageQueueSelector", "RetryPolicy", "SendLoop", "send_result"]

#: ``selector(queues, message, arg) -> queue`` for ordered messages.
MessageQueueSelector = Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]

#: A retry is not started with less than this left of the send's budget (seconds).
MIN_ATTEMPT_BUDGET = 0.005
#: Seconds an attempt's request may wait for the broker's answer past the send's budget (module docstring):
#: a broker that ends a 3 s replica wait when the 3 s budget ends answers a few ms late, and a loaded one later.
ANSWER_GRACE = 1.0
#: Broker answers that blame the message, not the broker: no isolation for them.
_NO_ISOLATION_CODES = frozenset({ResponseCode.MESSAGE_ILLEGAL})

_monotonic = time.monotonic
_SEND_OK = SendStatus.SEND_OK


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How many attempts a kind of send makes and which failures it retries."""

    attempts: int
    retriable: Callable[[BaseException], bool]
    #: Retry on another broker after a stored-but-not-OK status.
    retry_not_ok: bool


def _isolates(error: BaseException) -> bool:
    return not (isinstance(error, ResponseError) and error.response_code in _NO_ISOLATION_CODES)


class SendLoop:
    """Attempts of a producer's sends over its publish table and its instance's brokers (see the module
    docstring). :meth:`attach` gives it the instance when the producer starts."""

    def __init__(
        self,
        fault_strategy: MQFaultStrategy,
        publish: dict[str, TopicPublishInfo],
        request: Callable[[Outgoing, MessageQueue], RemotingCommand],
        attempt_hook: SendAttemptHook | None,
        log: Any,
    ) -> None:
        self.fault_strategy = fault_strategy
        self.attempt_hook = attempt_hook
        self._publish = publish
        self._request = request
        self._log = log
        self._instance: MQClientInstance | None = None
        # The instance's tables, read directly on the hot path (set by attach).
        self._masters: dict[str, str] = {}
        self._conns: dict[str, Connection] = {}

    def attach(self, instance: MQClientInstance) -> None:
        self._instance = instance
        self._masters = instance.routes.master_table
        self._conns = instance.connections

    @property
    def instance(self) -> MQClientInstance:
        if self._instance is None:
            raise MQClientError("the producer has not been started")
        return self._instance

    # -- routes and connections ------------------------------------------------------------------------

    async def find_publish_info(self, topic: str, timeout: float) -> TopicPublishInfo:
        """The topic's publish info, looked up (shared with concurrent callers) when none is usable yet.

        Raises :class:`NoRouteError` when no name server knows the topic or ``TBW102``, or the route has no
        writable queue; :class:`~pocketmq.client.core.errors.NoNameServerError` when no name server answered in time.
        """
        info = self._publish.get(topic)
        if info is not None and info.ok:
            return info
        await self.instance.refresher.refresh(topic, timeout, publish=True)
        info = self._publish.get(topic)
        if info is None:
            addrs = ";".join(self.instance.config.namesrv_addrs)
            raise NoRouteError(topic, f"no name server of {addrs} has it or TBW102")
        if not info.ok:
            raise NoRouteError(topic, "its route has no writable queue on a broker with a master")
        return info

    def live_connection(self, broker_name: str) -> Connection | None:
        """The open connection to the broker's master, if there is one (no lookup, no connect)."""
        conn = self._conns.get(self._masters.get(broker_name, ""))
        return conn if conn is not None and not conn.is_closed else None

    async def connect_master(self, broker_name: str, timeout: float) -> Connection:
        """Connect to the broker's master within ``timeout`` (when :meth:`live_connection` has none)."""
        addr = self._masters.get(broker_name)
        if addr is None:
            raise BrokerNotFoundError(broker_name)
        return await self.instance.connect(addr, timeout)

    # -- the attempts -----------------------------------------------------------------------------------

    def send(
        self, out: Outgoing, budget: float, policy: RetryPolicy, info: TopicPublishInfo | None = None
    ) -> Coroutine[Any, Any, SendResult]:
        """Every attempt for ``out`` within ``budget`` seconds: the first at once when the route (``info``, if
        the caller has it already) and the connection are known (no coroutine in between on that path), else
        after the route lookup."""
        if info is None:
            info = self._publish.get(out.topic)
        if info is not None and info.ok:
            queue = self.fault_strategy.select_one_message_queue(info, None)
            conn = self.live_connection(queue.broker_name)
            if conn is not None:
                return self._first_attempt(out, info, queue, conn, budget, policy)
        return self._after_lookup(out, budget, policy)

    async def _after_lookup(self, out: Outgoing, budget: float, policy: RetryPolicy) -> SendResult:
        begin = _monotonic()
        info = await self.find_publish_info(out.topic, budget)
        return await self.with_retries(out, info, begin, begin + budget, policy)

    async def _first_attempt(
        self, out: Outgoing, info: TopicPublishInfo, queue: MessageQueue, conn: Connection, budget: float,
        policy: RetryPolicy,
    ) -> SendResult:
        """Attempt 1 on a known route and live connection; hands over to :meth:`with_retries` after."""
        start, sent_to = _monotonic(), self._masters.get(queue.broker_name)
        try:
            response = await conn.request(self._request(out, queue), budget + ANSWER_GRACE)
            result = send_result(response, queue, out.msg_id, self._masters)
        except PocketMQError as exc:
            self._attempt_failed(out.topic, queue, start, exc, sent_to)
            if not policy.retriable(exc):
                raise
            return await self.with_retries(out, info, start, start + budget, policy, first_attempt=1, errors=[exc],
                                           brokers=[queue.broker_name], last_broker=queue.broker_name)
        self._attempt_ok(queue, start)
        if result.status is _SEND_OK or not policy.retry_not_ok:
            return result
        return await self.with_retries(out, info, start, start + budget, policy, first_attempt=1,
                                       brokers=[queue.broker_name], last_broker=queue.broker_name, result=result)

    async def with_retries(
        self,
        out: Outgoing,
        info: TopicPublishInfo,
        begin: float,
        deadline: float,
        policy: RetryPolicy,
        *,
        first_attempt: int = 0,
        errors: list[BaseException] | None = None,
        brokers: list[str] | None = None,
        last_broker: str | None = None,
        result: SendResult | None = None,
    ) -> SendResult:
        """Attempts ``first_attempt + 1`` .. ``policy.attempts``, continuing from the state passed in."""
        fault = self.fault_strategy
        errors = [] if errors is None else errors
        brokers = [] if brokers is None else brokers
        timed_out = False
        for attempt in range(first_attempt, policy.attempts):
            if attempt:
                fresh = self._publish.get(out.topic)  # a background refresh may have replaced it
                if fresh is not None and fresh.ok:
                    info = fresh
            queue = fault.select_one_message_queue(info, last_broker)
            start, sent_to = _monotonic(), self._masters.get(queue.broker_name)
            if start >= deadline or (attempt and deadline - start < MIN_ATTEMPT_BUDGET):
                timed_out = True
                break
            brokers.append(queue.broker_name)
            try:
                result = await self._invoke(out, queue, deadline)
            except PocketMQError as exc:
                self._attempt_failed(out.topic, queue, start, exc, sent_to)
                if not policy.retriable(exc):
                    if result is not None:
                        return result  # an earlier attempt stored the message (not-OK status)
                    raise
                errors.append(exc)
                last_broker = queue.broker_name
                continue
            self._attempt_ok(queue, start)
            if result.status is _SEND_OK or not policy.retry_not_ok:
                return result
            last_broker = queue.broker_name
        if result is not None:
            return result
        error = SendFailedError(out.topic, errors=errors, brokers_tried=brokers,
                                elapsed_ms=(_monotonic() - begin) * 1000.0, timed_out=timed_out)
        raise error from (errors[-1] if errors else None)

    async def send_selected(
        self, out: Outgoing, info: TopicPublishInfo, selector: MessageQueueSelector, msg: Message, arg: Any,
        begin: float, deadline: float, policy: RetryPolicy,
    ) -> SendResult:
        """An ordered send: one attempt on the queue ``selector(queues, msg, arg)`` picks."""
        queue = selector(info.message_queues, msg, arg)
        if not isinstance(queue, MessageQueue):
            raise MQClientError(f"the queue selector returned {type(queue).__name__}, not a MessageQueue")
        if queue.topic != out.topic:
            raise MQClientError(f"the queue selector returned a queue of topic {queue.topic}, not {out.topic}")
        start, sent_to = _monotonic(), self._masters.get(queue.broker_name)
        try:
            result = await self._invoke(out, queue, deadline)
        except PocketMQError as exc:
            self._attempt_failed(out.topic, queue, start, exc, sent_to)
            if not policy.retriable(exc):
                raise
            error = SendFailedError(out.topic, errors=[exc], brokers_tried=[queue.broker_name],
                                    elapsed_ms=(_monotonic() - begin) * 1000.0)
            raise error from exc
        self._attempt_ok(queue, start)
        return result

    async def _invoke(self, out: Outgoing, queue: MessageQueue, deadline: float) -> SendResult:
        """One request to the queue's master: the only network round trip of an attempt."""
        conn = self.live_connection(queue.broker_name)
        if conn is None:
            conn = await self.connect_master(queue.broker_name, deadline - _monotonic())
        response = await conn.request(self._request(out, queue), deadline - _monotonic() + ANSWER_GRACE)
        return send_result(response, queue, out.msg_id, self._masters)

    # -- what an attempt reports ------------------------------------------------------------------------

    def _attempt_ok(self, queue: MessageQueue, start: float) -> None:
        latency = (_monotonic() - start) * 1000.0
        self.fault_strategy.update_fault_item(queue.broker_name, latency, False)
        if self.attempt_hook is not None:
            self._call_hook(queue, None, latency)

    def _attempt_failed(self, topic: str, queue: MessageQueue, start: float, exc: PocketMQError,
                        sent_to: str | None = None) -> None:
        latency = (_monotonic() - start) * 1000.0
        now_master = self._masters.get(queue.broker_name)
        if sent_to is None or now_master in (None, sent_to):
            self.fault_strategy.update_fault_item(queue.broker_name, latency, _isolates(exc),
                                                  answered=isinstance(exc, ResponseError))
        # else the group has another master since the attempt began (a failover): the old one's failure does not
        # isolate the new one
        if self.attempt_hook is not None:
            self._call_hook(queue, exc, latency)
        if exc.refresh_route and self._instance is not None:
            self._instance.refresher.request(topic, publish=True)
        self._log.debug("send_attempt_failed", topic=topic, broker=queue.broker_name, queue_id=queue.queue_id,
                        latency_ms=round(latency, 3), error=str(exc))

    def _call_hook(self, queue: MessageQueue, error: BaseException | None, latency: float) -> None:
        assert self.attempt_hook is not None
        try:
            self.attempt_hook(queue, error, latency)
        except Exception:
            self._log.exception("send_attempt_hook_failed")


def send_result(
    response: RemotingCommand, queue: MessageQueue, msg_id: str, masters: Mapping[str, str]
) -> SendResult:
    """:func:`~pocketmq.client.core.message.send_result_from_response`, with the common case (SUCCESS and well-formed
    fields) built directly: it runs once per message, and the general function is measurably slower. An error
    names the broker's address from ``masters`` (looked up only then)."""
    ext = response.ext_fields
    if response.code == ResponseCode.SUCCESS and ext is not None:
        try:
            offset_msg_id = ext["msgId"]
            queue_id = int(ext["queueId"])
            queue_offset = int(ext["queueOffset"])
        except (KeyError, ValueError):
            pass  # malformed: the general function names what is wrong
        else:
            if queue_id != queue.queue_id:
                queue = MessageQueue(queue.topic, queue.broker_name, queue_id)
            return SendResult(_SEND_OK, msg_id, offset_msg_id, queue, queue_offset,
                              ext.get(MessageConst.PROPERTY_MSG_REGION) or DEFAULT_REGION,
                              ext.get(MessageConst.PROPERTY_TRACE_SWITCH) != "false",
                              ext.get("transactionId"), ext.get("recallHandle"))
    return send_result_from_response(response.code, ext, message_queue=queue, msg_id=msg_id,
                                     remark=response.remark, addr=masters.get(queue.broker_name))
