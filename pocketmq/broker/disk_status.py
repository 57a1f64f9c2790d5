"""The broker's view of its disk: which consumer offsets the store's retention reads, and how the store's disk
report (:mod:`pocketmq.store.disk_report`) and its deletions are shown in GET_BROKER_RUNTIME_INFO (``rmq-admin
diskStatus``, ``brokerStatus``) and on ``/metrics``.

Runtime-info keys (strings, as every runtime key is; byte counts are commit-log bytes):

| key | value |
|---|---|
| ``cleanFileForciblyEnable``, ``fileReservedTime`` | the store's settings (hours for the latter) |
| ``commitLogDirTotalBytes``, ``commitLogDirAvailableBytes`` | the store's file system, in bytes |
| ``diskReclaimableExpiredBytes`` | head files older than ``fileReservedTime``: retention deletes them |
| ``diskReclaimableConsumedBytes`` | further head files every group has consumed, kept by ``fileReservedTime`` |
| ``diskHeldBytes`` | the rest, from the oldest unconsumed message on |
| ``diskHeldByTopicGroup`` | ``topic@group=bytes/messages;...``, the 50 largest backlogs, largest first |
| ``diskHolders`` | how many backlogs there are |
| ``diskReportTimestamp`` | ms, the retention run the figures are from |
| ``forcedCleanFiles``, ``forcedCleanBytes`` | since start, what forced cleaning deleted |
| ``forcedCleanDroppedByTopicGroup`` | since start, unconsumed messages it took, ``topic@group=messages;...`` |
| ``expiredDeletedFiles``, ``expiredDeletedBytes``, ``expiredDroppedByTopicGroup`` | the same, time retention |

A group called ``(none)`` is a topic no group has offsets in; ``(schedule)`` is the delay levels' progress.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pocketmq.broker.metadata import ConsumerOffsetManager, DelayOffsets
from pocketmq.common.topic import RMQ_SYS_SCHEDULE_TOPIC
from pocketmq.remoting.metrics import Metrics
from pocketmq.store.disk_report import SCHEDULE_GROUP, DiskReport, Offsets
from pocketmq.store.message_store import MessageStore
from pocketmq.store.retention import Deleted

Sample = tuple[tuple[str, ...], float]
HOLDERS_SHOWN = 50
"""Backlogs listed in the runtime info, oldest first (the count of all is ``diskHolders``); /metrics has all."""


def feed_offsets(store: MessageStore, offsets: ConsumerOffsetManager, delay: DelayOffsets) -> None:
    """Let the store's retention read, at each run, the groups' committed offsets and the delay levels' progress
    in ``SCHEDULE_TOPIC_XXXX`` (level ``n`` is queue ``n - 1``) as :data:`SCHEDULE_GROUP`'s. Call on the loop
    once the store runs (its retention exists)."""
    schedule_key = f"{RMQ_SYS_SCHEDULE_TOPIC}@{SCHEDULE_GROUP}"

    def read() -> Offsets:
        table: dict[str, Mapping[int, int]] = dict(offsets.offset_table)
        if delay.offset_table:
            table[schedule_key] = {level - 1: offset for level, offset in delay.offset_table.items()}
        return table

    if store.retention is not None:
        store.retention.offsets = read


def report_of(store: MessageStore) -> DiskReport | None:
    """What is reclaimable and what holds the rest, as of the store's last retention run (None before it)."""
    return store.retention.report if store.retention is not None else None


def deleted_of(store: MessageStore) -> dict[str, Deleted]:
    """What the store's retention deleted since start, by reason (``expired``, ``forced``)."""
    return store.retention.deleted if store.retention is not None else {}


def _pairs(dropped: Mapping[tuple[str, str], int]) -> str:
    return ";".join(f"{topic}@{group}={count}" for (group, topic), count in sorted(dropped.items()))


