"""``ConsumeQueueTable``: every consume queue of a store, by topic and queue id (RocketMQ's
``consumeQueueTable`` with its ``CommitLogDispatcherBuildConsumeQueue``).

It finds and creates queues, loads them at start-up, makes a queue's next file ready before an append (inline,
or in a thread with :meth:`ConsumeQueueTable.ensure_file`), and indexes a record found by recovery or received
by a slave (:meth:`ConsumeQueueTable.dispatch`). The queue-offset table it keeps in step is the commit log's
``topic_queue_table`` (the next queue offset of every queue, which appends read).

The put path reads :attr:`ConsumeQueueTable.queues` itself (two dict lookups per message, no call).

Mapped files are bounded (:attr:`ConsumeQueueTable.max_mapped`, ``maxOpenConsumeQueueFiles``; by default derived from
the process's ``ulimit -n`` and ``vm.max_map_count``): each costs a memory map and two descriptors (ours and the one
``mmap`` keeps), and 10,000 topics of 8 queues would pass both limits if every queue stayed mapped. The table keeps
the queues that have mapped files in :attr:`ConsumeQueueTable.mapped` (oldest first) and:

* releases the queues that were neither written nor read since its previous :meth:`ConsumeQueueTable.sweep` (the
  store sweeps every :data:`RELEASE_IDLE_S`);
* past the bound, releases the least recently used queues (a "clock": a queue used since it was last looked at goes
  to the back once, with its bit cleared) down to :data:`LOW_WATER` of the bound: the clean ones at once, the
  others after a *shrink* has flushed them in the flush thread (a queue of a few units stays unflushed until the
  thorough flush, a minute later). A put or a slave's dispatch that would map past the bound waits for the
  shrink; a mapping that cannot wait (an inline append, a read) may go up to :attr:`ConsumeQueueTable.hard_max`
  (a quarter more) meanwhile;
* past that, refuses with :class:`~pocketmq.store.errors.ConsumeQueueLimitError` (the put answers
  CREATE_MAPEDFILE_FAILED, a read SYSTEM_ERROR), never an ``EMFILE`` or ``ENOMEM`` from deeper down.

At start-up only queues with units are kept: a queue whose only file is empty and starts at 0 is the same as no
queue (its next message opens the file again), so a store of many idle queues costs no memory for them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import resource
from collections.abc import Callable, Iterable, Iterator

from pocketmq.common.logs import get_logger
from pocketmq.common.record import DispatchRequest
from pocketmq.common.sysflag import MessageSysFlag
from pocketmq.common.topic import RMQ_SYS_SCHEDULE_TOPIC, RMQ_SYS_WHEEL_TIMER_TOPIC
from pocketmq.store.commitlog import CommitLog
from pocketmq.store.config import StoreConfig
from pocketmq.store.consume_queue import ConsumeQueue
from pocketmq.store.delay import deliver_time
from pocketmq.store.errors import ConsumeQueueLimitError
from pocketmq.store.mapped_file import MappedFile, MappedFileAllocator, file_name_for, run_flush_plan, wait_shared
from pocketmq.store.timer import timer_out_ms

log = get_logger("pocketmq.store.queue_table")
_TXN_MASK = MessageSysFlag.TRANSACTION_MASK
_TXN_COMMIT = MessageSysFlag.TRANSACTION_COMMIT_TYPE
NOT_READY, DISPATCHED, SKIPPED = 0, 1, 2
"""What :meth:`ConsumeQueueTable.dispatch_ready` did."""
#: Seconds between two sweeps that release the queues not used since the previous one.
RELEASE_IDLE_S = 30.0
#: A release made for room goes down to this fraction of the bound, so that the next ones do not each release.
LOW_WATER = 0.9
#: Files that may be mapped past the bound while a shrink flushes and releases queues (at least; or a quarter).
_HEADROOM_MIN = 64
#: Descriptors and maps left to everything else (connections, commit log, index, libraries) by the default bound.
_OTHER_FILES = 1024
_OTHER_MAPS = 4096
#: The default bound never goes above this (nor below the floor, whatever the limits say).
_AUTO_MAX, _AUTO_MIN = 10_000, 64
#: Where Linux keeps the per-process bound on memory maps.
MAX_MAP_COUNT_PATH = "/proc/sys/vm/max_map_count"


def default_max_mapped() -> int:
    """The bound on mapped consume-queue files when ``maxOpenConsumeQueueFiles`` is 0: a quarter of what
    ``ulimit -n`` leaves after :data:`_OTHER_FILES` (each file costs two descriptors, half of them stay for
    connections) and half of the ``vm.max_map_count`` left after :data:`_OTHER_MAPS`."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    files = (soft - _OTHER_FILES) // 4 if soft != resource.RLIM_INFINITY else _AUTO_MAX
    try:
        with open(MAX_MAP_COUNT_PATH) as f:
            maps = (int(f.read()) - _OTHER_MAPS) // 2
    except (OSError, ValueError):
        maps = _AUTO_MAX
    return max(_AUTO_MIN, min(_AUTO_MAX, files, maps))


