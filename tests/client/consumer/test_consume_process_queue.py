"""ProcessQueue: the commit-offset rule, flow control, and orderly take/commit/put-back."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from pocketmq.client.consumer.process_queue import FlowControl, ProcessQueue
from pocketmq.client.core.message_ext import MessageExt


def msgs(*offsets: int, size: int = 10, max_offset: int | None = None) -> list[MessageExt]:
    props = {"MAX_OFFSET": str(max_offset)} if max_offset is not None else None
    return [MessageExt.of("T", b"x" * size, queue_offset=o, properties=props) for o in offsets]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# -- concurrent: the offset to commit -----------------------------------------------------------------


def test_commit_offset_never_passes_a_message_in_flight() -> None:
    pq = ProcessQueue()
    batch = msgs(10, 11, 12, 13, 14)
    pq.put(batch)
    assert pq.remove([batch[2]]) == 10  # 12 done, 10 still running
    assert pq.remove([batch[4]]) == 10
    assert pq.remove([batch[0]]) == 11
    assert pq.remove([batch[1]]) == 13
    assert pq.remove([batch[3]]) == 15  # all done: one past the highest offset ever put
    assert pq.remove([batch[3]]) == -1  # nothing held
    assert pq.msg_count == 0
    assert pq.msg_size == 0


def test_remove_of_unknown_or_repeated_messages_is_harmless() -> None:
    pq = ProcessQueue()
    batch = msgs(1, 2)
    pq.put(batch)
    assert pq.remove(msgs(99)) == 1
    assert pq.remove([batch[0], batch[0]]) == 2
    assert pq.msg_count == 1


def test_duplicate_puts_count_once() -> None:
    pq = ProcessQueue()
    pq.put(msgs(1, 2))
    pq.put(msgs(2, 3))
    assert pq.msg_count == 3
    assert pq.msg_size == 30
    assert [m.queue_offset for m in pq.messages()] == [1, 2, 3]


@settings(max_examples=300)
@given(
    st.lists(st.lists(st.integers(0, 60), max_size=8), min_size=1, max_size=12),
    st.randoms(use_true_random=False),
)
def test_matches_a_sorted_set_model(batches: list[list[int]], rnd: random.Random) -> None:
    """Random puts (any order, duplicates) and random completions agree with a plain set model."""
    pq = ProcessQueue()
    live: dict[int, MessageExt] = {}
    highest = -1
    for offsets in batches:
        batch = msgs(*offsets)
        pq.put(batch)
        for m in batch:
            live.setdefault(m.queue_offset, m)
            highest = max(highest, m.queue_offset)
        done = rnd.sample(sorted(live), k=rnd.randint(0, len(live)))
        was_empty = not live
        result = pq.remove([live[o] for o in done])
        for o in done:
            del live[o]
        expected = -1 if was_empty else (min(live) if live else highest + 1)
        assert result == expected
        assert pq.msg_count == len(live)
        assert pq.max_span == (max(live) - min(live) if live else 0)
        assert pq.min_offset == (min(live) if live else None)
        assert [m.queue_offset for m in pq.messages()] == sorted(live)


def test_one_stuck_message_while_many_pass() -> None:
    pq = ProcessQueue(consume_concurrently_max_span=2000)
    pq.put(msgs(0))
    for start in range(1, 5001, 32):
        batch = msgs(*range(start, start + 32))
        pq.put(batch)
        assert pq.remove(batch) == 0
    assert pq.msg_count == 1
    assert pq.max_span == 0
    assert len(pq._offsets) < 200  # the dead offsets behind the stuck one were compacted away
    pq.put(msgs(5100))
    assert pq.max_span == 5100
    assert pq.flow_control() is FlowControl.SPAN
    assert pq.flow_control(orderly=True) is None


def test_thresholds() -> None:
    pq = ProcessQueue(pull_threshold_for_queue=3, pull_threshold_size_for_queue=1000)
    pq.put(msgs(1, 2, 3))
    assert not pq.is_over_threshold()
    assert pq.flow_control() is None
    pq.put(msgs(4))
    assert pq.is_over_threshold()
    assert pq.flow_control() is FlowControl.COUNT
    big = ProcessQueue(pull_threshold_size_for_queue=1000)
    big.put(msgs(1, size=1001))
    assert big.is_over_threshold()
    assert big.flow_control() is FlowControl.SIZE


def test_defaults_match_the_java_consumer() -> None:
    pq = ProcessQueue()
    assert pq.pull_threshold_for_queue == 1000
    assert pq.pull_threshold_size_for_queue == 100 * 1024 * 1024
    assert pq.consume_concurrently_max_span == 2000


def test_accumulated_count_from_max_offset() -> None:
    pq = ProcessQueue()
    pq.put(msgs(5, 6, max_offset=100))
    assert pq.msg_acc_cnt == 94
    pq.put(msgs(7))  # no MAX_OFFSET: unchanged
    assert pq.msg_acc_cnt == 94


def test_put_asks_for_a_consume_task_once() -> None:
    pq = ProcessQueue()
    assert not pq.put([])
    assert pq.put(msgs(1))
    assert not pq.put(msgs(2))
    assert pq.consuming


def test_clear_and_dropped() -> None:
    pq = ProcessQueue()
    pq.put(msgs(1, 2))
    pq.dropped = True
    pq.clear()
    assert len(pq) == 0
    assert pq.messages() == []
    assert pq.remove(msgs(1)) == -1


# -- orderly --------------------------------------------------------------------------------------------


def test_orderly_take_commit() -> None:
    pq = ProcessQueue()
    pq.put(msgs(3, 1, 2, 4))
    taken = pq.take_messages(2)
    assert [m.queue_offset for m in taken] == [1, 2]
    assert pq.msg_count == 4  # still counted until committed
    assert pq.commit() == 3
    assert pq.msg_count == 2
    assert pq.msg_size == 20
    assert [m.queue_offset for m in pq.take_messages(10)] == [3, 4]
    assert pq.commit() == 5
    assert pq.commit() == -1
    assert pq.take_messages(1) == []
    assert not pq.consuming  # the next put asks for a new consume task
    assert pq.put(msgs(5))


def test_orderly_consume_again_keeps_order() -> None:
    pq = ProcessQueue()
    pq.put(msgs(1, 2, 3, 4))
    first = pq.take_messages(2)
    pq.make_message_to_consume_again(first)
    assert pq.msg_count == 4
    assert [m.queue_offset for m in pq.take_messages(3)] == [1, 2, 3]
    pq.rollback()
    assert [m.queue_offset for m in pq.take_messages(4)] == [1, 2, 3, 4]
    assert not pq.has_temp_messages()
    assert pq.commit() == 5


def test_lock_and_pull_expiry() -> None:
    clock = Clock()
    pq = ProcessQueue(clock=clock)
    assert not pq.locked
    pq.mark_locked()
    assert pq.locked
    clock.now += 29.9
    assert not pq.is_lock_expired()
    clock.now += 0.2
    assert pq.is_lock_expired()
    pq.mark_locked()  # renewed (every 20 s)
    assert not pq.is_lock_expired()
    assert not pq.is_pull_expired()
    clock.now += 121
    assert pq.is_pull_expired()
    pq.mark_pulled()
    assert not pq.is_pull_expired()


def test_timestamps_follow_the_clock() -> None:
    clock = Clock()
    pq = ProcessQueue(clock=clock)
    pq.put(msgs(1))
    clock.now = 2000.0
    pq.remove(msgs(1))
    assert pq.last_consume_timestamp == 2000.0
    clock.now = 3000.0
    pq.take_messages(1)
    assert pq.last_consume_timestamp == 3000.0
    assert "count=0" in repr(pq)


@settings(max_examples=300)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("put"), st.lists(st.integers(0, 40), max_size=6)),
            st.tuples(st.just("take"), st.integers(0, 5)),
            st.tuples(st.just("commit"), st.just(0)),
            st.tuples(st.just("again"), st.just(0)),
        ),
        max_size=30,
    )
)
def test_orderly_matches_a_model(ops: list[tuple[str, object]]) -> None:
    pq = ProcessQueue()
    held: set[int] = set()
    taken: list[int] = []
    for op, arg in ops:
        if op == "put":
            assert isinstance(arg, list)
            batch = [o for o in arg if o not in taken]  # a taken offset is never re-pulled while taken
            pq.put(msgs(*batch))
            held.update(batch)
        elif op == "take":
            assert isinstance(arg, int)
            got = [m.queue_offset for m in pq.take_messages(arg)]
            want = sorted(held)[:arg]
            assert got == want
            held.difference_update(got)
            taken.extend(got)
        elif op == "commit":
            assert pq.commit() == (max(taken) + 1 if taken else -1)
            taken.clear()
        else:
            pq.make_message_to_consume_again(msgs(*taken))
            held.update(taken)
            taken.clear()
        assert pq.msg_count == len(held) + len(taken)
        assert [m.queue_offset for m in pq.messages()] == sorted(held)
