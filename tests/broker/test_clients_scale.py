"""Many clients (:mod:`pocketmq.broker.client_manager`, :mod:`pocketmq.broker.ids_change`): a burst of joins notifies
each member once, not once per join; a group that turned notifications off gets none; an unchanged heartbeat is not
parsed again, but one after an unregister is; a closing connection takes only its own clients away."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import cast

import pytest

from pocketmq.broker import client_manager
from pocketmq.broker.controller import BrokerController
from pocketmq.broker.processors import client_manage
from pocketmq.common.subscription import SubscriptionData
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection, Handler
from tests.helpers import eventually

pytestmark = pytest.mark.timeout(60)


def heartbeat(client_id: str, *groups: str) -> bytes:
    return json.dumps({"clientID": client_id, "consumerDataSet": [
        {"groupName": g, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
         "subscriptionDataSet": [{"topic": "T", "subString": "*"}]} for g in groups]}).encode()


class Clients:
    """``count`` clients on their own connections, counting the notifications each receives, by group."""

    def __init__(self, count: int) -> None:
        self.remotes = [RemotingClient() for _ in range(count)]
        self.notified: list[Counter[str]] = [Counter() for _ in range(count)]
        for remote, seen in zip(self.remotes, self.notified, strict=True):
            remote.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self._counter(seen))

    @staticmethod
    def _counter(seen: Counter[str]) -> Handler:
        def on_notify(req: RemotingCommand, conn: Connection) -> None:
            seen[req.field("consumerGroup") or ""] += 1
        return on_notify

    async def beat(self, broker: BrokerController, index: int, *groups: str) -> None:
        request = RemotingCommand.request(RequestCode.HEART_BEAT, None, heartbeat(f"c{index}", *groups))
        assert (await self.remotes[index].invoke(broker.addr, request)).code == ResponseCode.SUCCESS

    def total(self, group: str) -> int:
        return sum(seen[group] for seen in self.notified)

    async def close(self) -> None:
        await asyncio.gather(*(remote.close() for remote in self.remotes))


async def test_a_burst_of_joins_notifies_each_member_once(broker: BrokerController) -> None:
    broker.ids_notifier.coalesce = 1.0  # the burst below surely falls within one gathering
    clients = Clients(10)
    try:
        await asyncio.gather(*(clients.beat(broker, i, "Burst") for i in range(10)))
        await eventually(lambda: clients.total("Burst") >= 10, message="members notified")
        await asyncio.sleep(1.5)  # a second notification would have come by now
        assert [seen["Burst"] for seen in clients.notified] == [1] * 10  # RocketMQ would send 55
        await clients.remotes[3].close()
        await eventually(lambda: clients.total("Burst") == 19, message="the nine left notified of the leave")
    finally:
        await clients.close()


async def test_a_group_with_notifications_off_gets_none(broker: BrokerController) -> None:
    broker.ids_notifier.coalesce = 0.01
    body = json.dumps({"groupName": "Quiet", "notifyConsumerIdsChangedEnable": False}).encode()
    update = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, body)
    clients = Clients(3)
    try:
        assert (await clients.remotes[0].invoke(broker.addr, update)).code == ResponseCode.SUCCESS
        for i in range(3):
            await clients.beat(broker, i, "Quiet", "Loud")
        await eventually(lambda: clients.total("Loud") >= 3, message="the other group notified")
        assert clients.total("Quiet") == 0
    finally:
        await clients.close()


async def test_an_unchanged_heartbeat_is_not_parsed_again(broker: BrokerController,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[str] = []
    original = client_manager.parse_heartbeat

    def counting(raw: object) -> client_manager.HeartbeatData:
        data = original(raw)
        parsed.append(data.client_id)
        return data

    monkeypatch.setattr(client_manage, "parse_heartbeat", counting)
    clients = Clients(2)
    try:
        for _ in range(5):
            await clients.beat(broker, 0, "Same")
        assert parsed == ["c0"] and broker.clients.consumers["Same"].client_ids() == ["c0"]
        assert "%RETRY%Same" in broker.topics.table
        broker.topics.delete("%RETRY%Same")
        await clients.beat(broker, 0, "Same")  # not parsed, and still makes the retry topic it needs
        assert "%RETRY%Same" in broker.topics.table and parsed == ["c0"]
        unregister = RemotingCommand.request(RequestCode.UNREGISTER_CLIENT, {"clientID": "c0", "consumerGroup": "Same"})
        assert (await clients.remotes[0].invoke(broker.addr, unregister)).code == ResponseCode.SUCCESS
        assert broker.clients.consumers["Same"].client_ids() == []
        await clients.beat(broker, 0, "Same")  # the same bytes, but the client left meanwhile: parsed again
        assert parsed == ["c0", "c0"] and broker.clients.consumers["Same"].client_ids() == ["c0"]
        await clients.beat(broker, 1, "Same")  # another connection's body is its own
        assert parsed == ["c0", "c0", "c1"]
    finally:
        await clients.close()


async def test_a_closing_connection_takes_only_its_own_clients(broker: BrokerController) -> None:
    clients = Clients(3)
    try:
        await clients.beat(broker, 0, "A", "B")
        await clients.beat(broker, 1, "B")
        await clients.beat(broker, 2, "C")
        await clients.remotes[1].close()
        await eventually(lambda: broker.clients.consumers["B"].client_ids() == ["c0"], message="c1 gone from B")
        assert broker.clients.consumers["A"].client_ids() == ["c0"]
        assert broker.clients.consumers["C"].client_ids() == ["c2"]
    finally:
        await clients.close()


class _Conn:
    is_closed = False


def test_members_built_at_different_times_keep_the_newest_subscription() -> None:
    """A pull answers SUBSCRIPTION_NOT_LATEST while the broker holds an older version than the puller's; an unchanged
    heartbeat is not parsed again, so an older member's heartbeat must not replace a newer member's version."""
    clients = client_manager.ClientManager()
    newer, older = cast(Connection, _Conn()), cast(Connection, _Conn())

    def beat(client_id: str, version: int, conn: Connection) -> None:
        data = client_manager.HeartbeatData(client_id, (), (client_manager.ConsumerData(
            "G", subscriptions=(SubscriptionData("T", "*", sub_version=version),)),))
        clients.heartbeat(data, conn)

    beat("new@1", 200, newer)
    beat("old@1", 100, older)
    assert clients.consumers["G"].subscriptions["T"].sub_version == 200
    beat("new@1", 300, newer)  # a member that subscribes again moves the version on
    assert clients.consumers["G"].subscriptions["T"].sub_version == 300
