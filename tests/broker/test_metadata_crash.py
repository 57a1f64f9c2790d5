"""A broker process killed (SIGKILL) while clients create topics and subscription groups from several connections
at once: restarted on the same store, it has every topic and group whose creation was answered, and its files read
back as a consistent table (the journal's torn tail, if any, cut)."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path

import pytest

from pocketmq.broker.metadata import SubscriptionGroupManager, load_topics
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import PocketMQError
from pocketmq.remoting.headers import CreateTopicRequestHeader
from tests.procs import start_broker, start_namesrv

pytestmark = pytest.mark.timeout(120)
WRITERS = 4


async def create_until_killed(broker: str, seconds: float) -> tuple[set[str], set[str]]:
    """Topics and groups created (answered SUCCESS) by ``WRITERS`` connections until ``seconds`` pass or the broker
    goes away."""
    topics: set[str] = set()
    groups: set[str] = set()
    deadline = time.monotonic() + seconds

    async def writer(w: int) -> None:
        client = RemotingClient()
        try:
            i = 0
            while time.monotonic() < deadline:
                topic = CreateTopicRequestHeader(f"K{w}x{i}", "TBW102", 2, 2, 6, "SINGLE_TAG").to_fields()
                group = json.dumps({"groupName": f"KG{w}x{i}", "retryMaxTimes": i % 17}).encode()
                for code, fields, body, done, name in (
                        (RequestCode.UPDATE_AND_CREATE_TOPIC, topic, None, topics, f"K{w}x{i}"),
                        (RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, group, groups, f"KG{w}x{i}")):
                    answer = await client.invoke(broker, RemotingCommand.request(code, fields, body), 5.0)
                    if answer.code == ResponseCode.SUCCESS:
                        done.add(name)
                i += 1
        except PocketMQError:
            return  # the broker was killed
        finally:
            await client.close()

    await asyncio.gather(*(writer(w) for w in range(WRITERS)))
    return topics, groups


def test_answered_creations_survive_a_kill_in_the_middle_of_them(tmp_path: Path) -> None:
    ns = start_namesrv(kv_dir=tmp_path)
    store = tmp_path / "store"
    broker = start_broker(namesrv=ns.addr, store_dir=store)
    try:
        async def run() -> tuple[set[str], set[str]]:
            work = asyncio.ensure_future(create_until_killed(broker.addr, 20.0))
            await asyncio.sleep(2.0)  # creations under way from every connection
            broker.signal(signal.SIGKILL)
            return await work

        topics, groups = asyncio.run(run())
        broker.popen.wait(10)
        assert len(topics) > 20 and len(groups) > 20
        stored_topics = {c.topic_name for c in load_topics(str(store / "config" / "topics.json")).topics}
        assert topics <= stored_topics
        stored_groups = SubscriptionGroupManager(str(store / "config" / "subscriptionGroup.json"), auto_create=False)
        assert stored_groups.load() and groups <= set(stored_groups.table)
        again = start_broker(namesrv=ns.addr, store_dir=store)
        try:
            async def check() -> None:
                client = RemotingClient()
                try:
                    answer = await client.invoke(again.addr, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG))
                    assert topics <= set(json.loads(bytes(answer.body or b""))["topicConfigTable"])
                    answer = await client.invoke(again.addr, RemotingCommand.request(
                        RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))
                    table = json.loads(bytes(answer.body or b""))["subscriptionGroupTable"]
                    assert groups <= set(table)
                    assert all(table[g]["retryMaxTimes"] == int(g.rpartition("x")[2]) % 17 for g in groups)
                finally:
                    await client.close()

            asyncio.run(check())
        finally:
            again.kill()
    finally:
        broker.kill()
        ns.kill()
