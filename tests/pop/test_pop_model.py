"""The POP wire vocabulary and revive-log records against literal RocketMQ 5 strings and bytes, and the
in-memory state's ownership rules (pure, no broker)."""

from __future__ import annotations

import base64
import json

import pytest

from pocketmq.broker.pop.records import AckMsg, PopCheckPoint, PopSnapshot
from pocketmq.broker.pop.state import PopState
from pocketmq.common.pop import (
    BatchAck,
    PopFormatError,
    ReceiptHandle,
    build_extra_info,
    decode_batch_ack_body,
    encode_batch_ack_body,
    msg_offset_entry,
    normal_topic,
    order_count_entries,
    parse_msg_offset_info,
    parse_order_count_info,
    parse_start_offset_info,
    pop_retry_topic,
    real_topic,
    retry_marker,
    revive_topic,
    start_offset_entry,
)
from pocketmq.remoting.pop_headers import PopMessageRequestHeader


def test_topic_names_are_rocketmq_5s() -> None:
    assert revive_topic("DefaultCluster") == "rmq_sys_REVIVE_LOG_DefaultCluster"
    assert pop_retry_topic("T", "G") == "%RETRY%G_T"
    assert pop_retry_topic("T", "G", v2=True) == "%RETRY%G+T"
    assert [retry_marker(t) for t in ("T", "%RETRY%G_T", "%RETRY%G+T")] == ["0", "1", "2"]
    assert real_topic("T", "G", "1") == "%RETRY%G_T" and real_topic("T", "G", "0") == "T"
    assert normal_topic("%RETRY%G_T_x", "G") == "T_x" and normal_topic("%RETRY%G+T", "G") == "T"
    with pytest.raises(PopFormatError):
        real_topic("T", "G", "7")


def test_extra_info_and_the_proxys_receipt_handle() -> None:
    ck = build_extra_info(10, 1700000000000, 60000, 3, "%RETRY%G_T", "broker-a", 0, 12)
    assert ck == "10 1700000000000 60000 3 1 broker-a 0 12"
    handle = ReceiptHandle.decode(ck + " 4096")
    assert handle == ReceiptHandle(10, 1700000000000, 60000, 3, "1", "broker-a", 0, 12, 4096)
    assert handle.encode() == ck + " 4096" and handle.extra_info() == ck
    assert handle.next_visible_time == 1700000060000 and handle.is_retry and not handle.is_order
    assert ReceiptHandle.decode("5 1 2 999 0 b 3").offset == -1  # a Java client's seven-field form
    assert ReceiptHandle.decode("5 1 2 999 0 b 3 5").is_order


@pytest.mark.parametrize("text", ["", "1 2 3", "a 1 2 3 0 b 0 1", "1 2 3 4 9 b 0 1", "1 2 3 4 0  0 1",
                                  "1 2 3 4 0 b 0 1 2 3"])
def test_malformed_handles_are_refused(text: str) -> None:
    with pytest.raises(PopFormatError):
        ReceiptHandle.decode(text)


def test_offset_infos() -> None:
    start = ";".join([start_offset_entry("T", 1, 0), start_offset_entry("%RETRY%G_T", 0, 5)])
    msgs = ";".join([msg_offset_entry("T", 1, [0, 1, 3]), msg_offset_entry("%RETRY%G_T", 0, [5])])
    assert start == "0 1 0;1 0 5" and msgs == "0 1 0,1,3;1 0 5"
    assert parse_start_offset_info(start) == {"0@1": 0, "1@0": 5}
    assert parse_msg_offset_info(msgs) == {"0@1": [0, 1, 3], "1@0": [5]}
    counts = ";".join(order_count_entries("T", 2, {7: 3}, 0))
    assert counts == "0 qo2%7 3;0 2 0"
    assert parse_order_count_info(counts) == {"0@qo2%7": 3, "0@2": 0}
    assert parse_start_offset_info("") == {}
    with pytest.raises(PopFormatError):
        parse_msg_offset_info("0 1")


