"""Publish queues from routes, and round-robin selection that avoids the last failed broker."""

from __future__ import annotations

import copy
import itertools
from collections import Counter

import pytest

from pocketmq.client.core.errors import NoRouteError
from pocketmq.client.core.message import MessageQueue
from pocketmq.client.core.route_table import default_route_for_topic
from pocketmq.client.producer.topic_publish import TopicPublishInfo
from pocketmq.remoting.route import BrokerData, QueueData, TopicRouteData
from tests.client.routes import route


def _names(info: TopicPublishInfo) -> list[tuple[str, int]]:
    return [(q.broker_name, q.queue_id) for q in info.message_queues]


def test_queues_sorted_by_broker_with_write_queue_ids() -> None:
    info = TopicPublishInfo.from_route("T", route(("broker-b", 2), ("broker-a", 3)))
    assert _names(info) == [("broker-a", i) for i in range(3)] + [("broker-b", i) for i in range(2)]
    assert all(q.topic == "T" for q in info.message_queues)
    assert info.ok and info.have_topic_router_info and not info.order_topic
    assert info.broker_names == {"broker-a", "broker-b"}
    assert info.write_queue_nums("broker-a") == 3 and info.write_queue_nums("nope") == 0
    assert info.queues_of("broker-b") == info.message_queues[3:]
    assert info.master_addr("broker-b") == "10.0.0.0:10911"
    assert info.master_addr("broker-a") == "10.0.0.1:10911"


def test_write_queue_nums_not_read_queue_nums() -> None:
    data = TopicRouteData(
        [QueueData("a", read_queue_nums=8, write_queue_nums=2, perm=6)],
        [BrokerData("c", "a", {0: "h:1"})],
    )
    assert _names(TopicPublishInfo.from_route("T", data)) == [("a", 0), ("a", 1)]


@pytest.mark.parametrize(
    ("perm", "writable"), [(7, True), (6, True), (2, True), (4, False), (0, False), (8, False)]
)
def test_perm_filtering(perm: int, writable: bool) -> None:
    info = TopicPublishInfo.from_route("T", route(("a", 2), perm=perm))
    assert info.ok is writable


def test_slave_only_and_unknown_groups_are_excluded() -> None:
    data = route(("a", 2), ("b", 2), slave_only=frozenset({"b"}))
    data.queue_datas.append(QueueData("ghost", 4, 4, 6))  # no BrokerData at all
    info = TopicPublishInfo.from_route("T", data)
    assert _names(info) == [("a", 0), ("a", 1)]
    assert info.master_addr("b") is None


def test_order_topic_conf_overrides() -> None:
    data = route(("a", 8), ("b", 8), order_topic_conf="b:2;a:1;bad;c:x;:3;")
    info = TopicPublishInfo.from_route("T", data)
    assert _names(info) == [("b", 0), ("b", 1), ("a", 0)]
    assert info.order_topic and info.have_topic_router_info


def test_queue_counts_are_bounded() -> None:
    info = TopicPublishInfo.from_route("T", route(("a", 10**9)))
    assert len(info.message_queues) == 4096
    assert not TopicPublishInfo.from_route("T", route(("a", -3))).ok


def test_empty_placeholder_and_no_route() -> None:
    info = TopicPublishInfo.empty("T")
    assert not info.ok and not info.have_topic_router_info
    with pytest.raises(NoRouteError, match="No route info of this topic: T"):
        info.select_one_message_queue()
    with pytest.raises(NoRouteError):
        info.select_one_message_queue("a")


def test_route_is_not_mutated() -> None:
    data = route(("b", 2), ("a", 3), ("c", 1), slave_only=frozenset({"c"}))
    snapshot = copy.deepcopy(data)
    queue_datas = list(data.queue_datas)
    TopicPublishInfo.from_route("T", data)
    TopicPublishInfo.from_default_route("T", data)
    assert data == snapshot
    assert all(a is b for a, b in zip(data.queue_datas, queue_datas, strict=True))


def test_round_robin_is_sequential_and_even() -> None:
    info = TopicPublishInfo.from_route("T", route(("a", 4), ("b", 4)))
    picks = [info.select_one_message_queue() for _ in range(8000)]
    assert Counter(picks) == {q: 1000 for q in info.message_queues}
    positions = [info.message_queues.index(q) for q in picks[:9]]
    assert all((b - a) % 8 == 1 for a, b in itertools.pairwise(positions))
    assert Counter(q.broker_name for q in picks) == {"a": 4000, "b": 4000}


def test_random_start_differs_between_instances() -> None:
    data = route(("a", 4), ("b", 4))
    firsts = {TopicPublishInfo.from_route("T", data).select_one_message_queue() for _ in range(200)}
    assert len(firsts) > 1
    pinned = TopicPublishInfo.from_route("T", data, start_index=-1)
    assert pinned.select_one_message_queue() == MessageQueue("T", "a", 0)


@pytest.mark.parametrize("start", range(8))
def test_selection_avoids_last_broker(start: int) -> None:
    info = TopicPublishInfo.from_route("T", route(("a", 4), ("b", 4)), start_index=start)
    for _ in range(20):
        assert info.select_one_message_queue("a").broker_name == "b"
        assert info.select_one_message_queue("b").broker_name == "a"


def test_selection_with_one_broker_falls_back_to_round_robin() -> None:
    info = TopicPublishInfo.from_route("T", route(("a", 3)), start_index=0)
    picks = [info.select_one_message_queue("a") for _ in range(6)]
    assert Counter(picks) == {q: 2 for q in info.message_queues}
    assert info.select_one_message_queue("unknown").broker_name == "a"


def test_default_route_clamps_queue_nums() -> None:
    tbw = route(("a", 8), ("b", 3), perm=7)
    clamped = default_route_for_topic(tbw)
    assert [(q.broker_name, q.read_queue_nums, q.write_queue_nums) for q in clamped.queue_datas] == [
        ("a", 4, 4),
        ("b", 3, 3),
    ]
    assert tbw.queue_datas[0].write_queue_nums == 8  # TBW102's own route untouched
    info = TopicPublishInfo.from_default_route("NewTopic", tbw)
    assert _names(info) == [("a", 0), ("a", 1), ("a", 2), ("a", 3), ("b", 0), ("b", 1), ("b", 2)]
    assert info.have_topic_router_info and info.topic == "NewTopic"
    assert len(TopicPublishInfo.from_default_route("N", tbw, default_topic_queue_nums=2).message_queues) == 4


def test_default_route_uses_read_nums() -> None:
    tbw = TopicRouteData([QueueData("a", 2, 8, 7)], [BrokerData("c", "a", {0: "h:1"})])
    assert len(TopicPublishInfo.from_default_route("N", tbw).message_queues) == 2
