"""The checkers: pure functions of a :class:`~pocketmq.chaos.events.History`, each returning a small JSON-able dict.

* :func:`check_loss` — acknowledged (SEND_OK) ids readable on no member of any group; the same among
  stored-but-not-OK statuses; ids readable although their send failed (an application retrying those stores
  a duplicate).
* :func:`check_duplicates` — ids at more than one position of the logs (a position is group, queue,
  offset; a master and its slave holding the same position count once), and deliveries: ids delivered more
  than once, and the part of those that were the same position delivered again (redelivery).
* :func:`check_delivery` — readable but never delivered, delivered but readable nowhere.
* :func:`check_consistency` — one queue offset holding different ids on a master and its slave, or delivered
  with different ids (two consumers, or one consumer twice, seeing one position differently).
* :func:`check_order` — within one stream (one message in flight at a time) and one queue, ids must sit at
  increasing offsets in the order they were sent; deliveries of one queue to one consumer going backwards
  are counted too (a redelivery does that; it is reported, not a failure).
* :func:`check_availability` — per fault, the longest time without a SEND_OK while it lasted, and how long
  after it healed the first SEND_OK came; the longest gap of the whole run.
* :func:`check_latency` — end-to-end latency (send start to first delivery) percentiles per time bucket.
* :func:`check_pop` — acknowledged ids the POP consumer group never received (lost to it), and how many
  deliveries were repeats (a message whose ack a crash lost, or whose invisible time ran out, comes back).
* :func:`check_timers` — acknowledged timer messages never delivered (lost), delivered before their due time
  (early), and the lateness percentiles of the rest (stored in their topic minus due, ms).

Positions are read from the master when it could be read and from the slave otherwise.
"""

from __future__ import annotations

import itertools
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from pocketmq.chaos.events import (
    SEND_OK,
    STORED_NOT_OK,
    Delivery,
    FaultEvent,
    History,
    SendEvent,
    StoredRecord,
    parse_id,
)

__all__ = ["check_all", "check_availability", "check_consistency", "check_delivery", "check_duplicates",
           "check_latency", "check_loss", "check_order", "check_pop", "check_timers", "percentile"]

#: How many example ids a checker lists (the counts are complete).
EXAMPLES = 5
Position = tuple[str, int, int]  # broker group, queue id, queue offset


def _examples(ids: Iterable[Any]) -> list[Any]:
    return sorted(ids)[:EXAMPLES]


def readable_ids(stored: Iterable[StoredRecord]) -> set[str]:
    return {r.msg_id for r in stored}


def positions(stored: Iterable[StoredRecord]) -> dict[Position, str]:
    """Position -> id, the master's view where it has the position, else a slave's."""
    out: dict[Position, str] = {}
    for r in sorted(stored, key=lambda r: not r.is_master):  # masters first: they win
        out.setdefault((r.broker, r.queue_id, r.queue_offset), r.msg_id)
    return out


def last_send(sends: Iterable[SendEvent]) -> dict[str, SendEvent]:
    """Id -> its send (an id is sent once; the last one wins if a history says otherwise)."""
    return {s.msg_id: s for s in sends}


def check_loss(history: History) -> dict[str, Any]:
    readable = readable_ids(history.stored)
    sends = last_send(history.sends)
    acked = {i for i, s in sends.items() if s.status == SEND_OK}
    stored_not_ok = {i for i, s in sends.items() if s.status in STORED_NOT_OK}
    failed = {i for i, s in sends.items() if s.failed}
    lost = acked - readable
    lost_not_ok = stored_not_ok - readable
    stored_failed = failed & readable
    diverged = acked & only_on_diverged_slaves(history.stored)
    return {"attempted": len(sends), "acknowledged": len(acked), "stored_not_ok": len(stored_not_ok),
            "failed": len(failed), "lost": len(lost), "lost_examples": _examples(lost),
            "lost_stored_not_ok": len(lost_not_ok), "lost_stored_not_ok_examples": _examples(lost_not_ok),
            "stored_although_failed": len(stored_failed), "stored_although_failed_examples": _examples(stored_failed),
            "acked_only_on_diverged_slave": len(diverged), "diverged_examples": _examples(diverged)}