def test_batch_ack_body_as_fastjson_writes_it() -> None:
    # BitSet {0, 2, 9}.toByteArray() = [0x05, 0x02]; fastjson writes byte[] as base64.
    java = (b'{"acks":[{"b":"BQI=","c":"G","it":60000,"pt":1700000000000,"q":1,"r":"0","rq":3,"so":10,"t":"T"}],'
            b'"brokerName":"broker-a"}')
    broker, acks = decode_batch_ack_body(java)
    assert broker == "broker-a"
    assert acks == [BatchAck("G", "T", "0", 10, 1, 3, 1700000000000, 60000, [10, 12, 19])]
    assert encode_batch_ack_body("broker-a", acks) == java
    long_names = {"acks": [{"bitSet": base64.b64encode(b"\x01").decode(), "consumerGroup": "G", "invisibleTime": 1,
                            "popTime": 2, "queueId": 0, "retry": "1", "reviveQueueId": 0, "startOffset": 4,
                            "topic": "T"}]}
    assert decode_batch_ack_body(json.dumps(long_names).encode())[1][0].offsets == [4]


@pytest.mark.parametrize("body", [b"nope", b"[]", b'{"acks":{}}', b'{"acks":[{"c":"G"}]}',
                                  b'{"acks":[{"b":"!!","c":"G","it":1,"pt":1,"q":0,"r":"0","rq":0,"so":0,"t":"T"}]}'])
def test_malformed_batch_ack_bodies(body: bytes) -> None:
    with pytest.raises(PopFormatError):
        decode_batch_ack_body(body)


def test_pop_header_as_a_java_client_sends_it() -> None:
    fields = {"consumerGroup": "G", "topic": "T", "queueId": "-1", "maxMsgNums": "32", "invisibleTime": "60000",
              "pollTime": "15000", "bornTime": "1700000000000", "initMode": "0", "expType": "SQL92",
              "exp": "a > 1", "order": "false", "bname": "broker-a", "lo": "false"}
    h = PopMessageRequestHeader.from_fields(fields)
    assert (h.consumer_group, h.queue_id, h.invisible_time, h.exp_type, h.order) == ("G", -1, 60000, "SQL92", False)
    assert PopMessageRequestHeader.from_fields({k: v for k, v in fields.items() if k != "bornTime"}).born_time == 0


def test_revive_records_round_trip_in_rocketmq_keys() -> None:
    ck = PopCheckPoint("T", "G", 1, 10, 1700000000000, 60000, "broker-a", [10, 11, 13])
    assert ck.encode() == (b'{"bn":"broker-a","c":"G","d":[0,1,3],"it":60000,"n":3,"pt":1700000000000,"q":1,'
                           b'"so":10,"t":"T"}')
    assert PopCheckPoint.decode(ck.encode()) == ck
    # A check point without offset diffs (RocketMQ before 5.0): ``n`` consecutive messages.
    old = PopCheckPoint.decode(b'{"bm":0,"c":"G","it":5,"n":2,"pt":7,"q":0,"so":3,"t":"T"}')
    assert old.offsets == [3, 4]
    ack = AckMsg("T", "G", 1, 10, 1700000000000, "broker-a", [13])
    assert ack.encode() == b'{"ao":13,"bn":"broker-a","c":"G","pt":1700000000000,"q":1,"so":10,"t":"T"}'
    assert ack.tag == "ack" and AckMsg.decode(ack.encode()) == ack
    batch = AckMsg("T", "G", 1, 10, 1, "b", [10, 11])
    assert batch.tag == "bAck" and AckMsg.decode(batch.encode()).offsets == [10, 11]
    snap = PopSnapshot([3, 0], {("T", "G", 1): 14, ("%RETRY%G_T", "G", 0): 2}, 5)
    assert PopSnapshot.decode(snap.encode()) == snap
    with pytest.raises(PopFormatError):
        PopCheckPoint.decode(b'{"t":"T"}')


def _ck(start: int, offsets: list[int], pop_time: int = 1000, invisible: int = 100,
        order: bool = False) -> PopCheckPoint:
    return PopCheckPoint("T", "G", 0, start, pop_time, invisible, "b", offsets, order)


