"""Commit-log appends through the store: exact bytes, roll-over with blank markers, batches, limits,
transactions, and the slave's raw appends."""

from __future__ import annotations

import random
import struct
from pathlib import Path

from pocketmq.common.batch import BatchEntry, encode_batch_body
from pocketmq.common.message import java_string_hash
from pocketmq.common.record import BLANK_MAGIC_CODE, MessageRecord, decode_record, encode_host
from pocketmq.common.record_encoder import encode_record
from pocketmq.common.sysflag import MessageSysFlag
from pocketmq.store import GetMessageStatus, MessageExtBatch, MessageStore, PutMessageStatus
from pocketmq.store.consume_queue import CQ_UNIT
from tests.helpers import eventually
from tests.store.support import CL_FILE, check_consistency, exists, msg, record_at, small_config


async def test_stored_bytes_equal_the_reference_encoder(store: MessageStore) -> None:
    born = encode_host("2001:db8::7", 40000)
    message = msg(body=b"payload", queue_id=1, tags="TagA", keys="k1 k2", born_host=born, born_timestamp=123,
                  flag=9, reconsume_times=1)
    result = await store.put_message(message)
    assert result.is_ok
    ar = result.append_result
    assert ar is not None
    stored = store.commit_log.get_message(ar.wrote_offset, ar.wrote_bytes)
    assert stored is not None
    expected = encode_record(topic="T", body=b"payload", properties=message.properties, queue_id=1, flag=9,
                             queue_offset=0, physical_offset=ar.wrote_offset, born_timestamp=123, born_host=born,
                             store_timestamp=ar.store_timestamp, store_host=store.config.store_host_bytes,
                             reconsume_times=1)
    assert bytes(stored) == expected
    record = record_at(store, ar.wrote_offset, ar.wrote_bytes)
    assert record.sys_flag & MessageSysFlag.BORNHOST_V6
    assert record.keys == ["k1", "k2"]
    assert ar.msg_id == record.msg_id and len(ar.msg_id) == 32


async def test_roll_over_leaves_blank_markers_and_reads_cross_files(store: MessageStore) -> None:
    rng = random.Random(7)
    offsets = []
    for i in range(600):
        body = bytes([i % 251]) * rng.randint(50, 900)
        result = await store.put_message(msg(body=body, queue_id=0))
        assert result.is_ok
        assert result.append_result is not None
        offsets.append((result.append_result.wrote_offset, result.append_result.wrote_bytes))
    files = store.commit_log.queue.files
    assert len(files) > 3
    for mapped in files[:-1]:
        assert mapped.is_full
        last_end = max(o + s for o, s in offsets if mapped.file_from_offset <= o < mapped.file_end_offset)
        room = mapped.file_end_offset - last_end
        assert room >= 8
        assert struct.unpack_from(">ii", mapped.view, last_end - mapped.file_from_offset) == (room, BLANK_MAGIC_CODE)
    for offset, size in offsets:  # no record straddles a file boundary
        assert offset // CL_FILE == (offset + size - 1) // CL_FILE
    boundary = next(i for i, (o, _s) in enumerate(offsets) if o % CL_FILE == 0 and o > 0)
    got = store.get_messages("g", "T", 0, boundary - 3, 8)
    assert [decode_record(v).queue_offset for v in got.message_buffers] == list(  # type: ignore[union-attr]
        range(boundary - 3, boundary + 5))
    assert got.next_begin_offset == boundary + 5
    assert check_consistency(store) == 600


async def test_record_that_does_not_fit_starts_the_next_file(store: MessageStore) -> None:
    first = await store.put_message(msg(body=b"a" * (CL_FILE - 200)))
    assert first.append_result is not None and first.append_result.wrote_offset == 0
    second = await store.put_message(msg(body=b"b" * 150))
    assert second.append_result is not None
    assert second.append_result.wrote_offset == CL_FILE
    assert second.append_result.queue_offset == 1
    assert store.max_phy_offset == CL_FILE + second.append_result.wrote_bytes


