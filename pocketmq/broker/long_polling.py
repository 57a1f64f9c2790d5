"""``PullRequestHoldService``: long polling, woken by message arrival rather than a periodic rescan.

A pull that finds nothing and carries the SUSPEND flag is parked here with its deadline. The store's
arrival listener (called on the event loop right after a message is dispatched to its consume queue)
wakes every parked pull of that queue whose offset is now below the queue's max offset and whose tag
filter accepts the new message; a parked pull that nobody wakes is released at its deadline and
re-run once. Parked pulls are bounded; a pull beyond the bound is answered at once.

In controller mode a read stops at the confirm offset (what every in-sync replica holds); a pull that found only
records past it is parked with that record's commit-log offset and woken as soon as the confirm offset passes it
(:meth:`PullRequestHoldService.notify_confirmed`, a heap: nothing scanned per acknowledgement).

A parked SQL92 pull also has a record filter: the arriving message is read back (once per arrival, only when
such a pull waits on its queue) and wakes the pull only if its properties match, so a stream of messages the
consumer does not want never turns its long poll into a string of empty answers.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass

MessageFilter = Callable[[int], bool]
RecordFilter = Callable[[memoryview], bool]
RecordReader = Callable[[str, int, int], "memoryview | None"]
"""(topic, queue id, queue offset) -> the stored record there, or None."""


@dataclass(slots=True)
class HeldPull:
    offset: int
    message_filter: MessageFilter | None
    future: asyncio.Future[bool]
    timer: asyncio.TimerHandle | None = None
    record_filter: RecordFilter | None = None


class PullRequestHoldService:
    def __init__(self, max_held: int = 100_000) -> None:
        self.max_held = max_held
        self._held: dict[tuple[str, int], list[HeldPull]] = {}
        self._count = 0
        self._read_record: RecordReader | None = None
        #: (commit-log offset the pull waits to be confirmed, seq, pull): controller mode's fenced pulls
        self._fenced: list[tuple[int, int, HeldPull]] = []
        self._seq = itertools.count()

    def set_record_reader(self, reader: RecordReader) -> None:
        """How the wake-up reads an arriving message back for a parked pull's record filter."""
        self._read_record = reader

    @property
    def held(self) -> int:
        return self._count

    def has_room(self) -> bool:
        return self._count < self.max_held

    def park(self, topic: str, queue_id: int, offset: int, timeout: float,
             message_filter: MessageFilter | None, record_filter: RecordFilter | None = None,
             fenced_at: int = -1) -> asyncio.Future[bool]:
        """Park a pull at once; the result resolves True when a matching message arrives past ``offset``,
        False when ``timeout`` passes.

        Registration is synchronous on purpose: the pull handler parks in the same loop step in which it read
        nothing, so a message appended by a request handled right after it (even one read from the same socket
        chunk) finds the parked pull and wakes it. Deferring the registration to a coroutine's first step would
        open a window in which such a wake-up is lost and the pull sleeps its whole timeout.
        """
        loop = asyncio.get_running_loop()
        held = HeldPull(offset, message_filter, loop.create_future(), record_filter=record_filter)
        held.timer = loop.call_later(timeout, self._expire, held)
        key = (topic, queue_id)
        self._held.setdefault(key, []).append(held)
        self._count += 1
        held.future.add_done_callback(lambda _: self._release(key, held))
        if fenced_at >= 0:
            heapq.heappush(self._fenced, (fenced_at, next(self._seq), held))
        return held.future

    def notify_confirmed(self, offset: int) -> None:
        """Controller mode: the confirm offset reached ``offset``; wake the pulls that waited for it."""
        fenced = self._fenced
        while fenced and fenced[0][0] < offset:
            held = heapq.heappop(fenced)[2]
            if not held.future.done():
                held.future.set_result(True)

    def notify(self, topic: str, queue_id: int, max_offset: int, tags_code: int, store_timestamp: int) -> None:
        """Store arrival listener: wake the parked pulls this message satisfies."""
        waiting = self._held.get((topic, queue_id))
        if not waiting:
            return
        record: memoryview | None = None
        read = False
        for held in waiting:
            if held.future.done() or held.offset >= max_offset:
                continue
            if held.message_filter is not None and not held.message_filter(tags_code):
                continue
            if held.record_filter is not None:
                if not read:
                    read = True
                    record = self._read_record(topic, queue_id, max_offset - 1) if self._read_record else None
                # A message that cannot be read back wakes the pull: its re-read decides.
                if record is not None and not held.record_filter(record):
                    continue
            held.future.set_result(True)
        if record is not None:
            record.release()

    def _expire(self, held: HeldPull) -> None:
        if not held.future.done():
            held.future.set_result(False)

    def _release(self, key: tuple[str, int], held: HeldPull) -> None:
        """Done callback of every parked pull (woken, expired or cancelled with its request): forget it."""
        if held.timer is not None:
            held.timer.cancel()
        waiting = self._held.get(key)
        if waiting is None:
            return
        try:
            waiting.remove(held)
        except ValueError:
            return
        self._count -= 1
        if not waiting:
            del self._held[key]
