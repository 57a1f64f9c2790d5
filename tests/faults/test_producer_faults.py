"""Fault isolation for real: name servers and brokers as subprocesses, killed with SIGKILL mid-stream."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from client.message import Message, SendStatus
from client.producer import Producer
from remoting.client import RemotingClient
from remoting.codes import RequestCode
from remoting.command import RemotingCommand
from remoting.headers import CreateTopicRequestHeader
from tests.helpers import eventually
from tests.procs import Proc, start_broker, start_namesrv

TOPIC = "FaultTopic"
#: Failed calls count as 15 s latency and isolate for 6 s here (RocketMQ: 600 s), so a test can see it end.
LATENCY_MAX = (50, 100, 550, 1000, 2000, 3000, 15000)
NOT_AVAILABLE_DURATION = (0, 0, 1000, 2000, 3000, 4000, 6000)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[dict[str, Any]]:
    procs: dict[str, Any] = {}
    procs["ns1"] = start_namesrv(kv_dir=tmp_path / "ns1")
    procs["ns2"] = start_namesrv(kv_dir=tmp_path / "ns2")
    namesrv = f"{procs['ns1'].addr};{procs['ns2'].addr}"
    procs["namesrv"] = namesrv
    for name in ("broker-a", "broker-b"):
        procs[name] = start_broker(namesrv=namesrv, store_dir=tmp_path / name, name=name)
    procs["tmp"] = tmp_path
    yield procs
    for value in procs.values():
        if isinstance(value, Proc):
            value.kill()


async def create_topic(addr: str) -> None:
    client = RemotingClient()
    try:
        header = CreateTopicRequestHeader(TOPIC, "TBW102", 4, 4, 6, "SINGLE_TAG").to_fields()
        resp = await client.invoke(addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header))
        assert resp.code == 0, resp
    finally:
        await client.close()


def test_killed_broker_is_isolated_and_used_again_after_restart(cluster: dict[str, Any]) -> None:
    asyncio.run(_scenario(cluster))


async def _scenario(cluster: dict[str, Any]) -> None:
    for name in ("broker-a", "broker-b"):
        await create_topic(cluster[name].addr)
    producer = Producer("FaultPG", namesrv_addr=cluster["namesrv"], poll_name_server_interval=0.3,
                        send_msg_timeout=3.0, latency_max=LATENCY_MAX, not_available_duration=NOT_AVAILABLE_DURATION)
    attempts: list[tuple[float, str]] = []
    original = producer._invoke

    async def recording_invoke(out: Any, queue: Any, deadline: float) -> Any:
        attempts.append((time.monotonic(), queue.broker_name))
        return await original(out, queue, deadline)

    producer._invoke = recording_invoke  # type: ignore[method-assign]
    async with producer:
        used: Counter[str] = Counter()
        for i in range(40):
            result = await producer.send(Message(TOPIC, f"before-{i}".encode()))
            assert result.status is SendStatus.SEND_OK
            used[result.message_queue.broker_name] += 1
        assert used["broker-a"] > 0 and used["broker-b"] > 0, used  # spread over both brokers

        cluster["broker-a"].kill()  # SIGKILL mid-stream
        killed_at = time.monotonic()
        after: Counter[str] = Counter()
        for i in range(60):
            result = await producer.send(Message(TOPIC, f"after-{i}".encode()))
            assert result.status is SendStatus.SEND_OK  # retries went to the other broker
            after[result.message_queue.broker_name] += 1
        assert after == Counter({"broker-b": 60})
        tried_a = [t for t, name in attempts if name == "broker-a" and t > killed_at]
        assert len(tried_a) <= 1, f"dead broker tried {len(tried_a)} times within its isolation window"

        cluster["ns1"].kill()  # one of two name servers down: the producer keeps working
        for i in range(20):
            assert (await producer.send(Message(TOPIC, f"ns-down-{i}".encode()))).status is SendStatus.SEND_OK

        cluster["broker-a"] = start_broker(namesrv=cluster["namesrv"], store_dir=cluster["tmp"] / "broker-a",
                                           name="broker-a")
        back: Counter[str] = Counter()

        async def broker_a_used_again() -> bool:
            result = await producer.send(Message(TOPIC, b"probe"))
            assert result.status is SendStatus.SEND_OK
            back[result.message_queue.broker_name] += 1
            return back["broker-a"] > 0

        await eventually(broker_a_used_again, timeout=30, interval=0.05,
                         message="restarted broker used again after its isolation")