def test_ownership_and_committed_offset() -> None:
    state = PopState(8)
    first = state.register(_ck(0, [0, 1, 2]), 0)
    q = state.queue(("T", "G", 0))
    q.pop_offset = 3
    assert q.committed() == 0 and state.inflight_by_group == {"G": 3}
    assert state.settle(first, 1) and not state.settle(first, 1)  # twice: the second is refused
    assert q.committed() == 0
    assert state.settle(first, 0)
    assert q.committed() == 2
    # A change of invisible time: a later check point takes offset 2 over; the old handle no longer finds it.
    later = state.register(_ck(2, [2], pop_time=2000), 0)
    assert state.find(first.ck.key, 2) is None and state.find(later.ck.key, 2) is later
    assert not state.known(first.ck.key)  # the first one owns nothing any more
    assert state.settle(later, 2) and q.committed() == 3 and state.inflight_by_group == {}


def test_deadlines_and_fifo_delivery_counts() -> None:
    state = PopState(8)
    live = state.register(_ck(0, [0, 1], order=True), 0)
    q = state.queue(("T", "G", 0))
    assert q.blocked(1050, None) and not q.blocked(1100, None)
    assert state.due(1099, 10) == [] and state.due(1100, 10) == [live]
    again = state.register(_ck(0, [0, 1], pop_time=1200, order=True), 0)  # re-popped after expiry
    assert q.counts == {0: 1, 1: 1}
    state.register(_ck(1, [1], pop_time=1200, invisible=500, order=True), 0)  # a change keeps the pop time
    assert q.counts == {0: 1, 1: 1} and state.find(again.ck.key, 0) is again


def test_snapshot_starts_replay_at_the_oldest_live_check_point() -> None:
    state = PopState(2)
    a = state.register(_ck(0, [0]), 0)
    a.stored, a.revive_offset = True, 5
    b = state.register(_ck(1, [1]), 0)
    b.stored, b.revive_offset = True, 6
    state.queue(("T", "G", 0)).pop_offset = 2
    assert state.snapshot([9, 4], 0).revive_offsets == [5, 4]
    state.settle(a, 0)
    snap = state.snapshot([9, 4], 0)
    assert snap.revive_offsets == [6, 4] and snap.pop_offsets == {("T", "G", 0): 2}


def test_a_check_point_being_stored_holds_the_snapshot_at_its_floor() -> None:
    """A SYNC_MASTER's check point is in the revive queue (the end has moved past it) before it is stored (the slave
    has not confirmed it): the snapshot must not start the replay after it, or a restart from that snapshot would
    find its pop neither replayed nor counted, and hand the queue's messages out again."""
    state = PopState(1)
    pending = state.register(_ck(0, [0, 1, 2]), 0)
    pending.revive_offset = 7  # the revive queue's end when the pop wrote its record
    q = state.queue(("T", "G", 0))
    q.pending, q.pop_offset = pending, 3
    snap = state.snapshot([8], 0)  # the record (offset 7) is appended, not yet stored
    assert snap.revive_offsets == [7] and snap.pop_offsets == {("T", "G", 0): 0}
    pending.stored, q.pending = True, None
    assert state.snapshot([8], 0).revive_offsets == [7]
    for offset in (0, 1, 2):
        state.settle(pending, offset)
    snap = state.snapshot([8], 0)
    assert snap.revive_offsets == [8] and snap.pop_offsets == {("T", "G", 0): 3}


def test_message_group_hash_is_guavas_consistent_hash() -> None:
    from pocketmq.client.core.message import MessageQueue
    from pocketmq.client.producer.message_group import consistent_hash, message_group_queue
    from pocketmq.common.message import java_hash

    # Guava's HashingTest golden values (the C++ jump hash agrees with them).
    assert [consistent_hash(i, 100) for i in range(20)] == [0, 55, 62, 8, 45, 59, 86, 97, 82, 59, 73, 37, 17, 56, 86,
                                                            21, 90, 37, 38, 83]
    assert consistent_hash(10863919174838991, 11) == 6
    assert consistent_hash(2016238256797177309, 11) == 3
    assert consistent_hash(1673758223894951030, 11) == 5
    assert (consistent_hash(2, 100001), consistent_hash(2201, 100001), consistent_hash(2202, 100001)) == (
        80343, 22152, 15018)
    # A negative String.hashCode() is sign-extended, as Java widens an int to a long.
    assert java_hash("order-7") < 0
    queues = [MessageQueue("T", b, q) for b in ("broker-b", "broker-a") for q in range(4)]
    picked = message_group_queue(queues, "order-7")
    assert picked == sorted(queues)[consistent_hash(java_hash("order-7"), 8)]
