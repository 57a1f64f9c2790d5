"""Every admin code of issue 19 against a real name server and broker (in the test's loop), each body checked
by :mod:`tests.admin.rocketmq_json` (RocketMQ 4.9's field names, parsed without the code under test)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from pocketmq.broker.metadata import SubscriptionGroupManager
from pocketmq.client import Message, Producer
from pocketmq.client.consumer.push import PushConsumer
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from tests.admin.rocketmq_json import check, parse
from tests.client.consumer.consumer_support import (
    Cluster,
    Recorder,
    admin,
    caught_up,
    cluster,
    create_topic,
    instance_name,
    produce,
    push_consumer,
)
from tests.helpers import eventually

TOPIC = "AdminT"
GROUP = "AdminG"


async def ok(addr: str, code: int, fields: dict[str, str] | None = None, body: bytes | None = None) -> RemotingCommand:
    resp = await admin(addr, code, fields, body)
    assert resp.code == ResponseCode.SUCCESS, (code, resp.code, resp.remark)
    return resp


async def test_subscription_groups_are_created_listed_persisted_and_deleted(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        b = c.brokers["broker-a"]
        config = {"groupName": "SubG", "retryMaxTimes": 3, "retryQueueNums": 2, "consumeBroadcastEnable": False}
        await ok(b.addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=json.dumps(config).encode())
        wrapper = check(parse((await ok(b.addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)).body),
                        "SubscriptionGroupWrapper")
        check(wrapper["dataVersion"], "DataVersion")
        group = check(wrapper["subscriptionGroupTable"]["SubG"], "SubscriptionGroupConfig")
        assert (group["retryMaxTimes"], group["retryQueueNums"], group["consumeBroadcastEnable"]) == (3, 2, False)
        stored = SubscriptionGroupManager(str(tmp_path / "broker-a-0" / "config" / "subscriptionGroup.json"),
                                          auto_create=False)
        assert await asyncio.to_thread(stored.load)  # the snapshot and the journal: written when the call returned
        saved = stored.get("SubG")
        assert saved is not None and saved.retry_max_times == 3
        bad = await admin(b.addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                          body=b'{"groupName":"bad group!","retryQueueNums":1}')
        assert bad.code == ResponseCode.SYSTEM_ERROR and "illegal characters" in (bad.remark or "")
        b.offsets.commit_offset("SubG", "T", 0, 5)
        await ok(b.addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": "SubG", "removeOffset": "true"})
        table = parse((await ok(b.addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)).body)["subscriptionGroupTable"]
        assert "SubG" not in table and b.offsets.query_offset("SubG", "T", 0) == -1
        assert (await admin(b.addr, 9999)).code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


async def test_topic_and_consume_stats_bodies(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        b = c.brokers["broker-a"]
        await create_topic(c, TOPIC, 2)
        before = int(time.time() * 1000)
        await produce(c, TOPIC, 6)
        b.offsets.commit_offset(GROUP, TOPIC, 0, 1)
        stats = check(parse((await ok(b.addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": TOPIC})).body),
                      "TopicStatsTable")
        offsets = {k: check(v, "TopicOffset") for k, v in stats["offsetTable"].items()}
        assert set(offsets) == {f"{TOPIC}|broker-a|0", f"{TOPIC}|broker-a|1"}
        assert sum(v["maxOffset"] for v in offsets.values()) == 6
        assert all(v["lastUpdateTimestamp"] >= before for v in offsets.values() if v["maxOffset"])
        topic = check(parse((await ok(b.addr, RequestCode.GET_TOPIC_CONFIG, {"topic": TOPIC})).body), "TopicConfig")
        assert topic["readQueueNums"] == 2
        missing = await admin(b.addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": "NoSuchTopic"})
        assert missing.code == ResponseCode.TOPIC_NOT_EXIST

        consume = check(parse((await ok(b.addr, RequestCode.GET_CONSUME_STATS,
                                        {"consumerGroup": GROUP, "topic": TOPIC})).body), "ConsumeStats")
        wrappers = {k: check(v, "OffsetWrapper") for k, v in consume["offsetTable"].items()}
        assert wrappers[f"{TOPIC}|broker-a|0"]["consumerOffset"] == 1
        assert wrappers[f"{TOPIC}|broker-a|0"]["lastTimestamp"] >= before
        assert sum(w["brokerOffset"] - w["consumerOffset"] for w in wrappers.values()) == 5
        listing = check(parse((await ok(b.addr, RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": "false"})).body),
                        "ConsumeStatsList")
        assert listing["brokerAddr"] == b.addr and listing["totalDiff"] == 5
        assert [list(e) for e in listing["consumeStatsList"]] == [[GROUP]]
        check(listing["consumeStatsList"][0][GROUP][0], "ConsumeStats")

        who = check(parse((await ok(b.addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": TOPIC})).body),
                    "GroupList")
        assert who["groupList"] == [GROUP]
        span = check(parse((await ok(b.addr, RequestCode.QUERY_CONSUME_TIME_SPAN,
                                     {"topic": TOPIC, "group": GROUP})).body), "QueryConsumeTimeSpanBody")
        spans = [check(s, "QueueTimeSpan") for s in span["consumeTimeSpanSet"]]
        assert [check(s["messageQueue"], "MessageQueue")["queueId"] for s in spans] == [0, 1]
        assert all(s["maxTimeStamp"] >= before for s in spans if s["minTimeStamp"])

        data = check(parse((await ok(b.addr, RequestCode.VIEW_BROKER_STATS_DATA,
                                     {"statsName": "TOPIC_PUT_NUMS", "statsKey": TOPIC})).body), "BrokerStatsData")
        assert all(check(data[w], "BrokerStatsItem")["sum"] == 6 for w in ("statsMinute", "statsHour", "statsDay"))
        absent = await admin(b.addr, RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": "TOPIC_PUT_NUMS",
                                                                         "statsKey": "nope"})
        assert absent.code == ResponseCode.SYSTEM_ERROR and "not exist" in (absent.remark or "")


async def test_broker_config_acl_info_and_write_permission(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        b = c.brokers["broker-a"]
        await create_topic(c, TOPIC, 2)
        got = await ok(b.addr, RequestCode.GET_BROKER_CONFIG)
        check(json.loads((got.ext_fields or {})["version"]), "DataVersion")
        text = bytes(got.body or b"").decode()
        assert "brokerName=broker-a" in text and "autoCreateTopicEnable=true" in text
        await ok(b.addr, RequestCode.UPDATE_BROKER_CONFIG, body=b"autoCreateTopicEnable=false\n")
        assert b.topics.auto_create_topic_enable is False
        text = bytes((await ok(b.addr, RequestCode.GET_BROKER_CONFIG)).body or b"").decode()
        assert "autoCreateTopicEnable=false" in text
        refused = await admin(b.addr, RequestCode.UPDATE_BROKER_CONFIG, body=b"listenPort=1\n")
        assert refused.code == ResponseCode.SYSTEM_ERROR and "brokerPermission" in (refused.remark or "")
        await ok(b.addr, RequestCode.UPDATE_BROKER_CONFIG, body=b"brokerPermission=4\n")
        assert b.config.broker_permission == 4
        await ok(b.addr, RequestCode.UPDATE_BROKER_CONFIG, body=b"brokerPermission=6\n")

        acl = await ok(b.addr, RequestCode.GET_BROKER_CLUSTER_ACL_INFO)
        info = check(parse(acl.body), "ClusterAclVersionInfo")
        assert (info["brokerName"], info["brokerAddr"], info["allAclConfigDataVersion"]) == ("broker-a", b.addr, {})
        assert (acl.ext_fields or {})["clusterName"] == "DefaultCluster"

        wiped = await ok(c.namesrv_addr, RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
        assert int((wiped.ext_fields or {})["wipeTopicCount"]) >= 1
        route = json.loads(bytes((await ok(c.namesrv_addr, RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                            {"topic": TOPIC})).body or b""))
        assert route["queueDatas"][0]["perm"] == 4  # read only
        added = await ok(c.namesrv_addr, RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
        assert int((added.ext_fields or {})["addTopicCount"]) == int((wiped.ext_fields or {})["wipeTopicCount"])
        route = json.loads(bytes((await ok(c.namesrv_addr, RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                            {"topic": TOPIC})).body or b""))
        assert route["queueDatas"][0]["perm"] == 6
        system = check(parse((await ok(c.namesrv_addr, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS)).body), "TopicList")
        assert system["topicList"] == ["DefaultCluster", "broker-a"] and system["brokerAddr"] == b.addr
        by_cluster = parse((await ok(c.namesrv_addr, RequestCode.GET_TOPICS_BY_CLUSTER,
                                     {"cluster": "DefaultCluster"})).body)
        assert TOPIC in by_cluster["topicList"]


async def _consuming(c: Cluster, recorder: Recorder) -> PushConsumer:
    consumer = push_consumer(c, GROUP, TOPIC, recorder)
    await consumer.start()
    return consumer


async def test_clients_running_info_direct_consume_status_and_reset(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        b = c.brokers["broker-a"]
        await create_topic(c, TOPIC, 2)
        before = int(time.time() * 1000) - 1
        sent = await produce(c, TOPIC, 10)
        recorder = Recorder()
        consumer = await _consuming(c, recorder)
        await create_topic(c, "AdminP", 1)
        producer = Producer("AdminPG", namesrv_addr=c.namesrv_addr, instance_name=instance_name("p"))
        await producer.start()
        try:
            await producer.send(Message("AdminP", b"p"))  # a producer heartbeats the brokers it knows routes to
            await eventually(lambda: caught_up(consumer, c, TOPIC), timeout=20, message="consumed")
            assert sorted(recorder.bodies) == sorted(sent)
            client_id = consumer.instance.client_id

            conn = check(parse((await ok(b.addr, RequestCode.GET_CONSUMER_CONNECTION_LIST,
                                         {"consumerGroup": GROUP})).body), "ConsumerConnection")
            assert [check(x, "Connection")["clientId"] for x in conn["connectionSet"]] == [client_id]
            assert conn["connectionSet"][0]["language"] == "PYTHON" and conn["messageModel"] == "CLUSTERING"
            await eventually(lambda: "AdminPG" in b.clients.producers, message="producer heartbeat")
            prod = check(parse((await ok(b.addr, RequestCode.GET_PRODUCER_CONNECTION_LIST,
                                         {"producerGroup": "AdminPG"})).body), "ProducerConnection")
            assert [check(x, "Connection")["clientId"] for x in prod["connectionSet"]] == [producer.instance.client_id]

            running = check(parse((await ok(b.addr, RequestCode.GET_CONSUMER_RUNNING_INFO,
                                            {"consumerGroup": GROUP, "clientId": client_id,
                                             "jstackEnable": "false"})).body), "ConsumerRunningInfo")
            for queue in running["mqTable"].values():
                check(queue, "ProcessQueueInfo")
            assert sum(v["commitOffset"] for v in running["mqTable"].values()) == 10
            assert set(running["mqTable"]) == {f"{TOPIC}|broker-a|0", f"{TOPIC}|broker-a|1",
                                               f"%RETRY%{GROUP}|broker-a|0"}
            check(running["statusTable"][TOPIC], "ConsumeStatus")
            assert running["properties"]["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
            offline = await admin(b.addr, RequestCode.GET_CONSUMER_RUNNING_INFO,
                                  {"consumerGroup": GROUP, "clientId": "nobody@1"})
            assert offline.code == ResponseCode.SYSTEM_ERROR and "not online" in (offline.remark or "")

            msg = recorder.got[0]
            direct = check(parse((await ok(b.addr, RequestCode.CONSUME_MESSAGE_DIRECTLY,
                                           {"consumerGroup": GROUP, "clientId": client_id,
                                            "msgId": msg.offset_msg_id, "brokerName": "broker-a"})).body),
                           "ConsumeMessageDirectlyResult")
            assert direct["consumeResult"] == "CR_SUCCESS"
            assert recorder.got[-1].body == msg.body and len(recorder.got) == 11

            status = check(parse((await ok(b.addr, RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
                                           {"topic": TOPIC, "group": GROUP})).body), "GetConsumerStatusBody")
            assert sum(status["consumerTable"][client_id].values()) == 10

            # Reset to before the first message: the live consumer reads all ten again.
            reset = check(parse((await ok(b.addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                                          {"topic": TOPIC, "group": GROUP, "timestamp": str(before),
                                           "isForce": "true"})).body), "ResetOffsetBody")
            assert set(reset["offsetTable"].values()) == {0}
            await eventually(lambda: len(recorder.got) >= 21, timeout=20, message="re-read after reset")
            assert sorted(m.body.decode() for m in recorder.got[11:]) == sorted(sent)
            assert min(m.queue_offset for m in recorder.got[11:]) == 0
        finally:
            await producer.shutdown()
            await consumer.shutdown()

        # Offline group: the broker resets the stored offsets itself; -1 = the end (skipAccumulatedMessage).
        await ok(b.addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                 {"topic": TOPIC, "group": GROUP, "timestamp": str(before), "isForce": "true"})
        assert b.offsets.query_offsets(GROUP, TOPIC) == {0: 0, 1: 0}
        kept = await ok(b.addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                        {"topic": TOPIC, "group": GROUP, "timestamp": "-1", "isForce": "false"})
        assert set(parse(kept.body)["offsetTable"].values()) == {0}  # not forced: never moves forward
        await ok(b.addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                 {"topic": TOPIC, "group": GROUP, "timestamp": "-1", "isForce": "true"})
        assert sum(b.offsets.query_offsets(GROUP, TOPIC).values()) == 10
        gone = await admin(b.addr, RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, {"topic": TOPIC, "group": GROUP})
        assert gone.code == ResponseCode.SYSTEM_ERROR


#: Keys rocketmq-exporter's BrokerRuntimeStats parses with Long/Double.parseXxx (a missing one drops the broker).
EXPORTER_LONGS = ("msgPutTotalTodayNow", "sendThreadPoolQueueHeadWaitTimeMills",
                  "queryThreadPoolQueueHeadWaitTimeMills", "msgGetTotalTodayNow", "queryThreadPoolQueueSize",
                  "bootTimestamp", "msgPutTotalYesterdayMorning",
                  "msgGetTotalYesterdayMorning", "pullThreadPoolQueueSize", "commitLogMinOffset",
                  "pullThreadPoolQueueHeadWaitTimeMills", "dispatchMaxBuffer", "brokerVersion",
                  "pageCacheLockTimeMills",
                  "commitLogMaxOffset", "getMessageEntireTimeMax", "msgPutTotalTodayMorning", "putMessageTimesTotal",
                  "msgGetTotalTodayMorning", "sendThreadPoolQueueSize", "startAcceptSendRequestTimeStamp",
                  "putMessageEntireTimeMax", "earliestMessageTimeStamp", "remainTransientStoreBufferNumbs",
                  "queryThreadPoolQueueCapacity", "dispatchBehindBytes", "putMessageSizeTotal",
                  "sendThreadPoolQueueCapacity", "pullThreadPoolQueueCapacity")
EXPORTER_DOUBLES = ("consumeQueueDiskRatio", "commitLogDiskRatio", "putMessageAverageSize")
EXPORTER_TPS = ("putTps", "getMissTps", "getTransferedTps", "getTotalTps", "getFoundTps")


async def test_runtime_info_has_every_key_the_exporter_parses(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        b = c.brokers["broker-a"]
        await create_topic(c, TOPIC, 1)
        await produce(c, TOPIC, 3)
        await eventually(lambda: b.store is not None and b.store.disk is not None, message="first disk check")
        table = parse((await ok(b.addr, RequestCode.GET_BROKER_RUNTIME_INFO)).body)["table"]
        for key in EXPORTER_LONGS:
            int(table[key])
        for key in EXPORTER_DOUBLES:
            float(table[key])
        for key in EXPORTER_TPS:
            assert len([float(x) for x in table[key].split(" ")]) == 3
        assert float(table["remainHowManyDataToFlush"].split(" ")[0]) >= 0
        total, free = table["commitLogDirCapacity"].split(" ")[2:4], table["commitLogDirCapacity"].split(" ")[6:8]
        assert float(total[0]) >= float(free[0]) and total[1] == "GiB," and free[1] == "GiB."
        assert int(table["putMessageTimesTotal"]) == 3 and table["putMessageDistributeTime"] == "null"