async def test_batch_append(store: MessageStore) -> None:
    entries = [BatchEntry(i, f"body-{i}".encode(), f"TAGS\x01t{i % 3}\x02UNIQ_KEY\x01u{i}") for i in range(50)]
    entries.append(BatchEntry(99, b"no props", ""))
    entries.append(BatchEntry(98, b"trailing", "TAGS\x01t0\x02"))
    batch = MessageExtBatch(topic="B", body=encode_batch_body(entries), queue_id=2, properties="CLUSTER\x01c1",
                            born_timestamp=55)
    await store.put_message(msg(topic="B", queue_id=2))  # queue offsets continue after this one
    result = await store.put_messages(batch)
    assert result.is_ok
    ar = result.append_result
    assert ar is not None
    assert (ar.logics_offset, ar.msg_num) == (1, len(entries))
    assert len(ar.msg_ids) == len(entries) and ar.msg_id.count(",") == len(entries) - 1
    assert ar.record_offsets[0] == ar.wrote_offset
    assert sum(store.commit_log.get_message(o, 4) is not None for o in ar.record_offsets) == len(entries)
    got = store.get_messages("g", "B", 2, 1, 100, max_bytes=1 << 20)
    assert got.message_count == 32  # max_transfer_count_on_message_in_memory
    records = [decode_record(v) for v in got.message_buffers]
    for i, record in enumerate(records):
        assert isinstance(record, MessageRecord)
        assert (record.flag, record.body, record.queue_offset) == (i, f"body-{i}".encode(), i + 1)
        assert record.properties == f"TAGS\x01t{i % 3}\x02UNIQ_KEY\x01u{i}\x02CLUSTER\x01c1"
        assert record.born_timestamp == 55
    assert got.tags_codes[:3] == [java_string_hash("t0"), java_string_hash("t1"), java_string_hash("t2")]
    tail = store.get_messages("g", "B", 2, 51, 10)
    last = [decode_record(v) for v in tail.message_buffers]
    assert [r.properties for r in last] == ["CLUSTER\x01c1", "TAGS\x01t0\x02CLUSTER\x01c1"]  # type: ignore[union-attr]
    check_consistency(store)


async def test_batch_rejections(store: MessageStore) -> None:
    body = encode_batch_body([BatchEntry(0, b"x", "")])
    for batch in (
        MessageExtBatch(topic="%RETRY%g", body=body),
        MessageExtBatch(topic="T", body=body, properties="DELAY\x013"),
        MessageExtBatch(topic="T", body=body[:-1]),
        MessageExtBatch(topic="T", body=b""),
        MessageExtBatch(topic="T", body=body, sys_flag=MessageSysFlag.TRANSACTION_PREPARED_TYPE),
        MessageExtBatch(topic="T", body=encode_batch_body([BatchEntry(0, b"x" * 40_000, "")] * 2)),
    ):
        before = store.max_phy_offset
        result = await store.put_messages(batch)
        assert result.status is PutMessageStatus.MESSAGE_ILLEGAL, batch.topic
        assert store.max_phy_offset == before
    assert (await store.put_messages(MessageExtBatch(topic="T", body=body))).is_ok
    check_consistency(store)


async def test_limits_give_statuses_and_write_nothing(tmp_path: Path) -> None:
    s = MessageStore(small_config(tmp_path, max_message_size=2000))
    await s.start()
    try:
        cases = [
            (msg(body=b"x" * 2000), PutMessageStatus.MESSAGE_ILLEGAL),
            (msg(topic="t" * 128), PutMessageStatus.MESSAGE_ILLEGAL),
            (msg(topic=""), PutMessageStatus.MESSAGE_ILLEGAL),
            (msg(props={"k": "v" * 33000}), PutMessageStatus.PROPERTIES_SIZE_EXCEEDED),
            (msg(born_host=b"\x01\x02\x03"), PutMessageStatus.MESSAGE_ILLEGAL),
        ]
        for message, status in cases:
            result = await s.put_message(message)
            assert result.status is status
            assert not status.is_stored
        assert s.max_phy_offset == 0
        assert (await s.put_message(msg(body=b"x" * 1700, topic="t" * 127))).is_ok
    finally:
        await s.shutdown()


async def test_prepared_transactions_are_not_indexed(store: MessageStore) -> None:
    prepared = await store.put_message(msg(sys_flag=MessageSysFlag.TRANSACTION_PREPARED_TYPE))
    assert prepared.is_ok and prepared.append_result is not None
    assert prepared.append_result.queue_offset == 0
    assert store.get_max_offset_in_queue("T", 0) == 0
    committed = await store.put_message(msg(sys_flag=MessageSysFlag.TRANSACTION_COMMIT_TYPE))
    assert committed.append_result is not None and committed.append_result.queue_offset == 0
    assert store.get_max_offset_in_queue("T", 0) == 1
    record = store.look_message_by_offset(prepared.append_result.wrote_offset)
    assert record is not None and record.sys_flag & MessageSysFlag.TRANSACTION_PREPARED_TYPE
    check_consistency(store)


