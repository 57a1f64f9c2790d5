"""Every operations command of ``rmq-admin`` (``admin/commands_*.py``) against a real name server and broker.

The cluster, a producer and a push consumer run on an event loop in a background thread (the commands run
their own ``asyncio.run`` through :func:`pocketmq.admin.cli.main`, called here in-process); outputs are read as JSON
(``--json``) and, for a few, as the human table.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pocketmq.admin import cli
from pocketmq.client import Message, Producer
from pocketmq.client.consumer.push import PushConsumer
from pocketmq.common.topic_config import TopicConfig
from tests.client.consumer.consumer_support import (
    Cluster,
    Recorder,
    caught_up,
    cluster,
    create_topic,
    instance_name,
    produce,
    push_consumer,
)
from tests.helpers import LoopThread, wait_until

TOPIC = "CliT"
GROUP = "CliG"
PRODUCER_GROUP = "CliPG"
SENT = 6
_LOG_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ")


@dataclass
class Env:
    loop: LoopThread
    c: Cluster
    consumer: PushConsumer
    recorder: Recorder
    before_first: int

    @property
    def ns(self) -> str:
        return self.c.namesrv_addr

    @property
    def broker_addr(self) -> str:
        return self.c.brokers["broker-a"].addr


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp: Path = tmp_path_factory.mktemp("cli-ops")
    loop = LoopThread()
    manager = cluster(tmp)
    try:
        c = loop.run(manager.__aenter__())
        try:
            loop.run(create_topic(c, TOPIC, 2))
            before = int(time.time() * 1000) - 1
            loop.run(produce(c, TOPIC, SENT))
            recorder = Recorder()
            consumer = push_consumer(c, GROUP, TOPIC, recorder)
            loop.run(consumer.start())
            producer = Producer(PRODUCER_GROUP, namesrv_addr=c.namesrv_addr, instance_name=instance_name("p"))
            loop.run(producer.start())
            try:
                loop.run(producer.send(Message(TOPIC, b"from-cli-producer")))  # learns the route: heartbeats
                wait_until(lambda: caught_up(consumer, c, TOPIC), timeout=20, message="consumed")
                yield Env(loop, c, consumer, recorder, before)
            finally:
                loop.run(producer.shutdown())
                loop.run(consumer.shutdown())
        finally:
            loop.run(manager.__aexit__(None, None, None))
    finally:
        loop.close()


def rmq(capsys: pytest.CaptureFixture[str], env: Env, *argv: str, expect: int = 0, as_json: bool = True) -> Any:
    capsys.readouterr()
    code = cli.main([*argv, "-n", env.ns, *(["--json"] if as_json else [])])
    out, err = capsys.readouterr()
    out = "\n".join(line for line in out.splitlines() if not _LOG_LINE.match(line))  # the SDK's logs (its thread)
    assert code == expect, (argv, code, err)
    return json.loads(out) if as_json and expect == 0 else out + err


def test_subscription_group_commands(capsys: pytest.CaptureFixture[str], env: Env) -> None:
    made = rmq(capsys, env, "updateSubGroup", "-c", "DefaultCluster", "-g", "CliSub", "-r", "5", "-q", "2",
               "-d", "false")
    assert made["brokers"] == [env.broker_addr]
    listed = {g["groupName"]: g for g in rmq(capsys, env, "subGroupList")}
    assert (listed["CliSub"]["retryMaxTimes"], listed["CliSub"]["retryQueueNums"]) == (5, 2)
    assert listed["CliSub"]["consumeBroadcastEnable"] is False
    one = rmq(capsys, env, "getSubGroup", "-g", "CliSub", "-b", env.broker_addr)
    assert [g["brokerAddr"] for g in one] == [env.broker_addr]
    assert "CliSub" in rmq(capsys, env, "subGroupList", as_json=False)  # the human table
    rmq(capsys, env, "deleteSubGroup", "-g", "CliSub", "-r")
    assert "not found" in rmq(capsys, env, "getSubGroup", "-g", "CliSub", expect=1)


def test_connection_and_status_commands(capsys: pytest.CaptureFixture[str], env: Env) -> None:
    client_id = env.consumer.instance.client_id
    conn = rmq(capsys, env, "consumerConnection", "-g", GROUP)
    assert [c["clientId"] for c in conn["connectionSet"]] == [client_id]
    assert TOPIC in conn["subscriptionTable"]
    text = rmq(capsys, env, "consumerConnection", "-g", GROUP, as_json=False)
    assert client_id in text and "CLUSTERING" in text
    producers = rmq(capsys, env, "producerConnection", "-g", PRODUCER_GROUP, "-t", TOPIC)
    assert len(producers) == 1 and producers[0]["language"] == "PYTHON"
    assert "not online" in rmq(capsys, env, "producerConnection", "-g", "NoSuchPG", expect=1)
    status = rmq(capsys, env, "consumerStatus", "-g", GROUP)
    queues = {(q["topic"], q["queueId"]) for q in status[client_id]["mqTable"]}
    assert {(TOPIC, 0), (TOPIC, 1)} <= queues
    assert rmq(capsys, env, "consumerStatus", "-g", GROUP, "-i", client_id, "-s")[client_id]["jstack"]


def test_reset_and_skip_commands(capsys: pytest.CaptureFixture[str], env: Env) -> None:
    got_before = len(env.recorder.got)
    reset = rmq(capsys, env, "resetOffsetByTime", "-g", GROUP, "-t", TOPIC, "-s", str(env.before_first), "-f", "true")
    assert [e["offset"] for e in reset["offsets"]] == [0, 0]
    wait_until(lambda: len(env.recorder.got) >= got_before + SENT + 1, timeout=20, message="re-read after reset")
    assert sorted(m.queue_offset for m in env.recorder.got[got_before:])[:2] == [0, 0]
    wait_until(lambda: caught_up(env.consumer, env.c, TOPIC), timeout=20, message="caught up again")
    skipped = rmq(capsys, env, "skipAccumulatedMessage", "-g", GROUP, "-t", TOPIC)
    assert sum(e["offset"] for e in skipped["offsets"]) == SENT + 1
    assert "#queueId" in rmq(capsys, env, "skipAccumulatedMessage", "-g", GROUP, "-t", TOPIC, as_json=False)


def test_usage_errors_exit_2() -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["resetOffsetByTime", "-g", GROUP, "-t", TOPIC, "-s", "yesterday"])
    assert exc.value.code == 2


def test_topic_stats_and_rt_commands(capsys: pytest.CaptureFixture[str], env: Env) -> None:
    capsys.readouterr()
    assert cli.main(["-n", env.ns, "topicClusterList", "-t", TOPIC, "--json"]) == 0  # -n before the command
    assert json.loads(capsys.readouterr().out) == ["DefaultCluster"]
    rows = rmq(capsys, env, "statsAll", "-t", TOPIC)
    mine = next(r for r in rows if r["group"] == GROUP)
    assert mine["inMsg24Hour"] == SENT + 1 and mine["outMsg24Hour"] >= SENT + 1
    assert "#Accumulation" in rmq(capsys, env, "statsAll", as_json=False)
    rt = rmq(capsys, env, "clusterRT", "-a", "3", "-s", "16")
    assert [(r["brokerName"], r["successCount"], r["failCount"]) for r in rt] == [("broker-a", 3, 0)]


def test_broker_config_and_write_perm_commands(capsys: pytest.CaptureFixture[str], env: Env) -> None:
    config = rmq(capsys, env, "getBrokerConfig", "-b", env.broker_addr)
    assert config["brokerName"] == "broker-a" and config["brokerClusterName"] == "DefaultCluster"
    rmq(capsys, env, "updateBrokerConfig", "-c", "DefaultCluster", "-k", "autoCreateSubscriptionGroup", "-v", "false")
    assert rmq(capsys, env, "getBrokerConfig", "-b", env.broker_addr)["autoCreateSubscriptionGroup"] == "false"
    rmq(capsys, env, "updateBrokerConfig", "-b", env.broker_addr, "-k", "autoCreateSubscriptionGroup", "-v", "true")
    assert "cannot change listenPort" in rmq(capsys, env, "updateBrokerConfig", "-k", "listenPort", "-v", "1",
                                             expect=1)
    wiped = rmq(capsys, env, "wipeWritePerm", "-b", "broker-a")
    assert wiped[env.ns] >= 1
    added = rmq(capsys, env, "addWritePerm", "-b", "broker-a")
    assert added == wiped


def test_print_msg_command(capsys: pytest.CaptureFixture[str], env: Env) -> None:
    everything = rmq(capsys, env, "printMsg", "-t", TOPIC)
    assert len(everything) == SENT + 1
    assert {m["body"] for m in everything} >= {"m-0", "from-cli-producer"}
    one_queue = rmq(capsys, env, "printMsg", "-t", TOPIC, "-a", "broker-a", "-i", "0", "--begin-offset", "1",
                    "--end-offset", "2")
    assert [(m["queueId"], m["queueOffset"]) for m in one_queue] == [(0, 1)]


def test_update_topic_list_from_a_file_and_from_a_prefix(capsys: pytest.CaptureFixture[str], env: Env,
                                                         tmp_path: Path) -> None:
    path = tmp_path / "topics.json"
    path.write_text(json.dumps([TopicConfig(f"FromFile{i}", 4, 4, 6).to_json_dict() for i in range(1500)]))
    made = rmq(capsys, env, "updateTopicList", "-f", str(path))
    assert made["topics"] == 1500 and made["brokers"] == [env.broker_addr]
    text = rmq(capsys, env, "updateTopicList", "--prefix", "Made", "--count", "30", "-r", "3", "-w", "3", "-b",
               env.broker_addr, as_json=False)
    assert "30 topics in" in text
    listed = set(rmq(capsys, env, "topicList"))
    assert {f"FromFile{i}" for i in range(1500)} | {f"Made{i}" for i in range(30)} <= listed
    route = rmq(capsys, env, "topicRoute", "-t", "Made29")
    assert route["queueDatas"][0]["readQueueNums"] == 3
    path.write_text('[{"topicName": "ok1"}, {"topicName": "not ok"}]')
    assert "illegal characters" in rmq(capsys, env, "updateTopicList", "-f", str(path), expect=1, as_json=False)
    assert "ok1" not in set(rmq(capsys, env, "topicList"))
    assert "-f FILE" in rmq(capsys, env, "updateTopicList", expect=1, as_json=False)
