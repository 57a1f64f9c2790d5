"""SQL92 selection through the SDK: ``MessageSelector.by_sql`` with push and pull consumers against a real broker,
mixed with tags; a malformed expression refused at subscribe; a broker with ``enablePropertyFilter=false``
answers the pull consumer with RocketMQ's error."""

from __future__ import annotations

from pathlib import Path

import pytest

from pocketmq.client import Message, MessageSelector, Producer, PullConsumer, PullStatus, PushConsumer
from pocketmq.client.consumer.subscription import SubscriptionParseError
from pocketmq.remoting.codes import ResponseCode
from pocketmq.remoting.errors import ResponseError
from tests.client.consumer.consumer_support import (
    FAST,
    Cluster,
    Recorder,
    caught_up,
    cluster,
    create_topic,
    instance_name,
)
from tests.helpers import eventually

SQL = "TAGS IN ('a', 'b') AND price > 10 AND (region = 'eu' OR region IS NULL)"


def sample(i: int) -> tuple[str, dict[str, str]]:
    """Message i's tag and properties: tags a/b/c, price 0..29 (sometimes not a number), region eu/us/none."""
    props = {"price": str(i % 30) if i % 7 else "n/a"}
    if i % 3 == 1:
        props["region"] = "eu"
    elif i % 3 == 2:
        props["region"] = "us"
    return "abc"[i % 3 if i % 5 else 2], props


def expected(count: int) -> set[str]:
    chosen = set()
    for i in range(count):
        tag, props = sample(i)
        price = props["price"]
        if (tag in ("a", "b") and price.isdigit() and int(price) > 10
                and props.get("region") in ("eu", None)):
            chosen.add(f"m-{i}")
    return chosen


async def fill(c: Cluster, topic: str, count: int) -> None:
    async with Producer("FilterPG", namesrv_addr=c.namesrv_addr, instance_name=instance_name("p")) as producer:
        for i in range(count):
            tag, props = sample(i)
            await producer.send(Message(topic, f"m-{i}".encode(), tags=tag, properties=props))


async def test_push_consumer_selects_by_sql(tmp_path: Path) -> None:
    async with cluster(tmp_path, props={"enablePropertyFilter": "true"}) as c:
        await create_topic(c, "FP", 2)
        await fill(c, "FP", 120)
        recorder = Recorder()
        consumer = PushConsumer("FilterPushG", namesrv_addr=c.namesrv_addr, instance_name=instance_name(), **FAST)
        consumer.subscribe("FP", MessageSelector.by_sql(SQL))
        consumer.register_handler(recorder)
        await consumer.start()
        try:
            await eventually(lambda: caught_up(consumer, c, "FP"), timeout=20, message="push consumer caught up")
        finally:
            await consumer.shutdown()
        want = expected(120)
        assert want and set(recorder.bodies) == want
        assert len(recorder.bodies) == len(want)


async def test_pull_consumer_selects_by_sql_and_tags(tmp_path: Path) -> None:
    async with cluster(tmp_path, props={"enablePropertyFilter": "true"}) as c:
        await create_topic(c, "FQ", 2)
        await fill(c, "FQ", 90)
        async with PullConsumer("FilterPullG", namesrv_addr=c.namesrv_addr, instance_name=instance_name()) as pc:
            got: list[str] = []
            tagged: list[str] = []
            for mq in await pc.fetch_subscribe_message_queues("FQ"):
                for selector, sink in ((MessageSelector.by_sql(SQL), got), (MessageSelector.by_tag("c"), tagged)):
                    offset, end = 0, await pc.max_offset(mq)
                    while offset < end:
                        result = await pc.pull(mq, selector, offset)
                        assert result.status in (PullStatus.FOUND, PullStatus.NO_MATCHED_MSG)
                        sink.extend(m.body.decode() for m in result.messages)
                        offset = result.next_begin_offset
        assert set(got) == expected(90) and len(got) == len(expected(90))
        assert set(tagged) == {f"m-{i}" for i in range(90) if sample(i)[0] == "c"}


def test_malformed_sql_is_refused_at_subscribe() -> None:
    consumer = PushConsumer("BadSqlG", namesrv_addr="127.0.0.1:9")
    with pytest.raises(SubscriptionParseError):
        consumer.subscribe("T", MessageSelector.by_sql("price > 'ten'"))
    consumer.subscribe("T", MessageSelector.by_tag(None))
    assert consumer.subscriptions["T"].sub_string == "*"


async def test_disabled_broker_refuses_sql_pulls(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        await create_topic(c, "FD", 1)
        await fill(c, "FD", 3)
        push = PushConsumer("FilterOffPushG", namesrv_addr=c.namesrv_addr, instance_name=instance_name(), **FAST)
        push.subscribe("FD", MessageSelector.by_sql("price > 1"))
        push.register_handler(Recorder())
        with pytest.raises(ResponseError) as refused:
            await push.start()  # CHECK_CLIENT_CONFIG, as a Java push consumer does
        assert refused.value.response_code == ResponseCode.SYSTEM_ERROR
        assert refused.value.remark == "The broker does not support consumer to filter message by SQL92"
        async with PullConsumer("FilterOffG", namesrv_addr=c.namesrv_addr, instance_name=instance_name()) as pc:
            mq = (await pc.fetch_subscribe_message_queues("FD"))[0]
            with pytest.raises(ResponseError) as info:
                await pc.pull(mq, MessageSelector.by_sql("price > 1"), 0)
            assert info.value.response_code == ResponseCode.SYSTEM_ERROR
            assert info.value.remark == "The broker does not support consumer to filter message by SQL92"
