"""A slave's consume-queue requests read typed (:func:`store.dispatch_kernel.dispatch_requests`): for every record it
answers, the answer is :func:`common.record.check_record`'s (no CRC); what it does not take it leaves to the scanner."""

from __future__ import annotations

from pocketmq.common import compiled
from pocketmq.common.record import DispatchRequest, check_record
from pocketmq.common.record_encoder import encode_record
from pocketmq.common.sysflag import MessageSysFlag
from pocketmq.common.topic import RMQ_SYS_SCHEDULE_TOPIC
from pocketmq.store import dispatch_kernel
from pocketmq.store.dispatch_kernel import dispatch_requests

_CASES = (
    ("TopicA", "TAGS\x01tagA\x02KEYS\x01k"),
    ("TopicA", "KEYS\x01k\x02TAGS\x01first\x02TAGS\x01second"),
    ("TopicA", "TAGS\x01"),
    ("TopicA", ""),
    ("TopicA", "TAGS\x01caf\u00e9"),
    ("T\u00f3pico", "TAGS\x01t"),
    (RMQ_SYS_SCHEDULE_TOPIC, "DELAY\x013\x02TAGS\x01t"),
)


def _span(base: int) -> bytes:
    out = bytearray()
    for n, (topic, properties) in enumerate(_CASES):
        for born, stored in ((bytes(8), bytes(8)), (bytes(20), bytes(20))):
            out += encode_record(topic=topic, body=b"b" * n, properties=properties, queue_id=n, queue_offset=7 + n,
                                 physical_offset=base + len(out), store_timestamp=1_700_000_000_000 + n,
                                 sys_flag=MessageSysFlag.TRANSACTION_COMMIT_TYPE if n == 1 else 0,
                                 born_host=born, store_host=stored)
    return bytes(out)


def _walk(data: bytes, base: int) -> list[tuple[DispatchRequest | None, DispatchRequest]]:
    view = memoryview(bytearray(data))
    found = []
    pos = 0
    while pos < len(data):
        expected = check_record(view, pos, len(data), base_offset=base, check_crc=False)
        assert isinstance(expected, DispatchRequest)
        got = dispatch_requests(view, pos, len(data), base, 1)
        found.append((got[0] if got else None, expected))
        pos += expected.msg_size
    return found


def test_every_answer_is_check_records() -> None:
    found = _walk(_span(4096), 4096)
    assert all(got is None or (got == expected and type(got) is DispatchRequest) for got, expected in found)
    if compiled.loaded_from_extension(dispatch_kernel):
        # the usual records are answered; a non-ASCII tag, an unseen topic and the delay topic are not
        answered = [got is not None for got, _expected in found]
        assert answered == [True] * 8 + [False] * 2 + [True] * 2 + [False] * 2
    else:
        assert all(got is None for got, _expected in found)


def test_a_record_at_another_offset_is_left_to_the_scanner() -> None:
    data = _span(0)
    view = memoryview(bytearray(data))
    check_record(view, 0, len(data), base_offset=0, check_crc=False)  # the topic is known
    assert dispatch_requests(view, 0, len(data), 64, 100) == []
    assert dispatch_requests(view, 0, 40, 0, 100) == []  # cut by the written limit
    assert dispatch_requests(memoryview(data), 0, len(data), 0, 100) == []  # read-only


def test_a_run_ends_before_the_first_record_it_does_not_take() -> None:
    data = _span(0)
    view = memoryview(bytearray(data))
    for _got, _expected in _walk(data, 0):
        pass  # every topic known
    run = dispatch_requests(view, 0, len(data), 0, 100)
    if compiled.loaded_from_extension(dispatch_kernel):
        assert [r.queue_id for r in run] == [0, 0, 1, 1, 2, 2, 3, 3]  # then the non-ASCII tag
        assert dispatch_requests(view, 0, len(data), 0, 3) == run[:3]
    else:
        assert run == []
