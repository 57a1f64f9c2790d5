"""Latency fault tolerance: isolation tables, selection around isolated brokers, pickOneAtLeast, bounds."""

from __future__ import annotations

from collections import Counter

import pytest

from pocketmq.client.core.message import MessageQueue
from pocketmq.client.producer.fault import LatencyFaultTolerance, MQFaultStrategy
from pocketmq.client.producer.topic_publish import TopicPublishInfo
from tests.client.routes import route


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def strategy(clock: FakeClock) -> MQFaultStrategy:
    return MQFaultStrategy(clock=clock)


def _info(*brokers: tuple[str, int], start: int = 0) -> TopicPublishInfo:
    return TopicPublishInfo.from_route("T", route(*brokers), start_index=start)


@pytest.mark.parametrize(
    ("latency", "duration"),
    [
        (0, 0),
        (49, 0),
        (50, 0),
        (100, 0),
        (549.9, 0),
        (550, 30000),
        (999, 30000),
        (1000, 60000),
        (1999, 60000),
        (2000, 120000),
        (3000, 180000),
        (14999, 180000),
        (15000, 600000),
        (30000, 600000),
    ],
)
def test_not_available_duration_table(strategy: MQFaultStrategy, latency: float, duration: int) -> None:
    assert strategy.compute_not_available_duration(latency) == duration


def test_tables_are_validated() -> None:
    with pytest.raises(ValueError, match="equal length"):
        MQFaultStrategy(latency_max=(1, 2), not_available_duration=(0,))
    with pytest.raises(ValueError, match="ascending"):
        MQFaultStrategy(latency_max=(2, 1), not_available_duration=(0, 0))


def test_failure_isolates_for_600_s_then_broker_returns(strategy: MQFaultStrategy, clock: FakeClock) -> None:
    info = _info(("a", 4), ("b", 4))
    strategy.update_fault_item("a", 3, isolation=True)  # a connect error: fast, but a failure
    item = strategy.latency_fault_tolerance.get("a")
    assert item is not None and item.current_latency == 3 and item.start_timestamp == clock.now + 600_000
    for _ in range(100):
        assert strategy.select_one_message_queue(info).broker_name == "b"
    clock.now += 599_999
    assert not strategy.is_available("a")
    assert {strategy.select_one_message_queue(info).broker_name for _ in range(16)} == {"b"}
    clock.now += 1
    assert strategy.is_available("a")
    spread = Counter(strategy.select_one_message_queue(info).broker_name for _ in range(800))
    assert spread == {"a": 400, "b": 400}


def test_slow_success_isolates_by_latency(strategy: MQFaultStrategy, clock: FakeClock) -> None:
    info = _info(("a", 2), ("b", 2))
    strategy.update_fault_item("a", 1200, isolation=False)
    assert {strategy.select_one_message_queue(info).broker_name for _ in range(10)} == {"b"}
    clock.now += 60_000
    assert strategy.is_available("a")


def test_fast_answers_leave_the_table_empty(strategy: MQFaultStrategy) -> None:
    for name in ("a", "b", "c"):
        strategy.update_fault_item(name, 12, isolation=False)
    assert len(strategy.latency_fault_tolerance) == 0


def test_fast_answer_ends_an_isolation(strategy: MQFaultStrategy) -> None:
    strategy.update_fault_item("a", 5, isolation=True)
    assert not strategy.is_available("a")
    strategy.update_fault_item("a", 20, isolation=False)
    assert strategy.is_available("a")


def test_retry_avoids_last_broker_even_when_it_is_available(strategy: MQFaultStrategy) -> None:
    """The inverted check of RocketMQ #1576 sent retries back to the broker that had just failed."""
    info = _info(("a", 4), ("b", 4), ("c", 4))
    strategy.update_fault_item("c", 5, isolation=True)  # table non-empty: the fault path runs
    for start in range(12):
        info = _info(("a", 4), ("b", 4), ("c", 4), start=start)
        assert strategy.select_one_message_queue(info, "a").broker_name == "b"
        assert strategy.select_one_message_queue(info, "b").broker_name == "a"


def test_only_last_broker_available_is_still_chosen(strategy: MQFaultStrategy) -> None:
    info = _info(("a", 2), ("b", 2))
    strategy.update_fault_item("b", 5, isolation=True)
    assert strategy.select_one_message_queue(info, "a").broker_name == "a"


def test_all_isolated_uses_pick_one_at_least_without_mutating_queues(
    strategy: MQFaultStrategy, clock: FakeClock
) -> None:
    info = _info(("a", 4), ("b", 4))
    before = [(id(q), q.topic, q.broker_name, q.queue_id) for q in info.message_queues]
    strategy.update_fault_item("a", 4000, isolation=False)  # 180 s, slower
    strategy.update_fault_item("b", 600, isolation=False)  # 30 s, faster: the least bad
    picks = [strategy.select_one_message_queue(info) for _ in range(40)]
    assert {q.broker_name for q in picks} == {"b"}
    assert Counter(picks) == {q: 10 for q in info.queues_of("b")}  # spread over b's queues
    assert all(any(p is q for q in info.message_queues) for p in picks)  # never a new or changed object
    assert [(id(q), q.topic, q.broker_name, q.queue_id) for q in info.message_queues] == before
    assert info.queues_of("a") == tuple(MessageQueue("T", "a", i) for i in range(4))