def only_on_diverged_slaves(stored: Iterable[StoredRecord]) -> set[str]:
    """Ids no master holds that a slave holds only at positions where its master holds another id: readable
    nowhere a consumer of the master would look (the master lost them, then reused their offsets)."""
    masters: dict[Position, str] = {}
    on_master: set[str] = set()
    slave_copies: dict[str, list[Position]] = defaultdict(list)
    for r in stored:
        pos = (r.broker, r.queue_id, r.queue_offset)
        if r.is_master:
            masters[pos] = r.msg_id
            on_master.add(r.msg_id)
        else:
            slave_copies[r.msg_id].append(pos)
    return {i for i, where in slave_copies.items()
            if i not in on_master and all(p in masters and masters[p] != i for p in where)}


def check_duplicates(history: History) -> dict[str, Any]:
    where: dict[str, set[Position]] = defaultdict(set)
    for pos, msg_id in positions(history.stored).items():
        where[msg_id].add(pos)
    in_log = {i: len(p) for i, p in where.items() if len(p) > 1}
    seen: dict[str, int] = defaultdict(int)
    seen_at: dict[Position, int] = defaultdict(int)
    for d in history.deliveries:
        seen[d.msg_id] += 1
        seen_at[(d.broker, d.queue_id, d.queue_offset)] += 1
    delivered_twice = {i: n for i, n in seen.items() if n > 1}
    return {"extra_deliveries_after": extra_after_fault(history),
            "log_duplicate_ids": len(in_log), "log_extra_copies": sum(n - 1 for n in in_log.values()),
            "log_examples": _examples(in_log), "delivery_duplicate_ids": len(delivered_twice),
            "delivery_extra": sum(n - 1 for n in delivered_twice.values()),
            "redelivered_positions": sum(n - 1 for n in seen_at.values() if n > 1),
            "delivery_examples": _examples(delivered_twice)}


def extra_after_fault(history: History) -> dict[str, int]:
    """Deliveries of an id already delivered, counted by the last fault injected before them ("none": before
    any fault): which faults cause redeliveries."""
    faults = sorted((f.start, f"{f.kind} {f.target}") for f in history.faults if f.injected)
    starts = [start for start, _ in faults]
    counts: dict[str, int] = defaultdict(int)
    delivered: set[str] = set()
    for d in sorted(history.deliveries, key=lambda d: d.at):
        if d.msg_id in delivered:
            index = bisect_right(starts, d.at) - 1
            counts[faults[index][1] if index >= 0 else "none"] += 1
        delivered.add(d.msg_id)
    return dict(counts)


def check_delivery(history: History) -> dict[str, Any]:
    readable = readable_ids(history.stored)
    delivered = {d.msg_id for d in history.deliveries}
    never = readable - delivered
    phantom = delivered - readable
    return {"readable": len(readable), "delivered": len(delivered), "readable_never_delivered": len(never),
            "never_examples": _examples(never), "delivered_not_readable": len(phantom),
            "phantom_examples": _examples(phantom)}


