"""Interoperability of the read side with the PyPI ``rocketmq==0.4.4`` client (Apache's C++ client via
ctypes), against a PocketMQ name server and broker running as real processes:

* its push consumer and its pull consumer read what PocketMQ's producer sent (bodies, tags, keys);
* PocketMQ's push consumer reads what its producer sent.

The C++ client runs native threads (callbacks arrive on them): every wait here has a deadline, and its
``shutdown`` runs on a helper thread that is joined with a timeout.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pocketmq.client import ConsumeFromWhere, ConsumeResult, Message, MessageExt
from pocketmq.client.blocking import Producer, PushConsumer
from tests.helpers import wait_until
from tests.procs import Proc, start_broker, start_namesrv

rocketmq = pytest.importorskip("rocketmq.client", reason="rocketmq==0.4.4 ships a Linux x86_64 wheel only")

COUNT = 30
WAIT = 60.0


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Proc, Proc]]:
    monkeypatch.setenv("HOME", str(tmp_path))  # the C++ client writes its logs under ~/logs
    ns = start_namesrv(kv_dir=tmp_path)
    broker = start_broker(namesrv=ns.addr, store_dir=tmp_path / "store")
    yield ns, broker
    broker.kill()
    ns.kill()


def bounded(action: Callable[[], Any], timeout: float = 20.0) -> None:
    """Run a native call that might hang on a helper thread; fail the test if it does not return."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            action()
        except BaseException as exc:  # reported below
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"{action} did not return within {timeout} s"
    if errors:
        raise errors[0]


def produce_with_pocketmq(namesrv: str, topic: str) -> dict[bytes, tuple[str, str]]:
    sent = {}
    with Producer("InteropPyPG", namesrv_addr=namesrv, instance_name="interop-producer") as producer:
        for i in range(COUNT):
            body = f"pocketmq-{i}".encode()
            tags, keys = f"tag{i % 2}", f"key-{i}"
            producer.send(Message(topic, body, tags=tags, keys=keys))
            sent[body] = (tags, keys)
    return sent


def as_text(value: bytes | str | None) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


def test_cpp_push_consumer_reads_what_pocketmq_produced(cluster: tuple[Proc, Proc]) -> None:
    ns, _ = cluster
    sent = produce_with_pocketmq(ns.addr, "PyToCppPush")
    got: dict[bytes, tuple[str | None, str | None, str]] = {}
    lock = threading.Lock()
    everything = threading.Event()

    def on_message(msg: Any) -> None:  # on a native thread
        with lock:
            got[bytes(msg.body)] = (as_text(msg.tags), as_text(msg.keys), msg.topic)
            if len(got) >= COUNT:
                everything.set()

    consumer = rocketmq.PushConsumer("InteropCppPushCG")
    consumer.set_namesrv_addr(ns.addr)
    consumer.subscribe("PyToCppPush", on_message, "*")
    bounded(consumer.start)
    try:
        assert everything.wait(WAIT), f"the C++ push consumer got {len(got)} of {COUNT}"
    finally:
        bounded(consumer.shutdown)
    assert set(got) == set(sent)
    for body, (tags, keys) in sent.items():
        assert got[body] == (tags, keys, "PyToCppPush")


def test_cpp_pull_consumer_reads_what_pocketmq_produced(cluster: tuple[Proc, Proc]) -> None:
    ns, _ = cluster
    sent = produce_with_pocketmq(ns.addr, "PyToCppPull")
    consumer = rocketmq.PullConsumer("InteropCppPullCG")
    consumer.set_namesrv_addr(ns.addr)
    bounded(consumer.start)
    got: dict[bytes, str | None] = {}
    try:
        deadline = time.monotonic() + WAIT

        def pull_all() -> None:
            # One pass over every queue, each from its offset (0 at first) to the end, tag-filtered.
            for msg in consumer.pull("PyToCppPull", "tag1", 32):
                got[bytes(msg.body)] = as_text(msg.tags)

        expected = {body for body, (tags, _) in sent.items() if tags == "tag1"}
        while set(got) != expected and time.monotonic() < deadline:
            bounded(pull_all, timeout=WAIT)
    finally:
        bounded(consumer.shutdown)
    assert set(got) == expected and len(expected) == COUNT // 2
    assert set(got.values()) == {"tag1"}


def test_pocketmq_push_consumer_reads_what_the_cpp_producer_sent(cluster: tuple[Proc, Proc]) -> None:
    ns, _ = cluster
    producer = rocketmq.Producer("InteropCppPG", timeout=5000)
    producer.set_namesrv_addr(ns.addr)
    bounded(producer.start)
    sent = {}
    try:
        for i in range(COUNT):
            msg = rocketmq.Message("CppToPy")
            tags, keys, text = f"tag{i % 3}", f"key-{i}", f"cpp-body-{i}"
            msg.set_tags(tags)
            msg.set_keys(keys)
            msg.set_body(text)
            msg.set_property("origin", "cpp")
            result = producer.send_sync(msg)
            assert result.status == rocketmq.SendStatus.OK, result
            sent[text.encode()] = (tags, keys)
    finally:
        bounded(producer.shutdown)
    got: dict[bytes, MessageExt] = {}
    lock = threading.Lock()

    def handle(msg: MessageExt) -> ConsumeResult:
        with lock:
            got[msg.body] = msg
        return ConsumeResult.SUCCESS

    consumer = PushConsumer("InteropPyCG", namesrv_addr=ns.addr, instance_name="interop-consumer",
                            consume_from_where=ConsumeFromWhere.FIRST_OFFSET, rebalance_interval=2.0)
    consumer.subscribe("CppToPy", "tag0 || tag2")
    consumer.register_handler(handle)
    expected = {body for body, (tags, _) in sent.items() if tags != "tag1"}
    with consumer:
        wait_until(lambda: set(got) >= expected, timeout=WAIT, message="PocketMQ consumed the C++ messages")
    assert set(got) == expected
    for raw in expected:
        msg = got[raw]
        assert (msg.tags, msg.keys) == sent[raw]
        assert msg.topic == "CppToPy" and msg.get_property("origin") == "cpp"
        assert msg.msg_id  # the C++ client's UNIQ_KEY
