"""Real processes: ``rmq-namesrv``, two ``rmq-broker`` groups and ``rmq-proxy``, with the official RocketMQ 5 client
sending through the proxy while one broker group is SIGKILLed. The producer keeps sending through the other group,
and every message it got SEND_OK for is there afterwards (read over remoting once the killed group is back)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pocketmq.admin.api import AdminClient
from pocketmq.client.consumer.push import PushConsumer
from pocketmq.common.consumer import ConsumeFromWhere
from tests.client.consumer.consumer_support import Recorder, instance_name
from tests.grpc import official
from tests.helpers import eventually
from tests.procs import Proc, start_broker, start_namesrv

pytestmark = pytest.mark.timeout(240)


@contextlib.contextmanager
def running(*procs: Proc) -> Iterator[None]:
    try:
        yield
    finally:
        for proc in procs:
            with contextlib.suppress(Exception):
                proc.kill()


def start_proxy(namesrv: str) -> Proc:
    proc = Proc([sys.executable, "-m", "pocketmq.proxy.main", "-n", namesrv, "--listen", "127.0.0.1", "--port", "0",
                 "--log-format", "json"], "PROXY READY")
    proc.wait_ready()
    return proc


async def test_a_broker_group_killed_mid_run_loses_nothing_the_producer_was_told_was_sent(tmp_path: Path) -> None:
    ns = start_namesrv(kv_dir=tmp_path)
    props = tmp_path / "broker.properties"
    props.write_text("flushDiskType=ASYNC_FLUSH\n")
    a = start_broker(namesrv=ns.addr, store_dir=tmp_path / "a", name="broker-a", config=props)
    b = start_broker(namesrv=ns.addr, store_dir=tmp_path / "b", name="broker-b", config=props)
    proxy = start_proxy(ns.addr)
    with running(proxy, a, b, ns):
        await AdminClient([ns.addr]).update_topic("TKill", read_queues=4, write_queues=4,
                                                  attributes="+message.type=NORMAL")
        producing = asyncio.create_task(official.run(
            "produce", {"endpoints": proxy.addr, "topic": "TKill", "duration_s": 10, "pause_s": 0.01},
            home=tmp_path / "producer", timeout=90))
        await asyncio.sleep(4)
        killed_ms = time.time_ns() // 1_000_000
        b.signal(signal.SIGKILL)
        result = await producing
        sent = result["sent"]
        after = [s for s in sent if s["sent_ms"] > killed_ms + 1000]
        assert after, "the producer kept sending after the kill"
        assert len(result["errors"]) <= 3, result["errors"]  # at most the sends in flight at the kill
        # broker-b back on its store; every acknowledged message is read over remoting.
        b2 = start_broker(namesrv=ns.addr, store_dir=tmp_path / "b", name="broker-b", config=props)
        with running(b2):
            ids = {s["message_id"] for s in sent}
            recorder = Recorder()
            consumer = PushConsumer("GKill", namesrv_addr=ns.addr, instance_name=instance_name("k"),
                                    consume_from_where=ConsumeFromWhere.FIRST_OFFSET, rebalance_interval=1.0,
                                    poll_name_server_interval=1.0)
            consumer.subscribe("TKill", "*")
            consumer.register_handler(recorder)
            await consumer.start()
            try:
                await eventually(lambda: ids <= {m.uniq_key for m in recorder.got}, timeout=60,
                                 message="every acknowledged message read back")
            finally:
                await consumer.shutdown()
        assert proxy.popen.poll() is None
