"""The client's view of one assigned queue: messages pulled but not yet acknowledged (``ProcessQueue``).

Concurrent consumption. Handlers finish in any order, but the committed offset must never pass a message
still being processed, or a crash would lose it. :meth:`ProcessQueue.remove` therefore answers the offset
to commit: the lowest queue offset still in flight, or one past the highest offset ever put when nothing
is left (at-least-once: a crash re-delivers what was in flight, never skips it).

Flow control. The pull loop stops pulling a queue for a moment while it holds more than
``pull_threshold_for_queue`` messages (1000) or ``pull_threshold_size_for_queue`` body bytes (100 MiB), or,
for concurrent consumption, while the offsets in flight span more than ``consume_concurrently_max_span``
(2000): one stuck message must not let the queue run arbitrarily far ahead of its committed offset.

Orderly consumption. One task per queue takes messages in offset order (:meth:`take_messages`), then
either :meth:`commit` (all taken messages done: commit one past the last) or
:meth:`make_message_to_consume_again` (put them back to be taken again after a pause). A consumer may only
do this while it holds the broker's lock on the queue: ``locked`` with a ``last_lock_timestamp`` renewed
every 20 s; a lock not renewed within 30 s counts as expired.

The messages are kept in a dict by offset plus a sorted list of offsets with lazy deletion: pulls put
offsets in increasing order (an append), completions delete from the dict only, and the first and last
live offsets are found by skipping dead entries at either end, so every operation is amortised O(1) on
the common path. The list is compacted when dead entries outnumber live ones.
"""

from __future__ import annotations

import asyncio
import enum
import operator
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable

from pocketmq.client.consumer.types import (
    CONSUME_CONCURRENTLY_MAX_SPAN,
    PULL_THRESHOLD_FOR_QUEUE,
    PULL_THRESHOLD_SIZE_FOR_QUEUE,
)
from pocketmq.client.core.message_ext import MessageExt
from pocketmq.common.message import MessageConst

__all__ = [
    "PULL_MAX_IDLE_TIME",
    "REBALANCE_LOCK_INTERVAL",
    "REBALANCE_LOCK_MAX_LIVE_TIME",
    "FlowControl",
    "ProcessQueue",
]

#: A lock on a queue not renewed for this long (s) is treated as lost.
REBALANCE_LOCK_MAX_LIVE_TIME = 30.0
#: How often (s) an orderly consumer renews its queue locks.
REBALANCE_LOCK_INTERVAL = 20.0
#: A queue not pulled for this long (s) is considered stuck; rebalance drops and re-creates it.
PULL_MAX_IDLE_TIME = 120.0

#: Dead offsets kept at the head of the list before it is compacted (amortises the slice).
_COMPACT_MIN = 64

Clock = Callable[[], float]

_QUEUE_OFFSET = operator.attrgetter("queue_offset")
_BODY = operator.attrgetter("body")


class FlowControl(enum.Enum):
    """Why the pull loop should wait before pulling a queue again."""

    COUNT = "cached message count over pull_threshold_for_queue"
    SIZE = "cached message size over pull_threshold_size_for_queue"
    SPAN = "offset span over consume_concurrently_max_span"


