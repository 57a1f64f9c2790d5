"""Reads through consume queues: statuses (reference §2.5), limits, tag filtering, offset search by time,
delayed messages and the listener hooks."""

from __future__ import annotations

from pathlib import Path

import pytest

from pocketmq.common.message import get_property, java_string_hash
from pocketmq.common.record import MessageRecord, decode_record
from pocketmq.common.topic import RMQ_SYS_SCHEDULE_TOPIC
from pocketmq.store import BrokerRole, GetMessageStatus, MessageStore, PutMessageStatus
from tests.store.support import check_consistency, msg, small_config


async def test_status_of_each_offset(store: MessageStore) -> None:
    unknown = store.get_messages("g", "T", 0, 5, 32)
    assert (unknown.status, unknown.next_begin_offset) == (GetMessageStatus.NO_MESSAGE_IN_QUEUE, 0)
    assert store.get_messages("g", "T", -1, 0, 32).status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
    for i in range(10):
        await store.put_message(msg(body=f"m{i}".encode()))
    found = store.get_messages("g", "T", 0, 3, 4)
    assert found.status is GetMessageStatus.FOUND
    assert found.message_queue_offsets == [3, 4, 5, 6]
    assert (found.next_begin_offset, found.min_offset, found.max_offset) == (7, 0, 10)
    assert [r.body for r in map(decode_record, found.message_buffers)] == [  # type: ignore[union-attr]
        b"m3", b"m4", b"m5", b"m6"]
    assert found.buffer_total_size == sum(len(v) for v in found.message_buffers)
    assert len(found.body()) == found.buffer_total_size
    found.release()
    one = store.get_messages("g", "T", 0, 10, 32)
    assert (one.status, one.next_begin_offset) == (GetMessageStatus.OFFSET_OVERFLOW_ONE, 10)
    badly = store.get_messages("g", "T", 0, 50, 32)
    assert (badly.status, badly.next_begin_offset) == (GetMessageStatus.OFFSET_OVERFLOW_BADLY, 10)


async def test_count_and_byte_limits(store: MessageStore) -> None:
    for _ in range(40):
        await store.put_message(msg(body=b"x" * 1000))
    assert store.get_messages("g", "T", 0, 0, 100).message_count == 32  # the in-memory transfer cap
    by_bytes = store.get_messages("g", "T", 0, 0, 32, max_bytes=3500)
    assert by_bytes.message_count == 3 and by_bytes.next_begin_offset == 3
    at_least_one = store.get_messages("g", "T", 0, 0, 32, max_bytes=10)
    assert at_least_one.message_count == 1


async def test_tag_filtering(store: MessageStore) -> None:
    for i in range(30):
        await store.put_message(msg(tags="A" if i % 3 == 0 else "B", body=bytes([i])))
    code_a = java_string_hash("A")
    only_a = store.get_messages("g", "T", 0, 0, 32, message_filter=lambda code: code == code_a)
    assert only_a.message_queue_offsets == list(range(0, 30, 3))
    assert only_a.tags_codes == [code_a] * 10
    assert all(decode_record(v).properties == "TAGS\x01A" for v in only_a.message_buffers)  # type: ignore[union-attr]
    none = store.get_messages("g", "T", 0, 5, 32, message_filter=lambda code: False)
    assert (none.status, none.next_begin_offset, none.message_count) == (GetMessageStatus.NO_MATCHED_MESSAGE, 30, 0)
    explicit = await store.put_message(msg(tags="A", tags_code=12345))
    assert explicit.append_result is not None
    unit = store.find_consume_queue("T", 0).get_unit(explicit.append_result.queue_offset)  # type: ignore[union-attr]
    assert unit is not None and unit[2] == 12345


async def test_reads_across_consume_queue_files(store: MessageStore) -> None:
    for i in range(150):  # 64 units per consume-queue file
        await store.put_message(msg(queue_id=1, body=str(i).encode()))
    cq = store.find_consume_queue("T", 1)
    assert cq is not None and len(cq.queue.files) == 3
    offsets: list[int] = []
    next_offset = 0
    while True:
        result = store.get_messages("g", "T", 1, next_offset, 32)
        if result.status is not GetMessageStatus.FOUND:
            assert result.status is GetMessageStatus.OFFSET_OVERFLOW_ONE
            break
        offsets += result.message_queue_offsets
        next_offset = result.next_begin_offset
    assert offsets == list(range(150))


