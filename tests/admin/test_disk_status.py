"""``rmq-admin diskStatus``'s reading of the runtime-info keys and its advice (the command itself runs against real
brokers in ``tests/broker/test_full_disk_restart.py``)."""

from __future__ import annotations

from pocketmq.admin.commands_disk import advice, disk_status, dropped, holders, render, size


def test_holders_and_dropped_are_read_back() -> None:
    assert holders("Orders@billing=8388608/1200;%DLQ%billing@(none)=4096/3") == [
        {"topic": "Orders", "group": "billing", "bytes": 8388608, "messages": 1200},
        {"topic": "%DLQ%billing", "group": "(none)", "bytes": 4096, "messages": 3}]
    assert holders("") == [] and dropped("") == {}
    assert dropped("Orders@billing=17;Orders@audit=3") == {"Orders@billing": 17, "Orders@audit": 3}
    assert [size(n) for n in (0, 1023, 1536, 16 << 20, 3 << 30)] == ["0 B", "1023 B", "1.5 KiB", "16.0 MiB",
                                                                    "3.0 GiB"]


def test_a_refused_disk_gets_advice_in_the_order_that_loses_least() -> None:
    info = {"commitLogDiskRatio": "0.93", "commitLogDirTotalBytes": str(100 << 20),
            "commitLogDirAvailableBytes": str(7 << 20), "storeWritable": "false", "diskFull": "true",
            "diskFullReason": "the broker's disk is full", "commitLogMinOffset": "0",
            "commitLogMaxOffset": str(48 << 20), "diskReclaimableExpiredBytes": str(8 << 20),
            "diskReclaimableConsumedBytes": str(16 << 20), "diskHeldBytes": str(24 << 20),
            "diskHeldByTopicGroup": f"Orders@audit={24 << 20}/5000", "diskHolders": "3", "fileReservedTime": "72",
            "cleanFileForciblyEnable": "false", "forcedCleanFiles": "0", "expiredDeletedFiles": "2",
            "expiredDeletedBytes": str(8 << 20), "expiredDroppedByTopicGroup": "Orders@audit=10"}
    status = disk_status(info)
    assert status["writable"] is False and status["expiredDeleted"]["dropped"] == {"Orders@audit": 10}
    hints = advice(status)
    assert [h.split(" ")[0:2] for h in hints] == [["8.0", "MiB"], ["16.0", "MiB"], ["the", "oldest"]]
    assert "fileReservedTime=72 h" in hints[1] and "Orders@audit (5000 messages" in hints[2]
    text = render("10.0.0.1:10911", status)
    assert "REFUSED (the broker's disk is full)" in text and "93.0% used, 7.0 MiB free of 100.0 MiB" in text
    assert "Orders  audit   24.0 MiB    5000" in text and "... and 2 smaller backlogs" in text
    assert advice(disk_status({"storeWritable": "false"})) == [
        "nothing here is reclaimable: free space on the file system or grow it"]
    assert advice(disk_status({"storeWritable": "true"})) == []