def check_consistency(history: History) -> dict[str, Any]:
    """One queue offset holding different messages: on master and slave (``replica_mismatches``), or in what
    consumers were handed against what is stored (``delivery_mismatches``). A delivery of a record that a power
    loss of its master later dropped (readable nowhere, the offset since reused) is counted apart as
    ``delivered_then_dropped``: a record is pullable once written, before a flush (as in RocketMQ), so what a
    power loss takes away may already have been consumed; it is part of the loss the flush mode allows, not a
    disagreement between replicas."""
    by_pos: dict[Position, set[str]] = defaultdict(set)
    for r in history.stored:
        by_pos[(r.broker, r.queue_id, r.queue_offset)].add(r.msg_id)
    replicas = {p: ids for p, ids in by_pos.items() if len(ids) > 1}
    seen: dict[Position, list[Delivery]] = defaultdict(list)
    for d in history.deliveries:
        seen[(d.broker, d.queue_id, d.queue_offset)].append(d)
    stored = positions(history.stored)
    readable = readable_ids(history.stored)
    power_losses = [f for f in history.faults if f.kind == "powerloss" and f.injected]
    answered = {e.msg_id: (e.broker, e.queue_id, e.queue_offset) for e in history.sends if e.broker}
    deliveries, dropped = set(), set()
    for p, got in seen.items():
        ids = {d.msg_id for d in got}
        if len(ids) == 1 and (p not in stored or stored[p] in ids):
            continue
        current = stored.get(p)
        strays = [d for d in got if d.msg_id != current]
        if strays and all(_dropped_by_power_loss(d, readable, answered, power_losses) for d in strays):
            dropped.add(p)
        else:
            deliveries.add(p)
    return {"inconsistent": len(replicas) + len(deliveries), "replica_mismatches": len(replicas),
            "replica_examples": [list(p) for p in sorted(replicas)[:EXAMPLES]],
            "delivery_mismatches": len(deliveries),
            "delivery_examples": [list(p) for p in sorted(deliveries)[:EXAMPLES]],
            "delivered_then_dropped": len(dropped), "dropped_examples": [list(p) for p in sorted(dropped)[:EXAMPLES]]}


def _dropped_by_power_loss(delivery: Delivery, readable: set[str], answered: dict[str, Position],
                           power_losses: list[FaultEvent]) -> bool:
    """A power loss of the delivered record's broker group came after the delivery, and the record is one that
    loss could take: readable nowhere, or readable only as another copy (an SDK retry stored it on another
    broker after this attempt failed) while the send was never answered from this position (an unacknowledged
    write, which no flush mode keeps)."""
    position = (delivery.broker, delivery.queue_id, delivery.queue_offset)
    could_drop = delivery.msg_id not in readable or answered.get(delivery.msg_id) != position
    return could_drop and any(f.target == delivery.broker and f.start >= delivery.at for f in power_losses)


def check_order(history: History) -> dict[str, Any]:
    """Log order within (stream, queue), and per (consumer, queue) delivery order."""
    per_queue: dict[tuple[str, str, int], list[tuple[int, int]]] = defaultdict(list)
    for (broker, queue_id, offset), msg_id in positions(history.stored).items():
        stream, seq = parse_id(msg_id)
        per_queue[(stream, broker, queue_id)].append((offset, seq))
    reordered: list[tuple[str, str, int]] = []
    for key, items in per_queue.items():
        items.sort()
        if any(b[1] < a[1] for a, b in itertools.pairwise(items)):
            reordered.append(key)
    backwards = 0
    last: dict[tuple[str, str, int], int] = {}
    for d in history.deliveries:
        key = (d.consumer, d.broker, d.queue_id)
        if key in last and d.queue_offset < last[key]:
            backwards += 1
        last[key] = d.queue_offset
    return {"log_reordered_queues": len(reordered), "log_examples": [list(k) for k in sorted(reordered)[:EXAMPLES]],
            "delivery_backwards": backwards}


def check_availability(history: History) -> dict[str, Any]:
    oks = sorted(s.end for s in history.sends if s.ok)
    per_fault = []
    for f in history.faults:
        if not f.injected:
            continue
        end = f.end if f.end >= 0 else history.duration
        after = [t for t in oks if t >= end]
        per_fault.append({"kind": f.kind, "target": f.target, "start": round(f.start, 3), "end": round(end, 3),
                          "longest_gap_s": round(longest_gap(oks, f.start, end), 3),
                          "first_ok_after_heal_s": round(after[0] - end, 3) if after else None})
    sending_ended = max((s.end for s in history.sends), default=0.0)  # not the drain after it
    return {"longest_gap_s": round(longest_gap(oks, 0.0, sending_ended), 3), "per_fault": per_fault}


