"""What operators see of POP and timers: ``rmq-admin popStatus`` (in flight per group, revive backlog, counters),
``rmq-admin timerStatus`` (pending, lateness) and the broker's ``pocketmq_pop_*`` / ``pocketmq_timer_*`` metrics."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from pocketmq.admin import api_ops, cli
from pocketmq.admin.api import AdminClient, split_namesrv
from pocketmq.client import Message, Producer
from pocketmq.client.consumer.simple import SimpleConsumer
from tests.client.consumer.consumer_support import cluster, create_topic, instance_name
from tests.helpers import eventually

pytestmark = pytest.mark.timeout(60)


def metric(text: str, name: str) -> dict[str, float]:
    return {line.split("{")[1].split("}")[0] if "{" in line else "": float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line.startswith(name + "{") or line.startswith(name + " ")}


async def test_pop_and_timer_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    async with cluster(tmp_path, ("broker-a",), {"reviveInterval": "100"}, metrics_port=0) as c:
        await create_topic(c, "TAdminPop", 2)
        broker = c.brokers["broker-a"]
        async with Producer("AdminPopPG", namesrv_addr=c.namesrv_addr, instance_name=instance_name("p")) as p:
            for i in range(6):
                await p.send(Message("TAdminPop", f"m{i}".encode()))
            for i in range(3):
                await p.send(Message("TAdminPop", b"later", delay=60 + i))
            await p.send(Message("TAdminPop", b"soon", delay=0.2))
        async with SimpleConsumer("GAdminPop", namesrv_addr=c.namesrv_addr, instance_name=instance_name("s"),
                                  await_duration=1) as consumer:
            consumer.subscribe("TAdminPop")
            got = []

            async def received() -> bool:
                got.extend(await consumer.receive(32, invisible_duration=30))
                return len(got) >= 6

            await eventually(received, timeout=10, message="six received")
            await consumer.ack_batch(got[:2])
            await eventually(lambda: broker.timer is not None and broker.timer.fired >= 1, message="one timer fired")

            capsys.readouterr()
            assert await asyncio.to_thread(cli.main, ["popStatus", "-n", c.namesrv_addr, "--json"]) == 0
            (status,) = json.loads(capsys.readouterr().out)
            assert status["inflightByGroup"] == {"GAdminPop": len(got) - 2}
            assert status["Popped"] == len(got) and status["Acked"] == 2 and status["reviveBacklog"] == 0
            assert await asyncio.to_thread(cli.main, ["timerStatus", "-n", c.namesrv_addr, "--json"]) == 0
            (timers,) = json.loads(capsys.readouterr().out)
            assert timers["pending"] == 3 and timers["fired"] == 1 and int(timers["latenessMaxMs"]) >= 0
            assert await asyncio.to_thread(cli.main, ["timerStatus", "-n", c.namesrv_addr]) == 0
            assert "#Pending" in capsys.readouterr().out

            # what the console asks: GET_POP_INFLIGHT_STATS (9010) and RocketMQ 5's GET_TIMER_METRICS (61)
            async with AdminClient(split_namesrv(c.namesrv_addr)) as admin:
                stats = await api_ops.pop_inflight(admin, broker.addr, "GAdminPop", "TAdminPop")
                assert stats is not None and stats["total"] == len(got) - 2
                assert {row["topic"] for row in stats["inflightTable"]} <= {"TAdminPop", "%RETRY%GAdminPop_TAdminPop"}
                assert sum(row["inflight"] for row in stats["inflightTable"]) == stats["total"]
                other = await api_ops.pop_inflight(admin, broker.addr, "GNobody")
                assert other == {"inflightTable": [], "total": 0}
                assert await api_ops.timer_metrics(admin, broker.addr) == {"TAdminPop": 3}

            assert broker.metrics is not None
            text = broker.metrics.render().decode()
            assert metric(text, "pocketmq_pop_inflight_messages") == {'group="GAdminPop"': len(got) - 2}
            assert metric(text, "pocketmq_timer_pending") == {"": 3}
            assert metric(text, "pocketmq_pop_messages")['kind="acked"'] == 2
            assert set(metric(text, "pocketmq_timer_lateness_ms")) == {'quantile="p50"', 'quantile="p99"',
                                                                       'quantile="max"'}
