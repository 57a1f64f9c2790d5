"""The chaos checkers over synthetic histories: a clean one passes, and each checker catches what is planted."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import replace
from typing import Any

from pocketmq.chaos.checkers import (
    check_all,
    check_availability,
    check_consistency,
    check_delivery,
    check_duplicates,
    check_latency,
    check_loss,
    check_order,
    longest_gap,
    percentile,
)
from pocketmq.chaos.control import promise
from pocketmq.chaos.events import Delivery, FaultEvent, History, SendEvent, StoredRecord
from pocketmq.chaos.report import render_svg, render_table, verdict


def clean_history(n: int = 10) -> History:
    """One stream sending n messages to broker-a queue 0, each on master and slave, each delivered once."""
    h = History(duration=float(n + 2))
    for i in range(n):
        msg_id = f"p0-s0-{i}"
        h.sends.append(SendEvent(msg_id, float(i), i + 0.01, "SEND_OK", "broker-a", 0, i))
        h.stored.append(StoredRecord("broker-a", "broker-a", True, 0, i, msg_id))
        h.stored.append(StoredRecord("broker-a", "broker-a-s", False, 0, i, msg_id))
        h.deliveries.append(Delivery(i + 0.05, "c0", msg_id, "broker-a", 0, i))
    return h


def test_a_clean_history_passes_every_checker() -> None:
    h = clean_history()
    results = check_all(h)
    assert results["loss"]["lost"] == 0 and results["loss"]["acknowledged"] == 10
    assert results["duplicates"]["log_duplicate_ids"] == 0 and results["duplicates"]["delivery_extra"] == 0
    assert results["delivery"]["readable_never_delivered"] == 0 and results["delivery"]["delivered_not_readable"] == 0
    assert results["consistency"]["inconsistent"] == 0
    assert results["order"]["log_reordered_queues"] == 0 and results["order"]["delivery_backwards"] == 0
    assert verdict(results, no_loss_promised=True) == []


def test_loss_of_an_acknowledged_message_is_found_on_no_replica() -> None:
    h = clean_history()
    h.stored = [r for r in h.stored if r.msg_id != "p0-s0-3"]
    loss = check_loss(h)
    assert loss["lost"] == 1 and loss["lost_examples"] == ["p0-s0-3"]
    assert verdict(check_all(h), no_loss_promised=True) != []
    assert verdict(check_all(h), no_loss_promised=False) == []  # a preset that may lose: reported, not failed


def test_a_copy_on_one_replica_is_not_a_loss() -> None:
    h = clean_history()
    h.stored = [r for r in h.stored if not (r.msg_id == "p0-s0-3" and r.is_master)]
    assert check_loss(h)["lost"] == 0


def test_stored_not_ok_lost_and_stored_although_failed() -> None:
    h = clean_history()
    h.sends[2] = SendEvent("p0-s0-2", 2.0, 5.0, "FLUSH_SLAVE_TIMEOUT", "broker-a", 0, 2)
    h.stored = [r for r in h.stored if r.msg_id != "p0-s0-2"]
    h.sends[4] = SendEvent("p0-s0-4", 4.0, 7.0, "FAILED", error="timeout", timed_out=True)
    loss = check_loss(h)
    assert loss["lost"] == 0 and loss["lost_stored_not_ok"] == 1
    assert loss["stored_although_failed"] == 1 and loss["stored_although_failed_examples"] == ["p0-s0-4"]


def test_duplicates_in_the_log_and_in_deliveries() -> None:
    h = clean_history()
    h.stored.append(StoredRecord("broker-b", "broker-b", True, 1, 0, "p0-s0-5"))  # a retry stored twice
    h.deliveries.append(Delivery(20.0, "c1", "p0-s0-1", "broker-a", 0, 1))  # redelivery of one position
    dup = check_duplicates(h)
    assert dup["log_duplicate_ids"] == 1 and dup["log_examples"] == ["p0-s0-5"]
    assert dup["delivery_extra"] == 1 and dup["redelivered_positions"] == 1
    assert dup["extra_deliveries_after"] == {"none": 1}
    h.faults = [FaultEvent("kill", "broker-a", 15.0, 18.0)]
    assert check_duplicates(h)["extra_deliveries_after"] == {"kill broker-a": 1}


def test_readable_never_delivered_and_delivered_not_readable() -> None:
    h = clean_history()
    h.deliveries = [d for d in h.deliveries if d.msg_id != "p0-s0-7"]
    h.deliveries.append(Delivery(30.0, "c0", "p9-s9-9", "broker-b", 0, 0))
    d = check_delivery(h)
    assert d["readable_never_delivered"] == 1 and d["never_examples"] == ["p0-s0-7"]
    assert d["delivered_not_readable"] == 1 and d["phantom_examples"] == ["p9-s9-9"]


def test_inconsistent_offsets_between_master_and_slave_and_between_consumers() -> None:
    h = clean_history()
    h.stored = [r for r in h.stored if not (r.member == "broker-a-s" and r.queue_offset == 6)]
    h.stored.append(StoredRecord("broker-a", "broker-a-s", False, 0, 6, "p1-s0-0"))
    c = check_consistency(h)
    assert c["replica_mismatches"] == 1 and c["replica_examples"] == [["broker-a", 0, 6]]
    # The master lost p0-s0-6 and reused its offset: only the slave has it, where the master has another id.
    h.stored = [r for r in h.stored if r.msg_id != "p0-s0-6"]
    h.stored.append(StoredRecord("broker-a", "broker-a-s", False, 0, 6, "p0-s0-6"))
    h.stored = [r for r in h.stored if not (r.member == "broker-a-s" and r.msg_id == "p1-s0-0")]
    h.stored = [r for r in h.stored if not (r.is_master and r.queue_offset == 6)]
    h.stored.append(StoredRecord("broker-a", "broker-a", True, 0, 6, "p1-s0-0"))
    loss = check_loss(h)
    assert loss["lost"] == 0 and loss["acked_only_on_diverged_slave"] == 1 and loss["diverged_examples"] == ["p0-s0-6"]
    h2 = clean_history()
    h2.deliveries.append(Delivery(40.0, "c1", "p0-s0-9", "broker-a", 0, 8))  # offset 8 seen holding 9
    c2 = check_consistency(h2)
    assert c2["delivery_mismatches"] == 1 and c2["inconsistent"] == 1
    assert verdict(check_all(h2), no_loss_promised=False) == ["1 inconsistent offsets"]


def test_reordered_stream_in_a_queue_and_deliveries_going_backwards() -> None:
    h = clean_history()
    swap = {"p0-s0-4": 5, "p0-s0-5": 4}  # 5 was sent after 4 was answered, yet sits before it
    h.stored = [replace(r, queue_offset=swap.get(r.msg_id, r.queue_offset)) for r in h.stored]
    assert check_order(h)["log_reordered_queues"] == 1
    h2 = clean_history()
    h2.deliveries.append(Delivery(50.0, "c0", "p0-s0-2", "broker-a", 0, 2))
    assert check_order(h2)["delivery_backwards"] == 1


def test_availability_per_fault_and_recovery() -> None:
    h = History(duration=30.0)
    times = [t / 10 for t in range(0, 100)] + [t / 10 for t in range(160, 300)]  # nothing from 10 s to 16 s
    h.sends = [SendEvent(f"p0-s0-{i}", t, t, "SEND_OK") for i, t in enumerate(times)]
    h.faults = [FaultEvent("kill", "broker-a", 9.5, 14.0), FaultEvent("netem", "broker-b", 0, 0, skipped="no tc")]
    a = check_availability(h)
    assert a["longest_gap_s"] == 6.1
    (f,) = a["per_fault"]
    assert f["kind"] == "kill" and f["first_ok_after_heal_s"] == 2.0 and f["longest_gap_s"] == 4.1
    assert check_all(h)["faults"] == {"kill": {"injected": 1, "skipped": 0}, "netem": {"injected": 0, "skipped": 1}}
    assert longest_gap([], 0.0, 5.0) == 5.0


def test_latency_percentiles_over_time() -> None:
    h = clean_history(30)
    lat = check_latency(h, bucket=10.0)
    assert lat["p50_ms"] == 50.0 and len(lat["over_time"]) == 3
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0 and percentile([], 99) == 0.0


def test_promises_by_preset_and_flush() -> None:
    # any power loss, a master's included: it takes back its lost tail from its slave (broker.tail_recovery)
    assert promise("2m-2s-sync", "ASYNC_FLUSH", overlap=False, power_loss=True) == ("sync-master", True)
    assert promise("2m-2s-sync", "ASYNC_FLUSH", overlap=True, power_loss=False) == ("sync-master", False)
    assert promise("2m-2s-async", "ASYNC_FLUSH", overlap=False, power_loss=True) == ("async", False)
    assert promise("2m-noslave", "ASYNC_FLUSH", overlap=False, power_loss=False) == ("async", True)
    assert promise("2m-noslave", "SYNC_FLUSH", overlap=True, power_loss=True) == ("sync-flush", True)


def test_table_and_svg_render() -> None:
    h = clean_history()
    h.faults = [FaultEvent("stop", "broker-a-s", 2.0, 5.0)]
    results = check_all(h)
    summary = {"preset": "2m-2s-sync", "flush": "ASYNC_FLUSH", "promise": "p", "duration": 12.0, "seed": 1,
               "overlap": False, "results": results, "problems": verdict(results, no_loss_promised=True)}
    table = render_table(summary)
    assert "VERDICT: PASS" in table and "stop       broker-a-s" in table
    svg = ET.fromstring(render_svg(h.sends, h.faults, h.duration, "title"))
    assert svg.tag.endswith("svg") and len(svg.findall("{http://www.w3.org/2000/svg}polyline")) == 3


def test_a_delivery_a_power_loss_then_dropped_is_not_an_inconsistency() -> None:
    """p0-s0-6 was delivered, then the master's power loss dropped it and offset 6 was reused by p1-s0-0: part of
    the loss the flush mode allows. The same history without the power loss is an inconsistency."""
    h = clean_history()
    h.stored = [r for r in h.stored if r.msg_id != "p0-s0-6"]
    h.stored += [StoredRecord("broker-a", "broker-a", True, 0, 6, "p1-s0-0"),
                 StoredRecord("broker-a", "broker-a-s", False, 0, 6, "p1-s0-0")]
    without = check_consistency(h)
    assert without["delivery_mismatches"] == 1 and without["inconsistent"] == 1
    h.faults.append(FaultEvent("powerloss", "broker-a", 7.0, 9.0))
    c = check_consistency(h)
    assert c["delivered_then_dropped"] == 1 and c["dropped_examples"] == [["broker-a", 0, 6]]
    assert c["delivery_mismatches"] == 0 and c["inconsistent"] == 0
    h.faults[-1] = FaultEvent("powerloss", "broker-a", 5.0, 5.5)  # before the delivery: no excuse
    assert check_consistency(h)["inconsistent"] == 1


def test_an_unacknowledged_write_a_power_loss_dropped_is_not_an_inconsistency_when_a_retry_stored_it() -> None:
    """Found by the 2m-noslave SYNC_FLUSH run (seed 1): p0-s0-6's attempt on broker-a was written and delivered
    before its flush, the power loss dropped it, the SDK's retry stored it on broker-b, and broker-a reused offset
    6. The copy the consumer got was never acknowledged: no flush mode keeps it. Acknowledged at that very
    position, the same history is an inconsistency."""
    h = clean_history()
    h.stored = [r for r in h.stored if r.msg_id != "p0-s0-6"]
    h.stored += [StoredRecord("broker-a", "broker-a", True, 0, 6, "p1-s0-0"),
                 StoredRecord("broker-b", "broker-b", True, 0, 0, "p0-s0-6")]
    h.sends = [e for e in h.sends if e.msg_id != "p0-s0-6"]
    h.sends.append(SendEvent("p0-s0-6", 6.0, 8.5, "SEND_OK", "broker-b", 0, 0))
    h.faults.append(FaultEvent("powerloss", "broker-a", 7.0, 9.0))
    c = check_consistency(h)
    assert c["delivered_then_dropped"] == 1 and c["inconsistent"] == 0
    h.sends[-1] = SendEvent("p0-s0-6", 6.0, 6.01, "SEND_OK", "broker-a", 0, 6)
    assert check_consistency(h)["inconsistent"] == 1


def test_pop_group_losses_and_repeats() -> None:
    from pocketmq.chaos.checkers import check_pop
    from pocketmq.chaos.events import PopDelivery

    sends = [SendEvent(f"p0-s0-{i}", 0, 0.1, "SEND_OK") for i in range(4)] + [SendEvent("p0-s0-9", 0, 0.1, "FAILED")]
    h = History(sends=sends, pop_deliveries=[
        PopDelivery(1, "pop0", "p0-s0-0", 0), PopDelivery(2, "pop0", "p0-s0-1", 0),
        PopDelivery(8, "pop1", "p0-s0-1", 1), PopDelivery(3, "pop1", "p0-s0-2", 0)])
    r = check_pop(h)
    assert (r["delivered"], r["lost"], r["lost_examples"]) == (3, 1, ["p0-s0-3"])
    assert (r["extra_deliveries"], r["redelivered"]) == (1, 1)
    assert check_pop(History(sends=sends))["enabled"] is False
    assert any("POP" in p for p in verdict({**_clean_results(), "pop": r}, no_loss_promised=True))


def test_timers_lost_early_and_late() -> None:
    from pocketmq.chaos.checkers import check_timers
    from pocketmq.chaos.events import TimerDelivery, TimerSend

    h = History(timer_sends=[TimerSend("t-0", 0, 1000, "SEND_OK"), TimerSend("t-1", 0, 2000, "SEND_OK"),
                             TimerSend("t-2", 0, 3000, "SEND_OK"), TimerSend("t-3", 0, 4000, "FAILED")],
                timer_deliveries=[TimerDelivery("t-0", 1000, 1040), TimerDelivery("t-0", 1000, 1500),
                                  TimerDelivery("t-1", 2000, 1990)])
    r = check_timers(h)
    assert (r["acknowledged"], r["delivered"], r["lost"], r["lost_examples"]) == (3, 2, 1, ["t-2"])
    assert (r["early"], r["early_examples"], r["duplicates"]) == (1, ["t-1"], 1)
    assert r["late_max_ms"] == 40.0 and percentile([-10.0, 40.0], 50) == r["late_p50_ms"]
    problems = verdict({**_clean_results(), "timers": r}, no_loss_promised=False)
    assert problems == ["1 timer messages delivered before their time"]  # early is a failure whatever the promise


def _clean_results() -> dict[str, Any]:
    return {"loss": {"lost": 0}, "consistency": {"inconsistent": 0}}
