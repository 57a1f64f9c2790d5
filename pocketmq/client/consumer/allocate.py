"""Queue allocation: which queues of a topic each consumer of a group reads, as pure functions
the rebalance service (:mod:`pocketmq.client.consumer.rebalance`) applies.

Every consumer of a group computes its own share from the same two lists (all queues of the topic, all
client ids of the group), so the strategies must be deterministic and must agree with the Java client in a
mixed group. Both lists are sorted first, with Java's orderings: strings compare by UTF-16 code unit (which
differs from Python's code-point order only for characters beyond U+FFFF) and queues by topic, broker name,
then queue id (``MessageQueue.compareTo``).

``AllocateMessageQueueAveragely`` with ``q`` queues and ``c`` consumers, for the consumer at ``index`` in
the sorted ids: ``mod = q % c``; ``size = 1`` if ``q <= c`` else ``q // c + (1 if index < mod else 0)``;
``start = index * size`` if ``index < mod`` else ``index * size + mod``; it takes the contiguous range
``[start, start + min(size, q - start))``. So the first ``mod`` consumers get one queue more, and when
there are more consumers than queues the last ones get none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from pocketmq.client.core.message import MessageQueue

__all__ = [
    "ALLOCATE_STRATEGIES",
    "AllocateStrategy",
    "RebalancePlan",
    "allocate_averagely",
    "allocate_averagely_by_circle",
    "plan_rebalance",
    "sort_client_ids",
    "sort_queues",
]

#: ``(consumer_group, current_cid, mq_all, cid_all) -> the current consumer's queues``.
AllocateStrategy = Callable[[str, str, Sequence[MessageQueue], Sequence[str]], list[MessageQueue]]


# -- ordering --------------------------------------------------------------------------------------------


def _java_key(text: str) -> bytes:
    """Sort key giving Java's ``String.compareTo`` order: big-endian UTF-16 bytes compare as code units."""
    return text.encode("utf-16-be")


def _queue_key(mq: MessageQueue) -> tuple[bytes, bytes, int]:
    return _java_key(mq.topic), _java_key(mq.broker_name), mq.queue_id


def sort_queues(mq_all: Iterable[MessageQueue]) -> list[MessageQueue]:
    """Queues in Java's ``MessageQueue`` order (topic, broker name, queue id)."""
    return sorted(mq_all, key=_queue_key)


def sort_client_ids(cid_all: Iterable[str]) -> list[str]:
    """Client ids in Java's ``String`` order."""
    return sorted(cid_all, key=_java_key)


# -- strategies ------------------------------------------------------------------------------------------


def _check_cid(current_cid: str) -> None:
    if not current_cid:
        raise ValueError("current_cid is empty")


def allocate_averagely(
    consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> list[MessageQueue]:
    """RocketMQ's ``AllocateMessageQueueAveragely`` (see the module docstring for the rule).

    Returns ``[]`` when ``current_cid`` is not in ``cid_all`` (a heartbeat has not reached the broker yet)
    or there are no queues. ``consumer_group`` is only there to share the strategies' signature.
    """
    _check_cid(current_cid)
    if current_cid not in cid_all or not mq_all:
        return []
    queues = sort_queues(mq_all)
    cids = sort_client_ids(cid_all)
    index = cids.index(current_cid)
    q, c = len(queues), len(cids)
    mod = q % c
    size = 1 if q <= c else q // c + (1 if index < mod else 0)
    start = index * size if index < mod else index * size + mod
    count = min(size, q - start)
    return queues[start : start + count] if count > 0 else []


def allocate_averagely_by_circle(
    consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> list[MessageQueue]:
    """RocketMQ's ``AllocateMessageQueueAveragelyByCircle``: queue ``i`` goes to consumer ``i % c``."""
    _check_cid(current_cid)
    if current_cid not in cid_all or not mq_all:
        return []
    queues = sort_queues(mq_all)
    cids = sort_client_ids(cid_all)
    return queues[cids.index(current_cid) :: len(cids)]


#: By the names Java's strategies report (``getName()``).
ALLOCATE_STRATEGIES: dict[str, AllocateStrategy] = {
    "AVG": allocate_averagely,
    "AVG_BY_CIRCLE": allocate_averagely_by_circle,
}


# -- applying an allocation ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RebalancePlan:
    """How a consumer's queue set changes: stop (and commit) ``removed``, start pulling ``added``."""

    added: tuple[MessageQueue, ...]
    removed: tuple[MessageQueue, ...]
    kept: tuple[MessageQueue, ...]

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed)


def plan_rebalance(current: Iterable[MessageQueue], allocated: Iterable[MessageQueue]) -> RebalancePlan:
    """Compare the queues a consumer has with those just allocated to it (each part in Java order)."""
    have = set(current)
    want = set(allocated)
    return RebalancePlan(
        added=tuple(sort_queues(want - have)),
        removed=tuple(sort_queues(have - want)),
        kept=tuple(sort_queues(have & want)),
    )
