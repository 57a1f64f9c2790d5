"""``rmq-cluster up`` as a real process tree, ``rmq-admin`` against it, produce and consume, crash reports."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pocketmq.admin import cli
from pocketmq.admin.cluster import LocalCluster, cluster_status
from pocketmq.common.record import decode_records
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.headers import PullMessageRequestHeader
from tests.helpers import eventually
from tests.procs import TEST_STORE_PROPERTIES, Proc, wait_exit

TOPIC = "OpsOrders"
SENT = 12


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Proc, Path]]:
    base = tmp_path_factory.mktemp("cluster")
    proc = Proc([sys.executable, "-m", "pocketmq.admin.cluster", "up", "--preset", "2m-2s-sync", "--namesrv", "2",
                 "--base-dir", str(base), "--ephemeral-ports", "--log-format", "json",
                 *(f"--set={key}={value}" for key, value in TEST_STORE_PROPERTIES.items())], "CLUSTER READY")
    try:
        proc.wait_ready(60)
        yield proc, base
    finally:
        proc.terminate(30)


def admin(capsys: pytest.CaptureFixture[str], namesrv: str, *argv: str) -> Any:
    capsys.readouterr()
    code = cli.main([argv[0], "-n", namesrv, "--json", *argv[1:]])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def test_up_starts_and_registers_every_process(cluster: tuple[Proc, Path]) -> None:
    proc, base = cluster
    state = asyncio.run(cluster_status(base))
    assert state["launcherAlive"] and state["namesrvAddr"] == proc.addr
    kinds = sorted((p["name"], p["kind"], p["alive"], p.get("registered", p.get("answering")))
                   for p in state["processes"])
    assert kinds == sorted([("namesrv-0", "namesrv", True, True), ("namesrv-1", "namesrv", True, True)]
                           + [(n, "broker", True, True) for n in ("broker-a", "broker-a-s", "broker-b", "broker-b-s")])
    assert (base / "broker-a" / "store" / "commitlog").is_dir()


def test_admin_commands_answer_what_was_produced(cluster: tuple[Proc, Path],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    ns = cluster[0].addr
    brokers = admin(capsys, ns, "clusterList")
    assert sorted((b["brokerName"], b["brokerId"], b["role"]) for b in brokers) == [
        ("broker-a", 0, "SYNC_MASTER"), ("broker-a", 1, "SLAVE"), ("broker-b", 0, "SYNC_MASTER"),
        ("broker-b", 1, "SLAVE")]
    created = admin(capsys, ns, "updateTopic", "-t", TOPIC, "-r", "2", "-w", "2")
    assert len(created["brokers"]) == 2
    assert TOPIC in admin(capsys, ns, "topicList")
    route = admin(capsys, ns, "topicRoute", "-t", TOPIC)
    assert sorted(q["brokerName"] for q in route["queueDatas"]) == ["broker-a", "broker-b"]
    sent = admin(capsys, ns, "sendMessage", "-t", TOPIC, "-p", "hello-ops", "--tags", "T", "-k", "K1",
                 "--count", str(SENT))
    assert all(r["status"] == "SEND_OK" for r in sent) and len(sent) == SENT
    status = admin(capsys, ns, "topicStatus", "-t", TOPIC)
    assert len(status) == 4 and sum(q["maxOffset"] - q["minOffset"] for q in status) == SENT
    per_queue = {(r["brokerName"], r["queueId"]) for r in sent}
    assert per_queue <= {(q["brokerName"], q["queueId"]) for q in status if q["maxOffset"] > 0}
    message = admin(capsys, ns, "queryMsgById", "-i", sent[-1]["msgId"])
    assert (message["topic"], message["body"], message["properties"]["KEYS"], message["properties"]["TAGS"]) == (
        TOPIC, "hello-ops", "K1", "T")
    assert message["queueOffset"] == sent[-1]["queueOffset"]
    progress = admin(capsys, ns, "consumerProgress", "-g", "ops-group", "-t", TOPIC)
    assert progress["totalLag"] == SENT
    master_a = next(b["addr"] for b in brokers if b["brokerName"] == "broker-a" and b["brokerId"] == 0)
    info = admin(capsys, ns, "brokerStatus", "-b", master_a)
    assert info["brokerRole"] == "SYNC_MASTER" and info["haConnectionCount"] == "1"
    assert "lagBytes=" in info["haSlave0"]
    asyncio.run(_consume_all(brokers, sent))
    admin(capsys, ns, "deleteTopic", "-t", TOPIC)
    assert TOPIC not in admin(capsys, ns, "topicList")


async def _consume_all(brokers: list[dict[str, Any]], sent: list[dict[str, Any]]) -> None:
    """Pull every queue over PULL_MESSAGE from each master and from each slave (its replicated copy; a slave
    learns the topic when it copies its master's topics, every 10 s)."""
    client = RemotingClient()
    loop = asyncio.get_running_loop()
    try:
        for broker in brokers:
            expected = sum(1 for r in sent if r["brokerName"] == broker["brokerName"])
            deadline = loop.time() + 20
            while True:
                bodies = []
                for queue_id in range(2):
                    header = PullMessageRequestHeader("ops-group", TOPIC, queue_id, 0, 32, 0x4, -1, 0, 0, "*")
                    resp = await client.invoke(broker["addr"], RemotingCommand.request(RequestCode.PULL_MESSAGE,
                                                                                       header.to_fields()))
                    if resp.code == 0:
                        bodies += [r.body for r in decode_records(bytes(resp.body or b""))]
                if len(bodies) == expected or loop.time() > deadline:
                    break
                await asyncio.sleep(0.2)
            assert len(bodies) == expected and set(bodies) <= {b"hello-ops"}, broker
    finally:
        await client.close()


async def test_a_crashed_process_is_reported(cluster: tuple[Proc, Path]) -> None:
    """Last in this module: SIGKILL a slave; status shows it down, and ``up`` exits 1 naming it."""
    proc, base = cluster
    state = json.loads((base / "cluster.json").read_text())
    victim = next(p for p in state["processes"] if p["name"] == "broker-b-s")
    os.kill(victim["pid"], signal.SIGKILL)

    def reported() -> bool:
        return bool(json.loads((base / "cluster.json").read_text())["crashed"] == ["broker-b-s"])

    await eventually(reported, timeout=10)
    s = await cluster_status(base)
    assert not next(p for p in s["processes"] if p["name"] == "broker-b-s")["alive"]
    proc.signal(signal.SIGTERM)
    assert await asyncio.to_thread(wait_exit, proc, 30) == 1
    assert "broker-b-s crashed" in proc.stderr_text()
    state = json.loads((base / "cluster.json").read_text())
    assert state["stopped"] and all(p["returncode"] is not None for p in state["processes"])


async def test_namesrv_restarted_empty_is_repopulated_within_one_period(tmp_path: Path) -> None:
    period_ms = 1500
    cluster = LocalCluster("2m-noslave", base_dir=tmp_path, namesrv_count=1, ephemeral_ports=True,
                           overrides={"registerNameServerPeriod": str(period_ms), **TEST_STORE_PROPERTIES},
                           log_format="json")
    await cluster.start()
    try:
        cluster.signal("namesrv-0", signal.SIGKILL)
        await cluster.wait_exit("namesrv-0", 10)
        # same arguments, same port? No: port 0 again, so the brokers would not find it. Restart on the old port.
        old = cluster.children["namesrv-0"].addr
        spec = cluster.specs["namesrv-0"]
        spec.args[spec.args.index("--port") + 1] = old.rsplit(":", 1)[1]
        loop = asyncio.get_running_loop()
        started = loop.time()
        await cluster.restart("namesrv-0", timeout=20)
        await cluster.wait_registered(period_ms / 1000 + 5)
        assert loop.time() - started < period_ms / 1000 + 5
    finally:
        await cluster.stop()
