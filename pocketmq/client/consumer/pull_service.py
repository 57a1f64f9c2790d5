"""The push consumer's pulling (RocketMQ's ``PullMessageService`` with the ``processQueueTable``): for every
queue assigned to the consumer, its :class:`~pocketmq.client.consumer.process_queue.ProcessQueue` and one long-polling
pull loop.

A pull loop asks the broker for ``pull_batch_size`` messages from the queue's next offset (SUSPEND,
``long_polling_timeout`` 15 s, RPC timeout ``pull_timeout`` 30 s), puts what it gets into the process queue and
hands it to the consume service. It waits :data:`PULL_DELAY_WHEN_FLOW_CONTROL` (50 ms) while the process
queue is over its thresholds (flow control), :data:`PULL_DELAY_WHEN_NOT_LOCKED` while an orderly queue is not
locked, and :data:`PULL_DELAY_WHEN_EXCEPTION` (3 s) after an error. Where a pull goes (the member the broker
suggested, any live member of the group while the master is down, no COMMIT_OFFSET flag to a slave) is
:class:`~pocketmq.client.consumer.broker_api.ConsumerAPI`'s business. On OFFSET_ILLEGAL the queue goes on from the
broker's offset with a fresh process queue (:meth:`PullService._offset_moved`).

The rebalance service decides which queues are assigned: :meth:`PullService.start_pull` and
:meth:`PullService.stop_pull`. Stopping the service cancels every pull loop.

What is pulled goes to a :class:`PulledSink`: the push consumer's consume service, or the lite pull consumer's
poll buffer, which also holds queues back (:meth:`PullService.held_back`: paused, buffer full) and keeps its own
consumed positions (:meth:`PullService.passed_filtered`), overriding those two.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

from pocketmq.client.consumer.context import PushContext
from pocketmq.client.consumer.process_queue import ProcessQueue
from pocketmq.client.consumer.pull_result import PullResult, PullStatus
from pocketmq.client.core.message import MessageQueue
from pocketmq.client.core.message_ext import MessageExt, restore_retry_topics
from pocketmq.common.service import Service
from pocketmq.common.subscription import SubscriptionData
from pocketmq.common.sysflag import pull_sys_flag
from pocketmq.common.topic import retry_topic
from pocketmq.remoting.codes import ResponseCode
from pocketmq.remoting.errors import PocketMQError, ResponseError

__all__ = [
    "PULL_DELAY_WHEN_EXCEPTION",
    "PULL_DELAY_WHEN_FLOW_CONTROL",
    "PULL_DELAY_WHEN_NOT_LOCKED",
    "PULL_MIN_EMPTY_ROUND",
    "PullService",
    "PulledSink",
]

#: After a pull error (broker down, refused, timeout) the queue is pulled again after this long (s).
PULL_DELAY_WHEN_EXCEPTION = 3.0
#: While a queue is over its flow-control thresholds it is checked again after this long (s).
PULL_DELAY_WHEN_FLOW_CONTROL = 0.05
#: An orderly queue not locked yet is checked again after this long (s).
PULL_DELAY_WHEN_NOT_LOCKED = 1.0
#: An empty answer without progress faster than this (s) was not long-polled (the broker's hold was full, a
#: slave would not correct the offset): wait this long before the next pull instead of spinning.
PULL_MIN_EMPTY_ROUND = 0.05
#: Broker codes after which the broker does not know our group: it gets a heartbeat at once.
_UNKNOWN_GROUP_CODES = frozenset({ResponseCode.SUBSCRIPTION_NOT_EXIST, ResponseCode.SUBSCRIPTION_NOT_LATEST,
                                  ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST})


class PulledSink(Protocol):
    """Where a pull loop hands the messages it put into a queue's process queue."""

    def submit(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt], dispatch: bool) -> None: ...


