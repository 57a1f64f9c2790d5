"""The store's two kinds of listener and the lists that hold them.

An *arrival* listener hears of every message indexed in a consume queue (the broker's long polling); a
*growth* listener of every new commit-log end (replication wakes its senders). Both run inside the put (or a
slave's reput), on the event loop: they must be cheap and never block. The put path and the slave's reput
read the lists themselves (an empty list costs one truth test per message) and notify through
:class:`StoreListeners`, which logs and swallows a listener's exception so one bad listener cannot fail a put.
"""

from __future__ import annotations

from collections.abc import Callable

from pocketmq.common.logs import Logger

ArrivalListener = Callable[[str, int, int, int, int], None]
"""(topic, queue id, queue max offset after the new message, tag code, store timestamp)"""
GrowthListener = Callable[[int], None]
"""The commit log's new max offset."""


class StoreListeners:
    """The arrival and growth listeners of one store; ``log`` is the store's bound logger."""

    def __init__(self, log: Logger) -> None:
        self._log = log
        self.arrival: list[ArrivalListener] = []
        self.growth: list[GrowthListener] = []

    def notify_arrival(self, topic: str, queue_id: int, max_offset: int, tags: int, stamp: int) -> None:
        """Call every arrival listener."""
        for listener in self.arrival:
            try:
                listener(topic, queue_id, max_offset, tags, stamp)
            except Exception:
                self._log.exception("arrival_listener_failed", topic=topic, queue_id=queue_id)

    def notify_growth(self, max_offset: int) -> None:
        """Call every growth listener."""
        for listener in self.growth:
            try:
                listener(max_offset)
            except Exception:
                self._log.exception("growth_listener_failed", max_offset=max_offset)