def test_all_isolated_retry_prefers_another_broker(strategy: MQFaultStrategy, clock: FakeClock) -> None:
    info = _info(("a", 2), ("b", 2))
    strategy.update_fault_item("b", 3000, isolation=True)
    clock.now += 10
    strategy.update_fault_item("a", 2, isolation=True)  # just failed, fast: would sort first
    assert {strategy.select_one_message_queue(info, "a").broker_name for _ in range(10)} == {"b"}


def test_all_isolated_a_slow_answering_broker_beats_one_that_did_not_answer(
    strategy: MQFaultStrategy, clock: FakeClock
) -> None:
    info = _info(("a", 2), ("b", 2))
    strategy.update_fault_item("a", 1, isolation=True, answered=False)  # connection refused: fast, no answer
    strategy.update_fault_item("b", 3000, isolation=False)  # FLUSH_SLAVE_TIMEOUT after 3 s: slow but alive
    assert {strategy.select_one_message_queue(info).broker_name for _ in range(10)} == {"b"}


def test_unreachable_brokers_are_listed_for_the_probe_and_restored(
    strategy: MQFaultStrategy, clock: FakeClock
) -> None:
    table = strategy.latency_fault_tolerance
    strategy.update_fault_item("dead", 1, isolation=True, answered=False)
    strategy.update_fault_item("refusing", 1, isolation=True)  # answered with an error: not probed
    strategy.update_fault_item("slow", 3000, isolation=False)
    assert table.unreachable() == ["dead"]
    table.remove("dead")
    assert table.unreachable() == [] and strategy.is_available("dead")


def test_pick_only_among_the_topics_brokers(strategy: MQFaultStrategy) -> None:
    info = _info(("a", 2))
    strategy.update_fault_item("zzz", 1, isolation=True)  # other topic's broker, better latency
    strategy.update_fault_item("a", 5000, isolation=True)
    assert strategy.select_one_message_queue(info).broker_name == "a"
    assert strategy.latency_fault_tolerance.get("zzz") is not None  # not dropped from the table


def test_disabled_strategy_is_plain_round_robin(clock: FakeClock) -> None:
    strategy = MQFaultStrategy(send_latency_fault_enable=False, clock=clock)
    info = _info(("a", 4), ("b", 4))
    strategy.update_fault_item("a", 1, isolation=True)
    assert len(strategy.latency_fault_tolerance) == 0
    spread = Counter(strategy.select_one_message_queue(info).broker_name for _ in range(80))
    assert spread == {"a": 40, "b": 40}
    assert strategy.select_one_message_queue(info, "a").broker_name == "b"


def test_pick_one_at_least_order_and_turns(clock: FakeClock) -> None:
    table = LatencyFaultTolerance(clock=clock)
    assert table.pick_one_at_least() is None
    table.update_fault_item("slow", 5000, 10_000)
    assert table.pick_one_at_least() == "slow"  # a single entry
    table.update_fault_item("fast", 100, 10_000)
    table.update_fault_item("mid", 1000, 10_000)
    clock.now += 1
    table.update_fault_item("fast-later", 100, 10_000)  # same latency, isolation ends later
    # Sorted: fast, fast-later, mid, slow; turns over the better half.
    assert [table.pick_one_at_least() for _ in range(4)] == ["fast", "fast-later", "fast", "fast-later"]
    table.update_fault_item("back", 9000, 0)
    assert table.get("back") is None  # not isolated and unknown: no entry
    table.update_fault_item("slow", 9000, 0)  # known, now available: sorts first despite latency
    assert table.pick_one_at_least() == "slow"
    assert table.pick_one_at_least(among={"mid", "slow-x"}) == "mid"
    table.remove("mid")
    table.remove("mid")
    assert table.get("mid") is None and table.pick_one_at_least(among={"mid"}) is None


def test_table_is_bounded(clock: FakeClock) -> None:
    table = LatencyFaultTolerance(clock=clock, max_items=3)
    table.update_fault_item("a", 1, 1000)
    table.update_fault_item("b", 1, 50)
    table.update_fault_item("c", 1, 2000)
    table.update_fault_item("d", 1, 3000)  # full: b ends isolation first and goes
    assert len(table) == 3 and table.get("b") is None
    clock.now += 1500  # a is available again
    table.update_fault_item("e", 1, 3000)
    assert len(table) == 3 and table.get("a") is None
    for index in range(100):
        table.update_fault_item(f"x{index}", 1, 10_000 + index)
    assert len(table) == 3
    with pytest.raises(ValueError, match="at least 1"):
        LatencyFaultTolerance(max_items=0)


def test_strategy_table_bound_is_configurable(clock: FakeClock) -> None:
    strategy = MQFaultStrategy(clock=clock, max_items=10)
    for index in range(1000):
        strategy.update_fault_item(f"broker-{index}", 1, isolation=True)
    assert len(strategy.latency_fault_tolerance) == 10