class FakeTime:
    """Stands in for the ``time`` module of pocketmq.store.commitlog: store timestamps under test control."""

    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def time_ns(self) -> int:
        return self.now_ms * 1_000_000


async def test_offset_search_by_time(store: MessageStore, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeTime(1_000_000)
    monkeypatch.setattr("pocketmq.store.commitlog.time", clock)
    assert store.get_earliest_message_time("T", 0) == -1
    for i in range(200):  # stamps 1_000_000, 1_000_010, ... with every stamp used twice
        clock.now_ms = 1_000_000 + (i // 2) * 10
        await store.put_message(msg(body=b"t"))
    search = store.get_offset_in_queue_by_time
    assert search("T", 0, 0) == 0
    assert search("T", 0, 1_000_000) == 0
    assert search("T", 0, 1_000_001) == 2
    assert search("T", 0, 1_000_500) == 100
    assert search("T", 0, 1_000_990) == 198
    assert search("T", 0, 9_999_999) == 200
    assert search("nope", 0, 1) == 0
    assert store.get_earliest_message_time("T", 0) == 1_000_000
    assert store.get_message_store_timestamp("T", 0, 101) == 1_000_500
    assert store.get_message_store_timestamp("T", 0, 500) == -1


async def test_delayed_message_goes_to_schedule_topic(store: MessageStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("pocketmq.store.commitlog.time", FakeTime(5_000_000))
    result = await store.put_message(msg(topic="Orders", queue_id=3, tags="A", props={"DELAY": "3"}))
    assert result.is_ok
    assert store.get_max_offset_in_queue("Orders", 3) == 0
    got = store.get_messages("g", RMQ_SYS_SCHEDULE_TOPIC, 2, 0, 32)  # level 3 -> queue 2
    assert got.status is GetMessageStatus.FOUND
    record = decode_record(got.message_buffers[0])
    assert isinstance(record, MessageRecord)
    assert get_property(record.properties, "REAL_TOPIC") == "Orders"
    assert get_property(record.properties, "REAL_QID") == "3"
    assert got.tags_codes == [5_000_000 + 10_000]  # the delivery time: store time + 10 s
    beyond = await store.put_message(msg(topic="Orders", props={"DELAY": "99"}))
    assert beyond.is_ok
    assert store.get_max_offset_in_queue(RMQ_SYS_SCHEDULE_TOPIC, 17) == 1  # capped at the last level (18)
    check_consistency(store)


async def test_listeners_see_every_message(store: MessageStore) -> None:
    arrivals: list[tuple[str, int, int, int, int]] = []
    growth: list[int] = []
    store.add_arrival_listener(lambda *args: arrivals.append(args))
    store.add_commitlog_growth_listener(growth.append)

    def broken(*_args: object) -> None:
        raise RuntimeError("listener bug")

    store.add_arrival_listener(broken)
    result = await store.put_message(msg(topic="L", queue_id=2, tags="x"))
    assert result.is_ok and result.append_result is not None
    assert arrivals == [("L", 2, 1, java_string_hash("x"), result.append_result.store_timestamp)]
    assert growth == [store.max_phy_offset]


async def test_puts_refused_when_not_running_and_on_slaves(tmp_path: Path) -> None:
    not_started = MessageStore(small_config(tmp_path / "a"))
    assert (await not_started.put_message(msg())).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    slave = MessageStore(small_config(tmp_path / "b", broker_role=BrokerRole.SLAVE))
    await slave.start()
    try:
        assert (await slave.put_message(msg())).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
        assert slave.get_messages("g", "T", 0, 0, 1).status is GetMessageStatus.NO_MESSAGE_IN_QUEUE
    finally:
        await slave.shutdown()
    assert (await slave.put_message(msg())).status is PutMessageStatus.SERVICE_NOT_AVAILABLE


async def test_a_pull_across_commit_log_files_reads_each_record_from_its_file(store: MessageStore) -> None:
    # 64 KiB commit-log files: 5 KiB bodies put the records of one 32-message pull in three files.
    for i in range(40):
        await store.put_message(msg(body=bytes([i]) * 5000))
    assert len(store.commit_log.queue.files) >= 3
    found = store.get_messages("g", "T", 0, 2, 32, max_bytes=1 << 20)
    assert found.message_queue_offsets == list(range(2, 34))
    records = [decode_record(view) for view in found.message_buffers]
    assert [(r.queue_offset, r.body) for r in records] == [  # type: ignore[union-attr]
        (i, bytes([i]) * 5000) for i in range(2, 34)]
    found.release()