def _create_closed(paths: list[str], file_size: int) -> None:
    """Blocking: create each missing file of ``paths`` (sparse) and close it."""
    for path in paths:
        if not os.path.exists(path):
            MappedFile.create(path, file_size).close()


def _run_plans(plans: list[list[tuple[MappedFile, int]]]) -> None:
    for plan in plans:
        run_flush_plan(plan)


def _close_now(files: list[MappedFile]) -> None:
    for mapped in files:
        mapped.close()


def _close_all(files: list[MappedFile]) -> list[MappedFile]:
    """Blocking: close ``files``; those a reader still holds are returned."""
    return [m for m in files if not m.close()]


class ConsumeQueueTable:
    """The consume queues of one store (see the module docstring). ``discard`` destroys files a queue drops
    (through retention once the store runs, so never on the loop)."""

    def __init__(self, config: StoreConfig, commit_log: CommitLog, allocator: MappedFileAllocator,
                 discard: Callable[[list[MappedFile]], None],
                 flush_executor: concurrent.futures.Executor | None = None) -> None:
        self.queues: dict[str, dict[int, ConsumeQueue]] = {}
        self._config = config
        self._commit_log = commit_log
        self._allocator = allocator
        self._discard = discard
        self._delay_levels = config.delay_levels_ms
        #: released queues' files a reader still held when they were closed: tried again at each sweep
        self.unclosed: list[MappedFile] = []
        #: the bound on mapped consume-queue files (module docstring)
        self.max_mapped = config.max_open_consume_queue_files or default_max_mapped()
        #: queues with mapped files, least recently mapped first
        self.mapped: dict[ConsumeQueue, None] = {}
        #: files they map (counted as they map; recounted by each sweep)
        self.mapped_files = 0
        #: queues released so far, to make room and because they were idle
        self.releases = 0
        #: told when the bound is passed and only a shrink (flush, then release) can make room
        self.on_over_bound: Callable[[], None] | None = None
        self._flush_executor = flush_executor
        self._shrinking: asyncio.Future[None] | None = None

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
            cq = queues[queue_id] = self._new_queue(topic, queue_id)
        return cq

    def _new_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        config = self._config
        cq = ConsumeQueue(topic, queue_id, config.consume_queue_dir, config.mapped_file_size_consume_queue,
                          self._allocator, self._discard, window=config.reserve_window_consume_queue,
                          warm=config.warm_mapped_file)
        cq.before_map = self._before_map
        return cq

    # -- the bound on mapped files ---------------------------------------------------------------------------

    @property
    def hard_max(self) -> int:
        """Mapped files past which a mapping is refused (the bound plus room for a shrink under way)."""
        return self.max_mapped + max(_HEADROOM_MIN, self.max_mapped // 4)

    def _before_map(self, cq: ConsumeQueue, count: int) -> None:
        """``cq`` is about to map ``count`` more files: release clean idle queues for room past the bound (and ask
        for a shrink, which flushes the others), or refuse past :attr:`hard_max`."""
        if self.mapped_files + count > self.max_mapped:
            if self._shrinking is None:  # a shrink under way frees room soon: no scan for each mapping meanwhile
                self._release_clean(count, cq)
            if self.mapped_files + count > self.max_mapped and self.on_over_bound is not None:
                self.on_over_bound()
            if self.mapped_files + count > self.hard_max:
                raise ConsumeQueueLimitError(
                    f"{self.mapped_files} consume-queue files are mapped (maxOpenConsumeQueueFiles={self.max_mapped}, "
                    f"at most {self.hard_max} while idle queues are being flushed and released) and none can be "
                    f"released now; cannot map {cq.topic}/{cq.queue_id}. Raise maxOpenConsumeQueueFiles together "
                    "with ulimit -n and vm.max_map_count (each file costs two descriptors and a map).")
        self.mapped.setdefault(cq, None)
        self.mapped_files += count

    def _victims(self, count: int, keep: ConsumeQueue | None) -> list[ConsumeQueue]:
        """Least recently used queues (a clock over :attr:`mapped`: one used since it was last looked at goes to
        the back once, its bit cleared) whose files would bring the count down to :data:`LOW_WATER` of the bound
        with ``count`` more."""
        excess = self.mapped_files + count - int(self.max_mapped * LOW_WATER)
        victims: list[ConsumeQueue] = []
        chosen: set[ConsumeQueue] = set()
        for second_chance in (True, False):
            for cq in list(self.mapped):
                if excess <= 0:
                    return victims
                if cq is keep or cq in chosen:
                    continue
                if second_chance and cq.used:
                    cq.used = False
                    del self.mapped[cq]
                    self.mapped[cq] = None
                    continue
                victims.append(cq)
                chosen.add(cq)
                excess -= len(cq.queue.files)
        return victims

    def _release_clean(self, count: int, keep: ConsumeQueue) -> None:
        closing: list[MappedFile] = []
        for cq in self._victims(count, keep):
            if cq.queue.dirty_bytes() <= 0:
                closing += self._release(cq)
        if closing:
            self.close_files(closing)

    async def shrink(self) -> None:
        """Past the bound: flush (in the flush thread) and release the least recently used queues down to
        :data:`LOW_WATER` of it. One at a time; callers that come meanwhile wait for the one under way."""
        if self._shrinking is not None:
            await asyncio.shield(self._shrinking)
            return
        if self.mapped_files <= self.max_mapped:
            return
        done = self._shrinking = asyncio.get_running_loop().create_future()
        try:
            victims = self._victims(0, None)
            plans = [(cq, *cq.queue.flush_plan()) for cq in victims if cq.queue.dirty_bytes() > 0]
            if plans:
                await asyncio.get_running_loop().run_in_executor(
                    self._flush_executor, _run_plans, [plan for _cq, plan, _target in plans])
                for cq, plan, target in plans:
                    cq.queue.apply_flushed(plan, target)
            closing: list[MappedFile] = []
            for cq in victims:
                if cq in self.mapped:
                    closing += self._release(cq)  # one written meanwhile stays (dirty again)
            if closing:
                self.close_files(closing)
        finally:
            self._shrinking = None
            done.set_result(None)

    async def room_for(self, cq: ConsumeQueue, count: int) -> None:
        """Before an async path maps ``count`` files for ``cq``: past the bound, wait for a shrink first."""
        if self.mapped_files + count > self.max_mapped:
            if self._shrinking is None:
                self._release_clean(count, cq)
            if self.mapped_files + count > self.max_mapped:
                await self.shrink()

    def _release(self, cq: ConsumeQueue) -> list[MappedFile]:
        files = cq.queue.files
        count = len(files)
        released = cq.release() if files else []
        if released is None:
            return []
        del self.mapped[cq]
        self.mapped_files -= count
        self.releases += 1 if count else 0
        return released

    def close_files(self, files: list[MappedFile]) -> None:
        """Close released queues' files: in the flush thread when an event loop runs (unmapping a large map is not
        free), here otherwise (recovery's thread); one a reader still holds is tried again at the next sweep."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.unclosed += _close_all(files)
            return
        loop.run_in_executor(self._flush_executor, _close_all, files).add_done_callback(self._keep_unclosed)

    def _keep_unclosed(self, done: asyncio.Future[list[MappedFile]]) -> None:
        if not done.cancelled() and done.exception() is None:
            self.unclosed += done.result()

    async def release_idle(self) -> None:
        """Every :data:`RELEASE_IDLE_S`, and at once when the bound is passed: release the queues unused since the
        last time, then shrink to the bound if still past it."""
        closing, self.unclosed = self.sweep() + self.unclosed, []
        if closing:
            self.close_files(closing)
        await self.shrink()

    def sweep(self) -> list[MappedFile]:
        """Release the queues neither written nor read since the previous sweep, clear the others' bits, and
        recount the mapped files; returns the files to close (in a thread)."""
        closing: list[MappedFile] = []
        for cq in list(self.mapped):
            if cq.used:
                cq.used = False
            else:
                closing += self._release(cq)
        self.mapped_files = sum(len(cq.queue.files) for cq in self.mapped)
        return closing

    def remove_topic(self, topic: str) -> dict[int, ConsumeQueue] | None:
        """Forget a deleted topic's queues (their files are the caller's to destroy)."""
        queues = self.queues.pop(topic, None)
        for cq in (queues or {}).values():
            if self.mapped.pop(cq, 0) is None:
                self.mapped_files -= len(cq.queue.files)
        return queues

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
        """Open and recover every queue found under the consume-queue directory, keeping those with units (and
        within the bound, the others released at once). Blocking, at start-up."""
        root = self._config.consume_queue_dir
        for topic in sorted(os.listdir(root)):
            topic_dir = os.path.join(root, topic)
            if not os.path.isdir(topic_dir):
                continue
            for name in sorted(os.listdir(topic_dir)):
                if name.isdigit():
                    self._load_queue(topic, int(name))

    def _load_queue(self, topic: str, queue_id: int) -> None:
        cq = self._new_queue(topic, queue_id)
        cq.load()
        files = list(cq.queue.files)
        try:
            cq.recover()
        except BaseException:
            _close_now(files)
            raise
        if cq.max_offset == 0 and cq.queue.min_offset == 0:
            _close_now(cq.queue.files)  # no unit ever: as if the queue did not exist
            return
        self.queues.setdefault(topic, {})[queue_id] = cq
        if self.mapped_files + len(cq.queue.files) > self.max_mapped:
            plan, target = cq.queue.flush_plan()  # what start-up does for every queue; released ones first
            run_flush_plan(plan)
            cq.queue.apply_flushed(plan, target)
            files = cq.release() or []
            _close_now(files)
            self.releases += 1
        else:
            self.mapped[cq] = None
            self.mapped_files += len(cq.queue.files)

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
        file with room (raises OSError). A released queue is mapped again first (past the bound, after a shrink)."""
        cq = self.find_or_create(topic, queue_id)
        if cq.released is not None or not cq.queue.files or cq.queue.files[-1].is_full:
            await self.room_for(cq, len(cq.released.starts) if cq.released is not None else 1)
        cq.restore()
        future = cq.request_file_for(self.next_queue_offset(topic, queue_id))
        if future is not None:
            await wait_shared(future)
            if self.queues.get(topic, {}).get(queue_id) is not cq:  # deleted meanwhile
                return
            cq.prepare(self.next_queue_offset(topic, queue_id))  # takes the file just made
        await cq.wait_room()

    async def create_first_files(self, topic: str, queue_ids: Iterable[int]) -> None:
        """Create the first file of each of ``topic``'s queues that has no queue yet (and starts at offset 0), in
        the allocator's thread, and close it at once: no queue is made, the first message opens the file."""
        config = self._config
        paths = [os.path.join(config.consume_queue_dir, topic, str(queue_id), file_name_for(0))
                 for queue_id in queue_ids if self.find(topic, queue_id) is None
                 and self.next_queue_offset(topic, queue_id) == 0]
        if paths:
            try:
                await self._allocator.run(_create_closed, paths, config.mapped_file_size_consume_queue)
            except OSError as exc:
                log.warning("consume_queue_file_creation_failed", topic=topic, error=str(exc), when="prepared")

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
        if cq.released is not None or not cq.queue.files:
            await self.room_for(cq, len(cq.released.starts) if cq.released is not None else 1)
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
