"""``ConsumeQueueTable``: every consume queue of a store, by topic and queue id (RocketMQ's
``consumeQueueTable`` with its ``CommitLogDispatcherBuildConsumeQueue``).

It finds and creates queues, loads them at start-up, makes a queue's next file ready before an append (inline,
or in a thread with :meth:`ConsumeQueueTable.ensure_file`), and indexes a record found by recovery or received
by a slave (:meth:`ConsumeQueueTable.dispatch`). The queue-offset table it keeps in step is the commit log's
``topic_queue_table`` (the next queue offset of every queue, which appends read).

The put path reads :attr:`ConsumeQueueTable.queues` itself (two dict lookups per message, no call).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

from pocketmq.common.record import DispatchRequest
from pocketmq.common.sysflag import MessageSysFlag
from pocketmq.common.topic import RMQ_SYS_SCHEDULE_TOPIC, RMQ_SYS_WHEEL_TIMER_TOPIC
from pocketmq.store.commitlog import CommitLog
from pocketmq.store.config import StoreConfig
from pocketmq.store.consume_queue import ConsumeQueue
from pocketmq.store.delay import deliver_time
from pocketmq.store.mapped_file import MappedFile, MappedFileAllocator, wait_shared
from pocketmq.store.timer import timer_out_ms

_TXN_MASK = MessageSysFlag.TRANSACTION_MASK
_TXN_COMMIT = MessageSysFlag.TRANSACTION_COMMIT_TYPE
NOT_READY, DISPATCHED, SKIPPED = 0, 1, 2
"""What :meth:`ConsumeQueueTable.dispatch_ready` did."""


class ConsumeQueueTable:
    """The consume queues of one store (see the module docstring). ``discard`` destroys files a queue drops
    (through retention once the store runs, so never on the loop)."""

    def __init__(self, config: StoreConfig, commit_log: CommitLog, allocator: MappedFileAllocator,
                 discard: Callable[[list[MappedFile]], None]) -> None:
        self.queues: dict[str, dict[int, ConsumeQueue]] = {}
        self._config = config
        self._commit_log = commit_log
        self._allocator = allocator
        self._discard = discard
        self._delay_levels = config.delay_levels_ms

    def find(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        """The consume queue of a topic queue, if it has ever had a message."""
        queues = self.queues.get(topic)
        return queues.get(queue_id) if queues else None

    def find_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        """The consume queue of a topic queue, created (with no file yet) when it has none."""
        queues = self.queues.get(topic)
        if queues is None:
            queues = self.queues[topic] = {}
        cq = queues.get(queue_id)
        if cq is None:
            config = self._config
            cq = queues[queue_id] = ConsumeQueue(topic, queue_id, config.consume_queue_dir,
                                                 config.mapped_file_size_consume_queue, self._allocator,
                                                 self._discard, window=config.reserve_window_consume_queue,
                                                 warm=config.warm_mapped_file)
        return cq

    def __iter__(self) -> Iterator[ConsumeQueue]:
        """Every consume queue (a snapshot: the table may change while the caller iterates)."""
        for queues in list(self.queues.values()):
            yield from list(queues.values())

    def count(self) -> int:
        """How many consume queues there are."""
        return sum(len(q) for q in self.queues.values())

    def topics(self) -> dict[str, list[int]]:
        """Topics with consume queues and their queue ids."""
        return {topic: sorted(queues) for topic, queues in self.queues.items()}

    def load(self) -> None:
        """Open and recover every queue found under the consume-queue directory (blocking, at start-up)."""
        root = self._config.consume_queue_dir
        for topic in sorted(os.listdir(root)):
            topic_dir = os.path.join(root, topic)
            if not os.path.isdir(topic_dir):
                continue
            for name in sorted(os.listdir(topic_dir)):
                if not name.isdigit():
                    continue
                cq = self.find_or_create(topic, int(name))
                cq.load()
                cq.recover()

    def next_queue_offset(self, topic: str, queue_id: int) -> int:
        """The queue offset the next message of the queue gets."""
        queues = self._commit_log.topic_queue_table.get(topic)
        return queues.get(queue_id, 0) if queues else 0

    def is_ready(self, topic: str, queue_id: int) -> bool:
        """True when the queue's next unit has reserved room in a file (an append will create and reserve
        nothing). Never blocks."""
        queues = self.queues.get(topic)
        cq = queues.get(queue_id) if queues is not None else None
        return cq is not None and cq.has_room()

    def ready(self, topic: str, queue_id: int) -> ConsumeQueue:
        """The consume queue with a file and reserved room for its next unit, created and reserved inline
        if needed (raises OSError)."""
        queues = self.queues.get(topic)
        cq = queues.get(queue_id) if queues is not None else None
        if cq is None:
            cq = self.find_or_create(topic, queue_id)
        if not cq.has_room():
            tail = cq.tail
            if tail is None or tail.wrote_position >= cq.file_size:
                cq.prepare(self.next_queue_offset(topic, queue_id))
            cq.reserve_now()
        return cq

    async def ensure_file(self, topic: str, queue_id: int) -> None:
        """Create the queue's next consume-queue file and reserve room in it, in threads, unless it has a
        file with room (raises OSError)."""
        cq = self.find_or_create(topic, queue_id)
        future = cq.request_file_for(self.next_queue_offset(topic, queue_id))
        if future is not None:
            await wait_shared(future)
            if self.queues.get(topic, {}).get(queue_id) is not cq:  # deleted meanwhile
                return
            cq.prepare(self.next_queue_offset(topic, queue_id))  # takes the file just made
        await cq.wait_room()

    def can_dispatch(self, request: DispatchRequest) -> bool:
        """True when :meth:`dispatch` of ``request`` will neither create a file nor reserve in the caller's
        thread (see ``ConsumeQueue.can_put``). Never blocks."""
        txn = request.sys_flag & _TXN_MASK
        if txn and txn != _TXN_COMMIT:
            return True
        queues = self.queues.get(request.topic)
        cq = queues.get(request.queue_id) if queues is not None else None
        return cq is not None and cq.can_put(request.consume_queue_offset)

    async def prepare_dispatch(self, request: DispatchRequest) -> None:
        """Make :meth:`can_dispatch` true for ``request``: its queue's file created and its unit's room
        reserved, in the allocation thread (raises OSError)."""
        cq = self.find_or_create(request.topic, request.queue_id)
        await cq.prepare_unit(request.consume_queue_offset)

    def dispatch(self, request: DispatchRequest) -> bool:
        """Index a record found by recovery or received by a slave (idempotent); False for the halves of a
        transaction that get no consume-queue entry."""
        return self.dispatch_ready(request, True) == DISPATCHED

    def dispatch_ready(self, request: DispatchRequest, inline: bool) -> int:
        """:meth:`can_dispatch` and :meth:`dispatch` in one step, for a slave's reput (one lookup, and the unit
        written by ``ConsumeQueue.try_put`` when it is the usual next one): :data:`NOT_READY` (nothing done:
        the record needs a file or room first, unless ``inline``), :data:`DISPATCHED`, or :data:`SKIPPED` (a
        transaction half that gets no unit)."""
        topic, queue_id, phys, size, tags, stamp, queue_offset, sys_flag, delay_level = request
        txn = sys_flag & _TXN_MASK
        if txn and txn != _TXN_COMMIT:
            return SKIPPED
        if topic == RMQ_SYS_SCHEDULE_TOPIC:
            tags = deliver_time(self._delay_levels, delay_level or queue_id + 1, stamp)
        elif topic == RMQ_SYS_WHEEL_TIMER_TOPIC:
            tags = self._timer_due(phys, size)
        queues = self.queues.get(topic)
        cq = queues.get(queue_id) if queues is not None else None
        if cq is None or not cq.try_put(queue_offset, phys, size, tags):
            if not inline and (cq is None or not cq.can_put(queue_offset)):
                return NOT_READY
            if cq is None:
                cq = self.find_or_create(topic, queue_id)
            cq.put(queue_offset, phys, size, tags)
        offsets = self._commit_log.topic_queue_table.get(topic)
        if offsets is None:
            offsets = self._commit_log.topic_queue_table[topic] = {}
        if offsets.get(queue_id, 0) <= queue_offset:
            offsets[queue_id] = queue_offset + 1
        return DISPATCHED

    def _timer_due(self, phys: int, size: int) -> int:
        """A timer record's tag code: its ``TIMER_OUT_MS`` (the master computed it from a relative delay, so
        it is read back, not recomputed)."""
        record = self._commit_log.look_message(phys, size)
        return timer_out_ms(record.properties) if record is not None else 0

    def truncate(self, offset: int) -> list[MappedFile]:
        """Drop the units of the records at or after commit-log ``offset`` (a slave's log cut back to its
        master's, at a record start) and put the queue-offset table back; returns the files that left the
        queues, for the caller to destroy in a thread. The cut tails are zeroed."""
        removed: list[MappedFile] = []
        table = self._commit_log.topic_queue_table
        for cq in self:
            before = cq.max_offset
            cq.truncate_by_physical_offset(offset, removed.extend)
            if cq.max_offset != before:
                table.setdefault(cq.topic, {})[cq.queue_id] = cq.max_offset
        return removed