class ProcessQueue:
    """Pulled-but-unacknowledged messages of one queue, ordered by queue offset.

    Not thread-safe: use it from the event loop. ``clock`` returns seconds (monotonic) and is used for the
    pull, consume and lock timestamps.
    """

    __slots__ = (
        "_clock",
        "_consuming",
        "_head",
        "_messages",
        "_offsets",
        "consume_concurrently_max_span",
        "consume_lock",
        "consuming",
        "dropped",
        "last_consume_timestamp",
        "last_lock_timestamp",
        "last_pull_timestamp",
        "locked",
        "msg_acc_cnt",
        "msg_count",
        "msg_size",
        "pull_threshold_for_queue",
        "pull_threshold_size_for_queue",
        "queue_offset_max",
        "try_unlock_times",
    )

    def __init__(
        self,
        *,
        pull_threshold_for_queue: int = PULL_THRESHOLD_FOR_QUEUE,
        pull_threshold_size_for_queue: int = PULL_THRESHOLD_SIZE_FOR_QUEUE,
        consume_concurrently_max_span: int = CONSUME_CONCURRENTLY_MAX_SPAN,
        clock: Clock = time.monotonic,
    ) -> None:
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.pull_threshold_size_for_queue = pull_threshold_size_for_queue
        self.consume_concurrently_max_span = consume_concurrently_max_span
        self._clock = clock
        self._messages: dict[int, MessageExt] = {}
        self._offsets: list[int] = []  # sorted; may hold offsets no longer in _messages
        self._head = 0  # _offsets[:_head] are all dead
        self._consuming: dict[int, MessageExt] = {}  # orderly: taken, not yet committed (offset order)
        self.msg_count = 0  # messages held, including those taken by an orderly consumer
        self.msg_size = 0  # their body bytes
        self.queue_offset_max = -1  # highest offset ever put
        self.msg_acc_cnt = 0  # messages left on the broker after the last put (MAX_OFFSET - last offset)
        self.dropped = False
        self.consuming = False  # orderly: a consume task is scheduled for this queue
        self.locked = False
        self.try_unlock_times = 0
        now = clock()
        self.last_pull_timestamp = now
        self.last_consume_timestamp = now
        self.last_lock_timestamp = now
        #: Orderly: held while a batch is consumed, and by rebalance before it unlocks the queue.
        self.consume_lock = asyncio.Lock()

    # -- offsets -----------------------------------------------------------------------------------------

    def _first_offset(self) -> int | None:
        offsets, messages = self._offsets, self._messages
        head = self._head
        while head < len(offsets) and offsets[head] not in messages:
            head += 1
        if head >= _COMPACT_MIN and head * 2 >= len(offsets):
            del offsets[:head]
            head = 0
        self._head = head
        return offsets[head] if head < len(offsets) else None

    def _last_offset(self) -> int | None:
        offsets, messages = self._offsets, self._messages
        while len(offsets) > self._head and offsets[-1] not in messages:
            offsets.pop()
        return offsets[-1] if len(offsets) > self._head else None

    def _index_offset(self, offset: int) -> None:
        """Add a newly live offset to the sorted list (an append in the common, in-order case)."""
        offsets = self._offsets
        if not offsets or offset > offsets[-1]:
            offsets.append(offset)
            return
        at = bisect_left(offsets, offset)
        if at == len(offsets) or offsets[at] != offset:
            offsets.insert(at, offset)
        if at < self._head:
            self._head = at

    def _maybe_compact(self) -> None:
        """Rebuild the offset list when dead entries (e.g. behind one stuck message) outnumber live ones."""
        if len(self._offsets) - self._head > 2 * len(self._messages) + _COMPACT_MIN:
            self._offsets = sorted(self._messages)  # keys arrive almost sorted: timsort is near linear
            self._head = 0

    # -- concurrent consumption --------------------------------------------------------------------------

    def put(self, messages: Iterable[MessageExt]) -> bool:
        """Hold newly pulled messages. Returns whether an orderly consume task should be started (there are
        messages and none is running; ``consuming`` is then set)."""
        batch = messages if type(messages) is list else list(messages)
        if batch:
            offsets = list(map(_QUEUE_OFFSET, batch))
            if offsets[0] > self.queue_offset_max and all(map(operator.lt, offsets, offsets[1:])):
                self._put_new(batch, offsets)
            else:
                self._put_each(batch)
            self._maybe_compact()
            max_offset = batch[-1].get_property(MessageConst.PROPERTY_MAX_OFFSET)
            if max_offset is not None and max_offset.lstrip("-").isdigit():
                self.msg_acc_cnt = max(0, int(max_offset) - batch[-1].queue_offset)
        if self._messages and not self.consuming:
            self.consuming = True
            return True
        return False

    def _put_new(self, batch: list[MessageExt], offsets: list[int]) -> None:
        """A pull's messages, all past every offset held and in increasing order (the common case): one
        dict update and one list extend, no Python step per message."""
        self._messages.update(zip(offsets, batch, strict=True))
        self._offsets.extend(offsets)
        self.msg_count += len(batch)
        self.msg_size += sum(map(len, map(_BODY, batch)))
        self.queue_offset_max = offsets[-1]

    def _put_each(self, batch: list[MessageExt]) -> None:
        """Messages in any order, re-pulled ones among them (counted once)."""
        held = self._messages
        added = 0
        for message in batch:
            offset = message.queue_offset
            if offset in held:
                held[offset] = message  # a re-pulled duplicate: same message, counted once
                continue
            held[offset] = message
            self._index_offset(offset)
            added += 1
            self.msg_size += len(message.body)
            if offset > self.queue_offset_max:
                self.queue_offset_max = offset
        self.msg_count += added

    def remove(self, messages: Iterable[MessageExt]) -> int:
        """Forget messages whose handling finished; return the offset that is now safe to commit.

        That is the lowest offset still held, or ``queue_offset_max + 1`` when none is. Returns ``-1`` when
        nothing was held at all (nothing to commit). Unknown messages are ignored, so a message removed
        twice is not counted twice.
        """
        self.last_consume_timestamp = self._clock()
        held = self._messages
        if not held:
            return -1
        count = size = 0
        for message in messages:
            gone = held.pop(message.queue_offset, None)
            if gone is not None:
                count += 1
                size += len(gone.body)
        self.msg_count -= count
        self.msg_size -= size
        first = self._first_offset()
        return self.queue_offset_max + 1 if first is None else first

    @property
    def max_span(self) -> int:
        """Highest minus lowest offset held (0 when empty or one message)."""
        first = self._first_offset()
        if first is None:
            return 0
        last = self._last_offset()
        return 0 if last is None else last - first

    @property
    def min_offset(self) -> int | None:
        """The lowest offset held (not counting messages an orderly consumer has taken)."""
        return self._first_offset()

    def is_over_threshold(self) -> bool:
        """Whether the queue holds more messages or bytes than the pull thresholds allow."""
        return self.msg_count > self.pull_threshold_for_queue or self.msg_size > self.pull_threshold_size_for_queue

    def flow_control(self, *, orderly: bool = False) -> FlowControl | None:
        """Why pulling should wait now, or ``None``. The span rule applies to concurrent consumption only."""
        if self.msg_count > self.pull_threshold_for_queue:
            return FlowControl.COUNT
        if self.msg_size > self.pull_threshold_size_for_queue:
            return FlowControl.SIZE
        if not orderly and self.max_span > self.consume_concurrently_max_span:
            return FlowControl.SPAN
        return None

    def messages(self) -> list[MessageExt]:
        """The held messages in offset order (not those taken by an orderly consumer)."""
        first = self._first_offset()
        if first is None:
            return []
        held = self._messages
        return [held[offset] for offset in self._offsets[self._head :] if offset in held]

    def __len__(self) -> int:
        return self.msg_count

    def clear(self) -> None:
        """Forget everything (the queue was dropped or its offset reset)."""
        self._messages.clear()
        self._offsets.clear()
        self._head = 0
        self._consuming.clear()
        self.msg_count = 0
        self.msg_size = 0
        self.queue_offset_max = -1
        self.msg_acc_cnt = 0

    # -- orderly consumption -----------------------------------------------------------------------------

    def take_messages(self, batch_size: int) -> list[MessageExt]:
        """Take up to ``batch_size`` messages in offset order for an orderly consumer.

        They stay counted (flow control) until :meth:`commit`. When nothing is left, ``consuming`` is
        cleared so that the next :meth:`put` asks for a new consume task.
        """
        self.last_consume_timestamp = self._clock()
        taken: list[MessageExt] = []
        held = self._messages
        while len(taken) < batch_size:
            first = self._first_offset()
            if first is None:
                break
            message = held.pop(first)
            self._consuming[first] = message
            taken.append(message)
        if not taken:
            self.consuming = False
        return taken

    def has_temp_messages(self) -> bool:
        """Whether messages are held that nobody has taken yet."""
        return bool(self._messages)

    def commit(self) -> int:
        """All taken messages are done: drop them and return the offset to commit (one past the highest
        taken), or ``-1`` when nothing was taken."""
        consuming = self._consuming
        if not consuming:
            return -1
        last = max(consuming)
        self.msg_count -= len(consuming)
        self.msg_size -= sum(len(message.body) for message in consuming.values())
        consuming.clear()
        return last + 1

    def make_message_to_consume_again(self, messages: Iterable[MessageExt]) -> None:
        """Put taken messages back, to be taken again in order (the handler asked for a pause)."""
        for message in messages:
            offset = message.queue_offset
            if self._consuming.pop(offset, None) is not None:
                self._messages[offset] = message
                self._index_offset(offset)
        self._maybe_compact()

    def rollback(self) -> None:
        """Put every taken message back (Java's deprecated ``ROLLBACK``)."""
        self.make_message_to_consume_again(list(self._consuming.values()))

    # -- timestamps and locks ----------------------------------------------------------------------------

    def mark_pulled(self) -> None:
        self.last_pull_timestamp = self._clock()

    def mark_locked(self) -> None:
        """The broker granted or renewed the lock on this queue."""
        self.locked = True
        self.last_lock_timestamp = self._clock()

    def is_lock_expired(self) -> bool:
        return self._clock() - self.last_lock_timestamp > REBALANCE_LOCK_MAX_LIVE_TIME

    def is_pull_expired(self) -> bool:
        return self._clock() - self.last_pull_timestamp > PULL_MAX_IDLE_TIME

    def __repr__(self) -> str:
        return (
            f"ProcessQueue(count={self.msg_count}, size={self.msg_size}, max_offset={self.queue_offset_max}, "
            f"dropped={self.dropped}, locked={self.locked})"
        )
