"""``rmq-broker`` and ``rmq-namesrv`` as real subprocesses."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from pathlib import Path

from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.headers import GetRouteInfoRequestHeader, SendMessageRequestHeaderV2
from tests.procs import start_broker, start_namesrv


async def route_code(namesrv: str, topic: str) -> int:
    client = RemotingClient()
    try:
        req = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic).to_fields())
        return (await client.invoke(namesrv, req)).code
    finally:
        await client.close()


def test_broker_process_serves_registers_and_stops_on_sigterm(tmp_path: Path) -> None:
    conf = tmp_path / "broker.properties"
    conf.write_text("brokerClusterName=DefaultCluster\nbrokerRole=ASYNC_MASTER\nflushDiskType=ASYNC_FLUSH\n"
                    "deleteWhen=04\nfileReservedTime=48\nmappedFileSizeCommitLog=1048576\n")
    ns = start_namesrv(kv_dir=tmp_path)
    broker = start_broker(namesrv=ns.addr, store_dir=tmp_path / "store", config=conf)
    try:
        async def scenario() -> None:
            client = RemotingClient()
            header = SendMessageRequestHeaderV2("PG", "ProcTopic", "TBW102", 4, 0, 0, int(time.time() * 1000), 0,
                                                "TAGS\x01a").to_fields()
            resp = await client.invoke(broker.addr, RemotingCommand.request(310, header, b"x"))
            assert resp.code == 0
            await client.close()
            assert await route_code(ns.addr, "ProcTopic") == 0

        asyncio.run(scenario())
        broker.signal(signal.SIGTERM)
        assert broker.popen.wait(20) == 0
        assert "broker_stopped" in broker.stderr_text()
        assert asyncio.run(route_code(ns.addr, "ProcTopic")) == 17  # unregistered on the way out
        assert (tmp_path / "store" / "config" / "topics.json").exists()
    finally:
        broker.kill()
        ns.kill()


def test_print_config_and_bad_config(tmp_path: Path) -> None:
    conf = tmp_path / "b.properties"
    conf.write_text("brokerName=broker-b\nbrokerId=3\nbrokerRole=SLAVE\nnamesrvAddr=127.0.0.1:9876;127.0.0.1:9877\n")
    out = subprocess.run([sys.executable, "-m", "pocketmq.broker.main", "-c", str(conf), "--print-config"],
                         capture_output=True, text=True, timeout=60, check=True)
    assert "brokerName=broker-b" in out.stdout and "brokerId=3" in out.stdout
    assert "namesrvAddr=127.0.0.1:9876;127.0.0.1:9877" in out.stdout
    over = subprocess.run([sys.executable, "-m", "pocketmq.broker.main", "-c", str(conf), "--role", "SYNC_MASTER",
                           "--print-config"], capture_output=True, text=True, timeout=60, check=True)
    assert "brokerRole=SYNC_MASTER" in over.stdout and "brokerId=0" in over.stdout
    conf.write_text("brokerNme=x\n")
    bad = subprocess.run([sys.executable, "-m", "pocketmq.broker.main", "-c", str(conf)],
                         capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2 and "unknown config key 'brokerNme'" in bad.stderr
    conf.write_text("brokerRole=LEADER\n")
    bad = subprocess.run([sys.executable, "-m", "pocketmq.broker.main", "-c", str(conf)],
                         capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2 and "LEADER" in bad.stderr