class PullService(Service):
    """The assigned queues' process queues and pull loops (see the module docstring)."""

    def __init__(self, context: PushContext, consume: PulledSink) -> None:
        super().__init__()
        self.name = f"pull-{context.config.group}"
        self.config = context.config
        self._ctx = context
        self._consume = consume
        self._clustering = context.config.clustering
        self._retry_topic = retry_topic(context.api.group)
        #: The queues assigned now and their process queues.
        self.process_queues: dict[MessageQueue, ProcessQueue] = {}
        self._tasks: dict[MessageQueue, asyncio.Task[None]] = {}

    def new_process_queue(self) -> ProcessQueue:
        config = self.config
        return ProcessQueue(pull_threshold_for_queue=config.pull_threshold_for_queue,
                            pull_threshold_size_for_queue=config.pull_threshold_size_for_queue,
                            consume_concurrently_max_span=config.consume_concurrently_max_span)

    def start_pull(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        """Assign ``mq`` (with its process queue) and start pulling it from ``offset``."""
        self.process_queues[mq] = pq
        self._tasks[mq] = asyncio.get_running_loop().create_task(
            self._pull_loop(mq, pq, offset), name=f"pull-{mq.topic}-{mq.broker_name}-{mq.queue_id}")

    def is_pulling(self, mq: MessageQueue) -> bool:
        task = self._tasks.get(mq)
        return task is not None and not task.done()

    async def stop_pull(self, mq: MessageQueue) -> ProcessQueue | None:
        """Take ``mq`` away: its pull loop is cancelled (and waited for); returns its process queue."""
        pq = self.process_queues.pop(mq, None)
        task = self._tasks.pop(mq, None)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        return pq

    async def stop(self) -> None:
        """Cancel every pull loop (the process queues stay, for the final commits)."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        await super().stop()

    # -- one queue --------------------------------------------------------------------------------------

    async def _pull_loop(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        """Long-poll ``mq`` until its process queue is dropped (see the module docstring)."""
        config = self.config
        orderly, clustering = config.orderly, self._clustering
        subscriptions = self._ctx.subscriptions
        flow_logged = 0
        while not pq.dropped:
            if orderly and clustering and not pq.locked:
                await asyncio.sleep(PULL_DELAY_WHEN_NOT_LOCKED)
                continue
            if self.held_back(mq, pq):
                flow_logged += 1
                if flow_logged % 1000 == 1:
                    self._ctx.log.debug("pull_flow_control", topic=mq.topic, queue_id=mq.queue_id,
                                    count=pq.msg_count, size=pq.msg_size, span=pq.max_span)
                await asyncio.sleep(PULL_DELAY_WHEN_FLOW_CONTROL)
                continue
            sub = subscriptions.get(mq.topic)
            if sub is None:
                await asyncio.sleep(PULL_DELAY_WHEN_EXCEPTION)
                continue
            started = time.monotonic()
            try:
                result = await self._pull(mq, sub, offset)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._pull_failed(mq, offset, exc)
                await asyncio.sleep(PULL_DELAY_WHEN_EXCEPTION)
                continue
            if pq.dropped:
                return
            pq.mark_pulled()
            pq, offset = await self._handle(mq, pq, offset, result, started)
            if config.pull_interval:
                await asyncio.sleep(config.pull_interval)

    def held_back(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        """Whether ``mq`` waits before its next pull: its process queue is over a flow-control threshold."""
        return pq.flow_control(orderly=self.config.orderly) is not None

    def passed_filtered(self, mq: MessageQueue, pq: ProcessQueue, next_offset: int) -> None:
        """A pull moved past messages the subscription filtered out: once nothing of ``mq`` is in flight, its
        offset to commit may move there too."""
        if not pq.msg_count:
            self._ctx.offsets.update(mq, next_offset, increase_only=True)

    async def _pull(self, mq: MessageQueue, sub: SubscriptionData, offset: int) -> PullResult:
        config = self.config
        commit_offset = self._ctx.offsets.read(mq) if self._clustering else 0
        flag = pull_sys_flag(commit_offset=commit_offset > 0, suspend=True,
                             subscription=config.post_subscription_when_pull)
        return await self._ctx.api.pull(
            mq, sub, offset, config.pull_batch_size, sys_flag=flag, commit_offset=max(commit_offset, 0),
            suspend_timeout_ms=int(config.long_polling_timeout * 1000), timeout=config.pull_timeout,
            post_subscription=config.post_subscription_when_pull,
        )

    def _pull_failed(self, mq: MessageQueue, offset: int, exc: Exception) -> None:
        instance = self._ctx.api.instance
        if isinstance(exc, ResponseError) and exc.response_code in _UNKNOWN_GROUP_CODES and exc.addr:
            instance.request_heartbeat(exc.addr)
        if isinstance(exc, PocketMQError) and exc.refresh_route:
            instance.refresher.request(mq.topic, publish=False)
        self._ctx.log.warning("pull_failed", topic=mq.topic, broker=mq.broker_name, queue_id=mq.queue_id,
                          offset=offset, error=str(exc) or type(exc).__name__)

    async def _handle(
        self, mq: MessageQueue, pq: ProcessQueue, offset: int, result: PullResult, started: float
    ) -> tuple[ProcessQueue, int]:
        """Act on one pull's answer; returns the process queue and the offset to pull from next."""
        status = result.status
        next_offset = result.next_begin_offset
        if status is PullStatus.FOUND:
            msgs = result.messages
            if msgs:
                if mq.topic == self._retry_topic:  # a queue holds its own topic's messages only
                    restore_retry_topics(msgs, self._ctx.api.group)
                dispatch = pq.put(msgs)
                # Offsets up to next_begin that were not delivered were filtered out (by tag): once the
                # delivered ones are done, the queue's offset may move past them.
                if next_offset - 1 > pq.queue_offset_max:
                    pq.queue_offset_max = next_offset - 1
                self._consume.submit(mq, pq, msgs, dispatch)
            else:
                self.passed_filtered(mq, pq, next_offset)
        elif status is PullStatus.OFFSET_ILLEGAL:
            pq = await self._offset_moved(mq, pq, offset, next_offset)
        else:  # NO_NEW_MSG, NO_MATCHED_MSG: move the committed offset past filtered-out messages
            self.passed_filtered(mq, pq, next_offset)
            if next_offset == offset and time.monotonic() - started < PULL_MIN_EMPTY_ROUND:
                # Answered at once without progress (a slave that will not correct an offset, a full hold
                # service): pause instead of spinning.
                await asyncio.sleep(PULL_MIN_EMPTY_ROUND)
        return pq, next_offset

    async def _offset_moved(self, mq: MessageQueue, pq: ProcessQueue, offset: int, corrected: int) -> ProcessQueue:
        """OFFSET_ILLEGAL: the queue's messages in flight belong to a range the broker no longer has (or
        never had). Drop the process queue (their results are ignored), commit the broker's offset, and go on
        with a fresh process queue from there."""
        self._ctx.log.warning("pull_offset_moved", topic=mq.topic, broker=mq.broker_name, queue_id=mq.queue_id,
                          offset=offset, corrected=corrected)
        pq.dropped = True
        fresh = self.new_process_queue()
        if pq.locked:
            fresh.mark_locked()
        if self.process_queues.get(mq) is pq:
            self.process_queues[mq] = fresh
        self._ctx.offsets.update(mq, corrected)
        await self._ctx.committer.commit_queue(mq)
        return fresh
