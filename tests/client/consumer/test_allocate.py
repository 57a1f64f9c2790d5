"""Queue allocation within a consumer group (reference §8)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pocketmq.client.consumer.allocate import (
    ALLOCATE_STRATEGIES,
    allocate_averagely,
    allocate_averagely_by_circle,
    plan_rebalance,
    sort_client_ids,
    sort_queues,
)
from pocketmq.client.core.message import MessageQueue


def queues(*spec: tuple[str, int], topic: str = "T") -> list[MessageQueue]:
    return [MessageQueue(topic, broker, qid) for broker, count in spec for qid in range(count)]


def ids(result: list[MessageQueue]) -> list[str]:
    return [f"{mq.broker_name}:{mq.queue_id}" for mq in result]


# -- the worked cases of the rule ---------------------------------------------------------------------


def test_eight_queues_three_consumers() -> None:
    mqs = queues(("a", 4), ("b", 4))
    cids = ["c2", "c0", "c1"]  # unsorted on purpose
    # mod = 2: c0 and c1 get 3 queues, c2 gets 2; contiguous ranges in sorted order.
    assert ids(allocate_averagely("G", "c0", mqs, cids)) == ["a:0", "a:1", "a:2"]
    assert ids(allocate_averagely("G", "c1", mqs, cids)) == ["a:3", "b:0", "b:1"]
    assert ids(allocate_averagely("G", "c2", mqs, cids)) == ["b:2", "b:3"]


def test_more_consumers_than_queues_leaves_the_last_ones_idle() -> None:
    mqs = queues(("a", 2))
    cids = ["c0", "c1", "c2", "c3"]
    assert [ids(allocate_averagely("G", c, mqs, cids)) for c in cids] == [["a:0"], ["a:1"], [], []]


def test_equal_counts_give_one_each() -> None:
    mqs = queues(("a", 3))
    cids = ["x", "y", "z"]
    assert [ids(allocate_averagely("G", c, mqs, cids)) for c in cids] == [["a:0"], ["a:1"], ["a:2"]]


def test_unknown_consumer_or_no_queues_get_nothing() -> None:
    mqs = queues(("a", 4))
    assert allocate_averagely("G", "stranger", mqs, ["c0", "c1"]) == []
    assert allocate_averagely("G", "c0", mqs, []) == []
    assert allocate_averagely("G", "c0", [], ["c0"]) == []
    with pytest.raises(ValueError):
        allocate_averagely("G", "", mqs, ["c0"])


def test_by_circle() -> None:
    mqs = queues(("a", 4), ("b", 1))
    cids = ["c1", "c0"]
    assert ids(allocate_averagely_by_circle("G", "c0", mqs, cids)) == ["a:0", "a:2", "b:0"]
    assert ids(allocate_averagely_by_circle("G", "c1", mqs, cids)) == ["a:1", "a:3"]
    assert allocate_averagely_by_circle("G", "zz", mqs, cids) == []


def test_java_orderings() -> None:
    # Queue order: topic, broker name, then queue id as a number (10 after 9).
    mqs = [MessageQueue("T", "b", 10), MessageQueue("T", "b", 9), MessageQueue("S", "z", 0), MessageQueue("T", "a", 1)]
    assert sort_queues(mqs) == [mqs[2], mqs[3], mqs[1], mqs[0]]
    # Java compares UTF-16 code units: U+FF5E sorts after a surrogate pair (U+1F600 = D83D DE00); Python's
    # code-point order would put it first.
    assert sort_client_ids(["\uff5e", "\U0001f600", "a"]) == ["a", "\U0001f600", "\uff5e"]


def _expected_sizes(q: int, c: int) -> list[int]:
    """Independent of the rule's arithmetic: deal q queues to c consumers, the first q % c get one more."""
    return [q // c + (1 if i < q % c else 0) for i in range(c)]


@pytest.mark.parametrize("q", range(0, 13))
@pytest.mark.parametrize("c", range(1, 8))
def test_exhaustive_small_cases(q: int, c: int) -> None:
    mqs = queues(("a", q))
    cids = [f"10.0.0.{i}@{i}" for i in range(c)]
    results = [allocate_averagely("G", cid, mqs, cids) for cid in sort_client_ids(cids)]
    assert [len(r) for r in results] == _expected_sizes(q, c)
    assert [mq for r in results for mq in r] == sort_queues(mqs)  # contiguous, in order, each once
    circle = [allocate_averagely_by_circle("G", cid, mqs, cids) for cid in cids]
    assert sorted(mq for r in circle for mq in r) == sorted(mqs)


_queue_sets = st.lists(
    st.tuples(st.sampled_from(["T", "U"]), st.sampled_from(["broker-a", "broker-b", "c"]), st.integers(0, 20)),
    unique=True,
    max_size=40,
).map(lambda items: [MessageQueue(*item) for item in items])
_cid_sets = st.lists(st.text(min_size=1, max_size=8), unique=True, min_size=1, max_size=12)


@given(_queue_sets, _cid_sets, st.sampled_from(sorted(ALLOCATE_STRATEGIES)), st.randoms())
def test_every_queue_goes_to_exactly_one_consumer(
    mqs: list[MessageQueue], cids: list[str], strategy_name: str, rnd: random.Random
) -> None:
    strategy = ALLOCATE_STRATEGIES[strategy_name]
    results = {cid: strategy("G", cid, mqs, cids) for cid in cids}
    assigned = [mq for r in results.values() for mq in r]
    assert sorted(assigned) == sorted(mqs)
    sizes = [len(r) for r in results.values()]
    assert max(sizes) - min(sizes) <= 1
    # deterministic, whatever order each consumer happens to list the queues and ids in
    shuffled_mqs, shuffled_cids = list(mqs), list(cids)
    rnd.shuffle(shuffled_mqs)
    rnd.shuffle(shuffled_cids)
    for cid in cids:
        assert strategy("G", cid, shuffled_mqs, shuffled_cids) == results[cid]


def test_plan_rebalance() -> None:
    a0, a1, a2, b0 = queues(("a", 3), ("b", 1))
    plan = plan_rebalance([a0, a1, b0], [a1, a2])
    assert plan.added == (a2,)
    assert plan.removed == (a0, b0)
    assert plan.kept == (a1,)
    assert plan.changed
    assert not plan_rebalance([a0], [a0]).changed
