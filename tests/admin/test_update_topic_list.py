"""Creating many topics at once: UPDATE_AND_CREATE_TOPIC_LIST on the broker and ``rmq-admin updateTopicList``
(from a file of RocketMQ TopicConfig JSON, or made up from a prefix), one invalid topic refusing the whole list, and
the fallback to one UPDATE_AND_CREATE_TOPIC per topic for a broker without the batch code (a RocketMQ 4 one). The
command itself is tested with the others (``tests/admin/test_cli_ops.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from pocketmq.admin.api import AdminClient
from pocketmq.broker.controller import BrokerController
from pocketmq.broker.processors.admin import MAX_TOPICS_PER_LIST
from pocketmq.common.topic_config import TopicConfig
from pocketmq.namesrv.controller import NamesrvController
from pocketmq.remoting import route as rd
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection
from pocketmq.remoting.headers import CreateTopicRequestHeader
from pocketmq.remoting.server import RemotingServer, ServerConfig

pytestmark = pytest.mark.timeout(60)


async def topic_list(broker: BrokerController, items: Sequence[object]) -> RemotingCommand:
    client = RemotingClient()
    try:
        body = rd.encode_body({"topicConfigList": items})
        return await client.invoke(broker.addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC_LIST, {},
                                                                        body))
    finally:
        await client.close()


async def test_a_list_is_created_whole_or_refused_whole(broker: BrokerController, namesrv: NamesrvController) -> None:
    good = [TopicConfig(f"Many{i}", 2, 3, 6).to_json_dict() for i in range(50)]
    assert (await topic_list(broker, good)).code == ResponseCode.SUCCESS
    assert all(namesrv.routes.pickup_topic_route_data(f"Many{i}") is not None for i in range(50))
    assert broker.topics.table["Many7"].write_queue_nums == 3
    version = broker.topics.data_version.counter
    assert (await topic_list(broker, good)).code == ResponseCode.SUCCESS  # unchanged: nothing to do
    assert broker.topics.data_version.counter == version
    for bad, remark in (([*good[:3], {"topicName": "bad topic!", "readQueueNums": 1, "writeQueueNums": 1}],
                         "illegal characters"),
                        ([{"topicName": "Zero", "readQueueNums": 0, "writeQueueNums": 1}], "queue nums"),
                        ([], "non-empty"), ([{"readQueueNums": 1}], "topicName"),
                        ([{"topicName": "X"}] * (MAX_TOPICS_PER_LIST + 1), "more than")):
        answer = await topic_list(broker, bad)
        assert answer.code == ResponseCode.SYSTEM_ERROR and remark in (answer.remark or ""), (remark, answer.remark)
    assert "Zero" not in broker.topics.table and broker.topics.data_version.counter == version


async def test_a_broker_without_the_batch_code_gets_one_topic_at_a_time(tmp_path: Path) -> None:
    """A RocketMQ 4 broker answers REQUEST_CODE_NOT_SUPPORTED to code 18: the admin client creates every topic of
    the list with UPDATE_AND_CREATE_TOPIC instead."""
    created: list[str] = []

    def create_one(req: RemotingCommand, conn: Connection) -> RemotingCommand:
        created.append(CreateTopicRequestHeader.from_command(req).topic)
        return req.response(ResponseCode.SUCCESS)

    old = RemotingServer(ServerConfig(), name="rocketmq4-broker")
    old.register(RequestCode.UPDATE_AND_CREATE_TOPIC, create_one)
    await old.start()
    try:
        async with AdminClient(["127.0.0.1:1"]) as admin:
            configs = [TopicConfig(f"Old{i}", 2, 2, 6) for i in range(40)]
            assert await admin.update_topic_list(configs, broker_addr=old.addr, chunk=15) == [old.addr]
        assert sorted(created) == sorted(c.topic_name for c in configs)
    finally:
        await old.stop()
