"""``PopLongPollingService``: POP and NOTIFICATION requests that found nothing wait here, beside the pulls of
:mod:`pocketmq.broker.long_polling` (the store calls both arrival listeners).

A parked request is woken (its future resolves True) when a message arrives on its topic (on its queue, or any
queue for queue id -1) that its tag filter takes, when a message arrives on the group's POP retry topic of it,
or when the service is told the group may pop again (a FIFO queue unblocked by an ack or an expiry, a pop that
left messages behind). Otherwise it resolves False at its deadline. The woken request pops again and parks
again if another consumer was faster. Registration is synchronous (see
:meth:`pocketmq.broker.long_polling.PullRequestHoldService.park` for why). Parked requests are bounded in total
(``maxPopPollingSize``) and per (topic, group, queue) (``popPollingSize``); beyond, the request is answered at
once with POLLING_FULL, as RocketMQ does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from pocketmq.common.topic import RETRY_GROUP_TOPIC_PREFIX

MessageFilter = Callable[[int], bool]


@dataclass(slots=True)
class ParkedPop:
    topic: str
    group: str
    queue_id: int
    message_filter: MessageFilter | None
    future: asyncio.Future[bool]
    timer: asyncio.TimerHandle | None = None


class PopLongPollingService:
    def __init__(self, *, max_total: int = 100_000, max_per_queue: int = 1024) -> None:
        self.max_total = max_total
        self.max_per_queue = max_per_queue
        self._by_topic: dict[str, list[ParkedPop]] = {}
        self._count = 0
        #: retry topics seen, mapped back to (topic, group): ``%RETRY%<group>_<topic>`` cannot be split blindly
        self._retry_topics: dict[str, tuple[str, str]] = {}

    @property
    def held(self) -> int:
        return self._count

    def polling_num(self, topic: str, group: str, queue_id: int) -> int:
        return sum(1 for p in self._by_topic.get(topic, ()) if p.group == group and p.queue_id == queue_id)

    def room_for(self, topic: str, group: str, queue_id: int) -> bool:
        """False when a request of this queue would exceed a bound (answer POLLING_FULL)."""
        return self._count < self.max_total and self.polling_num(topic, group, queue_id) < self.max_per_queue

    def park(self, topic: str, group: str, queue_id: int, timeout: float, retry_topic: str,
             message_filter: MessageFilter | None) -> asyncio.Future[bool]:
        """Park a request at once; True when woken, False when ``timeout`` (s) passes."""
        loop = asyncio.get_running_loop()
        parked = ParkedPop(topic, group, queue_id, message_filter, loop.create_future())
        parked.timer = loop.call_later(max(timeout, 0.0), _resolve, parked.future, False)
        self._by_topic.setdefault(topic, []).append(parked)
        if len(self._retry_topics) < self.max_total:
            self._retry_topics[retry_topic] = (topic, group)
        self._count += 1
        parked.future.add_done_callback(lambda _: self._release(parked))
        return parked.future

    def notify(self, topic: str, queue_id: int, max_offset: int, tags_code: int, store_timestamp: int) -> None:
        """Store arrival listener: wake the requests this message may satisfy."""
        waiting = self._by_topic.get(topic)
        if waiting:
            for parked in waiting:
                if parked.queue_id in (-1, queue_id) and (parked.message_filter is None
                                                           or parked.message_filter(tags_code)):
                    _resolve(parked.future, True)
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            origin = self._retry_topics.get(topic)
            if origin is not None:
                self.wake(*origin)

    def wake(self, topic: str, group: str) -> None:
        """The group may find something to pop in ``topic`` now: wake its parked requests."""
        for parked in self._by_topic.get(topic, ()):
            if parked.group == group:
                _resolve(parked.future, True)

    def wake_all(self) -> None:
        """Stopping: answer every parked request now."""
        for waiting in list(self._by_topic.values()):
            for parked in list(waiting):
                _resolve(parked.future, False)

    def _release(self, parked: ParkedPop) -> None:
        if parked.timer is not None:
            parked.timer.cancel()
        waiting = self._by_topic.get(parked.topic)
        if waiting is None:
            return
        try:
            waiting.remove(parked)
        except ValueError:
            return
        self._count -= 1
        if not waiting:
            del self._by_topic[parked.topic]


def _resolve(future: asyncio.Future[bool], value: bool) -> None:
    if not future.done():
        future.set_result(value)