async def test_look_message_and_replication_reads(store: MessageStore) -> None:
    result = await store.put_message(msg(body=b"abc", tags="x"))
    assert result.append_result is not None
    record = store.look_message_by_offset(0)
    assert record is not None and record.body == b"abc"
    assert store.look_message_by_offset(5) is None
    assert store.look_message_by_offset(10 * CL_FILE) is None
    data = store.get_commit_log_data(0)
    assert data is not None and len(data) == result.append_result.wrote_bytes
    assert store.get_commit_log_data(0, 10) is not None and len(store.get_commit_log_data(0, 10) or b"") == 10
    assert store.get_commit_log_data(store.max_phy_offset) is None


async def test_slave_appends_raw_bytes_and_indexes_them(store: MessageStore, tmp_path: Path) -> None:
    rng = random.Random(3)
    for i in range(400):
        await store.put_message(msg(topic=f"T{i % 3}", queue_id=i % 2, body=bytes(rng.randint(1, 700)),
                                    tags=f"tag{i % 5}"))
    await store.put_messages(MessageExtBatch(topic="T0", body=encode_batch_body([BatchEntry(0, b"b", "")] * 10)))
    slave = MessageStore(small_config(tmp_path / "slave"))
    await slave.start()
    grown: list[int] = []
    slave.add_commitlog_growth_listener(grown.append)
    try:
        offset = 0
        while offset < store.max_phy_offset:
            chunk = store.get_commit_log_data(offset, rng.randint(1, 5000))
            assert chunk is not None
            assert slave.append_to_commit_log(offset, bytes(chunk))
            offset += len(chunk)
        assert slave.max_phy_offset == store.max_phy_offset
        assert grown[-1] == store.max_phy_offset
        for a, b in zip(store.commit_log.queue.files, slave.commit_log.queue.files, strict=True):
            assert bytes(a.view[:a.wrote_position]) == bytes(b.view[:b.wrote_position])
        assert check_consistency(slave) == check_consistency(store)
        for topic, queues in store.topics().items():
            for queue_id in queues:
                assert slave.get_max_offset_in_queue(topic, queue_id) == store.get_max_offset_in_queue(topic, queue_id)
        assert not slave.append_to_commit_log(offset + 1, b"x")  # not the slave's max offset
        end = slave.max_phy_offset
        assert not slave.append_to_commit_log(end, b"\x00\x00\x00\x40" + b"garbage!" * 8)
        assert slave.max_phy_offset == end  # bad bytes are cut again
        check_consistency(slave)
    finally:
        await slave.shutdown()


async def test_slave_waits_for_a_record_cut_in_its_leading_zero_bytes(store: MessageStore, tmp_path: Path) -> None:
    """A record's TOTALSIZE starts with zero bytes (a 250-byte record begins 00 00 00 FA). A replication
    chunk that ends 1..3 bytes into a record therefore ends in zeros: that is an unfinished record to wait
    for, not the end of the data or damage (it used to cut the slave's log and drop its connection)."""
    for i in range(30):
        await store.put_message(msg(queue_id=i % 2, body=bytes(100 + i), tags="z"))
    starts = []
    offset = 0
    while offset < store.max_phy_offset:
        record = store.look_message_by_offset(offset)
        assert record is not None
        starts.append(offset)
        offset += record.total_size
    slave = MessageStore(small_config(tmp_path / "slave"))
    await slave.start()
    try:
        offset = 0
        for index, start in enumerate(starts[1:]):
            cut = start + 1 + index % 3  # 1, 2 or 3 bytes into the next record: all zeros so far
            chunk = store.get_commit_log_data(offset, cut - offset)
            assert chunk is not None and not any(bytes(chunk)[start - offset:])
            assert slave.append_to_commit_log(offset, bytes(chunk)), f"cut at {cut}"
            offset = cut
        rest = store.get_commit_log_data(offset)
        assert rest is not None and slave.append_to_commit_log(offset, bytes(rest))
        assert slave.max_phy_offset == store.max_phy_offset
        assert slave.get_max_offset_in_queue("T", 0) == store.get_max_offset_in_queue("T", 0) == 15
    finally:
        await slave.shutdown()


