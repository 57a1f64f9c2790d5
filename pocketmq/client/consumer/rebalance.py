"""The push consumer's rebalance (RocketMQ's ``RebalanceService`` and ``RebalanceImpl``): which queues it
pulls, and, for orderly consumption, the broker locks on them. The lite pull consumer runs the same service
(RocketMQ's ``RebalanceLitePullImpl``), and applies its ``assign`` through it.

Every ``rebalance_interval`` (20 s), and at once when woken (a broker's NOTIFY_CONSUMER_IDS_CHANGED, a
changed route or subscription), every subscribed topic (``%RETRY%<group>`` included) is rebalanced:

* CLUSTERING: all readable queues of the route and all client ids of the group (GET_CONSUMER_LIST_BY_GROUP
  from one broker of the topic) are shared by ``allocate_strategy`` (average allocation,
  :mod:`pocketmq.client.consumer.allocate`); BROADCASTING: every queue is this consumer's;
* a queue taken away stops being pulled (results of its in-flight messages are ignored), its offset is
  committed and, orderly, its lock released once the batch being consumed is done (at most
  :data:`ORDERLY_REMOVE_LOCK_WAIT`);
* a queue added starts at the group's committed offset (QUERY_CONSUMER_OFFSET) or, without one, by
  ``consume_from_where`` (:func:`compute_pull_from_where`); orderly in CLUSTERING, only once this client holds
  the broker's lock on it (LOCK_BATCH_MQ; renewed by :meth:`RebalanceService.lock_all` every 20 s).

A master that comes back is used again within a second or two, not at the next 30 s route poll: the client
instance watches the routes it holds for a group whose master left (:mod:`pocketmq.client.core.route_watch`) and a new
route wakes a rebalance, which takes the group's queues back.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

from pocketmq.client.consumer.allocate import plan_rebalance
from pocketmq.client.consumer.broker_api import subscribe_queues
from pocketmq.client.consumer.context import PushContext
from pocketmq.client.consumer.process_queue import ProcessQueue
from pocketmq.client.consumer.pull_service import PullService
from pocketmq.client.consumer.types import ConsumeFromWhere
from pocketmq.client.core.message import MessageQueue
from pocketmq.common.service import Service
from pocketmq.common.topic import is_retry_topic
from pocketmq.remoting.errors import PocketMQError

__all__ = [
    "DEFAULT_CONSUME_TIMESTAMP_BACK",
    "ORDERLY_REMOVE_LOCK_WAIT",
    "RebalanceService",
    "compute_pull_from_where",
    "consume_timestamp",
]

#: How long a rebalance waits for an orderly queue's consume lock before giving the queue up anyway (s).
ORDERLY_REMOVE_LOCK_WAIT = 1.0
#: Java's default ``consumeTimestamp``: half an hour before the consumer starts (ms).
DEFAULT_CONSUME_TIMESTAMP_BACK = 30 * 60 * 1000


def consume_timestamp(configured: int | None) -> int:
    """The TIMESTAMP start point (epoch ms) of a consumer starting now: ``configured``, else half an hour ago."""
    if configured is not None:
        return configured
    return time.time_ns() // 1_000_000 - DEFAULT_CONSUME_TIMESTAMP_BACK


async def compute_pull_from_where(
    mq: MessageQueue,
    last_offset: int,
    where: ConsumeFromWhere,
    *,
    timestamp_ms: int,
    max_offset: Callable[[MessageQueue], Awaitable[int]],
    search_offset: Callable[[MessageQueue, int], Awaitable[int]],
) -> int:
    """Where a newly assigned queue starts (RocketMQ's ``computePullFromWhere``).

    ``last_offset`` is the group's committed offset (``-1``: none). With none: LAST_OFFSET starts at the
    queue's max offset (retry topics at 0), FIRST_OFFSET at 0, TIMESTAMP at the offset found for
    ``timestamp_ms`` (retry topics at their max offset). Remember that a broker answers QUERY_CONSUMER_OFFSET
    for a new group with 0 while the queue still starts at 0, so on a young queue every
    rule starts at 0.
    """
    if last_offset >= 0:
        return last_offset
    retry = is_retry_topic(mq.topic)
    if where is ConsumeFromWhere.FIRST_OFFSET:
        return 0
    if where is ConsumeFromWhere.TIMESTAMP:
        if retry:
            return await max_offset(mq)
        return await search_offset(mq, timestamp_ms)
    return 0 if retry else await max_offset(mq)


class RebalanceService(Service):
    """Decides the consumer's queues and holds their orderly locks (see the module docstring)."""

    def __init__(
        self, context: PushContext, pulls: PullService, *, consume_timestamp: int, is_running: Callable[[], bool]
    ) -> None:
        super().__init__()
        config = self.config = context.config
        self.name = f"rebalance-{config.group}"
        self._ctx = context
        self._pulls = pulls
        self._consume_timestamp = consume_timestamp
        self._is_running = is_running
        self._orderly_locks = config.orderly and config.clustering
        self._wakeup = asyncio.Event()
        self._lock = asyncio.Lock()
        #: Rebalances done, for monitoring and tests.
        self.count = 0

    def wakeup(self) -> None:
        """Rebalance at once rather than at the next interval."""
        self._wakeup.set()

    async def run(self) -> None:
        wakeup = self._wakeup
        while True:
            wakeup.clear()
            try:
                await self.rebalance()
            except Exception:
                self._ctx.log.exception("rebalance_failed")
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for swallows a cancellation that lands together
            # with the wakeup, and the loop (so Service.stop, so the consumer's shutdown) never ended.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.config.rebalance_interval):
                    await wakeup.wait()

    async def rebalance(self) -> None:
        """Rebalance every subscribed topic now, and give up queues of topics no longer subscribed."""
        async with self._lock:
            self.count += 1
            subscribed = set(self._ctx.subscriptions)
            for topic in list(subscribed):
                try:
                    await self._rebalance_topic(topic)
                except PocketMQError as exc:
                    self._ctx.log.warning("rebalance_topic_failed", topic=topic, error=str(exc))
            for mq in [mq for mq in self._pulls.process_queues if mq.topic not in subscribed]:
                await self.remove_queue(mq)

    async def _rebalance_topic(self, topic: str) -> None:
        instance = self._ctx.api.instance
        route = instance.routes.subscribe_route(topic)
        if route is None:
            instance.refresher.request(topic, publish=False)
            self._ctx.log.debug("rebalance_no_route", topic=topic)
            return
        mq_all = subscribe_queues(topic, route)
        if self.config.clustering:
            cid_all = await self._ctx.api.consumer_id_list(topic)
            if not cid_all:
                self._ctx.log.warning("rebalance_no_consumer_ids", topic=topic)
                return
            allocated = self.config.allocate_strategy(self.config.group, instance.client_id, mq_all, cid_all)
        else:
            allocated = mq_all
        await self.update_process_queues(topic, allocated)

    async def update_process_queues(self, topic: str, allocated: list[MessageQueue]) -> None:
        """Make ``allocated`` the queues of ``topic`` this consumer pulls: the others are removed (their offsets
        committed), the new ones added at their start offset. A lite pull consumer's ``assign`` calls it with the
        queues the application chose."""
        plan = plan_rebalance([mq for mq in self._pulls.process_queues if mq.topic == topic], allocated)
        for mq in plan.removed:
            await self.remove_queue(mq)
        for mq in plan.kept:  # a pull loop that died (it should not) is restarted at its offset
            if not self._pulls.is_pulling(mq):
                await self.remove_queue(mq)
                await self._add_queue(mq)
        added = [mq for mq in plan.added if await self._add_queue(mq)]
        if plan.removed or added:
            self._ctx.log.info("rebalance_changed", topic=topic, added=[q.queue_id for q in added],
                           added_brokers=sorted({q.broker_name for q in added}),
                           removed=[q.queue_id for q in plan.removed], assigned=len(allocated))

    async def _add_queue(self, mq: MessageQueue) -> bool:
        if not self._is_running():
            return False
        pq = self._pulls.new_process_queue()
        if self._orderly_locks and not await self.lock_queue(mq, pq):
            return False  # another consumer still holds it; the next rebalance tries again
        if self.config.clustering:
            self._ctx.offsets.remove(mq)  # whatever we held from an earlier assignment is stale
        offset = await self._start_offset(mq)
        if offset is None or not self._is_running():
            return False
        # Held (and committed with the others) from the start: a restart before the first message resumes
        # here rather than applying consume_from_where again.
        self._ctx.offsets.update(mq, offset, increase_only=True)
        self._pulls.start_pull(mq, pq, offset)
        self._ctx.log.debug("queue_added", topic=mq.topic, broker=mq.broker_name, queue_id=mq.queue_id, offset=offset)
        return True

    async def _start_offset(self, mq: MessageQueue) -> int | None:
        """Where a queue being added starts; ``None`` (its lock released) when that cannot be found now."""
        api = self._ctx.api
        try:
            last = await api.query_consumer_offset(mq) if self.config.clustering else self._ctx.offsets.read(mq)
            return await compute_pull_from_where(
                mq, last, self.config.consume_from_where, timestamp_ms=self._consume_timestamp,
                max_offset=api.max_offset, search_offset=api.search_offset,
            )
        except PocketMQError as exc:
            self._ctx.log.warning("compute_pull_offset_failed", topic=mq.topic, broker=mq.broker_name,
                              queue_id=mq.queue_id, error=str(exc))
            if self._orderly_locks:
                await self._unlock(mq)
            return None

    async def remove_queue(self, mq: MessageQueue) -> None:
        """Stop pulling ``mq``, commit its offset and (orderly) release its lock once its batch is done."""
        pq = await self._pulls.stop_pull(mq)
        if pq is None:
            return
        pq.dropped = True
        if self._orderly_locks:
            await self._release_orderly(mq, pq)
        else:
            await self._ctx.committer.commit_queue(mq)
        if self.config.clustering:
            self._ctx.offsets.remove(mq)
        self._ctx.api.forget_queue(mq)
        self._ctx.log.debug("queue_removed", topic=mq.topic, broker=mq.broker_name, queue_id=mq.queue_id)

    async def _release_orderly(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        """Wait (briefly) for the batch being consumed, so that its offset is committed before the queue's
        lock is released to the next owner."""
        try:
            await asyncio.wait_for(pq.consume_lock.acquire(), ORDERLY_REMOVE_LOCK_WAIT)
        except TimeoutError:
            self._ctx.log.warning("orderly_queue_removed_while_consuming", topic=mq.topic, queue_id=mq.queue_id)
            return
        try:
            await self._ctx.committer.commit_queue(mq)
            await self._unlock(mq)
        finally:
            pq.consume_lock.release()

    # -- orderly locks ----------------------------------------------------------------------------------

    async def lock_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        """Take (or renew) the broker's lock on one queue; marks ``pq`` locked when granted."""
        try:
            locked = await self._ctx.api.lock_batch([mq], self._ctx.api.instance.client_id)
        except PocketMQError as exc:
            self._ctx.log.warning("lock_queue_failed", topic=mq.topic, broker=mq.broker_name, queue_id=mq.queue_id,
                              error=str(exc))
            return False
        if mq in locked:
            pq.mark_locked()
            return True
        pq.locked = False
        return False

    async def lock_all(self) -> None:
        """Renew the locks of every assigned queue, one LOCK_BATCH_MQ per broker group."""
        queues = self._pulls.process_queues
        for broker_name, mqs in self._by_broker().items():
            try:
                locked = await self._ctx.api.lock_batch(mqs, self._ctx.api.instance.client_id)
            except PocketMQError as exc:
                self._ctx.log.warning("lock_batch_failed", broker=broker_name, error=str(exc))
                continue
            for mq in mqs:
                pq = queues.get(mq)
                if pq is None:
                    continue
                if mq in locked:
                    pq.mark_locked()
                else:
                    pq.locked = False

    async def unlock_all(self) -> None:
        """Release every assigned queue's lock (at shutdown), one UNLOCK_BATCH_MQ per broker group."""
        for broker_name, mqs in self._by_broker().items():
            try:
                await self._ctx.api.unlock_batch(mqs, self._ctx.api.instance.client_id)
            except PocketMQError as exc:
                self._ctx.log.warning("unlock_batch_failed", broker=broker_name, error=str(exc))

    async def _unlock(self, mq: MessageQueue) -> None:
        try:
            await self._ctx.api.unlock_batch([mq], self._ctx.api.instance.client_id)
        except PocketMQError as exc:
            self._ctx.log.warning("unlock_queue_failed", topic=mq.topic, queue_id=mq.queue_id, error=str(exc))

    def _by_broker(self) -> dict[str, list[MessageQueue]]:
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in self._pulls.process_queues:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        return by_broker
