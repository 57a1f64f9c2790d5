"""Route comparison: a refresh that brings the same route (in another order) changes nothing."""

from __future__ import annotations

import copy

from pocketmq.client.core.route_table import route_changed
from tests.client.routes import route


def test_route_changed_ignores_order() -> None:
    one = route(("a", 4), ("b", 4))
    other = copy.deepcopy(one)
    other.queue_datas.reverse()
    other.broker_datas.reverse()
    assert not route_changed(one, other)
    assert route_changed(one, route(("a", 4), ("b", 4), perm=4))
    assert route_changed(one, route(("a", 4), ("b", 5)))
    assert route_changed(None, one) and not route_changed(None, None)
    moved = copy.deepcopy(one)
    moved.broker_datas[0].broker_addrs[0] = "10.9.9.9:10911"
    assert route_changed(one, moved)
