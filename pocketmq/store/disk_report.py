"""What a store's disk holds: how much of it retention can reclaim, and which backlogs keep the rest.

Retention frees space only by deleting the commit log's oldest files (their consume-queue and index entries go
with them), so everything here is measured in commit-log bytes (offsets) from the head of the log:

* **expired**: the head files whose last write is older than ``fileReservedTime``. Time-based retention
  deletes them at its next ``deleteWhen`` hour, or at its next run once the disk is above
  ``diskMaxUsedSpaceRatio`` (which a disk that refuses sends always is).
* **consumed**: the head files after those whose every message has been consumed by every consumer group of
  its topic. Deleting them loses nothing anyone still has to read, but ``fileReservedTime`` keeps them (forced
  cleaning, when enabled, would take them first).
* **held**: the rest, from the first file that holds a message some group has not consumed yet (or a message
  of a topic that no group consumes) to the end of the log.

A :class:`Holder` is one backlog: a consumer group's unconsumed messages in one topic (all its queues on this
store), with the commit-log offset of the oldest of them. It keeps ``bytes`` of the log: everything from the
file holding that message to the end, which is what retention could delete if that group caught up and every
other holder were further ahead. A topic no group has offsets in is held by :data:`NO_GROUP`; the delay levels'
progress in ``SCHEDULE_TOPIC_XXXX`` counts as :data:`SCHEDULE_GROUP`'s.

Deletions are accounted the same way (:func:`dropped_messages`): a group's unconsumed messages that a deletion
took are its part of that deletion, reported by :mod:`pocketmq.store.retention`.

Offsets are the broker's (``topic@group -> queue id -> next offset to consume``, consumerOffset.json's table);
a queue a group has no offset for counts from 0, as consume stats count it. Everything here runs on the event
loop; :func:`backlogs` yields to it between slices of queues.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pocketmq.store.consume_queue import ConsumeQueue
from pocketmq.store.mapped_file import MappedFile

NO_GROUP = "(none)"
"""The holder of a topic that no consumer group has offsets in (not a valid group name, so never a real one)."""
SCHEDULE_GROUP = "(schedule)"
"""The delay levels' progress in ``SCHEDULE_TOPIC_XXXX`` (delayOffset.json), reported as a group's offsets."""
QUEUES_PER_SLICE = 512
"""Consume queues looked at between two yields to the event loop (one unit read per group and queue)."""

#: ``topic@group -> queue id -> next queue offset to consume`` (RocketMQ's consumer offset table)
Offsets = Mapping[str, Mapping[int, int]]


@dataclass(frozen=True, slots=True)
class Holder:
    """One group's backlog in one topic on this store."""

    group: str
    topic: str
    messages: int
    """Messages not consumed yet (still stored)."""
    oldest: int
    """Commit-log offset of the oldest of them."""
    bytes: int
    """Commit-log bytes from the start of the file holding ``oldest`` to the end of the log."""


@dataclass(frozen=True, slots=True)
class DiskReport:
    """The commit log's bytes by what would free them (see the module docstring), at one retention run."""

    min_offset: int
    max_offset: int
    expired_bytes: int
    consumed_bytes: int
    held_bytes: int
    holders: tuple[Holder, ...]
    """Largest first (the backlog whose oldest message is oldest)."""
    timestamp_ms: int
    """When the report was made."""

    @property
    def reclaimable_bytes(self) -> int:
        """Expired plus consumed."""
        return self.expired_bytes + self.consumed_bytes


def groups_by_topic(offsets: Offsets) -> dict[str, list[tuple[str, Mapping[int, int]]]]:
    """``topic -> [(group, queue id -> offset)]`` from a ``topic@group`` table."""
    out: dict[str, list[tuple[str, Mapping[int, int]]]] = {}
    for key, queues in list(offsets.items()):
        topic, _, group = key.rpartition("@")
        if topic:
            out.setdefault(topic, []).append((group, queues))
    return out


def _consumers(by_topic: Mapping[str, list[tuple[str, Mapping[int, int]]]], topic: str,
               ) -> list[tuple[str, Mapping[int, int]]]:
    return by_topic.get(topic) or [(NO_GROUP, {})]


async def backlogs(queues: Iterable[ConsumeQueue], offsets: Offsets) -> dict[tuple[str, str], tuple[int, int]]:
    """``(group, topic) -> (messages not consumed, commit-log offset of the oldest)`` over every queue."""
    by_topic = groups_by_topic(offsets)
    out: dict[tuple[str, str], tuple[int, int]] = {}
    for count, cq in enumerate(queues, 1):
        low, high = cq.min_offset, cq.max_offset
        for group, table in _consumers(by_topic, cq.topic) if high > low else ():
            start = max(table.get(cq.queue_id, 0), low)
            unit = cq.get_unit(start) if start < high else None
            if unit is None:
                continue
            messages, oldest = out.get((group, cq.topic), (0, unit[0]))
            out[(group, cq.topic)] = (messages + high - start, min(oldest, unit[0]))
        if count % QUEUES_PER_SLICE == 0:
            await asyncio.sleep(0)
    return out


def make_report(files: Sequence[MappedFile], expired_files: int, found: Mapping[tuple[str, str], tuple[int, int]],
                max_offset: int, timestamp_ms: int) -> DiskReport:
    """Classify the log's head files: the first ``expired_files`` are expired; then those that end before every
    backlog's oldest message are consumed; the rest is held."""
    min_offset = files[0].file_from_offset if files else 0
    file_size = files[0].file_size if files else 1
    holders = sorted((Holder(group, topic, messages, oldest, max_offset - (oldest - oldest % file_size))
                      for (group, topic), (messages, oldest) in found.items()),
                     key=lambda h: (h.oldest, h.group, h.topic))
    first_unconsumed = holders[0].oldest if holders else max_offset
    head = files[:-1]  # never the file being written
    expired_end = head[expired_files - 1].file_end_offset if 0 < expired_files <= len(head) else min_offset
    consumed_end = expired_end
    for mapped in head[expired_files:]:
        if mapped.file_end_offset > first_unconsumed:
            break
        consumed_end = mapped.file_end_offset
    return DiskReport(min_offset, max_offset, expired_end - min_offset, consumed_end - expired_end,
                      max(0, max_offset - consumed_end), tuple(holders), timestamp_ms)


def count_expired(files: Sequence[MappedFile], expired_before: float) -> int:
    """How many of ``files`` (head first) were last written before ``expired_before``, up to the first that was
    not (retention deletes from the head only). Blocking (a stat per file)."""
    count = 0
    for mapped in files:
        if mapped.last_modified() > expired_before:
            break
        count += 1
    return count


def dropped_messages(before: Mapping[ConsumeQueue, int], offsets: Offsets) -> dict[tuple[str, str], int]:
    """``(group, topic) -> unconsumed messages`` a deletion took: ``before`` is each queue's min offset before
    it, the queues' min offsets now are after it (units below them are gone)."""
    by_topic = groups_by_topic(offsets)
    out: dict[tuple[str, str], int] = {}
    for cq, low in before.items():
        high = cq.min_offset
        if high <= low:
            continue
        for group, table in _consumers(by_topic, cq.topic):
            lost = high - max(table.get(cq.queue_id, 0), low)
            if lost > 0:
                out[(group, cq.topic)] = out.get((group, cq.topic), 0) + lost
    return out
