"""The blocking consumer facades (``client.blocking.PushConsumer`` / ``PullConsumer``) against a cluster running
in another thread's event loop, called from plain synchronous code."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from pocketmq.client import Message
from pocketmq.client.blocking import Producer, PullConsumer, PushConsumer
from pocketmq.client.consumer.pull_result import PullStatus
from pocketmq.client.consumer.types import ConsumeFromWhere, ConsumeResult
from pocketmq.client.core.errors import ConsumerStateError
from pocketmq.client.core.message_ext import MessageExt
from tests.client.consumer.consumer_support import FAST, Cluster, cluster, create_topic, instance_name
from tests.helpers import wait_until

T = TypeVar("T")


class ClusterThread:
    """An in-process cluster on its own loop thread, so the test body can block."""

    def __init__(self, tmp: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self._cm = cluster(tmp)
        self.cluster: Cluster = self.run(self._cm.__aenter__())

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def close(self) -> None:
        self.run(self._cm.__aexit__(None, None, None))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture
def sync_cluster(tmp_path: Path) -> Iterator[ClusterThread]:
    ct = ClusterThread(tmp_path)
    yield ct
    ct.close()


def test_blocking_push_consumer_runs_plain_handlers_in_threads(sync_cluster: ClusterThread) -> None:
    c = sync_cluster.cluster
    sync_cluster.run(create_topic(c, "SyncT", 2))
    with Producer("SyncPG", namesrv_addr=c.namesrv_addr, instance_name=instance_name("p")) as producer:
        for i in range(30):
            producer.send(Message("SyncT", f"s-{i}".encode(), tags="odd" if i % 2 else "even"))
    got: list[str] = []
    threads: set[str] = set()
    lock = threading.Lock()

    def handle(msg: MessageExt) -> ConsumeResult:
        with lock:
            got.append(msg.body.decode())
            threads.add(threading.current_thread().name)
        return ConsumeResult.SUCCESS

    consumer = PushConsumer("SyncG", namesrv_addr=c.namesrv_addr, instance_name=instance_name(),
                            consume_from_where=ConsumeFromWhere.FIRST_OFFSET, **FAST)
    consumer.subscribe("SyncT", "even")
    consumer.register_handler(handle)
    with consumer:
        wait_until(lambda: len(got) == 15, timeout=20, message="even messages consumed")
        assert len([q for q in consumer.assigned_queues if q.topic == "SyncT"]) == 2
    assert sorted(got) == sorted(f"s-{i}" for i in range(0, 30, 2))
    assert all(name.startswith("pocketmq-consume-SyncG") for name in threads)  # never the loop thread
    consumer.shutdown()  # idempotent
    with pytest.raises(ConsumerStateError):
        consumer.start()


def test_blocking_pull_consumer(sync_cluster: ClusterThread) -> None:
    c = sync_cluster.cluster
    sync_cluster.run(create_topic(c, "SyncPullT", 1))
    with Producer("SyncPullPG", namesrv_addr=c.namesrv_addr, instance_name=instance_name("p")) as producer:
        for i in range(5):
            producer.send(Message("SyncPullT", f"p-{i}".encode()))
    with PullConsumer("SyncPullG", namesrv_addr=c.namesrv_addr, instance_name=instance_name()) as consumer:
        [mq] = consumer.fetch_subscribe_message_queues("SyncPullT")
        result = consumer.pull(mq, "*", 0, 32)
        assert result.status is PullStatus.FOUND and [m.body for m in result.messages] == [
            f"p-{i}".encode() for i in range(5)]
        consumer.update_consume_offset(mq, result.next_begin_offset)
        assert consumer.fetch_consume_offset(mq) == 5
        assert (consumer.min_offset(mq), consumer.max_offset(mq)) == (0, 5)
        empty = consumer.pull(mq, "*", 5, 32, block=True, timeout=0.2)
        assert empty.status is PullStatus.NO_NEW_MSG
