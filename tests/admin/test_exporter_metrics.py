"""rocketmq-exporter's metric names and labels, scraped from a real broker's ``/metrics`` (beside ``pocketmq_*``).

Names and label sets are those of apache/rocketmq-exporter's ``RMQMetricsCollector``, written out here
independently of :mod:`pocketmq.broker.exporter_metrics`.
"""

from __future__ import annotations

import asyncio
import json
import re
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from pocketmq.common.record import decode_message_id
from pocketmq.conf import grafana_dashboard
from pocketmq.remoting.codes import RequestCode, ResponseCode
from tests.client.consumer.consumer_support import (
    Recorder,
    admin,
    caught_up,
    cluster,
    create_topic,
    produce,
    push_consumer,
)
from tests.helpers import eventually

DASHBOARD = grafana_dashboard()
TOPIC = "MetT"
LIVE = "MetLiveG"
LAGGING = "MetLagG"
SENT = 5

EXPORTER_LABELS = {
    "rocketmq_broker_tps": {"cluster", "brokerIP", "broker"},
    "rocketmq_broker_qps": {"cluster", "brokerIP", "broker"},
    "rocketmq_producer_tps": {"cluster", "broker", "topic"},
    "rocketmq_producer_message_size": {"cluster", "broker", "topic"},
    "rocketmq_producer_offset": {"cluster", "broker", "topic"},
    "rocketmq_topic_retry_offset": {"cluster", "broker", "topic"},
    "rocketmq_topic_dlq_offset": {"cluster", "broker", "group"},
    "rocketmq_consumer_tps": {"cluster", "broker", "topic", "group"},
    "rocketmq_consumer_message_size": {"cluster", "broker", "topic", "group"},
    "rocketmq_consumer_offset": {"cluster", "broker", "topic", "group"},
    "rocketmq_group_diff": {"group", "topic", "countOfOnlineConsumers", "msgModel"},
    "rocketmq_group_retrydiff": {"group", "topic", "countOfOnlineConsumers", "msgModel"},
    "rocketmq_group_dlqdiff": {"group", "topic", "countOfOnlineConsumers", "msgModel"},
    "rocketmq_group_get_latency_by_storetime": {"cluster", "broker", "topic", "group"},
    "rocketmq_brokeruntime_msg_put_total_today_now": {"cluster", "brokerIP", "brokerHost", "des", "boottime",
                                                      "broker_version"},
    "rocketmq_brokeruntime_msg_gettotal_today_now": {"cluster", "brokerIP", "brokerHost", "des", "boottime",
                                                     "broker_version"},
    "rocketmq_brokeruntime_put_tps10": {"cluster", "brokerIP", "brokerHost", "des", "boottime", "broker_version"},
    "rocketmq_brokeruntime_commitlog_maxoffset": {"cluster", "brokerIP", "brokerHost", "des", "boottime",
                                                  "broker_version"},
}

Samples = dict[str, list[tuple[dict[str, str], float]]]


def scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    matching = [v for lab, v in samples.get(name, []) if all(lab.get(k) == x for k, x in labels.items())]
    assert len(matching) == 1, (name, labels, samples.get(name))
    return matching[0]


async def test_exporter_names_and_labels_are_scraped(tmp_path: Path) -> None:
    async with cluster(tmp_path, metrics_port=0) as c:
        b = c.brokers["broker-a"]
        assert b.metrics_server is not None
        port = b.metrics_server.bound_port
        await create_topic(c, TOPIC, 2)
        await produce(c, TOPIC, SENT)
        recorder = Recorder()
        consumer = push_consumer(c, LIVE, TOPIC, recorder)
        await consumer.start()
        try:
            # Its retry queue too: rocketmq_group_retrydiff needs an offset of it, which the consumer has only once
            # its rebalance of the retry topic has run (under load, after the topic's messages were consumed).
            await eventually(lambda: caught_up(consumer, c, TOPIC) and caught_up(consumer, c, f"%RETRY%{LIVE}"),
                             timeout=20, message="consumed, the retry queue's offset known")
            await consumer.persist_offsets()
            # An offline group that consumed one message per queue (lag 3), with one message in its DLQ.
            b.offsets.commit_offset(LAGGING, TOPIC, 0, 1)
            b.offsets.commit_offset(LAGGING, TOPIC, 1, 1)
            _ip, _port, phys = decode_message_id(recorder.got[0].offset_msg_id)
            back = await admin(b.addr, RequestCode.CONSUMER_SEND_MSG_BACK,
                               {"offset": str(phys), "group": LAGGING, "delayLevel": "-1"})
            assert back.code == ResponseCode.SUCCESS, back.remark
            b.stats.sample()
            s = await asyncio.to_thread(scrape, port)
        finally:
            await consumer.shutdown()

        for name, labels in EXPORTER_LABELS.items():
            assert s.get(name), f"{name} missing"
            assert all(set(lab) == labels for lab, _ in s[name]), (name, s[name])
        mine = {"cluster": "DefaultCluster", "broker": "broker-a"}
        assert value(s, "rocketmq_broker_tps", cluster="DefaultCluster", broker="broker-a", brokerIP=b.addr) > 0
        assert value(s, "rocketmq_producer_offset", topic=TOPIC, **mine) == SENT
        assert value(s, "rocketmq_producer_tps", topic=TOPIC, **mine) > 0
        assert value(s, "rocketmq_producer_message_size", topic=TOPIC, **mine) > 0
        assert value(s, "rocketmq_consumer_offset", topic=TOPIC, group=LIVE, **mine) == SENT
        assert value(s, "rocketmq_consumer_tps", topic=TOPIC, group=LIVE, **mine) > 0
        assert value(s, "rocketmq_consumer_message_size", topic=TOPIC, group=LIVE, **mine) > 0
        assert value(s, "rocketmq_group_diff", group=LIVE, topic=TOPIC, countOfOnlineConsumers="1",
                     msgModel="1") == 0
        assert value(s, "rocketmq_group_diff", group=LAGGING, topic=TOPIC, countOfOnlineConsumers="0") == SENT - 2
        assert value(s, "rocketmq_group_get_latency_by_storetime", topic=TOPIC, group=LAGGING, **mine) > 0
        assert value(s, "rocketmq_group_get_latency_by_storetime", topic=TOPIC, group=LIVE, **mine) == 0
        assert value(s, "rocketmq_group_retrydiff", group=LIVE, topic=f"%RETRY%{LIVE}") == 0
        assert value(s, "rocketmq_topic_dlq_offset", group=LAGGING, **mine) == 1
        assert value(s, "rocketmq_group_dlqdiff", group=LAGGING, topic=f"%DLQ%{LAGGING}") == 1
        runtime = s["rocketmq_brokeruntime_msg_put_total_today_now"]
        assert runtime[0][0]["broker_version"].startswith("V4_9_4") and runtime[0][1] == SENT  # send-backs are not puts
        assert s["pocketmq_messages_put_total"]  # today's metrics are still there
        dashboard = json.loads(DASHBOARD.read_text())
        exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
        used = {name for e in exprs for name in re.findall(r"rocketmq_\w+", e)}
        assert used and used <= set(s), f"the Grafana dashboard uses metrics no broker serves: {used - set(s)}"
