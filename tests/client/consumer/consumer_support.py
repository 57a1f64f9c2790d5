"""Shared pieces of the consumer tests: an in-process cluster (name server and brokers in the test's loop),
topic creation, a recording handler, and the producer used to fill topics."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pocketmq.broker.controller import BrokerController
from pocketmq.client import Message, Producer
from pocketmq.client.consumer.push import PushConsumer
from pocketmq.client.consumer.types import ConsumeResult
from pocketmq.client.core.message_ext import MessageExt
from pocketmq.namesrv.controller import NamesrvController
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from tests.cluster import start_broker, start_namesrv
from tests.helpers import eventually

#: Short delay levels (18 of them, as many as RocketMQ's) so retries come back within a second or two.
SHORT_DELAY_LEVELS = " ".join(["1s"] * 18)
#: Fast-moving consumer settings for tests (the defaults are RocketMQ's: 20 s rebalance, 5 s commits, 15 s
#: long polls). Shorter long polls bound what a lost broker wakeup costs an idle queue (see
#: test_message_arriving_while_a_pull_is_being_parked_wakes_it).
FAST: dict[str, Any] = {"rebalance_interval": 1.0, "persist_consumer_offset_interval": 0.2,
                        "poll_name_server_interval": 1.0, "shutdown_grace": 5.0, "long_polling_timeout": 4.0,
                        "pull_timeout": 14.0}

_instances = itertools.count()


def instance_name(prefix: str = "c") -> str:
    """A distinct client instance per consumer (they would otherwise share one client id in this process)."""
    return f"{prefix}{next(_instances)}"


@dataclass
class Cluster:
    namesrv: NamesrvController
    brokers: dict[str, BrokerController] = field(default_factory=dict)

    @property
    def namesrv_addr(self) -> str:
        return self.namesrv.addr

    async def stop(self) -> None:
        for broker in self.brokers.values():
            with contextlib.suppress(Exception):
                await broker.stop()
        await self.namesrv.stop()


@contextlib.asynccontextmanager
async def cluster(tmp: Path, names: Sequence[str] = ("broker-a",), props: dict[str, str] | None = None,
                  **kw: Any) -> AsyncIterator[Cluster]:
    ns = await start_namesrv(tmp)
    c = Cluster(ns)
    try:
        for name in names:
            c.brokers[name] = await start_broker(tmp, name, ns.addr, props, **kw)
        yield c
    finally:
        await c.stop()


async def admin(addr: str, code: int, fields: dict[str, str] | None = None, body: bytes | None = None,
                timeout: float = 5.0) -> RemotingCommand:
    client = RemotingClient()
    try:
        return await client.invoke(addr, RemotingCommand.request(code, fields, body), timeout=timeout)
    finally:
        await client.close()


async def create_topic(c: Cluster, topic: str, queues: int = 4, brokers: Sequence[str] | None = None) -> None:
    """UPDATE_AND_CREATE_TOPIC on the brokers, then wait until the name server routes it to all of them."""
    names = list(brokers or c.brokers)
    fields = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues),
              "writeQueueNums": str(queues), "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0",
              "order": "false"}
    for name in names:
        resp = await admin(c.brokers[name].addr, RequestCode.UPDATE_AND_CREATE_TOPIC, fields)
        assert resp.code == ResponseCode.SUCCESS, resp

    async def routed() -> bool:
        resp = await admin(c.namesrv_addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        if resp.code != ResponseCode.SUCCESS:
            return False
        body = bytes(resp.body or b"")
        return all(name.encode() in body for name in names)

    await eventually(routed, timeout=10, message=f"route of {topic}")


async def produce(c: Cluster, topic: str, count: int, *, tags: Callable[[int], str | None] | None = None,
                  prefix: str = "m", group: str = "TestPG", **message_kw: Any) -> list[str]:
    """Send ``count`` messages with bodies ``<prefix>-<i>``; returns the bodies."""
    bodies = []
    async with Producer(group, namesrv_addr=c.namesrv_addr, instance_name=instance_name("p")) as producer:
        for i in range(count):
            body = f"{prefix}-{i}"
            await producer.send(Message(topic, body.encode(), tags=tags(i) if tags else None, **message_kw))
            bodies.append(body)
    return bodies


@dataclass
class Recorder:
    """A handler that records what it got (and optionally fails some messages)."""

    name: str = "consumer"
    got: list[MessageExt] = field(default_factory=list)
    fail: Callable[[MessageExt], bool] | None = None
    delay: float = 0.0

    async def __call__(self, msg: MessageExt) -> ConsumeResult:
        self.got.append(msg)
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.fail is not None and self.fail(msg):
            return ConsumeResult.RECONSUME_LATER
        return ConsumeResult.SUCCESS

    @property
    def bodies(self) -> list[str]:
        return [m.body.decode() for m in self.got]


def push_consumer(c: Cluster, group: str, topic: str, recorder: Recorder, expression: str = "*",
                  **kw: Any) -> PushConsumer:
    settings = {**FAST, **kw}
    settings.setdefault("instance_name", instance_name())
    consumer = PushConsumer(group, namesrv_addr=c.namesrv_addr, **settings)
    consumer.subscribe(topic, expression)
    consumer.register_handler(recorder)
    return consumer


def caught_up(consumer: PushConsumer, c: Cluster, topic: str) -> bool:
    """Whether the consumer's offsets of every queue of ``topic`` are at the queue's end: every message up to
    there has been handled (offsets only move past handled messages), so nothing more will be delivered."""
    queues = [mq for mq in consumer.assigned_queues if mq.topic == topic]
    if not queues:
        return False
    offsets = consumer.committed_offsets()
    for mq in queues:
        store = c.brokers[mq.broker_name].store
        if store is None or offsets.get(mq, -1) != store.get_max_offset_in_queue(topic, mq.queue_id):
            return False
    return True