async def test_empty_slave_only_accepts_a_file_start(tmp_path: Path) -> None:
    slave = MessageStore(small_config(tmp_path))
    await slave.start()
    try:
        assert slave.max_phy_offset == 0
        assert not slave.append_to_commit_log(17, b"x")
    finally:
        await slave.shutdown()


async def test_consume_queue_units_match_records(store: MessageStore) -> None:
    for i in range(100):
        await store.put_message(msg(queue_id=3, tags=f"t{i % 4}", body=b"z" * i))
    cq = store.find_consume_queue("T", 3)
    assert cq is not None and cq.max_offset == 100 and len(cq.queue.files) == 2
    units = cq.get_units(0, 64)
    assert units is not None
    for index, (phys, size, tags) in enumerate(CQ_UNIT.iter_unpack(units)):
        record = record_at(store, phys, size)
        assert record.queue_offset == index
        assert tags == java_string_hash(f"t{index % 4}")


async def copy_log(master: MessageStore, slave: MessageStore, offset: int) -> None:
    """Replicate the master's log from ``offset`` to its end, as the HA client does."""
    while offset < master.max_phy_offset:
        chunk = master.get_commit_log_data(offset, 32 * 1024)
        assert chunk is not None
        assert slave.append_to_commit_log(offset, bytes(chunk))
        offset += len(chunk)


async def test_slave_resets_its_log_to_join_at_a_file_boundary(store: MessageStore, tmp_path: Path) -> None:
    for i in range(300):
        await store.put_message(msg(queue_id=i % 2, body=bytes(900), tags="x"))
    join = store.commit_log.queue.files[-2].file_from_offset  # the master's file before its last
    slave = MessageStore(small_config(tmp_path / "slave"))
    await slave.start()
    try:
        assert not slave.reset_commit_log(join + 1)  # not a file boundary
        assert slave.reset_commit_log(join)
        assert slave.max_phy_offset == slave.min_phy_offset == join
        await copy_log(store, slave, join)
        assert slave.max_phy_offset == store.max_phy_offset
        check_consistency(slave)
        for queue_id in (0, 1):
            assert slave.get_max_offset_in_queue("T", queue_id) == store.get_max_offset_in_queue("T", queue_id)
            first = slave.get_min_offset_in_queue("T", queue_id)
            assert first > 0
            got = slave.get_messages("g", "T", queue_id, first, 32)
            assert got.message_queue_offsets[0] == first
            assert store.get_messages("g", "T", queue_id, first, 1).body() == got.message_buffers[0].tobytes()
        held = slave.max_phy_offset
        assert not slave.reset_commit_log(join)  # never backwards
        assert slave.max_phy_offset == held
    finally:
        await slave.shutdown()
    again = MessageStore(small_config(tmp_path / "slave"))
    await again.start()
    try:
        assert again.min_phy_offset == join and again.max_phy_offset == store.max_phy_offset
        check_consistency(again)
    finally:
        await again.shutdown()


async def test_slave_resync_drops_its_old_log(store: MessageStore, tmp_path: Path) -> None:
    for i in range(200):
        await store.put_message(msg(body=bytes([i % 256]) * 700))
    slave = MessageStore(small_config(tmp_path / "slave"))
    await slave.start()
    try:
        await copy_log(store, slave, 0)
        old_files = [m.path for m in slave.commit_log.queue.files]
        for i in range(200):  # the master moves on; the slave is away and the master deletes old files
            await store.put_message(msg(body=bytes([i % 256]) * 700))
        resume = store.commit_log.queue.files[-1].file_from_offset
        assert resume > slave.max_phy_offset
        assert slave.reset_commit_log(resume)
        await eventually(lambda: not any(exists(p) for p in old_files), timeout=5, message="old files deleted")
        await copy_log(store, slave, resume)
        check_consistency(slave)
        old = slave.get_messages("g", "T", 0, 0, 32)
        assert old.status is GetMessageStatus.OFFSET_TOO_SMALL
        assert old.next_begin_offset == slave.get_min_offset_in_queue("T", 0) > 200
        assert slave.get_max_offset_in_queue("T", 0) == 400
    finally:
        await slave.shutdown()