def runtime_keys(store: MessageStore) -> dict[str, str]:
    """The disk report's and the deletions' runtime-info keys (see the module docstring)."""
    cfg = store.config
    keys = {"cleanFileForciblyEnable": str(cfg.clean_file_forcibly_enable).lower(),
            "fileReservedTime": f"{cfg.file_reserved_time_hours:g}"}
    disk = store.disk
    if disk is not None:
        keys.update({"commitLogDirTotalBytes": str(disk.total), "commitLogDirAvailableBytes": str(disk.available)})
    report = report_of(store)
    if report is not None:
        keys.update({
            "diskReclaimableExpiredBytes": str(report.expired_bytes),
            "diskReclaimableConsumedBytes": str(report.consumed_bytes),
            "diskHeldBytes": str(report.held_bytes),
            "diskHeldByTopicGroup": ";".join(f"{h.topic}@{h.group}={h.bytes}/{h.messages}"
                                             for h in report.holders[:HOLDERS_SHOWN]),
            "diskHolders": str(len(report.holders)),
            "diskReportTimestamp": str(report.timestamp_ms),
        })
    for reason, deleted in deleted_of(store).items():
        prefix = "forcedClean" if reason == "forced" else "expiredDeleted"
        dropped = "forcedClean" if reason == "forced" else "expired"
        keys.update({f"{prefix}Files": str(deleted.files), f"{prefix}Bytes": str(deleted.bytes),
                     f"{dropped}DroppedByTopicGroup": _pairs(deleted.dropped)})
    return keys


def register_metrics(m: Metrics, store: Callable[[], MessageStore | None]) -> None:
    """Gauges of the disk report and counters-as-gauges of the deletions since start (read at scrape)."""

    def report_samples(read: Callable[[DiskReport], list[Sample]]) -> Callable[[], list[Sample]]:
        def samples() -> list[Sample]:
            s = store()
            report = report_of(s) if s is not None else None
            return read(report) if report is not None else []
        return samples

    def deleted_samples(read: Callable[[str, Deleted], list[Sample]]) -> Callable[[], list[Sample]]:
        def samples() -> list[Sample]:
            s = store()
            return [sample for reason, deleted in (deleted_of(s).items() if s is not None else ())
                    for sample in read(reason, deleted)]
        return samples

    m.gauge("pocketmq_store_disk_reclaimable_bytes", "Commit-log bytes retention can reclaim: expired (older than "
            "fileReservedTime), consumed (every group read them; kept by fileReservedTime)", ["kind"],
            report_samples(lambda r: [(("expired",), r.expired_bytes), (("consumed",), r.consumed_bytes)]))
    m.gauge("pocketmq_store_disk_held_bytes", "Commit-log bytes from the oldest unconsumed message on", [],
            report_samples(lambda r: [((), r.held_bytes)]))
    m.gauge("pocketmq_store_disk_held_by_bytes", "Commit-log bytes each backlog keeps (from the file of its oldest "
            "unconsumed message to the end); group (none): a topic no group consumes", ["topic", "group"],
            report_samples(lambda r: [((h.topic, h.group), h.bytes) for h in r.holders]))
    m.gauge("pocketmq_store_disk_backlog_messages", "Unconsumed messages still stored, by topic and group",
            ["topic", "group"], report_samples(lambda r: [((h.topic, h.group), h.messages) for h in r.holders]))
    m.gauge("pocketmq_store_deleted_files", "Commit-log files retention deleted since start, by reason "
            "(expired: fileReservedTime; forced: cleanFileForciblyEnable)", ["reason"],
            deleted_samples(lambda reason, d: [((reason,), d.files)]))
    m.gauge("pocketmq_store_deleted_bytes", "Commit-log bytes retention deleted since start, by reason", ["reason"],
            deleted_samples(lambda reason, d: [((reason,), d.bytes)]))
    m.gauge("pocketmq_store_deleted_unconsumed_messages", "Unconsumed messages of each group that retention "
            "deleted since start, by reason", ["reason", "topic", "group"],
            deleted_samples(lambda reason, d: [((reason, topic, group), count)
                                               for (group, topic), count in sorted(d.dropped.items())]))


__all__ = ["deleted_of", "feed_offsets", "register_metrics", "report_of", "runtime_keys"]