def longest_gap(times: Sequence[float], start: float, end: float) -> float:
    """The longest interval inside [start, end] holding none of the sorted ``times``."""
    if end <= start:
        return 0.0
    inside = [t for t in times if start <= t <= end]
    edges = [start, *inside, end]
    return max(b - a for a, b in itertools.pairwise(edges))


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank percentile of sorted ``values`` (0 for none)."""
    if not values:
        return 0.0
    rank = min(len(values) - 1, max(0, round(q / 100 * len(values) + 0.5) - 1))
    return values[rank]


def check_latency(history: History, bucket: float = 10.0) -> dict[str, Any]:
    started = {s.msg_id: s.start for s in history.sends}
    first: dict[str, Delivery] = {}
    for d in history.deliveries:
        if d.msg_id not in first or d.at < first[d.msg_id].at:
            first[d.msg_id] = d
    buckets: dict[int, list[float]] = defaultdict(list)
    every = []
    for msg_id, d in first.items():
        if msg_id in started:
            latency = (d.at - started[msg_id]) * 1000
            buckets[int(started[msg_id] // bucket)].append(latency)
            every.append(latency)
    every.sort()
    rows = []
    for index in sorted(buckets):
        values = sorted(buckets[index])
        rows.append({"from_s": index * bucket, "count": len(values), "p50_ms": round(percentile(values, 50), 1),
                     "p99_ms": round(percentile(values, 99), 1), "max_ms": round(values[-1], 1)})
    return {"p50_ms": round(percentile(every, 50), 1), "p99_ms": round(percentile(every, 99), 1),
            "max_ms": round(every[-1], 1) if every else 0.0, "over_time": rows}


def faults_by_kind(faults: Iterable[FaultEvent]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = defaultdict(lambda: {"injected": 0, "skipped": 0})
    for f in faults:
        out[f.kind]["injected" if f.injected else "skipped"] += 1
    return dict(out)


def check_pop(history: History) -> dict[str, Any]:
    if not history.pop_deliveries:
        return {"enabled": False, "delivered": 0, "lost": 0, "lost_examples": [], "extra_deliveries": 0,
                "redelivered": 0}
    acked = {s.msg_id for s in history.sends if s.status == SEND_OK}
    counts: dict[str, int] = defaultdict(int)
    for d in history.pop_deliveries:
        counts[d.msg_id] += 1
    lost = acked - set(counts)
    return {"enabled": True, "delivered": len(counts), "lost": len(lost), "lost_examples": _examples(lost),
            "extra_deliveries": sum(n - 1 for n in counts.values()),
            "redelivered": sum(1 for d in history.pop_deliveries if d.reconsume_times > 0)}


def check_timers(history: History) -> dict[str, Any]:
    acked = {s.msg_id: s for s in history.timer_sends if s.status == SEND_OK}
    first: dict[str, int] = {}
    early: set[str] = set()
    for d in history.timer_deliveries:
        if d.lateness_ms < 0:
            early.add(d.msg_id)
        if d.msg_id not in first or d.stored_ms < first[d.msg_id]:
            first[d.msg_id] = d.stored_ms
    late = sorted(float(first[i] - acked[i].due_ms) for i in first if i in acked)
    lost = set(acked) - set(first)
    return {"sent": len(history.timer_sends), "acknowledged": len(acked), "delivered": len(first),
            "lost": len(lost), "lost_examples": _examples(lost), "early": len(early), "early_examples":
            _examples(early), "duplicates": len(history.timer_deliveries) - len(first),
            "late_p50_ms": percentile(late, 50), "late_p99_ms": percentile(late, 99),
            "late_max_ms": late[-1] if late else 0.0}


def check_all(history: History) -> dict[str, Any]:
    return {"loss": check_loss(history), "duplicates": check_duplicates(history),
            "delivery": check_delivery(history), "consistency": check_consistency(history),
            "order": check_order(history), "availability": check_availability(history),
            "latency": check_latency(history), "faults": faults_by_kind(history.faults),
            "pop": check_pop(history), "timers": check_timers(history),
            "skipped_faults": sorted({f"{f.kind}: {f.skipped}" for f in history.faults if f.skipped})}
